"""Where a trained run leaves the two domains in its last manifold layer: what the alignment term measures and
whether the class structure agrees across the domains (evidence only, not part of the product).

Reads a run's ``features.npz`` (the last manifold layer's features of up to ``save_features`` samples per class and
domain, evaluation mode, written at the end of every run) and returns:

* ``grassmann``: ``d^2`` times the Grassmann distance of Eq. GrassMetric between a source and a target batch of the
  run's ``b_s`` samples (``d' = b_s - 1``), averaged over random batch pairs: what ``L_AL`` measures, on a scale
  from 0 to ``2 d'``;
* ``class_mean_cosine``: the mean over classes of the cosine between the source and the target class mean, each
  centred on its domain's mean (1 = the class structure of the two domains agrees);
* ``ncm_target``: the share (%) of target samples whose nearest source class mean (cosine) is their own class's.

The last two read the target labels: an analysis of a finished run, never a model selection.

    python scripts/diagnose_geometry.py results/evidence/runs/main/mnist_usps/vanilla/usps-mnist/dmp/default/seed0
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def geometry(run: Path, pairs: int = 20, seed: int = 0) -> dict:
    """The three measures above for the run folder ``run`` (its ``features.npz`` and ``metrics.json``)."""
    import torch

    sys.path.insert(0, str(ROOT))
    from dmp.manifolds.grassmann import grassmann_distance
    run = Path(run)
    cfg = json.loads((run / "metrics.json").read_text())["config"]
    f = np.load(run / "features.npz")
    hs, ht, ys, yt = (f[k] for k in ("source_features", "target_features", "source_labels", "target_labels"))
    b, d = cfg["batch_size"], hs.shape[1]
    rng = np.random.default_rng(seed)
    dist = [float(grassmann_distance(torch.from_numpy(hs[rng.choice(len(hs), b, replace=False)]).double(),
                                     torch.from_numpy(ht[rng.choice(len(ht), b, replace=False)]).double()))
            for _ in range(pairs)]
    classes = np.intersect1d(np.unique(ys), np.unique(yt))
    ms = np.stack([hs[ys == k].mean(0) for k in classes])
    mt = np.stack([ht[yt == k].mean(0) for k in classes])
    cos = (_unit(ms - hs.mean(0)) * _unit(mt - ht.mean(0))).sum(1)
    nearest = classes[(_unit(ht) @ _unit(ms).T).argmax(1)]
    return dict(grassmann=float(np.mean(dist)) * d ** 2, class_mean_cosine=float(cos.mean()),
                ncm_target=float((nearest == yt).mean() * 100), batch_size=b, dim=d, pairs=pairs,
                samples=[len(hs), len(ht)])


if __name__ == "__main__":
    for folder in sys.argv[1:]:
        print(folder, json.dumps(geometry(Path(folder))))
