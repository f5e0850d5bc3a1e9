"""Office-31 images placed by hand in either accepted layout: as declared (``amazon/images/back_pack/...``) or
without the ``images/`` level (``amazon/back_pack/frame_0001.jpg``, how other tools extract it). The fetch checks
them in place (nothing copied), writes the lock and the lists; the lists follow the published lists' order and
labels (Transfer-Learning-Library's image_list/amazon.txt, thuml's Xlearn/CDAN amazon_list.txt) line for line."""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest
from data_fixtures import DEAD, build_packaging, isolated, small_spec, tiny_image  # noqa: F401

from dmp.data import cli, fetch, registry, splits, verify
from dmp.data.catalog import PUBLISHED_ORDER
from dmp.data.registry import FetchError

PER_CLASS = 2
DOMAINS = ("amazon", "dslr", "webcam")
SHARED = registry.PROJECT.parent / "shared" / "data" / "office31_images"

# Hand-copied from the published lists (thuml CDAN pytorch/data/office/{amazon,dslr,webcam}_list.txt, the lists of
# Transfer-Learning-Library's image_list/ with a path prefix): the first lines of amazon's list ...
PUBLISHED_AMAZON_HEAD = ["amazon/images/calculator/frame_0001.jpg 5", "amazon/images/calculator/frame_0002.jpg 5"]
PUBLISHED_AMAZON_AT = {94: "amazon/images/ring_binder/frame_0001.jpg 24",  # line 95 (0-based 94)
                       184: "amazon/images/printer/frame_0001.jpg 21", 2816: "amazon/images/bottle/frame_0036.jpg 4"}
# ... the label of each class's block, in the order the lists give them (the same in all three domains) ...
PUBLISHED_LABELS = [5, 24, 21, 11, 26, 12, 16, 15, 17, 29, 19, 1, 23, 0, 8, 27, 14, 18, 25, 13, 9, 20, 3, 22, 28, 30,
                    2, 10, 7, 6, 4]
# ... and the number of lines of each block (every class's images are frame_0001.jpg ... frame_<n>.jpg, in order).
PUBLISHED_COUNTS = {
    "amazon": [94, 90, 100, 100, 100, 100, 100, 99, 94, 96, 95, 82, 98, 92, 97, 99, 100, 96, 75, 98, 81, 93, 82, 98,
               99, 64, 72, 99, 97, 91, 36],
    "dslr": [12, 10, 15, 10, 18, 24, 12, 22, 8, 22, 10, 21, 18, 12, 15, 26, 31, 10, 7, 16, 15, 13, 12, 23, 21, 15, 24,
             13, 14, 13, 16],
    "webcam": [31, 40, 20, 27, 25, 30, 30, 43, 27, 23, 32, 21, 27, 29, 21, 30, 30, 28, 11, 19, 19, 16, 12, 30, 24, 21,
               28, 27, 18, 40, 16],
}


def _published(domain: str, prefix: str = "images/") -> list[str]:
    """The published list of ``domain`` rebuilt from the hand-copied blocks (``prefix``: "" for the layout without
    images/)."""
    classes = registry.get_dataset("office31").classes
    return [f"{domain}/{prefix}{classes[label]}/frame_{i:04d}.jpg {label}"
            for label, n in zip(PUBLISHED_LABELS, PUBLISHED_COUNTS[domain]) for i in range(1, n + 1)]


def test_the_hand_copied_published_lists_agree_with_the_registry():
    spec = registry.get_dataset("office31")
    assert [spec.classes.index(c) for c in PUBLISHED_ORDER["office31"]] == PUBLISHED_LABELS
    assert {d: sum(n) for d, n in PUBLISHED_COUNTS.items()} == {d.name: d.count for d in spec.domains}
    amazon = _published("amazon")
    assert amazon[:2] == PUBLISHED_AMAZON_HEAD and all(amazon[i] == line for i, line in PUBLISHED_AMAZON_AT.items())


def _place(root: Path, images_level: bool, per_class: int = PER_CLASS) -> None:
    """Tiny JPEGs of every domain and class under ``root``, with or without the images/ level (the same bytes)."""
    spec = registry.get_dataset("office31")
    for d in DOMAINS:
        for label, cls in enumerate(spec.classes):
            folder = root / d / ("images" if images_level else "") / cls
            folder.mkdir(parents=True)
            for i in range(per_class):
                (folder / f"frame_{i + 1:04d}.jpg").write_bytes(tiny_image(1000 * DOMAINS.index(d) + 10 * label + i))


def _cli(*argv) -> int:
    parser = argparse.ArgumentParser()
    cli.add_subparsers(parser.add_subparsers(dest="command"))
    return cli.main(parser.parse_args(["data", *argv]))


def _lists() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(registry.lists_dir("office31").glob("*.txt"))}


