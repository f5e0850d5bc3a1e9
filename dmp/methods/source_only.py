"""Source-only training: the cross-entropy on the labelled source batches, nothing else (the paper's "ResNet" rows).

``source_only_bn`` also forwards each target batch, without any loss, so that BatchNorm's running statistics blend
both domains as every adaptation method's do (its weights are those of ``source_only``; only the statistics the
evaluation normalises with differ): it separates what BatchNorm alone does from what a method's loss does.

``frozen_probe`` is source-only with nothing of the backbone fine-tuned (its weights held, its BatchNorm layers on
their ImageNet statistics): a linear-probe-like floor on the same backbone and the same input. The manifold layers
and the classifier learn as in every row, so a fine-tuned row below it lost what the pre-trained backbone knew.
"""
from __future__ import annotations

from . import register
from .base import Method


@register
class SourceOnly(Method):
    name = "source_only"
    label = "Source only"
    comparison = False
    paper = "the paper's ResNet rows (He et al., CVPR 2016): the backbone fine-tuned on the source"
    target = "none"
    compilable = True


@register
class SourceOnlyBN(Method):
    name = "source_only_bn"
    label = "Source only, BN sees target"
    comparison = False
    paper = "ours: source_only whose BatchNorm running statistics also see the target batches"
    target = "bn"
    compilable = True


@register
class FrozenProbe(Method):
    name = "frozen_probe"
    label = "Frozen probe (source only, backbone frozen)"
    comparison = False
    paper = "ours: source_only on the pre-trained backbone as it is (weights held, BatchNorm on its statistics)"
    target = "none"
    compilable = True
    fixed = {"backbone_lr_mult": 0.0, "backbone_bn": "frozen"}
