"""What a dataset declaration holds: :class:`DatasetSpec` with its :class:`Domain` s and :class:`Archive` s.

The built-in declarations are data in :mod:`dmp.data.catalog`; users declare "bring your own features" datasets in
``datasets/<name>/dataset.yaml`` (:func:`spec_from_yaml`). Nothing here touches the disk beyond reading that yaml.
"""
from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff")


def gdrive(file_id: str) -> str:
    """The URL of a public Google Drive file (downloaded through ``gdown``, which handles Drive's
    confirmation pages)."""
    return f"https://drive.google.com/uc?id={file_id}"


def folder_key(name: str) -> str:
    """A folder name as packagings spell it differently: ``Real World``, ``RealWorld``, ``Real_World`` and
    ``real-world`` all give ``realworld``."""
    return re.sub(r"[\s_\-]+", "", name).lower()


@dataclass(frozen=True)
class Domain:
    """One domain. ``folder``: its path inside the data root (images: the folder holding one sub-folder per
    class, or the flat image folder of list-labelled layouts; features/arrays: the file). ``count``: images
    (samples) expected; ``class_counts``: per class, in the order of the dataset's classes (where published).
    ``aliases``: other names of the domain folder in known packagings (matched with :func:`folder_key`).
    ``x_key``/``y_key``: array names in a features file; for ``.npy`` features ``y_key`` is the labels file."""
    name: str
    short: str
    folder: str
    count: int | None = None
    x_key: str = "X"
    y_key: str = "y"
    class_counts: tuple[int, ...] | None = None
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Archive:
    """One packaging of (some of) a dataset's domains, saved as ``filename`` in the downloads folder.

    ``urls``: mirrors that serve these same bytes (``gdrive(ID)`` for Google Drive files); ``manual_urls``:
    pages that need a browser (MEGA, Baidu, an authors' form), shown when nothing could be downloaded.
    ``sha256``: pinned checksum (checked strictly) where known; ``size``: the expected size in bytes (downloads
    are refused beyond twice that). ``id``: its key in the lock file (default ``filename``; give one when two
    packagings share a file name)."""
    filename: str
    urls: tuple[str, ...]
    domains: tuple[str, ...]
    sha256: str | None = None
    size: int | None = None
    manual_urls: tuple[str, ...] = ()
    extras: tuple[str, ...] = ()
    id: str = ""

    @property
    def key(self) -> str:
        return self.id or self.filename


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset. ``kind``: "images" (image files + committed lists), "features" (per-domain feature
    files) or "arrays" (small images stored as arrays). ``layout`` (images): "class_folders"
    (``<domain folder>/<class>/<image>``) or "list_files" (labels read from ``label_lists``: ``(domain, path)``
    relative to the root, lines ``path label``). ``splits``: the lists ``prepare`` writes. ``variant_of``: the
    dataset this one is another release of; ``release`` names the release (shown in errors and ``data list``)."""
    name: str
    kind: str
    domains: tuple[Domain, ...]
    classes: tuple[str, ...]
    partial_classes: tuple[int, ...] = ()
    archives: tuple[Archive, ...] = ()
    title: str = ""
    homepage: str = ""
    layout: str = "class_folders"
    label_lists: tuple[tuple[str, str], ...] = ()
    images_per_class: int | None = None
    splits: tuple[str, ...] = ("full", "partial")
    default_root: str | None = None
    label_offset: int = 0
    sample_shape: tuple[int, ...] | None = None
    column_major: bool = False
    generated: bool = False
    meta: tuple[tuple[str, str], ...] = ()
    release: str = ""
    variant_of: str | None = None

    def domain(self, name: str) -> Domain:
        """The domain called ``name`` (config id) or with paper letter ``name``."""
        for d in self.domains:
            if name in (d.name, d.short):
                return d
        raise KeyError(f"dataset {self.name!r} has no domain {name!r}; domains: "
                       f"{', '.join(f'{d.name} ({d.short})' for d in self.domains)}")

    @property
    def total(self) -> int | None:
        """Images (samples) over all domains, where every domain's count is declared."""
        counts = [d.count for d in self.domains]
        return None if None in counts else sum(counts)


def spec_from_yaml(path: Path) -> DatasetSpec:
    """A user dataset from ``datasets/<name>/dataset.yaml``: keys ``kind`` (features|arrays), ``classes``,
    ``domains`` (list of ``{name, short, file, count, x_key, y_key}``), optional ``root`` (relative to the
    yaml's folder; default ``data``), ``partial_classes``, ``label_offset``, ``sample_shape``, ``meta``."""
    import yaml

    raw = yaml.safe_load(Path(path).read_text()) or {}
    try:
        kind = raw["kind"]
        domains = tuple(Domain(d["name"], str(d.get("short", d["name"])), d["file"], d.get("count"),
                               d.get("x_key", "X"), d.get("y_key", "y")) for d in raw["domains"])
        classes = tuple(str(c) for c in raw["classes"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{path}: missing or malformed key {exc}; needs kind, classes, domains "
                         f"(each with name and file)") from None
    if kind not in ("features", "arrays"):
        raise ValueError(f"{path}: kind must be 'features' or 'arrays', got {kind!r}")
    root = (Path(path).parent / raw.get("root", "data")).resolve()
    meta = tuple((str(k), json.dumps(v, sort_keys=True)) for k, v in sorted((raw.get("meta") or {}).items()))
    return DatasetSpec(Path(path).parent.name, kind, domains, classes, tuple(raw.get("partial_classes", ())),
                       title=raw.get("title", f"user features ({path})"), default_root=str(root),
                       label_offset=int(raw.get("label_offset", 0)),
                       sample_shape=tuple(raw["sample_shape"]) if raw.get("sample_shape") else None,
                       splits=("full",), meta=meta)


def as_dict(spec: DatasetSpec) -> dict:
    """A JSON-friendly view of a spec (for ``python -m dmp data list --json``)."""
    return dataclasses.asdict(spec)
