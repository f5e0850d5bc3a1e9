"""Benchmark (prints figures; not a test): DMP training throughput at the paper's scale, in one process.

Generates JPEG images in the Office-31 layout (``<domain>/images/<class>/frame_NNNN.jpg``, 31 classes) at the
real image sizes (Amazon 300x300, Webcam 640x480, DSLR 1000x1000) in a temporary folder, then times, with the
trainer's own code (``ImageListDataset`` + ``image_transforms``, ``BatchStream``, ``Trainer.step``,
``Trainer.refresh_anchors``) on a RANDOMLY INITIALISED ResNet-50 (timing only: no accuracy is measured):

* the input pipeline alone (decode, resize, crop, flip, normalise, collate; pinned and copied to the device);
* the model step alone on batches already on the device, for source-only, the two-domain cross-entropy step
  (forward/backward of the source and the target batch: the work of any two-domain method) and DMP;
* end to end: the trainer's streams feeding ``Trainer.step`` as ``Trainer.run`` does (without anchor passes);
* one full anchor pass (Algorithm DMP's no-grad pass over the source set), scaled to the real set size.

and prints the ratios against their goals: end-to-end / model-only (>= 0.9), DMP / two-domain CE step
(<= 1.10), DMP / source-only per epoch (the paper's time table: 10.7 / 6.7 = 1.6 on A->W) and the anchor-pass
share of an epoch (<= 5 %).

    python benchmarks/throughput.py --device cuda --size real                  # the paper's scale (GPU)
    python benchmarks/throughput.py --device cuda --size real --precision bf16 --cudnn-benchmark
    python benchmarks/throughput.py --device cpu --size small                  # seconds; checks it runs

``--size small`` keeps the real image files but crops 64x64, batches of 4 and a handful of steps: its figures
say that everything runs, not how fast the paper's protocol is.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dmp.config import resolve  # noqa: E402
from dmp.data.cached_images import device_parts  # noqa: E402
from dmp.data.inputs import (BatchStream, CachedImages, ImageListDataset, Task, image_transforms,  # noqa: E402
                             loader_options)
from dmp.train.compiled import compile_function  # noqa: E402
from dmp.train.trainer import Trainer  # noqa: E402
from step_probes import both_ce, ce_objective, count  # noqa: E402
from torch.utils.data import Subset  # noqa: E402

# Office-31 image sizes (width, height) and domain sizes; the paper's time-table task is A->W.
DOMAINS = {"amazon": (300, 300), "webcam": (640, 480), "dslr": (1000, 1000)}
OFFICE31_SIZES = {"amazon": 2817, "webcam": 795, "dslr": 498}
PAPER_RATIO = 10.7 / 6.7  # DMP / ResNet s/E on Office-31 A->W, the paper's time table (GTX TITAN Xp)
SIZES = {
    # resize, crop, batch, measured steps, warm-up steps, generated images per domain
    "real": dict(resize=256, crop=224, batch=50, steps=60, warmup=5, images=200),
    "small": dict(resize=72, crop=64, batch=4, steps=4, warmup=2, images=12),
}
LOG_EVERY = 10  # the trainer's default: a log row (one host-device synchronisation) every 10 steps


def office31_classes():
    try:
        from dmp.data import registry
        return list(registry.get_dataset("office31").classes)
    except Exception:  # registry unavailable: the layout only needs 31 folder names
        return [f"class{i:02d}" for i in range(31)]


def make_images(root: Path, domain: str, n: int, classes: list[str], seed: int = 0) -> Path:
    """``n`` photo-like JPEGs (smooth colour fields + sensor noise, quality 90) of the domain's real size, in the
    Office-31 layout; returns the list file (``relative/path label`` lines)."""
    from PIL import Image

    rng = np.random.default_rng([seed, list(DOMAINS).index(domain)])
    w, h = DOMAINS[domain]
    lines = []
    for i in range(n):
        label = i % len(classes)
        rel = Path(domain) / "images" / classes[label] / f"frame_{i:04d}.jpg"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        base = Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)).resize((w, h), Image.BICUBIC)
        pixels = np.asarray(base, dtype=np.int16) + rng.integers(-12, 13, (h, w, 3), dtype=np.int16)
        Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(root / rel, quality=90)
        lines.append(f"{rel.as_posix()} {label}")
    list_file = root / f"{domain}_list.txt"
    list_file.write_text("\n".join(lines) + "\n")
    return list_file


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, steps: int, warmup: int, device) -> float:
    """Mean seconds per call of ``fn(i)`` over ``steps`` calls after ``warmup`` calls (device work
    included: synchronised before and after)."""
    for i in range(warmup):
        fn(i)
    sync(device)
    start = time.perf_counter()
    for i in range(warmup, warmup + steps):
        fn(i)
    sync(device)
    return (time.perf_counter() - start) / steps


def pipeline_rate(streams, trainer, steps, warmup) -> float:
    """Images/s of ``streams`` iterated in lock step (as the trainer does), pinned and copied to the device."""
    iters = [s.iterate(0, warmup + steps, trainer.pin_memory) for s in streams]
    images = 0
    for i, batches in enumerate(zip(*iters)):
        if i == warmup:
            sync(trainer.device)
            start, images = time.perf_counter(), 0
        for x, _ in batches:
            trainer.to_device(x)
            images += len(x)
    sync(trainer.device)
    return images / (time.perf_counter() - start)


def in_memory_batches(trainer, k):
    """``k`` source and target batches of the trainer's own streams, already on the device."""
    src = [(trainer.to_device(x), y.to(trainer.device)) for x, y in trainer.source.iterate(0, k)]
    tgt = [trainer.to_device(x) for x, _ in trainer.target.iterate(0, k)]
    return src, tgt


