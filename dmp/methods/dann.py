"""DANN (Ganin & Lempitsky, "Unsupervised Domain Adaptation by Backpropagation", ICML 2015; Ganin et al.,
"Domain-Adversarial Training of Neural Networks", JMLR 2016).

Objective: ``L = L_CE + dann_trade_off * L_d(D(R(f_s)), D(R(f_t)))`` with ``f`` the features that enter the
classifier (our last manifold layer), ``D`` the domain discriminator (x -> 1024 -> 1024 -> 1, ReLU, dropout 0.5),
``R`` the gradient reversal layer whose coefficient follows ``2 / (1 + exp(-10 p)) - 1`` over the training
progress ``p``, and ``L_d`` the discriminator's binary cross-entropy (source = 1, target = 0). Every choice and its
source: docs/method.md, "Comparison methods".
"""
from __future__ import annotations

import torch
from torch import nn

from .. import losses
from ..params import MAX_WIDTH, Param, _nonneg, _pos_int
from . import register
from .base import Method, StepContext

PAPER = "Ganin & Lempitsky, ICML 2015; Ganin et al., JMLR 2016 (code: DANN() in github.com/thuml/CDAN pytorch/loss.py)"


def adversarial_term(ctx: StepContext, discriminator: nn.Module, h_s: torch.Tensor, h_t: torch.Tensor,
                     weight_s=None, weight_t=None) -> torch.Tensor:
    """The domain loss of one step: the source and target rows go through the discriminator in one call (as the
    official code concatenates them), behind the gradient reversal layer at this step's coefficient; the
    discriminator's dropout masks depend only on (seed, iteration)."""
    coeff = losses.grl_coefficient(ctx.progress)
    gen = losses.step_generator(ctx.cfg["seed"], ctx.iteration, h_s.device)  # dropout masks: same after a resume
    d = discriminator(losses.grad_reverse(torch.cat([h_s, h_t]), coeff), generator=gen)
    return losses.domain_adversarial_loss(d[:h_s.shape[0]], d[h_s.shape[0]:], weight_s, weight_t)


@register
class DANN(Method):
    name = "dann"
    label = "DANN"
    paper = PAPER
    params = {
        "dann_trade_off": Param(1.0, "weight of the domain-adversarial term in the objective (DANN, CDAN, CDAN+E, "
                                "BSP, PADA, SAN, ETN)", **_nonneg(),
                                source="official code of CDAN, PADA and BSP: trade_off = 1.0 (the reversal "
                                       "coefficient 2/(1+exp(-10p))-1 scales the reversed gradient)"),
        "dann_hidden": Param(1024, "width of the two hidden layers of the domain discriminators (every adversarial "
                             "comparison method)", **_pos_int(most=MAX_WIDTH),
                             source="DANN, JMLR 2016, the Office experiments' domain classifier x -> 1024 -> 1024 "
                                    "-> 1; AdversarialNetwork(in, 1024) in the CDAN/PADA/BSP code"),
    }
    terms = ("transfer",)

    def build_modules(self, cfg, feature_dims, num_classes):
        return nn.ModuleDict({"discriminator": losses.DomainDiscriminator(feature_dims[-1], cfg["dann_hidden"])})

    def losses(self, ctx: StepContext):
        return {"transfer": adversarial_term(ctx, ctx.modules["discriminator"], ctx.feats_s[-1], ctx.feats_t[-1])}

    def weights(self, cfg):
        return {"transfer": cfg["dann_trade_off"]}
