"""Pack the Office-31 images small enough to travel to a lent GPU machine (workflow/gpu/gpu_office31.sh).

The real images (88 MB, 4,110 JPEGs) do not fit the 64 MiB that travels with the working tree
to a lent GPU machine. The suite's image pipeline resizes every image to ``resize x resize`` (256 x 256, the paper's)
before anything else (:func:`dmp.data.inputs.image_transforms`: torchvision ``Resize((256, 256))`` on the PIL image,
PIL's bilinear filter), so this script does that resize once, with the same filter, and re-encodes each image as a
JPEG (``--quality``, 4:2:0 chroma): a run's pipeline then resizes a 256 x 256 image to 256 x 256 (PIL returns it
unchanged), and the only difference from the original's pipeline is the JPEG rounding, measured here on every image
(mean absolute difference per pixel and channel, 0..255, against the original after the same resize).

The pack is a user image dataset of its own (docs/datasets.md, "Bring your own image dataset"), so a run on it
carries another dataset name and version than a run on the original images:

    scratch/office31_256/dataset.yaml       kind: images (class folders), Office-31's classes and partial classes
    scratch/office31_256/data/<domain>/<class>/frame_NNNN.jpg       (the same files and labels as office31's)
    scratch/office31_256/lists/, lock.json  written by `dmp data fetch office31_256` (run here unless --no-fetch)

The labels are Office-31's (the index in its sorted class list); the order of the lists is not: a user dataset's
lists are sorted by path, Office-31's follow the published lists' class order (dmp/data/catalog.py PUBLISHED_ORDER),
so a seed draws other batches on the pack than on office31.

    python scripts/pack_office31.py                              # from the registry's office31 data root
    python scripts/pack_office31.py --src /data/office31 --out scratch/office31_256 --quality 85
    DMP_DATASETS_DIR=scratch python -m dmp train dataset=office31_256 source=amazon target=webcam ...

The yaml cannot say ``variant_of: office31`` (user declarations have no such key), so Office-31's preset is not the
pack's own; the pack's config resolves to the same values anyway (the defaults are that preset), which
workflow/gpu/gpu_office31.sh checks before training (a key that differed would be passed explicitly).
"""
from __future__ import annotations

import argparse
import hashlib
import io
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dmp.data import registry  # noqa: E402
from dmp.data.load import open_rgb  # noqa: E402
from dmp.data.verify import scan_domain  # noqa: E402

MARK = "# packed by scripts/pack_office31.py"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", help="Office-31's data root (<domain>/<class>/*.jpg, or <domain>/images/<class>/*.jpg); "
                                 "default: the registry's (datasets/office31/data or $DMP_DATA_DIR/office31)")
    p.add_argument("--out", default=str(ROOT / "scratch" / "office31_256"),
                   help="the pack's folder; its name is the dataset's name (default scratch/office31_256)")
    p.add_argument("--size", type=int, default=256, help="side of the stored images (the pipeline's resize: 256)")
    p.add_argument("--quality", type=int, default=85, help="JPEG quality (default 85)")
    p.add_argument("--max-mib", type=float, default=45.0,
                   help="refuse a pack larger than this (MiB; the GPU machine takes 64 MiB with the repo)")
    p.add_argument("--splits", nargs="+", default=["full", "partial"],
                   help="the split lists to write (default: full partial; Office-31's first<N> sweep adds 2 MiB)")
    p.add_argument("--no-fetch", action="store_true", help="do not run `dmp data fetch` on the pack")
    return p.parse_args(argv)


def resized(path: Path, size: int):
    """The image as the pipeline sees it after its first step: 8-bit RGB (open_rgb), torchvision's
    ``Resize((size, size))`` on a PIL image = PIL's ``resize`` with the bilinear filter."""
    from PIL import Image

    return open_rgb(path).resize((size, size), Image.BILINEAR)


def encode(img, quality: int) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality, subsampling=2, optimize=True)  # 4:2:0
    return buf.getvalue()


def pixel_difference(img, data: bytes) -> float:
    """Mean absolute difference (0..255) between ``img`` and the JPEG ``data`` decoded as the pipeline does."""
    dec = np.asarray(open_rgb(io.BytesIO(data)), dtype=np.int16)
    return float(np.abs(dec - np.asarray(img, dtype=np.int16)).mean())


def _clear(out: Path) -> None:
    """Remove an earlier pack at ``out`` (only one this script wrote: its dataset.yaml starts with MARK)."""
    if not out.exists():
        return
    yml = out / "dataset.yaml"
    if not (yml.is_file() and yml.read_text().startswith(MARK)):
        if any(out.iterdir()):
            raise SystemExit(f"{out} exists and is not a pack of this script (no {yml} starting with {MARK!r}): "
                             f"choose another --out or remove it")
        return
    shutil.rmtree(out)


def declaration(name: str, spec, domains: dict, meta: dict, splits=("full", "partial")) -> str:
    import yaml

    body = {
        "kind": "images",
        "title": f"Office-31 resized to {meta['size']}x{meta['size']}, JPEG quality {meta['quality']} "
                 f"(scripts/pack_office31.py)",
        "homepage": spec.homepage,
        "classes": list(spec.classes),
        "partial_classes": [spec.classes[i] for i in spec.partial_classes],
        "splits": list(splits),
        "domains": [{"name": d.name, "short": d.short, "count": len(domains[d.name])} for d in spec.domains],
        "meta": meta,
    }
    return (f"{MARK}: Office-31 ({spec.title}) as the suite's pipeline sees it after its resize,\n"
            f"# re-encoded to travel to a lent GPU (workflow/gpu/gpu_office31.sh). Another dataset name and version than\n"
            f"# office31: runs on it say so. Its preset is not applied by itself (no variant_of for user datasets).\n"
            + yaml.safe_dump(body, sort_keys=False, width=120))


