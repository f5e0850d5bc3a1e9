"""Algorithm DMP: the training loop, resumable and deterministic.

Objective (Eq. Objective): ``L = L_CE + lambda1 * L_DS + lambda2 * L_AL`` (``+ entropy_weight * L_ent`` for
``dmp_ent``), with ``L_DS = sum_l (L_inter^l + L_intra^l)`` and ``L_AL = sum_l L_align^l`` over the manifold
layers ``l``. Source and target batches go through the network in separate calls (BatchNorm sees
single-domain batches, as in the authors' code).
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

from .. import manifolds
from ..anchors import Anchors
from ..config import ConfigError
from ..data.inputs import BatchStream, Task, eval_loader
from ..losses import entropy_loss, inter_class_loss, intra_class_loss
from ..models import DMPNet, build_backbone
from ..weighting import class_weights, normalise_weights, weight_source_features
from . import checkpoint as ckpt
from .evaluate import classification_report, interpolation_report, predict
from .provenance import code_version, git_commit, packages
from .schedule import lr_factor, set_lr

LOG_FIELDS = ["iteration", "lr", "loss", "ce", "inter", "intra", "align", "entropy"]


def seed_everything(seed: int, deterministic: bool = True):
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic and torch.cuda.is_available():
        # The CPU kernels used here are deterministic for a fixed thread count; the switch is only needed on
        # CUDA (and importing it costs seconds of start-up, which matters for short CPU jobs).
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False


def start_iteration(value, iters_per_epoch: int) -> int:
    """``intra_start`` / ``inter_start``: an iteration count, or ``"<E>ep"`` for E source epochs."""
    if isinstance(value, str):
        return int(round(float(value[:-2]) * iters_per_epoch))
    return int(value)


def dmp_losses(cfg, it, feats_s, y_s, feats_t, p_t, anchors: Anchors, weights, device, iters_per_epoch=1):
    """The DMP terms of one iteration; returns a dict of (unweighted) scalar tensors."""
    inter_start = start_iteration(cfg["inter_start"], iters_per_epoch)
    intra_start = start_iteration(cfg["intra_start"], iters_per_epoch)
    method, c = cfg["method"], p_t.shape[1]
    zero = feats_s[0].sum() * 0.0
    out = {"inter": zero, "intra": zero, "align": zero, "entropy": zero}
    w = normalise_weights(weights, cfg["weight_norm"]).to(device)
    if method != "dmp_no_ds" and anchors.ready:
        class_means, means = anchors.on(device)
        intra_w = None if cfg["setting"] == "vanilla" and cfg["weight_norm"] == "mean_one" else w
        for l, (hs, ht) in enumerate(zip(feats_s, feats_t)):
            if it >= inter_start:
                out["inter"] = out["inter"] + inter_class_loss(hs, y_s, means[l], c, absent=cfg["inter_absent"])
            if it >= intra_start:
                out["intra"] = out["intra"] + intra_class_loss(ht, p_t, class_means[l], k=cfg["k"],
                                                               class_weights=intra_w)
    if method != "dmp_no_al":
        for hs, ht in zip(feats_s, feats_t):
            out["align"] = out["align"] + manifolds.alignment_distance(
                cfg["metric"], weight_source_features(hs, y_s, w), ht, dim=cfg["grassmann_dim"], eps=cfg["le_eps"])
    if method == "dmp_ent":
        out["entropy"] = entropy_loss(p_t)
    return out


class Trainer:
    """Build with a resolved config, a :class:`Task` and an output folder; :meth:`run` trains (resuming from
    ``out/checkpoint.pt`` when present) and writes ``metrics.json``."""

    def __init__(self, cfg: dict, task: Task, out: Path, progress: bool = True):
        self.cfg, self.task, self.out, self.progress = cfg, task, Path(out), progress
        if cfg["k"] > task.num_classes:
            raise ConfigError(f"config key 'k' = {cfg['k']} is larger than the number of classes "
                              f"({task.num_classes})")
        if cfg["threads"]:
            torch.set_num_threads(cfg["threads"])
        self.device = torch.device("cuda" if cfg["device"] == "cuda" or (
            cfg["device"] == "auto" and torch.cuda.is_available()) else "cpu")
        seed_everything(cfg["seed"], cfg["deterministic"])
        backbone, bdim = build_backbone(cfg["backbone"], cfg["pretrained"], cfg["weights_path"],
                                        in_channels=task.in_channels, in_dim=task.in_dim)
        self.model = DMPNet(backbone, bdim, cfg["bottleneck_dims"], task.num_classes).to(self.device)
        groups = self.model.param_groups(cfg["lr"], cfg["backbone_lr_mult"])
        if cfg["optimizer"] == "adam":
            self.opt = torch.optim.Adam(groups, betas=tuple(cfg["betas"]), weight_decay=cfg["weight_decay"],
                                        fused=True)
        else:
            self.opt = torch.optim.SGD(groups, momentum=cfg["momentum"], weight_decay=cfg["weight_decay"],
                                       fused=True)
        self.anchors = Anchors(task.num_classes, cfg["bottleneck_dims"])
        self.weights = class_weights(None, task.num_classes, "vanilla")
        b = cfg["batch_size"]
        self.iters_per_epoch = math.ceil(len(task.source_train) / b)
        self.period = cfg["anchor_period"] or self.iters_per_epoch
        self.source = BatchStream(task.source_train, b, cfg["seed"], 0, cfg["num_workers"])
        self.target = BatchStream(task.target_train, b, cfg["seed"], 1, cfg["num_workers"])
        self.iteration, self.train_seconds, self.anchor_seconds = 0, 0.0, 0.0
        # Provenance of the code that actually runs, taken now (a resumed run appends its own).
        self.provenance = [{"git_commit": git_commit(), "code_version": code_version(), "from_iteration": 0}]

    # -- anchors ---------------------------------------------------------------------------------------
    @property
    def uses_anchors(self):
        return self.cfg["method"] not in ("source_only",)

    @torch.no_grad()
    def refresh_anchors(self):
        """Algorithm DMP line 4 (full_pass) or the end of an accumulation window (accumulate)."""
        start = time.perf_counter()
        cfg = self.cfg
        if cfg["anchor_mode"] == "accumulate":
            self.anchors.refresh_from_sums()
        else:
            self.model.eval()
            for x, y in eval_loader(self.task.source_eval, cfg["eval_batch_size"], cfg["num_workers"]):
                feats, _ = self.model(x.to(self.device))
                self.anchors.add_source(feats, y)
            if cfg["setting"] == "partial":
                for x, _ in eval_loader(self.task.target_eval, cfg["eval_batch_size"], cfg["num_workers"]):
                    self.anchors.add_target(torch.softmax(self.model(x.to(self.device))[1], 1))
            self.anchors.refresh_from_sums()
        self.weights = class_weights(self.anchors.mean_prediction, self.task.num_classes, cfg["setting"])
        self.anchor_seconds += time.perf_counter() - start

    # -- one step --------------------------------------------------------------------------------------
    def step(self, it, xs, ys, xt):
        cfg = self.cfg
        self.model.train()
        set_lr(self.opt, lr_factor(cfg["lr_schedule"], it / cfg["iterations"]))
        xs, ys = xs.to(self.device), ys.to(self.device)
        feats_s, logits_s = self.model(xs)
        ce = F.cross_entropy(logits_s, ys)
        parts = {"ce": ce}
        loss = ce
        if cfg["method"] != "source_only":
            feats_t, logits_t = self.model(xt.to(self.device))
            p_t = torch.softmax(logits_t, 1)
            parts.update(dmp_losses(cfg, it, feats_s, ys, feats_t, p_t, self.anchors, self.weights,
                                    self.device, self.iters_per_epoch))
            loss = loss + cfg["lambda1"] * (parts["inter"] + parts["intra"]) + cfg["lambda2"] * parts["align"] \
                + cfg["entropy_weight"] * parts["entropy"]
            if cfg["anchor_mode"] == "accumulate":
                self.anchors.add_source(feats_s, ys)
                if cfg["setting"] == "partial":
                    self.anchors.add_target(p_t)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"non-finite loss at iteration {it}: "
                                     + ", ".join(f"{k}={float(v):.4g}" for k, v in parts.items()))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        row = {k: float(v.detach()) for k, v in parts.items()}
        row.update(iteration=it, lr=self.opt.param_groups[-1]["lr"], loss=float(loss.detach()))
        return row

    # -- checkpoints -----------------------------------------------------------------------------------
    def _state(self):
        return {"iteration": self.iteration, "model": self.model.state_dict(), "opt": self.opt.state_dict(),
                "anchors": self.anchors.state_dict(), "weights": self.weights,
                "train_seconds": self.train_seconds, "anchor_seconds": self.anchor_seconds,
                "config": self.cfg, "provenance": self.provenance}

    def save_checkpoint(self, log_rows):
        if log_rows:
            _append_log(self.out / "log.csv", log_rows)
            log_rows.clear()
        ckpt.save_torch(self._state(), self.out / "checkpoint.pt")

    def try_resume(self) -> bool:
        path = self.out / "checkpoint.pt"
        if not path.exists():
            return False
        state = ckpt.load_torch(path)
        changed = {k for k in self.cfg if k not in ("threads", "num_workers", "device", "checkpoint_every")
                   and state["config"].get(k) != self.cfg[k]}
        if changed:
            raise ConfigError(f"{path} was written with a different config ({', '.join(sorted(changed))}); "
                              f"use another --out folder or delete it")
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        self.anchors.load_state_dict(state["anchors"])
        self.weights = state["weights"]
        self.iteration = state["iteration"]
        self.train_seconds, self.anchor_seconds = state["train_seconds"], state["anchor_seconds"]
        self.provenance[0]["from_iteration"] = self.iteration
        self.provenance = state["provenance"] + self.provenance
        _truncate_log(self.out / "log.csv", self.iteration)
        return True

    # -- the loop --------------------------------------------------------------------------------------
    def run(self, stop_after: int | None = None) -> dict | None:
        """Train to ``iterations`` (or only up to ``stop_after``, for tests of resumption) and evaluate."""
        cfg, T = self.cfg, self.cfg["iterations"]
        self.out.mkdir(parents=True, exist_ok=True)
        self.try_resume()
        stop = T if stop_after is None else min(T, stop_after)
        rows = []
        bar = tqdm(total=T, initial=self.iteration, desc=f"{cfg['method']} {cfg['source']}->{cfg['target']}",
                   disable=not self.progress, dynamic_ncols=True)
        batches_t = self.target.iterate(self.iteration, stop) if cfg["method"] != "source_only" else None
        for xs, ys in self.source.iterate(self.iteration, stop):
            it = self.iteration
            xt = next(batches_t)[0] if batches_t is not None else None
            if self.uses_anchors and it % self.period == 0 and (it > 0 or cfg["anchor_mode"] == "full_pass"):
                self.refresh_anchors()
            start = time.perf_counter()
            row = self.step(it, xs, ys, xt)
            self.train_seconds += time.perf_counter() - start
            if it % cfg["log_every"] == 0 or it == T - 1:
                rows.append(row)
                bar.set_postfix(loss=f"{row['loss']:.3f}", ce=f"{row['ce']:.3f}", refresh=False)
            self.iteration = it + 1
            bar.update(1)
            if self.iteration % cfg["checkpoint_every"] == 0 or self.iteration == stop:
                self.save_checkpoint(rows)
        bar.close()
        if self.iteration < T:
            return None
        return self.finish()

    def finish(self) -> dict:
        cfg, task = self.cfg, self.task
        feats, probs, labels = predict(self.model, task.target_eval, self.device, cfg["eval_batch_size"],
                                       cfg["num_workers"])
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
            "iterations": self.iteration,
            "iterations_per_epoch": self.iters_per_epoch,
            "interpolation": interpolation_report(self.model, feats, labels, task.classes,
                                                  cfg["interpolation_per_class"], cfg["seed"]),
            "seed": cfg["seed"],
            "config": cfg,
            "git_commit": self.provenance[-1]["git_commit"],
            "code_version": self.provenance[-1]["code_version"],
            "provenance": self.provenance,
            "dataset_version": task.dataset_version,
            "packages": packages(),
            "device": str(self.device),
            "model_selection": "last iteration (no target labels used)",
        }
        ckpt.save_json(metrics, self.out / "metrics.json")
        return metrics


def _append_log(path: Path, rows):
    new = not path.exists()
    with open(path, "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=LOG_FIELDS, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerows({k: r.get(k, 0.0) for k in LOG_FIELDS} for r in rows)
        fh.flush()
        os.fsync(fh.fileno())


def _truncate_log(path: Path, iteration: int):
    """Drop log rows at or after ``iteration`` (written after the checkpoint we resume from)."""
    if not path.exists():
        return
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if int(r["iteration"]) < iteration]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=LOG_FIELDS)
    writer.writeheader()
    writer.writerows(rows)
    ckpt.save_text(buf.getvalue(), path)
