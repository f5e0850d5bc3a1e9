"""Small-matrix spectral calculus shared by the manifold distances.

All three distances of the paper (Eqs. GrassMetric, AffineGrassMetric, LogEucMetric) compare
``d x d`` matrices ``A = H^T f(G) H`` built from a centred batch ``H`` (``[n, d]``) and a spectral
function ``f`` of its ``n x n`` Gram matrix ``G = H H^T``.  Because ``d`` (512/1024) is much larger
than the batch size ``n`` (32-50), everything here works with ``n x d`` and ``n x n`` matrices only:
the cost is ``O(n^2 d + n^3)`` and no ``d x d`` matrix is ever formed.

* :func:`spectral_function` evaluates ``s(G) = V diag(s(lambda)) V^T`` with ``torch.linalg.eigh`` and
  differentiates it with the Daleckii-Krein formula ``dL/dG = V (F o (V^T sym(dL/ds(G)) V)) V^T``, where
  ``F_ij`` is the divided difference ``(s(l_i) - s(l_j)) / (l_i - l_j)`` (``s'(l_i)`` on the diagonal).  The
  spectrum object supplies ``F`` already guarded against equal eigenvalues, so the backward pass never
  divides by an eigen-gap itself and cannot produce NaN/Inf.
* Square-root form: with ``s = f^{1/2}`` and ``Z = s(G) H`` (``[n, d]``), ``A = Z^T Z`` and
  ``tr(A_a A_b) = ||Z_a Z_b^T||_F^2`` (:func:`frobenius_sq_diff`).  This is much better conditioned than
  ``tr(f_a K f_b K^T)`` with ``K = H_a H_b^T``: ``f`` is large (``1/ridge``, ``1/eps``) on the null directions
  of ``G``, whose contributions ``H^T v = 0`` would otherwise have to cancel in float arithmetic.
* :func:`safe_sqrt` is a square root whose gradient is 0 (a valid subgradient of the norm) where the
  argument is at or below its round-off level.

Everything here runs in float64 (``COMPUTE_DTYPE``): the matrices are small, and it keeps the trace
expansion accurate for float32 features.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch.autograd.function import once_differentiable

COMPUTE_DTYPE = torch.float64

Spectrum = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
"""Maps ascending eigenvalues ``[n]`` to ``(s(lambda) [n], F [n, n])`` where ``F`` is the (guarded) matrix of
divided differences of ``s`` used by the Daleckii-Krein backward."""


class _SpectralFunction(torch.autograd.Function):
    """``s(G)`` for a symmetric matrix, with a Daleckii-Krein backward."""

    @staticmethod
    def forward(ctx, gram: torch.Tensor, spectrum: Spectrum) -> torch.Tensor:  # noqa: D401
        try:
            evals, evecs = torch.linalg.eigh(gram)
        except torch.linalg.LinAlgError as err:
            if not torch.isfinite(gram).all():
                raise ValueError("manifold distance: the feature batch contains NaN or Inf values "
                                 "(did training diverge?)") from err
            raise
        values, divided = spectrum(evals)
        ctx.save_for_backward(evecs, divided)
        return (evecs * values.unsqueeze(-2)) @ evecs.mT

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):
        evecs, divided = ctx.saved_tensors
        inner = evecs.mT @ (0.5 * (grad + grad.mT)) @ evecs
        return evecs @ (divided * inner) @ evecs.mT, None


def spectral_function(gram: torch.Tensor, spectrum: Spectrum) -> torch.Tensor:
    """``s(G) = V diag(s(lambda)) V^T`` for a symmetric ``gram`` ``[n, n]`` (only its lower triangle is read, as by
    ``torch.linalg.eigh``); differentiable with the guarded divided differences of ``spectrum``."""
    return _SpectralFunction.apply(gram, spectrum)


@dataclass(frozen=True)
class ProjectorSpectrum:
    """``s = f^{1/2}`` for the (pseudo-)inverse ``f`` on the top-``dim`` eigenspace of a Gram matrix.

    ``s(l) = 1 / sqrt(max(l, 0) + ridge)`` for the ``dim`` largest eigenvalues and ``s(l) = 0`` for the others, so
    that ``Z = s(G) H`` gives ``P = Z^T Z = H^T f(G) H``, the orthogonal projector onto the span of the top-``dim``
    left singular vectors of ``H^T`` (exactly, up to the factor ``l / (l + ridge)`` on each kept direction).  The
    ridge keeps every kept direction finite when the batch has fewer than ``dim`` independent directions
    (rank-deficient batch): such directions have ``l ~ 0`` and weight ``l / (l + ridge) ~ 0``, i.e. the projector
    then spans the numerical range of the batch.  With ``G`` normalised to trace ``n`` (as the distances do),
    ``ridge = 1e-10`` softly discards singular values below about ``1e-5`` of the RMS row norm.

    Divided differences: kept/kept ``-s_i s_j / (1/s_i + 1/s_j)`` (exact for ``(l + ridge)^{-1/2}``, also on the
    diagonal); dropped/dropped 0; kept/dropped ``s(l_kept) / max(l_kept - l_dropped, gap_floor)`` (the projector's
    own Frechet derivative).  At a zero eigen-gap across the kept/dropped boundary the projector is not
    differentiable (the top-``dim`` subspace is not unique) and the floor returns a bounded surrogate instead of
    ``1/0``; in the normalised units (mean eigenvalue 1) the floor ``1e-4`` is exact for every gap above 1e-4.
    The default ``dim = n - 1`` never meets this case: the only dropped direction is the constant one, which the
    caller shifts to eigenvalue ``-1``.
    """

    dim: int
    ridge: float = 1e-10
    gap_floor: float = 1e-4

    def __call__(self, evals: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = evals.shape[-1]
        kept = torch.arange(n, device=evals.device) >= n - self.dim  # eigh sorts ascending
        root = torch.sqrt(evals.clamp_min(0.0) + self.ridge)
        values = torch.where(kept, 1.0 / root, torch.zeros_like(root))
        both_kept = kept[:, None] & kept[None, :]
        across = kept[:, None] ^ kept[None, :]
        gap = (evals[:, None] - evals[None, :]).abs().clamp_min(self.gap_floor)
        divided = torch.where(both_kept, -1.0 / (root[:, None] * root[None, :] * (root[:, None] + root[None, :])),
                              torch.where(across, (values[:, None] + values[None, :]) / gap, torch.zeros_like(gap)))
        return values, divided


def _log1p_ratio(x: torch.Tensor) -> torch.Tensor:
    """``log(1 + x) / x`` for ``x >= 0`` (1 at ``x = 0``)."""
    safe = torch.where(x > 0, x, torch.ones_like(x))
    return torch.where(x > 0, torch.log1p(safe) / safe, torch.ones_like(x))


def _log1p_ratio_derivative(x: torch.Tensor) -> torch.Tensor:
    """Derivative of ``log(1 + x) / x`` for ``x >= 0``; a 5-term series below ``1e-3`` (no cancellation)."""
    series = -0.5 + x * (2.0 / 3.0 + x * (-0.75 + x * (0.8 - x * 5.0 / 6.0)))
    safe = torch.where(x >= 1e-3, x, torch.ones_like(x))
    direct = (safe / (1.0 + safe) - torch.log1p(safe)) / (safe * safe)
    return torch.where(x >= 1e-3, direct, series)


@dataclass(frozen=True)
class LogSpectrum:
    """``s = g^{1/2}`` with ``g(l) = (log(l + eps) - log(eps)) / l`` (``-> 1/eps`` as ``l -> 0``), eigenvalues clamped
    at 0.

    With ``G = H H^T`` and ``Z = s(G) H``: ``Z^T Z = H^T g(G) H = log(H^T H + eps I) - log(eps) I`` on all of
    ``R^d``, so the Log-Euclidean distance needs no ``d x d`` matrix.  Divided differences of ``s`` are
    ``D_g / (s_i + s_j)`` with ``D_g = (g(l_i) - g(l_j)) / (l_i - l_j)``, which switches to ``g'`` at the midpoint
    when ``|l_i - l_j| <= tol (l_i + l_j + eps)``; ``tol = 6e-6`` (about ``eps_float64^(1/3)``) balances the
    cancellation error of the quotient against the error of the midpoint rule.
    """

    eps: float
    tol: float = 6e-6

    def __call__(self, evals: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        lam = evals.clamp_min(0.0)
        g = _log1p_ratio(lam / self.eps) / self.eps
        diff = lam[:, None] - lam[None, :]
        close = diff.abs() <= self.tol * (lam[:, None] + lam[None, :] + self.eps)
        quotient = (g[:, None] - g[None, :]) / torch.where(close, torch.ones_like(diff), diff)
        midpoint = 0.5 * (lam[:, None] + lam[None, :]) / self.eps
        divided_g = torch.where(close, _log1p_ratio_derivative(midpoint) / self.eps ** 2, quotient)
        root = g.sqrt()
        return root, divided_g / (root[:, None] + root[None, :])


def spectral_pair(gram_s: torch.Tensor, gram_t: torch.Tensor, spectrum: Spectrum) -> tuple[torch.Tensor, torch.Tensor]:
    """``(s(G_s), s(G_t))``.  Two separate (not batched) eigh calls on freshly allocated matrices: identical inputs
    then go through bit-identical LAPACK/BLAS paths (a batch puts the second matrix at another memory alignment),
    so the distance of identical batches is exactly 0."""
    return spectral_function(gram_s, spectrum), spectral_function(gram_t, spectrum)


def symmetrize(matrix: torch.Tensor) -> torch.Tensor:
    """``(M + M^T) / 2``."""
    return 0.5 * (matrix + matrix.mT)


def frobenius_sq_diff(z_s: torch.Tensor, z_t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(||Z_s^T Z_s - Z_t^T Z_t||_F^2, round-off level)`` for ``Z_s [n_s, d]``, ``Z_t [n_t, d]``, by the expansion
    ``||Z_s Z_s^T||_F^2 + ||Z_t Z_t^T||_F^2 - 2 ||Z_s Z_t^T||_F^2`` (``n x n`` products only).

    The three terms are computed by the same expression, so identical source and target give exactly 0.  The
    round-off level ``64 eps_float64 (ss + tt + 2 st)`` is what :func:`safe_sqrt` treats as zero."""
    ss, tt, st = ((a @ b.mT).square().sum() for a, b in ((z_s, z_s), (z_t, z_t), (z_s, z_t)))
    level = 64 * torch.finfo(ss.dtype).eps * (ss + tt + 2 * st)
    return ss + tt - 2 * st, level.detach()


class _SafeSqrt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, level: torch.Tensor) -> torch.Tensor:  # noqa: D401
        root = x.clamp_min(0.0).sqrt()
        ctx.save_for_backward(x, root, level)
        return root

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):
        x, root, level = ctx.saved_tensors
        above = x > level
        return torch.where(above, grad / (2 * torch.where(above, root, torch.ones_like(root))), torch.zeros_like(x)), None


def safe_sqrt(x: torch.Tensor, level: torch.Tensor | float = 0.0) -> torch.Tensor:
    """``sqrt(max(x, 0))`` whose gradient is ``1 / (2 sqrt(x))`` where ``x > level`` and 0 elsewhere.

    ``level`` is the round-off level of ``x`` (0 for a sum of squares): below it ``x`` is numerically zero
    and the gradient of the norm is taken as the subgradient 0, never ``1/0``."""
    return _SafeSqrt.apply(x, torch.as_tensor(level, dtype=x.dtype, device=x.device))
