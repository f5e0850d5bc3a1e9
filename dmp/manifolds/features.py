"""Validation and centring of the source/target feature batches fed to the manifold distances."""
from __future__ import annotations

import numbers

import torch

from .spectral import COMPUTE_DTYPE


def check_pair(h_s: torch.Tensor, h_t: torch.Tensor) -> torch.dtype:
    """Check ``h_s [n_s, d]`` and ``h_t [n_t, d]`` (rows = samples) and return the result dtype.

    Raises ``ValueError`` naming the argument for a non-2-D, empty, non-floating or mismatched input."""
    for name, h in (("h_s", h_s), ("h_t", h_t)):
        if not isinstance(h, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of shape [n, d], got {type(h).__name__}")
        if h.ndim != 2:
            raise ValueError(f"{name} must have shape [n, d] (rows = samples), got shape {tuple(h.shape)}")
        if h.shape[0] < 1 or h.shape[1] < 1:
            raise ValueError(f"{name} must have at least one sample and one feature, got shape {tuple(h.shape)}")
        if not h.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got dtype {h.dtype}")
    if h_s.shape[1] != h_t.shape[1]:
        raise ValueError(f"h_s and h_t must have the same feature dimension d, got {h_s.shape[1]} and {h_t.shape[1]}")
    if h_s.device != h_t.device:
        raise ValueError(f"h_s and h_t must be on the same device, got {h_s.device} and {h_t.device}")
    return torch.promote_types(h_s.dtype, h_t.dtype)


def centred(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(H - 1 mu^T, mu)`` in float64, ``mu`` the mean row (``[n, d]``, ``[d]``).

    Two-pass centring (the residual mean is subtracted again), so that the column sums of the result are zero to
    round-off relative to the spread itself, not to ``|mu|``: the Grassmann code relies on ``H_c^T 1 = 0``."""
    h = h.to(COMPUTE_DTYPE)
    mu = h.mean(dim=0)
    hc = h - mu
    return hc - hc.mean(dim=0), mu


def subspace_dim(dim: int | None, n_s: int, n_t: int, d: int) -> int:
    """Grassmann dimension d' actually used: ``min(n_s, n_t) - 1`` by default (the paper's ``b_s - 1``), and any
    requested value clipped to the rank bound ``min(n_s - 1, n_t - 1, d)`` of the two centred batches, so that
    both projectors live on the same Grassmannian ``Gr(d', d)``.  0 when a domain has a single sample."""
    bound = min(n_s - 1, n_t - 1, d)
    if dim is None:
        return bound
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral) or dim < 0:
        raise ValueError(f"dim (the Grassmann dimension d') must be a non-negative int or None, got {dim!r}")
    return min(int(dim), bound)
