"""Bring your own image dataset: ``kind: images`` in ``<declarations>/<name>/dataset.yaml``, declared
outside the checkout (DMP_DATASETS_DIR), with domains as class folders (DomainBed's layout) or as label lists
(``path label`` lines, Transfer-Learning-Library's / DomainNet's layout): fetch, lock, lists, train, a table,
extract-features; every bad declaration a one-line error naming the file and key."""
from __future__ import annotations

import hashlib
import io
import json
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from data_fixtures import isolated, server  # noqa: F401 (fixtures)
from PIL import Image

from dmp.cli import build_parser
from dmp.cli import main as dmp_main
from dmp.data import registry
from tests import hang_guard

ROOT = Path(__file__).resolve().parents[1]

# unbalanced on purpose: the counts below are what the lock and the lists must hold
FOLDER_COUNTS = {"sketch": {"cat": 3, "dog": 5, "The_Eiffel_Tower": 2},
                 "photo": {"cat": 4, "dog": 2, "The_Eiffel_Tower": 3}}
# DomainNet's label order (not Python's sorted order, which puts "The_..." first)
LIST_CLASSES = ("aircraft_carrier", "The_Eiffel_Tower", "zebra")
LIST_PER_CLASS = {"clipart": (3, 2, 4), "real": (2, 3, 3)}
TRAIN = {"device": "cpu", "backbone": "smallcnn", "pretrained": False, "resize": 14, "crop": 12, "batch_size": 4,
         "iterations": 2, "eval_batch_size": 64}


def _png(path: Path, label: int, i: int, fmt: str = "PNG") -> None:
    rng = np.random.default_rng([label, i])
    pixels = rng.integers(0, 80, (14, 14, 3), dtype=np.uint8)
    pixels[..., label % 3] += 150
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path, fmt)


def make_folders(root: Path, counts=FOLDER_COUNTS) -> None:
    """``<domain>/<class>/<i>.png`` (DomainBed's layout)."""
    for dom, per in counts.items():
        for c, (cls, n) in enumerate(per.items()):
            for i in range(n):
                _png(root / dom / cls / f"{i}.png", c, i)


def make_lists(root: Path) -> None:
    """DomainNet's layout: ``<domain>/<class>/<domain>_<label>_<i>.jpg`` and ``<domain>_train.txt`` /
    ``<domain>_test.txt`` of ``path label`` lines (every other image in each)."""
    for dom, per in LIST_PER_CLASS.items():
        lines = []
        for label, (cls, n) in enumerate(zip(LIST_CLASSES, per)):
            for i in range(n):
                rel = f"{dom}/{cls}/{dom}_{label}_{i}.jpg"
                _png(root / rel, label, i, "JPEG")
                lines.append(f"{rel} {label}\n")
        (root / f"{dom}_train.txt").write_text("".join(lines[0::2]))
        (root / f"{dom}_test.txt").write_text("".join(lines[1::2]))


FOLDERS_YAML = """kind: images
title: my folders
partial_classes: [cat, dog]
domains:
  - {name: sketch, short: S}
  - {name: photo, short: P}
"""
LISTS_YAML = """kind: images
title: DomainNet-like lists
domains:
  - {name: clipart, short: c, lists: [clipart_train.txt, clipart_test.txt]}
  - {name: real, short: r, lists: [real_train.txt, real_test.txt], count: 8}
"""


@pytest.fixture
def user(isolated, monkeypatch):
    """A declarations folder outside the checkout (DMP_DATASETS_DIR) and the data folder of ``isolated``."""
    decl = isolated.path / "lab_datasets"
    decl.mkdir()
    monkeypatch.setenv("DMP_DATASETS_DIR", str(decl))

    class User:
        path = isolated.path
        declarations = decl

        @staticmethod
        def declare(name, text, make=None):
            (decl / name).mkdir(exist_ok=True)
            (decl / name / "dataset.yaml").write_text(text)
            if make is not None:
                make(isolated.path / "data" / name)
            return decl / name
    return User


def _data(*argv) -> int:
    args = build_parser().parse_args(["data", *argv])
    return args.func(args)


