"""Image lists and the protocol splits derived from them.

The full list of a domain is built once from a verified extracted copy (sorted by path, or in the published lists'
order where the dataset has one: :func:`dmp.data.verify.scan_domain`; deterministic) and committed;
every other split is a pure function of the full list, defined here:

- ``partial``: the dataset's partial-target classes (Office-31: PADA's 10 Caltech-shared classes;
  Office-Home: first 25; ImageCLEF-DA and VisDA-2017: first 6);
- ``first<N>``: the first N classes alphabetically (Office-31 shared-class sweep, N = 10..31);
- ``n<K>``: K images per class drawn with a fixed seed; nested (n10 is a subset of n30).

Labels always index the full class list. Features/arrays datasets take the same split names in
:func:`load_arrays`.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from . import registry
from .load import read_arrays, read_views
from .registry import read_list, write_list
from .catalog import BUILTIN_NAMES
from .spec import DatasetSpec, bare_folder, domain_folder
from .verify import _listed, check_counts, per_class, scan_domain

SEED = 0  # the seed of the n<K> subsets; part of the protocol, never changed
PROTOCOL = 1  # bump when select() changes: the committed splits.json declarations (and DVC) follow

__all__ = ["SEED", "PROTOCOL", "select", "derive", "prepare", "run_lists", "scored", "load_arrays", "split_size",
           "read_list", "write_list"]


def select(labels, split: str, spec: DatasetSpec) -> np.ndarray:
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
        if k < 1:
            raise ValueError(f"split {split!r}: K must be at least 1 (n<K> takes K images per class)")
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


def derive(entries, split: str, spec: DatasetSpec) -> list[tuple[str, int]]:
    """The entries of ``split`` from a domain's full list."""
    return [entries[i] for i in select([lab for _, lab in entries], split, spec)]


def prepare(name: str, splits=None, root: Path | None = None) -> list[Path]:
    """Write the split lists of every domain of ``name`` into ``datasets/<name>/lists``.

    The full lists are (re)built from the extracted data when it is in place (``root``, default
    :func:`registry.data_root`) and its counts verified; otherwise the committed full lists are used.
    ``splits``: the derived splits to write (default: the dataset's declared ``splits``). A domain with
    ``eval_lists`` also gets each split of its two parts (:data:`registry.PARTS`): ``lists/train/`` from the images
    of its other lists, ``lists/eval/`` from those of its evaluation lists. Returns the paths."""
    spec = registry.get_dataset(name)
    if spec.kind != "images":
        raise ValueError(f"dataset {name!r} is of kind {spec.kind!r}: its splits are derived on load")
    root = Path(root) if root else registry.data_root(spec)
    splits = list(dict.fromkeys(splits or spec.splits))
    for s in splits:
        select([], s, spec)  # validates the name before any file is written
    have_data = all((root / domain_folder(spec, d, root)).exists() for d in spec.domains)
    fulls = {}
    for d in spec.domains:
        full_path = registry.lists_dir(name) / f"{d.name}_full.txt"
        if have_data:
            entries = scan_domain(spec, d, root)
        elif full_path.is_file():
            entries = read_list(full_path, len(spec.classes))
        else:
            registry.require_dataset(spec)  # raises with the instructions
        fulls[d.name] = entries
    if have_data:
        check_counts(spec, {d: per_class(spec, e) for d, e in fulls.items()}, registry.read_lock(name),
                     lambda rel: str(root / rel), {d.name: domain_folder(spec, d, root) for d in spec.domains})
    parts = {d.name: {"": fulls[d.name]} for d in spec.domains}
    for d in {d for d, _ in spec.eval_lists}:
        scored = (_scored(spec, spec.domain(d), root) if have_data
                  else {rel for rel, _ in read_list(registry.list_path(name, d, "full", "eval"))})
        parts[d].update(train=[e for e in fulls[d] if e[0] not in scored], eval=[e for e in fulls[d] if e[0] in scored])
    written = []
    for d in spec.domains:
        for part, entries in parts[d.name].items():
            for s in splits:
                path = registry.list_path(name, d.name, s, part)
                write_list(path, derive(entries, s, spec))
                written.append(path)
    return written


def _scored(spec: DatasetSpec, domain, root: Path) -> set[str]:
    """The images of a domain's ``eval_lists`` (as its full list names them)."""
    return {rel for d, lst in spec.eval_lists if d == domain.name
            for rel, _ in _listed(spec, domain, root, lst, lambda r: str(root / r))}


def run_lists(spec: DatasetSpec, source: str, source_split: str, target: str, target_split: str) -> dict[str, tuple]:
    """The lists a run reads, by role, each ``(domain, split, part)`` (:func:`registry.list_file`): ``source_train``
    (also the source's no-grad passes), ``target_train`` (adapted on) and ``target_eval`` (scored). A domain with
    ``eval_lists`` (DomainNet's protocol) is trained and adapted on its "train" part and, as the target, scored on its
    "eval" part; any other domain is read whole, and the target is scored on the images it is adapted on (the paper's
    protocol)."""
    apart = {d for d, _ in spec.eval_lists}

    def one(domain, split, part):
        dom = spec.domain(domain).name
        return dom, split, part if dom in apart else ""
    return {"source_train": one(source, source_split, "train"), "target_train": one(target, target_split, "train"),
            "target_eval": one(target, target_split, "eval")}


