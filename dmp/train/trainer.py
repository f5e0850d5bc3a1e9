"""The training loop of every registered method (Algorithm DMP for DMP), resumable and deterministic.

The method (dmp/methods/, ``cfg["method"]``) says what it needs from the loop (the target batch, anchors, the mean
target prediction), which extra modules it trains, and its loss terms and objective; the loop never tests a method
name. Source and target batches go through the network in separate calls (BatchNorm sees single-domain batches, as
in the authors' code). ``log.csv`` holds ``iteration, lr, loss, ce`` and the method's own terms (``loss`` is the
logged total).
"""
from __future__ import annotations

import csv
import io
import math
import os
import random
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from .. import methods
from ..anchors import Anchors
from ..config import ConfigError
from ..params import resolve_workers
from ..data.inputs import BatchStream, Task, TensorDataset, eval_loader
from ..io import remove_temp_files, sha256_file, write_errors_named
from ..models import DMPNet, backbones, batch_statistics
from ..weighting import class_weights
from . import checkpoint as ckpt
from . import compiled, snapshot
from .devices import cpu_info, gpu_info
from .evaluate import classification_report, interpolation_report, predict
from .provenance import code_version, git_commit, packages
from .schedule import lr_factor, schedule, set_lr

LOG_BASE = ["iteration", "lr", "loss", "ce"]  # then the method's terms


def log_fields(method) -> list[str]:
    """The log.csv columns of a run of ``method`` (a registered method or its name)."""
    method = methods.get(method) if isinstance(method, str) else method
    return LOG_BASE + list(method.terms)


def seed_everything(seed: int, deterministic: bool = True):
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic and torch.cuda.is_available():
        # The CPU kernels used here are deterministic for a fixed thread count; the switch is only needed on
        # CUDA (and importing it costs seconds of start-up, which matters for short CPU jobs).
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        # Deterministic mode also fills every new tensor (NaN), a guard against kernels that read memory they never
        # wrote: 1,300-2,200 fill kernels per DMP step on an H200. Runs were bit-identical without it
        # (benchmarks/cuda_determinism.py, docs/benchmarks.md), so it is off.
        torch.utils.deterministic.fill_uninitialized_memory = False
        torch.backends.cudnn.benchmark = False
    elif not deterministic:
        torch.backends.cudnn.benchmark = True  # cuDNN times the candidate kernels of each new shape, keeps the fastest


def check_reads(backbone: backbones.BackboneSpec, task: Task, dataset: str) -> None:
    """A backbone reads only the input it was made for (the registry's ``reads``, dmp/models/backbones.py): images
    or, on a features dataset, feature vectors; on stored trunk activations (``extract-features --trunk``), the head
    that the dataset records as ``reads_it`` (the same variant and trunk stage); on stored pooled features, no trunk
    head. One line naming both, before any weights load."""
    record, name, vector = task.input, backbone.name, "/".join(backbones.readers("vector"))
    if task.in_dim is not None and backbone.reads == "image":
        raise ConfigError(f"config key 'backbone' = {name!r}: dataset {dataset} holds feature vectors "
                          f"({task.in_dim}-d), which go straight into the manifold layers; use backbone={vector} (the "
                          f"default for a features dataset without preset), or for trunk activations the backbone's "
                          f"head that reads them: {', '.join(backbones.readers('trunk'))}")
    reads = record.get("reads_it")
    if record.get("trunk") and reads and name != reads:
        raise ConfigError(f"config key 'backbone' = {name!r}: dataset {dataset} holds the trunk activations of "
                          f"{record.get('stored_by')} (stage {record.get('trunk_stage') or 'head'}), which only "
                          f"{reads!r} reads; use backbone={reads}")
    if backbone.reads == "trunk" and record.get("kind") == "features" and not record.get("trunk"):
        raise ConfigError(f"config key 'backbone' = {name!r} reads a trunk's activations (extract-features "
                          f"--trunk); dataset {dataset} holds pooled feature vectors: use backbone={vector}")


