"""``extract-features``: run a backbone once over every domain of an image dataset and store the features as
a new "features" dataset (``datasets/<out>/dataset.yaml`` + one ``<domain>.npz`` per domain with ``X``,
``y`` and ``paths``), recording the backbone, its weights and the transform in the yaml's ``meta``.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from ..io import atomic_write, sha256_file, write_text
from . import registry


def extract_features(name: str, out_name: str, *, backbone: str = "resnet50", pretrained: bool = True,
                     weights_path: str | None = None, split: str = "full", resize: int = 256, crop: int = 224,
                     batch_size: int = 64, device: str = "cpu", progress: bool = True) -> Path:
    """Extract features of every domain of image dataset ``name`` and register them as ``out_name``
    (kind "features"). The yaml is written last, so a crash never leaves a half-registered dataset.
    Returns the path of the dataset.yaml."""
    import torch
    import yaml
    from torch.utils.data import DataLoader
    from tqdm import tqdm

    from ..models.backbones import build_backbone
    from .inputs import ImageListDataset, image_transforms

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", out_name) or ".." in out_name:
        raise ValueError(f"--out-name {out_name!r}: a dataset name is letters, digits, '_', '-' and '.' (it names "
                         f"the folder datasets/<out-name>/ and the features' folder, datasets/<out-name>/data or "
                         f"$DMP_DATA_DIR/<out-name>)")
    spec = registry.get_dataset(name)
    if spec.kind != "images":
        raise ValueError(f"extract-features reads an image dataset; {name!r} is of kind {spec.kind!r}")
    if out_name in registry.dataset_names() and not (registry.dataset_dir(out_name) / "dataset.yaml").is_file():
        raise ValueError(f"{out_name!r} is a built-in dataset name; choose another --out-name")
    if (registry.dataset_dir(out_name) / "dataset.yaml").exists():  # nothing a user declared is replaced
        raise FileExistsError(f"--out-name {out_name!r}: {registry.dataset_dir(out_name) / 'dataset.yaml'} exists; "
                              f"extract-features never replaces a dataset: choose another --out-name, or delete "
                              f"that dataset first")
    env = os.environ.get("DMP_DATA_DIR")
    out_root = Path(env).expanduser().resolve() / out_name if env else registry.dataset_dir(out_name) / "data"
    model, dim = build_backbone(backbone, pretrained=pretrained, weights_path=weights_path)
    model = model.to(device).eval()
    transform = image_transforms(False, resize, crop)
    root = registry.require_dataset(name)
    domains = []
    for d in spec.domains:
        ds = ImageListDataset(root, registry.list_file(name, d.name, split), transform,
                              num_classes=len(spec.classes))
        feats = []
        with torch.no_grad():
            for x, _ in tqdm(DataLoader(ds, batch_size=batch_size), desc=f"features {d.name}", unit="batch",
                             disable=not progress):
                feats.append(model(x.to(device)).flatten(1).cpu().numpy().astype(np.float32))
        x = np.concatenate(feats)
        if not np.isfinite(x).all():
            raise ValueError(f"backbone {backbone} produced NaN/inf features on {name}/{d.name}")
        atomic_write(out_root / f"{d.name}.npz",
                     lambda fh, x=x, ds=ds: np.savez(fh, X=x, y=ds.labels.numpy(), paths=np.array(ds.paths)))
        domains.append({"name": d.name, "short": d.short, "file": f"{d.name}.npz", "count": len(ds),
                        "x_key": "X", "y_key": "y"})
    meta = {"source_dataset": name, "source_version": registry.dataset_version(name), "split": split,
            "backbone": backbone, "feature_dim": int(dim), "pretrained": bool(pretrained),
            "weights_path": weights_path, "weights_file": str(model.weights_file) if model.weights_file else None,
            "weights_sha256": sha256_file(model.weights_file) if model.weights_file else None,
            "transform": repr(transform), "torch": str(torch.__version__)}
    doc = {"kind": "features", "title": f"{backbone} features of {name} ({split})", "classes": list(spec.classes),
           "partial_classes": list(spec.partial_classes), "domains": domains,
           "root": os.path.relpath(out_root, registry.dataset_dir(out_name)), "meta": meta}
    yml = registry.dataset_dir(out_name) / "dataset.yaml"
    write_text(yml, yaml.safe_dump(doc, sort_keys=False))
    return yml
