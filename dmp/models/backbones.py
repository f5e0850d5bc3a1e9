"""Backbone registry: ``name -> builder(pretrained, weights_path, in_channels, in_dim) -> (module, out_dim)``.

ResNets come from torchvision with ImageNet weights through torchvision's weights API. Weights are never
silently replaced by random ones: without network access and without the file in torch's cache (or an
explicit ``weights_path``), building fails with a message naming the file and where to put it. Every file a
backbone was loaded from is kept as ``module.weights_file`` (the trainer hashes it into metrics.json), whichever
route it came by; a file in torch's cache under a torchvision name must have the sha256 that name starts with.
"""
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


def load_weights(model: nn.Module, path: Path, what: str, classifier: str | None = None, hint: str = "") -> str:
    """Load the weights file ``path`` into ``model`` (``what`` names it in messages) and return one line saying
    what was loaded and what was left out.

    Accepted forms: a plain state dict, one wrapped under ``state_dict`` / ``model`` / ... (:data:`WRAPPERS`),
    keys with a ``module.`` (DataParallel) or other wrapper prefix (:data:`PREFIXES`), with or without the
    classifier ``classifier.*`` (not used: the backbone ends before it). Anything else is refused with a short
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
    left_out = [k for k in state if classifier and k.startswith(classifier + ".")]
    state = {k: v for k, v in state.items() if k not in left_out}
    own = model.state_dict()
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


def _load_resnet(arch: str, weights_enum, pretrained: bool, weights_path: str | None):
    import torchvision

    model = getattr(torchvision.models, arch)(weights=None)
    path = _weights_file(weights_path) if weights_path else (
        imagenet_file(arch, weights_enum.IMAGENET1K_V1) if pretrained else None)
    out_dim = model.fc.in_features
    model.fc = nn.Identity()
    if path is not None:
        _say(load_weights(model, path, arch, classifier="fc"))
    model.weights_file = path
    return model, out_dim


def _resnet50(pretrained=True, weights_path=None, **_):
    import torchvision
    return _load_resnet("resnet50", torchvision.models.ResNet50_Weights, pretrained, weights_path)


def _resnet101(pretrained=True, weights_path=None, **_):
    import torchvision
    return _load_resnet("resnet101", torchvision.models.ResNet101_Weights, pretrained, weights_path)


class SmallCNN(nn.Sequential):
    """A small CNN for digit-sized images (16x16 to 32x32): three conv-norm-ReLU blocks, global average pool.
    ``norm``: ``batch`` (BatchNorm) or ``group`` (GroupNorm, 8 groups: per-sample statistics, so a model
    trained on the source alone does not normalise target images with source statistics)."""

    def __init__(self, in_channels: int = 3, width: int = 32, norm: str = "batch"):
        layers = []
        for i, out in enumerate((width, 2 * width, 4 * width)):
            layers += [nn.Conv2d(in_channels if i == 0 else width * 2 ** (i - 1), out, 3, padding=1),
                       nn.BatchNorm2d(out) if norm == "batch" else nn.GroupNorm(8, out), nn.ReLU(inplace=True)]
            layers.append(nn.MaxPool2d(2) if i < 2 else nn.AdaptiveAvgPool2d(1))
        super().__init__(*layers, nn.Flatten())
        self.out_dim = 4 * width


def _smallcnn(pretrained=False, weights_path=None, in_channels=3, norm="batch", **_):
    model = SmallCNN(in_channels, norm=norm)
    path = None
    if weights_path:
        path = _weights_file(weights_path)
        _say(load_weights(model, path, f"this CNN ({norm} norm, {in_channels} input channel(s))",
                          hint="`python -m dmp pretrain-demo --recipe demo` makes smallcnn weights, `--recipe digits` "
                               "smallcnn_gn weights for 1-channel images"))
    elif pretrained:
        raise WeightsUnavailableError(
            "smallcnn has no downloadable weights: pre-train them once with `python -m dmp pretrain-demo --out "
            "FILE` (add `--recipe digits` for smallcnn_gn on 1-channel digits) and pass weights_path=FILE (the demo "
            "pipeline and scripts/evidence.py do this), or set pretrained=false for a random initialisation")
    model.weights_file = path
    return model, model.out_dim


def _identity(in_dim=None, **_):
    if in_dim is None:
        raise ValueError("the identity backbone needs the feature dimension (in_dim)")
    return nn.Identity(), in_dim


BACKBONES: dict[str, Callable] = {
    "resnet50": _resnet50,
    "resnet101": _resnet101,
    "smallcnn": _smallcnn,
    "smallcnn_gn": lambda **kw: _smallcnn(norm="group", **kw),
    "identity": _identity,
}


def build_backbone(name: str, pretrained: bool = True, weights_path: str | None = None,
                   in_channels: int = 3, in_dim: int | None = None):
    """Build a registered backbone; returns ``(module, out_dim)``. ``module.weights_file`` (where present) is the
    file its weights were loaded from, ``None`` for a random initialisation."""
    if name not in BACKBONES:
        raise KeyError(f"unknown backbone {name!r}; known: {', '.join(BACKBONES)}")
    return BACKBONES[name](pretrained=pretrained, weights_path=weights_path, in_channels=in_channels,
                           in_dim=in_dim)