def _fresh() -> None:
    """A fresh clone and an empty data folder: no data, lists or lock."""
    shutil.rmtree(registry.data_root(registry.get_dataset("office31")), ignore_errors=True)
    shutil.rmtree(registry.lists_dir("office31"), ignore_errors=True)
    registry.lock_path("office31").unlink(missing_ok=True)


def test_both_layouts_are_fetched_in_place_and_give_the_same_lists(isolated, capsys):
    isolated.use(small_spec("office31", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    results = {}
    for images_level in (False, True):
        _fresh()
        root = registry.data_root(registry.get_dataset("office31"))
        _place(root, images_level)
        before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
        assert _cli("fetch", "office31") == 0  # offline: the placed folders are used, no archive is looked for
        assert "wrote 72 lists" in capsys.readouterr().out  # the first fetch writes the lists (full, partial, ...)
        assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == before  # nothing moved or added
        assert _cli("verify", "office31") == 0 and _cli("prepare", "office31") == 0
        lock = registry.read_lock("office31")
        assert lock["source"] == dict.fromkeys(DOMAINS, "placed in the data folder")
        lists = _lists()
        for text in lists.values():  # every list names files that exist under the data root
            assert all((root / line.rsplit(" ", 1)[0]).is_file() for line in text.splitlines())
        results[images_level] = lists, lock["counts"], lock["manifest"]
    (bare, counts, manifest), (declared, counts2, manifest2) = results[False], results[True]
    assert counts == counts2 and manifest == manifest2  # one lock holds for both layouts
    assert {n: t.replace("/images/", "/") for n, t in declared.items()} == bare  # the same lists, but the prefix
    full = declared["amazon_full.txt"].splitlines()
    assert full[:2] == PUBLISHED_AMAZON_HEAD  # the published order: calculator (label 5) first, ...
    assert [int(line.split()[1]) for line in full[::PER_CLASS]] == PUBLISHED_LABELS  # ... then ring_binder (24), ...
    assert declared["amazon_partial.txt"].splitlines()[0] == "amazon/images/calculator/frame_0001.jpg 5"


def test_a_lock_and_lists_of_the_other_layout(isolated):
    """Lists committed from one layout, images placed in the other: verify says so in one line; after `prepare` the
    copy verifies against the same lock (its manifest names the files as the declared layout does)."""
    isolated.use(small_spec("office31", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    root = registry.data_root(registry.get_dataset("office31"))
    _place(root, images_level=False)
    assert _cli("fetch", "office31") == 0
    lock = registry.lock_path("office31").read_text()
    shutil.rmtree(root)
    _place(root, images_level=True)
    with pytest.raises(ValueError) as err:
        verify.verify("office31")
    msg = str(err.value)
    assert "\n" not in msg and "amazon_full.txt" in msg and "other accepted layout" in msg
    assert "python -m dmp data prepare office31" in msg
    splits.prepare("office31")
    verify.verify("office31", verify_images=True)
    fetch.fetch("office31", progress=False)
    assert registry.lock_path("office31").read_text() == lock


def test_an_archive_fetched_after_lists_of_the_layout_without_images(isolated, tmp_path):
    """The first fetch of a lab read images placed without images/ and its lists were committed; a colleague's fetch
    of an archive (which has images/) installs the domains as the committed lists name them: the same lists, lock
    and version."""
    isolated.use(small_spec("office31", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    (arc,) = build_packaging("office31", "original", tmp_path / "build", PER_CLASS)
    shutil.unpack_archive(arc, tmp_path / "x")
    root = registry.data_root(registry.get_dataset("office31"))
    for d in DOMAINS:  # the same images, placed by hand without the images/ level
        shutil.move(tmp_path / "x" / d / "images", root / d)
    assert _cli("fetch", "office31") == 0
    spec = registry.get_dataset("office31")
    lists, lock, version = _lists(), registry.lock_path("office31").read_text(), registry.dataset_version(spec)
    shutil.rmtree(root)  # a colleague's clone: the lists and the lock committed, no data; the archive by hand
    registry.download_dir(registry.get_dataset("office31")).mkdir(parents=True)
    shutil.copy(arc, registry.download_dir(registry.get_dataset("office31")) / arc.name)
    fetch.fetch("office31", progress=False)
    assert (root / "amazon" / "back_pack" / "frame_0001.jpg").is_file() and not (root / "amazon" / "images").exists()
    verify.verify("office31", verify_images=True)
    assert _lists() == lists and registry.dataset_version(registry.get_dataset("office31"), content=True)
    assert registry.dataset_version(registry.get_dataset("office31")) == version
    assert json.loads(registry.lock_path("office31").read_text())["manifest"] == json.loads(lock)["manifest"]


@pytest.mark.parametrize("images_level", [False, True])
def test_a_wrong_count_is_refused_naming_the_domain(isolated, images_level):
    isolated.use(small_spec("office31", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    root = registry.data_root(registry.get_dataset("office31"))
    _place(root, images_level)
    extra = root / "dslr" / ("images" if images_level else "") / "mug" / "frame_0099.jpg"
    extra.write_bytes(tiny_image(7))
    with pytest.raises(FetchError) as err:
        fetch.fetch("office31", progress=False)
    msg = str(err.value)
    assert "\n" not in msg, msg
    folder = "office31/dslr/images" if images_level else "office31/dslr"
    assert f"{folder} (domain 'dslr'): 63 images, expected 62" in msg
    assert not registry.lock_path("office31").exists() and not registry.lists_dir("office31").exists()


def test_a_misnamed_class_folder_is_named(isolated):
    isolated.use(small_spec("office31", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    root = registry.data_root(registry.get_dataset("office31"))
    _place(root, images_level=False)
    (root / "webcam" / "mug").rename(root / "webcam" / "Mug")
    with pytest.raises(FetchError, match=r"office31/webcam: missing class folder\(s\) mug; unknown class folder\(s\) "
                                         r"Mug$"):
        fetch.fetch("office31", progress=False)


def test_nothing_found_names_both_layouts(isolated):
    isolated.use(small_spec("office31", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    with pytest.raises(FetchError) as err:
        fetch.fetch("office31", retries=1, timeout=5, progress=False)
    first = str(err.value).splitlines()[0]
    assert first.startswith("cannot fetch dataset 'office31': no source delivered domain(s) amazon, dslr, webcam;")
    assert "amazon/images/<class>/ or amazon/<class>/" in first and "webcam/images/<class>/ or webcam/<class>/" in first
    with pytest.raises(registry.DatasetMissingError, match=r"amazon/images/<class>/ or amazon/<class>/"):
        registry.require_dataset(registry.get_dataset("office31"))


@pytest.mark.shared_data
@pytest.mark.skipif(not SHARED.is_dir(), reason=f"the real Office-31 images are not at {SHARED}")
def test_the_real_images_without_images_level(isolated, tmp_path, monkeypatch, capsys):
    """The real Office-31 (../shared/data/office31_images, no images/ level) through fetch, verify and prepare in
    place (a symlinked data root, read-only): the declared counts, 31 labels, the published lists line for line."""
    data = tmp_path / "shared_root"
    data.mkdir()
    (data / "office31").symlink_to(SHARED.resolve(), target_is_directory=True)
    monkeypatch.setenv("DMP_DATA_DIR", str(data))
    assert _cli("fetch", "office31") == 0
    assert _cli("verify", "office31") == 0
    out = capsys.readouterr().out
    assert "office31: OK amazon 2817, dslr 498, webcam 795" in out and "wrote 72 lists" in out
    lock = registry.read_lock("office31")
    assert {d: sum(c.values()) for d, c in lock["counts"].items()} == {"amazon": 2817, "dslr": 498, "webcam": 795}
    for d in DOMAINS:
        full = registry.list_file(registry.get_dataset("office31"), d).read_text().splitlines()
        assert full == _published(d, prefix="")  # the published list, without the images/ level
        assert {int(line.rsplit(" ", 1)[1]) for line in full} == set(range(31))
    assert not list(data.glob(".office31.staging-*"))


def test_a_domain_in_both_layouts_is_told_to_keep_one(isolated):
    """The lists committed from the layout without images/, and amazon's class folders then placed in the declared
    layout as well: fetch, verify and prepare each say in one line that the domain is in both layouts and to keep
    one (not to place the folders as the lists name them: they are)."""
    isolated.use(small_spec("office31", PER_CLASS, lambda a: [f"{DEAD}/{a.filename}"]))
    root = registry.data_root(registry.get_dataset("office31"))
    _place(root, images_level=False)
    assert _cli("fetch", "office31") == 0
    lists = _lists()
    shutil.copytree(root / "amazon", root / "amazon" / "images")  # amazon/images/<class>/ beside amazon/<class>/
    for call in (lambda: fetch.fetch("office31", progress=False), lambda: verify.verify("office31"),
                 lambda: splits.prepare("office31")):
        with pytest.raises((ValueError, FetchError)) as err:
            call()
        msg = str(err.value)
        assert "\n" not in msg and "as it names them" not in msg, msg
        assert msg.startswith(f"domain 'amazon' is placed in both accepted layouts, {root}/amazon/images/<class>/ "
                              f"and {root}/amazon/<class>/: keep only one of them"), msg
        assert "names amazon/calculator/frame_0001.jpg" in msg
    assert _lists() == lists  # nothing rewritten
    shutil.rmtree(root / "amazon" / "images")
    verify.verify("office31")
