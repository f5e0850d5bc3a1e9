"""Log-Euclidean distance on the SPD manifold (Eq. LogEucMetric) between two batches, with ``n x n`` algebra only."""
from __future__ import annotations

import math

import torch

from .features import centred, checked_layers, domain_batches, layer_pairs, squared_widths
from .spectral import LogSpectrum, bmm, frobenius_sq_diff, gram_input, safe_sqrt, spectral_functions

LE_EPS = 1e-3
"""Default regulariser ``eps`` of ``C + eps I`` (absolute, in squared feature units). The paper does not state it;
1e-3 is small against the covariance eigenvalues of the Tanh/LeakyReLU manifold layers (features of order 0.1-1)."""


def _covariance_factor(h: torch.Tensor) -> torch.Tensor:
    """``A = H_c / sqrt(max(n - 1, 1))`` (float64) of each batch ``h [B, n, d]``, so that ``C = A^T A``."""
    return centred(h)[0] / math.sqrt(max(h.shape[-2] - 1, 1))


def log_euclidean_distance(h_s: torch.Tensor, h_t: torch.Tensor, eps: float = LE_EPS) -> torch.Tensor:
    r"""Log-Euclidean distance, Eq. (LogEucMetric), on the regularised covariances:

    :math:`\frac{1}{d^2}\|\log(C_s + \varepsilon I) - \log(C_t + \varepsilon I)\|_F`,
    with :math:`C_x = \frac{1}{n_x - 1} H_{c,x}^T H_{c,x}` (``d x d``; unbiased, divides by ``n - 1``; a single-sample
    batch has ``C = 0``) and ``H_{c,x}`` the centred batch.

    Computed without ``d x d`` matrices: with ``A = H_c / sqrt(n - 1)`` and ``G = A A^T`` (``n x n``),
    ``log(C + eps I) - log(eps) I = A^T g(G) A = Z^T Z`` with ``Z = g(G)^{1/2} A`` and
    ``g(l) = (log(l + eps) - log(eps)) / l`` (:class:`~dmp.manifolds.spectral.LogSpectrum`); the ``log(eps) I``
    parts cancel in the difference and the Frobenius norm comes from ``n x n`` products.

    Args:
        h_s: source features ``[n_s, d]`` (rows = samples), float32 or float64; or a list of them, one per
            manifold layer, for the sum over the layers (computed as one batch).
        h_t: target features ``[n_t, d]`` (or a list, as ``h_s``).
        eps: ``varepsilon > 0`` (default :data:`LE_EPS` = 1e-3).

    Returns:
        Scalar tensor (dtype of the inputs), ``>= 0``, symmetric in its arguments, exactly 0 for identical inputs;
        the norm's gradient is 0 where the distance is numerically 0.  Accuracy: the trace expansion (float64)
        limits the absolute accuracy near 0 to about ``sqrt(64 eps_float64 (||L_s||_F^2 + ||L_t||_F^2)) / d^2``
        (``L = log(C + eps I) - log(eps) I``), e.g. ~1e-9 for d = 25; far below the distances between domains.
    """
    h_s, h_t, _, widths, out_dtype = checked_layers(h_s, h_t, None)
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps (Log-Euclidean regulariser) must be a positive finite number, got {eps!r}")
    factors = [_covariance_factor(x) for x in domain_batches(h_s, h_t)]
    grams = [gram_input(bmm(a, a.mT)) for a in factors]
    spectra = [LogSpectrum(float(eps))] * len(grams)
    z = [bmm(s, a) for s, a in zip(spectral_functions(grams, spectra), factors)]
    sq, level = frobenius_sq_diff(layer_pairs(z, len(h_s)))
    return (safe_sqrt(sq, level) / squared_widths(tuple(widths), sq.device)).to(out_dtype).sum()
