"""Which datasets exist and where each one lives: the registry of built-in (:mod:`dmp.data.catalog`) and user
(``datasets/<name>/dataset.yaml``) declarations, the on-disk layout (data root, downloads, committed lists), the
lock file recording the first verified fetch, and the dataset version derived from them.

A dataset is looked up by name once, with :func:`get_dataset`, where the name comes in (a command, a config); what
follows takes the :class:`DatasetSpec` it returns. A function that needs only the name (the committed folder, its
lists and lock file) takes the name.

Committed per dataset in ``datasets/<name>/``: ``lists/<domain>_<split>.txt`` (``relative/path label`` lines),
``lock.json`` and the declaration files ``source.json`` / ``splits.json`` that DVC stages depend on.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import io
import json
import os
import posixpath
import re
from pathlib import Path

from ..io import sha256_file, write_json, write_text
from .catalog import BUILTIN, BUILTIN_NAMES, PUBLISHED_DUPLICATES, BrokenDeclaration, read_declaration
from .spec import DatasetSpec, domain_folder, partial_indices, placed_by_hand, visible_name

PROJECT = Path(__file__).resolve().parents[2]
DATASETS_DIR = PROJECT / "datasets"


class DatasetMissingError(FileNotFoundError):
    """A dataset (or one of its files) is not where the pipeline reads it."""


class FetchError(RuntimeError):
    """A dataset could not be fetched, or what was fetched failed verification."""


# ----------------------------------------------------------------------------------------------- lookup
_BUILTIN_NAMES = BUILTIN_NAMES


def _all_specs() -> dict[str, DatasetSpec | BrokenDeclaration]:
    """Every registered name: the built-in specs, then each ``datasets/<name>/dataset.yaml`` (a
    :class:`BrokenDeclaration` where it cannot be read)."""
    specs: dict = {s.name: s for s in BUILTIN}
    for yml in (y for folder in reversed(declaration_dirs()) for y in sorted(folder.glob("*/dataset.yaml"))):
        entry = read_declaration(yml)
        specs[entry.name] = entry  # a user folder named as a built-in: broken, said when that name is used
    return specs


def dataset_names() -> list[str]:
    """Names of all registered datasets (built-in and ``datasets/*/dataset.yaml``, broken ones included)."""
    return list(_all_specs())


def broken_declarations() -> dict[str, str]:
    """``{name: one-line reason}`` of the ``dataset.yaml`` files that cannot be read."""
    return {n: s.reason for n, s in _all_specs().items() if isinstance(s, BrokenDeclaration)}


def get_dataset(name: str, classes_from_data: bool = True) -> DatasetSpec:
    """The registered dataset ``name``; an unknown name raises KeyError listing the known ones, a broken
    declaration ValueError with its one-line reason. ``classes_from_data=False``: a user image dataset as declared,
    its classes not yet read from the data (the DVC declarations, which must not change when the data arrives)."""
    specs = _all_specs()
    if name not in specs:
        close = difflib.get_close_matches(str(name), list(specs), n=3, cutoff=0.6)
        raise KeyError(f"unknown dataset {name!r}" + (f" (did you mean {' or '.join(close)}?)" if close else "")
                       + f"; known datasets: {', '.join(specs)} (user declarations: "
                       f"{', '.join(str(d / '<name>' / 'dataset.yaml') for d in declaration_dirs())})")
    if isinstance(specs[name], BrokenDeclaration):
        raise ValueError(specs[name].reason)
    spec = specs[name]
    if classes_from_data and spec.classes_from and not spec.classes:  # a user dataset's classes, from its data
        spec = dataclasses.replace(spec, classes=data_classes(spec, data_root(spec)))
        if spec.classes and spec.partial_names:
            spec = dataclasses.replace(spec, partial_classes=partial_indices(
                spec.partial_names, spec.classes, f"{dataset_dir(name) / 'dataset.yaml'}: key 'partial_classes'"))
    return spec


def releases(spec: DatasetSpec) -> list[DatasetSpec]:
    """The other registered releases of the same dataset (the base dataset and its named variants)."""
    base = spec.variant_of or spec.name
    return [s for s in _all_specs().values() if isinstance(s, DatasetSpec) and s.name != spec.name
            and base in (s.name, s.variant_of)]


# ----------------------------------------------------------------------------------------------- layout
def declaration_dirs() -> list[Path]:
    """The folders holding user declarations ``<name>/dataset.yaml``, first match wins: those named in
    DMP_DATASETS_DIR (separated by ``os.pathsep``; a lab's datasets kept outside the checkout), then the project's
    ``datasets/``."""
    extra = os.environ.get("DMP_DATASETS_DIR", "")
    return [*(Path(p).expanduser().resolve() for p in extra.split(os.pathsep) if p), DATASETS_DIR]


def dataset_dir(name: str) -> Path:
    """The committed folder of a dataset (lists, lock file, declarations): ``datasets/<name>`` for a built-in, the
    folder of its ``dataset.yaml`` for a user dataset; a new one (extract-features) goes into the first of
    :func:`declaration_dirs`."""
    if name in _BUILTIN_NAMES:
        return DATASETS_DIR / name
    dirs = declaration_dirs()
    return next((d / name for d in dirs if (d / name / "dataset.yaml").is_file()), dirs[0] / name)


def data_root(spec: DatasetSpec) -> Path:
    """Where the dataset's files live: the ``root:`` its dataset.yaml names, if it names one (an explicit root wins
    over the environment: the declaration says where its files are, and ``extract-features`` writes the root it
    wrote them to); else ``$DMP_DATA_DIR/<name>`` if DMP_DATA_DIR is set, else the entry's ``default_root``
    (relative to the project) if it has one, else ``datasets/<name>/data``."""
    if spec.root_declared:
        return Path(spec.default_root)
    env = os.environ.get("DMP_DATA_DIR")
    if env:
        return Path(env).expanduser().resolve() / spec.name
    if spec.default_root:
        return (PROJECT / spec.default_root).resolve()
    return dataset_dir(spec.name) / "data"


def download_dir(spec: DatasetSpec) -> Path:
    """Where archives are downloaded (and may be placed by hand): ``datasets/<name>/downloads``, or
    ``$DMP_DATA_DIR/downloads/<name>``. A variant shares its base dataset's folder (the same archives)."""
    name = spec.variant_of or spec.name
    env = os.environ.get("DMP_DATA_DIR")
    return Path(env).expanduser().resolve() / "downloads" / name if env else dataset_dir(name) / "downloads"


def lists_dir(name: str) -> Path:
    """Committed image lists: ``datasets/<name>/lists/<domain>_<split>.txt``."""
    return dataset_dir(name) / "lists"


_SPLIT_RE = re.compile(r"^(full|partial|first[1-9]\d*|n[1-9]\d*)$")
PARTS = ("", "train", "eval")  # of a domain: all its images; with eval_lists, those of its other lists / of those


def list_path(name: str, domain: str, split: str = "full", part: str = "") -> Path:
    """Where the list of ``split`` of ``part`` of ``domain`` is committed: ``lists/<domain>_<split>.txt``, or
    ``lists/<part>/<domain>_<split>.txt`` (whether it exists or not; :func:`list_file` checks)."""
    if part not in PARTS:
        raise ValueError(f"unknown list part {part!r}; parts are {', '.join(map(repr, PARTS))}")
    return lists_dir(name) / part / f"{domain}_{split}.txt"


def list_file(spec: DatasetSpec, domain: str, split: str = "full", part: str = "") -> Path:
    """The committed list of ``split`` of ``domain`` (lines ``relative/path label``, relative to
    :func:`data_root`). Splits: full, partial, first<N> (classes 0..N-1), n<K> (K images per class, seeded);
    ``part`` (:data:`PARTS`): the whole domain, or its training or evaluation images (``eval_lists``)."""
    name = spec.name
    if spec.kind != "images":
        raise ValueError(f"dataset {name!r} is of kind {spec.kind!r}: it has no image lists, use load_arrays")
    dom = spec.domain(domain)
    if not _SPLIT_RE.match(split):
        raise ValueError(f"unknown split {split!r}; splits are full, partial, first<N> or n<K> (N, K >= 1)")
    if part and dom.name not in {d for d, _ in spec.eval_lists}:
        raise ValueError(f"domain {dom.name!r} of dataset {name!r} declares no eval_lists: it has no {part!r} part")
    path = list_path(name, dom.name, split, part)
    if not path.is_file():
        have = sorted(p.stem.split("_", 1)[1] for p in lists_dir(name).glob(f"{dom.name}_*.txt"))
        hint = (f"python -m dmp data prepare {name}" + ("" if split in spec.splits else f" --splits {split}"))
        raise DatasetMissingError(
            f"split list {path} does not exist (dataset {name!r}, domain {dom.name!r}, split {split!r}); "
            f"existing splits: {', '.join(have) or 'none'}. Create it with `{hint}`"
            + ("" if have else f" after fetching the data (`python -m dmp data fetch {name}`)"))
    return path


def require_dataset(spec: DatasetSpec) -> Path:
    """Check that the dataset's files are in place and return :func:`data_root`; otherwise raise
    :class:`DatasetMissingError` naming what is missing, the command to get it and where to put it by hand."""
    name, root = spec.name, data_root(spec)
    missing = [d for d in spec.domains if not (root / domain_folder(spec, d, root)).exists()]
    if not missing:
        return root
    what = ", ".join(f"{root / d.folder} (domain {d.name})" for d in missing)
    if spec.kind != "images":
        elsewhere = (f"change the root: of {dataset_dir(name) / 'dataset.yaml'} (it wins over DMP_DATA_DIR)"
                     if spec.root_declared else f"point DMP_DATA_DIR at a folder holding {name}/")
        how = (f"Place the files there, or {elsewhere} "
               f"(each domain's file: {', '.join(d.folder for d in spec.domains)}).")
        if spec.archives:
            how = f"Fetch them with `python -m dmp data fetch {name}`. Or: {how[0].lower()}{how[1:]}"
    elif spec.generated:
        how = f"Generate it with `python -m dmp data demo` (or `dvc repro {name}`)."
    else:
        how = (f"Fetch it with `python -m dmp data fetch {name}` (or `dvc repro prepare@{name}`), "
               f"or download one of the archives ({', '.join(dict.fromkeys(a.filename for a in spec.archives))}) "
               f"by hand into {download_dir(spec)}/ and rerun the fetch, or place the extracted domain folders "
               f"under {root}/ ({placed_by_hand(spec, missing)}).")
    raise DatasetMissingError(f"dataset {name!r} is not in place: missing {what}. {how}")


# ----------------------------------------------------------------------------------------------- list files
_LINE_RE = re.compile(r"(.*\S)\s+([+-]?\d+)")


def _published_duplicates(path: Path) -> bool:
    """Whether ``path`` is a list of a dataset whose published label lists name some images twice
    (:data:`~dmp.data.catalog.PUBLISHED_DUPLICATES`): its label lists under the data root and the lists derived
    from them keep every entry, as published."""
    path = Path(path).resolve()
    for spec in (s for s in BUILTIN if s.name in PUBLISHED_DUPLICATES):
        if any(folder in path.parents for folder in (lists_dir(spec.name).resolve(), data_root(spec))):
            return True
    return False


def read_list(path: Path, num_classes: int | None = None, shown: str | None = None,
              duplicates: bool | None = None, relative: bool = False) -> list[tuple[str, int]]:
    """``[(relative path, label)]`` from a list file: ``path label`` per line (paths may contain spaces; CRLF
    line ends are accepted). Labels must be integers, and in ``0..num_classes-1`` when ``num_classes`` is given;
    a path listed twice is refused (it would count one image twice), unless ``duplicates`` (default: whether the
    list is one of the published lists that do so, :func:`_published_duplicates`). ``relative``: each path must be
    relative to the data root and stay inside it, and is normalised (``a/./b`` and ``a/x/../b`` are ``a/b``, so one
    image cannot be listed twice under two spellings). The file must be UTF-8. Every error names the file (as
    ``shown``, default its path) and line."""
    entries, path, seen = [], Path(path), {}
    shown = shown or str(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ValueError(f"{shown}:{line}: not UTF-8 (byte {data[exc.start]:#04x}); "
                         f"save the list as UTF-8") from None
    with io.StringIO(text, newline="") as fh:
        for n, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            m = _LINE_RE.fullmatch(line.rstrip())
            if not m:
                raise ValueError(f"{shown}:{n}: expected 'relative/path label' with an integer label, got {line!r}")
            rel, lab = m.group(1), int(m.group(2))
            if relative:
                norm = posixpath.normpath(rel.replace("\\", "/"))
                if norm.startswith("/") or re.match(r"[A-Za-z]:/", norm) or norm == ".." or norm.startswith("../"):
                    raise ValueError(f"{shown}:{n}: {rel!r} is outside the data root (a list's paths are relative "
                                     f"to it, inside it)")
                rel = norm
            if num_classes is not None and not 0 <= lab < num_classes:
                raise ValueError(f"{shown}:{n}: label {lab} of {rel!r} outside 0..{num_classes - 1}")
            if rel in seen:
                duplicates = _published_duplicates(path) if duplicates is None else duplicates
                if not duplicates:
                    raise ValueError(f"{shown}:{n}: {rel!r} is listed again (first on line {seen[rel]}): a path may "
                                     f"appear once in a list")
            seen.setdefault(rel, n)
            entries.append((rel, lab))
    return entries


def write_list(path: Path, entries) -> None:
    """Write a list atomically."""
    write_text(path, "".join(f"{rel} {label}\n" for rel, label in entries))


# ----------------------------------------------------------------------------------------------- lock, version
def lock_path(name: str) -> Path:
    """The committed lock file: what the first verified fetch saw (:func:`read_lock`)."""
    return dataset_dir(name) / "lock.json"


def read_lock(name: str) -> dict:
    """The lock file's content (empty sections if absent): ``archives`` ({archive key: {file, sha256, size,
    mirror}} of the packagings verified to give this content), ``source`` (the archive(s) and mirror of the
    first fetch), ``counts`` ({domain: {class: n}}) and ``manifest`` ({domain: sha256 over every listed file's
    path and sha256})."""
    path = lock_path(name)
    lock = json.loads(path.read_text()) if path.is_file() else {}
    for key in ("archives", "counts", "manifest", "source"):
        lock.setdefault(key, {})
    return lock


def write_lock(name: str, lock: dict) -> None:
    write_json(lock_path(name), {k: v for k, v in lock.items() if v or k in ("archives", "counts")})


def file_digests(root: Path, rels) -> dict[str, str]:
    """``{rel: sha256}`` of the files ``root/rel``, each hashed once and kept beside the data root in
    ``.<root name>.digests.json`` with its size, mtime, ctime and inode: a file is hashed again only when one of
    them changed (a file replaced or rewritten in place always changes its ctime)."""
    root = Path(root)
    cache_path = root.parent / f".{root.name}.digests.json"
    try:
        cache = json.loads(cache_path.read_text())
    except (OSError, ValueError):
        cache = {}
    out, changed = {}, False
    for rel in rels:
        st = (root / rel).stat()
        key = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        hit = cache.get(rel)
        if not hit or hit[:4] != key:
            cache[rel] = hit = [*key, sha256_file(root / rel)]
            changed = True
        out[rel] = hit[4]
    if changed:
        try:
            write_json(cache_path, cache)
        except OSError:  # a read-only data folder: hashed again next time
            pass
    return out


def dataset_version(spec: DatasetSpec, lists=None, content: bool = False) -> str:
    """A short content hash of the dataset. Images: its committed lists - only the ``(domain, split)`` or ``(domain,
    split, part)`` lists a run reads when ``lists`` is given (``splits.run_lists``), so preparing other splits changes
    no run's version - with the locked per-class counts and file manifest of their domains (the same whichever archive
    or mirror it came from), and for generated data its generator's declaration; ``content``: also the bytes in place of
    every file those lists name (:func:`file_digests`), so images replaced in place give another version.
    Features/arrays: its files."""
    name = spec.name
    h = hashlib.sha256(name.encode())
    if spec.kind == "images":
        if lists is None:
            paths, domains = sorted(lists_dir(name).rglob("*.txt")), [d.name for d in spec.domains]
        else:  # a list not written yet (planning a suite before `prepare`) counts as missing; a run needs it
            picked = sorted({(spec.domain(d).name, s, *part) for d, s, *part in lists})
            paths = sorted({list_path(name, *k) if not content else list_file(spec, *k) for k in picked})
            domains = sorted({d for d, *_ in picked})
        for path in paths:  # named relative to lists/: "real_full.txt", "eval/real_full.txt"
            h.update(path.relative_to(lists_dir(name)).as_posix().encode() + b"\0"
                     + (path.read_bytes() if path.is_file() else b"(missing)"))
        lock = read_lock(name)
        h.update(json.dumps({d: c for d, c in lock["counts"].items() if d in domains}, sort_keys=True).encode())
        manifest = {d: m for d, m in lock["manifest"].items() if d in domains}
        if manifest:
            h.update(json.dumps(manifest, sort_keys=True).encode())
        declared = dataset_dir(name) / "source.json"
        if spec.generated and declared.is_file():  # generated data: what it is generated with (generator version)
            h.update(declared.read_bytes())
        if content:
            rels = sorted({rel for path in paths for rel, _ in read_list(path)})
            digests = file_digests(require_dataset(spec), rels)
            h.update(b"content\0" + "".join(f"{rel}\0{digests[rel]}\n" for rel in rels).encode())
    else:
        root = require_dataset(spec)
        for f in sorted({d.folder for d in spec.domains}):
            h.update(f.encode() + sha256_file(root / f).encode())
    return h.hexdigest()[:12]


# ----------------------------------------------------------------------------------------------- classes read from data
def data_classes(spec, root) -> tuple[str, ...]:
    """The classes of a user image dataset whose dataset.yaml lists none (``spec.classes_from``), read from its data
    under ``root``: "folders": the sorted names of the class folders of every domain in place; "lists": for labels
    0..K-1 the folder holding each label's images in the label lists in place (the label order of the lists).
    Empty while none of the data is in place."""
    root = Path(root)
    if spec.classes_from == "folders":
        names = set()
        for d in spec.domains:
            if (root / d.folder).is_dir():
                names |= {p.name for p in (root / d.folder).iterdir() if p.is_dir() and visible_name(p.name)}
        return tuple(sorted(names))
    stamps = tuple((str(root / lst), (root / lst).stat().st_mtime_ns, (root / lst).stat().st_size)
                   for _, lst in spec.label_lists if (root / lst).is_file())
    return _list_classes(stamps)


@functools.lru_cache(maxsize=16)
def _list_classes(stamps) -> tuple[str, ...]:
    """Label -> class name from the label lists ``stamps`` ((path, mtime, size)): the folder of its images."""
    names: dict[int, tuple[str, str, str]] = {}
    for path, *_ in stamps:
        for rel, label in read_list(Path(path), relative=True):
            parts = rel.replace("\\", "/").split("/")
            if len(parts) < 2:
                raise ValueError(f"{path}: {rel!r} is in no class folder, so the class names cannot be read from the "
                                 f"lists: list `classes` in the dataset.yaml (in label order)")
            if label < 0:
                raise ValueError(f"{path}: label {label} of {rel!r} is negative")
            seen = names.setdefault(label, (parts[-2], path, rel))
            if seen[0] != parts[-2]:
                raise ValueError(f"{path}: {rel!r} has label {label}, whose images are in folder {seen[0]!r} in "
                                 f"{seen[1]} ({seen[2]!r}): list `classes` in the dataset.yaml (in label order)")
    gap = min(set(range(len(names) + 1)) - set(names))  # labels must be 0..K-1: bounded before any allocation
    if gap < len(names) or max(names, default=-1) >= len(names):
        raise ValueError(f"label {gap} has no image in the lists ({', '.join(p for p, *_ in stamps)}) but label "
                         f"{max(names)} has: labels are 0..K-1 for K classes; list `classes` in the dataset.yaml "
                         f"(in label order)")
    classes = tuple(names[i][0] for i in range(len(names)))
    if "" in classes:
        raise ValueError(f"label {classes.index('')} has no image in the lists ({', '.join(p for p, *_ in stamps)}): "
                         f"list `classes` in the dataset.yaml (in label order)")
    twice = sorted({c for c in classes if classes.count(c) > 1})
    if twice:
        raise ValueError(f"folder {twice[0]!r} holds the images of labels "
                         f"{[i for i, c in enumerate(classes) if c == twice[0]]} in the lists "
                         f"({', '.join(p for p, *_ in stamps)}): list `classes` in the dataset.yaml (in label order)")
    return classes
