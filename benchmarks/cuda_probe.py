"""Benchmark (prints findings; not a test): what in a DMP step waits for the host, and whether the step can be
captured as a CUDA graph or compiled. Needs a CUDA device (on the CPU it says so and stops).

1. **Host synchronisations**: one non-logging DMP step (the trainer's own ``Trainer.step``) under
   ``torch.cuda.set_sync_debug_mode("warn")``; each synchronising call is listed with the innermost frame of this
   project's code that made it.
2. **CUDA graph capture** of the forward passes, the DMP losses and the backward (``torch.cuda.graph``; no
   optimizer): does it capture, and does a replay give the loss of an eager step?
3. **Batched eigen-decomposition** on the device: ``torch.linalg.eigh`` of the step's Gram matrices (float64,
   ``[B, n, n]``), host and device time per call, against the same on the host (copies included). (A host LAPACK
   path for the whole step was measured on an H200 and removed: 17.9-24.4 ms against 11.2-14.1 ms per DMP step,
   results/benchmarks/h200-2026-11-27/probe.log.)
4. **torch.compile of the loss terms** (``default`` and ``reduce-overhead``): compile time, step time, and the loss
   difference to the eager step.

    python benchmarks/cuda_probe.py --batch 50 --in-dim 2048          # the identity backbone: the losses alone
    python benchmarks/cuda_probe.py --backbone resnet50 --size 224    # the whole step
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dmp import methods  # noqa: E402
from dmp.config import resolve  # noqa: E402
from dmp.data.inputs import Task, TensorDataset  # noqa: E402
from dmp.train.trainer import Trainer  # noqa: E402

ROOT = str(Path(__file__).resolve().parents[1])


def build(args, method="dmp"):
    g = torch.Generator().manual_seed(0)
    b = args.batch
    shape = (args.in_dim,) if args.backbone == "identity" else (3, args.size, args.size)
    x, y = torch.randn(2 * b, *shape, generator=g), torch.randint(0, args.classes, (2 * b,), generator=g)
    ds = TensorDataset(x, y)
    task = Task(ds, ds, ds, ds, [f"c{i}" for i in range(args.classes)], 3,
                args.in_dim if args.backbone == "identity" else None, "probe")
    cfg = resolve(dict(dataset="probe", source="s", target="t", preset="none", method=method, backbone=args.backbone,
                       pretrained=False, batch_size=b, bottleneck_dims=args.dims, metric=args.metric, intra_start=0,
                       iterations=10**6, device="cuda", precision=args.precision))
    t = Trainer(cfg, task, Path(tempfile.mkdtemp()), progress=False)
    t.refresh_anchors()
    return t, x[:b].cuda(), y[:b].cuda(), x[b:].cuda()


def loss_of(t, xs, ys, xt, losses_fn=None):
    """The DMP objective of one step (as Trainer.step builds it), without the optimizer."""
    feats_s, logits_s = t.forward(xs)
    ce = F.cross_entropy(logits_s, ys)
    ctx = methods.StepContext(t.cfg, 100, 0.5, t.sched, t.task.num_classes, t.device, feats_s, logits_s, ys,
                              anchors=t.anchors, mean_prediction=t.anchors.mean_prediction, modules=None)
    ctx.feats_t, ctx.logits_t = t.forward(xt)
    ctx.p_t = torch.softmax(ctx.logits_t, 1)
    ctx.class_weights = t._device_weights()
    terms = (losses_fn or t.method.losses)(ctx)
    return t.method.total(ce, terms, ctx)


def syncs(t, xs, ys, xt):
    found = []

    def show(message, category, filename, lineno, file=None, line=None):
        frames = [f for f in traceback.extract_stack() if f.filename.startswith(ROOT) and "cuda_probe" not in f.filename]
        if frames:
            where = f"{Path(frames[-1].filename).relative_to(ROOT)}:{frames[-1].lineno} {frames[-1].line}"
        else:  # not from this project's frames (the autograd engine's thread, the optimizer): torch's frames
            where = " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.line}" for f in traceback.extract_stack()[-4:-1])
        found.append(where)

    t.step(100, xs, ys, xt, log=False)
    torch.cuda.synchronize()
    old = warnings.showwarning
    warnings.showwarning = show
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = show
            t.step(101, xs, ys, xt, log=False)
    finally:
        torch.cuda.set_sync_debug_mode("default")
        warnings.showwarning = old
    torch.cuda.synchronize()
    print(f"[sync] {len(found)} synchronising calls in one non-logging DMP step")
    for where in sorted(set(found)):
        print(f"[sync]   {found.count(where)} x {where}")


def capture(t, xs, ys, xt):
    model_params = [p for p in t.model.parameters() if p.requires_grad]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            loss = loss_of(t, xs, ys, xt)
            loss.backward()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            static_loss = loss_of(t, xs, ys, xt)
            static_loss.backward()
    except Exception as exc:  # noqa: BLE001 - a probe reports what failed
        print(f"[graph] capture FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
        return
    graph.replay()
    torch.cuda.synchronize()
    eager = loss_of(t, xs, ys, xt)
    print(f"[graph] captured; replay loss {float(static_loss):.6f}, eager loss {float(eager):.6f}")
    t0 = time.perf_counter()
    for _ in range(20):
        graph.replay()
    torch.cuda.synchronize()
    t_graph = (time.perf_counter() - t0) / 20
    t0 = time.perf_counter()
    for _ in range(20):
        for p in model_params:
            p.grad = None
        loss_of(t, xs, ys, xt).backward()
    torch.cuda.synchronize()
    t_eager = (time.perf_counter() - t0) / 20
    print(f"[graph] forward+losses+backward: eager {t_eager * 1e3:.1f} ms, graph replay {t_graph * 1e3:.1f} ms")


def eigh_cost(args):
    n, B = args.batch, 2 * len(args.dims)
    a = torch.randn(B, n, 2 * n, dtype=torch.float64, device="cuda")
    gram = a @ a.mT
    for _ in range(3):
        torch.linalg.eigh(gram)
    torch.cuda.synchronize()
    reps = 50
    t0 = time.perf_counter()
    for _ in range(reps):
        torch.linalg.eigh(gram)
    host = (time.perf_counter() - t0) / reps
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / reps
    print(f"[eigh] batched [{B}, {n}, {n}] float64: host {host * 1e3:.2f} ms per call, wall {wall * 1e3:.2f} ms")
    t0 = time.perf_counter()
    for _ in range(reps):
        evals, evecs = gram.cpu(), None
        evals, evecs = torch.linalg.eigh(evals)
        evals, evecs = evals.to("cuda"), evecs.to("cuda")
    torch.cuda.synchronize()
    print(f"[eigh] same on the host (copy, LAPACK, copy back; {torch.get_num_threads()} threads): wall "
          f"{(time.perf_counter() - t0) / reps * 1e3:.2f} ms per call")
    g32 = gram.float()
    t0 = time.perf_counter()
    for _ in range(reps):
        torch.linalg.eigh(g32)
    torch.cuda.synchronize()
    print(f"[eigh] same in float32: wall {(time.perf_counter() - t0) / reps * 1e3:.2f} ms per call")


def compiled(args, t, xs, ys, xt):
    def timed(fn, reps=20):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / reps

    def step(losses_fn=None):
        loss = loss_of(t, xs, ys, xt, losses_fn)
        t.opt.zero_grad(set_to_none=True)
        loss.backward()
        return loss

    base = timed(step)
    ref = float(loss_of(t, xs, ys, xt))
    print(f"[compile] eager step (no optimizer step) {base * 1e3:.1f} ms")
    for mode in ("default", "reduce-overhead"):
        torch._dynamo.reset()
        fn = torch.compile(t.method.losses, mode=mode)
        try:
            t0 = time.perf_counter()
            step(fn)
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
            per = timed(lambda: step(fn))
            diff = abs(float(loss_of(t, xs, ys, xt, fn)) - ref)
            print(f"[compile] losses compiled, mode={mode}: first call {first:.1f} s, step {per * 1e3:.1f} ms, "
                  f"|loss - eager| {diff:.3g}")
        except Exception as exc:  # noqa: BLE001
            print(f"[compile] mode={mode} FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backbone", default="identity")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--in-dim", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--classes", type=int, default=31)
    ap.add_argument("--dims", type=int, nargs="+", default=[1024, 512])
    ap.add_argument("--metric", default="G")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--parts", default="sync,eigh,compile,graph")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("cuda_probe: no CUDA device here; nothing to probe")
        return
    print(f"torch {torch.__version__} | {torch.cuda.get_device_name()} | backbone {args.backbone} batch {args.batch}")
    parts = args.parts.split(",")
    t, xs, ys, xt = build(args)
    # The capture runs last: a failed capture can leave the stream unusable.
    for part, fn in (("sync", lambda: syncs(t, xs, ys, xt)), ("eigh", lambda: eigh_cost(args)),
                     ("compile", lambda: compiled(args, t, xs, ys, xt)), ("graph", lambda: capture(t, xs, ys, xt))):
        if part in parts:
            try:
                fn()
            except Exception as exc:  # noqa: BLE001
                print(f"[{part}] ERROR {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
