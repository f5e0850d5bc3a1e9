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

import functools
from dataclasses import dataclass
from typing import Callable

import torch
from torch.autograd.function import once_differentiable

COMPUTE_DTYPE = torch.float64

Spectrum = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
"""Maps ascending eigenvalues ``[..., n]`` to ``(s(lambda) [..., n], F [..., n, n])`` where ``F`` is the (guarded)
matrix of divided differences of ``s`` used by the Daleckii-Krein backward (any leading batch dimensions)."""


PER_MATRIX_ON_CPU = True
"""Whether the distances work matrix by matrix on the CPU: every layer and domain its own ``[n, d]`` matrix and its
own LAPACK/BLAS calls, exactly the arithmetic of the one-matrix code (MKL's batched gemm rounds differently from
its gemm, its batched eigh and gemm depend on where a matrix sits in the batch, and stacking copies): the CPU
numbers stay bit for bit, identical source and target give exactly 0, no copy is added. Elsewhere (a GPU, or the
CPU with this False, as ``benchmarks/op_count.py`` counts the device path) the layers and domains are batches:
one eigen-decomposition and one product per stage (:func:`batching`)."""


def batching(x: torch.Tensor) -> bool:
    """Whether the matrices on ``x``'s device are stacked into batches (see :data:`PER_MATRIX_ON_CPU`)."""
    return not (PER_MATRIX_ON_CPU and x.device.type == "cpu")


def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for ``[n, k] x [k, m]`` or batches ``[B, n, k] x [B, k, m]`` (``torch.bmm``: one op, where ``@``
    dispatches five)."""
    return a @ b if a.dim() == 2 else torch.bmm(a, b)


class _SpectralFunction(torch.autograd.Function):
    """``s(G)`` for a symmetric matrix, with a Daleckii-Krein backward."""

    generate_vmap_rule = True  # torch.func.vmap runs forward and backward on the batched tensors (dmp/train/stacked.py)

    @staticmethod
    def forward(gram: torch.Tensor, spectrum: Spectrum):  # noqa: D401
        try:
            evals, evecs = torch.linalg.eigh(gram)  # (CUDA: cuSOLVER; it reads its error flag on the host)
        except torch.linalg.LinAlgError as err:
            if not torch.isfinite(gram).all():
                raise ValueError("manifold distance: the feature batch contains NaN or Inf values "
                                 "(did training diverge?)") from err
            raise
        values, divided = spectrum(evals)
        return bmm(evecs * values.unsqueeze(-2), evecs.mT), evecs, divided

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, evecs, divided = output
        ctx.mark_non_differentiable(evecs, divided)
        ctx.save_for_backward(evecs, divided)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor, _evecs=None, _divided=None):
        evecs, divided = ctx.saved_tensors
        inner = bmm(bmm(evecs.mT, 0.5 * (grad + grad.mT)), evecs)
        return bmm(bmm(evecs, divided * inner), evecs.mT), None


def spectral_function(gram: torch.Tensor, spectrum: Spectrum) -> torch.Tensor:
    """``s(G) = V diag(s(lambda)) V^T`` for a symmetric ``gram`` ``[n, n]`` or a batch of them ``[B, n, n]`` (only
    the lower triangles are read, as by ``torch.linalg.eigh``); differentiable with the guarded divided differences
    of ``spectrum``. A batch is one eigen-decomposition and one autograd node."""
    return _SpectralFunction.apply(gram, spectrum)[0]


def spectral_functions(grams: list[torch.Tensor], spectra: list[Spectrum]) -> list[torch.Tensor]:
    """``[s_j(G_j)]`` for matrices ``G_j [n_j, n_j]`` or batches ``[B_j, n_j, n_j]``. Where matrices are batched
    (:func:`batching`), those of the same size ``n`` and spectrum go through one :func:`spectral_function` (one
    eigen-decomposition and one autograd node for all the layers and domains whose shapes allow it); on the CPU,
    one call each."""
    if not batching(grams[0]):
        return [spectral_function(gram, spectrum) for gram, spectrum in zip(grams, spectra)]
    groups: dict = {}
    for j, (gram, spectrum) in enumerate(zip(grams, spectra)):
        groups.setdefault((gram.shape[-1], spectrum), []).append(j)
    batches = [g if g.dim() == 3 else g.unsqueeze(0) for g in grams]
    out: list = [None] * len(grams)
    for (_, spectrum), idx in groups.items():
        if len(idx) == 1:  # (no cat + split pair)
            values = spectral_function(grams[idx[0]], spectrum)
            out[idx[0]] = values
            continue
        values = spectral_function(torch.cat([batches[j] for j in idx]), spectrum)
        for j, part in zip(idx, values.split([batches[j].shape[0] for j in idx])):
            out[j] = part if grams[j].dim() == 3 else part.squeeze(0)
    return out


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
        kept, both_kept = _kept_masks(evals.shape[-1], self.dim, evals.device)
        root = torch.sqrt(evals.clamp_min(0.0) + self.ridge)
        values = root.reciprocal() * kept.to(root.dtype)  # (times 1 or 0: exact)
        col, row = root.unsqueeze(-1), root.unsqueeze(-2)  # [..., n, 1], [..., 1, n]
        gap = (evals.unsqueeze(-1) - evals.unsqueeze(-2)).abs().clamp_min(self.gap_floor)
        # kept/dropped: (s_i + s_j) / gap, where one of s_i, s_j is 0; dropped/dropped: (0 + 0) / gap = 0
        divided = torch.where(both_kept, -1.0 / (col * row * (col + row)),
                              (values.unsqueeze(-1) + values.unsqueeze(-2)) / gap)
        return values, divided


@functools.lru_cache(maxsize=None)
def _kept_masks(n: int, dim: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(kept [n], both_kept [n, n])`` of :class:`ProjectorSpectrum`: the ``dim`` largest of ``n`` ascending
    eigenvalues (``kept`` as 0/1 in float64), made once per shape (constants of every step)."""
    kept = torch.arange(n, device=device) >= n - dim  # eigh sorts ascending
    return kept.to(COMPUTE_DTYPE), kept[:, None] & kept[None, :]


