"""``dmp data extract-features``: run a backbone once over every domain of an image dataset and store the features as
a new "features" dataset (``datasets/<out>/dataset.yaml`` + one ``<domain>.npz`` per domain with ``X``,
``y`` and ``paths``), recording the backbone, its weights and the transform in the yaml's ``meta``.

``trunk=True`` stores the activations of the backbone's trunk (everything before its head; backbones whose trunk a
registered head reads, :func:`dmp.models.backbones.trunk_reader`) instead of its pooled output, so that runs with
``backbone=<name>_top`` fine-tune the head on them; ``views=V`` also stores ``X_views`` ``[N, V, D]``: the trunk's
activations of V training views of each image (the training transform, random crop and flip, drawn from
``(image index, view)``), of which each training draw takes one; ``trunk_stage=k`` stores the activations before
stage ``k`` instead, for ``backbone=<name>_from<k>`` runs, which fine-tune the stages from ``k`` on and the head.
"""
from __future__ import annotations

import argparse
import os
import sys
import re
from pathlib import Path

import numpy as np

from ..data import registry
from ..io import atomic_write, sha256_file, write_text


def add_parser(sub) -> None:
    """Add ``extract-features`` to the ``data`` command's sub-commands (``dmp/cli.py`` does: it sits above the data
    layer, which this command's backbones are not part of)."""
    p = sub.add_parser("extract-features", help="run a backbone over an image dataset once and store the "
                                                "features as a new features dataset")
    p.add_argument("name", help="image dataset to read")
    p.add_argument("--out-name", required=True, help="name of the new features dataset: its declaration goes to "
                   "datasets/<out-name>/, its features to datasets/<out-name>/data (or $DMP_DATA_DIR/<out-name>)")
    p.add_argument("--backbone", default="resnet50", help="backbone (dmp/models/backbones.py: resnet50, resnet101, "
                   "efficientnet_lite0/1/2, ...)")
    p.add_argument("--weights-path", default=None, help="state dict file of the backbone")
    p.add_argument("--no-pretrained", action="store_true", help="random initialisation (for tests only)")
    p.add_argument("--split", default="full", help="split list of every domain to extract (default: full)")
    p.add_argument("--resize", type=int, default=256,
                   help="images resized to RESIZE x RESIZE before the centre crop (default: 256)")
    p.add_argument("--crop", type=int, default=224, help="centre crop size (default: 224)")
    p.add_argument("--batch-size", type=int, default=64, help="images per forward pass (default: 64)")
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda (default: cpu)")
    p.add_argument("--trunk", action="store_true", help="store the trunk's activations (before the head) for "
                   "backbone=<backbone>_top runs, which fine-tune the head (efficientnet_lite*)")
    p.add_argument("--views", type=int, default=0, help="also store the trunk's activations of V random training "
                   "crops and flips of each image (X_views; implies --trunk; default: 0; refused, saying what they "
                   "would take, where the largest domain's would not fit in this machine's memory)")
    p.add_argument("--trunk-stage", type=int, default=None, metavar="K",
                   help="store the activations before stage K of the blocks instead of before the head, for "
                   "backbone=<backbone>_from<K> runs, which fine-tune stages K.. and the head (implies --trunk)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run a parsed ``data extract-features``; a bad argument or missing data: one line on stderr, exit 2 (with
    ``--debug``: the traceback)."""
    try:
        out = extract_features(args.name, args.out_name, backbone=args.backbone, pretrained=not args.no_pretrained,
                               weights_path=args.weights_path, split=args.split, resize=args.resize,
                               crop=args.crop, batch_size=args.batch_size, device=args.device, trunk=args.trunk,
                               views=args.views, trunk_stage=args.trunk_stage)
    except (registry.DatasetMissingError, KeyError, ValueError, FileExistsError) as exc:
        if getattr(args, "debug", False):
            raise
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) and exc.args else exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(f"{args.out_name}: features written, spec {out}")
    return 0


def extract_features(name: str, out_name: str, *, backbone: str = "resnet50", pretrained: bool = True,
                     weights_path: str | None = None, split: str = "full", resize: int = 256, crop: int = 224,
                     batch_size: int = 64, device: str = "cpu", progress: bool = True, trunk: bool = False,
                     views: int = 0, trunk_stage: int | None = None) -> Path:
    """Extract features of every domain of image dataset ``name`` and register them as ``out_name``
    (kind "features"). The yaml is written last, so a crash never leaves a half-registered dataset.
    Returns the path of the dataset.yaml."""
    import torch
    import yaml
    from torch.utils.data import DataLoader
    from tqdm import tqdm

    from ..data.inputs import ImageListDataset, image_transforms
    from . import backbones, efficientnet

    check_options(resize=resize, crop=crop, views=views, batch_size=batch_size)
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
    taken = [out_root / f"{d.name}.npz" for d in spec.domains if (out_root / f"{d.name}.npz").exists()]
    if taken:  # someone else's features (or those of an interrupted extraction): never replaced
        raise FileExistsError(f"--out-name {out_name!r}: {taken[0]} exists; extract-features never replaces a file: "
                              f"choose another --out-name, or delete {out_root} first")
    trunk = bool(trunk or views or trunk_stage is not None)
    head = backbones.trunk_reader(backbone, trunk_stage)
    if trunk and head is None:  # before the backbone's weights are read
        readers = [backbones.BACKBONES[r].trunk for r in backbones.readers("trunk")]
        raise ValueError(f"--trunk / --views / --trunk-stage: backbone {backbone} has no part that reads its trunk"
                         f"{'' if trunk_stage is None else f' from stage {trunk_stage}'} (those that do: "
                         f"{', '.join(sorted({b for b, _ in readers}))}; stages "
                         f"{', '.join(map(str, sorted({s for _, s in readers if s is not None})))})")
    if views:  # what the stored views would take, before any weights are read or image decoded
        check_views_memory(spec, split, backbone, trunk_stage, crop, views, batch_size)
    model, _ = backbones.build_backbone(backbone, pretrained=pretrained, weights_path=weights_path)
    weights_file = model.weights_file
    if trunk:
        model = efficientnet.trunk(model, trunk_stage)
    # NHWC: the depthwise convolutions of the EfficientNets run about 1.8x faster on a CPU (the same activations to
    # float rounding, about 3e-5 on the trunk's outputs)
    model = model.to(device).eval().to(memory_format=torch.channels_last)
    transform = image_transforms(False, resize, crop)
    train_tf = image_transforms(True, resize, crop)
    root = registry.require_dataset(spec)
    domains = []
    for d in spec.domains:
        ds = ImageListDataset(root, registry.list_file(spec, d.name, split), transform,
                              num_classes=len(spec.classes))
        feats, extra = [], []
        with torch.no_grad():
            for x, _ in tqdm(DataLoader(_Views(ds, transform, train_tf, views), batch_size=batch_size), unit="batch",
                             desc=f"features {d.name}" + (f" (+{views} views)" if views else ""),
                             disable=not progress):
                x_in = x.flatten(0, 1).to(device).contiguous(memory_format=torch.channels_last)
                out = model(x_in).contiguous().flatten(1).cpu().numpy().astype(np.float32)
                out = out.reshape(len(x), 1 + views, -1)
                feats.append(out[:, 0])
                extra.append(out[:, 1:])
        x, xv = np.concatenate(feats), np.concatenate(extra)
        if not (np.isfinite(x).all() and np.isfinite(xv).all()):
            raise ValueError(f"backbone {backbone} produced NaN/inf features on {name}/{d.name}")
        arrays = dict(X=x, y=ds.labels.numpy(), paths=np.array(ds.paths), **({"X_views": xv} if views else {}))
        atomic_write(out_root / f"{d.name}.npz", lambda fh, arrays=arrays: np.savez(fh, **arrays))
        domains.append({"name": d.name, "short": d.short, "file": f"{d.name}.npz", "count": len(ds),
                        "x_key": "X", "y_key": "y", **({"views_key": "X_views"} if views else {})})
    meta = {"source_dataset": name, "source_version": registry.dataset_version(spec), "split": split,
            "backbone": backbone, "feature_dim": int(x.shape[1]), "pretrained": bool(pretrained),
            "weights_path": weights_path, "weights_file": str(weights_file) if weights_file else None,
            "weights_sha256": sha256_file(weights_file) if weights_file else None,
            "transform": repr(transform), "torch": str(torch.__version__), "memory_format": "channels_last",
            "resize": int(resize), "crop": int(crop), "trunk": trunk,
            **({"reads_it": head} if trunk else {}), **({"trunk_stage": int(trunk_stage)} if trunk_stage else {}),
            **({"views": int(views), "views_transform": repr(train_tf)} if views else {})}
    doc = {"kind": "features", "title": f"{backbone} features of {name} ({split})", "classes": list(spec.classes),
           "partial_classes": list(spec.partial_classes), "domains": domains,
           "root": os.path.relpath(out_root, registry.dataset_dir(out_name)), "meta": meta}
    yml = registry.dataset_dir(out_name) / "dataset.yaml"
    write_text(yml, yaml.safe_dump(doc, sort_keys=False))
    return yml


def check_options(*, resize: int, crop: int, views: int, batch_size: int) -> None:
    """The sizes ``extract-features`` is given, checked before anything is read: ``--resize`` and ``--crop`` positive
    and at most :data:`dmp.params.MAX_IMAGE_SIDE` (as a run's config keys), the crop no larger than the resized image
    (``dmp train`` refuses the same: a larger centre crop would pad the image with zeros), ``--views`` 0 or more,
    ``--batch-size`` 1 or more. A bad one raises ValueError naming the option."""
    from ..params import MAX_IMAGE_SIDE

    for option, value in (("--resize", resize), ("--crop", crop)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_IMAGE_SIDE:
            raise ValueError(f"{option} {value!r}: an image side is a whole number of pixels from 1 to "
                             f"{MAX_IMAGE_SIDE}")
    if crop > resize:
        raise ValueError(f"--crop {crop} is larger than --resize {resize} (the crop is cut from the resized image; "
                         f"a larger one would pad it with zeros): set --crop <= --resize")
    if isinstance(views, bool) or not isinstance(views, int) or views < 0:
        raise ValueError(f"--views {views!r}: the number of stored training views of each image is 0 (none) or more")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"--batch-size {batch_size!r}: the images per forward pass are 1 or more")


def machine_memory() -> int | None:
    """This machine's physical memory in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def view_floats(backbone: str, trunk_stage: int | None, crop: int) -> int:
    """The values stored per image and view: the trunk's activations (before ``trunk_stage``, or before the head) of
    a ``crop`` x ``crop`` image, their shape found on PyTorch's meta device (no weights, no computation)."""
    import torch
    from torch import nn

    from . import efficientnet

    variant = int(re.fullmatch(r"efficientnet_lite(\d+)", backbone).group(1))
    with torch.device("meta"):
        net = nn.Sequential(nn.Identity(), efficientnet.lite_network(variant, pretrained=False)).eval()
        return int(efficientnet.trunk(net, trunk_stage)(torch.empty(1, 3, crop, crop)).numel())


def _images(spec, domain, split: str) -> int | None:
    """The images of ``domain`` in ``split``: its committed list's lines, else its declared count."""
    try:
        with open(registry.list_file(spec, domain.name, split)) as fh:
            return sum(1 for line in fh if line.strip())
    except (OSError, ValueError):
        return domain.count


def _gib(n: float) -> str:
    return f"{n / 2 ** 30:,.1f} GiB"


def check_views_memory(spec, split: str, backbone: str, trunk_stage: int | None, crop: int, views: int,
                       batch_size: int) -> None:
    """Refuse ``--views`` whose largest domain would not fit in this machine's memory: a domain's ``N x (1 + V) x D``
    float32 activations are held twice while it is assembled (the batches, then the array written), beside one
    batch of ``batch_size x (1 + V)`` input images of ``3 x crop x crop`` floats (D: :func:`view_floats`). The
    bound is the machine's physical memory (:func:`machine_memory`); ValueError says what it would take."""
    memory = machine_memory()
    sizes = {d.name: _images(spec, d, split) for d in spec.domains}
    sizes = {k: v for k, v in sizes.items() if v}
    if memory is None or not sizes:
        return
    domain, n = max(sizes.items(), key=lambda kv: kv[1])
    floats = view_floats(backbone, trunk_stage, crop)
    need = 2 * n * (1 + views) * floats * 4 + batch_size * (1 + views) * 3 * crop * crop * 4
    if need > memory:
        where = "" if trunk_stage is None else f" before stage {trunk_stage}"
        raise ValueError(f"--views {views}: domain {domain} ({n} images) would hold {n} x {1 + views} views x "
                         f"{floats} floats ({backbone} trunk{where} at {crop} px), twice while assembled, plus a batch "
                         f"of {batch_size} x {1 + views} images: {_gib(need)}, more than this machine's memory "
                         f"({_gib(memory)}); store fewer views or a smaller --crop")


class _Views:
    """Image ``i`` of ``images`` (an ImageListDataset), decoded once, as ``[1 + V, C, H, W]``: ``test_tf`` of it,
    then V draws of ``train_tf`` seeded by ``(i, view)`` (the same views on every machine and rerun)."""

    def __init__(self, images, test_tf, train_tf, views: int):
        self.images, self.test_tf, self.train_tf, self.views = images, test_tf, train_tf, int(views)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        import torch

        img, y = self.images._load(i), self.images.labels[i]   # decoded once (unreadable: the file in one line)
        x = self.test_tf(img)
        if not self.views:
            return x[None], y
        state = torch.get_rng_state()
        try:
            drawn = []
            for v in range(self.views):
                torch.manual_seed(1_000_003 * i + v)
                drawn.append(self.train_tf(img))
        finally:
            torch.set_rng_state(state)
        return torch.stack([x, *drawn]), y
