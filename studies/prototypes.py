"""The prototypes diagnosis: are the source class means usable prototypes when the intra-class term switches on?

The intra-class term (Eq. IntraLoss&Truncated) pulls each target sample, on every manifold layer, towards the source
class mean of its Top-1 pseudo-label. That helps only if, on that layer, the class means are prototypes (a sample is
nearest, by cosine, to the mean of its own class) and the pseudo-labels are mostly right. :func:`diagnose` trains a
run up to ``intra_start`` (the trainer's own code, the run's own config), refreshes the anchors as the trainer does,
and measures for each manifold layer:

* the nearest-class-mean (cosine) accuracy of the SOURCE samples (are the means prototypes at all?) and of the
  target samples, and how often the target's nearest mean agrees with the classifier's Top-1 label;
* the classifier's target accuracy and the share of the most predicted class.

Features are taken as the losses see them: each domain in shuffled batches of the training batch size, with batch
statistics (``batch_statistics``). The study (:data:`PROTOTYPE_TASKS`) writes each run's figures to its
``prototypes.json``; on a user's own data, before DMP is trusted there:

    python -m studies prototypes dataset=demo_pixels source=O target=B seed=0
    python -m studies prototypes dataset=digits_pixels source=M target=U seed=0
"""
from __future__ import annotations

import argparse
import itertools
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from dmp.cli import user_config
from dmp.config import resolve
from dmp.data.inputs import build_task, eval_loader
from dmp.data.registry import dataset_version, get_dataset
from dmp.models.network import batch_statistics
from dmp.train.provenance import git_commit
from dmp.train.trainer import Trainer
from studies.records import EVIDENCE, diagnoses, run_versions, task_of
from studies.runs import SEEDS, Run, run
from studies.tables import versions

# Two tasks of every dataset of the main and weak studies, one of Office-Caltech10, two of Office-31's deeper CPU
# form (config/office31_lite_t128.yaml), where L_DS adds less than in the paper
PROTOTYPE_TASKS = [("demo_pixels", ("outline", "blurry")), ("demo_pixels", ("solid", "noisy")),
                   ("digits_pixels", ("mnist", "usps")), ("digits_pixels", ("usps", "mnist")),
                   ("demo_gradients", ("outline", "blurry")), ("demo_gradients", ("solid", "noisy")),
                   ("demo", ("solid", "outline")), ("demo", ("solid", "noisy")),
                   ("office_caltech10", ("amazon", "webcam")), ("mnist_usps", ("mnist", "usps")),
                   ("mnist_usps", ("usps", "mnist")),
                   ("office31_lite0_s5v20_t128", ("webcam", "amazon")),
                   ("office31_lite0_s5v20_t128", ("dslr", "amazon"))]


def runs() -> list:
    """Every run of the study: DMP (No AL), the dataset's preset, up to ``intra_start``."""
    return [run("prototypes", dataset, "vanilla", task, "dmp_no_al", seed, output="prototypes.json", kind="prototypes")
            for (dataset, task), seed in itertools.product(PROTOTYPE_TASKS, range(SEEDS))]


@torch.no_grad()
def layer_features(trainer: Trainer, dataset):
    """Every manifold layer's features, logits and labels of ``dataset`` under its own batch statistics."""
    feats, logits, labels = None, [], []
    # shuffled batches of the training batch size, as the anchor pass does (a file sorted by label would otherwise
    # give one-class batches, whose statistics are no domain's)
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(0))
    with batch_statistics(trainer.model):
        for x, y in eval_loader(dataset, trainer.cfg["batch_size"], 0, order=order):
            f, out = trainer.forward(x)
            feats = [[h.cpu()] for h in f] if feats is None else [acc + [h.cpu()] for acc, h in zip(feats, f)]
            logits.append(out.cpu())
            labels.append(y)
    return [torch.cat(h) for h in feats], torch.cat(logits), torch.cat(labels)


def nearest_mean(h, means):
    return (F.normalize(h, dim=1) @ F.normalize(means, dim=1).t()).argmax(1)


