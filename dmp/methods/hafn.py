"""HAFN (Xu, Li, Yang, Lin, "Larger Norm More Transferable: An Adaptive Feature Norm Approach for Unsupervised
Domain Adaptation", ICCV 2019): ``L = L_CE + afn_weight * (L_hafn(h_s) + L_hafn(h_t))`` with
``L_hafn(h) = (mean_i ||h_i|| - R)^2``, R = 25, weight 0.05, on the features that enter the classifier (our last
manifold layer). Every choice and its source: docs/method.md, "Comparison methods".
"""
from __future__ import annotations

from .. import losses
from ..params import MAX_WEIGHT, Param, _nonneg
from . import register
from .base import Method, StepContext

PAPER = "Xu, Li, Yang, Lin, ICCV 2019 (code: github.com/jihanyang/AFN)"


@register
class HAFN(Method):
    name = "hafn"
    label = "HAFN"
    footnote = ("closest documented form, not faithful: our last manifold layer is a 512-d Tanh, whose feature norm "
                "cannot reach R = 25 (at most 22.6), and the official 60 source-only pre-training epochs are not run "
                "(docs/method.md, Comparison methods).")
    paper = PAPER
    params = {
        "afn_weight": Param(0.05, "weight lambda of the feature-norm term of HAFN and SAFN", **_nonneg(),
                            source="AFN, ICCV 2019: lambda = 0.05; weight_L2norm = 0.05 in the official train.py "
                                   "of every task"),
        "hafn_radius": Param(25.0, "HAFN's target feature norm R", **_nonneg(most=MAX_WEIGHT),
                             source="AFN, ICCV 2019, Sec. 'Hard Adaptive Feature Norm' (R = 25); radius = 25.0 in "
                                    "the official vanilla/Office31/HAFN train.py"),
    }
    terms = ("norm",)

    def losses(self, ctx: StepContext):
        r = ctx.cfg["hafn_radius"]
        return {"norm": losses.hafn_loss(ctx.feats_s[-1], r) + losses.hafn_loss(ctx.feats_t[-1], r)}

    def weights(self, cfg):
        return {"norm": cfg["afn_weight"]}
