"""Backbone registry: ``name -> builder(pretrained, weights_path, in_channels, in_dim) -> (module, out_dim)``.

ResNets come from torchvision with ImageNet weights through torchvision's weights API. Weights are never
silently replaced by random ones: without network access and without the file in torch's cache (or an
explicit ``weights_path``), building fails with a message naming the file and where to put it.
"""
from __future__ import annotations

import os
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


def _load_resnet(arch: str, weights_enum, pretrained: bool, weights_path: str | None):
    import torchvision

    model = getattr(torchvision.models, arch)(weights=None)
    if weights_path:
        state = torch.load(_weights_file(weights_path), map_location="cpu", weights_only=True)
        model.load_state_dict(state.get("state_dict", state) if isinstance(state, dict) else state)
    elif pretrained:
        weights = weights_enum.IMAGENET1K_V1
        file_name = os.path.basename(weights.url)
        cache = Path(torch.hub.get_dir()) / "checkpoints"
        try:
            model.load_state_dict(weights.get_state_dict(progress=True, check_hash=True))
        except Exception as exc:  # network errors come in many types (URLError, OSError, ...)
            raise WeightsUnavailableError(
                f"cannot load ImageNet weights for {arch}: {exc.__class__.__name__}: {exc}\n"
                f"torchvision expects the file {file_name} (from {weights.url}) in {cache}/ "
                f"(set TORCH_HOME to move that folder), or pass weights_path=/path/to/{file_name}. "
                f"Use pretrained=false only if you really want random initialisation.") from exc
    out_dim = model.fc.in_features
    model.fc = nn.Identity()
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
    if weights_path:
        state = torch.load(_weights_file(weights_path), map_location="cpu", weights_only=True)
        try:
            model.load_state_dict(state)
        except RuntimeError as exc:  # another CNN's weights: wrong norm layers or input channels
            first = str(exc).strip().splitlines()
            raise WeightsUnavailableError(
                f"weights_path {weights_path} does not fit this CNN ({norm} norm, {in_channels} input channel(s)): "
                f"{first[1].strip() if len(first) > 1 else first[0]} (`python -m dmp pretrain-demo --recipe demo` "
                "makes smallcnn weights, `--recipe digits` smallcnn_gn weights for 1-channel images)") from None
    elif pretrained:
        raise WeightsUnavailableError(
            "smallcnn has no downloadable weights: pre-train them once with `python -m dmp pretrain-demo --out "
            "FILE` (add `--recipe digits` for smallcnn_gn on 1-channel digits) and pass weights_path=FILE (the demo "
            "pipeline and scripts/evidence.py do this), or set pretrained=false for a random initialisation")
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
    """Build a registered backbone; returns ``(module, out_dim)``."""
    if name not in BACKBONES:
        raise KeyError(f"unknown backbone {name!r}; known: {', '.join(BACKBONES)}")
    return BACKBONES[name](pretrained=pretrained, weights_path=weights_path, in_channels=in_channels,
                           in_dim=in_dim)