def diagnose(user: dict) -> dict:
    """Train the run ``user`` (python -m dmp train's keys; method dmp_no_al, CPU by default) up to its intra_start
    and return the figures (per manifold layer: nearest-class-mean accuracy of the source and the target, agreement
    with the Top-1 pseudo-label), with the run's config, git commit and dataset version."""
    cfg = resolve({"method": "dmp_no_al", "device": "cpu", "save_features": 0, **user})
    with tempfile.TemporaryDirectory(prefix="dmp-diagnose-") as scratch:  # the run's checkpoint; removed after
        trainer = Trainer(cfg, build_task(cfg), Path(scratch), progress=False)
        stop = trainer.sched["intra_start_iteration"]
        trainer.run(stop_after=stop)
    trainer.refresh_anchors()
    class_means, _ = trainer.anchors.on(torch.device("cpu"))
    hs, logits_s, ys = layer_features(trainer, trainer.task.source_eval)
    ht, logits_t, yt = layer_features(trainer, trainer.task.target_eval)
    pred = logits_t.argmax(1)
    pct = lambda mask: round(100 * float(mask.float().mean()), 2)  # noqa: E731
    layers = []
    for h_s, h_t, means in zip(hs, ht, class_means):
        ncm_s, ncm_t = nearest_mean(h_s, means), nearest_mean(h_t, means)
        layers.append({"dim": h_s.shape[1], "ncm_source": pct(ncm_s == ys), "ncm_target": pct(ncm_t == yt),
                       "ncm_agrees_with_top1": pct(ncm_t == pred)})
    return {"config": cfg, "iteration": stop, "classifier_source": pct(logits_s.argmax(1) == ys),
            "classifier_target": pct(pred == yt),
            "most_predicted_share": round(100 * np.bincount(pred.numpy(), minlength=logits_t.shape[1]).max()
                                          / len(pred), 2),
            "layers": layers, "git_commit": git_commit(),
            "dataset_version": dataset_version(get_dataset(cfg["dataset"]))}


def write(declared: Run) -> None:
    """The diagnosis of one declared run, written to its ``prototypes.json`` (one Snakemake job; on the CPU, one
    thread)."""
    from dmp.io import write_json
    out = declared.path
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / declared.output, diagnose(dict(declared.config, threads=1, device="cpu")))


def collect(out_root: Path = EVIDENCE) -> pd.DataFrame:
    """The study's prototypes.json under ``out_root``, one row each: the run, the iteration, the pseudo-labels right
    and each layer's source and target NCM (``src<i>``, ``tgt<i>``)."""
    rows = []
    for _, d in diagnoses(out_root, "prototypes/*/*/*/*/*/seed*/prototypes.json"):
        c = d["config"]
        row = dict(dataset=c["dataset"], task=task_of(c), seed=c["seed"],
                   iteration=d["iteration"], pseudo=d["classifier_target"], commit=d["git_commit"][:10],
                   **run_versions(dict(d, weights_sha256=None, code_version=None)))
        for i, layer in enumerate(d["layers"]):
            row.update({f"src{i}": layer["ncm_source"], f"tgt{i}": layer["ncm_target"]})
        rows.append(row)
    return pd.DataFrame(rows)