def scored(spec: DatasetSpec, target: str, target_split: str) -> dict:
    """What a run on ``target`` is scored on (``metrics.json`` ``target_eval``, with the count the run scored):
    ``domain``, ``split``, ``part`` ("" = the images adapted on, "eval" = the domain's ``eval_lists``) and, for an
    image dataset, its ``list`` file relative to the dataset's folder."""
    domain, split, part = run_lists(spec, target, target_split, target, target_split)["target_eval"]
    rel = registry.list_path(spec.name, domain, split, part).relative_to(registry.dataset_dir(spec.name)).as_posix()
    return {"domain": domain, "split": split, "part": part, "list": rel if spec.kind == "images" else None}


def load_arrays(spec: DatasetSpec, domain: str, split: str = "full") -> tuple[np.ndarray, np.ndarray]:
    """The samples of ``split`` of one domain of a features/arrays dataset (:func:`read_arrays`, validated):
    float32 features ``[N, D]`` or images ``[N, C, H, W]`` and int64 labels."""
    x, y = read_arrays(spec, domain)
    keep = select(y, split, spec)
    return np.ascontiguousarray(x[keep]), y[keep]


def load_views(spec: DatasetSpec, domain: str, split: str = "full") -> np.ndarray | None:
    """The augmented training views ``[N, V, D]`` of the samples of :func:`load_arrays` (same rows), or ``None``
    when the domain declares no ``views_key``."""
    if spec.domain(domain).views_key is None:
        return None
    x, y = read_arrays(spec, domain)
    keep = select(y, split, spec)
    return np.ascontiguousarray(read_views(spec, domain, x)[keep])


def split_size(spec: DatasetSpec, domain: str, split: str) -> int:
    """Number of samples in ``split`` of ``domain``, from the registry's declared counts where the split
    definition allows it (``full``: the domain's count; ``n<K>``: K per class), otherwise from the committed
    list. Needs no data (``python -m dmp config --schedule``). A domain with ``eval_lists`` counts the part a run
    trains on (:func:`run_lists`), from its committed list."""
    dom = spec.domain(domain)
    part = run_lists(spec, dom.name, split, dom.name, split)["source_train"][2]
    if part:
        return len(read_list(registry.list_file(spec, dom.name, split, part)))
    m = re.fullmatch(r"n(\d+)", split)
    if split == "full" and dom.count is not None:
        return dom.count
    if m:
        return int(m.group(1)) * len(spec.classes)
    if spec.kind != "images":  # feature / array files hold their labels: count the split's rows
        try:
            return len(load_arrays(spec, dom.name, split)[1])
        except FileNotFoundError as e:
            raise ValueError(f"dataset {spec.name!r} domain {dom.name!r}: the size of split {split!r} needs the data "
                             f"file ({e.filename or e}) or a declared `count` in its dataset.yaml") from None
    return len(read_list(registry.list_file(spec, dom.name, split)))


def check_classes(spec: DatasetSpec, domains) -> None:
    """Refuse the committed full lists of ``domains`` of a user image dataset when they no longer fit its classes:
    the per-class counts under today's class names differ from those locked at the first fetch (a class folder
    added or removed, ``classes:`` reordered or edited) or, for class folders, an image's folder is not the class its
    label names. Training on them would put the accuracies under shifted class names with an unchanged version."""
    name = spec.name
    if spec.kind != "images" or name in BUILTIN_NAMES:
        return
    lock, yml = registry.read_lock(name), registry.dataset_dir(name) / "dataset.yaml"
    locked_classes = {c for counts in lock["counts"].values() for c in counts}
    if locked_classes and locked_classes != set(spec.classes):
        added, gone = sorted(set(spec.classes) - locked_classes), sorted(locked_classes - set(spec.classes))
        raise ValueError(f"dataset {name!r}: its classes changed since the data was locked in "
                         f"{registry.lock_path(name)} ("
                         + "; ".join(s for s in (f"new class(es) {', '.join(added)}" if added else "",
                                                 f"class(es) {', '.join(gone)} gone" if gone else "") if s)
                         + f", from {yml} or the class folders): another dataset version; remove the lock file and "
                           f"fetch it again (`dmp data fetch {name}`)")
    for d in dict.fromkeys(spec.domain(x).name for x in domains):
        path = registry.list_path(name, d)
        if not path.is_file():
            continue
        entries = read_list(path)
        bad = next((i for i, (_, lab) in enumerate(entries) if not 0 <= lab < len(spec.classes)), None)
        dom = spec.domain(d)
        if bad is None and spec.layout == "class_folders":
            tops = [f for f in (dom.folder, bare_folder(spec, dom)) if f]
            bad = next((i for i, (rel, lab) in enumerate(entries)
                        if not any(rel.startswith(f"{f}/{spec.classes[lab]}/") for f in tops)), None)
        counts = {c: sum(lab == i for _, lab in entries) for i, c in enumerate(spec.classes)}
        locked = lock["counts"].get(d)
        if bad is None and (not locked or counts == locked):
            continue
        where = f"{path}:{bad + 1}: {entries[bad][0]!r} has label {entries[bad][1]}" if bad is not None else str(path)
        raise ValueError(f"{where}: the list was prepared for other classes than {yml} and the class folders give "
                         f"now ({', '.join(spec.classes)}): run `dmp data prepare {name}` to write the lists again")
