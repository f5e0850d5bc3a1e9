"""What a finished run keeps of its feature space for the figures (``features.npz`` next to ``metrics.json``).

The figures (dmp/figures) never load a model: the t-SNE plots, the error indices e^G(d') / e^AG(d') and the
interpolation t-SNE read this file.  It holds, for up to ``save_features`` samples per class of each domain
(chosen at random with the run's seed, the same choice for every method of a task), the last manifold layer's
features ``h`` (eval mode), the labels and the model's predictions, and the interpolations
``alpha h_i + (1 - alpha) h_j`` of same-class target pairs with the classifier's prediction for each alpha of the
paper's interpolation table (``alpha = 0`` is ``h_j`` itself)."""
from __future__ import annotations

from pathlib import Path

import contextlib

import numpy as np
import torch

from ..data.inputs import eval_loader
from ..io import atomic_write

FILE = "features.npz"
ALPHAS = (0.0, 0.1, 0.3, 0.5)


def choose_per_class(labels: np.ndarray, per_class: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of up to ``per_class`` samples of each class present in ``labels``."""
    picks = [rng.choice(np.flatnonzero(labels == c), size=min(per_class, int((labels == c).sum())), replace=False)
             for c in np.unique(labels)]
    return np.sort(np.concatenate(picks)) if picks else np.zeros(0, dtype=np.int64)


@torch.no_grad()
def _features(model, dataset, index, device, batch_size, num_workers, autocast=contextlib.nullcontext):
    model.eval()
    feats, preds = [], []
    subset = torch.utils.data.Subset(dataset, [int(i) for i in index])
    for x, _ in eval_loader(subset, batch_size, num_workers) if len(subset) else ():
        with autocast():
            f, logits = model(x.to(device))
        feats.append(f[-1].float().cpu())
        preds.append(logits.argmax(1).cpu())
    if not feats:
        return np.zeros((0, 0), np.float32), np.zeros(0, np.int64)
    return torch.cat(feats).numpy(), torch.cat(preds).numpy()


@torch.no_grad()
def save_features(model, task, device, cfg: dict, target_feats: torch.Tensor, target_probs: torch.Tensor,
                  target_labels: torch.Tensor, out, autocast=contextlib.nullcontext) -> dict:
    """Write ``out`` (features.npz) from the finished model; ``target_*`` are the full target evaluation pass
    (:func:`dmp.train.evaluate.predict`); ``autocast``: the trainer's autocast context of forward passes.  Returns
    a summary for metrics.json."""
    per_class = int(cfg["save_features"])
    rng = np.random.default_rng([int(cfg["seed"]), 20240])
    source_labels = np.asarray(task.source_eval.labels)
    s_idx = choose_per_class(source_labels, per_class, rng)
    # a few hundred images at most: no worker processes
    s_feats, s_pred = _features(model, task.source_eval, s_idx, device, cfg["eval_batch_size"], 0, autocast)
    t_all = target_labels.numpy()
    t_idx = choose_per_class(t_all, per_class, rng)
    t_feats = target_feats[t_idx].numpy().astype(np.float32)
    t_pred = target_probs[t_idx].argmax(1).numpy()
    # same-class target pairs (i, j), i != j: up to per_class of them per class
    pi, pj = [], []
    for c in np.unique(t_all):
        members = np.flatnonzero(t_all == c)
        if len(members) < 2:
            continue
        m = min(per_class, len(members))
        i = rng.choice(members, size=m, replace=False)
        j = np.array([rng.choice(members[members != a]) for a in i])
        pi.append(i)
        pj.append(j)
    pi = np.concatenate(pi) if pi else np.zeros(0, np.int64)
    pj = np.concatenate(pj) if pj else np.zeros(0, np.int64)
    model.eval()
    i_alpha, i_feats, i_pred = [], [], []
    for a in ALPHAS:
        h = a * target_feats[pi] + (1 - a) * target_feats[pj]
        with autocast():
            pred = model.classifier(h.to(device)).argmax(1).cpu() if len(h) else torch.zeros(0, dtype=torch.long)
        i_alpha.append(np.full(len(h), a, np.float32))
        i_feats.append(h.numpy().astype(np.float32))
        i_pred.append(pred.numpy())
    arrays = {
        "source_features": s_feats.astype(np.float32), "source_labels": source_labels[s_idx].astype(np.int64),
        "source_pred": s_pred.astype(np.int64), "source_index": s_idx.astype(np.int64),
        "target_features": t_feats, "target_labels": t_all[t_idx].astype(np.int64),
        "target_pred": t_pred.astype(np.int64), "target_index": t_idx.astype(np.int64),
        "interp_alpha": np.concatenate(i_alpha), "interp_features": np.concatenate(i_feats),
        "interp_labels": np.tile(t_all[pi], len(ALPHAS)).astype(np.int64),
        "interp_pred": np.concatenate(i_pred).astype(np.int64),
    }
    atomic_write(Path(out), lambda fh: np.savez_compressed(fh, **arrays))
    return {"file": Path(out).name, "per_class": per_class, "layer": "last manifold layer (eval mode)",
            "source": int(len(s_idx)), "target": int(len(t_idx)), "interpolation_pairs": int(len(pi)),
            "alphas": [f"{a:g}" for a in ALPHAS]}
