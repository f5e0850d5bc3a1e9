"""The input cache (config ``input_cache: on``): every image of a domain decoded and resized once, stored as uint8.

For each domain of an image dataset and each ``resize`` size, ``<cache root>/<size>/<domain>.npy`` holds the images
of the domain's full list, in list order, as one ``uint8`` array ``[N, 3, size, size]`` (read as a memory map), and
``<domain>.json`` beside it is its index: dataset, domain, size, the dataset version and content version of the
list, its sha256, the paths and labels. The cache root is ``.<data folder>.cache`` beside the dataset's data folder
(``datasets/<name>/.data.cache``, or ``$DMP_DATA_DIR/.<name>.cache``): never inside the DVC-tracked data folder,
never in the tracked tree. 196,608 bytes per image at 256 px (3 x 256 x 256).

The pixels are those of the uncached pipeline after its resize (:func:`dmp.data.inputs.image_transforms`: the
decoded 8-bit RGB image resized by torchvision's ``Resize((size, size))``), so crops, flips and the normalisation
applied to them (:class:`dmp.data.cached_images.CachedImages`) give the same batches. A split list (partial, first<N>,
n<K>) reads the rows of its images in the domain's cache. Both files are written atomically (temporary file, then
rename; the index last, recording the pixels file's size, times and inode), and a cache whose list or image bytes
changed since it was built, whose index no longer matches its list, or whose pixels file was written since, is
refused (and rebuilt by :func:`build`).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from ..io import atomic_write, write_json
from . import registry
from .spec import DatasetSpec


MAX_SIZE = 4096  # px: 48 MiB per cached image; the paper resizes to 256


def cache_root(spec: DatasetSpec, data_dir: str | None = None) -> Path:
    """``.<data folder name>.cache`` beside the dataset's data folder (:func:`registry.data_root`; ``data_dir``:
    that of a process whose DMP_DATA_DIR is ``data_dir``, e.g. a Snakemake job's)."""
    root = Path(data_dir).expanduser().resolve() / spec.name if data_dir else registry.data_root(spec)
    return root.parent / f".{root.name}.cache"


def cache_paths(spec: DatasetSpec, domain: str, size: int) -> tuple[Path, Path]:
    """``(pixels .npy, index .json)`` of one domain (its name or paper letter) at ``size`` px."""
    npy, index = cache_files(spec, spec.domain(domain).name, int(size))
    return npy, index


def cache_files(spec: DatasetSpec, domain: str, size, data_dir: str | None = None) -> list[Path]:
    """``[pixels .npy, index .json]`` of domain ``domain`` (its registry name, or a Snakemake wildcard) at ``size``
    px, as a process with DMP_DATA_DIR = ``data_dir`` sees them (workflow/rules/data.smk)."""
    folder = cache_root(spec, data_dir) / str(size)
    return [folder / f"{domain}.npy", folder / f"{domain}.json"]


def run_inputs(cfg: dict, data_dir: str | None = None) -> list[Path]:
    """The cache indexes a run of resolved config ``cfg`` reads: its source and target domains at its resize when
    ``input_cache`` is on, else none (the train rule's inputs)."""
    if not cfg["input_cache"]:
        return []
    spec = registry.get_dataset(cfg["dataset"])
    return [cache_files(spec, d, cfg["resize"], data_dir)[1] for d in (cfg["source"], cfg["target"])]


def image_datasets() -> list[DatasetSpec]:
    """The registered image datasets (a broken user declaration left out: its runs stop with the registry's
    error)."""
    specs = []
    for name in registry.dataset_names():
        try:
            spec = registry.get_dataset(name)
        except ValueError:
            continue
        specs += [spec] if spec.kind == "images" else []
    return specs


