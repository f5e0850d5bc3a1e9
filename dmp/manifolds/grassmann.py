"""Grassmann (Eq. GrassMetric) and affine Grassmann (Eq. AffineGrassMetric) distances between two batches.

Both compare the orthogonal projectors ``P = U U^T`` onto the top-``d'`` principal subspaces of the
centred source and target batches.  ``U`` ``[d, d']`` holds the top-``d'`` left singular vectors of the
centred feature matrix ``H_c^T`` (features as columns), i.e. the top eigenvectors of the covariance.
The projector is formed without singular vectors: with ``G = H_c H_c^T`` (``n x n``),
``P = H_c^T f(G) H_c = Z^T Z`` with ``Z = f(G)^{1/2} H_c`` (``[n, d]``), where ``f`` inverts ``G`` on its
top-``d'`` eigenspace (:class:`~dmp.manifolds.spectral.ProjectorSpectrum`), and ``||P_s - P_t||_F`` comes
from ``n x n`` products (:func:`~dmp.manifolds.spectral.frobenius_sq_diff`).  No ``d x d`` matrix is formed.

Numerics: the centred batch is divided by its RMS row norm (a detached constant; projectors are
scale-invariant) so the ridge and gap floor are relative; ``G`` is shifted by ``-J = -11^T/n`` so the
constant direction (``H_c^T 1 = 0``) always sorts last and is never kept; all ``n x n`` algebra is float64.
"""
from __future__ import annotations

import torch

from .features import centred, check_pair, subspace_dim
from .spectral import ProjectorSpectrum, frobenius_sq_diff, safe_sqrt, spectral_pair, symmetrize


def _normalised(hc: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """``H_c / s`` with ``s`` the (detached) RMS row norm of ``H_c``.

    A batch whose spread is at round-off level (``s <= 64 eps_float64 sqrt(s^2 + ||mu||^2)``, e.g. all rows equal)
    has no principal subspace: it is mapped to zeros, so its projector is 0, exactly as for rows that are equal
    bit for bit (instead of a projector onto round-off noise)."""
    rms = hc.detach().square().sum(dim=1).mean().sqrt()
    noise = 64 * torch.finfo(hc.dtype).eps * torch.sqrt(rms.square() + mu.detach().square().sum())
    spread = rms > noise
    return hc * torch.where(spread, 1.0 / torch.where(spread, rms, torch.ones_like(rms)), torch.zeros_like(rms))


def _projector_factors(h_s: torch.Tensor, h_t: torch.Tensor, dim: int):
    """``(Z_s, mu_s), (Z_t, mu_t)`` with ``P_x = Z_x^T Z_x`` (``Z_x = s(G_x) H_x`` ``[n_x, d]``, float64, ``mu_x [d]``)."""
    hc_s, mu_s = centred(h_s)
    hc_t, mu_t = centred(h_t)
    hn_s, hn_t = _normalised(hc_s, mu_s), _normalised(hc_t, mu_t)

    def shifted_gram(hn: torch.Tensor) -> torch.Tensor:
        gram = hn @ hn.mT
        return symmetrize(gram) - torch.full_like(gram, 1.0 / gram.shape[0])

    s_s, s_t = spectral_pair(shifted_gram(hn_s), shifted_gram(hn_t), ProjectorSpectrum(dim))
    return (s_s @ hn_s, mu_s), (s_t @ hn_t, mu_t)


def grassmann_distance(h_s: torch.Tensor, h_t: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    r"""Grassmann distance, Eq. (GrassMetric): :math:`\frac{1}{d^2}\|U_s U_s^T - U_t U_t^T\|_F^2`.

    Args:
        h_s: source features ``[n_s, d]`` (rows = samples), float32 or float64.
        h_t: target features ``[n_t, d]``.
        dim: Grassmann dimension ``d'`` (columns of ``U``). ``None`` = ``min(n_s, n_t) - 1`` (the paper's
            ``b_s - 1``); any value is clipped to the rank bound ``min(n_s - 1, n_t - 1, d)``.

    Returns:
        Scalar tensor (dtype of the inputs), in ``[0, 2 d' / d^2]``, differentiable w.r.t. both inputs.
        ``U_x`` are the top-``d'`` left singular vectors of the centred ``H_x^T``.  If a batch has fewer than
        ``d'`` independent directions, its projector spans its numerical range (see
        :class:`~dmp.manifolds.spectral.ProjectorSpectrum`).  A domain with one sample gives ``d' = 0`` and
        distance 0 with zero gradient.  Identical inputs give exactly 0.
    """
    out_dtype = check_pair(h_s, h_t)
    d = h_s.shape[1]
    dim = subspace_dim(dim, h_s.shape[0], h_t.shape[0], d)
    (z_s, _), (z_t, _) = _projector_factors(h_s, h_t, dim)
    sq, _ = frobenius_sq_diff(z_s, z_t)
    return (sq.clamp_min(0.0) / d ** 2).to(out_dtype)


def affine_grassmann_distance(h_s: torch.Tensor, h_t: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    r"""Affine Grassmann distance, Eq. (AffineGrassMetric), as printed (Frobenius norm NOT squared):

    :math:`\frac{1}{d^2}\big(\|P_s - P_t\|_F + \|(I - P_s)\mu_s - (I - P_t)\mu_t\|_2\big)`,
    ``P_x = U_x U_x^T`` as in :func:`grassmann_distance` and ``mu_x`` ``[d]`` the mean row of ``h_x``.

    Args:
        h_s: source features ``[n_s, d]``; h_t: target features ``[n_t, d]``.
        dim: Grassmann dimension ``d'``, as in :func:`grassmann_distance`.

    Returns:
        Scalar tensor (dtype of the inputs), ``>= 0``.  Both norms have gradient 0 where they are (numerically)
        zero, e.g. for identical inputs, which give exactly 0.  With one sample in a domain, ``d' = 0``, the
        projectors are 0 and the value is ``||mu_s - mu_t||_2 / d^2`` (the equation evaluated at ``P = 0``).
        The unsquared ``||P_s - P_t||_F`` comes from a trace expansion: near 0 its absolute accuracy is about
        ``sqrt(256 eps_float64 d') ~ 2e-7 sqrt(d')`` (before the ``1/d^2``).
    """
    out_dtype = check_pair(h_s, h_t)
    d = h_s.shape[1]
    dim = subspace_dim(dim, h_s.shape[0], h_t.shape[0], d)
    (z_s, mu_s), (z_t, mu_t) = _projector_factors(h_s, h_t, dim)
    sq, level = frobenius_sq_diff(z_s, z_t)
    offset = (mu_s - z_s.mT @ (z_s @ mu_s)) - (mu_t - z_t.mT @ (z_t @ mu_t))
    return ((safe_sqrt(sq, level) + safe_sqrt(offset.square().sum())) / d ** 2).to(out_dtype)
