"""Benchmark (prints figures; not a test): the input cache (config ``input_cache``, dmp/data/cache.py) on the demo.

1. identity: the batches of the cached path, converted on ``--device`` (cuda: /255 and the ImageNet normalisation
   run on the GPU), against the uncached pipeline on the CPU (decode, torchvision resize, ToTensor, Normalize,
   RandomCrop, RandomHorizontalFlip per sample): the largest absolute difference over training batches (the trainer's
   streams, per-sample seeds) and evaluation batches (centre crop); 0 = bit-identical.
2. the anchor-pass share of an epoch: the demo's preset (DMP, anchors refreshed every epoch by a full no-grad pass)
   trained ``--epochs`` epochs with input_cache off and on, in one process each after the other: the trainer's own
   ``anchor_seconds / wall_seconds`` and wall seconds per epoch (metrics.json).

Reads the demo dataset in place (``python -m dmp data demo``) and builds its cache beside it (not tracked).

    python benchmarks/input_cache.py                      # CPU, the demo as `make demo` trains it (1 thread)
    python benchmarks/input_cache.py --device cuda
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dmp.config import resolve  # noqa: E402
from dmp.data import cache, registry  # noqa: E402
from dmp.data.inputs import BatchStream, build_task, eval_loader  # noqa: E402
from dmp.train.trainer import Trainer  # noqa: E402


def identity(base: dict, device: str, iterations: int = 8) -> dict:
    """Largest absolute difference between the cached batches (converted on ``device``) and the uncached ones."""
    plain = build_task(resolve({**base, "input_cache": False}))
    cached = build_task(resolve({**base, "input_cache": True}))
    cached.place(device)
    b = resolve(base)["batch_size"]
    worst = {"train": 0.0, "eval": 0.0}
    batches = {"train": 0, "eval": 0}
    for sid, part in enumerate(("source_train", "target_train")):
        for (xw, yw), (xg, yg) in zip(BatchStream(getattr(plain, part), b, 0, sid).iterate(0, iterations),
                                      BatchStream(getattr(cached, part), b, 0, sid).iterate(0, iterations)):
            assert torch.equal(yw, yg.cpu())
            worst["train"] = max(worst["train"], float((xw - xg.cpu()).abs().max()))
            batches["train"] += 1
    for part in ("source_eval", "target_eval"):
        for (xw, yw), (xg, yg) in zip(eval_loader(getattr(plain, part), 256), eval_loader(getattr(cached, part), 256)):
            worst["eval"] = max(worst["eval"], float((xw - xg.cpu()).abs().max()))
            batches["eval"] += 1
    return {"max_abs_difference": worst, "batches": batches}


def anchor_share(base: dict, epochs: int, threads: int, out: Path) -> dict:
    res = {}
    for on in (False, True):
        cfg = resolve({**base, "input_cache": on, "epochs": epochs, "threads": threads, "save_features": 0,
                       "pretrained": False})
        start = time.perf_counter()
        m = Trainer(cfg, build_task(cfg), out / f"cache_{on}", progress=False).run()
        res["on" if on else "off"] = {
            "anchor_share": m["anchor_seconds"] / m["wall_seconds"], "anchor_seconds": m["anchor_seconds"],
            "wall_seconds": m["wall_seconds"], "seconds_per_epoch_wall": m["seconds_per_epoch_wall"],
            "anchor_seconds_per_pass": m["anchor_seconds"] / epochs, "process_seconds": time.perf_counter() - start,
            "accuracy": m["accuracy"], "iterations": m["iterations"], "data_workers": m["data_workers"]}
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--task", default="solid-outline", help="demo task SOURCE-TARGET (default: solid-outline)")
    ap.add_argument("--epochs", type=int, default=3, help="epochs of each demo run (default: 3)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default: 1, as a demo job)")
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    source, target = args.task.split("-")
    base = {"dataset": "demo", "source": source, "target": target, "device": args.device}
    torch.set_num_threads(args.threads)
    registry.require_dataset(registry.get_dataset("demo"))
    size = resolve(base)["resize"]
    t0 = time.perf_counter()
    for d in (source, target):
        cache.build("demo", d, size, progress=False)
    built = time.perf_counter() - t0
    dev = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    res = {"device": args.device, "device_name": dev, "task": args.task, "threads": args.threads,
           "cache_build_or_check_seconds": built, "identity": identity(base, args.device)}
    with tempfile.TemporaryDirectory(prefix="dmp-input-cache-") as tmp:
        res["anchor_share"] = anchor_share(base, args.epochs, args.threads, Path(tmp))
    ident = res["identity"]
    print(f"input cache benchmark: demo {args.task}, device {args.device} ({dev}), {args.threads} thread(s), torch "
          f"{torch.__version__}")
    print(f"identity with the uncached CPU pipeline: max |difference| train {ident['max_abs_difference']['train']:.3g} "
          f"({ident['batches']['train']} batches), eval {ident['max_abs_difference']['eval']:.3g} "
          f"({ident['batches']['eval']} batches) (0 = bit-identical)")
    for k, r in res["anchor_share"].items():
        print(f"input_cache {k:3s}: anchor pass {100 * r['anchor_share']:5.1f} % of the training loop's wall time "
              f"({r['anchor_seconds_per_pass']:.3f} s a pass), {r['seconds_per_epoch_wall']:.2f} s per epoch wall, "
              f"{r['iterations']} iterations, accuracy {r['accuracy']:.2f} %, data workers {r['data_workers']}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")
    return res


if __name__ == "__main__":
    main()
