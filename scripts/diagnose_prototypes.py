"""Diagnostic (prints figures; not part of the product): are the source class means usable prototypes when the
intra-class term switches on?

The intra-class term (Eq. IntraLoss&Truncated) pulls each target sample, on every manifold layer, towards the source
class mean of its Top-1 pseudo-label. That helps only if, on that layer, the class means are prototypes (a sample is
nearest, by cosine, to the mean of its own class) and the pseudo-labels are mostly right. This script trains a run
up to ``intra_start`` (the trainer's own code, the run's own config), refreshes the anchors as the trainer does, and
prints for each manifold layer:

* the nearest-class-mean (cosine) accuracy of the SOURCE samples (are the means prototypes at all?) and of the
  target samples, and how often the target's nearest mean agrees with the classifier's Top-1 label;
* the classifier's target accuracy and the share of the most predicted class.

Features are taken as the losses see them: each domain in shuffled batches of the training batch size, with batch
statistics (``batch_statistics``).

    python scripts/diagnose_prototypes.py dataset=demo_pixels source=O target=B seed=0
    python scripts/diagnose_prototypes.py dataset=digits_pixels source=M target=U seed=0
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dmp.cli import user_config  # noqa: E402
from dmp.config import resolve  # noqa: E402
from dmp.models.network import batch_statistics  # noqa: E402
from dmp.data.inputs import build_task, eval_loader  # noqa: E402
from dmp.data.registry import dataset_version, get_dataset  # noqa: E402
from dmp.train.provenance import git_commit  # noqa: E402
from dmp.train.trainer import Trainer  # noqa: E402


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


if __name__ == "__main__":
    main()
