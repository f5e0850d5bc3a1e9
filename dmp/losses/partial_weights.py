"""Class and instance weights of the partial-DA comparison methods: PADA (Cao, Ma, Long, Wang, ECCV 2018), IWAN
(Zhang, Ding, Li, Ogunbona, CVPR 2018) and ETN (Cao, You, Long, Wang, Yang, CVPR 2019)."""
from __future__ import annotations

import math

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
    return complement_weights(torch.sigmoid(d_s.reshape(-1)), eps)


def complement_weights(p_source: torch.Tensor, eps: float) -> torch.Tensor:
    r"""Detached :math:`(1 - p_i) / (\frac{1}{n}\sum_k (1 - p_k) + \epsilon)` for probabilities ``p`` that a source
    row is source (IWAN's :math:`D^*`, ETN's :math:`\tilde D`)."""
    w = 1.0 - p_source.detach()
    return w / (w.mean() + eps)


def leaky_softmax(z: torch.Tensor, coeff: float) -> tuple[torch.Tensor, torch.Tensor]:
    r"""ETN's leaky softmax (Cao, You, Long, Wang, Yang, CVPR 2019, the auxiliary label predictor; ``TorchLeakySoftmax``
    of the easydl package its official code uses, with ``coeff`` = the number of source classes):

    .. math:: \tilde y_k = \frac{e^{z_k}}{\sum_j e^{z_j} + c}, \qquad \tilde D = \sum_k \tilde y_k \in (0, 1),

    computed as a softmax over ``[z, log c]`` (finite for any logits), with :math:`\tilde D = 1 - c / (\sum_j e^{z_j}
    + c)`, its last entry's complement: the sum of the first ``c`` entries can exceed 1 by a rounding, which a binary
    cross-entropy refuses. Returns ``(probs [n, c], domain [n])``; :math:`\tilde D` is the probability that the row is
    from the source."""
    extra = torch.full_like(z[:, :1], math.log(coeff))
    full = torch.softmax(torch.cat([z, extra], 1), 1)
    return full[:, :-1], 1 - full[:, -1]


def etn_weights(domain_s: torch.Tensor, eps: float = 1e-10) -> torch.Tensor:
    r"""ETN's transferability weights of the source rows (CVPR 2019; official ``main.py``): :math:`w_i = 1 - \tilde
    D(x_i)` normalised by its batch mean (``eps = 1e-10``), constants in the loss."""
    return complement_weights(domain_s.reshape(-1), eps)
