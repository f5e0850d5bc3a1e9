r"""Error indices of Theorems Grass_Bound and AffineGrass_Bound, used to choose the Grassmann dimension ``d'``.

:math:`e^G(d') = \frac{\sqrt{d'}}{\lambda^s_{d'} - \lambda^s_{d'+1}} + \frac{\sqrt{d'}}{\lambda^t_{d'} - \lambda^t_{d'+1}}`
and :math:`e^{AG}(d') = \frac{\sqrt{d'}\,\|\mu^s\|_2}{\lambda^s_{d'} - \lambda^s_{d'+1}}
+ \frac{\sqrt{d'}\,\|\mu^t\|_2}{\lambda^t_{d'} - \lambda^t_{d'+1}}`,
with :math:`\lambda_i` the ``i``-th largest eigenvalue (1-based) of a domain's covariance.  These are analysis
quantities (no gradient).  A domain whose eigen-gap is zero (``gap <= rtol * lambda_1``, which includes a
constant batch with ``lambda_1 = 0``) makes the index ``inf``: the theorem's condition
``lambda_{d'} > lambda_{d'+1}`` fails there and the bound is vacuous (also when ``||mu|| = 0``).
"""
from __future__ import annotations

from collections.abc import Iterable

import torch

from .features import centred, check_pair
from .spectral import COMPUTE_DTYPE

KINDS = ("G", "AG")


def covariance_spectrum(h: torch.Tensor) -> torch.Tensor:
    """Eigenvalues (descending, float64, ``[d]``) of ``C = H_c^T H_c / (n - 1)`` for ``h [n, d]``, from the ``n x n``
    Gram matrix; zero-padded beyond the rank, negatives from round-off clamped to 0."""
    hc, _ = centred(h.detach())
    n, d = hc.shape
    evals = torch.linalg.eigvalsh(hc @ hc.mT / max(n - 1, 1)).flip(0).clamp_min(0.0)
    if n >= d:
        return evals[:d]
    return torch.cat([evals, evals.new_zeros(d - n)])


def error_index_from_spectra(eig_s, eig_t, dims: Iterable[int], weight_s: float = 1.0, weight_t: float = 1.0,
                             rtol: float = 1e-10) -> torch.Tensor:
    r"""``sqrt(d') (w_s / (l^s_{d'} - l^s_{d'+1}) + w_t / (l^t_{d'} - l^t_{d'+1}))`` for each ``d'`` in ``dims``.

    Args:
        eig_s, eig_t: covariance eigenvalues ``[d]`` of each domain (any order; sorted descending here).
        dims: values ``d'`` with ``1 <= d' <= d - 1``.
        weight_s, weight_t: 1 for :math:`e^G`; the norms :math:`\|\mu^s\|_2`, :math:`\|\mu^t\|_2` for :math:`e^{AG}`.
        rtol: a gap ``<= rtol * lambda_1`` of that domain counts as zero and makes the index ``inf``.

    Returns:
        float64 tensor ``[len(dims)]``.
    """
    spectra = []
    for name, eig in (("eig_s", eig_s), ("eig_t", eig_t)):
        eig = torch.as_tensor(eig, dtype=COMPUTE_DTYPE).detach().cpu()
        if eig.ndim != 1 or eig.numel() < 2:
            raise ValueError(f"{name} must be a 1-D sequence of at least 2 eigenvalues, got shape {tuple(eig.shape)}")
        spectra.append(eig.sort(descending=True).values)
    if spectra[0].numel() != spectra[1].numel():
        raise ValueError(f"eig_s and eig_t must have the same length d, got {spectra[0].numel()} and {spectra[1].numel()}")
    d = spectra[0].numel()
    dims = [int(k) for k in dims]
    bad = [k for k in dims if not 1 <= k <= d - 1]
    if bad:
        raise ValueError(f"dims must lie in [1, d - 1] = [1, {d - 1}], got {bad}")
    idx = torch.tensor(dims, dtype=torch.long)
    total = torch.zeros(len(dims), dtype=COMPUTE_DTYPE)
    for eig, weight in zip(spectra, (weight_s, weight_t)):
        gap = eig[idx - 1] - eig[idx]
        zero = gap <= rtol * eig[0]
        term = torch.sqrt(idx.to(COMPUTE_DTYPE)) * float(weight) / torch.where(zero, torch.ones_like(gap), gap)
        total = total + torch.where(zero, torch.full_like(gap, float("inf")), term)
    return total


def error_index(h_s: torch.Tensor, h_t: torch.Tensor, dims: Iterable[int], kind: str = "G",
                rtol: float = 1e-10) -> torch.Tensor:
    r"""Error index :math:`e^G(d')` (``kind="G"``) or :math:`e^{AG}(d')` (``kind="AG"``) of the batches
    ``h_s [n_s, d]``, ``h_t [n_t, d]`` for each ``d'`` in ``dims`` (``1 <= d' <= d - 1``), from the eigenvalues of
    their covariances ``C = H_c^T H_c / (n - 1)`` and, for AG, the l2 norms of their (uncentred) mean rows.

    Returns a float64 CPU tensor ``[len(dims)]`` (no gradient); ``inf`` where a domain's eigen-gap is zero (see
    the module docstring).  Eigenvalues beyond the batch rank are 0, so ``d' >= n`` always gives ``inf``."""
    check_pair(h_s, h_t)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    weights = (1.0, 1.0)
    if kind == "AG":
        weights = tuple(float(centred(h.detach())[1].norm()) for h in (h_s, h_t))
    return error_index_from_spectra(covariance_spectrum(h_s), covariance_spectrum(h_t), dims,
                                    weights[0], weights[1], rtol)
