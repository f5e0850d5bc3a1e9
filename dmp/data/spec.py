"""What a dataset declaration holds: :class:`DatasetSpec` with its :class:`Domain` s and :class:`Archive` s.

The built-in declarations are data in :mod:`dmp.data.catalog`; users declare "bring your own features" datasets in
``datasets/<name>/dataset.yaml`` (:func:`spec_from_yaml`). Nothing here touches the disk beyond reading that yaml
and looking which accepted layout a domain's images were placed in (:func:`domain_folder`).
"""
from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff")
JUNK = ("__MACOSX", ".DS_Store", "Thumbs.db")


def visible_name(name: str) -> bool:
    """A file or folder name that is data, not an archiver's or a desktop's hidden extra."""
    return not name.startswith(".") and name not in JUNK


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
    ``x_key``/``y_key``: array names in a features file; for ``.npy`` features ``y_key`` is the labels file.
    ``views_key`` (features, optional): an array ``[N, V, D]`` of V augmented training views of each sample (a
    training draw takes one of them; ``x_key`` stays what the no-grad passes and the scoring read)."""
    name: str
    short: str
    folder: str
    count: int | None = None
    x_key: str = "X"
    y_key: str = "y"
    class_counts: tuple[int, ...] | None = None
    aliases: tuple[str, ...] = ()
    views_key: str | None = None


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
    relative to the root, lines ``path label``; ``list_paths``: "in_folder" = each path's file name inside the flat
    domain folder, as ImageCLEF's lists need, or "root" = relative to the data root, as Transfer-Learning-Library's
    lists are). ``splits``: the lists ``prepare`` writes. ``variant_of``: the dataset this one is another release
    of; ``release`` names the release (shown in errors and ``data list``). ``classes_from`` (user image datasets
    whose dataset.yaml lists no classes): "folders" (the sorted class folder names) or "lists" (each label's
    folder in the label lists), read from the data by :func:`dmp.data.registry.get_dataset`, which also turns
    ``partial_names`` (partial-target classes given by name) into ``partial_classes``. ``cache_images``:
    keep the decoded, resized images in memory during a run (small datasets). ``root_declared``: the dataset.yaml
    names its ``root:`` (``default_root``), which then wins over ``DMP_DATA_DIR``
    (:func:`dmp.data.registry.data_root`). ``eval_lists`` (list layout):
    ``(domain, path)`` of the label lists, also in ``label_lists``, that hold a domain's evaluation images
    (DomainNet's ``<domain>_test.txt``): such a domain is trained and adapted on its other lists and, as the
    target, scored on these (:func:`dmp.data.splits.run_lists`); every other domain is scored on the images it
    is adapted on (the paper's transductive protocol)."""
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
    classes_from: str = ""
    partial_names: tuple[str, ...] = ()
    list_paths: str = "in_folder"
    cache_images: bool = False
    eval_lists: tuple[tuple[str, str], ...] = ()
    root_declared: bool = False

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


_COMMON_KEYS = ("kind", "title", "classes", "domains", "root", "partial_classes", "meta")
_KIND_KEYS = {
    "features": ("label_offset", "sample_shape"),
    "arrays": ("label_offset", "sample_shape"),
    "images": ("layout", "homepage", "splits", "cache", "images_per_class", "archives"),
}
_DOMAIN_KEYS = {"features": ("name", "short", "file", "count", "x_key", "y_key", "views_key"),
                "images": ("name", "short", "folder", "count", "aliases", "lists", "eval_lists")}
_DOMAIN_KEYS["arrays"] = _DOMAIN_KEYS["features"]
_ARCHIVE_KEYS = ("file", "urls", "domains", "sha256", "size", "manual_urls", "extras", "id")
_IMAGE_ONLY = ("resize", "crop", "normalize", "normalise", "mean", "std", "transform")


def _names(value, what: str) -> tuple[str, ...]:
    """A string or a list of strings as a tuple."""
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, (str, int)) for v in value):
        raise ValueError(f"key {what!r} must be a name or a list of names, got {value!r}")
    return tuple(str(v) for v in value)


def _count(value, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"key {what!r} must be a positive integer (or be left out), got {value!r}")
    return value


def _check_keys(raw: dict, allowed, what: str, kind: str) -> None:
    for key in raw:
        if key in allowed:
            continue
        if kind != "images" and key in _IMAGE_ONLY and what == "":
            raise ValueError(f"key {key!r}: kind {kind!r} datasets are read at their stored size and values; resize, "
                             f"crop and the ImageNet normalisation apply to kind: images only (per-sample or "
                             f"per-feature scaling: run config keys sample_norm / standardize)")
        raise ValueError(f"unknown key {what + str(key)!r} for kind {kind!r}; known: {', '.join(allowed)}")


