"""Adaptive feature norms (Xu et al., "Larger Norm More Transferable", ICCV 2019): HAFN and SAFN.

The norm is taken on the features that enter the classifier (the official code's ``fc1`` embedding; ours: the last
manifold layer). Both losses are applied to the source and to the target batch, each with its own term; the
method scales their sum by the paper's lambda = 0.05 (docs/method.md, "Comparison methods").
"""
from __future__ import annotations

import torch


def row_norms(h: torch.Tensor) -> torch.Tensor:
    """l2 norm of each row of ``h [n, d]``; the gradient at a zero row is zero (no NaN)."""
    return torch.linalg.vector_norm(h, dim=1)


def hafn_loss(h: torch.Tensor, radius: float = 25.0) -> torch.Tensor:
    r"""Hard adaptive feature norm of one domain's batch (AFN paper, Sec. "Hard Adaptive Feature Norm"; the official
    ``train.py`` of ``vanilla/Office31/HAFN``):

    .. math:: L_{hafn} = \Big( \frac{1}{n} \sum_i \|h_i\|_2 - R \Big)^2, \qquad R = 25.

    The mean norm, not each norm, is pulled to ``R``."""
    return (row_norms(h).mean() - radius) ** 2


def safn_loss(h: torch.Tensor, delta_r: float = 1.0) -> torch.Tensor:
    r"""Stepwise adaptive feature norm of one domain's batch (AFN paper, Sec. "Stepwise Adaptive Feature Norm"; the
    official ``train.py`` of ``vanilla/Office31/SAFN``):

    .. math:: L_{safn} = \frac{1}{n} \sum_i \big( \|h_i\|_2 - (\|h_i\|_2^{\,\mathrm{detached}} + \Delta r) \big)^2,
              \qquad \Delta r = 1.

    Its value is always :math:`\Delta r^2`; what matters is its gradient, :math:`-2 \Delta r\, \partial \|h_i\| /
    n`, which enlarges every sample's norm by a step of about :math:`\Delta r` from where it is now."""
    norms = row_norms(h)
    return ((norms - (norms.detach() + delta_r)) ** 2).mean()
