"""The demo's stand-in for ImageNet pre-training.

The paper fine-tunes an ImageNet-pretrained ResNet (backbone at 0.1x lr). The CPU demo keeps that regime in
miniature: the small CNN is trained once on a generated corpus that is no demo domain
(:func:`dmp.data.demo.render_pretrain`: 16 shape classes, gradient backgrounds, random colours, filled or
outlined), its classifier is dropped, and the backbone weights are saved as a file that every demo run loads
through ``weights_path`` - the route a user with offline ImageNet weights takes.

    python -m dmp pretrain-demo --out results/demo/weights/smallcnn_demo.pt
"""
from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from ..io import atomic_write

PRETRAIN = dict(per_class=150, iterations=600, batch_size=64, lr=1e-3, resize=24, crop=20, seed=0)
"""The pre-training recipe (fixed: the weights file is a pure function of the code)."""


def pretrain_images(per_class: int, resize: int):
    """The corpus as normalised ``[N, 3, resize, resize]`` tensors and labels (deterministic)."""
    from ..data.demo import PRETRAIN_CLASSES, render_pretrain
    from ..data.inputs import image_transforms

    fixed = image_transforms(False, resize, resize)
    xs, ys = [], []
    for label, cls in enumerate(PRETRAIN_CLASSES):
        for i in range(per_class):
            xs.append(fixed(render_pretrain(cls, i)))
            ys.append(label)
    return torch.stack(xs), torch.tensor(ys), len(PRETRAIN_CLASSES)


def _augment(x: torch.Tensor, crop: int, g: torch.Generator) -> torch.Tensor:
    """Random crop and horizontal flip per sample (the training transform of the demo runs)."""
    n, _, h, w = x.shape
    top = torch.randint(0, h - crop + 1, (n,), generator=g)
    left = torch.randint(0, w - crop + 1, (n,), generator=g)
    flip = torch.rand(n, generator=g) < 0.5
    out = torch.stack([x[k, :, top[k]:top[k] + crop, left[k]:left[k] + crop] for k in range(n)])
    out[flip] = out[flip].flip(-1)
    return out


def pretrain_demo_backbone(out, progress: bool = True, **overrides) -> dict:
    """Train the small CNN on the pre-training corpus and write its backbone ``state_dict`` to ``out``
    (atomically). Returns a summary (final training accuracy, recipe)."""
    from ..models.backbones import SmallCNN

    recipe = dict(PRETRAIN, **overrides)
    torch.manual_seed(recipe["seed"])
    g = torch.Generator().manual_seed(recipe["seed"])
    x, y, classes = pretrain_images(recipe["per_class"], recipe["resize"])
    backbone = SmallCNN(3)
    model = nn.Sequential(backbone, nn.Linear(backbone.out_dim, classes))
    opt = torch.optim.Adam(model.parameters(), lr=recipe["lr"])
    model.train()
    correct = seen = 0
    for it in tqdm(range(recipe["iterations"]), desc="pre-training the demo backbone", disable=not progress):
        idx = torch.randint(0, len(y), (recipe["batch_size"],), generator=g)
        logits = model(_augment(x[idx], recipe["crop"], g))
        loss = F.cross_entropy(logits, y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if it >= recipe["iterations"] - 100:  # accuracy over the last 100 steps
            correct += int((logits.argmax(1) == y[idx]).sum())
            seen += len(idx)
    out = Path(out)
    atomic_write(out, lambda fh: torch.save(backbone.state_dict(), fh))
    return dict(recipe, classes=classes, train_accuracy=100.0 * correct / max(seen, 1), path=str(out))
