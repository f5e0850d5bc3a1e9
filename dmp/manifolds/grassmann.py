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

from .features import centred, checked_layers, domain_batches, layer_pairs, squared_widths
from .spectral import ProjectorSpectrum, bmm, frobenius_sq_diff, gram_input, safe_sqrt, spectral_functions


def _normalised(hc: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """``H_c / s`` with ``s`` the (detached) RMS row norm of ``H_c`` (``[n, d]`` or a batch ``[B, n, d]``; ``mu [d]``
    or ``[B, d]``).

    A batch whose spread is at round-off level (``s <= 64 eps_float64 sqrt(s^2 + ||mu||^2)``, e.g. all rows equal)
    has no principal subspace: it is mapped to zeros, so its projector is 0, exactly as for rows that are equal
    bit for bit (instead of a projector onto round-off noise)."""
    with torch.no_grad():
        rms = hc.square().sum(dim=-1).mean(dim=-1).sqrt()
        noise = 64 * torch.finfo(hc.dtype).eps * torch.sqrt(rms.square() + mu.square().sum(dim=-1))
        scale = torch.where(rms > noise, rms.reciprocal(), 0.0)
    return hc * scale[..., None, None]


def _projector_factors(h_s: list[torch.Tensor], h_t: list[torch.Tensor], dims: list[int]):
    """Per layer ``(Z, mu)``: ``P_x = Z_x^T Z_x`` (``Z_x = s(G_x) H_x`` ``[n_x, d]``, float64; ``mu_x [d]``), as
    :func:`~dmp.manifolds.features.layer_pairs` gives them. Where batched, the layers and domains are one batch (the
    layers zero-padded to the widest) when their Grassmann dimensions agree."""
    batches = domain_batches(h_s, h_t, merge_layers=len(set(dims)) == 1)
    hn, mu, grams = [], [], []
    for x in batches:
        hc, m = centred(x)
        h = _normalised(hc, m)
        gram = bmm(h, h.mT)
        hn.append(h)
        mu.append(m)
        grams.append(gram_input(gram) - 1.0 / gram.shape[-1])
    spectra = [ProjectorSpectrum(dims[j * len(dims) // len(batches)]) for j in range(len(batches))]
    z = [bmm(s, h) for s, h in zip(spectral_functions(grams, spectra), hn)]
    return layer_pairs(z, len(h_s)), layer_pairs(mu, len(h_s))


def grassmann_distance(h_s: torch.Tensor, h_t: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    r"""Grassmann distance, Eq. (GrassMetric): :math:`\frac{1}{d^2}\|U_s U_s^T - U_t U_t^T\|_F^2`.

    Args:
        h_s: source features ``[n_s, d]`` (rows = samples), float32 or float64; or a list of them, one per
            manifold layer ``l`` (widths ``d_l``), for the sum over the layers (the paper's
            :math:`\mathcal{L}_{AL} = \sum_l`), computed as one batch.
        h_t: target features ``[n_t, d]`` (or a list, as ``h_s``).
        dim: Grassmann dimension ``d'`` (columns of ``U``). ``None`` = ``min(n_s, n_t) - 1`` (the paper's
            ``b_s - 1``); any value is clipped to the rank bound ``min(n_s - 1, n_t - 1, d)``.

    Returns:
        Scalar tensor (dtype of the inputs), in ``[0, 2 d' / d^2]`` per layer, differentiable w.r.t. both inputs.
        ``U_x`` are the top-``d'`` left singular vectors of the centred ``H_x^T``.  If a batch has fewer than
        ``d'`` independent directions, its projector spans its numerical range (see
        :class:`~dmp.manifolds.spectral.ProjectorSpectrum`).  A domain with one sample gives ``d' = 0`` and
        distance 0 with zero gradient.  Identical inputs give exactly 0.
    """
    h_s, h_t, dims, widths, out_dtype = checked_layers(h_s, h_t, dim)
    z, _ = _projector_factors(h_s, h_t, dims)
    sq, _ = frobenius_sq_diff(z)
    return (sq.clamp_min(0.0) / squared_widths(tuple(widths), sq.device)).to(out_dtype).sum()


def affine_grassmann_distance(h_s: torch.Tensor, h_t: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    r"""Affine Grassmann distance, Eq. (AffineGrassMetric), as printed (Frobenius norm NOT squared):

    :math:`\frac{1}{d^2}\big(\|P_s - P_t\|_F + \|(I - P_s)\mu_s - (I - P_t)\mu_t\|_2\big)`,
    ``P_x = U_x U_x^T`` as in :func:`grassmann_distance` and ``mu_x`` ``[d]`` the mean row of ``h_x``.

    Args:
        h_s: source features ``[n_s, d]``; h_t: target features ``[n_t, d]`` (or lists of layers: the sum over the
            layers, as in :func:`grassmann_distance`).
        dim: Grassmann dimension ``d'``, as in :func:`grassmann_distance`.

    Returns:
        Scalar tensor (dtype of the inputs), ``>= 0``.  Both norms have gradient 0 where they are (numerically)
        zero, e.g. for identical inputs, which give exactly 0.  With one sample in a domain, ``d' = 0``, the
        projectors are 0 and the value is ``||mu_s - mu_t||_2 / d^2`` (the equation evaluated at ``P = 0``).
        The unsquared ``||P_s - P_t||_F`` comes from a trace expansion: near 0 its absolute accuracy is about
        ``sqrt(256 eps_float64 d') ~ 2e-7 sqrt(d')`` (before the ``1/d^2``).
    """
    h_s, h_t, dims, widths, out_dtype = checked_layers(h_s, h_t, dim)
    z, mu = _projector_factors(h_s, h_t, dims)
    sq, level = frobenius_sq_diff(z)
    if isinstance(z, torch.Tensor):  # batched, all layers: [L, 2, n, d]
        offsets = _stacked_offsets(z, mu)
    elif all(isinstance(x, torch.Tensor) for x in z):  # batched, per layer [2, n, d]
        offsets = torch.cat([_stacked_offsets(x.unsqueeze(0), m.unsqueeze(0)) for x, m in zip(z, mu)])
    else:
        offsets = torch.stack([((mu_s - z_s.mT @ (z_s @ mu_s)) - (mu_t - z_t.mT @ (z_t @ mu_t))).square().sum()
                               for (z_s, z_t), (mu_s, mu_t) in zip(z, mu)])
    dist = (safe_sqrt(sq, level) + safe_sqrt(offsets)) / squared_widths(tuple(widths), sq.device)
    return dist.to(out_dtype).sum()


def _stacked_offsets(z: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """``[L]``: ``||(I - P_s) mu_s - (I - P_t) mu_t||^2`` with ``P = Z^T Z`` for ``z [L, 2, n, d]`` and ``mu [L, 2, d]``
    (two batched products for all the layers and domains)."""
    rows, means = z.flatten(0, 1), mu.reshape(-1, mu.shape[-1], 1)      # [2 L, n, d], [2 L, d, 1]
    residual = (means - torch.bmm(rows.mT, torch.bmm(rows, means))).view(len(z), 2, -1)
    return (residual[:, 0] - residual[:, 1]).square().sum(-1)
