"""The pseudo-label diagnosis: does DMP's discriminative loss L_DS add less on Office-31 here than in the paper because its target
pseudo-labels are worse?

L_DS's target term (Eq. WeightedIntraLoss) pulls each target feature towards the source anchor of its top-k
predicted classes, weighted by the prediction ``p^t``. When that term starts (epoch 15), the deeper CPU form's
predictions on amazon are right far less often than the paper's DMP (No DS), the model without the term, ends
(docs/evidence.md tables both). If the pseudo-labels' quality is what limits the term, giving it pseudo-labels as
accurate as the paper's should raise what L_DS adds to about the paper's share.

The experiment: DMP whose intra-class term, for a fixed random fraction ``q`` of the target images, reads the
image's true label (one-hot) in place of ``p^t``; every other term, the network, the data and the schedule are
DMP's own. It is a diagnosis that reads target labels: its runs never enter a table. Each run is scored on the target
images whose labels it never read (the *held-out* images); DMP (No DS) and DMP are trained again by the same code
(``--fraction 0``: nothing is replaced, so the run is DMP's, bit for bit, and its accuracy is the committed run's)
to be scored on the same held-out images. The read images are the first ``round(q n)`` of one permutation drawn
from the seed, so a larger ``q`` reads those of a smaller one and more; each ``q`` is scored on the images it did
not read.

Usage (one run; a finished run is skipped, an interrupted one resumes from its checkpoint):
    python -m studies pseudo-labels --task W-A --method dmp --fraction 0.3 --seed 0
Runs: results/office31_lite/diagnosis/pseudo_labels/q<q>/<task>/<method>/seed<k>/ (the trainer's files, and
diagnosis.json: the per-image predictions, the read images, the accuracies); read by
:mod:`studies.office31.pseudo_labels`. ``--set key=value`` (repeatable) changes a key of the preset for every run of
a variant, which lives in a root of its own: ``--set weight_norm=mean_one`` writes under
results/office31_lite/diagnosis/pseudo_labels_weight_norm-mean_one/. The runs the study reads are declared in
:data:`RUNS`.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch
import torch.nn.functional as F

from dmp.config import ConfigError, resolve
from dmp.data.inputs import BatchStream, TensorDataset, build_task, mix_seeds
from dmp.suite import yaml_value
from dmp.train import compiled
from dmp.train.evaluate import predict
from dmp.train.trainer import Trainer
from studies.records import OFFICE31

OUT = OFFICE31 / "diagnosis" / "pseudo_labels"
DATASET = "office31_lite0_s5v20_t128"
DOMAINS = {"A": "amazon", "D": "dslr", "W": "webcam"}


def read_order(n: int, seed: int) -> torch.Tensor:
    """The seed's permutation of the ``n`` target images: a run with fraction ``q`` reads the labels of its first
    ``round(q n)`` entries (the same images for every method of the seed, nested across ``q``)."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(mix_seeds(seed, 0x5EED, n)))


def read_mask(n: int, seed: int, fraction: float) -> torch.Tensor:
    """``[n]`` bool: the target images whose labels a run with ``fraction`` reads."""
    mask = torch.zeros(n, dtype=torch.bool)
    mask[read_order(n, seed)[:round(fraction * n)]] = True
    return mask


def mixed_predictions(p_t: torch.Tensor, labels: torch.Tensor, read: torch.Tensor) -> torch.Tensor:
    """``p_t`` ``[b, c]`` with the rows where ``read`` ``[b]`` holds replaced by the one-hot ``labels`` ``[b]``."""
    onehot = F.one_hot(labels, p_t.shape[1]).to(p_t.dtype)
    return torch.where(read.unsqueeze(1), onehot, p_t)


class RecordingStream(BatchStream):
    """The target stream of the trainer, remembering the images of the batch it gave last."""
    last: list[int] = []

    def iterate(self, start, stop, pin_memory=False):
        if not isinstance(self.dataset, TensorDataset):
            raise SystemExit("pseudo-labels: a features dataset is needed (the stored trunk)")
        for t in range(start, stop):
            keys = self.keys(t)
            self.last = [i for i, _ in keys]
            yield self.dataset.batch(self.last, [sd for _, sd in keys])


class LabelledIntra:
    """The run's method, whose terms see ``p_t`` with the read images' rows replaced by their labels (only the
    intra-class term reads ``p_t`` beyond its shape in the vanilla setting: ``dmp.methods.dmp.dmp_losses``)."""

    def __init__(self, method, stream: RecordingStream, labels: torch.Tensor, read: torch.Tensor):
        self.method, self.stream, self.labels, self.read = method, stream, labels, read

    def __getattr__(self, name):
        return getattr(self.method, name)

    def losses(self, ctx):
        if ctx.p_t is not None and self.read.any():
            idx = torch.as_tensor(self.stream.last)
            ctx = dataclasses.replace(ctx, p_t=mixed_predictions(ctx.p_t, self.labels[idx].to(ctx.p_t.device),
                                                                 self.read[idx].to(ctx.p_t.device)))
        return self.method.losses(ctx)


class DiagnosisTrainer(Trainer):
    def __init__(self, cfg, task, out, read: torch.Tensor):
        super().__init__(cfg, task, out, progress=True)
        if bool(read.any()):   # said in the run's own metrics.json: no table or report ever takes it as a result
            self.target_labels_read = (f"the labels of {int(read.sum())} of the {len(read)} target images, read by "
                                       f"the intra-class term")
        self.target = RecordingStream(task.target_train, cfg["batch_size"], cfg["seed"], 1, self.workers)
        self.method = LabelledIntra(self.method, self.target, task.target_train.labels, read)
        self.compiled = compiled.Step(self, self.compile_mode)