def _versions(spec: DatasetSpec, domain: str) -> dict:
    lst = registry.list_file(spec, domain, "full")
    return {"version": registry.dataset_version(spec, [(domain, "full")]),
            "content_version": registry.dataset_version(spec, [(domain, "full")], True),
            "list_sha256": hashlib.sha256(lst.read_bytes()).hexdigest()}


def _command(name, domain, size):
    return f"python -m dmp data cache {name} --resize {size} --domains {domain}"


class _Resized:
    """Decoded, resized uint8 ``[3, size, size]`` images of a list (the deterministic head of the uncached
    pipeline), for a DataLoader."""

    def __init__(self, root, paths, size):
        from torchvision import transforms as T
        self.root, self.paths, self.resize = Path(root), paths, T.Resize((size, size))

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        from .load import open_rgb
        try:
            img = open_rgb(self.root / self.paths[i])
        except (OSError, ValueError) as exc:
            raise ValueError(f"unreadable image {self.root / self.paths[i]}: {exc}") from None
        return np.ascontiguousarray(np.asarray(self.resize(img), dtype=np.uint8).transpose(2, 0, 1))


def write_pixels(path, root, paths, size: int, workers: int = 0, progress: bool = True, desc: str = "cache"):
    """Decode the images ``root/paths[i]``, resize them to ``size x size`` and write them in order to the ``.npy``
    file ``path`` as uint8 ``[N, 3, size, size]``, atomically (decoded by ``workers`` DataLoader processes)."""
    from torch.utils.data import DataLoader
    from tqdm import tqdm

    loader = DataLoader(_Resized(root, paths, size), batch_size=16, num_workers=workers, collate_fn=np.stack)
    shape = (len(paths), 3, size, size)

    def write(fh):
        np.lib.format.write_array_header_1_0(fh, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.uint8)),
                                                  "fortran_order": False, "shape": shape})
        with tqdm(total=len(paths), desc=desc, unit="img", disable=not progress) as bar:
            for batch in loader:
                fh.write(batch.tobytes())
                bar.update(len(batch))

    atomic_write(path, write)


def _stamp(path: Path) -> list[int]:
    """What changes whenever a file is written, truncated or replaced: size, mtime, ctime (which no user can set
    back) and inode."""
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _problem(spec: DatasetSpec, domain: str, size: int, meta: dict, pixels: Path,
             versions: dict | None = None) -> str | None:
    """Why the cache ``pixels`` with index ``meta`` is not the one of the data in place (None if it is): built from
    another list or other image bytes or at another size (stale), its index's paths or labels not the list's, or its
    pixels file written, truncated or replaced since the index recorded it."""
    now = versions or _versions(spec, domain)
    stale = [k for k, v in now.items() if meta.get(k) != v] + (["size"] if meta.get("size") != size else [])
    if stale:
        return (f"stale input cache (its {', '.join(stale)} differ from the data in place: the list or the images "
                f"changed since it was built)")
    entries = registry.read_list(registry.list_file(spec, domain, "full"))
    if meta.get("paths") != [p for p, _ in entries] or meta.get("labels") != [lab for _, lab in entries]:
        return "its index's paths or labels are not those of the list it was built from (edited)"
    if not pixels.is_file() or meta.get("pixels_stamp") != _stamp(pixels):
        return f"{pixels} was written, truncated or replaced after its index (or by an older version)"
    return None


