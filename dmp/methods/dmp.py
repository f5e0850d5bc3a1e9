"""DMP (the paper's method) and its variants: ``dmp``, the ablations ``dmp_no_al`` (no alignment L_AL) and
``dmp_no_ds`` (no discriminative terms L_DS), and ``dmp_ent`` (DMP + target entropy, the partial "DMP+ent").

Objective (Eq. Objective): ``L = L_CE + lambda1 * L_DS + lambda2 * L_AL`` (``+ entropy_weight * L_ent`` for
``dmp_ent``), with ``L_DS = sum_l (L_inter^l + L_intra^l)`` and ``L_AL = sum_l L_align^l`` over the manifold
layers ``l``. Its hyper-parameters (lambda1, lambda2, k, metric, ...) are the global keys of :data:`dmp.config.PARAMS`
(the paper's presets set them per dataset).
"""
from __future__ import annotations

from .. import losses, manifolds, weighting
from . import get, register
from .base import ConfigError, Method, Needs, StepContext

TERMS = ("inter", "intra", "align", "entropy")


def dmp_losses(cfg, it, feats_s, y_s, feats_t, p_t, anchors, weights, device, sched):
    """The DMP terms of one iteration of DMP variant ``cfg["method"]``; returns a dict of (unweighted) scalar
    tensors.

    The class weights ``w`` of Eq. ClassWeight (``1/c`` vanilla, ``pi`` partial; scaled by ``weight_norm``)
    enter Eq. WeightedIntraLoss in both settings, as Algorithm DMP computes them in both, and the source rows of
    Eq. WeightedAlignLoss only in the partial setting (in the vanilla setting the source manifold is the whole
    source domain; a uniform row scale would only shift the Log-Euclidean distance). The variant's
    ``discriminative``, ``align`` and ``entropy`` switch its terms on and off (a term switched off is 0)."""
    variant = get(cfg["method"])
    zero = feats_s[0].new_zeros(())  # a term switched off: a constant (no operation in the backward)
    out = {"inter": zero, "intra": zero, "align": zero, "entropy": zero}
    w_intra = weighting.normalise_weights(weights, cfg["weight_norm"]).to(device)
    w = w_intra if cfg["setting"] == "partial" else None
    # Each term gets the lists of all the manifold layers in one call (the sum over the layers of Eq. Objective):
    # where matrices are batched (a GPU), the layers and domains are one batch of each operation.
    hs, ht = list(feats_s), list(feats_t)
    if variant.discriminative and anchors.ready:
        class_means, means = anchors.on(device)
        if it >= sched["inter_start_iteration"]:
            out["inter"] = losses.inter_class_loss(hs, y_s, means, p_t.shape[1], absent=cfg["inter_absent"])
        if it >= sched["intra_start_iteration"]:
            out["intra"] = losses.intra_class_loss(ht, p_t, class_means, k=cfg["k"], class_weights=w_intra,
                                                   grad_p=cfg["intra_grad_p"])
    if variant.align:
        hs = hs if w is None else weighting.weight_source_features(hs, y_s, w)
        out["align"] = manifolds.alignment_distance(cfg["metric"], hs, ht, dim=cfg["grassmann_dim"],
                                                    eps=cfg["le_eps"])
    if variant.entropy:
        out["entropy"] = losses.entropy_loss(p_t)
    return out


@register
class DMP(Method):
    name = "dmp"
    label = "DMP"
    comparison = False
    paper = "Luo, Ren, Dai, Yan, Unsupervised Domain Adaptation via Discriminative Manifold Propagation, TPAMI"
    terms = TERMS
    anchors = True
    discriminative, align, entropy = True, True, False  # the terms of this variant (dmp_losses)
    compilable = True  # its terms follow the iteration through the start switches only

    def needs(self, cfg):
        # Every variant keeps the anchor pass (dmp_no_ds too: its partial alignment weights come from the same
        # target pass), so the variants share one schedule.
        return Needs("loss", anchors=True, mean_prediction=cfg["setting"] == "partial")

    def losses(self, ctx: StepContext):
        return dmp_losses(ctx.cfg, ctx.iteration, ctx.feats_s, ctx.y_s, ctx.feats_t, ctx.p_t, ctx.anchors,
                          ctx.class_weights, ctx.device, ctx.sched)

    def total(self, ce, terms, ctx):
        cfg = ctx.cfg  # Eq. Objective, summed in this order (a deterministic run's numbers depend on it)
        loss = ce + cfg["lambda1"] * (terms["inter"] + terms["intra"]) + cfg["lambda2"] * terms["align"]
        if not self.entropy:  # (+ w * 0: no operation to launch)
            return loss
        return loss + cfg["entropy_weight"] * terms["entropy"]


@register
class DMPNoAL(DMP):
    name = "dmp_no_al"
    label = "DMP (No AL)"
    paper = DMP.paper + " (ablation: no alignment loss L_AL)"
    align = False


@register
class DMPNoDS(DMP):
    name = "dmp_no_ds"
    label = "DMP (No DS)"
    paper = DMP.paper + " (ablation: no discriminative structure loss L_DS)"
    discriminative = False


@register
class DMPEnt(DMP):
    name = "dmp_ent"
    label = "DMP+ent"
    paper = DMP.paper + " (partial setting: DMP + the target entropy)"
    entropy = True

    def check(self, cfg):
        if cfg["entropy_weight"] == 0:
            raise ConfigError("config key 'entropy_weight' must be > 0 for method dmp_ent")
