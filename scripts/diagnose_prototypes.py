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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="+", metavar="key=value", help="the run (as for python -m dmp train)")
    ap.add_argument("--config", help="run config YAML")
    args = ap.parse_args(argv)
    user = {"method": "dmp_no_al", "device": "cpu", "save_features": 0, **user_config(args)}
    cfg = resolve(user)
    trainer = Trainer(cfg, build_task(cfg), Path(tempfile.mkdtemp(prefix="dmp-diagnose-")), progress=False)
    stop = trainer.sched["intra_start_iteration"]
    trainer.run(stop_after=stop)
    trainer.refresh_anchors()
    class_means, _ = trainer.anchors.on(torch.device("cpu"))
    hs, logits_s, ys = layer_features(trainer, trainer.task.source_eval)
    ht, logits_t, yt = layer_features(trainer, trainer.task.target_eval)
    pred = logits_t.argmax(1)
    share = np.bincount(pred.numpy(), minlength=logits_t.shape[1]).max() / len(pred)
    print(f"{cfg['dataset']} {cfg['source']}->{cfg['target']} seed {cfg['seed']}, at iteration {stop} (intra_start): "
          f"classifier accuracy source {100 * (logits_s.argmax(1) == ys).float().mean():.1f} %, target "
          f"{100 * (pred == yt).float().mean():.1f} % (most predicted class: {100 * share:.0f} % of the target)")
    for layer, (h_s, h_t, means) in enumerate(zip(hs, ht, class_means)):
        ncm_s, ncm_t = nearest_mean(h_s, means), nearest_mean(h_t, means)
        print(f"manifold layer {layer} ({h_s.shape[1]}-d): nearest source class mean classifies the source "
              f"{100 * (ncm_s == ys).float().mean():.1f} %, the target {100 * (ncm_t == yt).float().mean():.1f} %; "
              f"agrees with the Top-1 pseudo-label on {100 * (ncm_t == pred).float().mean():.1f} % of the target")


if __name__ == "__main__":
    main()
