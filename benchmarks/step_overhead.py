"""Benchmark (prints figures; not a test): the cost of DMP's training step and of its anchor refresh.

Measured in one process on the same model, with the trainer's own ``Trainer.step``:

* ``t_src``   - source-only step: forward/backward of the source batch, cross-entropy;
* ``t_both``  - the same model forwarding and back-propagating the source AND the target batch with only
  the cross-entropy (the work any two-domain method does before its own losses);
* ``t_dmp``   - the DMP step (both batches, CE + inter + intra + alignment on every manifold layer).

``t_dmp / t_both`` is the cost of DMP's losses (goal <= 1.10); ``t_dmp / t_src`` is the end-to-end ratio the
paper's time table compares (it includes the target pass that every adaptation method needs; the paper
reports 1.6x on Office-31 A->W).

The anchor-refresh share is ``t_refresh / (t_refresh + T_up * t_dmp)`` where ``t_refresh`` is one measured
no-grad pass over ``n_source`` (+ ``n_target`` for partial) samples and ``T_up = ceil(n_source / batch)``
(one epoch, our default), for the dataset sizes given (default Office-31 A->W: 2817 -> 795).

    python benchmarks/step_overhead.py --backbone resnet50 --size 112 --batch 32
    python benchmarks/step_overhead.py --backbone identity --in-dim 1024
    python benchmarks/step_overhead.py --device cuda --size 224 --batch 50 --profile 20   # + torch.profiler table

It also prints the ATen operations each step dispatches and the DMP step's host reads (benchmarks/op_count.py: the
host-side proxy of the kernel launches). ``--profile N`` profiles N DMP steps and N two-domain CE steps with ``torch.profiler`` and prints the operators
that take the most device (CUDA) or CPU time: where DMP's extra time goes.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dmp.config import resolve  # noqa: E402
from dmp.data.inputs import Task, TensorDataset  # noqa: E402
from dmp.train.compiled import compile_function  # noqa: E402
from dmp.train.trainer import Trainer  # noqa: E402
from step_probes import both_ce as two_domain_ce, ce_objective, count  # noqa: E402  (the reference step, one definition)


def timed(fn, repeats, warmup=2, device=torch.device("cpu")):
    """Median seconds of ``fn()`` over ``repeats`` calls after ``warmup`` (device work included)."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def profile(fn, steps, device, rows=25):
    """Print ``torch.profiler``'s operator table for ``steps`` calls of ``fn`` (sorted by self device time on CUDA,
    self CPU time on the CPU)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    fn()
    with torch_profile(activities=activities) as prof:
        for _ in range(steps):
            fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
    averages = prof.key_averages()
    keys = [("self_device_time_total", "self_cuda_time_total")] if device.type == "cuda" else []
    for candidates in keys + [("self_cpu_time_total",)]:  # on CUDA the CPU table shows the host waits too
        for key in candidates:
            try:
                table = averages.table(sort_by=key, row_limit=rows)
            except (AttributeError, KeyError, ValueError):
                continue
            print(f"-- sorted by {key}\n{table}")
            break


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backbone", default="resnet50")
    ap.add_argument("--size", type=int, default=112, help="image side (backbones other than identity)")
    ap.add_argument("--in-dim", type=int, default=1024, help="feature dim (identity backbone)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--classes", type=int, default=31)
    ap.add_argument("--dims", type=int, nargs="+", default=[1024, 512])
    ap.add_argument("--metric", default="G")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--n-source", type=int, default=2817)
    ap.add_argument("--n-target", type=int, default=795)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="also profile N steps of each (torch.profiler)")
    ap.add_argument("--compile", choices=("off", "loss", "step"), default="off",
                    help="config compile of the source-only and DMP trainers (dmp/train/compiled.py; the two-domain CE "
                    "step, which has no loss terms to compile, stays eager under loss and is compiled like the DMP "
                    "step under step); compilation happens in the warm-up steps, outside the timings. The ATen op "
                    "count is printed for compile=off only")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    b = args.batch
    shape = (args.in_dim,) if args.backbone == "identity" else (3, args.size, args.size)
    x = torch.randn(2 * b, *shape, generator=g)
    y = torch.randint(0, args.classes, (2 * b,), generator=g)
    ds = TensorDataset(x, y)
    task = Task(ds, ds, ds, ds, [f"c{i}" for i in range(args.classes)], 3,
                args.in_dim if args.backbone == "identity" else None, "benchmark")
    xs, ys, xt = x[:b].to(device), y[:b].to(device), x[b:].to(device)

    def trainer(method):
        cfg = resolve(dict(dataset="benchmark", source="s", target="t", preset="none", method=method,
                           backbone=args.backbone, pretrained=False, batch_size=b, bottleneck_dims=args.dims,
                           metric=args.metric, intra_start=0, iterations=10**6, device=args.device,
                           precision=args.precision, compile=args.compile))
        t = Trainer(cfg, task, Path(tempfile.mkdtemp()), progress=False)
        t.refresh_anchors()
        return t

    dmp, src = trainer("dmp"), trainer("source_only")
    src.model.load_state_dict(dmp.model.state_dict())

    if args.compile == "step":  # the reference compiled as the DMP step is (CUDA graphs on CUDA with inductor)
        src.ce_objective = compile_function(ce_objective, dmp.compiled.cuda_graphs)

    def both_ce():
        two_domain_ce(src, xs, ys, xt)

    first = {}  # --compile: the first step compiles its graphs (later steps reuse them)
    if args.compile != "off":
        first["source-only"] = timed(lambda: src.step(100, xs, ys, None, log=False), 1, warmup=0, device=device)
        first["DMP"] = timed(lambda: dmp.step(100, xs, ys, xt, log=False), 1, warmup=0, device=device)
        if args.compile == "step":
            first["two-domain CE"] = timed(both_ce, 1, warmup=0, device=device)
    t_src = timed(lambda: src.step(100, xs, ys, None, log=False), args.repeats, device=device)
    t_both = timed(both_ce, args.repeats, device=device)
    t_dmp = timed(lambda: dmp.step(100, xs, ys, xt, log=False), args.repeats, device=device)

    def refresh(partial):
        dmp.cfg["setting"] = "partial" if partial else "vanilla"
        n_s, n_t = args.n_source, args.n_target if partial else 0
        reps = (n_s + n_t) / (len(ds) * (2 if partial else 1))  # the partial pass covers ds as source and as target
        return timed(dmp.refresh_anchors, 3, warmup=1, device=device) * reps

    t_up = math.ceil(args.n_source / b)
    print(f"backbone={args.backbone} input={tuple(shape)} batch={b} dims={args.dims} classes={args.classes} "
          f"metric={args.metric} threads={torch.get_num_threads()} torch={torch.__version__} device="
          f"{torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'} precision={args.precision} "
          f"compile={args.compile}")
    if first:
        print(f"first step (compile={args.compile}) " + ", ".join(f"{k} {v:.1f} s" for k, v in first.items()))
    print(f"source-only step            {t_src * 1e3:9.1f} ms")
    print(f"two-domain CE-only step     {t_both * 1e3:9.1f} ms")
    print(f"DMP step                    {t_dmp * 1e3:9.1f} ms")
    print(f"DMP / two-domain CE         {t_dmp / t_both:9.3f}   (cost of DMP's losses; goal <= 1.10)")
    print(f"DMP / source-only           {t_dmp / t_src:9.3f}   (end to end; paper's table: 1.6x on A->W)")
    if args.compile == "off":  # (a compiled step dispatches its graphs' ops, not the eager ones: not comparable)
        ops_dmp, ops_both = count(lambda: dmp.step(100, xs, ys, xt, log=False)), count(both_ce)
        extra, reads = ops_dmp.total - ops_both.total, sum(ops_dmp.syncs.values())
        print(f"ATen ops per step           two-domain CE {ops_both.total}, DMP {ops_dmp.total}: extra {extra} (goal "
              f"<= 281), host reads in the DMP step {reads} (goal 0)   [benchmarks/op_count.py]")
    for partial in (False, True):
        t_r = refresh(partial)
        share = t_r / (t_r + t_up * t_dmp)
        print(f"anchor refresh ({'partial' if partial else 'vanilla'}: {args.n_source}"
              f"{' + ' + str(args.n_target) if partial else ''} samples) {t_r:7.2f} s every T_up={t_up} "
              f"iterations -> {100 * share:5.1f} % of training time (goal <= 5 %)")
    if args.profile:
        for name, fn in (("DMP step", lambda: dmp.step(100, xs, ys, xt, log=False)), ("two-domain CE step", both_ce)):
            print(f"\n== torch.profiler: {args.profile} x {name}")
            profile(fn, args.profile, device)


if __name__ == "__main__":
    main()