class Trainer:
    """Build with a resolved config, a :class:`Task` and an output folder; :meth:`run` trains (resuming from
    ``out/checkpoint.pt`` when present) and writes ``metrics.json``."""

    # What of the target's labels the run reads (a diagnosis that feeds some to a loss says what, e.g. "30 % of the
    # target images' labels, read by the intra-class term"); None for every method of the suite. A record that says
    # it read any is refused by every table and report (dmp.metrics.read_metrics).
    target_labels_read: str | None = None

    def __init__(self, cfg: dict, task: Task, out: Path, progress: bool = True):
        self.cfg, self.task, self.out, self.progress = cfg, task, Path(out), progress
        for part in ("source_train", "source_eval", "target_train", "target_eval"):
            labels = getattr(getattr(task, part), "labels", None)
            if labels is not None and len(labels) and not 0 <= int(labels.min()) <= int(labels.max()) < task.num_classes:
                raise ConfigError(f"the task's {part} labels span {int(labels.min())}..{int(labels.max())}, outside "
                                  f"the {task.num_classes} classes 0..{task.num_classes - 1}")
        if cfg["k"] > task.num_classes:
            raise ConfigError(f"config key 'k' = {cfg['k']} is larger than the number of classes "
                              f"({task.num_classes})")
        backbone_spec = backbones.get(cfg["backbone"])  # what the backbone reads and wants: the registry says
        check_reads(backbone_spec, task, cfg["dataset"])
        if cfg["threads"]:
            torch.set_num_threads(cfg["threads"])
        self.device = torch.device("cuda" if cfg["device"] == "cuda" or (
            cfg["device"] == "auto" and torch.cuda.is_available()) else "cpu")
        seed_everything(cfg["seed"], cfg["deterministic"])
        backbone, bdim = backbones.build_backbone(cfg["backbone"], cfg["pretrained"], cfg["weights_path"],
                                                  in_channels=task.in_channels, in_dim=task.in_dim)
        self.weights_file = getattr(backbone, "weights_file", None)  # hashed into metrics.json, whatever its route
        self.model = DMPNet(backbone, bdim, cfg["bottleneck_dims"], task.num_classes,
                            cfg["manifold_bn"], cfg["backbone_bn"]).to(self.device)
        # GPU execution (docs/benchmarks.md): NHWC convolutions for the backbones that want them (the registry's
        # channels_last) and page-locked batches copied asynchronously on CUDA; bf16 autocast on the forward passes
        # when precision = bf16 (:meth:`forward`).
        self.channels_last = self.device.type == "cuda" and backbone_spec.channels_last
        if self.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.pin_memory = self.device.type == "cuda"
        # num_workers auto: no workers for data held in memory (arrays, features, the demo's cached images: each
        # worker process would decode its own copy), else min(8, usable cores - 1) per stream.
        in_memory = all(isinstance(d, TensorDataset) or getattr(d, "cache", None) is not None
                        for d in (task.source_train, task.target_train))
        self.workers = 0 if cfg["num_workers"] == "auto" and in_memory else resolve_workers(cfg["num_workers"])
        # The method (dmp/methods/): what it needs from this loop, and the modules it trains besides the network
        # (built after it, so that the network starts the same for every method), in the optimizer after the
        # network's groups and in the checkpoint.
        self.method = methods.get(cfg["method"])
        self.needs = self.method.needs(cfg)
        self.modules = self.method.build_modules(cfg, list(cfg["bottleneck_dims"]), task.num_classes)
        if self.modules is not None:
            self.modules = self.modules.to(self.device)
        if cfg["backbone_lr_mult"] == 0:  # held: no gradient computed for weights that never move
            self.model.backbone.requires_grad_(False)
        groups = self.model.param_groups(cfg["lr"], cfg["backbone_lr_mult"])
        self._head_group = len(groups) - 1  # the new layers' group: its lr is the one logged
        if self.modules is not None:
            groups += self.method.param_groups(self.modules, cfg)
        if cfg["optimizer"] == "adam":
            self.opt = torch.optim.Adam(groups, betas=tuple(cfg["betas"]), weight_decay=cfg["weight_decay"],
                                        fused=True)
        else:
            self.opt = torch.optim.SGD(groups, momentum=cfg["momentum"], weight_decay=cfg["weight_decay"],
                                       fused=True)
        self.anchors = Anchors(task.num_classes, cfg["bottleneck_dims"], cfg["mean_prediction_momentum"])
        self.weights = class_weights(None, task.num_classes, "vanilla")
        b = cfg["batch_size"]
        self.sched = schedule(cfg, len(task.source_train))
        self.iters_per_epoch, self.period = self.sched["iterations_per_epoch"], self.sched["anchor_period"]
        task.place(self.device)  # input_cache: batches cut from the cache, normalised on the training device
        self.source = BatchStream(task.source_train, b, cfg["seed"], 0, self.workers)
        self.target = BatchStream(task.target_train, b, cfg["seed"], 1, self.workers)
        self.iteration, self.train_seconds, self.anchor_seconds = 0, 0.0, 0.0
        self.wall_seconds = 0.0  # the training loop's wall time: data loading, anchor passes, steps, logging
        # Host-device synchronisation only where values are read (docs/benchmarks.md): the first iteration with a
        # non-finite loss is recorded on the device and read on logging iterations and before checkpoints; CUDA
        # step times are measured with events, read at the same points.
        self._nonfinite_at = torch.full((), -1, dtype=torch.long, device=self.device)
        self._step_events: list = []
        self._weights_on = (None, None)
        self.accuracy_log: list[list[float]] = []  # [iteration, target accuracy %] (log_accuracy_every)
        # Provenance of the code that actually runs, taken now (a resumed run appends its own).
        self.provenance = [{"git_commit": git_commit(), "code_version": code_version(), "from_iteration": 0}]
        # config compile (dmp/train/compiled.py): the step's forward and loss, eager or through torch.compile
        self.compile_mode = compiled.resolve_mode(cfg, self.device, self.method)
        self.compiled = compiled.Step(self, self.compile_mode, fallback=cfg["compile"] == "auto")

    # -- anchors ---------------------------------------------------------------------------------------
    @property
    def uses_anchors(self):
        """Whether the method needs the periodic refresh (anchors and/or the mean target prediction)."""
        return self.needs.refreshes

    @torch.no_grad()
    def refresh_anchors(self):
        """Algorithm DMP line 4 (full_pass) or the end of an accumulation window (accumulate): the source anchors
        (a method that needs them) and the mean target prediction (a method that needs it: the class weights).

        The full pass sees BatchNorm as configured by ``anchor_bn``: ``batch`` = each domain in shuffled
        batches of ``batch_size`` with batch statistics (what the losses see in training; running statistics
        untouched), ``eval`` = the running statistics."""
        self._synchronize()  # (CUDA) the queued steps are not anchor time
        start = time.perf_counter()
        cfg = self.cfg
        if cfg["anchor_mode"] == "accumulate":
            self.anchors.refresh_from_sums()
        else:
            if self.needs.anchors:
                for x, y in self._anchor_batches(self.task.source_eval):
                    feats, _ = self.forward(x)
                    self.anchors.add_source(feats, y.to(self.device, non_blocking=self.pin_memory))
            if self.needs.mean_prediction:
                for x, _ in self._anchor_batches(self.task.target_eval):
                    self.anchors.add_target(torch.softmax(self.forward(x)[1], 1))
            self.anchors.refresh_from_sums()
            self.model.train()
        self._anchors_to_device()
        self.weights = class_weights(self.anchors.mean_prediction, self.task.num_classes, cfg["setting"])
        self._synchronize()
        self.anchor_seconds += time.perf_counter() - start

    def _anchors_to_device(self):
        """Keep the anchors on the training device, so that no step copies them from the host."""
        a = self.anchors
        if a.ready:
            a.class_means = [m.to(self.device) for m in a.class_means]
            a.means = [m.to(self.device) for m in a.means]

    def _device_weights(self):
        """``self.weights`` on the device, copied once per change (a copy from pageable host memory waits for
        the device)."""
        if self._weights_on[0] is not self.weights:
            self._weights_on = (self.weights, self.weights.to(self.device))
        return self._weights_on[1]

    def _synchronize(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _anchor_batches(self, dataset):
        cfg = self.cfg
        if cfg["anchor_bn"] == "eval":
            self.model.eval()
            yield from eval_loader(dataset, cfg["eval_batch_size"], self.workers, pin_memory=self.pin_memory)
            return
        # A permutation that depends only on (seed, iteration): the same after a resume.
        g = torch.Generator().manual_seed(cfg["seed"] * 1_000_003 + self.iteration)
        order = torch.randperm(len(dataset), generator=g)
        with batch_statistics(self.model):
            yield from eval_loader(dataset, cfg["batch_size"], self.workers, order=order,
                                   pin_memory=self.pin_memory)

    # -- one step --------------------------------------------------------------------------------------
    def autocast(self):
        """The autocast context of the model's forward passes: bfloat16 when ``precision: bf16``, else a no-op."""
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.cfg["precision"] == "bf16")

    def to_device(self, x):
        """A batch on the training device: asynchronous from page-locked memory, NHWC for a channels_last model."""
        if self.channels_last and x.dim() == 4:
            return x.to(self.device, non_blocking=self.pin_memory, memory_format=torch.channels_last)
        return x.to(self.device, non_blocking=self.pin_memory)

    def forward(self, x):
        """The model on a batch under :meth:`autocast`, returning float32 features and logits: the losses, the
        anchors and the manifold distances (SVD/eigen, float64 inside) never see bfloat16."""
        with self.autocast():
            feats, logits = self.model(self.to_device(x))
        return [f.float() for f in feats], logits.float()

    def step(self, it, xs, ys, xt, log: bool = True):
        """One iteration of the method (Algorithm DMP for DMP): its terms and objective from a
        :class:`~dmp.methods.StepContext`. Returns the log row (floats) when ``log``, else None.

        Reading a loss to the host waits for the device, so values are read on logging iterations only, in one
        transfer. A non-finite loss is recorded on the device every step (no wait) and raised when read: on a
        logging iteration before its update, otherwise at the next logging iteration or
        before the next checkpoint (:meth:`check_finite`), so no checkpoint ever holds the diverged weights."""
        cfg, needs = self.cfg, self.needs
        self.model.train()
        if self.modules is not None:
            self.modules.train()
        progress = it / self.sched["iterations"]
        set_lr(self.opt, lr_factor(cfg["lr_schedule"], progress))
        ys = ys.to(self.device, non_blocking=self.pin_memory)
        weights = self._device_weights() if needs.target == "loss" else None
        loss, parts, feats_s, p_t = self.compiled(it, progress, xs, ys, xt, weights)
        if needs.target == "loss" and cfg["anchor_mode"] == "accumulate":
            if needs.anchors:
                self.anchors.add_source(feats_s, ys)
            if needs.mean_prediction:
                self.anchors.add_target(p_t)
        self._nonfinite_at.masked_fill_(~torch.isfinite(loss.detach()) & (self._nonfinite_at < 0), it)
        row = None
        if log:
            *values, first = torch.stack([v.detach().double() for v in (loss, *parts.values())]
                                         + [self._nonfinite_at.double()]).tolist()
            if 0 <= first < it:  # an earlier, unlogged step
                self.check_finite(it, int(first))
            if not math.isfinite(values[0]):
                raise FloatingPointError(f"non-finite loss at iteration {it}: "
                                         + ", ".join(f"{k}={v:.4g}" for k, v in zip(parts, values[1:])))
            row = dict(zip(parts, values[1:]), iteration=it, lr=self.opt.param_groups[self._head_group]["lr"],
                       loss=values[0])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return row

    def objective(self, it, progress, xs, ys, xt, class_weights):
        """The forward passes and the method's objective of one step (what config ``compile`` compiles, whole or its
        loss part :meth:`compiled.Step.loss`): ``(loss, {"ce": ..., **terms}, source features, target softmax)``."""
        cfg, needs = self.cfg, self.needs
        feats_s, logits_s = self.forward(xs)
        ce = F.cross_entropy(logits_s, ys)
        ctx = methods.StepContext(cfg, it, progress, self.sched, self.task.num_classes, self.device, feats_s,
                                  logits_s, ys, anchors=self.anchors if needs.anchors else None,
                                  mean_prediction=self.anchors.mean_prediction, modules=self.modules)
        if needs.target == "loss":
            ctx.feats_t, ctx.logits_t = self.forward(xt)
            ctx.p_t = torch.softmax(ctx.logits_t, 1)
            ctx.class_weights = class_weights
        elif needs.target == "bn" and xt is not None:  # the target batch updates BatchNorm's running statistics only
            with torch.no_grad():
                self.forward(xt)
        loss, terms = self.compiled.loss(ctx, ce)
        return loss, {"ce": ce, **terms}, feats_s, ctx.p_t

    def check_finite(self, it, first: int | None = None):
        """Raise if a step up to ``it`` had a non-finite loss (``first``: the flag, if already read)."""
        first = int(self._nonfinite_at) if first is None else first
        if first >= 0:
            raise FloatingPointError(f"non-finite loss at iteration {first} (read at iteration {it}; the flag is "
                                     f"read on logging iterations and before checkpoints, none was written after "
                                     f"iteration {first})")

    def _timed_step(self, it, xs, ys, xt, log):
        """:meth:`step`, its time added to ``train_seconds``: host time on CPU; on CUDA the device time between two
        events around it, read without waiting (:meth:`_collect_step_times`)."""
        if self.device.type != "cuda":
            start = time.perf_counter()
            row = self.step(it, xs, ys, xt, log)
            self.train_seconds += time.perf_counter() - start
            return row
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        row = self.step(it, xs, ys, xt, log)
        end.record()
        self._step_events.append((start, end))
        if log:  # the row's read waited for this step's forward, so every earlier step is complete
            self._collect_step_times(keep_last=True)
        return row

    def _collect_step_times(self, keep_last: bool = False):
        done = self._step_events[:-1] if keep_last else self._step_events
        if done:
            done[-1][1].synchronize()
            self.train_seconds += sum(a.elapsed_time(b) for a, b in done) / 1e3
            self._step_events = self._step_events[len(done):]

    # -- checkpoints -----------------------------------------------------------------------------------
    def _state(self):
        """Everything a resumed run needs, as tensors and plain values only (``ckpt.load_torch`` refuses
        anything else); ``modules``: the method's extra modules (a domain discriminator), when it has any."""
        extra = {"modules": self.modules.state_dict()} if self.modules is not None else {}
        return {**extra, "iteration": self.iteration, "model": self.model.state_dict(), "opt": self.opt.state_dict(),
                "anchors": self.anchors.state_dict(), "weights": self.weights,
                "train_seconds": self.train_seconds, "anchor_seconds": self.anchor_seconds,
                "wall_seconds": self.wall_seconds, "config": self.cfg, "provenance": self.provenance,
                "threads": torch.get_num_threads(),
                "dataset_version": self.task.dataset_version, "accuracy_log": self.accuracy_log}

    def save_checkpoint(self, log_rows):
        if log_rows:
            _append_log(self.out / "log.csv", log_rows, log_fields(self.method))
            log_rows.clear()
        ckpt.save_torch(self._state(), self.out / "checkpoint.pt")

    def try_resume(self) -> bool:
        path = self.out / "checkpoint.pt"
        if not path.exists():
            return False
        fresh = self._state()
        state = ckpt.load_torch(path, keys=fresh.keys() - {"accuracy_log", "wall_seconds"})
        changed = ckpt.config_changes(state["config"], self.cfg)
        if changed:
            raise ConfigError(f"{path} was written with a different config ({', '.join(sorted(changed))}); "
                              f"use another --out folder or delete it")
        if state["dataset_version"] != self.task.dataset_version:
            raise ConfigError(f"{path} was trained on dataset version {state['dataset_version']}, the data in place "
                              f"is version {self.task.dataset_version}; restore that version (dvc pull) or delete "
                              f"the checkpoint to restart")
        # CPU kernels are deterministic for a fixed thread count only: a resumed run keeps the count it started
        # with (Snakemake's --cores may differ between the two calls), so it ends with the same numbers.
        torch.set_num_threads(state["threads"])
        ckpt.load_states(path, state, fresh, {"model": self.model, "modules": self.modules, "opt": self.opt,
                                              "anchors": self.anchors})
        self._anchors_to_device()
        self.weights = state["weights"]
        self.iteration = state["iteration"]
        self.train_seconds, self.anchor_seconds = state["train_seconds"], state["anchor_seconds"]
        # (checkpoints written before wall_seconds existed: the steps and anchor passes, a lower bound)
        self.wall_seconds = state.get("wall_seconds", self.train_seconds + self.anchor_seconds)
        self.accuracy_log = [list(r) for r in state.get("accuracy_log", []) if r[0] < self.iteration]
        self.provenance[0]["from_iteration"] = self.iteration
        self.provenance = state["provenance"] + self.provenance
        _truncate_log(self.out / "log.csv", self.iteration)
        return True

    # -- the loop --------------------------------------------------------------------------------------
    @ckpt.holds_run_lock  # one writer per run folder, from the check below to the end
    def run(self, stop_after: int | None = None) -> dict | None:
        """Train to ``iterations`` (or only up to ``stop_after``, for tests of resumption) and evaluate.

        ``out`` belongs to one run: a folder holding another run's files is refused (``ConfigError``); this
        run resumes from its checkpoint, with log.csv cut back to it (emptied when there is none)."""
        self.open_folder()
        T = self.sched["iterations"]
        bar = self.progress_bar()
        self.train_until(T if stop_after is None else min(T, stop_after), bar)
        bar.close()
        return self.complete()

    def open_folder(self):
        """Make the run folder ready, under its lock (held by the caller): refused if it holds another run's files,
        temporary files removed, resumed from its checkpoint (log.csv cut back to it, emptied when there is none),
        ``config.yaml`` written."""
        self.out.mkdir(parents=True, exist_ok=True)
        ckpt.check_run_folder(self.out, self.cfg)
        remove_temp_files(self.out)
        if not self.try_resume():
            _truncate_log(self.out / "log.csv", 0)  # rows of an attempt that never reached a checkpoint
        ckpt.write_config(self.out, self.cfg)

    def progress_bar(self, desc: str | None = None):
        cfg = self.cfg
        return tqdm(total=self.sched["iterations"], initial=self.iteration, dynamic_ncols=True,
                    desc=desc or f"{cfg['method']} {cfg['source']}->{cfg['target']}", disable=not self.progress)

    def due(self, it: int) -> tuple[bool, bool, bool]:
        """What iteration ``it`` of the loop does besides its step: ``(log the target accuracy before it, refresh the
        anchors before it, log its losses)``."""
        cfg, T = self.cfg, self.sched["iterations"]
        return (bool(cfg["log_accuracy_every"]) and it % cfg["log_accuracy_every"] == 0,
                self.uses_anchors and it % self.period == 0 and (it > 0 or cfg["anchor_mode"] == "full_pass"),
                it % cfg["log_every"] == 0 or it == T - 1)

    def checkpoint_due(self, done: int, stop: int) -> bool:
        """Whether a checkpoint follows the step that brings the run to ``done`` iterations (of a loop to ``stop``)."""
        return done % self.cfg["checkpoint_every"] == 0 or done == stop

    def train_until(self, stop: int, bar=None):
        """The loop from ``self.iteration`` to ``stop``, a checkpoint every ``checkpoint_every`` iterations and at
        ``stop`` (a stacked run's lagging member catches up alone with it, dmp/train/stacked_loop.py)."""
        rows = []
        pin = self.pin_memory
        batches_t = self.target.iterate(self.iteration, stop, pin) if self.needs.target != "none" else None
        wall = time.perf_counter()  # wall_seconds: the loop below, less checkpoint writes and accuracy logging
        for xs, ys in self.source.iterate(self.iteration, stop, pin):
            it = self.iteration
            accuracy, refresh, log = self.due(it)
            if accuracy:
                paused = time.perf_counter()
                self.log_accuracy()
                wall += time.perf_counter() - paused
            xt = next(batches_t)[0] if batches_t is not None else None
            if refresh:
                self.refresh_anchors()
            row = self._timed_step(it, xs, ys, xt, log=log)
            if row is not None:
                rows.append(row)
                if bar is not None:
                    bar.set_postfix(loss=f"{row['loss']:.3f}", ce=f"{row['ce']:.3f}", refresh=False)
            self.iteration = it + 1
            if bar is not None:
                bar.update(1)
            if self.checkpoint_due(self.iteration, stop):
                self._collect_step_times()  # waits for the device: times and the non-finite flag are final
                self.check_finite(it)
                self.wall_seconds += time.perf_counter() - wall
                self.save_checkpoint(rows)
                wall = time.perf_counter()

    def complete(self) -> dict | None:
        """After the loop: ``None`` if the run stopped before ``iterations``, else the final accuracy log entry and
        :meth:`finish`."""
        T = self.sched["iterations"]
        if self.iteration < T:
            return None
        if self.cfg["log_accuracy_every"] and not any(r[0] == T for r in self.accuracy_log):
            self.log_accuracy()
        return self.finish()

    @torch.no_grad()
    def log_accuracy(self):
        """Target accuracy after ``self.iteration`` iterations, for the convergence figure only (nothing is
        selected on it).  The random state is restored afterwards, so the training is the same with or
        without it."""
        py_state, np_state = random.getstate(), np.random.get_state()
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), self.autocast():
            _, probs, labels = predict(self.model, self.task.target_eval, self.device, self.cfg["eval_batch_size"],
                                       self.workers)
        random.setstate(py_state)
        np.random.set_state(np_state)
        self.model.train()
        self.accuracy_log.append([self.iteration, 100.0 * float((probs.argmax(1) == labels).double().mean())])

    def finish(self) -> dict:
        cfg, task = self.cfg, self.task
        with self.autocast():
            feats, probs, labels = predict(self.model, task.target_eval, self.device, cfg["eval_batch_size"],
                                           self.workers)
        report = classification_report(probs.argmax(1).numpy(), labels.numpy(), task.classes)
        spi = self.train_seconds / max(self.iteration, 1)
        metrics = {
            "status": "complete",
            **report,
            "class_names": task.classes,
            "class_weights": [float(w) for w in self.weights],
            "target_mean_prediction": [float(p) for p in probs.mean(0)],
            "seconds_per_iter": spi,
            "seconds_per_epoch": (self.train_seconds + self.anchor_seconds) / max(self.iteration, 1)
            * self.iters_per_epoch,
            "anchor_seconds": self.anchor_seconds,
            "train_seconds": self.train_seconds,
            # As the paper's time table: the training loop's wall time (data loading, anchor passes, steps) per
            # epoch / per batch; seconds_per_iter and seconds_per_epoch count the steps (+ anchors) only.
            "seconds_per_epoch_wall": self.wall_seconds / max(self.iteration, 1) * self.iters_per_epoch,
            "seconds_per_batch_wall": self.wall_seconds / max(self.iteration, 1),
            "wall_seconds": self.wall_seconds,
            "data_workers": self.workers,
            "iterations": self.iteration,
            "iterations_per_epoch": self.iters_per_epoch,
            "schedule": self.sched,
            "interpolation": interpolation_report(self.model, feats, labels, task.classes,
                                                  cfg["interpolation_per_class"], cfg["seed"]),
            "seed": cfg["seed"],
            "config": cfg,
            "git_commit": self.provenance[-1]["git_commit"],
            "code_version": self.provenance[-1]["code_version"],
            "provenance": self.provenance,
            "dataset_version": task.dataset_version,
            "input": task.input,  # what it trained on: image sizes and views, or the stored activations' (build_task)
            # the target images scored: the adapted-on list, or the domain's eval_lists (DomainNet's protocol)
            "target_eval": {**task.scored, "count": len(task.target_eval)},
            "weights_sha256": sha256_file(self.weights_file) if self.weights_file else None,
            "weights_file": str(self.weights_file) if self.weights_file else None,
            "packages": packages(),
            "device": str(self.device),
            "gpu": gpu_info(self.device),
            "cpu": cpu_info(),  # CPU kernels round differently on another kind of CPU (dmp.train.devices.cpu_info)
            "threads": torch.get_num_threads(),
            "model_selection": "last iteration (no target labels used)" if not self.target_labels_read else
            "last iteration",
            "target_labels_read": self.target_labels_read,
            "accuracy_log": [{"iteration": int(i), "epoch": i / self.iters_per_epoch, "accuracy": a}
                             for i, a in self.accuracy_log],
        }
        if cfg["save_features"]:
            metrics["features"] = snapshot.save_features(self.model, task, self.device, cfg, feats, probs, labels,
                                                         self.out / snapshot.FILE, autocast=self.autocast)
        ckpt.save_json(metrics, self.out / "metrics.json")
        return metrics


def _log_header(path: Path) -> list[str] | None:
    if not path.exists():
        return None
    with open(path, newline="") as fh:
        return next(csv.reader(fh), None)


def _append_log(path: Path, rows, fields: list[str]):
    """Append ``rows`` to log.csv, with ``fields`` as the header of a new file (an existing file keeps its own)."""
    header = _log_header(path)
    fields = header or fields
    with write_errors_named(path), open(path, "a", newline="") as fh:  # a full disk names log.csv
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        if header is None:
            writer.writeheader()
        writer.writerows({k: r.get(k, 0.0) for k in fields} for r in rows)
        fh.flush()
        os.fsync(fh.fileno())


def _truncate_log(path: Path, iteration: int):
    """Drop log rows at or after ``iteration`` (written after the checkpoint we resume from)."""
    if not path.exists():
        return
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        rows = [r for r in reader if int(r["iteration"]) < iteration]
        fields = reader.fieldnames
    if not fields or not rows:  # nothing kept: the next append writes the run's own header
        ckpt.save_text("", path)
        return
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields)
    writer.writeheader()
    writer.writerows(rows)
    ckpt.save_text(buf.getvalue(), path)
