"""BSP (Chen, Wang, Long, Wang, "Transferability vs. Discriminability: Batch Spectral Penalization for Adversarial
Domain Adaptation", ICML 2019) on DANN and on CDAN.

``L = L_(DANN or CDAN+E) + bsp_weight * sum_{i <= k} (sigma_{s,i}^2 + sigma_{t,i}^2)`` over the singular values of
the source and target feature matrices of the batch (our last manifold layer), k = 1, weight 1e-4. The official
BSP+CDAN script runs CDAN with entropy conditioning (its ``CDAN(..., entropy, ...)`` call), so ``bsp_cdan`` is
BSP on CDAN+E. Every choice and its source: docs/method.md, "Comparison methods".
"""
from __future__ import annotations

from .. import losses
from ..params import Param, _nonneg, _pos_int
from . import register
from .base import StepContext
from .cdan import CDANE
from .dann import DANN

PAPER = "Chen, Wang, Long, Wang, ICML 2019 (code: github.com/thuml/Batch-Spectral-Penalization)"


class _BSP:
    """Adds the spectral penalty to a base method's terms."""

    def losses(self, ctx: StepContext):
        out = super().losses(ctx)
        out["bsp"] = losses.bsp_loss(ctx.feats_s[-1], ctx.feats_t[-1], k=ctx.cfg["bsp_k"])
        return out

    def weights(self, cfg):
        return {**super().weights(cfg), "bsp": cfg["bsp_weight"]}


@register
class BSPDANN(_BSP, DANN):
    name = "bsp_dann"
    label = "BSP+DANN"
    paper = PAPER
    params = {
        "bsp_weight": Param(1e-4, "weight of BSP's spectral penalty (BSP+DANN, BSP+CDAN)", **_nonneg(),
                            source="BSP, ICML 2019, Sec. 'Batch Spectral Penalization' (beta = 1e-4); "
                                   "sigma_loss = 0.0001 * sigma in the official BSP+DANN.py / BSP+CDAN.py"),
        "bsp_k": Param(1, "how many of the largest singular values BSP penalises (BSP+DANN, BSP+CDAN)", **_pos_int(),
                       source="BSP, ICML 2019: k = 1 (s_s[0] and s_t[0] in the official code)"),
    }
    uses = tuple(DANN.params)
    terms = DANN.terms + ("bsp",)


@register
class BSPCDAN(_BSP, CDANE):
    name = "bsp_cdan"
    label = "BSP+CDAN"
    paper = PAPER + " (on CDAN with entropy conditioning, as the official BSP+CDAN.py)"
    params = {}
    uses = CDANE.uses + tuple(BSPDANN.params)
    terms = CDANE.terms + ("bsp",)