def _log1p_ratio(x: torch.Tensor) -> torch.Tensor:
    """``log(1 + x) / x`` for ``x >= 0`` (1 at ``x = 0``)."""
    positive = x > 0
    safe = torch.where(positive, x, 1.0)
    return torch.where(positive, torch.log1p(safe) / safe, 1.0)


def _log1p_ratio_derivative(x: torch.Tensor) -> torch.Tensor:
    """Derivative of ``log(1 + x) / x`` for ``x >= 0``; a 5-term series below ``1e-3`` (no cancellation)."""
    series = -0.5 + x * (2.0 / 3.0 + x * (-0.75 + x * (0.8 - x * 5.0 / 6.0)))
    large = x >= 1e-3
    safe = torch.where(large, x, 1.0)
    direct = (safe / (1.0 + safe) - torch.log1p(safe)) / (safe * safe)
    return torch.where(large, direct, series)


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
        col, row = lam.unsqueeze(-1), lam.unsqueeze(-2)  # [..., n, 1], [..., 1, n]
        diff, both = col - row, col + row
        close = diff.abs() <= self.tol * (both + self.eps)
        quotient = (g.unsqueeze(-1) - g.unsqueeze(-2)) / torch.where(close, 1.0, diff)
        midpoint = 0.5 * both / self.eps
        divided_g = torch.where(close, _log1p_ratio_derivative(midpoint) / self.eps ** 2, quotient)
        root = g.sqrt()
        return root, divided_g / (root.unsqueeze(-1) + root.unsqueeze(-2))


def symmetrize(matrix: torch.Tensor) -> torch.Tensor:
    """``(M + M^T) / 2``."""
    return 0.5 * (matrix + matrix.mT)


def gram_input(gram: torch.Tensor) -> torch.Tensor:
    """A Gram matrix ``H H^T`` as :func:`spectral_function` takes it: symmetrised on the CPU path (the committed CPU
    numbers), as it is where batched (:func:`batching`): ``torch.linalg.eigh`` reads only the lower triangle and the
    Daleckii-Krein backward returns a symmetric gradient, so the symmetrisation and its backward are identities
    there (three operations each way fewer)."""
    return gram if batching(gram) else symmetrize(gram)


