"""The built-in datasets, declared as data: one :class:`~dmp.data.spec.DatasetSpec` each (domains, classes,
expected counts, archives and their mirrors). Facts and sources: docs/datasets.md. :func:`read_declaration` reads
a user declaration beside them (or says why it cannot).

Mirrors of one archive serve the same bytes; a different packaging of the same images is another archive (its
own checksum in the lock file). Whatever the packaging, the fetched content is checked by per-domain and
per-class counts and a per-file manifest hash (:mod:`dmp.data.verify`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .demo import DEMO_CLASSES, DEMO_DOMAINS, DEMO_PER_CLASS
from .spec import Archive, DatasetSpec, Domain, gdrive, spec_from_yaml

MB, GB = 10 ** 6, 10 ** 9


def _tsinghua(key: str) -> str:  # Transfer-Learning-Library (thuml) re-packaging, links current since 2023
    return f"https://cloud.tsinghua.edu.cn/f/{key}/?dl=1"


_WJD = "https://wjdcloud.blob.core.windows.net/dataset/"  # jindongwang/transferlearning's Azure blob

OFFICE31_CLASSES = (
    "back_pack", "bike", "bike_helmet", "bookcase", "bottle", "calculator", "desk_chair", "desk_lamp",
    "desktop_computer", "file_cabinet", "headphones", "keyboard", "laptop_computer", "letter_tray",
    "mobile_phone", "monitor", "mouse", "mug", "paper_notebook", "pen", "phone", "printer", "projector",
    "punchers", "ring_binder", "ruler", "scissors", "speaker", "stapler", "tape_dispenser", "trash_can")
# PADA protocol: the 10 Office-31 classes shared with Caltech-256.
OFFICE31_PARTIAL = ("back_pack", "bike", "calculator", "headphones", "keyboard", "laptop_computer", "monitor",
                    "mouse", "mug", "projector")
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
OFFICEHOME_PAGE = "https://www.hemanthdv.org/officeHomeDataset.html"

OFFICE31 = DatasetSpec(
    name="office31", kind="images", title="Office-31 (Saenko et al., ECCV 2010)",
    homepage="https://faculty.cc.gatech.edu/~judy/domainadapt/",
    classes=OFFICE31_CLASSES, partial_classes=tuple(OFFICE31_CLASSES.index(c) for c in OFFICE31_PARTIAL),
    domains=(Domain("amazon", "A", "amazon/images", 2817), Domain("dslr", "D", "dslr/images", 498),
             Domain("webcam", "W", "webcam/images", 795)),
    archives=(
        Archive("amazon.tgz", (_tsinghua("ec12dfcddade43ab8101"),), ("amazon",), size=80 * MB),
        Archive("dslr.tgz", (_tsinghua("a41d818ae2f34da7bb32"),), ("dslr",), size=80 * MB),
        Archive("webcam.tgz", (_tsinghua("8a41009a166e4131adcd"),), ("webcam",), size=80 * MB),
        Archive("domain_adaptation_images.tar.gz", (gdrive("0B4IapRTv9pJ1WGZVd1VDMmhwdlE"),),
                ("amazon", "dslr", "webcam"), size=80 * MB),
        Archive("OFFICE31.zip", (_WJD + "OFFICE31.zip",), ("amazon", "dslr", "webcam"), size=80 * MB,
                manual_urls=("https://mega.nz/file/dSpjyCwR#9ctB4q1RIE65a4NoJy0ox3gngh15cJqKq1XpOILJt9s",))),
    splits=("full", "partial") + tuple(f"first{n}" for n in range(10, 32)))

OFFICEHOME = DatasetSpec(
    name="officehome", kind="images", title="Office-Home (Venkateswara et al., CVPR 2017)",
    homepage=OFFICEHOME_PAGE, release="2017 release (15,588 images; the paper's)",
    classes=OFFICEHOME_CLASSES, partial_classes=tuple(range(25)),
    domains=(Domain("Art", "Ar", "Art", 2427), Domain("Clipart", "Cl", "Clipart", 4365),
             Domain("Product", "Pr", "Product", 4439),
             Domain("Real_World", "Rw", "Real_World", 4357, aliases=("Real World", "RealWorld"))),
    archives=(
        Archive("Art.tgz", (_tsinghua("4691878067d04755beab"),), ("Art",), size=1500 * MB),
        Archive("Clipart.tgz", (_tsinghua("0d41e7da4558408ea5aa"),), ("Clipart",), size=1500 * MB),
        Archive("Product.tgz", (_tsinghua("76186deacd7c4fa0a679"),), ("Product",), size=1500 * MB),
        Archive("Real_World.tgz", (_tsinghua("dee961894cc64b1da1d7"),), ("Real_World",), size=1500 * MB),
        Archive("OfficeHomeDataset_10072016.zip",
                (gdrive("0B81rNlvomiwed0V1YUxQdC1uOTg"), gdrive("1uY0pj7oFsjMxRwaD3Sxy0jgel0fsYXLC")),
                ("Art", "Clipart", "Product", "Real_World"), size=1500 * MB, manual_urls=(OFFICEHOME_PAGE,)),
        Archive("OfficeHome.zip", (_WJD + "OfficeHome.zip",), ("Art", "Clipart", "Product", "Real_World"),
                size=1500 * MB)))

OFFICEHOME_15913 = DatasetSpec(
    name="officehome_15913", kind="images", variant_of="officehome",
    title="Office-Home, current official release (not the paper's)", homepage=OFFICEHOME_PAGE,
    release="current official release (its ImageInfo.csv lists 15,913 images)",
    classes=OFFICEHOME_CLASSES, partial_classes=tuple(range(25)),
    domains=(Domain("Art", "Ar", "Art", 2496), Domain("Clipart", "Cl", "Clipart", 4464),
             Domain("Product", "Pr", "Product", 4503),
             Domain("Real_World", "Rw", "Real_World", 4450, aliases=("Real World", "RealWorld"))),
    archives=(Archive("OfficeHomeDataset.zip", (), ("Art", "Clipart", "Product", "Real_World"), size=1500 * MB,
                      manual_urls=(OFFICEHOME_PAGE,)),))

IMAGECLEF = DatasetSpec(
    name="imageclef", kind="images", title="ImageCLEF-DA 2014 (Long et al. re-packaging)",
    homepage="https://www.imageclef.org/2014/adaptation",
    classes=IMAGECLEF_CLASSES, partial_classes=tuple(range(6)),
    domains=tuple(Domain(d, d.upper(), d, 600, class_counts=(50,) * 12) for d in "cipb"),
    archives=(Archive("image_CLEF.zip", (_WJD + "image_CLEF.zip", gdrive("0B9kJH0-rJ2uRS3JILThaQXJhQlk")),
                      ("c", "i", "p", "b"), size=300 * MB, extras=("list",),
                      manual_urls=("https://mega.nz/#!AKYhEYaY!mSwEK3_9SLVSqXXNzUxNWpQymlH10vcEhuC8fbOIAwk",
                                   "https://pan.baidu.com/s/1-06SNBiG1sfwVfPwrscwGw (code xftq)")),),
    layout="list_files", label_lists=tuple((d, f"list/{d}List.txt") for d in "cipb"),
    images_per_class=50, splits=("full", "partial", "n10", "n30", "n50"))

VISDA2017 = DatasetSpec(
    name="visda2017", kind="images", title="VisDA-2017 classification (Peng et al.)",
    homepage="https://ai.bu.edu/visda-2017/",
    classes=VISDA_CLASSES, partial_classes=tuple(range(6)),
    domains=(Domain("synthetic", "S", "train", 152397, aliases=("synthetic",), class_counts=(
                 14309, 7365, 16640, 12800, 9512, 14240, 17360, 12160, 10731, 11680, 16000, 9600)),
             Domain("real", "R", "validation", 55388, aliases=("real",), class_counts=(
                 3646, 3475, 4690, 10401, 4691, 2075, 5796, 4000, 4549, 2281, 4236, 5548))),
    archives=(
        Archive("train.tar", ("http://csr.bu.edu/ftp/visda17/clf/train.tar", gdrive("0BwcIeDbwQ0XmdENwQ3R4TUVTMHc"),
                              _tsinghua("c5f3ce59139144ec8221")), ("synthetic",), size=8 * GB,
                extras=("train/image_list.txt",)),
        Archive("validation.tar", ("http://csr.bu.edu/ftp/visda17/clf/validation.tar",
                                   gdrive("0BwcIeDbwQ0XmUEVJRjl4Tkd4bTA"), _tsinghua("da70e4b1cf514ecea562")),
                ("real",), size=3 * GB, extras=("validation/image_list.txt",))))

DEMO = DatasetSpec(
    name="demo", kind="images", title="Generated shapes (python -m dmp data demo)", generated=True,
    classes=DEMO_CLASSES, partial_classes=tuple(range(len(DEMO_CLASSES) // 2)),
    domains=tuple(Domain(n, s, f"{n}/images", DEMO_PER_CLASS * len(DEMO_CLASSES)) for n, s in DEMO_DOMAINS),
    images_per_class=DEMO_PER_CLASS, splits=("full", "partial", "n10"))

def _github(repo: str, commit: str, path: str) -> tuple[str, str]:
    """A file of a public GitHub repository at a pinned commit: raw.githubusercontent.com and the jsDelivr CDN
    (which serves the same bytes of the same commit)."""
    return (f"https://raw.githubusercontent.com/{repo}/{commit}/{path}",
            f"https://cdn.jsdelivr.net/gh/{repo}@{commit}/{path}")


_OC10 = ("redhat12345/OfficeCaltechDomainAdaptation", "74f70487e1b975d1af05bb9a2ecfbf14a7000080")
_OC10_FILES = (  # domain, samples, sha256, bytes (of the files at that commit)
    ("amazon", 958, "bae9ee6e8f7ca305120dd970f2c90471f4ef8dda4cb2ad2404c38bb26cb56ba9", 3931880),
    ("dslr", 157, "5f7c6211581f846b7b5534429fb62bfb7e490e88aacfc8bee97eb0b0224dbd89", 644576),
    ("webcam", 295, "57774bbdf97433b5fb5a6333e302f077444c069537138b60ef417f48ee65d296", 1210928))
OFFICE_CALTECH10 = DatasetSpec(
    name="office_caltech10", kind="features",
    title="Office-Caltech10 GoogLeNet pool5 features (bring-your-own-features example)",
    homepage=f"https://github.com/{_OC10[0]}",
    classes=("backpack", "bike", "calculator", "headphones", "keyboard", "laptop", "monitor", "mouse", "mug",
             "projector"),
    domains=tuple(Domain(d, d[0].upper(), f"{d}.mat", n, "fts", "labels") for d, n, _, _ in _OC10_FILES),
    archives=tuple(Archive(f"{d}.mat", _github(*_OC10, f"features/GoogleNet1024/{d}.mat"), (d,), sha256=sha,
                           size=size) for d, _, sha, size in _OC10_FILES),
    label_offset=-1, splits=("full",))

_JPDA = ("chamwen/JPDA", "b056e5eca625fc480aa605242348809f9199d5f8")
MNIST_USPS = DatasetSpec(
    name="mnist_usps", kind="arrays", title="MNIST->USPS 16x16 digits (JDA protocol, v7.3 .mat)",
    homepage=f"https://github.com/{_JPDA[0]}",
    classes=tuple(str(i) for i in range(10)),
    domains=(Domain("mnist", "M", "MNIST_vs_USPS.mat", 2000, "Xs", "Ys"),
             Domain("usps", "U", "MNIST_vs_USPS.mat", 1800, "Xt", "Yt")),
    archives=(Archive("MNIST_vs_USPS.mat", _github(*_JPDA, "data/MNIST_vs_USPS.mat"), ("mnist", "usps"),
                      sha256="7fbb67f14af7236e18a38dc8a0a836142361e9e720e4b763a5e2db511d306d6c", size=3044944),),
    label_offset=-1, sample_shape=(1, 16, 16), column_major=True, splits=("full",))

# Datasets whose published label lists name some images twice, under two labels (ImageCLEF-DA's p list: nine
# images); their lists keep every entry, as published. Any other list naming a path twice is refused.
PUBLISHED_DUPLICATES = ("imageclef",)

# The order of the classes in a dataset's published image lists, where it is not the label order: the full lists
# name each class's images (sorted by name) class after class in this order; labels stay the index in ``classes``.
# Office-31: Transfer-Learning-Library's image_list/{amazon,dslr,webcam}.txt, the lists of thuml's Xlearn/CDAN
# (pytorch/data/office/amazon_list.txt, ...) without their path prefix, start "amazon/images/calculator/frame_0001.jpg
# 5" and give every domain its classes in this order, frame_0001 ... frame_<n> within each.
PUBLISHED_ORDER = {"office31": (
    "calculator", "ring_binder", "printer", "keyboard", "scissors", "laptop_computer", "mouse", "monitor", "mug",
    "tape_dispenser", "pen", "bike", "punchers", "back_pack", "desktop_computer", "speaker", "mobile_phone",
    "paper_notebook", "ruler", "letter_tray", "file_cabinet", "phone", "bookcase", "projector", "stapler",
    "trash_can", "bike_helmet", "headphones", "desk_lamp", "desk_chair", "bottle")}

BUILTIN = (OFFICE31, OFFICEHOME, IMAGECLEF, VISDA2017, DEMO, OFFICE_CALTECH10, MNIST_USPS, OFFICEHOME_15913)
BUILTIN_NAMES = frozenset(s.name for s in BUILTIN)


@dataclass(frozen=True)
class BrokenDeclaration:
    """A ``datasets/<name>/dataset.yaml`` that cannot be read: ``reason`` is its one-line error, raised (as
    ValueError) only when the dataset is used; ``data list`` shows it."""
    name: str
    path: Path
    reason: str


def read_declaration(yml: Path) -> DatasetSpec | BrokenDeclaration:
    """The spec of one user declaration, or what is wrong with it (never raises: one bad file must not break the
    other datasets)."""
    try:
        spec = spec_from_yaml(yml)
    except Exception as exc:  # noqa: BLE001 (YAML, type and value errors alike: reported when the dataset is used)
        text = " ".join(str(exc)[:2000].split())  # an error may quote a huge value: one line, bounded
        text = text if str(yml) in text else f"{yml}: {exc.__class__.__name__}: {text}"
        return BrokenDeclaration(yml.parent.name, yml, text if len(text) <= 300 else text[:297] + "...")
    if spec.name in BUILTIN_NAMES:
        return BrokenDeclaration(spec.name, yml, f"{yml}: dataset name {spec.name!r} is already built in (rename "
                                                 f"the folder)")
    return spec
