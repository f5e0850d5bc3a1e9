"""A small synthetic domain shift for trainer tests: Gaussian classes; the target domain is the source
rotated, scaled and shifted, so a source-only classifier degrades and alignment can help."""
import numpy as np

from dmp.data.inputs import Task, TensorDataset


def shift_task(seed=0, classes=4, per_class=60, dim=16, angle=0.9, spread=1.6, target_classes=None):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 2.5, (classes, dim))
    xs = np.concatenate([centres[c] + rng.normal(0, spread, (per_class, dim)) for c in range(classes)])
    ys = np.repeat(np.arange(classes), per_class)
    q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    # partial rotation towards a random orthogonal map: R = expm-like blend, then scale + shift
    rot = np.eye(dim) * np.cos(angle) + (q - q.T) / 2 * np.sin(angle)
    keep = np.isin(ys, np.arange(target_classes if target_classes else classes))
    xt = (np.concatenate([centres[c] + rng.normal(0, spread, (per_class, dim)) for c in range(classes)])
          @ rot.T) * 1.3 + 1.0
    src, tgt = TensorDataset(xs, ys), TensorDataset(xt[keep], ys[keep])
    return Task(src, src, tgt, tgt, [f"class{c}" for c in range(classes)], 1, dim, "synthetic")


def small_cfg(**over):
    cfg = dict(dataset="synthetic", source="s", target="t", backbone="identity", pretrained=False,
               bottleneck_dims=[128, 64], batch_size=32, iterations=120, lr=1e-3, threads=1, log_every=5,
               checkpoint_every=40, eval_batch_size=64, interpolation_per_class=20, preset="none")
    cfg.update(over)
    return cfg
