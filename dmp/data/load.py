"""Reading a dataset's samples, validated before any work: images decoded to 8-bit RGB whatever their mode or
bit depth (:func:`open_rgb`), and the arrays of features/arrays datasets with their labels (:func:`read_arrays`).
Every error names the file (and the sample or array) at fault."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from . import registry
from .spec import DatasetSpec

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
"""The ImageNet statistics the paper's image transform normalises with (the pretrained backbones' own)."""


def sample_key(key):
    """``(index, augmentation seed or None)`` of a dataset key: ``dataset[(index, seed)]`` or ``dataset[index]``."""
    return key if isinstance(key, tuple) else (key, None)


def to_rgb(img):
    """A PIL image as 8-bit RGB. 16- and 32-bit integer images are scaled to 8 bits (PIL's own conversion clips
    them, which turns a 16-bit PNG white); float images are scaled from [0, 1] (or clipped to [0, 255]); palette,
    CMYK, grey, grey+alpha, YCbCr and RGBA go through PIL's conversion (alpha is dropped)."""
    from PIL import Image

    if img.mode.startswith("I;16") or img.mode in ("I", "F"):
        arr = np.asarray(img).astype(np.float64)
        if img.mode == "F":
            arr = arr * 255.0 if arr.size and np.nanmax(arr) <= 1.0 else arr
        elif img.mode.startswith("I;16") or (arr.size and arr.max() > 255):
            arr = arr / 257.0  # 0..65535 -> 0..255
        arr = np.clip(np.nan_to_num(np.rint(arr)), 0, 255).astype(np.uint8)
        return Image.fromarray(arr, "L").convert("RGB")
    if img.mode == "RGB":
        return img
    if img.mode in ("P", "PA") and "transparency" in img.info:
        img = img.convert("RGBA")
    return img.convert("RGB")


