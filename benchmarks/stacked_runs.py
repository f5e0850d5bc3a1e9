"""Benchmark (prints figures; not a test): K runs stacked into one batched step (dmp/train/stacked.py) against the
same K runs stepped one after another, in training images per second.

Each run is benchmarks/op_count.py's build (random initialisation, anchors ready, every DMP term on) with its own
seed; both paths time ``--steps`` non-logging steps per run after one warm-up step, on the same trainers. A step
trains on ``batch`` source images, plus ``batch`` target images for a method that reads the target batch (DMP), so

    images/s = K * steps * images per step / seconds

where seconds are the process's CPU seconds (``time.process_time``; one thread by default, so on a machine that
other jobs share they are the step's own compute, not the time it waited for a core); ``--wall`` counts wall seconds.

    python benchmarks/stacked_runs.py                               # source-only and DMP, K = 3, Office-31 head
    python benchmarks/stacked_runs.py --runs 1 3 6 --methods dmp --device-path

Defaults: pooled feature vectors in (``--in-dim 1280``, EfficientNet-Lite0's width; ``backbone=identity``), the
paper's head (manifold layers 1024 LeakyReLU and 512 Tanh with BatchNorm, a 31-class classifier), batch 50 + 50, one
thread. ``--device-path``: the manifold distances batched as a GPU dispatches them
(``dmp.manifolds.spectral.PER_MATRIX_ON_CPU = False``) instead of matrix by matrix (the CPU path). On a CPU the
stacked step saves what K separate calls cost the interpreter and the dispatcher; the arithmetic is the same.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dmp.manifolds import spectral  # noqa: E402
from dmp.train.stacked import StackedRuns  # noqa: E402
from op_count import build  # noqa: E402


def rates(method: str, runs: int, steps: int, clock=time.process_time, **kw) -> dict:
    """``{"alone": images/s, "stacked": images/s, "ratio": stacked / alone}`` of ``runs`` seeds of ``method``."""
    built = [build(method, seed=seed, **kw) for seed in range(runs)]
    trainers = [t for t, _ in built]
    per_step = kw["batch"] * (2 if trainers[0].needs.target != "none" else 1)

    def one_after_another(it):
        for t, (xs, ys, xt) in built:
            t.step(it, xs, ys, xt if t.needs.target != "none" else None, log=False)

    stacked = StackedRuns(trainers)
    batches = [(xs, ys, xt if t.needs.target != "none" else None) for t, (xs, ys, xt) in built]
    out = {}
    for name, step in (("alone", one_after_another), ("stacked", lambda it: stacked.step(it, batches, log=False))):
        step(100)  # warm-up: the optimiser state exists
        start = clock()
        for i in range(steps):
            step(101 + i)
        out[name] = runs * steps * per_step / (clock() - start)
    out["ratio"] = out["stacked"] / out["alone"]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--methods", nargs="+", default=["source_only", "dmp"])
    ap.add_argument("--runs", type=int, nargs="+", default=[3], help="K, the stacked seeds (one figure per K)")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per run")
    ap.add_argument("--in-dim", type=int, default=1280)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--classes", type=int, default=31)
    ap.add_argument("--dims", type=int, nargs="+", default=[1024, 512])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device-path", action="store_true", help="the manifold distances batched, as on a GPU")
    ap.add_argument("--wall", action="store_true", help="wall seconds instead of the process's CPU seconds")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    spectral.PER_MATRIX_ON_CPU = not args.device_path
    print(f"backbone=identity in_dim={args.in_dim} batch={args.batch} dims={args.dims} classes={args.classes} "
          f"threads={args.threads} path={'device' if args.device_path else 'CPU'} "
          f"clock={'wall' if args.wall else 'process CPU'} torch={torch.__version__}")
    print(f"{'method':<12} {'K':>3} {'one after another':>18} {'stacked':>10} {'ratio':>6}   (training images/s)")
    out = {}
    try:
        for method in args.methods:
            for k in args.runs:
                r = rates(method, k, args.steps, time.perf_counter if args.wall else time.process_time,
                          backbone="identity", in_dim=args.in_dim, batch=args.batch,
                          classes=args.classes, dims=tuple(args.dims))
                print(f"{method:<12} {k:>3} {r['alone']:>18.0f} {r['stacked']:>10.0f} {r['ratio']:>6.2f}")
                out[(method, k)] = r
    finally:
        spectral.PER_MATRIX_ON_CPU = True
    return out


if __name__ == "__main__":
    main()
