"""Source-only training: the cross-entropy on the labelled source batches, nothing else (the paper's "ResNet" rows).

``source_only_bn`` also forwards each target batch, without any loss, so that BatchNorm's running statistics blend
both domains as every adaptation method's do (its weights are those of ``source_only``; only the statistics the
evaluation normalises with differ): it separates what BatchNorm alone does from what a method's loss does.
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