def open_rgb(path):
    """Decode the image file ``path`` fully into an 8-bit RGB PIL image (raises OSError/ValueError on a
    truncated or unreadable file)."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            img.load()
            if img.width < 1 or img.height < 1:
                raise ValueError(f"empty image ({img.width}x{img.height})")
            return to_rgb(img).copy()
    except Image.DecompressionBombError as exc:  # PIL's guard against huge images: a ValueError naming the size
        raise ValueError(f"too large to decode safely ({exc})") from None


def _read_matrix(path: Path, key: str) -> np.ndarray:
    suffix = path.suffix.lower()
    if suffix == ".npz":
        with np.load(path) as z:
            if key not in z:
                raise KeyError(f"{path}: no array {key!r}; arrays: {', '.join(z.files)}")
            return z[key]
    if suffix == ".npy":
        return np.load(path)
    if suffix == ".mat":
        import h5py

        if h5py.is_hdf5(path):  # MATLAB v7.3; h5py sees the transpose of the MATLAB array
            with h5py.File(path, "r") as f:
                if key not in f:
                    raise KeyError(f"{path}: no variable {key!r}; variables: {', '.join(f.keys())}")
                return np.asarray(f[key]).T
        from scipy.io import loadmat

        mat = loadmat(path)
        if key not in mat:
            raise KeyError(f"{path}: no variable {key!r}; variables: "
                           f"{', '.join(k for k in mat if not k.startswith('__'))}")
        return mat[key]
    raise ValueError(f"{path}: unsupported features file type {suffix!r} (use .npz, .npy or .mat)")


def _labels(raw, path: Path, key: str, offset: int, num_classes: int) -> np.ndarray:
    """Integral labels in ``0..num_classes-1`` after ``offset``; a float label is an error, never truncated."""
    y = np.asarray(raw).reshape(-1)
    if y.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(y) | (y != np.round(y)))
        if len(bad):
            raise ValueError(f"{path}: labels {key!r} must be integers; sample {bad[0]} has label {y[bad[0]].item()!r}")
    elif y.dtype.kind not in "iub":
        raise ValueError(f"{path}: labels {key!r} must be integers, got {y.dtype} values")
    y = y.astype(np.int64) + offset
    out = np.flatnonzero((y < 0) | (y >= num_classes))
    if len(out):
        hint = (f"; labels numbered from {y.min() - offset}? set label_offset: {offset - y.min()} in the dataset's "
                "dataset.yaml" if y.min() > 0 and y.max() - y.min() < num_classes else "")
        raise ValueError(f"{path}: labels (after offset {offset}) span {y.min()}..{y.max()}, expected "
                         f"0..{num_classes - 1} (first outside: sample {out[0]}, label {y[out[0]]}){hint}")
    return y


def read_arrays(spec: DatasetSpec, domain: str) -> tuple[np.ndarray, np.ndarray]:
    """All features (``[N, D]``) or small images (``[N, C, H, W]``) of one domain of a features/arrays dataset
    as float32, with int64 labels indexing ``spec.classes``; checked: one label per sample, integral labels in
    range, finite values, the declared sample shape and count."""
    if spec.kind == "images":
        raise ValueError(f"dataset {spec.name!r} holds images: read it through list_file")
    dom = spec.domain(domain)
    root = registry.require_dataset(spec)
    path = root / dom.folder
    x = np.asarray(_read_matrix(path, dom.x_key))
    y_path = root / dom.y_key if path.suffix.lower() == ".npy" else path
    y = _labels(_read_matrix(y_path, dom.y_key), y_path, dom.y_key, spec.label_offset, len(spec.classes))
    if x.shape[0] != y.shape[0] and x.ndim == 2 and x.shape[1] == y.shape[0]:
        x = x.T  # stored one sample per column
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{path}: {x.shape[0]} samples in {dom.x_key!r} but {y.shape[0]} labels")
    if x.shape[0] == 0:
        raise ValueError(f"{path}: {dom.x_key!r} holds no samples (domain {dom.name!r} is empty); store its features "
                         f"there, or leave the domain out of the dataset's dataset.yaml")
    if x.dtype.kind not in "iufb":
        raise ValueError(f"{path}: {dom.x_key!r} holds {x.dtype} values, not numbers")
    x = x.astype(np.float32)
    if spec.sample_shape:
        shape = spec.sample_shape
        if int(np.prod(x.shape[1:])) != int(np.prod(shape)):
            raise ValueError(f"{path}: {dom.x_key!r} has {int(np.prod(x.shape[1:]))} values per sample, the "
                             f"declared sample shape {list(shape)} needs {int(np.prod(shape))}")
        x = x.reshape(len(x), *shape[::-1]).transpose(0, *range(len(shape), 0, -1)) if spec.column_major \
            else x.reshape(len(x), *shape)
    elif x.ndim != 2:
        raise ValueError(f"{path}: {dom.x_key!r} has shape {list(x.shape)}; features must be [samples, dims]")
    bad = np.flatnonzero(~np.isfinite(x.reshape(len(x), -1)).all(axis=1))
    if len(bad):
        raise ValueError(f"{path}: {dom.x_key!r} contains NaN or infinite values (first in sample {bad[0]})")
    if dom.count is not None and len(x) != dom.count:
        raise ValueError(f"{path}: {len(x)} samples in {dom.x_key!r}, the registry declares {dom.count}")
    return np.ascontiguousarray(x), y


def read_views(spec: DatasetSpec, domain: str, x: np.ndarray) -> np.ndarray:
    """The augmented training views ``[N, V, D]`` (float32) of one domain whose declaration has a ``views_key``,
    checked against its samples ``x`` ``[N, D]`` (:func:`read_arrays`): same N and D, finite values."""
    dom = spec.domain(domain)
    path = registry.require_dataset(spec) / dom.folder
    v = np.asarray(_read_matrix(path, dom.views_key))
    if v.ndim != 3 or v.shape[0] != x.shape[0] or v.shape[2:] != x.shape[1:]:
        raise ValueError(f"{path}: {dom.views_key!r} has shape {list(v.shape)}; the views of {list(x.shape)} "
                         f"samples must be [{x.shape[0]}, V, {x.shape[1]}]")
    v = v.astype(np.float32)
    if not np.isfinite(v).all():
        raise ValueError(f"{path}: {dom.views_key!r} contains NaN or infinite values")
    return v