def spec_from_yaml(path: Path) -> DatasetSpec:
    """A user dataset from ``<declarations>/<name>/dataset.yaml`` (docs/datasets.md). Keys: ``kind``
    (features|arrays|images), ``classes`` (images: optional, see :attr:`DatasetSpec.classes_from`), ``domains``
    (features/arrays: ``{name, short, file, count, x_key, y_key}``; images: ``{name, short, folder, count,
    aliases, lists, eval_lists}``), optional ``root`` (relative to the yaml's folder; default ``data``),
    ``partial_classes`` (names or indices), ``title``, ``meta``; features/arrays: ``label_offset``,
    ``sample_shape``; images: ``layout`` (class_folders|list_files, the latter inferred from ``lists``),
    ``homepage``, ``splits``, ``cache``, ``images_per_class``, ``archives`` (``{file, urls, domains, sha256, size,
    manual_urls, extras, id}``). Any other key is an error naming it."""
    import yaml

    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ValueError(f"{where}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    try:
        return _spec(raw if raw is not None else {}, path)
    except (KeyError, TypeError, ValueError) as exc:
        text = exc.args[0] if exc.args else exc
        if not isinstance(exc, ValueError):
            text = (f"missing or malformed key {text!r}; needs kind, domains (each with a name, and its file; images: "
                    f"its folder or lists) and classes (images: optional)")
        raise ValueError(f"{path}: {text}") from None


def _spec(raw, path: Path) -> DatasetSpec:
    if not isinstance(raw, dict):
        raise ValueError("a dataset declaration is a mapping of key: value")
    kind = raw["kind"]
    if kind not in _KIND_KEYS:
        raise ValueError(f"kind must be 'features', 'arrays' or 'images', got {kind!r}")
    _check_keys(raw, _COMMON_KEYS + _KIND_KEYS[kind], "", kind)
    if not isinstance(raw["domains"], list) or not raw["domains"]:
        raise ValueError(f"key 'domains' must be a list of domains, got {raw['domains']!r}")
    for i, d in enumerate(raw["domains"]):
        if not isinstance(d, dict) or "name" not in d:
            raise ValueError(f"key 'domains[{i}]' must be a mapping with a name, got {d!r}")
        _check_keys(d, _DOMAIN_KEYS[kind], f"domains[{i}].", kind)
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", str(d["name"])):  # it names list files and cache files
            raise ValueError(f"key 'domains[{i}].name' must be letters, digits, '_', '-' and '.' (not first), got "
                             f"{d['name']!r}: it names the domain's list files")
    classes = _names(raw["classes"], "classes") if raw.get("classes") is not None or kind != "images" else ()
    if len(set(classes)) != len(classes):
        twice = sorted(c for c in set(classes) if classes.count(c) > 1)
        raise ValueError(f"key 'classes' names a class twice: {', '.join(twice)}")
    for key in ("title", "root"):  # text: a title is printed (data list), a root is a path
        if key in raw and not isinstance(raw[key], str):
            raise ValueError(f"key {key!r} must be text, got {raw[key]!r}")
    root = (path.parent / raw.get("root", "data")).resolve()
    if not isinstance(raw.get("meta") or {}, dict):
        raise ValueError(f"key 'meta' must be a mapping of name: value, got {raw['meta']!r}")
    meta = tuple((str(k), json.dumps(v, sort_keys=True)) for k, v in sorted((raw.get("meta") or {}).items()))
    partial = _names(raw.get("partial_classes") or (), "partial_classes")
    common = dict(name=path.parent.name, kind=kind, classes=classes, default_root=str(root), meta=meta,
                  root_declared="root" in raw,
                  partial_classes=partial_indices(partial, classes) if classes else ())
    if kind != "images":
        domains = tuple(Domain(str(d["name"]), str(d.get("short", d["name"])), d["file"],
                               _count(d.get("count"), f"domains[{i}].count"), d.get("x_key", "X"), d.get("y_key", "y"),
                               views_key=str(d["views_key"]) if d.get("views_key") else None)
                        for i, d in enumerate(raw["domains"]))
        return DatasetSpec(domains=domains, title=raw.get("title", f"user {kind} ({path})"),
                           label_offset=int(raw.get("label_offset", 0)),
                           sample_shape=tuple(raw["sample_shape"]) if raw.get("sample_shape") else None,
                           splits=("full",), **common)
    return _image_spec(raw, path, common)


def partial_indices(names, classes, where: str = "key 'partial_classes'") -> tuple[int, ...]:
    """Partial-target classes given by name or index, as indices into ``classes``."""
    out = []
    for c in names:
        if c.lstrip("-").isdigit():
            out.append(int(c))
        elif c in classes:
            out.append(classes.index(c))
        else:
            raise ValueError(f"{where}: {c!r} is not one of the classes ({', '.join(classes[:8])}"
                             f"{', ...' if len(classes) > 8 else ''})")
    if any(not 0 <= i < len(classes) for i in out):
        raise ValueError(f"{where}: indices must be in 0..{len(classes) - 1}, got {out}")
    return tuple(out)


def _image_spec(raw, path: Path, common: dict) -> DatasetSpec:
    """The images part of :func:`spec_from_yaml`: domains as class folders or label lists, archives."""
    has_lists = [("lists" in d) for d in raw["domains"]]
    layout = raw.get("layout", "list_files" if any(has_lists) else "class_folders")
    if layout not in ("class_folders", "list_files"):
        raise ValueError(f"key 'layout' must be 'class_folders' (<domain>/<class>/<image>) or 'list_files' "
                         f"('path label' lines), got {layout!r}")
    if layout == "list_files" and not all(has_lists):
        raise ValueError(f"key 'domains[{has_lists.index(False)}].lists' is missing: layout list_files needs each "
                         f"domain's label list(s) (relative to the data root)")
    if layout == "class_folders" and any(has_lists):
        raise ValueError(f"key 'domains[{has_lists.index(True)}].lists' is given but layout is class_folders")
    domains, label_lists, eval_lists = [], [], []
    for i, d in enumerate(raw["domains"]):
        name = str(d["name"])
        folder = str(d.get("folder", name)).strip("/")
        if not folder or ".." in Path(folder).parts or Path(folder).is_absolute():
            raise ValueError(f"key 'domains[{i}].folder' must be a path inside the data root, got {folder!r}")
        domains.append(Domain(name, str(d.get("short", name)), folder, _count(d.get("count"), f"domains[{i}].count"),
                              aliases=_names(d.get("aliases") or (), f"domains[{i}].aliases")))
        label_lists += [(name, lst) for lst in _names(d.get("lists") or (), f"domains[{i}].lists")]
        scored = _names(d.get("eval_lists") or (), f"domains[{i}].eval_lists")
        if scored and layout != "list_files":
            raise ValueError(f"key 'domains[{i}].eval_lists' needs the list layout: give the domain's training "
                             f"lists under 'lists' and its evaluation lists under 'eval_lists'")
        both = sorted(set(scored) & {lst for dom, lst in label_lists if dom == name})
        if both:
            raise ValueError(f"key 'domains[{i}].eval_lists': {both[0]!r} is also in 'lists' (a list is either "
                             f"trained on or scored)")
        eval_lists += [(name, lst) for lst in scored]
        label_lists += eval_lists[len(eval_lists) - len(scored):]
    bad = next((i for i, d in enumerate(domains) if not re.fullmatch(r"[A-Za-z0-9]+", d.short)), None)
    if bad is not None:
        raise ValueError(f"key 'domains[{bad}].short' must be letters and digits (it names tasks 'S->T' and run "
                         f"folders), got {domains[bad].short!r}")
    for key in ("name", "short"):
        seen = [getattr(d, key) for d in domains]
        if len(set(seen)) != len(seen):
            raise ValueError(f"two domains share the {key} {next(s for s in seen if seen.count(s) > 1)!r}")
    archives = []
    for i, a in enumerate(raw.get("archives") or ()):
        if not isinstance(a, dict) or "file" not in a:
            raise ValueError(f"key 'archives[{i}]' must be a mapping with a file (and urls), got {a!r}")
        _check_keys(a, _ARCHIVE_KEYS, f"archives[{i}].", "images")
        doms = _names(a.get("domains") or [d.name for d in domains], f"archives[{i}].domains")
        unknown = [x for x in doms if x not in {d.name for d in domains}]
        if unknown:
            raise ValueError(f"key 'archives[{i}].domains': unknown domain(s) {', '.join(unknown)}")
        sha = a.get("sha256")
        if sha is not None and not re.fullmatch(r"[0-9a-f]{64}", str(sha)):
            raise ValueError(f"key 'archives[{i}].sha256' must be 64 lower-case hex digits, got {sha!r}")
        extras = _names(a["extras"], f"archives[{i}].extras") if a.get("extras") is not None else tuple(
            lst for d, lst in label_lists if d in doms)  # by default an archive brings its domains' label lists
        archives.append(Archive(str(a["file"]), _names(a.get("urls") or (), f"archives[{i}].urls"), doms, sha,
                                _count(a.get("size"), f"archives[{i}].size"),
                                _names(a.get("manual_urls") or (), f"archives[{i}].manual_urls"), extras,
                                str(a.get("id", ""))))
    classes, partial = common["classes"], _names(raw.get("partial_classes") or (), "partial_classes")
    if not re.fullmatch(r"[A-Za-z0-9_]+", path.parent.name):
        raise ValueError(f"the folder name {path.parent.name!r} is the dataset's name: letters, digits and '_' only "
                         f"(it names run folders and Snakemake targets)")
    splits = _names(raw.get("splits") or (("full", "partial") if partial else ("full",)), "splits")
    bad = [x for x in splits if not re.fullmatch(r"full|partial|first[1-9]\d*|n[1-9]\d*", x)]
    if bad or ("partial" in splits and not partial):
        raise ValueError(f"key 'splits': {bad[0] if bad else 'partial'!r} is no split" + (
            "; splits are full, partial, first<N> or n<K>" if bad else " without 'partial_classes'"))
    if not isinstance(raw.get("cache", False), bool):
        raise ValueError(f"key 'cache' must be true or false, got {raw['cache']!r}")
    return DatasetSpec(domains=tuple(domains), title=raw.get("title", f"user images ({path})"),
                       homepage=str(raw.get("homepage", "")), layout=layout, label_lists=tuple(label_lists),
                       list_paths="root", archives=tuple(archives), splits=splits,
                       images_per_class=_count(raw.get("images_per_class"), "images_per_class"),
                       classes_from="" if classes else ("lists" if layout == "list_files" else "folders"),
                       partial_names=() if classes else partial,
                       cache_images=bool(raw.get("cache", False)), eval_lists=tuple(eval_lists), **common)


# ----------------------------------------------------------------------------------------------- placed by hand
def bare_folder(spec: DatasetSpec, domain: Domain) -> str:
    """The folder of a class-folder domain declared as ``<d>/images`` without that level (``<d>``), else ""."""
    parent, _, last = domain.folder.rpartition("/")
    ok = spec.kind == "images" and spec.layout == "class_folders" and last == "images" and parent
    return parent if ok else ""


def domain_folder(spec: DatasetSpec, domain: Domain, root: Path) -> str:
    """Where the images of ``domain`` are under ``root`` (relative to it): its declared folder (``amazon/images``,
    holding one folder per class), or for a domain declared as ``<d>/images``, ``<d>`` itself when its class folders
    were placed there without the ``images/`` level (``amazon/back_pack/frame_0001.jpg``, how other tools extract
    Office-31). The declared folder when neither is in place (what errors name)."""
    root, bare = Path(root), bare_folder(spec, domain)
    if not bare or (root / domain.folder).exists():
        return domain.folder
    base = root / bare
    return bare if base.is_dir() and any((base / c).is_dir() for c in spec.classes) else domain.folder


def placed_twice(spec: DatasetSpec, domain: Domain, root: Path) -> bool:
    """Whether a domain declared as ``<d>/images`` is under ``root`` in both accepted layouts at once: its declared
    folder exists and ``<d>/`` holds class folders too (which of the two holds the images is then anyone's guess)."""
    root, bare = Path(root), bare_folder(spec, domain)
    return bool(bare) and (root / domain.folder).is_dir() and any((root / bare / c).is_dir() for c in spec.classes)


def declared_path(spec: DatasetSpec, domain: Domain, rel: str) -> str:
    """``rel`` (an image of ``domain``, relative to the data root) as the declared layout names it: a path of the
    layout without ``images/`` (``amazon/back_pack/x.jpg``) gets the level back (``amazon/images/back_pack/x.jpg``);
    any other path is returned as it is. Manifests hash these names, so a lock holds for both layouts."""
    bare = bare_folder(spec, domain)
    if bare and not rel.startswith(domain.folder + "/") and rel.startswith(bare + "/"):
        return f"{domain.folder}/{rel[len(bare) + 1:]}"
    return rel


def placed_by_hand(spec: DatasetSpec, domains) -> str:
    """The folders ``domains`` may be placed in by hand under the data root, e.g. ``amazon/images/<class>/ or
    amazon/<class>/`` (both accepted layouts, :func:`domain_folder`) for each domain."""
    def forms(d):
        if spec.kind != "images" or spec.layout != "class_folders":
            return d.folder
        return f"{d.folder}/<class>/" + (f" or {bare_folder(spec, d)}/<class>/" if bare_folder(spec, d) else "")
    return ", ".join(forms(d) for d in domains)



def as_dict(spec: DatasetSpec) -> dict:
    """A JSON-friendly view of a spec (for ``python -m dmp data list --json``)."""
    return dataclasses.asdict(spec)
