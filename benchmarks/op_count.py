"""Benchmark (prints figures; not a test): CPU proxies of the host cost of a DMP step.

A GPU step whose kernels are small is bound by the host: Python and the dispatcher launch one kernel per ATen
operation, and every device-to-host read stalls the queue. Both are counted on the CPU, where they are the same,
with a ``TorchDispatchMode`` that sees every ATen operation the step dispatches (forward, backward, optimiser):

* **extra ops** = operations of one ``Trainer.step(..., log=False)`` of DMP (anchors ready, every term on)
  minus those of the two-domain cross-entropy step of the same model (both batches forward and backward, CE
  only: ``step_probes.both_ce``). Goal: at most 281 extra ops per step (ResNet-50, batch 8, layers 1024/512, 31
  classes).
* **syncing ops** = reads of device memory on the host (``aten::_local_scalar_dense``, and at the Python level
  ``.item()``, ``.tolist()``, ``.numpy()``, ``float(t)``, python ``if tensor``) and operations whose output shape
  depends on the data (``nonzero``, boolean-mask indexing, ``masked_select``, ``unique``...): each waits for the
  GPU. Goal: 0 per non-logging step.

    python benchmarks/op_count.py                                  # ResNet-50, batch 8, 1024/512, 31 classes
    python benchmarks/op_count.py --metric LE --setting partial --ops 15   # + the 15 most frequent extra ops

Two counts: the CPU path (the manifold distances make one LAPACK/BLAS call per matrix of a batch, which keeps the
CPU numbers bit for bit) and the device path (one call per batch, as on a GPU); the goal is about the device path.

The counts depend on the model and the config, not on the image size (``--size``, default 32, only makes it fast).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dmp.config import resolve  # noqa: E402
from dmp.data.inputs import Task, TensorDataset  # noqa: E402
from dmp.manifolds import spectral  # noqa: E402
from dmp.train.trainer import Trainer  # noqa: E402
from step_probes import OpCounter, both_ce, count  # noqa: E402


def build(method: str, *, backbone="resnet50", size=32, in_dim=64, batch=8, classes=31, dims=(1024, 512),
          metric="G", setting="vanilla", anchor_mode="full_pass", seed=0, **overrides):
    """A trainer (random init, anchors ready, every DMP term on from iteration 0) and one batch per domain."""
    g = torch.Generator().manual_seed(seed)
    shape = (in_dim,) if backbone == "identity" else (3, size, size)
    x = torch.randn(2 * batch, *shape, generator=g)
    y = torch.arange(2 * batch) % classes  # every class the batch can hold, so that no term is trivially zero
    ds = TensorDataset(x, y)
    task = Task(ds, ds, ds, ds, [f"c{i}" for i in range(classes)], 3, in_dim if backbone == "identity" else None,
                "benchmark")
    cfg = resolve(dict(dataset="benchmark", source="s", target="t", preset="none", method=method, backbone=backbone,
                       pretrained=False, batch_size=batch, bottleneck_dims=list(dims), metric=metric,
                       setting=setting, anchor_mode=anchor_mode, intra_start=0, inter_start=0, iterations=10**6,
                       device="cpu", seed=seed, **overrides))
    trainer = Trainer(cfg, task, Path(tempfile.mkdtemp(prefix="dmp-opcount-")), progress=False)
    if method not in ("source_only", "source_only_bn"):
        if anchor_mode == "accumulate":
            trainer.anchors.add_source(*[[f.detach() for f in trainer.forward(x[:batch])[0]], y[:batch]])
        trainer.refresh_anchors()
    return trainer, (x[:batch], y[:batch], x[batch:])


def step_counts(trainer, batches, it: int = 100, log: bool = False, warmup: int = 1) -> OpCounter:
    """Ops of ``trainer.step(it, ...)`` (after ``warmup`` uncounted steps: the optimiser state exists)."""
    for i in range(warmup):
        trainer.step(it + i, *batches, log=log)
    return count(lambda: trainer.step(it + warmup, *batches, log=log))


def extra_ops(batch=8, classes=31, dims=(1024, 512), backbone="resnet50", method="dmp", **kw):
    """``(dmp_counter, two_domain_ce_counter)`` of one step each (``method``: a DMP variant), on the same model."""
    dmp, batches = build(method, batch=batch, classes=classes, dims=dims, backbone=backbone, **kw)
    ce, _ = build("source_only", batch=batch, classes=classes, dims=dims, backbone=backbone,
                  **{k: v for k, v in kw.items() if k in ("size", "in_dim", "seed")})
    xs, ys, xt = batches
    both_ce(ce, xs, ys, xt)  # warm-up: the optimiser state exists
    return step_counts(dmp, batches), count(lambda: both_ce(ce, xs, ys, xt))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backbone", default="resnet50")
    ap.add_argument("--size", type=int, default=32, help="image side (the counts do not depend on it)")
    ap.add_argument("--in-dim", type=int, default=64, help="feature dim (identity backbone)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--classes", type=int, default=31)
    ap.add_argument("--dims", type=int, nargs="+", default=[1024, 512])
    ap.add_argument("--metric", default="G")
    ap.add_argument("--setting", default="vanilla", choices=("vanilla", "partial"))
    ap.add_argument("--method", default="dmp")
    ap.add_argument("--anchor-mode", default="full_pass", choices=("full_pass", "accumulate"))
    ap.add_argument("--ops", type=int, default=0, metavar="N", help="also list the N most frequent extra ops")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    kw = dict(backbone=args.backbone, size=args.size, in_dim=args.in_dim, batch=args.batch, classes=args.classes,
              dims=args.dims, metric=args.metric, setting=args.setting, anchor_mode=args.anchor_mode,
              method=args.method, **({"entropy_weight": 0.1} if args.method == "dmp_ent" else {}))
    print(f"method={args.method} backbone={args.backbone} batch={args.batch} dims={args.dims} classes={args.classes} "
          f"metric={args.metric} "
          f"setting={args.setting} anchor_mode={args.anchor_mode} torch={torch.__version__}")
    out = {}
    for path, per_matrix in (("CPU path", True), ("device path", False)):
        # CPU path: the manifold distances work matrix by matrix (bit-identical CPU numbers);
        # device path: one call per batch, what a GPU step dispatches (dmp.manifolds.spectral.PER_MATRIX_ON_CPU).
        spectral.PER_MATRIX_ON_CPU = per_matrix
        try:
            dmp_counter, ce_counter = extra_ops(**kw)
        finally:
            spectral.PER_MATRIX_ON_CPU = True
        extra = dmp_counter.total - ce_counter.total
        syncs = sum(dmp_counter.syncs.values())
        print(f"{path}: two-domain CE step {ce_counter.total} ATen ops, DMP step (log=False) {dmp_counter.total}")
        print(f"  extra ops per DMP step    {extra:6d}   (goal <= 281: "
              f"{'ok' if extra <= 281 else 'NOT MET'})")
        print(f"  syncing ops per DMP step  {syncs:6d}   (goal 0: {'ok' if syncs == 0 else 'NOT MET'})"
              + (f"  {dict(dmp_counter.syncs)}" if syncs else ""))
        if args.ops:
            diff = dmp_counter.counts - ce_counter.counts
            print("  most frequent extra ops: " + ", ".join(f"{k} {v}" for k, v in diff.most_common(args.ops)))
        out[path] = {"extra_ops": extra, "dmp_ops": dmp_counter.total, "two_domain_ce_ops": ce_counter.total,
                     "syncs": syncs}
    return out


if __name__ == "__main__":
    main()