def diagnose(user_cfg: dict, fraction: float, out: Path) -> dict:
    """Train ``user_cfg`` (a DMP variant) into ``out`` with the labels of ``fraction`` of the target read by the
    intra-class term; returns (and writes) ``out/diagnosis.json``."""
    done = out / "diagnosis.json"
    if done.is_file():
        return json.loads(done.read_text())
    if (out / "metrics.json").is_file():  # finished before its predictions were written: the model is gone
        raise SystemExit(f"{out}: metrics.json without diagnosis.json; delete the folder and run again")
    cfg = resolve({**user_cfg, "compile": "off"})
    data = build_task(cfg)
    labels = data.target_train.labels
    if not torch.equal(labels, data.target_eval.labels):
        raise SystemExit("pseudo-labels: the target's training and scored images differ in order")
    read = read_mask(len(labels), cfg["seed"], fraction)
    trainer = DiagnosisTrainer(cfg, data, out, read)
    metrics = trainer.run()
    _, probs, _ = predict(trainer.model, data.target_eval, trainer.device, cfg["eval_batch_size"])
    right = probs.argmax(1) == labels
    result = {
        "method": cfg["method"], "fraction": fraction, "seed": cfg["seed"], "images": len(labels),
        "read": int(read.sum()),
        "accuracy": 100.0 * float(right.double().mean()),
        "accuracy_held_out": 100.0 * float(right[~read].double().mean()),
        "predictions": probs.argmax(1).tolist(), "labels": labels.tolist(),
        "intra_start_iteration": metrics["schedule"]["intra_start_iteration"],
        "accuracy_log": metrics["accuracy_log"],
        "run_accuracy": metrics["accuracy"], "git_commit": metrics["git_commit"],
        "code_version": metrics["code_version"], "dataset_version": metrics["dataset_version"],
    }
    done.write_text(json.dumps(result) + "\n")
    return result


def variant_root(overrides: dict, out_root: Path = OUT) -> Path:
    """The root of the runs with the preset changed by ``overrides`` (``out_root`` itself when there is none)."""
    tag = "_".join(f"{k}-{v}" for k, v in sorted(overrides.items()))
    return out_root.with_name(f"{out_root.name}_{tag}") if tag else out_root


def parse_sets(items: list[str]) -> dict:
    """``["key=value", ...]`` -> ``{key: value}``; the values are checked by the config's own validation."""
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise SystemExit(f"--set {item!r}: expected key=value")
        if key in ("dataset", "source", "target", "method", "seed", "setting", "metric"):
            raise SystemExit(f"--set {key}: fixed by --task/--method/--seed and the study")
        out[key] = value
    return out


def run(task: str, method: str, fraction: float, seed: int, out_root: Path = OUT,
        overrides: dict | None = None) -> dict:
    """One Office-31 run of the diagnosis, on the deeper form's stored trunk, with the study's preset (changed by
    ``overrides``, whose runs live in :func:`variant_root`)."""
    if method not in ("dmp", "dmp_no_ds"):
        raise SystemExit(f"--method {method!r}: dmp or dmp_no_ds")
    if not 0.0 <= fraction < 1.0:
        raise SystemExit(f"--fraction {fraction}: in [0, 1)")
    if method == "dmp_no_ds" and fraction:
        raise SystemExit("--method dmp_no_ds reads no pseudo-label: --fraction 0")
    overrides = dict(overrides or {})
    src, tgt = task.split("-")
    cfg = {"dataset": DATASET, "source": DOMAINS[src], "target": DOMAINS[tgt], "setting": "vanilla",
           "metric": "G", "device": "cpu", "threads": 1, "method": method, "seed": seed,
           "log_accuracy_every": 50,  # the target accuracy when the intra-class term starts (training unchanged)
           **overrides}
    try:
        resolved = resolve({**cfg, "compile": "off"})
    except ConfigError as e:
        raise SystemExit(f"--set: {e}") from None
    overrides = canonical(overrides, resolved)
    out = variant_root(overrides, out_root) / f"q{fraction:g}" / task / method / f"seed{seed}"
    return {"task": task, **diagnose({**cfg, **overrides}, fraction, out)}


def canonical(overrides: dict, resolved: dict) -> dict:
    """Each override as the value the config resolved it to, in the suite's YAML spelling (``False``, ``FALSE`` ->
    ``false``; ``1e1`` -> ``10.0``), so one variant has one root whatever its spelling."""
    return {k: yaml_value(resolved[k]) for k in overrides}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m studies pseudo-labels", description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", required=True, choices=[f"{a}-{b}" for a in DOMAINS for b in DOMAINS if a != b])
    ap.add_argument("--method", required=True)
    ap.add_argument("--fraction", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="change a preset key for this variant (its runs get a root of their own)")
    a = ap.parse_args(argv)
    r = run(a.task, a.method, a.fraction, a.seed, overrides=parse_sets(a.set))
    print(f"{a.task} {a.method} q={a.fraction:g} seed {a.seed}: accuracy {r['accuracy']:.1f}, "
          f"on the {r['images'] - r['read']} held-out images {r['accuracy_held_out']:.1f}")


if __name__ == "__main__":
    main()