def end_to_end(trainer, dmp: bool, steps, warmup) -> tuple[float, float, float]:
    """Seconds per iteration of the trainer's loop (``Trainer.run``) without anchor passes: the streams' batches
    fed to ``Trainer.step``, a log row every LOG_EVERY steps. Also the host's seconds per iteration spent getting
    the next batches (waiting for the loader, or cutting cached crops) and inside ``Trainer.step``, over the measured
    steps: where the loop's host time goes."""
    src = trainer.source.iterate(0, warmup + steps, trainer.pin_memory)
    tgt = trainer.target.iterate(0, warmup + steps, trainer.pin_memory) if dmp else None
    waited = stepped = 0.0
    t0 = time.perf_counter()
    for i, (xs, ys) in enumerate(src):
        if i == warmup:
            sync(trainer.device)
            start, waited, stepped = time.perf_counter(), 0.0, 0.0
            t0 = start
        xt = next(tgt)[0] if dmp else None
        t1 = time.perf_counter()
        trainer.step(i, xs, ys, xt, log=i % LOG_EVERY == 0)
        t2 = time.perf_counter()
        waited, stepped = waited + t1 - t0, stepped + t2 - t1
        t0 = time.perf_counter()
    sync(trainer.device)
    return (time.perf_counter() - start) / steps, waited / steps, stepped / steps