def _error(capsys, *argv) -> str:
    with pytest.raises(SystemExit):
        _data(*argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and err.rstrip().endswith(lines[0]), err  # the error is one line (after progress bars)
    return lines[0]


# ----------------------------------------------------------------------------------------------- declarations
def test_classes_are_read_from_the_folders_sorted_or_from_the_lists_in_label_order(user):
    user.declare("folders", FOLDERS_YAML, make_folders)
    user.declare("lists", LISTS_YAML, make_lists)
    assert registry.get_dataset("folders").classes == ("The_Eiffel_Tower", "cat", "dog")  # sorted(): "T" < "c"
    assert registry.get_dataset("lists").classes == LIST_CLASSES
    assert registry.get_dataset("folders").partial_classes == (1, 2)  # cat, dog: by name, in the sorted classes
    # declared in the lab's folder: lists and lock live beside the yaml, never in the checkout's datasets/
    assert registry.dataset_dir("lists") == user.declarations / "lists"


def test_listed_classes_and_partial_classes_by_name(user):
    user.declare("folders", FOLDERS_YAML.replace("partial_classes: [cat, dog]",
                                                 "classes: [cat, dog, The_Eiffel_Tower]\npartial_classes: [dog]"),
                 make_folders)
    spec = registry.get_dataset("folders")
    assert spec.classes == ("cat", "dog", "The_Eiffel_Tower") and spec.partial_classes == (1,)
    assert spec.splits == ("full", "partial")
    assert _data("fetch", "folders") == 0
    partial = registry.read_list(registry.list_file(registry.get_dataset("folders"), "sketch", "partial"))
    assert [lab for _, lab in partial] == [1] * 5
    full = registry.read_list(registry.list_file(registry.get_dataset("folders"), "photo"))
    assert np.bincount([lab for _, lab in full]).tolist() == [4, 2, 3]


@pytest.mark.parametrize("text, message", [
    (FOLDERS_YAML + "resize: 64\n", r"unknown key 'resize' for kind 'images'"),
    (FOLDERS_YAML.replace("{name: photo, short: P}", "{name: photo, short: P, file: p.npz}"),
     r"unknown key 'domains\[1\]\.file' for kind 'images'"),
    (FOLDERS_YAML.replace("[cat, dog]", "[cat, horse]"), r"'partial_classes': 'horse' is not one of the classes"),
    (FOLDERS_YAML.replace("short: P", "short: S"), r"two domains share the short 'S'"),
    (FOLDERS_YAML.replace("short: P", "short: P-2"), r"'domains\[1\]\.short' must be letters and digits"),
    (FOLDERS_YAML + "archives:\n  - {file: a.zip, urls: [http://x/a.zip], sha256: abc}\n",
     r"'archives\[0\]\.sha256' must be 64 lower-case hex digits"),
    (FOLDERS_YAML + "archives:\n  - {file: a.zip, domains: [paint]}\n", r"'archives\[0\]\.domains': unknown domain"),
    (LISTS_YAML.replace(", lists: [real_train.txt, real_test.txt]", ""), r"'domains\[1\]\.lists' is missing"),
    (FOLDERS_YAML.replace("kind: images", "kind: image"), r"kind must be 'features', 'arrays' or 'images'"),
    (FOLDERS_YAML.replace("short: P}", "short: P, eval_lists: [p.txt]}"), r"'domains\[1\]\.eval_lists' needs the list"),
    (LISTS_YAML.replace("real_test.txt]", "real_test.txt], eval_lists: [real_test.txt]"),
     r"'domains\[1\]\.eval_lists': 'real_test.txt' is also in 'lists'"),
    (FOLDERS_YAML.replace("domains:", "domains: 3\nx:"), r"unknown key 'x'"),
    ("kind: images\ndomains: [{name: a}, {name: b]\n", r"dataset\.yaml:2: not valid YAML"),
])
def test_a_bad_declaration_is_one_line_naming_file_and_key(user, capsys, text, message):
    user.declare("mine", text, make_folders)
    with pytest.raises(ValueError, match=message) as exc:
        registry.get_dataset("mine")
    assert str(exc.value).startswith(str(user.declarations / "mine" / "dataset.yaml"))
    err = _error(capsys, "fetch", "mine")
    assert err.startswith("error: ") and "dataset.yaml" in err
    assert _data("list") == 0  # every other dataset still works; this one is shown as broken
    assert "mine               BROKEN" in capsys.readouterr().out


def test_a_list_label_outside_the_listed_classes_is_refused_naming_file_and_line(user, capsys):
    user.declare("lists", LISTS_YAML.replace("kind: images", f"kind: images\nclasses: {list(LIST_CLASSES)}"),
                 make_lists)
    lst = user.path / "data" / "lists" / "real_test.txt"
    lines = lst.read_text().splitlines()
    lines[1] = lines[1].rsplit(" ", 1)[0] + " 3"
    lst.write_text("\n".join(lines) + "\n")
    err = _error(capsys, "fetch", "lists")
    assert "real_test.txt:2: label 3 of " in err and "outside 0..2" in err


def test_classes_read_from_lists_must_be_one_folder_per_label(user, capsys):
    user.declare("lists", LISTS_YAML, make_lists)
    lst = user.path / "data" / "lists" / "clipart_test.txt"
    lst.write_text(lst.read_text().replace("zebra/clipart_2_0.jpg 2", "zebra/clipart_2_0.jpg 0"))
    err = _error(capsys, "fetch", "lists")
    assert "clipart_test.txt: 'clipart/zebra/clipart_2_0.jpg' has label 0, whose images are in folder " \
           "'aircraft_carrier'" in err and "list `classes` in the dataset.yaml" in err


# ----------------------------------------------------------------------------------------------- fetch and lock
def test_counts_unknown_in_advance_are_locked_on_the_first_fetch_and_checked_afterwards(user, capsys):
    folder = user.declare("folders", FOLDERS_YAML, make_folders)
    assert _data("fetch", "folders") == 0
    lock = json.loads((folder / "lock.json").read_text())
    assert lock["counts"] == {d: dict(sorted(c.items())) for d, c in FOLDER_COUNTS.items()}
    assert lock["source"] == {"sketch": "placed in the data folder", "photo": "placed in the data folder"}
    full = registry.read_list(folder / "lists" / "sketch_full.txt")
    assert len(full) == 10 and full[0] == ("sketch/The_Eiffel_Tower/0.png", 0)
    assert _data("verify", "folders") == 0
    _png(user.path / "data" / "folders" / "sketch" / "dog" / "extra.png", 2, 99)  # an image more than locked
    err = _error(capsys, "verify", "folders")
    assert "per-class counts differ from the lock file" in err and "dog: locked 5, found 6" in err
    assert str(folder / "lock.json") in err


def test_declared_counts_are_checked(user, capsys):
    user.declare("lists", LISTS_YAML.replace("count: 8", "count: 9"), make_lists)
    err = _error(capsys, "fetch", "lists")
    assert "(domain 'real'): 8 images, expected 9" in err


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in sorted(files.items()):
            zf.writestr(name, data)
    return buf.getvalue()


def test_archives_with_mirrors_and_a_pinned_checksum(user, server, capsys):
    """A lab's archive (a wrapper folder, both domains) from the second of two mirrors, its sha256 pinned; the
    lock records the archive and mirror; a wrong checksum is refused before extraction."""
    make_folders(user.path / "staging")
    files = {f"mydata/{p.relative_to(user.path / 'staging').as_posix()}": p.read_bytes()
             for p in sorted((user.path / "staging").rglob("*.png"))}
    blob = _zip(files)
    sha = hashlib.sha256(blob).hexdigest()
    server.files[server.url("/mirror2/mydata.zip")] = blob
    archive = (f"archives:\n  - {{file: mydata.zip, urls: [{server.url('/gone/mydata.zip')}, "
               f"{server.url('/mirror2/mydata.zip')}], sha256: {sha}, size: {len(blob)}}}\n")
    folder = user.declare("folders", FOLDERS_YAML + archive)
    assert _data("fetch", "folders") == 0
    lock = json.loads((folder / "lock.json").read_text())
    assert lock["archives"]["mydata.zip"]["sha256"] == sha
    assert lock["archives"]["mydata.zip"]["mirror"] == server.url("/mirror2/mydata.zip")
    assert registry.get_dataset("folders").classes == ("The_Eiffel_Tower", "cat", "dog")
    assert lock["counts"]["photo"] == {"The_Eiffel_Tower": 3, "cat": 4, "dog": 2}
    # another lab member's copy: the pinned checksum is checked strictly
    other = user.declare("other", (FOLDERS_YAML + archive).replace(sha, "f" * 64))
    with pytest.raises(SystemExit):
        _data("fetch", "other")
    err = capsys.readouterr().err
    assert f"checksum mismatch for mydata.zip: expected sha256 {'f' * 64}, got {sha}" in err
    assert not (other / "lock.json").exists() and not (user.path / "data" / "other").exists()


# ----------------------------------------------------------------------------------------------- train and tables
def _suite_config(dataset: str, task: str, results: Path) -> dict:
    cfg = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
    cfg.update(results=str(results), seeds=[0], demo_data=False, figures={},
               train=dict(TRAIN))
    cfg["tables"] = {"vanilla": {"methods": ["source_only", "dmp"], "metric": "G",
                                 "datasets": {dataset: {"tasks": [task]}}}}
    return cfg


@pytest.mark.parametrize("name, text, make, task, classes", [
    ("folders", FOLDERS_YAML, make_folders, "S->P", ["The_Eiffel_Tower", "cat", "dog"]),
    ("lists", LISTS_YAML, make_lists, "c->r", list(LIST_CLASSES)),
])
def test_a_user_dataset_trains_and_makes_a_table(user, name, text, make, task, classes):
    """As the Snakemake suite does it: each run of the table trained with `python -m dmp train` and the suite's
    arguments, then the table built from the runs."""
    from dmp.suite import Suite
    from dmp.tables.cli import build

    user.declare(name, text, make)
    assert _data("fetch", name) == 0
    results = user.path / "results"
    cfg = _suite_config(name, task, results)
    suite = Suite(cfg)
    versions = set()
    for run in suite.table_runs("vanilla"):
        out = run.folder(str(results))
        with pytest.raises(SystemExit) as exc:
            dmp_main(["train", "--quiet", "--out", out, *suite.train_args(run), "threads=1"])
        assert exc.value.code in (0, None)
        metrics = json.loads(Path(out, "metrics.json").read_text())
        assert metrics["status"] == "complete" and metrics["class_names"] == classes
        versions.add(metrics["dataset_version"])
    assert len(versions) == 1 and len(versions.pop()) == 12  # provenance: the same data version for both rows
    build(cfg, "vanilla", results=str(results))
    table = (results / "tables" / "vanilla.md").read_text()
    assert "| DMP " in table and "| Source only " in table and task in table


EVAL_YAML = """kind: images
title: DomainNet's protocol
domains:
  - {name: clipart, short: c, lists: [clipart_train.txt], eval_lists: [clipart_test.txt]}
  - {name: real, short: r, lists: [real_train.txt], eval_lists: [real_test.txt]}
"""


def make_eval_lists(root: Path) -> None:
    """:func:`make_lists`, with the last test image of ``real`` moved to its train list: real has 5 training and 3
    test images (per class 1, 2, 2 and 1, 1, 1), clipart 5 and 4, so scoring another list gives another count."""
    make_lists(root)
    test = (root / "real_test.txt").read_text().splitlines(keepends=True)
    (root / "real_test.txt").write_text("".join(test[:-1]))
    with open(root / "real_train.txt", "a") as fh:
        fh.write(test[-1])


def test_eval_lists_adapt_on_the_train_lists_and_score_the_test_lists(user):
    """DomainNet's protocol (``eval_lists``): the source trains on its train list, the target is adapted on its
    train list and scored on its test list; metrics.json records the list scored and its count. A dataset without
    eval_lists keeps the paper's protocol (scored on the images adapted on)."""
    from dmp.config import resolve
    from dmp.data import splits
    from dmp.data.inputs import build_task

    folder = user.declare("dn", EVAL_YAML, make_eval_lists)
    assert _data("fetch", "dn") == 0
    spec = registry.get_dataset("dn")
    assert spec.classes == LIST_CLASSES and spec.eval_lists == (("clipart", "clipart_test.txt"),
                                                               ("real", "real_test.txt"))

    def labels(rel):
        return np.bincount([lab for _, lab in registry.read_list(folder / "lists" / rel)], minlength=3).tolist()
    assert labels("real_full.txt") == [2, 3, 3]  # the whole domain: lock, verify, extract-features
    assert labels("train/real_full.txt") == [1, 2, 2] and labels("eval/real_full.txt") == [1, 1, 1]
    assert labels("train/clipart_full.txt") == [2, 1, 2] and labels("eval/clipart_full.txt") == [1, 1, 2]
    cfg = resolve({"dataset": "dn", "source": "clipart", "target": "real", **TRAIN})
    task = build_task(cfg)
    parts = (task.source_train, task.source_eval, task.target_train, task.target_eval)
    assert [len(p) for p in parts] == [5, 5, 5, 3]
    # `config --schedule`: the epoch of the images trained on
    assert splits.split_size(registry.get_dataset("dn"), "c", "full") == 5
    assert sorted(task.target_eval.labels.tolist()) == [0, 1, 2]
    assert task.scored == {"domain": "real", "split": "full", "part": "eval", "list": "lists/eval/real_full.txt"}
    # the input cache holds each domain whole; each part reads its own rows of it: the same images, the same batches
    import torch

    from dmp.data import cache
    for d in ("clipart", "real"):
        cache.build("dn", d, cfg["resize"], progress=False)
    held, plain = build_task({**cfg, "input_cache": True}), build_task(cfg)
    for a, b in zip((held.source_train, held.source_eval, held.target_train, held.target_eval),
                    (plain.source_train, plain.source_eval, plain.target_train, plain.target_eval)):
        assert a.labels.tolist() == b.labels.tolist()
        assert torch.equal(a.batch(list(range(len(a))), [7] * len(a))[0],
                           torch.stack([b[(i, 7)][0] for i in range(len(b))]))
    out = user.path / "run"
    with pytest.raises(SystemExit) as exc:
        dmp_main(["train", "--quiet", "--out", str(out), "dataset=dn", "source=c", "target=r", "threads=1",
                  *(f"{k}={v}" for k, v in TRAIN.items())])
    assert exc.value.code in (0, None)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["target_eval"] == {**task.scored, "count": 3}
    assert round(metrics["accuracy"] * 3, 6) == round(metrics["accuracy"] * 3)  # a fraction of the 3 scored images
    # the run's version covers the list it scores: another test list, another version
    spec = registry.get_dataset("dn")
    before = registry.dataset_version(spec, list(splits.run_lists(spec, "c", "full", "r", "full").values()))
    (folder / "lists" / "eval" / "real_full.txt").write_text("real/zebra/real_2_0.jpg 2\n")
    assert registry.dataset_version(spec, list(splits.run_lists(spec, "c", "full", "r", "full").values())) != before
    # without eval_lists: the paper's protocol, scored on the 8 images adapted on
    user.declare("lists", LISTS_YAML, make_lists)
    assert _data("fetch", "lists") == 0
    task = build_task(resolve({"dataset": "lists", "source": "clipart", "target": "real", **TRAIN}))
    assert len(task.target_train) == len(task.target_eval) == 8
    assert task.scored == {"domain": "real", "split": "full", "part": "", "list": "lists/real_full.txt"}


def test_extract_features_of_a_user_dataset_is_declared_beside_it(user, monkeypatch):
    """extract-features writes the new features dataset into the lab's declarations folder, never into the
    checkout, and it loads as a features dataset with the image dataset's classes."""
    import torch

    from dmp.data import splits
    from dmp.models import backbones

    user.declare("lists", LISTS_YAML, make_lists)
    assert _data("fetch", "lists") == 0
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    net.weights_file = None  # as build_backbone reports it: no weights file loaded
    monkeypatch.setitem(backbones.BACKBONES, "tiny", backbones.BackboneSpec("tiny", lambda **_: (net, 4)))
    assert _data("extract-features", "lists", "--out-name", "lists_tiny", "--backbone", "tiny", "--no-pretrained",
                 "--resize", "14", "--crop", "12") == 0
    assert (user.declarations / "lists_tiny" / "dataset.yaml").is_file()
    spec = registry.get_dataset("lists_tiny")
    assert spec.kind == "features" and spec.classes == LIST_CLASSES
    x, y = splits.load_arrays(registry.get_dataset("lists_tiny"), "real")
    assert x.shape == (8, 4) and np.bincount(y).tolist() == [2, 3, 3]


# ----------------------------------------------------------------------------------------------- snakemake
@pytest.mark.slow
def test_a_folder_and_a_list_dataset_run_through_snakemake_to_a_table(tmp_path, monkeypatch):
    """A fresh user: two datasets declared and their data kept outside the checkout (DMP_DATASETS_DIR,
    DMP_DATA_DIR), a folder one (DomainBed's layout) and a list one (DomainNet's, scored on its test lists:
    eval_lists), fetched (lock and lists written beside each declaration), then one `snakemake all_tables` whose
    table holds a row of each."""
    decl, data, results = tmp_path / "decl", tmp_path / "data", tmp_path / "results"
    for name, text, make in (("mine", FOLDERS_YAML, make_folders), ("mylists", EVAL_YAML, make_eval_lists)):
        (decl / name).mkdir(parents=True)
        (decl / name / "dataset.yaml").write_text(text)
        make(data / name)
    monkeypatch.setenv("DMP_DATASETS_DIR", str(decl))
    monkeypatch.setenv("DMP_DATA_DIR", str(data))
    for name in ("mine", "mylists"):
        assert _data("fetch", name) == 0
        assert (decl / name / "lock.json").is_file()
    assert (decl / "mine" / "lists" / "photo_full.txt").is_file()
    cfg = _suite_config("mine", "S->P", results)
    cfg["data_dir"] = str(data)
    cfg["tables"]["vanilla"]["methods"] = ["dmp"]
    cfg["tables"]["vanilla"]["datasets"]["mylists"] = {"tasks": ["c->r"]}
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(cfg))
    proc = hang_guard.run([sys.executable, "-m", "snakemake", "--cores", "1", "all_tables", "--configfile",
                           str(tmp_path / "mine.yaml")], cwd=ROOT, quiet=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = (results / "tables" / "vanilla.md").read_text()
    assert "| DMP " in table and "S->P" in table and "c->r" in table
    classes = {p.parts[len(results.parts) + 1]: json.loads(p.read_text())["class_names"]
               for p in (results / "runs").rglob("metrics.json")}
    assert classes == {"mine": ["The_Eiffel_Tower", "cat", "dog"], "mylists": list(LIST_CLASSES)}
    scored = {p.parts[len(results.parts) + 1]: json.loads(p.read_text())["target_eval"]
              for p in (results / "runs").rglob("metrics.json")}
    assert scored["mine"] == {"domain": "photo", "split": "full", "part": "", "list": "lists/photo_full.txt",
                              "count": sum(FOLDER_COUNTS["photo"].values())}
    assert scored["mylists"] == {"domain": "real", "split": "full", "part": "eval", "list": "lists/eval/real_full.txt",
                                 "count": 3}  # real_test.txt of make_eval_lists, not the 5 adapted on


def test_before_the_first_fetch_the_suite_validates_and_data_list_says_where_the_classes_come_from(user, capsys):
    """A fresh clone with the lab's declarations: no data yet, so no classes yet; the suite config still
    validates (a dry run works) and `data list` says the classes are read from the data."""
    from dmp.suite import Suite

    user.declare("folders", FOLDERS_YAML)
    assert registry.get_dataset("folders").classes == ()
    Suite(_suite_config("folders", "S->P", user.path / "results"))
    assert _data("list") == 0
    assert "folders            images   classes from its folders (data not in place)" in capsys.readouterr().out


def test_cache_keeps_a_small_dataset_in_memory(user):
    from dmp.config import resolve
    from dmp.data.inputs import build_task

    user.declare("folders", FOLDERS_YAML + "cache: true\n", make_folders)
    assert _data("fetch", "folders") == 0
    task = build_task(resolve({"dataset": "folders", "source": "sketch", "target": "photo", **TRAIN}))
    task.source_eval[0]
    assert len(task.source_eval.cache) == 1 and tuple(task.source_eval.cache[0].shape) == (3, 14, 14)


def test_a_list_dataset_from_an_archive_placed_by_hand(user):
    """The images and the label lists in one archive (any wrapper folder) put into the downloads folder: no
    network; the lists come with their domains by default."""
    make_lists(user.path / "staging")
    files = {f"domainnet/{p.relative_to(user.path / 'staging').as_posix()}": p.read_bytes()
             for p in sorted((user.path / "staging").rglob("*")) if p.is_file()}
    (user.path / "data" / "downloads" / "lists").mkdir(parents=True)
    (user.path / "data" / "downloads" / "lists" / "dn.zip").write_bytes(_zip(files))
    folder = user.declare("lists", LISTS_YAML + "archives:\n  - {file: dn.zip}\n")
    assert _data("fetch", "lists") == 0
    assert registry.get_dataset("lists").classes == LIST_CLASSES
    assert (user.path / "data" / "lists" / "real_test.txt").is_file()
    real = registry.read_list(folder / "lists" / "real_full.txt")
    assert np.bincount([lab for _, lab in real]).tolist() == [2, 3, 3]
    assert json.loads((folder / "lock.json").read_text())["source"] == {"clipart": "dn.zip", "real": "dn.zip"}


def test_an_unknown_dataset_names_where_declarations_are_searched(user, monkeypatch, capsys):
    monkeypatch.setenv("DMP_DATASETS_DIR", str(user.path / "lab_datasest"))  # a typo: no such folder
    user.declare("folders", FOLDERS_YAML, make_folders)
    err = _error(capsys, "fetch", "folders")
    assert "unknown dataset 'folders'" in err and str(user.path / "lab_datasest" / "<name>" / "dataset.yaml") in err