def pack(src: Path | None, out: Path, size: int = 256, quality: int = 85, splits=("full", "partial"),
         log=print) -> dict:
    """Write the pack into ``out`` (dataset ``out.name``); return its figures."""
    spec = registry.get_dataset("office31")
    from_registry = src is None
    src = registry.data_root(spec) if from_registry else Path(src).expanduser().resolve()
    out = Path(out).resolve()
    _clear(out)
    data = out / "data"
    data.mkdir(parents=True)
    t0 = time.time()
    domains, diffs, worst, total, src_bytes = {}, [], (0.0, ""), 0, 0
    digest = hashlib.sha256()
    for d in spec.domains:
        entries = scan_domain(spec, d, src)  # the published lists' order and labels; either layout (images/ or not)
        lines = []
        for rel, label in entries:
            parts = rel.split("/")
            if len(parts) >= 3 and parts[1] == "images":  # the declared layout: drop the images/ level
                parts = [parts[0], *parts[2:]]
            new = "/".join(parts[:-1] + [Path(parts[-1]).stem + ".jpg"])
            raw = (src / rel).read_bytes()
            src_bytes += len(raw)
            digest.update(f"{rel}\0{hashlib.sha256(raw).hexdigest()}\n".encode())
            img = resized(src / rel, size)
            blob = encode(img, quality)
            (data / new).parent.mkdir(parents=True, exist_ok=True)
            (data / new).write_bytes(blob)
            total += len(blob)
            diff = pixel_difference(img, blob)
            diffs.append(diff)
            worst = max(worst, (diff, new))
            lines.append(f"{new} {label}")
        domains[d.name] = lines
        log(f"{d.name}: {len(lines)} images")
    meta = {"packed_from": "office31", "source_folder": str(src),
            "source_version": registry.dataset_version(spec) if from_registry else None,
            "source_sha256": digest.hexdigest(), "source_bytes": src_bytes,
            "size": size, "resample": "PIL bilinear (torchvision Resize((size, size)) on a PIL image)",
            "codec": "JPEG", "quality": quality, "chroma_subsampling": "4:2:0",
            "pixel_mad": round(float(np.mean(diffs)), 4), "pixel_mad_max": round(worst[0], 4),
            "packer": "scripts/pack_office31.py"}
    (out / "dataset.yaml").write_text(declaration(out.name, spec, domains, meta, splits))
    images_bytes = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
    return {"name": out.name, "images": len(diffs), "image_bytes": total, "data_bytes": images_bytes,
            "source_bytes": src_bytes, "pixel_mad": float(np.mean(diffs)), "pixel_mad_max": worst[0],
            "pixel_mad_worst": worst[1], "seconds": time.time() - t0}


def fetch_pack(out: Path) -> None:
    """`dmp data fetch <name>` on the pack (its first fetch: lock.json, then the split lists), with its declaration
    folder first in DMP_DATASETS_DIR and its data under its own root (DMP_DATA_DIR unset for the call), so the lock
    and the lists are written beside the yaml."""
    from dmp.data import fetch, splits

    out = Path(out).resolve()
    saved = {k: os.environ.get(k) for k in ("DMP_DATASETS_DIR", "DMP_DATA_DIR")}
    os.environ["DMP_DATASETS_DIR"] = os.pathsep.join(p for p in (str(out.parent), saved["DMP_DATASETS_DIR"]) if p)
    os.environ.pop("DMP_DATA_DIR", None)
    try:  # as `python -m dmp data fetch <name>` does (dmp/data/cli.py): verify in place, lock, then the lists
        fetch.fetch(out.name, progress=False)
        splits.prepare(out.name)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    fig = pack(Path(args.src) if args.src else None, out, args.size, args.quality, args.splits)
    if not args.no_fetch:
        fetch_pack(out)
    whole = folder_bytes(out)
    mib = 2 ** 20
    print(f"{fig['name']}: {fig['images']} images at {args.size}x{args.size}, JPEG q{args.quality}, "
          f"{fig['seconds']:.0f} s")
    print(f"size: images {fig['image_bytes'] / mib:.1f} MiB, whole pack {whole / mib:.1f} MiB ({whole:,} bytes); "
          f"originals {fig['source_bytes'] / mib:.1f} MiB")
    print(f"pixel difference to the original after the same {args.size}x{args.size} resize (0..255, mean |a-b| per "
          f"pixel and channel): mean {fig['pixel_mad']:.3f} over all images, worst {fig['pixel_mad_max']:.3f} "
          f"({fig['pixel_mad_worst']})")
    if whole > args.max_mib * mib:
        print(f"the pack is larger than --max-mib {args.max_mib}: lower --quality", file=sys.stderr)
        return 1
    print(f"use: DMP_DATASETS_DIR={out.resolve().parent} python -m dmp train dataset={fig['name']} ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
