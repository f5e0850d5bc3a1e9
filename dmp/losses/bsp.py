"""Batch Spectral Penalization (Chen, Wang, Long, Wang, "Transferability vs. Discriminability", ICML 2019)."""
from __future__ import annotations

import torch


def bsp_loss(h_s: torch.Tensor, h_t: torch.Tensor, k: int = 1) -> torch.Tensor:
    r"""BSP (ICML 2019, Sec. "Batch Spectral Penalization"; the official ``BSP`` loss and Transfer-Learning-Library's
    ``BatchSpectralPenalizationLoss``): the squares of the ``k`` largest singular values of the source and of
    the target feature matrices,

    .. math:: L_{bsp} = \sum_{i=1}^{k} \big( \sigma_{s,i}^2 + \sigma_{t,i}^2 \big), \qquad k = 1,

    with ``h_s [n_s, d]``, ``h_t [n_t, d]`` the batch features (rows are samples, not centred). The singular
    values are computed in float64 (``torch.linalg.svdvals``, whose gradient :math:`2\sigma_i u_i v_i^T` has no
    division by gaps between singular values, so it stays finite for a batch of one sample or of equal rows).
    ``k`` larger than a matrix's rank counts the zero singular values as zero."""
    out = h_s.new_zeros(())
    for h in (h_s, h_t):
        s = torch.linalg.svdvals(h.double())
        out = out + (s[:k] ** 2).sum().to(h.dtype)
    return out
