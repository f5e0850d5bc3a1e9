"""Check (prints figures; not a test, needs a GPU): is a DMP run with ``deterministic: true`` bit-reproducible on CUDA?

Builds the trainer twice from the same seed (random-init backbone, random batches drawn from a fixed generator),
refreshes the anchors and runs ``--steps`` DMP steps (every term on: intra_start = 0) with ``Trainer.step``, then
compares every parameter and buffer of the two models bit for bit, and times the steps. ``--fill off`` turns off
PyTorch's filling of new tensors under deterministic algorithms (``torch.utils.deterministic.
fill_uninitialized_memory``), which only matters if an operation reads memory it never wrote.

    python benchmarks/cuda_determinism.py --fill on
    python benchmarks/cuda_determinism.py --fill off
    python benchmarks/cuda_determinism.py --resume     # a run stopped and resumed against an uninterrupted one

``--resume`` trains one run (``dmp.train.train``, the trainer's own loop: streams, anchor refreshes, checkpoints)
uninterrupted, and once stopped at half and resumed from its checkpoint in a new trainer, and compares their
log.csv (every logged loss term) and final metrics bit for bit, with the trainer's own settings (``--fill`` does not
apply).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dmp.config import resolve  # noqa: E402
from dmp.data.inputs import Task, TensorDataset  # noqa: E402
from dmp.train.trainer import Trainer  # noqa: E402


def one_run(args, device):
    g = torch.Generator().manual_seed(0)
    n = 4 * args.batch
    x = torch.randn(n, 3, args.size, args.size, generator=g)
    y = torch.randint(0, args.classes, (n,), generator=g)
    ds = TensorDataset(x, y)
    task = Task(ds, ds, ds, ds, [f"c{i}" for i in range(args.classes)], 3, None, "determinism")
    cfg = resolve(dict(dataset="determinism", source="s", target="t", preset="none", method="dmp",
                       backbone=args.backbone, pretrained=False, batch_size=args.batch, intra_start=0,
                       iterations=10**6, device=device.type, precision=args.precision, deterministic=True, seed=0))
    trainer = Trainer(cfg, task, Path(tempfile.mkdtemp(prefix="dmp-determinism-")), progress=False)
    torch.utils.deterministic.fill_uninitialized_memory = args.fill == "on"
    trainer.refresh_anchors()
    batches = [(x[i * args.batch:(i + 1) * args.batch].to(device), y[i * args.batch:(i + 1) * args.batch].to(device))
               for i in range(4)]
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for it in range(args.steps):
        xs, ys = batches[it % 4]
        xt, _ = batches[(it + 1) % 4]
        trainer.step(it, xs, ys, xt, log=it % 10 == 0)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / args.steps
    return {k: v.detach().cpu().clone() for k, v in trainer.model.state_dict().items()}, seconds


def resume_check(args, device) -> bool:
    from dmp.train import train

    g = torch.Generator().manual_seed(0)
    n = 6 * args.batch
    x = torch.randn(n, 3, args.size, args.size, generator=g)
    y = torch.randint(0, args.classes, (n,), generator=g)
    task = lambda: Task(TensorDataset(x, y), TensorDataset(x, y), TensorDataset(x.flip(3), y),  # noqa: E731
                        TensorDataset(x.flip(3), y), [f"c{i}" for i in range(args.classes)], 3, None, "determinism")
    cfg = dict(dataset="determinism", source="s", target="t", preset="none", method="dmp", backbone=args.backbone,
               pretrained=False, batch_size=args.batch, intra_start=10, anchor_period=8, iterations=args.steps,
               checkpoint_every=1000, device=device.type, precision=args.precision, deterministic=True, seed=0,
               save_features=0)
    start = time.perf_counter()
    # (the trainer sets the memory fill itself: --fill is unused); the runs' folders are removed after
    with tempfile.TemporaryDirectory(prefix="dmp-resume-") as scratch:
        root = Path(scratch)
        full = train(cfg, root / "a", task=task(), progress=False)
        half = train(cfg, root / "b", task=task(), progress=False, stop_after=args.steps // 2)
        resumed = train(cfg, root / "b", task=task(), progress=False)
        same_log = (root / "a" / "log.csv").read_text() == (root / "b" / "log.csv").read_text()
    keys = ("accuracy", "mean_class_accuracy", "per_class_accuracy", "confusion_matrix", "target_mean_prediction")
    same_metrics = all(full[k] == resumed[k] for k in keys)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"{name} torch {torch.__version__} {args.backbone} {args.size}px batch {args.batch} {args.precision}: "
          f"{args.steps} iterations, stopped at {args.steps // 2} ({half is None and 'no metrics yet'}) and resumed: "
          f"log.csv {'identical' if same_log else 'DIFFERS'}, final metrics {'identical' if same_metrics else 'DIFFER'} "
          f"(accuracy {full['accuracy']:.4f} / {resumed['accuracy']:.4f}; {time.perf_counter() - start:.0f} s)")
    return same_log and same_metrics


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--fill", choices=("on", "off"), default="on")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--backbone", default="resnet50")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--classes", type=int, default=31)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--resume", action="store_true", help="compare a stopped-and-resumed run with an uninterrupted one")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if args.resume:
        return 0 if resume_check(args, device) else 1
    (a, t_a), (b, t_b) = one_run(args, device), one_run(args, device)
    differ = [k for k in a if not torch.equal(a[k], b[k])]
    worst = max((float((a[k].double() - b[k].double()).abs().max()) for k in differ), default=0.0)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"{name} torch {torch.__version__} {args.backbone} {args.size}px batch {args.batch} {args.precision} "
          f"fill_uninitialized_memory={args.fill}: {args.steps} DMP steps, {t_a * 1e3:.1f} / {t_b * 1e3:.1f} ms per step; "
          f"{len(a) - len(differ)} of {len(a)} tensors bit-identical"
          + (f", {len(differ)} differ (max abs {worst:.3g}; e.g. {differ[:3]})" if differ else ""))
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
