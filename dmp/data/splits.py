"""Image lists and the protocol splits derived from them.

The full list of a domain is built once from an extracted copy (sorted, deterministic) and committed; every
other split is a pure function of the full list, defined here:

- ``partial``: the dataset's partial-target classes (Office-31: PADA's 10 Caltech-shared classes;
  Office-Home: first 25; ImageCLEF-DA and VisDA-2017: first 6);
- ``first<N>``: the first N classes alphabetically (Office-31 shared-class sweep, N = 10..31);
- ``n<K>``: K images per class drawn with a fixed seed; nested (n10 is a subset of n30).

Labels always index the full class list.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import numpy as np

from ..io import write_text
from . import registry

SEED = 0  # the seed of the n<K> subsets; part of the protocol, never changed


def read_list(path: Path) -> list[tuple[str, int]]:
    """``[(relative path, label)]`` from a list file (``path label`` per line; paths may contain spaces)."""
    entries = []
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rel, label = line.rstrip("\n").rsplit(" ", 1)
                    entries.append((rel, int(label)))
                except ValueError:
                    raise ValueError(f"{path}:{n}: expected 'relative/path label', got {line!r}") from None
    return entries


def write_list(path: Path, entries) -> None:
    """Write a list atomically."""
    write_text(path, "".join(f"{rel} {label}\n" for rel, label in entries))


def select(labels, split: str, spec: registry.DatasetSpec) -> np.ndarray:
    """Indices (sorted) of the samples of ``split`` given the full list's ``labels``."""
    labels = np.asarray(labels, dtype=np.int64)
    num_classes = len(spec.classes)
    if split == "full":
        return np.arange(len(labels))
    if split == "partial":
        if not spec.partial_classes:
            raise ValueError(f"dataset {spec.name!r} defines no partial-target classes")
        return np.flatnonzero(np.isin(labels, spec.partial_classes))
    m = re.fullmatch(r"first(\d+)", split)
    if m:
        n = int(m.group(1))
        if not 1 <= n <= num_classes:
            raise ValueError(f"split {split!r}: N must be in 1..{num_classes} for dataset {spec.name!r}")
        return np.flatnonzero(labels < n)
    m = re.fullmatch(r"n(\d+)", split)
    if m:
        k = int(m.group(1))
        keep = []
        for c in range(num_classes):
            idx = np.flatnonzero(labels == c)
            if len(idx) == 0:
                continue
            if len(idx) < k:
                raise ValueError(f"split {split!r}: class {spec.classes[c]!r} of dataset {spec.name!r} has only "
                                 f"{len(idx)} images, fewer than {k}")
            order = np.random.default_rng([SEED, c]).permutation(len(idx))
            keep.append(idx[order[:k]])
        return np.sort(np.concatenate(keep)) if keep else np.arange(0)
    raise ValueError(f"unknown split {split!r}; splits are full, partial, first<N> or n<K>")


def derive(entries, split: str, spec: registry.DatasetSpec) -> list[tuple[str, int]]:
    """The entries of ``split`` from a domain's full list."""
    return [entries[i] for i in select([lab for _, lab in entries], split, spec)]


def _is_image(name: str) -> bool:
    return name.lower().endswith(registry.IMAGE_EXTENSIONS)


