"""IWAN (Zhang, Ding, Li, Ogunbona, "Importance Weighted Adversarial Nets for Partial Domain Adaptation", CVPR
2018), in the shared-network form of Transfer-Learning-Library's ``examples/.../partial_domain_adaptation/iwan.py``.

An auxiliary discriminator ``D`` learns source vs target on the detached features (it never trains the network);
its output gives each source row the importance weight ``w = 1 - sigmoid(D(f_s))`` normalised to mean one; a second
discriminator ``D_0`` plays DANN's game with the source rows weighted by ``w``; the target entropy is minimised:
``L = L_CE + 1.5 * iwan_trade_off * L_D + iwan_trade_off * L_D0(w) + iwan_entropy_weight * H(p_t)``.
The paper trains an ADDA-style pair of untied feature extractors (the source one pre-trained and fixed); that does
not run here, so this row is the closest documented form (docs/method.md, "Comparison methods").
"""
from __future__ import annotations

import torch
from torch import nn

from .. import losses
from ..params import MAX_WEIGHT, Param, _nonneg
from . import register
from .base import Method, StepContext
from .dann import adversarial_term


@register
class IWAN(Method):
    name = "iwan"
    label = "IWAN"
    footnote = ("closest documented form, not faithful: one shared network (Transfer-Learning-Library's form), not "
                "the paper's pair of untied extractors (docs/method.md, Comparison methods).")
    paper = ("Zhang, Ding, Li, Ogunbona, CVPR 2018 (shared-network form: Transfer-Learning-Library "
             "examples/domain_adaptation/partial_domain_adaptation/iwan.py)")
    params = {
        "iwan_trade_off": Param(3.0, "IWAN: weight of the weighted adversarial term (1.5 times it weighs the "
                                "auxiliary discriminator's own loss)", **_nonneg(most=MAX_WEIGHT),
                                source="Transfer-Learning-Library iwan.py: --trade-off 3, loss = cls + 1.5 * trade_off"
                                       " * adv_D + trade_off * adv_D0 + gamma * entropy"),
        "iwan_entropy_weight": Param(0.1, "IWAN: weight of the target entropy", **_nonneg(),
                                     source="IWAN, CVPR 2018 (entropy minimisation on the target); --gamma 0.1 in "
                                            "Transfer-Learning-Library iwan.py"),
    }
    uses = ("dann_hidden",)
    terms = ("weight_disc", "transfer", "entropy")

    def build_modules(self, cfg, feature_dims, num_classes):
        d = feature_dims[-1]
        return nn.ModuleDict({"discriminator": losses.DomainDiscriminator(d, cfg["dann_hidden"]),
                              "weight_discriminator": losses.DomainDiscriminator(d, cfg["dann_hidden"])})

    def losses(self, ctx: StepContext):
        h_s, h_t = ctx.feats_s[-1], ctx.feats_t[-1]
        n = h_s.shape[0]
        gen = losses.step_generator(ctx.cfg["seed"], ctx.iteration, h_s.device, stream=1)
        d = ctx.modules["weight_discriminator"](torch.cat([h_s, h_t]).detach(), generator=gen)
        w_s = losses.iwan_weights(d[:n])
        return {"weight_disc": losses.domain_adversarial_loss(d[:n], d[n:]),
                "transfer": adversarial_term(ctx, ctx.modules["discriminator"], h_s, h_t, weight_s=w_s),
                "entropy": losses.entropy_loss(ctx.p_t)}

    def weights(self, cfg):
        t = cfg["iwan_trade_off"]
        return {"weight_disc": 1.5 * t, "transfer": t, "entropy": cfg["iwan_entropy_weight"]}
