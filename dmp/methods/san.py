"""SAN (Cao, Long, Wang, Jordan, "Partial Transfer Learning with Selective Adversarial Networks", CVPR 2018), as
its official PyTorch code (github.com/thuml/SAN, pytorch/src/train_san.py and loss.py) runs it.

One domain discriminator per source class: discriminator ``k`` sees the features scaled by the (detached) softmax
probability of class ``k`` (instance-level weighting); the reversed gradient reaching the features from it is
scaled by the class weight ``gamma_k`` = the batch's mean softmax of class ``k`` over its max (class-level
weighting), on top of DANN's schedule; the entropy of the predictions is minimised:
``L = L_CE + dann_trade_off * (sum_k L_d(D_k(p_k f)) + san_entropy_weight * H(p))``.
Every choice and its source: docs/method.md, "Comparison methods".
"""
from __future__ import annotations

import torch
from torch import nn

from .. import losses
from ..params import Param, _nonneg
from . import register
from .base import Method, StepContext


@register
class SAN(Method):
    name = "san"
    label = "SAN"
    paper = "Cao, Long, Wang, Jordan, CVPR 2018 (code: github.com/thuml/SAN pytorch/src/train_san.py)"
    params = {
        "san_entropy_weight": Param(0.2, "SAN: weight of the prediction entropy, inside the adversarial trade-off",
                                    **_nonneg(),
                                    source="SAN official train_san.py: entropy_trade_off = 0.2 (Office), "
                                           "total = trade_off * (transfer + entropy_trade_off * entropy) + CE"),
    }
    uses = ("dann_trade_off", "dann_hidden")
    terms = ("transfer", "entropy")

    def build_modules(self, cfg, feature_dims, num_classes):
        return nn.ModuleDict({"discriminators": nn.ModuleList(
            losses.DomainDiscriminator(feature_dims[-1], cfg["dann_hidden"]) for _ in range(num_classes))})

    def losses(self, ctx: StepContext):
        n = ctx.logits_s.shape[0]
        f = torch.cat([ctx.feats_s[-1], ctx.feats_t[-1]])
        p = torch.softmax(torch.cat([ctx.logits_s, ctx.logits_t]), 1)
        g = p.detach()
        gamma = losses.pada_class_weights(g).to(f)  # the batch's mean prediction over its max, as the code's
        coeff = losses.grl_coefficient(ctx.progress)
        gen = losses.step_generator(ctx.cfg["seed"], ctx.iteration, f.device)
        transfer = f.new_zeros(())
        for k, disc in enumerate(ctx.modules["discriminators"]):
            d = disc(losses.grad_reverse(g[:, k:k + 1] * f, coeff * gamma[k]), generator=gen)
            transfer = transfer + losses.domain_adversarial_loss(d[:n], d[n:])
        return {"transfer": transfer, "entropy": losses.entropy_loss(p)}

    def weights(self, cfg):
        t = cfg["dann_trade_off"]
        return {"transfer": t, "entropy": t * cfg["san_entropy_weight"]}