def section(protos: pd.DataFrame, df: pd.DataFrame) -> list[str]:
    """The study's table, with each task's DMP - source-only and DMP (No AL) - source-only (the task
    means of the main or weak study's runs)."""
    if not len(protos):
        return []
    runs = df[df["study"].isin(["main", "weak"]) & (df["setting"] == "vanilla") & (df["variant"] == "default")]
    means = runs.groupby(["dataset", "task", "method"])["accuracy"].mean()
    lines = ["## Are the source class means prototypes when the intra-class term starts? (vanilla)", "",
             "`snakemake study_prototypes` (studies/prototypes.py): each run is trained "
             "(DMP (No AL), the dataset's preset) up to `intra_start`, the anchors are refreshed as the trainer does, "
             "and the source and target features of each manifold layer are taken as the losses see them (shuffled "
             "batches, batch statistics). *NCM*: the share of samples whose nearest source class mean (cosine, the "
             "similarity of Eq. IntraLoss) is the mean of their own class. The intra-class term pulls each target "
             "sample towards the mean of its Top-1 pseudo-label: it can only help where those means are "
             "prototypes (a high source NCM) and the pseudo-labels mostly right. Mean over each row's seeds; commits "
             f"{', '.join(sorted(protos['commit'].unique()))}.", "",
             "| data | task | iteration | Top-1 pseudo-labels right (%) | NCM layer 1 (1024-d): source / target "
             "| NCM layer 2 (512-d): source / target | DMP - source-only | DMP (No AL) - source-only | seeds |",
             "|---|---|---|---|---|---|---|---|---|"]
    above, below = versions(protos.assign(row=protos["dataset"] + " " + protos["task"]), "row", names={})
    lines[-2:-2] = above
    for (dataset, task), g in protos.groupby(["dataset", "task"], sort=False):
        m = g.mean(numeric_only=True)

        def gap(method):
            key = (dataset, task, method), (dataset, task, "source_only")
            return f"{means[key[0]] - means[key[1]]:+.1f}" if all(k in means.index for k in key) else "–"
        lines.append(f"| {dataset} | {task} | {int(m['iteration'])} | {m['pseudo']:.1f} | {m['src0']:.1f} / "
                     f"{m['tgt0']:.1f} | {m['src1']:.1f} / {m['tgt1']:.1f} | {gap('dmp')} | {gap('dmp_no_al')} | "
                     f"{g['seed'].nunique()} |")
    return lines + ["", *below]


def note(protos: pd.DataFrame | None) -> str:
    """What the prototypes table shows about demo_pixels against the other data (numbers read from it)."""
    if protos is None or not len(protos) or "demo_pixels" not in set(protos["dataset"]):
        return ""
    t = protos.groupby(["dataset", "task"])[["src0", "pseudo"]].mean()
    pix, rest = t.loc["demo_pixels"], t.drop("demo_pixels", level="dataset")
    return (f" What does set `demo_pixels` apart is the first manifold layer (the table \"Are the source class "
            f"means prototypes\"): when the intra-class term starts, the nearest source class mean there classifies "
            f"only {pix['src0'].min():.0f} to {pix['src0'].max():.0f} % of the source samples themselves, against "
            f"{rest['src0'].min():.0f} % or more on every other task measured, `digits_pixels` included; the term "
            "pulls the target towards means that are no class prototypes, with Top-1 pseudo-labels that are right "
            f"for only {pix['pseudo'].min():.0f} to {pix['pseudo'].max():.0f} % of the target"
            + (f" (on `digits_pixels` {t.loc['digits_pixels']['pseudo'].min():.0f} to "
               f"{t.loc['digits_pixels']['pseudo'].max():.0f} %, where DMP helps: poor pseudo-labels alone do not "
               "decide it)" if "digits_pixels" in t.index.get_level_values(0) else "") + ". "
            "`python -m studies prototypes dataset=... source=... target=...` measures this on a user's own "
            "data before DMP is trusted there.")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="+", metavar="key=value", help="the run (as for python -m dmp train)")
    ap.add_argument("--config", help="run config YAML")
    args = ap.parse_args(argv)
    d = diagnose(user_config(args))
    cfg = d["config"]
    print(f"{cfg['dataset']} {cfg['source']}->{cfg['target']} seed {cfg['seed']}, at iteration {d['iteration']} "
          f"(intra_start): classifier accuracy source {d['classifier_source']:.1f} %, target "
          f"{d['classifier_target']:.1f} % (most predicted class: {d['most_predicted_share']:.0f} % of the target)")
    for layer, f in enumerate(d["layers"]):
        print(f"manifold layer {layer} ({f['dim']}-d): nearest source class mean classifies the source "
              f"{f['ncm_source']:.1f} %, the target {f['ncm_target']:.1f} %; agrees with the Top-1 pseudo-label on "
              f"{f['ncm_agrees_with_top1']:.1f} % of the target")
