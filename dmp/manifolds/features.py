"""Validation and centring of the source/target feature batches fed to the manifold distances."""
from __future__ import annotations

import functools
import numbers

import torch
import torch.nn.functional as F

from .spectral import COMPUTE_DTYPE, batching


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
    """``(H - 1 mu^T, mu)`` in float64, ``mu`` the mean row (``[..., n, d]``, ``[..., d]``; any leading batch
    dimensions).

    Two-pass centring (the residual mean is subtracted again), so that the column sums of the result are zero to
    round-off relative to the spread itself, not to ``|mu|``: the Grassmann code relies on ``H_c^T 1 = 0``."""
    h = h.to(COMPUTE_DTYPE)
    mu = h.mean(dim=-2)
    hc = h - mu.unsqueeze(-2)
    return hc - hc.mean(dim=-2, keepdim=True), mu


def as_layers(h_s, h_t) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """``(h_s, h_t)`` as lists of manifold layers: a tensor is one layer, a sequence holds one tensor per layer (the
    same sample count within a domain). Each pair is checked with :func:`check_pair`."""
    h_s = [h_s] if isinstance(h_s, torch.Tensor) else list(h_s)
    h_t = [h_t] if isinstance(h_t, torch.Tensor) else list(h_t)
    if not h_s or len(h_s) != len(h_t):
        raise ValueError(f"h_s and h_t must hold the same number (>= 1) of layers, got {len(h_s)} and {len(h_t)}")
    for a, b in zip(h_s, h_t):
        check_pair(a, b)
        if a.shape[0] != h_s[0].shape[0] or b.shape[0] != h_t[0].shape[0]:
            raise ValueError("every layer of a domain must hold the same samples (rows), got "
                             f"{[x.shape[0] for x in h_s]} and {[x.shape[0] for x in h_t]}")
    return h_s, h_t


def domain_batches(h_s: list[torch.Tensor], h_t: list[torch.Tensor], merge_layers: bool = True) -> list[torch.Tensor]:
    """The matrices the distances work on. Where they are batched (:func:`~dmp.manifolds.spectral.batching`) and
    ``n_s = n_t``: one ``[2 L, n, D]`` batch (source and target of each layer in turn, every layer zero-padded to the
    widest, ``D``: zero columns change no Gram matrix, projector or covariance spectrum) when ``merge_layers``, else
    per layer one ``[2, n, d]`` stack. Otherwise per layer the source and the target matrix ``[n, d]`` as they are."""
    if not (batching(h_s[0]) and h_s[0].shape[0] == h_t[0].shape[0]):
        return [x for a, b in zip(h_s, h_t) for x in (a, b)]
    if merge_layers and len(h_s) > 1:
        width = max(h.shape[1] for h in h_s)
        return [torch.stack([F.pad(x, (0, width - x.shape[1])) if x.shape[1] < width else x
                             for a, b in zip(h_s, h_t) for x in (a, b)])]
    return [torch.stack([a, b]) for a, b in zip(h_s, h_t)]


def layer_pairs(batches: list[torch.Tensor], n_layers: int):
    """Inverse of :func:`domain_batches` for per-matrix results: ``[L, 2, ...]`` (one merged batch), or per layer the
    ``[2, ...]`` stack, or per layer the pair ``(source, target)``; iterating gives each layer's pair."""
    if len(batches) == 1 and n_layers > 1:
        return batches[0].view(n_layers, 2, *batches[0].shape[1:])
    if len(batches) == n_layers:
        return list(batches)
    return [(batches[2 * l], batches[2 * l + 1]) for l in range(n_layers)]


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


def checked_layers(h_s, h_t, dim: int | None):
    """``(h_s, h_t, dims, widths, dtype)``: the layers (:func:`as_layers`), the Grassmann dimension of each
    (:func:`subspace_dim`), their widths ``d_l`` and the result dtype."""
    h_s, h_t = as_layers(h_s, h_t)
    widths = [h.shape[1] for h in h_s]
    dims = [subspace_dim(dim, h_s[0].shape[0], h_t[0].shape[0], d) for d in widths]
    return h_s, h_t, dims, widths, torch.promote_types(h_s[0].dtype, h_t[0].dtype)


@functools.lru_cache(maxsize=None)
def squared_widths(widths: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """``[d_l^2]`` (float64) on ``device``, made once: a tensor built from Python values at every step would be a
    host-to-device copy."""
    return torch.tensor([d ** 2 for d in widths], dtype=COMPUTE_DTYPE, device=device)
