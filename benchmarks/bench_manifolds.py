"""Forward+backward time of the manifold distances (dmp.manifolds, n x n algebra) versus naive d x d versions.

The naive versions follow the equations literally: SVD of the centred ``d x n`` feature matrix and ``d x d``
projectors for G/AG (as the authors' earlier DRMEA code does), ``eigh`` of the ``d x d`` covariance for LE.

    .venv/bin/python benchmarks/bench_manifolds.py [--n 50] [--dims 512 1024] [--threads 1] [--device cpu]

Prints figures only (median of ``torch.utils.benchmark`` ``blocked_autorange``), plus whether each version's
gradients were finite on the benchmark batch.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.utils.benchmark as benchmark
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from dmp.manifolds import LE_EPS, METRICS  # noqa: E402


def _naive_projector(h: torch.Tensor, dim: int) -> torch.Tensor:
    hc = h - h.mean(0)
    u = torch.linalg.svd(hc.T, full_matrices=False)[0][:, :dim]
    return u @ u.T


def naive_distance(metric: str, h_s: torch.Tensor, h_t: torch.Tensor) -> torch.Tensor:
    """Literal d x d implementation of Eqs. GrassMetric / AffineGrassMetric / LogEucMetric (default d', eps)."""
    d = h_s.shape[1]
    if metric == "LE":
        def logm(h):
            hc = h - h.mean(0)
            lam, v = torch.linalg.eigh(hc.T @ hc / (h.shape[0] - 1) + LE_EPS * torch.eye(d, dtype=h.dtype))
            return (v * lam.log()) @ v.T
        return torch.linalg.matrix_norm(logm(h_s) - logm(h_t)) / d ** 2
    dim = min(h_s.shape[0], h_t.shape[0], d + 1) - 1
    p_s, p_t = _naive_projector(h_s, dim), _naive_projector(h_t, dim)
    if metric == "G":
        return ((p_s - p_t) ** 2).sum() / d ** 2
    eye = torch.eye(d, dtype=h_s.dtype)
    offset = (eye - p_s) @ h_s.mean(0) - (eye - p_t) @ h_t.mean(0)
    return (torch.linalg.matrix_norm(p_s - p_t) + offset.norm()) / d ** 2


def forward_backward(fn, h_s: torch.Tensor, h_t: torch.Tensor) -> bool:
    """One forward+backward; returns whether all gradients are finite."""
    h_s.grad = h_t.grad = None
    fn(h_s, h_t).backward()
    return bool(torch.isfinite(h_s.grad).all() and torch.isfinite(h_t.grad).all())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="batch size per domain")
    parser.add_argument("--dims", type=int, nargs="+", default=[512, 1024], help="feature dimensions d")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)
    rows = []
    for d in args.dims:
        for dtype in (torch.float32, torch.float64):
            h_s = torch.tanh(torch.randn(args.n, d, generator=gen, dtype=dtype)).to(args.device).requires_grad_()
            h_t = torch.tanh(0.8 * torch.randn(args.n, d, generator=gen, dtype=dtype) + 0.1).to(args.device).requires_grad_()
            for metric, fast in METRICS.items():
                row = [d, str(dtype).removeprefix("torch."), metric]
                for fn in (fast, lambda a, b, m=metric: naive_distance(m, a, b)):
                    finite = forward_backward(fn, h_s, h_t)
                    timer = benchmark.Timer("forward_backward(fn, h_s, h_t)", globals=dict(
                        forward_backward=forward_backward, fn=fn, h_s=h_s, h_t=h_t), num_threads=args.threads)
                    row += [timer.blocked_autorange(min_run_time=0.5).median * 1e3, "yes" if finite else "NO"]
                row.append(row[5] / row[3])
                rows.append(row)
    print(f"n = {args.n}, threads = {args.threads}, device = {args.device}; times in ms (forward + backward)")
    print(tabulate(rows, headers=["d", "dtype", "metric", "fast ms", "finite", "naive ms", "finite", "speed-up"],
                   floatfmt=".2f"))


if __name__ == "__main__":
    main()
