"""Stand-ins for ImageNet pre-training, for the small CNNs of the demo and of the digits.

The paper fine-tunes an ImageNet-pretrained ResNet (backbone at 0.1x lr). The CPU demo keeps that regime in
miniature: the small CNN is trained once on a generated corpus that is no demo domain
(:func:`dmp.data.demo.render_pretrain`: 16 shape classes, gradient backgrounds, random colours, filled or
outlined), its classifier is dropped, and the backbone weights are saved as a file that every demo run loads
through ``weights_path`` - the route a user with offline ImageNet weights takes. The digits (MNIST<->USPS) start
from the same corpus, rendered grey at 16 x 16 for their one-channel GroupNorm CNN (recipe ``digits``).

    python -m dmp pretrain-demo --out results/demo/weights/smallcnn_demo.pt
    python -m dmp pretrain-demo --recipe digits --out results/evidence/weights/smallcnn_gn_digits.pt
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from ..io import atomic_write, sha256_file, write_json

RECIPES = {
    # RGB, ImageNet-normalised, resized to 24 and randomly cropped to 20 (the demo runs' transform)
    "demo": dict(per_class=150, iterations=600, batch_size=64, lr=1e-3, resize=24, crop=20, pad=0, channels=3,
                 norm="batch", seed=0, threads=2),
    # grey, 16 x 16, each sample scaled to zero mean and unit variance (the mnist_usps preset's sample_norm),
    # shifted by up to 2 pixels (its shift); GroupNorm (smallcnn_gn)
    "digits": dict(per_class=300, iterations=3000, batch_size=64, lr=1e-3, resize=16, crop=16, pad=2, channels=1,
                   norm="group", seed=0, threads=2),
}
"""The pre-training recipes (fixed: a weights file is a pure function of the code and its recipe on one software
and CPU stack). CPU kernels give the same numbers for a fixed thread count only, so the recipe fixes it: the
caller's thread count does not change the file. What it still depends on (the torch build and the CPU's kernel
family, e.g. AVX-512 or AVX2, whose float rounding differs; the image libraries that draw the corpus) is recorded
beside it in ``<file>.json`` (:func:`provenance`)."""


def pretrain_images(per_class: int, resize: int, channels: int = 3):
    """The corpus as ``[N, channels, resize, resize]`` tensors and labels (deterministic): RGB normalised with
    the ImageNet statistics, or grey with each sample scaled to zero mean and unit variance."""
    from ..data.demo import PRETRAIN_CLASSES, render_pretrain
    from ..data.inputs import image_transforms, sample_norm

    fixed = image_transforms(False, resize, resize)
    xs, ys = [], []
    for label, cls in enumerate(PRETRAIN_CLASSES):
        for i in range(per_class):
            image = render_pretrain(cls, i)
            if channels == 1:
                grey = image.convert("L").resize((resize, resize), resample=3)  # 3 = bicubic
                xs.append(torch.from_numpy(sample_norm(np.asarray(grey, np.float32)[None, None])[0]))
            else:
                xs.append(fixed(image))
            ys.append(label)
    return torch.stack(xs), torch.tensor(ys), len(PRETRAIN_CLASSES)


def _augment(x: torch.Tensor, crop: int, g: torch.Generator, pad: int = 0) -> torch.Tensor:
    """Zero padding by ``pad``, then a random ``crop`` and a horizontal flip per sample (the training transform
    of the demo runs; a shift of up to ``pad`` pixels for the digits)."""
    x = F.pad(x, (pad,) * 4) if pad else x
    n, _, h, w = x.shape
    top = torch.randint(0, h - crop + 1, (n,), generator=g)
    left = torch.randint(0, w - crop + 1, (n,), generator=g)
    flip = torch.rand(n, generator=g) < 0.5
    out = torch.stack([x[k, :, top[k]:top[k] + crop, left[k]:left[k] + crop] for k in range(n)])
    out[flip] = out[flip].flip(-1)
    return out


def pretrain_backbone(out, recipe: str = "demo", progress: bool = True, **overrides) -> dict:
    """Train the small CNN of ``recipe`` (:data:`RECIPES`) on the pre-training corpus and write its backbone
    ``state_dict`` to ``out`` (atomically). Returns a summary (final training accuracy, recipe)."""
    if recipe not in RECIPES:
        raise ValueError(f"unknown pre-training recipe {recipe!r}; known: {', '.join(RECIPES)}")
    r = dict(RECIPES[recipe], **overrides)
    check_out(out)
    threads = torch.get_num_threads()
    torch.set_num_threads(r["threads"])
    try:
        return _pretrain(out, recipe, r, progress)
    finally:
        torch.set_num_threads(threads)


def check_out(out) -> None:
    """Refuse, before the minutes of training, an ``--out`` that cannot be written at the end: an existing folder, or
    a file in a folder that cannot be created or written."""
    import os

    out = Path(out)
    if out.is_dir():
        raise IsADirectoryError(f"--out {out} is a folder; give the weights file to write (e.g. {out / 'smallcnn.pt'})")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OSError(exc.errno, f"--out {out}: cannot create its folder ({exc.strerror})") from None
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise PermissionError(f"--out {out}: its folder {out.parent} is not writable")


def _pretrain(out, recipe: str, r: dict, progress: bool) -> dict:
    from ..models.backbones import SmallCNN

    torch.manual_seed(r["seed"])
    g = torch.Generator().manual_seed(r["seed"])
    x, y, classes = pretrain_images(r["per_class"], r["resize"], r["channels"])
    backbone = SmallCNN(r["channels"], norm=r["norm"])
    model = nn.Sequential(backbone, nn.Linear(backbone.out_dim, classes))
    opt = torch.optim.Adam(model.parameters(), lr=r["lr"])
    model.train()
    correct = seen = 0
    for it in tqdm(range(r["iterations"]), desc=f"pre-training the {recipe} backbone", disable=not progress):
        idx = torch.randint(0, len(y), (r["batch_size"],), generator=g)
        logits = model(_augment(x[idx], r["crop"], g, r["pad"]))
        loss = F.cross_entropy(logits, y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if it >= r["iterations"] - 100:  # accuracy over the last 100 steps
            correct += int((logits.argmax(1) == y[idx]).sum())
            seen += len(idx)
    out = Path(out)
    atomic_write(out, lambda fh: torch.save(backbone.state_dict(), fh))
    info = dict(r, recipe=recipe, classes=classes, train_accuracy=100.0 * correct / max(seen, 1), path=str(out))
    write_json(out.with_name(out.name + ".json"), provenance(out, info))
    return info


def provenance(out: Path, info: dict) -> dict:
    """What the weights file ``out`` is a function of, written beside it as ``<file>.json``: its sha256, the
    recipe, the code version, the package versions and the CPU kernel family (another torch build or instruction
    set can round differently and write another file from the same recipe)."""
    from importlib import metadata

    from .provenance import code_version, packages
    try:
        pillow = metadata.version("pillow")
    except metadata.PackageNotFoundError:
        pillow = None
    return dict(sha256=sha256_file(out), recipe={k: v for k, v in info.items() if k != "path"},
                code_version=code_version(), packages=dict(packages(), pillow=pillow),
                cpu_capability=torch.backends.cpu.get_cpu_capability(), mkldnn=torch.backends.mkldnn.is_available()
                and torch.backends.mkldnn.enabled, threads=info["threads"])
