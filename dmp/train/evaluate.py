"""Target evaluation: accuracy, per-class accuracy, confusion matrix, and the interpolation analysis of the
paper's Table "DiscriInterpola"."""
from __future__ import annotations

import numpy as np
import torch

from ..data.inputs import eval_loader


@torch.no_grad()
def predict(model, dataset, device, batch_size=256, num_workers=0):
    """Eval-mode pass; returns ``(last manifold features [N, d], probabilities [N, c], labels [N])`` on CPU."""
    model.eval()
    feats, probs, labels = [], [], []
    for x, y in eval_loader(dataset, batch_size, num_workers):
        f, logits = model(x.to(device))
        feats.append(f[-1].float().cpu())
        probs.append(torch.softmax(logits.float(), 1).cpu())
        labels.append(y)
    return torch.cat(feats), torch.cat(probs), torch.cat(labels)


def classification_report(pred: np.ndarray, labels: np.ndarray, classes: list[str]) -> dict:
    """Overall accuracy (%), mean of the per-class accuracies (%) over the classes present in ``labels``,
    per-class accuracies, and the ``c x c`` confusion matrix (rows = true class)."""
    c = len(classes)
    cm = np.zeros((c, c), dtype=np.int64)
    np.add.at(cm, (labels, pred), 1)
    present = cm.sum(1) > 0
    per_class = {classes[i]: 100.0 * cm[i, i] / cm[i].sum() for i in range(c) if present[i]}
    return {
        "accuracy": 100.0 * float((pred == labels).mean()),
        "mean_class_accuracy": float(np.mean(list(per_class.values()))),
        "per_class_accuracy": per_class,
        "confusion_matrix": cm.tolist(),
    }


@torch.no_grad()
def interpolation_report(model, feats, labels, classes, per_class, seed, alphas=(0.0, 0.1, 0.3, 0.5)):
    r"""Paper Sec. "Discriminability of Interpolation" (Table DiscriInterpola): choose ``per_class`` random
    target samples of each class (the paper: 100 per class, 1200 on VisDA), form every same-class pair
    ``i < j`` of the chosen samples (``12 x C(100, 2) = 59,400`` interpolations on VisDA) and classify
    :math:`\alpha h_i + (1 - \alpha) h_j` (last manifold layer) with the classifier. ``alpha = 0`` is the
    accuracy of the chosen samples themselves ("the data before interpolation")."""
    g = np.random.default_rng(seed)
    labels = labels.numpy()
    chosen, idx_i, idx_j = [], [], []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        if len(members) < 2:
            continue
        pick = np.sort(g.choice(members, size=min(per_class, len(members)), replace=False))
        a, b = np.triu_indices(len(pick), k=1)
        chosen.append(pick)
        idx_i.append(pick[a])
        idx_j.append(pick[b])
    if not chosen:
        return {}
    chosen, i, j = np.concatenate(chosen), np.concatenate(idx_i), np.concatenate(idx_j)
    model.eval()
    device = next(model.parameters()).device
    out = {}
    for a in alphas:
        if a == 0:
            h, y = feats[chosen], labels[chosen]
        else:
            h, y = a * feats[i] + (1 - a) * feats[j], labels[i]
        pred = torch.cat([model.classifier(part.to(device)).argmax(1).cpu() for part in h.split(65536)]).numpy()
        rep = classification_report(pred, y, classes)
        rep.pop("confusion_matrix")
        rep["samples"] = int(len(y))
        out[f"{a:g}"] = rep
    return out
