"""CDAN and CDAN+E (Long, Cao, Wang, Jordan, "Conditional Adversarial Domain Adaptation", NeurIPS 2018).

The discriminator of DANN sees the multilinear map ``T(f, g) = f (x) g`` of the features ``f`` (our last manifold
layer) and the detached softmax predictions ``g`` instead of ``f``; above ``d_f * c = 4096`` the randomized map
``(R_f f) * (R_g g) / sqrt(1024)`` replaces it. CDAN+E weights each row of the domain loss by
``1 + exp(-H(g))``, scaled to mean one per domain (the gradient through the weights is reversed, as in the official
code). Every choice and its source: docs/method.md, "Comparison methods".
"""
from __future__ import annotations

import torch
from torch import nn

from .. import losses
from ..params import Param, _pos_int
from . import register
from .base import Method, StepContext
from .dann import DANN, adversarial_term

PAPER = "Long, Cao, Wang, Jordan, NeurIPS 2018 (code: github.com/thuml/CDAN pytorch/)"


def build_cdan_modules(cfg, feature_dims, num_classes) -> nn.ModuleDict:
    """The discriminator on the multilinear map, and the fixed random matrices when the map is randomized (drawn
    from the run's seed with their own generator: the network's and the discriminator's initialisation are
    unchanged by them)."""
    d_f = feature_dims[-1]
    mods = nn.ModuleDict()
    if losses.use_randomized_map(d_f, num_classes):
        mods["map"] = losses.RandomizedMultilinearMap(d_f, num_classes, cfg["cdan_random_dim"], seed=cfg["seed"])
        in_dim = cfg["cdan_random_dim"]
    else:
        in_dim = d_f * num_classes
    mods["discriminator"] = losses.DomainDiscriminator(in_dim, cfg["dann_hidden"])
    return mods


def cdan_term(ctx: StepContext, entropy: bool) -> torch.Tensor:
    mods = ctx.modules
    n_s = ctx.logits_s.shape[0]
    f = torch.cat([ctx.feats_s[-1], ctx.feats_t[-1]])
    p = torch.softmax(torch.cat([ctx.logits_s, ctx.logits_t]), 1)
    g = p.detach()
    h = mods["map"](f, g) if "map" in mods else losses.multilinear_map(f, g)
    w_s = w_t = None
    if entropy:
        coeff = losses.grl_coefficient(ctx.progress)
        w_s, w_t = losses.entropy_weights(p[:n_s], coeff), losses.entropy_weights(p[n_s:], coeff)
    return adversarial_term(ctx, mods["discriminator"], h[:n_s], h[n_s:], w_s, w_t)


@register
class CDAN(Method):
    name = "cdan"
    label = "CDAN"
    paper = PAPER
    params = {
        "cdan_random_dim": Param(1024, "output width d of CDAN's randomized multilinear map, used when the features' "
                                 "width times the class count exceeds 4096", **_pos_int(),
                                 source="CDAN, NeurIPS 2018, 'Multilinear Conditioning' (d = 1024 above 4096); "
                                        "random_dim = 1024 in the official train_image.py"),
    }
    uses = tuple(DANN.params)
    terms = ("transfer",)
    entropy = False

    def build_modules(self, cfg, feature_dims, num_classes):
        return build_cdan_modules(cfg, feature_dims, num_classes)

    def losses(self, ctx: StepContext):
        return {"transfer": cdan_term(ctx, self.entropy)}

    def weights(self, cfg):
        return {"transfer": cfg["dann_trade_off"]}


@register
class CDANE(CDAN):
    name = "cdan_e"
    label = "CDAN+E"
    paper = PAPER + " (entropy conditioning)"
    params = {}
    uses = CDAN.uses + tuple(CDAN.params)
    entropy = True
