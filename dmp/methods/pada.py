"""PADA (Cao, Ma, Long, Wang, "Partial Adversarial Domain Adaptation", ECCV 2018).

Class weights ``gamma = mean target softmax over the target set / its max``, refreshed with the loop's periodic
target pass (``mean_prediction``), weight the source cross-entropy and the
source rows of DANN's domain loss:
``L = (1/n_s) sum_i gamma_{y_i} CE_i + dann_trade_off * L_d(gamma_{y_i} on the source rows, 1 on the target rows)``
(``pada_ce=code``: the cross-entropy term as the official code's weighted mean, ``sum_i gamma_{y_i} CE_i / sum_i
gamma_{y_i}``).
The weights stay uniform until the first periodic refresh (iteration ``anchor_period``): the refresh at iteration 0
reads an untrained classifier, and the official code (train_pada.py) keeps ``class_weight`` at ones until its first
refresh, at iteration 500.
Every choice and its source: docs/method.md, "Comparison methods".
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import losses
from ..params import Param, _choice
from . import register
from .base import Needs, StepContext
from .dann import DANN, adversarial_term


@register
class PADA(DANN):
    name = "pada"
    label = "PADA"
    paper = "Cao, Ma, Long, Wang, ECCV 2018 (code: github.com/thuml/PADA pytorch/src/train_pada.py)"
    params = {
        "pada_ce": Param("paper", "PADA: the class-weighted source cross-entropy; paper = (1/n_s) sum_i gamma_{y_i} "
                         "CE_i (the paper's objective), code = sum_i gamma_{y_i} CE_i / sum_i gamma_{y_i} (the "
                         "official code's weighted CrossEntropyLoss, whose scale does not shrink with gamma)",
                         **_choice("paper", "code"),
                         source="PADA, ECCV 2018, its objective (paper); thuml/PADA train_pada.py: "
                                "nn.CrossEntropyLoss(weight=class_weight) (code)"),
    }
    uses = tuple(DANN.params)
    terms = ("ce_weighted", "transfer")
    mean_prediction = True

    def needs(self, cfg):
        return Needs("loss", anchors=False, mean_prediction=True)

    @staticmethod
    def class_weights(ctx: StepContext) -> torch.Tensor:
        if ctx.mean_prediction is None or ctx.iteration < ctx.sched["anchor_period"]:
            return torch.ones(ctx.num_classes, device=ctx.device)
        return losses.pada_class_weights(ctx.mean_prediction).to(ctx.device)

    def losses(self, ctx: StepContext):
        gamma = self.class_weights(ctx)
        w_s = gamma[ctx.y_s]
        ce_i = F.cross_entropy(ctx.logits_s, ctx.y_s, reduction="none") * w_s
        ce = ce_i.mean() if ctx.cfg["pada_ce"] == "paper" else ce_i.sum() / w_s.sum().clamp_min(1e-12)
        return {"ce_weighted": ce,
                "transfer": adversarial_term(ctx, ctx.modules["discriminator"], ctx.feats_s[-1], ctx.feats_t[-1],
                                             weight_s=w_s)}

    def total(self, ce, terms, ctx):
        # PADA's objective replaces the plain source cross-entropy (still logged as ``ce``) by the weighted one
        return terms["ce_weighted"] + ctx.cfg["dann_trade_off"] * terms["transfer"]
