"""ETN (Cao, You, Long, Wang, Yang, "Learning to Transfer Examples for Partial Domain Adaptation", CVPR 2019), as
its official code (github.com/thuml/ETN, main.py, net.py, officehome-train-config.yaml) runs it.

An auxiliary label predictor ``G~`` (DANN's discriminator body with ``c`` outputs and the leaky softmax) learns on
the detached features: one-vs-rest cross-entropy on the source labels, and source vs target through the sum of its
leaky probabilities ``D~``. The transferability weights ``w = 1 - D~(x_s)`` (normalised to mean one, constant)
weight the source cross-entropy and the source rows of DANN's game; the target entropy is minimised:
``L = mean_i w_i CE_i + 2 * dann_trade_off * L_d(w) + 0.2 * H(p_t) + 10 * L_D~ + 1 * L_CE~``
(the factor 2: the official code sums the two domains' mean losses where ``L_d`` averages them).
Every choice and its source: docs/method.md, "Comparison methods".
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .. import losses
from ..params import Param, _nonneg
from . import register
from .base import Method, StepContext
from .dann import adversarial_term

SOURCE = "ETN official officehome-train-config.yaml (train: "


@register
class ETN(Method):
    name = "etn"
    label = "ETN"
    paper = "Cao, You, Long, Wang, Yang, CVPR 2019 (code: github.com/thuml/ETN main.py)"
    params = {
        "etn_entropy_weight": Param(0.2, "ETN: weight of the target entropy", **_nonneg(),
                                    source=SOURCE + "entropy_tradeoff: 0.2)"),
        "etn_aux_domain_weight": Param(10.0, "ETN: weight of the auxiliary predictor's domain loss", **_nonneg(),
                                       source=SOURCE + "adv_loss_aug_tradeoff: 10.0)"),
        "etn_aux_ce_weight": Param(1.0, "ETN: weight of the auxiliary predictor's one-vs-rest label loss",
                                   **_nonneg(), source=SOURCE + "ce_aug_tradeoff: 1.0)"),
    }
    uses = ("dann_trade_off", "dann_hidden")
    terms = ("ce_weighted", "transfer", "entropy", "aux_domain", "aux_ce")

    def build_modules(self, cfg, feature_dims, num_classes):
        d, hidden = feature_dims[-1], cfg["dann_hidden"]
        return nn.ModuleDict({"discriminator": losses.DomainDiscriminator(d, hidden),
                              "auxiliary": losses.DomainDiscriminator(d, hidden, out_dim=num_classes)})

    def losses(self, ctx: StepContext):
        h_s, h_t = ctx.feats_s[-1], ctx.feats_t[-1]
        n, c = h_s.shape[0], ctx.num_classes
        gen = losses.step_generator(ctx.cfg["seed"], ctx.iteration, h_s.device, stream=2)
        probs, domain = losses.leaky_softmax(ctx.modules["auxiliary"](torch.cat([h_s, h_t]).detach(), generator=gen), c)
        w = losses.etn_weights(domain[:n])
        onehot = F.one_hot(ctx.y_s, c).to(probs)
        return {
            "ce_weighted": (w * F.cross_entropy(ctx.logits_s, ctx.y_s, reduction="none")).mean(),
            "transfer": adversarial_term(ctx, ctx.modules["discriminator"], h_s, h_t, weight_s=w),
            "entropy": losses.entropy_loss(ctx.p_t),
            "aux_domain": F.binary_cross_entropy(domain[:n], torch.ones_like(domain[:n]))
            + F.binary_cross_entropy(domain[n:], torch.zeros_like(domain[n:])),
            "aux_ce": F.binary_cross_entropy(probs[:n], onehot, reduction="sum") / n,
        }

    def weights(self, cfg):
        return {"transfer": 2.0 * cfg["dann_trade_off"], "entropy": cfg["etn_entropy_weight"],
                "aux_domain": cfg["etn_aux_domain_weight"], "aux_ce": cfg["etn_aux_ce_weight"]}

    def total(self, ce, terms, ctx):
        # ETN's objective replaces the plain source cross-entropy (still logged as ``ce``) by the weighted one
        w = self.weights(ctx.cfg)
        loss = terms["ce_weighted"]
        for t in ("transfer", "entropy", "aux_domain", "aux_ce"):
            loss = loss + w[t] * terms[t]
        return loss
