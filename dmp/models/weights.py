"""Loading a backbone's weights: a file in any common checkpoint form (:func:`load_weights`), torchvision's ImageNet
files in torch's cache (:func:`imagenet_file`), and the one-line :class:`WeightsUnavailableError` when a file is
missing or does not fit. Weights are never silently replaced by random ones."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable

import torch
from torch import nn


class WeightsUnavailableError(RuntimeError):
    """Pretrained weights were requested but cannot be loaded."""


def _weights_file(weights_path) -> Path:
    """``weights_path`` as a Path, or the one-line error when there is no such file."""
    path = Path(weights_path)
    if path.is_dir():
        raise WeightsUnavailableError(f"weights_path {path} is a folder, not a weights file")
    if not path.is_file():
        raise WeightsUnavailableError(f"weights_path {path} does not exist")
    return path


# Wrappers of a state dict in common checkpoint files, and key prefixes of wrapped models (DataParallel /
# DistributedDataParallel ``module.``, self-supervised ``backbone.`` / ``encoder.``).
WRAPPERS = ("state_dict", "model", "model_state_dict", "net", "backbone")
PREFIXES = ("module.", "backbone.", "encoder.", "model.")


def _first(keys, n: int = 3) -> str:
    keys = sorted(keys)
    return ", ".join(keys[:n]) + (f" and {len(keys) - n} more" if len(keys) > n else "")


def load_weights(model: nn.Module, path: Path, what: str, classifier: str | None = None, hint: str = "",
                 convert: Callable[[dict], dict] | None = None) -> str:
    """Load the weights file ``path`` into ``model`` (``what`` names it in messages) and return one line saying
    what was loaded and what was left out.

    Accepted forms: a plain state dict, one wrapped under ``state_dict`` / ``model`` / ... (:data:`WRAPPERS`),
    keys with a ``module.`` (DataParallel) or other wrapper prefix (:data:`PREFIXES`), with or without the
    classifier ``classifier.*`` (not used: the backbone ends before it); ``convert`` renames the keys of another
    implementation of the same network (applied after unwrapping). Anything else is refused with a short
    error naming the first missing / unexpected / mis-shaped keys; the model is left untouched."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a file that is no checkpoint
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise WeightsUnavailableError(f"weights file {path} is not a PyTorch checkpoint that can be loaded safely "
                                      f"({exc.__class__.__name__}: {first})") from None
    for key in WRAPPERS:
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
            break
    if not isinstance(state, dict) or not state or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise WeightsUnavailableError(f"weights file {path} holds no state dict of tensors (also looked under "
                                      f"{', '.join(WRAPPERS)})")
    state = {str(k): v for k, v in state.items()}
    for prefix in PREFIXES:
        if all(k.startswith(prefix) for k in state):
            state = {k[len(prefix):]: v for k, v in state.items()}
    if convert is not None:
        state = convert(state)
    own = model.state_dict()
    left_out = [k for k in state if classifier and k.startswith(classifier + ".") and k not in own]
    state = {k: v for k, v in state.items() if k not in left_out}
    missing, unexpected = own.keys() - state.keys(), state.keys() - own.keys()
    shapes = [f"{k} {tuple(state[k].shape)} (needs {tuple(own[k].shape)})" for k in sorted(own.keys() & state.keys())
              if state[k].shape != own[k].shape]
    if missing or unexpected or shapes:
        parts = [f"missing {_first(missing)}" if missing else "", f"unexpected {_first(unexpected)}" if unexpected
                 else "", f"wrong shape {_first(shapes, 2)}" if shapes else ""]
        raise WeightsUnavailableError(f"weights file {path} does not fit {what}: "
                                      + "; ".join(p for p in parts if p) + (f" ({hint})" if hint else ""))
    model.load_state_dict(state)
    return (f"loaded {len(state)} tensors from {path} into {what}"
            + (f"; left out {', '.join(left_out)} (classifier, not used)" if left_out else ""))


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def imagenet_file(arch: str, weights) -> Path:
    """The torchvision ImageNet weights file of ``weights`` in torch's cache (downloaded there when missing),
    checked against the hash prefix in its name (torchvision names are ``<arch>-<first sha256 digits>.pth``)."""
    file_name = os.path.basename(weights.url)
    cache = Path(torch.hub.get_dir()) / "checkpoints"
    path = cache / file_name
    if not path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        m = torch.hub.HASH_REGEX.search(file_name)
        try:
            torch.hub.download_url_to_file(weights.url, str(path), m.group(1) if m else None, progress=True)
        except Exception as exc:  # network errors come in many types (URLError, OSError, ...)
            reason = (str(exc).strip().splitlines() or [""])[0][:200]
            raise WeightsUnavailableError(
                f"ImageNet weights for {arch} missing: put {file_name} (from {weights.url}) into {cache}/ (set "
                f"TORCH_HOME to move that folder) or pass weights_path=/path/to/{file_name}; the download failed "
                f"({exc.__class__.__name__}: {reason}). Use pretrained=false only if you really want random "
                f"initialisation.") from None
    m = torch.hub.HASH_REGEX.search(file_name)
    if m:
        from ..io import sha256_file
        digest = sha256_file(path)
        if not digest.startswith(m.group(1)):
            raise WeightsUnavailableError(
                f"{path} is not torchvision's {file_name}: its sha256 starts with {digest[:len(m.group(1))]}, the "
                f"name promises {m.group(1)}; remove it (it is downloaded again) or pass your own file as "
                f"weights_path=FILE")
    return path