def anchor_pass(trainer, n_full: int, n_target: int, repeats: int = 2):
    """Seconds of one full anchor pass (``Trainer.refresh_anchors``) over ``n_full`` source images (+ ``n_target``
    target images, partial setting), from passes over the generated source set and its first half (the fastest of
    ``repeats`` each): a fixed cost per pass (DataLoader workers start for every pass) plus a cost per image."""
    full = trainer.task

    def once(n):
        part = (full.source_eval.subset(range(n)) if isinstance(full.source_eval, CachedImages)
                else Subset(full.source_eval, range(n)))
        trainer.task = dataclasses.replace(full, source_eval=part)
        before = trainer.anchor_seconds
        trainer.refresh_anchors()
        return trainer.anchor_seconds - before

    n = len(full.source_eval)
    try:
        once(n)  # warm-up
        t_full = min(once(n) for _ in range(repeats))
        t_half = min(once(n // 2) for _ in range(repeats))
    finally:
        trainer.task = full
        trainer.refresh_anchors()
    per_image = max(t_full - t_half, 1e-9) / (n - n // 2)
    fixed = max(t_full - per_image * n, 0.0)
    return fixed + per_image * n_full, fixed + per_image * (n_full + n_target), fixed, per_image


def build_trainer(method, task, args, size, out: Path) -> Trainer:
    over = dict(dataset="office31", source=args.source, target=args.target, setting="vanilla", method=method,
                pretrained=False, batch_size=size["batch"], resize=size["resize"], crop=size["crop"],
                device=args.device, precision=args.precision, iterations=10**6, intra_start=0,
                deterministic=not args.cudnn_benchmark, threads=args.threads, compile=args.compile,
                num_workers="auto" if args.workers is None else args.workers)
    trainer = Trainer(resolve(over), task, out / method, progress=False)
    if args.channels_last == "off" and trainer.channels_last:
        trainer.channels_last = False
        trainer.model = trainer.model.to(memory_format=torch.contiguous_format)
    return trainer


# -- GPU hours of the paper suite ---------------------------------------------------------------------------
GFLOPS = {"resnet50": 4.1, "resnet101": 7.8}  # forward, 224x224


def paper_times():
    """Per-step and per-image seconds derived from the paper's time table (GTX TITAN Xp): Office-31 A->W
    10.7 / 6.7 s per epoch (DMP / ResNet) over ceil(2817 / 50) = 57 iterations of ResNet-50, batch 50; VisDA S->R
    0.767 / 0.453 s per batch of ResNet-101, batch 32. A no-grad forward is taken as 1/3 of a training step's
    forward+backward per image."""
    it50 = {"dmp": 10.7 / 57, "source_only": 6.7 / 57}
    return {("resnet50", 50): it50, ("resnet101", 32): {"dmp": 0.767, "source_only": 0.453},
            "forward_per_image": {"resnet50": it50["source_only"] / 50 / 3, "resnet101": 0.453 / 32 / 3},
            "source": "the paper's time table (GTX TITAN Xp)"}


def measured_times(figures: dict):
    """The same inputs from a ``--size real --json`` run of this benchmark (ResNet-50, batch 50): end-to-end seconds
    per step and the anchor pass's seconds per image; ResNet-101 by its forward FLOPs."""
    it50 = {"dmp": figures["seconds_per_step"]["end_to_end_dmp"],
            "source_only": figures["seconds_per_step"]["end_to_end_source_only"]}
    fwd50 = figures["anchor_pass_seconds"]["per_image"]
    return {("resnet50", 50): it50, "forward_per_image": {"resnet50": fwd50,
                                                          "resnet101": fwd50 * GFLOPS["resnet101"] / 4.1},
            "source": f"this benchmark on {figures['device_name']} ({figures['precision']})"}


def step_seconds(times, backbone, batch, kind):
    """Seconds per training step of ``kind`` (``dmp``: source and target batches through the network, as every
    method whose loss sees the target; ``source_only``); a configuration not in ``times`` is scaled from one of the
    same batch size (else ResNet-50, batch 50) by forward FLOPs x batch size (compute-bound)."""
    if (backbone, batch) in times:
        return times[(backbone, batch)][kind]
    ref = next((k for k in times if isinstance(k, tuple) and k[1] == batch), ("resnet50", 50))
    return times[ref][kind] * GFLOPS[backbone] / GFLOPS[ref[0]] * batch / ref[1]


def suite_hours(config_path: Path, times: dict, job_overhead_s: float = 30.0) -> dict:
    """Estimated device hours of every run of ``snakemake all_tables`` for ``config_path``: per run, its
    iterations x seconds per step (``python -m dmp config --schedule``), its anchor passes (source set for a
    method with anchors, + target set for one with the mean target prediction, per refresh) and final evaluation x seconds per forward image, plus a fixed
    per-job overhead (start-up, data lists, checkpoint writes)."""
    import collections

    import yaml

    from dmp import methods
    from dmp.config import parse_overrides
    from dmp.data import registry
    from dmp.data.splits import split_size
    from dmp.suite import Suite
    from dmp.train.schedule import schedule

    suite = Suite(yaml.safe_load(Path(config_path).read_text()))
    per = collections.defaultdict(lambda: collections.Counter())
    for run in suite.all_runs():
        cfg = resolve(parse_overrides(suite.train_args(run)))
        spec = registry.get_dataset(cfg["dataset"])
        n_s = split_size(spec, cfg["source"], cfg["source_split"])
        try:
            n_t = split_size(spec, cfg["target"], cfg["target_split"])
        except Exception:  # a partial split list not prepared yet: the share of the partial classes
            n_t = round(spec.domain(cfg["target"]).count * len(spec.partial_classes) / len(spec.classes))
        sch = schedule(cfg, n_s)
        fwd = times["forward_per_image"][cfg["backbone"]]
        needs = methods.get(run.method).needs(cfg)
        passed = (n_s if needs.anchors else 0) + (n_t if needs.mean_prediction else 0)
        # A comparison method's step is counted as DMP's (both domains through the network; DMP's manifold terms
        # add at most ~10 % to the step, docs/benchmarks.md): an upper bound for them.
        kind = "dmp" if needs.target == "loss" else "source_only"
        row = per[run.dataset]
        row["runs"] += 1
        row["iterations"] += sch["iterations"]
        row["steps_s"] += sch["iterations"] * step_seconds(times, cfg["backbone"], cfg["batch_size"], kind)
        row["anchors_s"] += sch["anchor_refreshes"] * passed * fwd
        row["eval_s"] += n_t * fwd
        row["overhead_s"] += job_overhead_s
    return {k: dict(v) for k, v in per.items()}


def print_suite_hours(per: dict, times: dict, config_path, job_overhead_s):
    print(f"ESTIMATE (not a measurement): device hours of `snakemake all_tables` ({config_path}), inputs from "
          f"{times['source']}; per-job overhead {job_overhead_s:.0f} s")
    print(f"{'dataset':12s} {'runs':>5s} {'iterations':>11s} {'steps h':>8s} {'anchors h':>10s} {'eval h':>7s} "
          f"{'overhead h':>11s} {'total h':>8s}")
    total = {}
    for ds, r in sorted(per.items()):
        hours = (r["steps_s"] + r["anchors_s"] + r["eval_s"] + r["overhead_s"]) / 3600
        print(f"{ds:12s} {r['runs']:5d} {r['iterations']:11d} {r['steps_s'] / 3600:8.1f} {r['anchors_s'] / 3600:10.1f} "
              f"{r['eval_s'] / 3600:7.2f} {r['overhead_s'] / 3600:11.1f} {hours:8.1f}")
        for k in r:
            total[k] = total.get(k, 0) + r[k]
    hours = (total["steps_s"] + total["anchors_s"] + total["eval_s"] + total["overhead_s"]) / 3600
    print(f"{'all':12s} {total['runs']:5d} {total['iterations']:11d} {total['steps_s'] / 3600:8.1f} "
          f"{total['anchors_s'] / 3600:10.1f} {total['eval_s'] / 3600:7.2f} {total['overhead_s'] / 3600:11.1f} "
          f"{hours:8.1f}")
    return hours


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--compile", choices=("off", "loss", "step"), default="off",
                    help="config compile of the trainers (dmp/train/compiled.py); compiled in the warm-up steps")
    ap.add_argument("--size", choices=tuple(SIZES), default="real")
    ap.add_argument("--workers", type=int, default=None,
                    help="DataLoader workers per stream (default: the config's auto = min(8, cores - 1))")
    ap.add_argument("--channels-last", choices=("auto", "off"), default="auto",
                    help="auto: the trainer's rule (ResNet on CUDA); off: NCHW")
    ap.add_argument("--cudnn-benchmark", action="store_true",
                    help="deterministic=false, which sets torch.backends.cudnn.benchmark (CUDA)")
    ap.add_argument("--batch", type=int, help="batch size per domain (default: by --size)")
    ap.add_argument("--crop", type=int, help="crop side; images are resized to crop * 9 / 8 (default: by --size)")
    ap.add_argument("--steps", type=int, help="measured steps per figure (default: by --size)")
    ap.add_argument("--warmup", type=int, help="warm-up steps per figure (default: by --size)")
    ap.add_argument("--images", type=int, help="generated images per domain (default: by --size)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--source", default="amazon", choices=tuple(DOMAINS))
    ap.add_argument("--target", default="webcam", choices=tuple(DOMAINS))
    ap.add_argument("--n-source", type=int, help="source set size for the anchor share (default: Office-31's)")
    ap.add_argument("--n-target", type=int, help="target set size for the partial anchor share")
    ap.add_argument("--data", type=Path, help="folder for the generated images (default: a temporary one)")
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    ap.add_argument("--input-cache", action="store_true",
                    help="read the images from an input cache (config input_cache, dmp/data/cache.py) built first "
                         "from the generated JPEGs: decoded and resized once; crops, flips and normalisation of "
                         "whole batches on the device")
    ap.add_argument("--input-device", action="store_true",
                    help="with --input-cache: the cache held whole on the device, crops and flips drawn there "
                         "(config input_device, dmp/data/cached_images.py DeviceImages)")
    ap.add_argument("--suite-hours", type=Path, metavar="CONFIG",
                    help="print instead the estimated device hours of `snakemake all_tables` for this suite "
                         "config (e.g. config/config.yaml), from the paper's time table or --figures")
    ap.add_argument("--figures", type=Path, help="with --suite-hours: a --json file of a --size real run")
    ap.add_argument("--job-overhead", type=float, default=30.0, help="with --suite-hours: seconds per job")
    args = ap.parse_args(argv)
    if args.suite_hours:
        times = measured_times(json.loads(args.figures.read_text())) if args.figures else paper_times()
        per = suite_hours(args.suite_hours, times, args.job_overhead)
        return print_suite_hours(per, times, args.suite_hours, args.job_overhead)
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device is available")
    if args.input_device and not args.input_cache:
        ap.error("--input-device holds the input cache on the device: give --input-cache too")
    size = dict(SIZES[args.size])
    for key in ("batch", "crop", "steps", "warmup", "images"):
        if getattr(args, key) is not None:
            size[key] = getattr(args, key)
    if args.crop is not None:
        size["resize"] = args.crop * 9 // 8
    b, steps, warmup = size["batch"], size["steps"], size["warmup"]
    n_source = args.n_source or OFFICE31_SIZES[args.source]
    n_target = args.n_target or OFFICE31_SIZES[args.target]

    tmp = Path(tempfile.mkdtemp(prefix="dmp-throughput-"))
    data = args.data or tmp / "office31"
    try:
        classes = office31_classes()
        t0 = time.perf_counter()
        lists = {d: make_images(data, d, size["images"], classes) for d in DOMAINS}
        gen_s = time.perf_counter() - t0
        cache_s = None
        if args.input_cache:  # the cache of each domain's images, then its crops as the trainer reads them
            from dmp.params import resolve_workers
            from dmp.data.cache import write_pixels
            from dmp.data.registry import read_list
            t0, held = time.perf_counter(), {}
            for d in DOMAINS:
                entries = read_list(lists[d])
                write_pixels(tmp / "cache" / f"{d}.npy", data, [p for p, _ in entries], size["resize"],
                             resolve_workers("auto" if args.workers is None else args.workers), progress=False)
                held[d] = (np.load(tmp / "cache" / f"{d}.npy", mmap_mode="r"), np.arange(len(entries)),
                           [lab for _, lab in entries])
            cache_s = time.perf_counter() - t0
            if args.input_device:  # the three domains in one uint8 tensor on the device (config input_device)
                roles = [*((d, True) for d in DOMAINS), (args.source, False), (args.target, False)]
                *parts, src_eval, tgt_eval = device_parts({d: held[d] for d in DOMAINS}, size["crop"], roles)
                ds = dict(zip(DOMAINS, parts))
            else:
                ds = {d: CachedImages(*held[d], size["crop"], True) for d in DOMAINS}
                src_eval = CachedImages(*held[args.source], size["crop"], False)
                tgt_eval = CachedImages(*held[args.target], size["crop"], False)
        else:
            train_tf = image_transforms(True, size["resize"], size["crop"])
            eval_tf = image_transforms(False, size["resize"], size["crop"])
            ds = {d: ImageListDataset(data, lists[d], train_tf, num_classes=len(classes)) for d in DOMAINS}
            src_eval = ImageListDataset(data, lists[args.source], eval_tf, num_classes=len(classes))
            tgt_eval = ImageListDataset(data, lists[args.target], eval_tf, num_classes=len(classes))
        task = Task(ds[args.source], src_eval, ds[args.target], tgt_eval, classes, 3, None, "benchmark")

        dmp = build_trainer("dmp", task, args, size, tmp)
        src = build_trainer("source_only", task, args, size, tmp)
        src.model.load_state_dict(dmp.model.state_dict())
        if dmp.compiled.mode == "step":  # the two-domain CE reference compiled as the DMP step is
            src.ce_objective = compile_function(ce_objective, dmp.compiled.cuda_graphs)
        device = dmp.device
        for part in ds.values():  # (the domain outside the task too: its pipeline figure)
            if isinstance(part, CachedImages):
                part.device = device
        notes = []
        queue = loader_options(dmp.workers)["prefetch_factor"] or 0
        if dmp.workers and steps < 2 * queue * dmp.workers:
            notes.append(f"{steps} measured steps is less than twice the prefetch queue ({queue} x {dmp.workers} "
                         f"batches per stream): the end-to-end figures may hide a slow pipeline")

        # 1. input pipeline alone (the trainer's streams; one more for the domain not in the task)
        pipe = {}
        for sid, d in enumerate(DOMAINS):
            pipe[d] = pipeline_rate([BatchStream(ds[d], b, 0, sid, dmp.workers)], dmp, steps, warmup)
        pipe["two-domain"] = pipeline_rate([dmp.source, dmp.target], dmp, steps, warmup)

        # 2. anchor pass (first, so that DMP's steps below run every term: intra_start = 0, anchors ready)
        t_pass, t_pass_partial, pass_fixed, pass_per_image = anchor_pass(dmp, n_source, n_target)

        # 3. model step alone, batches already on the device
        k = min(steps + warmup, 4)
        (src_b, tgt_b) = in_memory_batches(dmp, k)
        t_model_src = timed(lambda i: src.step(i, *src_b[i % k], None, log=i % LOG_EVERY == 0), steps, warmup,
                            device)
        t_model_both = timed(lambda i: both_ce(src, *src_b[i % k], tgt_b[i % k]), steps, warmup, device)
        t_model_dmp = timed(lambda i: dmp.step(i, *src_b[i % k], tgt_b[i % k], log=i % LOG_EVERY == 0), steps,
                            warmup, device)
        # the host-side proxy of the kernel launches (benchmarks/op_count.py): ATen ops of one non-logging step of each (eager
        # steps only: a compiled step dispatches its graphs' ops)
        ops = None
        if dmp.compiled.mode == "off":
            ops_dmp = count(lambda: dmp.step(warmup + steps, *src_b[0], tgt_b[0], log=False))
            ops_both = count(lambda: both_ce(src, *src_b[0], tgt_b[0]))
            ops = {"dmp": ops_dmp.total, "two_domain_ce": ops_both.total, "dmp_extra": ops_dmp.total - ops_both.total,
                   "dmp_host_reads": sum(ops_dmp.syncs.values())}

        # 4. end to end (the trainer's loop, no anchor pass)
        t_e2e_src, wait_src, host_src = end_to_end(src, False, steps, warmup)
        t_e2e_dmp, wait_dmp, host_dmp = end_to_end(dmp, True, steps, warmup)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    t_up = math.ceil(n_source / b)  # iterations per epoch = T_up (anchor_period 1ep)
    epoch_src = t_up * t_e2e_src
    epoch_dmp = t_up * t_e2e_dmp + t_pass
    share = t_pass / epoch_dmp
    share_partial = t_pass_partial / (t_up * t_e2e_dmp + t_pass_partial)

    def period_for(t_r, goal=0.05):
        """anchor_period (epochs) at which a pass of t_r seconds is <= goal of the training time."""
        return max(1, math.ceil(t_r * (1 - goal) / goal / (t_up * t_e2e_dmp)))

    dev_name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    res = {
        "device": str(device), "device_name": dev_name, "cpu_cores": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity") else os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__, "size": args.size, "batch": b, "crop": size["crop"], "steps": steps,
        "warmup": warmup, "images_per_domain": size["images"], "workers": dmp.workers,
        "precision": args.precision, "compile": args.compile, "channels_last": dmp.channels_last,
        "two_domain_ce_compiled": hasattr(src, "ce_objective"),
        "pin_memory": dmp.pin_memory,
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark), "task": f"{args.source}->{args.target}",
        "input_cache": bool(args.input_cache), "input_device": bool(args.input_device),
        "cache_build_seconds": cache_s,
        "pipeline_images_per_s": pipe,
        "model_images_per_s": {"source_only": b / t_model_src, "two_domain_ce": 2 * b / t_model_both,
                               "dmp": 2 * b / t_model_dmp},
        "end_to_end_images_per_s": {"source_only": b / t_e2e_src, "dmp": 2 * b / t_e2e_dmp},
        "ops_per_step": ops,
        "seconds_per_step": {"model_source_only": t_model_src, "model_two_domain_ce": t_model_both,
                             "model_dmp": t_model_dmp, "end_to_end_source_only": t_e2e_src,
                             "end_to_end_dmp": t_e2e_dmp},
        "end_to_end_host_seconds_per_step": {"input_source_only": wait_src, "step_source_only": host_src,
                                             "input_dmp": wait_dmp, "step_dmp": host_dmp},
        "anchor_pass_seconds": {"vanilla": t_pass, "partial": t_pass_partial, "n_source": n_source,
                                "n_target": n_target, "fixed_per_pass": pass_fixed,
                                "per_image": pass_per_image},
        "ratios": {"end_to_end_over_model_source_only": t_model_src / t_e2e_src,
                   "end_to_end_over_model_dmp": t_model_dmp / t_e2e_dmp,
                   "dmp_over_two_domain_ce_step": t_model_dmp / t_model_both,
                   "dmp_over_source_only_per_epoch": epoch_dmp / epoch_src,
                   "paper_dmp_over_source_only_per_epoch": PAPER_RATIO,
                   "anchor_share_vanilla": share, "anchor_share_partial": share_partial},
        "seconds_per_epoch_wall": {"source_only": epoch_src, "dmp": epoch_dmp, "iterations_per_epoch": t_up},
        "anchor_period_for_5_percent_epochs": {"vanilla": period_for(t_pass), "partial": period_for(t_pass_partial)},
        "generate_images_seconds": gen_s,
        "notes": notes,
    }
    report(res)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")
    return res


def report(r):
    ok = lambda good: "ok" if good else "NOT MET"  # noqa: E731
    ra = r["ratios"]
    print(f"DMP throughput benchmark: {r['device']} ({r['device_name']}), {r['cpu_cores']} CPU cores, "
          f"torch {r['torch']} ({r['torch_threads']} threads)")
    print(f"RANDOM-INIT ResNet-50 (timing only, no accuracy). size={r['size']}: batch {r['batch']} per domain, "
          f"crop {r['crop']}, {r['steps']} steps after {r['warmup']} warm-up, {r['images_per_domain']} generated "
          f"JPEGs per domain; task {r['task']}")
    print(f"precision={r['precision']} channels_last={r['channels_last']} pin_memory={r['pin_memory']} "
          f"cudnn.benchmark={r['cudnn_benchmark']} workers/stream={r['workers']} compile={r.get('compile', 'off')}")
    if r.get("input_cache"):
        print(f"input cache: on (built from the generated JPEGs in {r['cache_build_seconds']:.1f} s; batches cut "
              f"from it, normalised on {r['device']}; no decoding workers"
              + ("; held whole on the device, crops drawn there)" if r.get("input_device") else ")"))
    print("input pipeline alone            " + "  ".join(
        f"{d} {v:8.1f} images/s" for d, v in r["pipeline_images_per_s"].items()))
    m, e = r["model_images_per_s"], r["end_to_end_images_per_s"]
    print(f"model step alone (in memory)    source-only {m['source_only']:8.1f} images/s   two-domain CE "
          f"{m['two_domain_ce']:8.1f} images/s   DMP {m['dmp']:8.1f} images/s")
    print(f"end to end (trainer loop)       source-only {e['source_only']:8.1f} images/s   DMP {e['dmp']:8.1f} "
          f"images/s")
    print(f"end-to-end / model-only         source-only {ra['end_to_end_over_model_source_only']:6.3f}   DMP "
          f"{ra['end_to_end_over_model_dmp']:6.3f}   (goal >= 0.9: "
          f"{ok(min(ra['end_to_end_over_model_source_only'], ra['end_to_end_over_model_dmp']) >= 0.9)})")
    h = r.get("end_to_end_host_seconds_per_step")
    if h:
        sec = r["seconds_per_step"]
        print(f"  loop's host time per step      source-only: next batch {1e3 * h['input_source_only']:.1f} ms, "
              f"Trainer.step {1e3 * h['step_source_only']:.1f} ms of {1e3 * sec['end_to_end_source_only']:.1f} ms; "
              f"DMP: next batches {1e3 * h['input_dmp']:.1f} ms, Trainer.step {1e3 * h['step_dmp']:.1f} ms of "
              f"{1e3 * sec['end_to_end_dmp']:.1f} ms (the host blocks where the device is behind: in the step's "
              f"log rows and the loader's pinned copies)")
    o = r["ops_per_step"]
    if o is None:
        print(f"ATen ops per step (log=False)   not counted: compile={r['compile']} (op_count.py counts eager steps)")
    else:
        print(f"ATen ops per step (log=False)   two-domain CE {o['two_domain_ce']}   DMP {o['dmp']}   extra "
              f"{o['dmp_extra']} (goal <= 281: {ok(o['dmp_extra'] <= 281)})   host reads in the DMP "
              f"step {o['dmp_host_reads']} (goal 0: {ok(o['dmp_host_reads'] == 0)})")
    print(f"DMP / two-domain CE step        {ra['dmp_over_two_domain_ce_step']:6.3f}   (goal <= 1.10: "
          f"{ok(ra['dmp_over_two_domain_ce_step'] <= 1.10)})")
    ep = r["seconds_per_epoch_wall"]
    print(f"DMP / source-only per epoch     {ra['dmp_over_source_only_per_epoch']:6.3f}   (paper's time table: "
          f"{ra['paper_dmp_over_source_only_per_epoch']:.2f}; epoch = {ep['iterations_per_epoch']} iterations: "
          f"source-only {ep['source_only']:.1f} s, DMP {ep['dmp']:.1f} s incl. the anchor pass)")
    a, p = r["anchor_pass_seconds"], r["anchor_period_for_5_percent_epochs"]
    print(f"anchor pass share of an epoch   vanilla {100 * ra['anchor_share_vanilla']:5.1f} %   partial "
          f"{100 * ra['anchor_share_partial']:5.1f} %   (goal <= 5 %: "
          f"{ok(max(ra['anchor_share_vanilla'], ra['anchor_share_partial']) <= 0.05)}; pass over {a['n_source']} "
          f"[+ {a['n_target']}] images: {a['vanilla']:.2f} s [{a['partial']:.2f} s])")
    print(f"  to reach 5 %: anchor_period: {p['vanilla']}ep (vanilla) / {p['partial']}ep (partial), or "
          f"anchor_mode: accumulate (no extra pass; anchors from the training batches)")
    print(f"  anchor pass = {a['fixed_per_pass']:.2f} s per pass (workers start) + {1e3 * a['per_image']:.2f} ms "
          f"per image")
    for note in r["notes"]:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