def scan_domain(spec: registry.DatasetSpec, domain: registry.Domain, root: Path) -> list[tuple[str, int]]:
    """The full list of one domain from an extracted copy under ``root`` (sorted by path).

    class_folders: every image under ``<folder>/<class>/``; a missing or unknown class folder is an error.
    list_files: the dataset's label list, each entry resolved to ``<folder>/<file name>``."""
    base = root / domain.folder
    if not base.is_dir():
        raise registry.DatasetMissingError(f"domain folder {base} (domain {domain.name!r}) does not exist")
    entries = []
    if spec.layout == "class_folders":
        present = sorted(p.name for p in base.iterdir() if p.is_dir())
        missing = [c for c in spec.classes if c not in present]
        unknown = [c for c in present if c not in spec.classes]
        if missing or unknown:
            raise ValueError(f"{base}: " + "; ".join(
                s for s in (f"missing class folder(s) {', '.join(missing)}" if missing else "",
                            f"unknown class folder(s) {', '.join(unknown)}" if unknown else "") if s))
        for label, cls in enumerate(spec.classes):
            for dirpath, dirnames, files in os.walk(base / cls):
                dirnames.sort()
                rel_dir = Path(dirpath).relative_to(root).as_posix()
                entries += [(f"{rel_dir}/{f}", label) for f in sorted(files) if _is_image(f)]
    elif spec.layout == "list_files":
        lists = dict(spec.label_lists)
        lst = root / lists[domain.name]
        if not lst.is_file():
            raise registry.DatasetMissingError(f"label list {lst} (domain {domain.name!r}) does not exist")
        for rel, label in read_list(lst):
            if not 0 <= label < len(spec.classes):
                raise ValueError(f"{lst}: label {label} of {rel!r} outside 0..{len(spec.classes) - 1}")
            path = f"{domain.folder}/{Path(rel).name}"
            if not (root / path).is_file():
                raise registry.DatasetMissingError(f"{root / path} (listed in {lst} as {rel!r}) does not exist")
            entries.append((path, label))
    else:
        raise ValueError(f"dataset {spec.name!r}: unknown layout {spec.layout!r}")
    entries.sort()
    if not entries:
        raise ValueError(f"{base}: no images found for domain {domain.name!r}")
    return entries


def check_counts(spec: registry.DatasetSpec, domain: registry.Domain, entries, where: str,
                 locked: dict | None = None) -> dict[str, int]:
    """Check a domain's image counts against the registry (total, images per class, every class present)
    and against the counts locked at the first fetch; return the per-class counts."""
    counts = Counter(label for _, label in entries)
    per_class = {c: counts.get(i, 0) for i, c in enumerate(spec.classes)}
    problems = []
    empty = [c for c, n in per_class.items() if n == 0]
    if empty:
        problems.append(f"no images for class(es) {', '.join(empty)}")
    if domain.count is not None and len(entries) != domain.count:
        problems.append(f"{len(entries)} images, expected {domain.count}")
    if spec.images_per_class is not None:
        bad = {c: n for c, n in per_class.items() if n != spec.images_per_class}
        if bad:
            problems.append(f"expected {spec.images_per_class} images per class, got "
                            + ", ".join(f"{c}: {n}" for c, n in bad.items()))
    if locked:
        diff = {c: (locked.get(c), n) for c, n in per_class.items() if locked.get(c) != n}
        if diff:
            problems.append("per-class counts differ from the lock file: "
                            + ", ".join(f"{c}: locked {a}, found {b}" for c, (a, b) in diff.items()))
    if problems:
        raise ValueError(f"{where} (dataset {spec.name!r}, domain {domain.name!r}): " + "; ".join(problems))
    return per_class


def prepare(name: str, splits=None, root: Path | None = None) -> list[Path]:
    """Write the split lists of every domain of ``name`` into ``datasets/<name>/lists``.

    The full lists are (re)built from the extracted data when it is in place (``root``, default
    :func:`registry.data_root`); otherwise the committed full lists are used. ``splits``: the derived splits
    to write (default: the dataset's declared ``splits``). Returns the paths written."""
    spec = registry.get_dataset(name)
    if spec.kind != "images":
        raise ValueError(f"dataset {name!r} is of kind {spec.kind!r}: its splits are derived on load")
    root = Path(root) if root else registry.data_root(name)
    splits = list(dict.fromkeys(splits or spec.splits))
    for s in splits:
        select([], s, spec)  # validates the name before any file is written
    have_data = all((root / d.folder).exists() for d in spec.domains)
    fulls = {}
    for d in spec.domains:
        full_path = registry.lists_dir(name) / f"{d.name}_full.txt"
        if have_data:
            entries = scan_domain(spec, d, root)
            check_counts(spec, d, entries, str(root / d.folder))
        elif full_path.is_file():
            entries = read_list(full_path)
        else:
            registry.require_dataset(name)  # raises with the instructions
        fulls[d.name] = entries
    written = []
    for d in spec.domains:
        for s in splits:
            path = registry.lists_dir(name) / f"{d.name}_{s}.txt"
            write_list(path, derive(fulls[d.name], s, spec))
            written.append(path)
    return written
