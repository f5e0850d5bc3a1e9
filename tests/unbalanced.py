"""Fixtures for the independent checks of the trainer: a small domain shift whose classes are
NOT balanced (so "mean over all samples" and "mean of the class means" differ, and so do overall and mean class
accuracy), and spies that see what the trainer hands to the losses, the manifold distances and the model.

The spies patch a function everywhere it is bound (its home module, the package that re-exports it and every
loaded ``dmp.*`` module that imported it by name), so they see the calls whichever module makes them."""
from __future__ import annotations

import sys

import numpy as np
import torch

from dmp.data.inputs import Task, TensorDataset

SOURCE_COUNTS = (30, 14, 9, 5)       # per class, source domain: a class of 30 and one of 5
TARGET_COUNTS = (6, 25, 11, 16)      # per class, target domain: another imbalance


def unbalanced_task(seed=0, dim=12, source_counts=SOURCE_COUNTS, target_counts=TARGET_COUNTS, spread=1.2,
                    eval_counts=None):
    """A 4-class Gaussian shift (target = source rotated, scaled and shifted) with unequal class sizes.

    ``eval_counts``: per-class sizes of separate target and source *evaluation* splits (default: the training
    splits are also the evaluation splits, as in tests/synthetic.py); with them the anchor pass and the final
    evaluation read other samples than the training streams, so a pass over the wrong split is visible."""
    rng = np.random.default_rng(seed)
    c = len(source_counts)
    centres = rng.normal(0, 2.5, (c, dim))
    q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    rot = np.eye(dim) * np.cos(0.7) + (q - q.T) / 2 * np.sin(0.7)

    def draw(counts, target):
        y = np.concatenate([np.full(n, k) for k, n in enumerate(counts)]).astype(np.int64)
        x = centres[y] + rng.normal(0, spread, (len(y), dim))
        if target:
            x = (x @ rot.T) * 1.3 + 1.0
        order = rng.permutation(len(y))            # classes interleaved, as a real list would not be sorted
        return TensorDataset(x[order].astype(np.float32), y[order])

    src, tgt = draw(source_counts, False), draw(target_counts, True)
    if eval_counts is None:
        src_eval, tgt_eval = src, tgt
    else:
        src_eval, tgt_eval = draw(eval_counts[0], False), draw(eval_counts[1], True)
    return Task(src, src_eval, tgt, tgt_eval, [f"class{k}" for k in range(c)], 1, dim, "unbalanced")


def tiny_cfg(**over):
    """A run of a few iterations on CPU (one thread), every row logged, distinct lambdas."""
    cfg = dict(dataset="synthetic", source="s", target="t", backbone="identity", pretrained=False,
               bottleneck_dims=[24, 16], batch_size=16, iterations=8, lr=1e-3, threads=1, log_every=1,
               checkpoint_every=1000, eval_batch_size=64, interpolation_per_class=5, preset="none", device="cpu",
               lambda1=3.0, lambda2=7.0, entropy_weight=0.5, intra_start=0, anchor_period=4, save_features=0)
    cfg.update(over)
    return cfg


# -- where a batch came from ------------------------------------------------------------------------------
class RowIndex:
    """Which dataset (by name) and label each input row belongs to, by its exact bytes."""

    def __init__(self, **datasets):
        self.where: dict[bytes, tuple[str, int]] = {}
        for name, ds in datasets.items():
            for x, y in zip(ds.x, ds.labels):
                self.where.setdefault(x.numpy().tobytes(), (name, int(y)))

    def of(self, x: torch.Tensor) -> tuple[set[str], torch.Tensor]:
        """``(names of the datasets the rows of x come from, their labels)``; unknown rows -> name ``"?"``."""
        found = [self.where.get(r.detach().cpu().float().numpy().tobytes(), ("?", -1)) for r in x]
        return {n for n, _ in found}, torch.tensor([y for _, y in found])


# -- spies ----------------------------------------------------------------------------------------------
def spy(monkeypatch, module, name, probe=None):
    """Replace ``module.name`` and every ``dmp.*`` binding of the same function by a recorder; returns the list
    of calls, each ``{"args", "kwargs", "out", "grads", "probe"}``: the tensors as passed (not copied), the
    gradients the output receives in the backward pass (its weight in the loss; ``[]`` when it is not in the
    loss) and ``probe(args, kwargs, out)``, evaluated at the call."""
    original = getattr(module, name)
    calls = []

    def wrapper(*args, **kwargs):
        out = original(*args, **kwargs)
        call = {"args": args, "kwargs": kwargs, "out": out, "grads": [],
                "probe": probe(args, kwargs, out) if probe else None}
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.register_hook(lambda g: call["grads"].append(float(g)))
        calls.append(call)
        return out

    for mod in [module] + [m for n, m in list(sys.modules.items()) if n == "dmp" or n.startswith("dmp.")]:
        for attr, value in list(vars(mod).items()):
            if value is original:
                monkeypatch.setattr(mod, attr, wrapper)
    return calls


def record_forwards(model):
    """Forward hook on the model: a list of ``{"x", "feats", "logits", "grad": bool}`` per call."""
    seen = []

    def hook(module, args, out):
        feats, logits = out
        seen.append({"x": args[0].detach().clone(), "feats": list(feats), "logits": logits,
                     "grad": torch.is_grad_enabled()})
    model.register_forward_hook(hook)
    return seen


def producer(forwards, tensor):
    """The forward call (and the layer) whose output feature is ``tensor`` (same values, same shape)."""
    for f in forwards:
        for layer, h in enumerate(f["feats"]):
            if h.shape == tensor.shape and torch.equal(h.float(), tensor.float()):
                return f, layer
    return None, None