def build(name: str, domain: str, size: int = 256, workers: int = 0, progress: bool = True) -> Path:
    """Decode and resize every image of ``domain``'s full list into its cache; returns the index path. Skipped
    (returns at once) when an up-to-date cache is in place."""
    spec = registry.get_dataset(name)
    if spec.kind != "images":
        raise ValueError(f"dataset {name!r} is of kind {spec.kind!r}: its samples are held in memory already; the "
                         f"input cache is for image datasets")
    size = int(size)
    if not 1 <= size <= MAX_SIZE:  # bounded before any image is decoded or any file is sized
        raise ValueError(f"--resize {size}: a size is a number of pixels in 1..{MAX_SIZE}")
    pixels, index = cache_paths(spec, domain, size)
    root = registry.require_dataset(spec)
    lst = registry.list_file(spec, domain, "full")
    entries = registry.read_list(lst, len(spec.classes) or None)
    versions = _versions(spec, domain)
    from ..run_lock import RunFolderBusy, run_lock
    try:
        with run_lock(pixels.parent.parent / ".locks" / f"{size}_{pixels.stem}"):  # one build of a domain at a time
            if index.is_file() and pixels.is_file():
                try:
                    old = json.loads(index.read_text())
                except ValueError:
                    old = {}
                if isinstance(old, dict) and _problem(spec, domain, size, old, pixels, versions) is None:
                    return index
            for left in pixels.parent.glob(f".{pixels.name}.*.tmp{pixels.suffix}"):  # of a killed build
                left.unlink(missing_ok=True)
            index.unlink(missing_ok=True)  # no index over half-written pixels, whatever happens next
            paths = [p for p, _ in entries]
            write_pixels(pixels, root, paths, size, workers, progress, desc=f"cache {name} {domain} {size}px")
            write_json(index, {"dataset": name, "domain": spec.domain(domain).name, "size": size, **versions,
                               "list": str(lst.name), "shape": [len(paths), 3, size, size], "dtype": "uint8",
                               "paths": paths, "labels": [lab for _, lab in entries], "pixels_stamp": _stamp(pixels)})
    except RunFolderBusy:
        raise ValueError(f"{pixels}: another process is building this input cache; wait until it ends") from None
    return index


def load(spec: DatasetSpec, domain: str, split: str, size: int, part: str = ""):
    """``(pixels [N_domain, 3, size, size] uint8 memory map, rows of the split's images in it, labels)`` for the
    ``(domain, split, part)`` list of a run (``part``: a domain with ``eval_lists`` is cached whole, its training
    and evaluation parts read their rows from it). Refused with a one-line error: no cache (the command that builds it), a cache
    built from another list or other image bytes (stale), or a split image the cache lacks."""
    name = spec.name
    pixels, index = cache_paths(spec, domain, size)
    if not index.is_file() or not pixels.is_file():
        raise registry.DatasetMissingError(
            f"config key 'input_cache' = on: no input cache of {name} domain {domain} at {size} px ({index}); "
            f"build it with `{_command(name, domain, size)}` (or set input_cache=off)")
    try:
        meta = json.loads(index.read_text())
    except ValueError as exc:
        raise ValueError(f"{index}: unreadable input cache index ({exc}); rebuild it with "
                         f"`{_command(name, domain, size)}`") from None
    problem = _problem(spec, domain, size, meta, pixels) if isinstance(meta, dict) else "not a JSON object"
    if problem:
        raise ValueError(f"{index}: {problem}; rebuild it with `{_command(name, domain, size)}`")
    arr = np.load(pixels, mmap_mode="r")
    if arr.dtype != np.uint8 or list(arr.shape) != [len(meta["paths"]), 3, size, size]:
        raise ValueError(f"{pixels}: holds {arr.dtype} {list(arr.shape)}, its index says uint8 "
                         f"{[len(meta['paths']), 3, size, size]}; rebuild it with `{_command(name, domain, size)}`")
    lst = registry.list_file(spec, domain, split, part)
    entries = registry.read_list(lst, len(spec.classes) or None)
    row = {}
    for i, p in enumerate(meta["paths"]):
        row.setdefault(p, i)
    missing = [p for p, _ in entries if p not in row]
    if missing:
        raise ValueError(f"{lst}: {missing[0]!r} is not in the input cache {index} ({len(missing)} image(s) of the "
                         f"list are not); rebuild it with `{_command(name, domain, size)}`")
    rows = np.array([row[p] for p, _ in entries], dtype=np.int64)
    return arr, rows, np.array([lab for _, lab in entries], dtype=np.int64)