def frobenius_sq_diff(layers: list) -> tuple[torch.Tensor, torch.Tensor]:
    """``(||Z_s^T Z_s - Z_t^T Z_t||_F^2, round-off level)`` of each layer (``[L]`` each), by the expansion
    ``||Z_s Z_s^T||_F^2 + ||Z_t Z_t^T||_F^2 - 2 ||Z_s Z_t^T||_F^2`` (``n x n`` products only).

    ``layers``: ``Z [L, 2, n, d]`` (all layers, source and target stacked), or per layer ``Z [2, n, d]`` or a pair
    ``(Z_s [n_s, d], Z_t [n_t, d])``. Stacked (the batched path, :func:`batching`), the rows of both domains are one
    matrix ``[Z_s; Z_t]`` whose Gram matrix ``[[ss, st], [ts, tt]]`` is one product, and its squared blocks summed
    are one reduction: the value is their sum with signs ``[[1, -1], [-1, 1]]`` and the level their plain sum.
    Per pair (the CPU path), the three terms are computed by the same expression, so identical source and target
    give exactly 0.  The round-off level ``64 eps_float64 (ss + tt + 2 st)`` is what :func:`safe_sqrt` treats as
    zero."""
    if isinstance(layers, torch.Tensor) or all(isinstance(z, torch.Tensor) for z in layers):
        if isinstance(layers, torch.Tensor):
            blocks = _squared_blocks(layers)                                   # [L, 2, 2]
        else:
            parts = [_squared_blocks(z.unsqueeze(0)) for z in layers]
            blocks = parts[0] if len(parts) == 1 else torch.cat(parts)
        signs, total = _block_signs(blocks.device, blocks.dtype), blocks.sum((1, 2))
        return (blocks * signs).sum((1, 2)), (64 * torch.finfo(total.dtype).eps * total).detach()
    sums = torch.stack([torch.stack([(a @ b.mT).square().sum() for a, b in ((z_s, z_s), (z_t, z_t), (z_s, z_t))])
                        for z_s, z_t in layers])
    ss, tt, st = sums.unbind(1)
    level = 64 * torch.finfo(ss.dtype).eps * (ss + tt + 2 * st)
    return ss + tt - 2 * st, level.detach()


def _squared_blocks(z: torch.Tensor) -> torch.Tensor:
    """``[L, 2, 2]``: the squared Frobenius norms of the blocks ``Z_a Z_b^T`` of ``z [L, 2, n, d]``."""
    rows = z.flatten(1, 2)                                                 # [L, 2 n, d]
    n = z.shape[2]
    return torch.bmm(rows, rows.mT).square().view(len(z), 2, n, 2, n).sum((2, 4))


@functools.lru_cache(maxsize=None)
def _block_signs(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``[[1, -1], [-1, 1]]``: ``ss + tt - st - ts`` (made once: no host-to-device copy per step)."""
    return torch.tensor([[1.0, -1.0], [-1.0, 1.0]], dtype=dtype, device=device)


class _SafeSqrt(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, level: torch.Tensor | float) -> torch.Tensor:  # noqa: D401
        return x.clamp_min(0.0).sqrt()

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, level = inputs
        tensor_level = isinstance(level, torch.Tensor)
        ctx.level = None if tensor_level else float(level)
        ctx.save_for_backward(x, output, *([level] if tensor_level else []))

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):
        x, root, *level = ctx.saved_tensors
        above = x > (level[0] if level else ctx.level)
        return torch.where(above, grad / (2 * root), 0.0), None  # (1/0 where not above: not selected)


def safe_sqrt(x: torch.Tensor, level: torch.Tensor | float = 0.0) -> torch.Tensor:
    """``sqrt(max(x, 0))`` whose gradient is ``1 / (2 sqrt(x))`` where ``x > level`` and 0 elsewhere.

    ``level`` is the round-off level of ``x`` (0 for a sum of squares): below it ``x`` is numerically zero
    and the gradient of the norm is taken as the subgradient 0, never ``1/0``. A float ``level`` stays a Python
    number (a tensor made from it at every step would be a host-to-device copy, which waits for a GPU)."""
    return _SafeSqrt.apply(x, level)
