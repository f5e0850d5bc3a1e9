"""SAFN (Xu, Li, Yang, Lin, ICCV 2019): ``L = L_CE + afn_weight * (L_safn(h_s) + L_safn(h_t))`` with
``L_safn(h) = mean_i (||h_i|| - (||h_i||.detach() + delta_r))^2``, delta_r = 1, weight 0.05, on the features
that enter the classifier (our last manifold layer): each step enlarges every sample's norm by about delta_r.
No entropy term (the paper's "SAFN" rows, not "SAFN+ENT"). Every choice and its source: docs/method.md,
"Comparison methods".
"""
from __future__ import annotations

from .. import losses
from ..params import Param, _nonneg
from . import register
from .base import Method, StepContext
from .hafn import PAPER


@register
class SAFN(Method):
    name = "safn"
    label = "SAFN"
    footnote = ("closest documented form: no dropout in the shared manifold layers, and their Tanh bounds the norms "
                "SAFN enlarges at 22.6 (docs/method.md, Comparison methods).")
    paper = PAPER
    params = {
        "safn_delta_r": Param(1.0, "SAFN's norm step delta_r", **_nonneg(),
                              source="AFN, ICCV 2019, Sec. 'Stepwise Adaptive Feature Norm' (delta_r = 1.0); "
                                     "radius + 1.0 in the official vanilla/Office31/SAFN train.py"),
    }
    uses = ("afn_weight",)
    terms = ("norm",)

    def losses(self, ctx: StepContext):
        dr = ctx.cfg["safn_delta_r"]
        return {"norm": losses.safn_loss(ctx.feats_s[-1], dr) + losses.safn_loss(ctx.feats_t[-1], dr)}

    def weights(self, cfg):
        return {"norm": cfg["afn_weight"]}
