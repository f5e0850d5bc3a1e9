"""Target intra-class similarity loss (paper Sec. "Target Intra-Class Similarity" and Eq. WeightedIntraLoss)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..manifolds.spectral import batching
from .inter_class import _layers, _sum_layers, padded_stack, unit_rows


def intra_class_loss(h_t, p_t: torch.Tensor, class_means, k: int = 1,
                     class_weights: torch.Tensor | None = None, eps: float = 1e-8,
                     grad_p: bool = True) -> torch.Tensor:
    r"""Top-k truncated, soft-label weighted intra-class loss, Eq. (IntraLoss&Truncated) / Eq. (WeightedIntraLoss).

    .. math::
        s^w_{ij} = \frac{\bar{h}^{s\,T}_i h^t_j}{\|\bar{h}^s_i\| \|h^t_j\|}, \qquad
        \mathcal{L}_{intra} = -\frac{1}{n^t k} \sum_{i=1}^{c} w_i \sum_{j=1}^{n^t} \chi_{ij}\, p^t_{ij}\, s^w_{ij}

    with :math:`\chi_{ij} = 1` iff class ``i`` is among the ``k`` largest entries of :math:`p^t_j`.
    With ``class_weights=None`` every :math:`w_i = 1`, which is exactly Eq. (IntraLoss&Truncated).
    The anchors :math:`\bar{H}^s` (``class_means``) are constants (detached); gradients flow into both
    ``h_t`` and ``p_t`` (the paper's gradient, Sec. "Optimization and Algorithm", has both terms), or into
    ``h_t`` only with ``grad_p=False`` (:math:`p^t` as a constant confidence weight).

    Args:
        h_t: ``[n, d]`` target features of one manifold layer, or a list of them (one per manifold layer ``l``,
            with ``class_means`` a list of their anchors): the sum :math:`\sum_l \mathcal{L}^l_{intra}`, the
            truncation :math:`\chi p^t` computed once for all the layers.
        p_t: ``[n, c]`` target softmax predictions.
        class_means: ``[c, d]`` source class-mean anchors (or a list, as ``h_t``).
        k: Top-k truncation, ``1 <= k <= c``.
        class_weights: ``[c]`` weights :math:`w` (partial setting) or ``None``.
        grad_p: whether the gradient flows into ``p_t``.
    Returns:
        A scalar.
    """
    n, c = p_t.shape
    if not 1 <= k <= c:
        raise ValueError(f"k must be in [1, {c}], got {k}")
    layers, anchors = _layers(h_t, class_means)
    # (out of place: torch.func.vmap has a batching rule for scatter, not for scatter_)
    chi = torch.zeros_like(p_t).scatter(1, p_t.detach().topk(k, dim=1).indices, 1.0)  # shared by the layers
    p = p_t if grad_p else p_t.detach()
    w = None if class_weights is None else class_weights.detach().to(p_t.dtype).unsqueeze(0)
    if batching(p_t) and len(layers) > 1:  # a GPU: the layers zero-padded into one batch [L, n, D]
        s_w = torch.bmm(unit_rows(padded_stack(layers), eps=eps),
                        unit_rows(padded_stack([m.detach() for m in anchors]), eps=eps).mT)  # [L, n, c]
        weight = chi if w is None else chi * w  # [n, c] constants (Top-k mask, class weights), shared by the layers
        return (s_w * (weight * p)).sum() * (-1.0 / (n * k))
    out = []
    for h, m in zip(layers, anchors):
        s_w = F.normalize(h, dim=1, eps=eps) @ F.normalize(m.detach(), dim=1, eps=eps).t()  # [n, c]
        # (chi p per layer: one gradient path into p_t per layer, summed in the order of the one-layer code)
        terms = chi * p * s_w
        out.append(-(terms if w is None else terms * w).sum() / (n * k))
    return _sum_layers(out)
