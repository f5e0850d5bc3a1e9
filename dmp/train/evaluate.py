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
    r"""Paper Sec. "Discriminability of Interpolation": from ``per_class`` random target samples of each class,
    build :math:`\alpha h_i + (1 - \alpha) h_j` (``i != j`` of the same class, last manifold layer) and classify
    them with the classifier. ``alpha = 0`` is the plain accuracy on the same subset."""
    g = np.random.default_rng(seed)
    labels = labels.numpy()
    idx_i, idx_j = [], []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        if len(members) < 2:
            continue
        pick = g.choice(members, size=min(per_class, len(members)), replace=False)
        partner = g.choice(members, size=len(pick))
        clash = partner == pick
        while clash.any():  # i != j
            partner[clash] = g.choice(members, size=int(clash.sum()))
            clash = partner == pick
        idx_i.append(pick)
        idx_j.append(partner)
    if not idx_i:
        return {}
    i, j = np.concatenate(idx_i), np.concatenate(idx_j)
    model.eval()
    device = next(model.parameters()).device
    out = {}
    for a in alphas:
        mixed = a * feats[i] + (1 - a) * feats[j]
        pred = model.classifier(mixed.to(device)).argmax(1).cpu().numpy()
        rep = classification_report(pred, labels[i], classes)
        rep.pop("confusion_matrix")
        out[f"{a:g}"] = rep
    return out
