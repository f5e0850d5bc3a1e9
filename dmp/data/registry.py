"""The dataset registry: what each dataset is (domains, classes, expected counts, archives and mirrors),
where it lives on disk, its committed image lists and its content version.

Built-in entries are declared below. Users add "bring your own features" datasets without touching the code
by writing ``datasets/<name>/dataset.yaml`` (see :func:`spec_from_yaml` and docs/datasets.md);
``python -m dmp data extract-features`` writes such a file.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..io import sha256_file

PROJECT = Path(__file__).resolve().parents[2]
DATASETS_DIR = PROJECT / "datasets"
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff")


class DatasetMissingError(FileNotFoundError):
    """A dataset (or one of its files) is not where the pipeline reads it."""


@dataclass(frozen=True)
class Domain:
    """One domain. ``folder``: path of the domain inside :func:`data_root` (images: the folder holding one
    sub-folder per class, or the flat image folder for list-labelled layouts; features/arrays: the file).
    ``x_key``/``y_key``: array names inside a features file (``.npz``/``.mat``); for ``.npy`` features
    ``y_key`` is the path of the labels ``.npy`` relative to the root."""
    name: str
    short: str
    folder: str
    count: int | None = None
    x_key: str = "X"
    y_key: str = "y"


@dataclass(frozen=True)
class Archive:
    """One downloadable file. All ``urls`` must serve the same bytes (mirrors); ``manual_urls`` are pages that
    need a browser (Google Drive, MEGA, ...), shown to the user when nothing could be downloaded.
    ``domains``: the domains it provides; ``aliases``: folder names used inside the archive that differ from
    the registry's (``("Real World", "Real_World")``); ``extras``: files/folders kept besides the domains."""
    filename: str
    urls: tuple[str, ...]
    domains: tuple[str, ...]
    sha256: str | None = None
    manual_urls: tuple[str, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()
    extras: tuple[str, ...] = ()


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset. ``kind``: "images" (image files + committed lists), "features" (per-domain
    feature files) or "arrays" (small images stored as arrays). ``layout`` (images): "class_folders"
    (``<domain folder>/<class>/<image>``) or "list_files" (labels read from ``label_lists``, a tuple of
    ``(domain, path)`` relative to the root, lines ``path label``). ``splits``: the lists ``prepare`` writes."""
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

    def domain(self, name: str) -> Domain:
        """The domain called ``name`` (config id) or with paper letter ``name``."""
        for d in self.domains:
            if name in (d.name, d.short):
                return d
        raise KeyError(f"dataset {self.name!r} has no domain {name!r}; domains: "
                       f"{', '.join(f'{d.name} ({d.short})' for d in self.domains)}")


def _domains(*rows) -> tuple[Domain, ...]:
    return tuple(Domain(*r) for r in rows)


OFFICE31_CLASSES = (
    "back_pack", "bike", "bike_helmet", "bookcase", "bottle", "calculator", "desk_chair", "desk_lamp",
    "desktop_computer", "file_cabinet", "headphones", "keyboard", "laptop_computer", "letter_tray",
    "mobile_phone", "monitor", "mouse", "mug", "paper_notebook", "pen", "phone", "printer", "projector",
    "punchers", "ring_binder", "ruler", "scissors", "speaker", "stapler", "tape_dispenser", "trash_can")
OFFICEHOME_CLASSES = tuple(sorted((
    "Alarm_Clock", "Backpack", "Batteries", "Bed", "Bike", "Bottle", "Bucket", "Calculator", "Calendar",
    "Candles", "Chair", "Clipboards", "Computer", "Couch", "Curtains", "Desk_Lamp", "Drill", "Eraser",
    "Exit_Sign", "Fan", "File_Cabinet", "Flipflops", "Flowers", "Folder", "Fork", "Glasses", "Hammer",
    "Helmet", "Kettle", "Keyboard", "Knives", "Lamp_Shade", "Laptop", "Marker", "Monitor", "Mop", "Mouse",
    "Mug", "Notebook", "Oven", "Pan", "Paper_Clip", "Pen", "Pencil", "Postit_Notes", "Printer", "Push_Pin",
    "Radio", "Refrigerator", "Ruler", "Scissors", "Screwdriver", "Shelf", "Sink", "Sneakers", "Soda",
    "Speaker", "Spoon", "TV", "Table", "Telephone", "ToothBrush", "Toys", "Trash_Can", "Webcam")))
IMAGECLEF_CLASSES = ("aeroplane", "bike", "bird", "boat", "bottle", "bus", "car", "dog", "horse", "monitor",
                     "motorbike", "people")
VISDA_CLASSES = ("aeroplane", "bicycle", "bus", "car", "horse", "knife", "motorcycle", "person", "plant",
                 "skateboard", "train", "truck")
# PADA protocol: the 10 Office-31 classes shared with Caltech-256.
OFFICE31_PARTIAL = ("back_pack", "bike", "calculator", "headphones", "keyboard", "laptop_computer", "monitor",
                    "mouse", "mug", "projector")

_TSINGHUA = "https://cloud.tsinghua.edu.cn/f/{}/?dl=1"  # Transfer-Learning-Library (thuml) re-packaging


def _builtin() -> list[DatasetSpec]:
    from .demo import DEMO_CLASSES, DEMO_DOMAINS, DEMO_PER_CLASS

    o31 = [("amazon", "A", "amazon/images", 2817), ("dslr", "D", "dslr/images", 498),
           ("webcam", "W", "webcam/images", 795)]
    o31_drive = "https://drive.google.com/file/d/0B4IapRTv9pJ1WGZVd1VDMmhwdlE"
    o31_tgz = {"amazon": ("ec12dfcddade43ab8101", "05640442cd904c39ad60"),
               "dslr": ("a41d818ae2f34da7bb32", "a069d889628d4b468c32"),
               "webcam": ("8a41009a166e4131adcd", "4c4afebf51384cf1aa95")}
    oh_tgz = {"Art": "4691878067d04755beab", "Clipart": "0d41e7da4558408ea5aa",
              "Product": "76186deacd7c4fa0a679", "Real_World": "dee961894cc64b1da1d7"}
    return [
        DatasetSpec(
            "office31", "images", _domains(*o31), OFFICE31_CLASSES,
            tuple(OFFICE31_CLASSES.index(c) for c in OFFICE31_PARTIAL),
            archives=tuple(Archive(f"{d}.tgz", tuple(_TSINGHUA.format(k) for k in keys), (d,))
                           for d, keys in o31_tgz.items()) + (
                Archive("domain_adaptation_images.tar.gz", (), ("amazon", "dslr", "webcam"),
                        manual_urls=(o31_drive,)),
                Archive("OFFICE31.zip", ("https://wjdcloud.blob.core.windows.net/dataset/OFFICE31.zip",),
                        ("amazon", "dslr", "webcam"),
                        manual_urls=("https://mega.nz/file/dSpjyCwR#9ctB4q1RIE65a4NoJy0ox3gngh15cJqKq1XpOILJt9s",))),
            title="Office-31 (Saenko et al., ECCV 2010)",
            homepage="https://faculty.cc.gatech.edu/~judy/domainadapt/",
            splits=("full", "partial") + tuple(f"first{n}" for n in range(10, 32))),
        DatasetSpec(
            "officehome", "images",
            _domains(("Art", "Ar", "Art", 2427), ("Clipart", "Cl", "Clipart", 4365),
                     ("Product", "Pr", "Product", 4439), ("Real_World", "Rw", "Real_World", 4357)),
            OFFICEHOME_CLASSES, tuple(range(25)),
            archives=tuple(Archive(f"{d}.tgz", (_TSINGHUA.format(k),), (d,), aliases=(("Real World", d),))
                           for d, k in oh_tgz.items()) + (
                Archive("OfficeHomeDataset_10072016.zip", (), ("Art", "Clipart", "Product", "Real_World"),
                        manual_urls=("https://www.hemanthdv.org/officeHomeDataset.html",),
                        aliases=(("Real World", "Real_World"),)),),
            title="Office-Home (Venkateswara et al., CVPR 2017)",
            homepage="https://www.hemanthdv.org/officeHomeDataset.html"),
        DatasetSpec(
            "imageclef", "images",
            _domains(("c", "C", "c", 600), ("i", "I", "i", 600), ("p", "P", "p", 600), ("b", "B", "b", 600)),
            IMAGECLEF_CLASSES, tuple(range(6)),
            archives=(Archive("image_CLEF.zip", (), ("c", "i", "p", "b"), extras=("list",),
                              manual_urls=(
                                  "https://mega.nz/#!AKYhEYaY!mSwEK3_9SLVSqXXNzUxNWpQymlH10vcEhuC8fbOIAwk",
                                  "https://pan.baidu.com/s/1-06SNBiG1sfwVfPwrscwGw (code xftq)")),),
            title="ImageCLEF-DA 2014 (Long et al. re-packaging)", homepage="https://www.imageclef.org/2014/adaptation",
            layout="list_files", label_lists=tuple((d, f"list/{d}List.txt") for d in "cipb"),
            images_per_class=50, splits=("full", "partial", "n10", "n30", "n50")),
        DatasetSpec(
            "visda2017", "images",
            _domains(("synthetic", "S", "train", 152397), ("real", "R", "validation", 55388)),
            VISDA_CLASSES, tuple(range(6)),
            archives=(
                Archive("train.tar", ("http://csr.bu.edu/ftp/visda17/clf/train.tar",
                                      _TSINGHUA.format("c5f3ce59139144ec8221")), ("synthetic",),
                        extras=("train/image_list.txt",)),
                Archive("validation.tar", ("http://csr.bu.edu/ftp/visda17/clf/validation.tar",
                                           _TSINGHUA.format("da70e4b1cf514ecea562")), ("real",),
                        extras=("validation/image_list.txt",))),
            title="VisDA-2017 classification (Peng et al.)", homepage="https://ai.bu.edu/visda-2017/"),
        DatasetSpec(
            "demo", "images", _domains(*[(n, s, f"{n}/images", DEMO_PER_CLASS * len(DEMO_CLASSES))
                                         for n, s in DEMO_DOMAINS]),
            DEMO_CLASSES, tuple(range(len(DEMO_CLASSES) // 2)), title="Generated shapes (python -m dmp data demo)",
            images_per_class=DEMO_PER_CLASS, splits=("full", "partial", "n10"), generated=True),
        DatasetSpec(
            "office_caltech10", "features",
            tuple(Domain(d, d[0].upper(), f"{d}.mat", n, "fts", "labels")
                  for d, n in (("amazon", 958), ("dslr", 157), ("webcam", 295))),
            ("backpack", "bike", "calculator", "headphones", "keyboard", "laptop", "monitor", "mouse", "mug",
             "projector"),
            title="Office-Caltech10 GoogLeNet pool5 features (bring-your-own-features example)",
            default_root="../shared/data/office_caltech10_googlenet", label_offset=-1, splits=("full",)),
        DatasetSpec(
            "mnist_usps", "arrays",
            (Domain("mnist", "M", "MNIST_vs_USPS.mat", 2000, "Xs", "Ys"),
             Domain("usps", "U", "MNIST_vs_USPS.mat", 1800, "Xt", "Yt")),
            tuple(str(i) for i in range(10)), title="MNIST->USPS 16x16 digits (JDA protocol, v7.3 .mat)",
            default_root="../shared/data/mnist_usps", label_offset=-1, sample_shape=(1, 16, 16),
            column_major=True, splits=("full",)),
    ]


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


def _all_specs() -> dict[str, DatasetSpec]:
    specs = {s.name: s for s in _builtin()}
    for yml in sorted(DATASETS_DIR.glob("*/dataset.yaml")):
        spec = spec_from_yaml(yml)
        if spec.name in specs:
            raise ValueError(f"{yml}: dataset name {spec.name!r} is already built in")
        specs[spec.name] = spec
    return specs


def dataset_names() -> list[str]:
    """Names of all registered datasets (built-in and ``datasets/*/dataset.yaml``)."""
    return list(_all_specs())


def get_dataset(name: str) -> DatasetSpec:
    """The registered dataset ``name``; an unknown name raises KeyError listing the known ones."""
    specs = _all_specs()
    if name not in specs:
        raise KeyError(f"unknown dataset {name!r}; known datasets: {', '.join(specs)}")
    return specs[name]


def dataset_dir(name: str) -> Path:
    """The committed folder of a dataset: ``datasets/<name>`` (lists, lock file)."""
    return DATASETS_DIR / name


def data_root(name: str) -> Path:
    """Where the dataset's files live: ``$DMP_DATA_DIR/<name>`` if DMP_DATA_DIR is set, else the entry's
    ``default_root`` (relative to the project) if it has one, else ``datasets/<name>/data``."""
    spec = get_dataset(name)
    env = os.environ.get("DMP_DATA_DIR")
    if env:
        return Path(env).expanduser().resolve() / name
    if spec.default_root:
        return (PROJECT / spec.default_root).resolve()
    return dataset_dir(name) / "data"


def download_dir(name: str) -> Path:
    """Where archives are downloaded (and may be placed by hand): ``datasets/<name>/downloads``, or
    ``$DMP_DATA_DIR/downloads/<name>``."""
    get_dataset(name)
    env = os.environ.get("DMP_DATA_DIR")
    return Path(env).expanduser().resolve() / "downloads" / name if env else dataset_dir(name) / "downloads"


def lock_path(name: str) -> Path:
    """The committed lock file recording archive checksums and per-class counts seen at the first fetch."""
    return dataset_dir(name) / "lock.json"


def read_lock(name: str) -> dict:
    """The lock file's content (``{"archives": {...}, "counts": {...}}``; empty if absent)."""
    path = lock_path(name)
    lock = json.loads(path.read_text()) if path.is_file() else {}
    lock.setdefault("archives", {})
    lock.setdefault("counts", {})
    return lock


def lists_dir(name: str) -> Path:
    """Committed image lists: ``datasets/<name>/lists/<domain>_<split>.txt``."""
    return dataset_dir(name) / "lists"


_SPLIT_RE = re.compile(r"^(full|partial|first\d+|n\d+)$")


def list_file(name: str, domain: str, split: str = "full") -> Path:
    """The committed list of ``split`` of ``domain`` (lines ``relative/path label``, relative to
    :func:`data_root`). Splits: full, partial, first<N> (classes 0..N-1), n<K> (K images per class, seeded)."""
    spec = get_dataset(name)
    if spec.kind != "images":
        raise ValueError(f"dataset {name!r} is of kind {spec.kind!r}: it has no image lists, use load_arrays")
    dom = spec.domain(domain)
    if not _SPLIT_RE.match(split):
        raise ValueError(f"unknown split {split!r}; splits are full, partial, first<N> or n<K>")
    path = lists_dir(name) / f"{dom.name}_{split}.txt"
    if not path.is_file():
        have = sorted(p.stem.split("_", 1)[1] for p in lists_dir(name).glob(f"{dom.name}_*.txt"))
        hint = (f"python -m dmp data prepare {name}" + ("" if split in spec.splits else f" --splits {split}"))
        raise DatasetMissingError(
            f"split list {path} does not exist (dataset {name!r}, domain {dom.name!r}, split {split!r}); "
            f"existing splits: {', '.join(have) or 'none'}. Create it with `{hint}`"
            + ("" if have else f" after fetching the data (`python -m dmp data fetch {name}`)"))
    return path


def require_dataset(name: str) -> Path:
    """Check that the dataset's files are in place and return :func:`data_root`; otherwise raise
    :class:`DatasetMissingError` naming what is missing, the command to get it and where to put it by hand."""
    spec = get_dataset(name)
    root = data_root(name)
    missing = [d for d in spec.domains if not (root / d.folder).exists()]
    if not missing:
        return root
    what = ", ".join(f"{root / d.folder} (domain {d.name})" for d in missing)
    if spec.kind != "images":
        how = (f"Place the files there, or point DMP_DATA_DIR at a folder holding {name}/ "
               f"(each domain's file: {', '.join(d.folder for d in spec.domains)}).")
    elif spec.generated:
        how = f"Generate it with `python -m dmp data demo` (or `dvc repro {name}`)."
    else:
        how = (f"Fetch it with `python -m dmp data fetch {name}` (or `dvc pull` / `dvc repro prepare@{name}`), "
               f"or download one of the archives ({', '.join(a.filename for a in spec.archives)}) by hand into "
               f"{download_dir(name)}/ and rerun the fetch, or place the extracted domain folders under {root}/.")
    raise DatasetMissingError(f"dataset {name!r} is not in place: missing {what}. {how}")


def dataset_version(name: str) -> str:
    """A short content hash of the dataset: its committed lists plus the pinned/locked archive checksums
    (images); the content of its files (features/arrays)."""
    spec = get_dataset(name)
    h = hashlib.sha256(name.encode())
    if spec.kind == "images":
        for path in sorted(lists_dir(name).glob("*.txt")):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
        lock = read_lock(name)
        for a in spec.archives:
            sha = a.sha256 or lock["archives"].get(a.filename, {}).get("sha256", "")
            h.update(f"{a.filename}={sha}\n".encode())
        h.update(json.dumps(lock["counts"], sort_keys=True).encode())
    else:
        root = require_dataset(name)
        for f in sorted({d.folder for d in spec.domains}):
            h.update(f.encode() + sha256_file(root / f).encode())
    return h.hexdigest()[:12]


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


def load_arrays(name: str, domain: str, split: str = "full") -> tuple[np.ndarray, np.ndarray]:
    """Features (``[N, D]``) or small images (``[N, C, H, W]``) of a features/arrays dataset as float32, with
    int64 labels indexing ``spec.classes``; ``split`` as in :func:`list_file` (derived from the labels)."""
    from .splits import select

    spec = get_dataset(name)
    if spec.kind == "images":
        raise ValueError(f"dataset {name!r} holds images: read it through list_file")
    dom = spec.domain(domain)
    root = require_dataset(name)
    path = root / dom.folder
    x = _read_matrix(path, dom.x_key)
    y_path = root / dom.y_key if path.suffix.lower() == ".npy" else path
    y = np.asarray(_read_matrix(y_path, dom.y_key)).reshape(-1).astype(np.int64) + spec.label_offset
    if x.shape[0] != y.shape[0] and x.ndim == 2 and x.shape[1] == y.shape[0]:
        x = x.T  # stored one sample per column
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{path}: {x.shape[0]} samples in {dom.x_key!r} but {y.shape[0]} labels")
    if y.min() < 0 or y.max() >= len(spec.classes):
        raise ValueError(f"{path}: labels (after offset {spec.label_offset}) span {y.min()}..{y.max()}, "
                         f"expected 0..{len(spec.classes) - 1}")
    x = np.asarray(x, dtype=np.float32)
    if spec.sample_shape:
        shape = spec.sample_shape
        x = x.reshape(len(x), *shape[::-1]).transpose(0, *range(len(shape), 0, -1)) if spec.column_major \
            else x.reshape(len(x), *shape)
    if not np.isfinite(x).all():
        raise ValueError(f"{path}: {dom.x_key!r} contains NaN or infinite values")
    keep = select(y, split, spec)
    return np.ascontiguousarray(x[keep]), y[keep]


def as_dict(spec: DatasetSpec) -> dict:
    """A JSON-friendly view of a spec (for ``python -m dmp data list --json``)."""
    return dataclasses.asdict(spec)
