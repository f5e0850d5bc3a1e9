"""Class and instance weights of the partial-DA comparison methods: PADA (Cao, Ma, Long, Wang, ECCV 2018) and IWAN
(Zhang, Ding, Li, Ogunbona, CVPR 2018)."""
from __future__ import annotations

import torch


def pada_class_weights(probs: torch.Tensor) -> torch.Tensor:
    r"""PADA's class weights (ECCV 2018, Sec. "Partial Adversarial Domain Adaptation": the class weight and its
    normalisation by the maximum): the average target prediction over the target set, normalised by its largest
    entry,

    .. math:: \gamma = \frac{1}{n_t} \sum_{j=1}^{n_t} \hat y^t_j, \qquad \gamma \leftarrow \gamma / \max(\gamma),

    so the most predicted class weighs 1 and classes absent from the target (outlier classes) get small weights.
    SAN's class-level weights are the same formula on each batch's predictions.

    Args:
        probs: ``[n_t, c]`` softmax predictions over the target set, or their mean ``[c]``.
    Returns:
        ``[c]`` float32 weights in ``[0, 1]`` with maximum 1 (uniform ones when every prediction is zero).
    """
    g = probs.detach().double()
    g = g.mean(0) if g.dim() == 2 else g
    g = g.clamp_min(0)
    top = g.max()
    usable = torch.isfinite(top) & (top > 0)  # no host read: SAN calls this at every step
    return torch.where(usable, g / top.clamp_min(1e-300), torch.ones_like(g)).float()


def iwan_weights(d_s: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    r"""IWAN's importance weights of the source rows (Zhang, Ding, Li, Ogunbona, CVPR 2018, Sec. "Importance
    Weighted Adversarial Nets": :math:`w(z) = 1 - D^*(z)`, normalised by its mean over the source; the ``eps`` of
    Transfer-Learning-Library's ``ImportanceWeightModule``):

    .. math:: \tilde w_i = \frac{1 - \sigma(d_i)}{\frac{1}{n_s} \sum_k (1 - \sigma(d_k)) + \epsilon},

    ``d`` the logits of the auxiliary discriminator :math:`D` (source = 1), so a source sample :math:`D` finds
    unlike the target (an outlier class) weighs little. Constants in the loss (detached).

    Args:
        d_s: ``[n_s]`` or ``[n_s, 1]`` logits of the source rows.
    Returns:
        ``[n_s]`` weights with mean (about) one.
    """
    w = 1.0 - torch.sigmoid(d_s.detach().reshape(-1))
    return w / (w.mean() + eps)
