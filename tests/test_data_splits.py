"""Split protocols: exact class sets of the partial targets, the shared-class sweep, the seeded per-class
subsets (deterministic, nested), list files and ``prepare``."""
from __future__ import annotations

import numpy as np
import pytest
from data_fixtures import isolated  # noqa: F401 (fixture)

from dmp.data import registry, splits


def _full(spec, per_class):
    """A synthetic full list: ``per_class`` entries per class (paths named after the class)."""
    return [(f"x/{c}/img {i:03d}.jpg", label) for label, c in enumerate(spec.classes) for i in range(per_class)]


def _classes(spec, entries):
    return [spec.classes[i] for i in sorted({lab for _, lab in entries})]


def test_partial_class_sets_are_the_protocols():
    o31 = registry.get_dataset("office31")
    assert o31.partial_classes == (0, 1, 5, 10, 11, 12, 15, 16, 17, 22)
    assert [o31.classes[i] for i in o31.partial_classes] == [
        "back_pack", "bike", "calculator", "headphones", "keyboard", "laptop_computer", "monitor", "mouse",
        "mug", "projector"]
    oh = registry.get_dataset("officehome")
    part = [oh.classes[i] for i in oh.partial_classes]
    assert len(oh.classes) == 65 and len(part) == 25 and part[0] == "Alarm_Clock" and part[-1] == "Fork"
    assert part == sorted(oh.classes)[:25]
    clef = registry.get_dataset("imageclef")
    assert [clef.classes[i] for i in clef.partial_classes] == ["aeroplane", "bike", "bird", "boat", "bottle", "bus"]
    visda = registry.get_dataset("visda2017")
    assert [visda.classes[i] for i in visda.partial_classes] == ["aeroplane", "bicycle", "bus", "car", "horse",
                                                                 "knife"]


@pytest.mark.parametrize("name", ["office31", "officehome", "imageclef", "visda2017"])
def test_partial_split_keeps_global_labels(name):
    spec = registry.get_dataset(name)
    full = _full(spec, 3)
    part = splits.derive(full, "partial", spec)
    assert _classes(spec, part) == [spec.classes[i] for i in spec.partial_classes]
    assert len(part) == 3 * len(spec.partial_classes)
    assert sorted({lab for _, lab in part}) == list(spec.partial_classes)  # labels index the full class list
    assert all(f"/{spec.classes[lab]}/" in path for path, lab in part)


def test_office31_shared_class_sweep():
    spec = registry.get_dataset("office31")
    assert [s for s in spec.splits if s.startswith("first")] == [f"first{n}" for n in range(10, 32)]
    full = _full(spec, 2)
    for n in range(10, 32):
        sub = splits.derive(full, f"first{n}", spec)
        assert _classes(spec, sub) == sorted(spec.classes)[:n]
    assert splits.derive(full, "first31", spec) == full
    with pytest.raises(ValueError, match="N must be in 1..31"):
        splits.derive(full, "first32", spec)


def test_sample_size_subsets_are_seeded_nested_and_exact():
    spec = registry.get_dataset("imageclef")
    assert {"n10", "n30", "n50"} <= set(spec.splits)
    full = _full(spec, 50)
    subsets = {k: splits.derive(full, f"n{k}", spec) for k in (10, 30, 50)}
    for k, sub in subsets.items():
        counts = np.bincount([lab for _, lab in sub], minlength=12)
        assert (counts == k).all()
        assert sub == splits.derive(list(full), f"n{k}", spec)  # deterministic
    assert set(subsets[10]) < set(subsets[30]) < set(subsets[50]) == set(full)
    first10 = [p for p, lab in full if lab == 0][:10]
    assert [p for p, lab in subsets[10] if lab == 0] != first10  # drawn at random, not the first files
    with pytest.raises(ValueError, match="fewer than 60"):
        splits.derive(full, "n60", spec)


def test_list_file_round_trip_with_spaces(tmp_path):
    entries = [("Real_World/Alarm_Clock/a b.jpg", 0), ("c/246.jpg", 11)]
    splits.write_list(tmp_path / "l.txt", entries)
    assert splits.read_list(tmp_path / "l.txt") == entries
    (tmp_path / "bad.txt").write_text("no-label-here\n")
    with pytest.raises(ValueError, match=r"bad\.txt:1"):
        splits.read_list(tmp_path / "bad.txt")


def test_unknown_split_name():
    spec = registry.get_dataset("office31")
    with pytest.raises(ValueError, match="unknown split 'half'"):
        splits.derive(_full(spec, 1), "half", spec)
    with pytest.raises(ValueError, match="unknown split"):
        registry.list_file(registry.get_dataset("office31"), "amazon", "half")


def test_prepare_from_committed_full_lists(isolated):
    """Without the data, prepare derives every protocol split from the committed full lists."""
    spec = registry.get_dataset("office31")
    for d in spec.domains:
        splits.write_list(registry.lists_dir("office31") / f"{d.name}_full.txt",
                          [(f"{d.folder}/{p}", lab) for p, lab in _full(spec, 2)])
    written = splits.prepare("office31")
    assert len(written) == 3 * len(spec.splits) == 3 * 24
    part = splits.read_list(registry.list_file(registry.get_dataset("office31"), "webcam", "partial"))
    assert len(part) == 20 and all(p.startswith("webcam/images/") for p, _ in part)
    assert registry.list_file(registry.get_dataset("office31"), "W", "first17").is_file()  # paper letters work too
    with pytest.raises(registry.DatasetMissingError, match="--splits first5"):
        registry.list_file(registry.get_dataset("office31"), "amazon", "first5")
    splits.prepare("office31", ["first5"])
    assert len(splits.read_list(registry.list_file(registry.get_dataset("office31"), "amazon", "first5"))) == 10


def test_a_path_listed_twice_is_refused(tmp_path):
    """One image listed twice (here with two labels) would count twice: refused naming the file and both lines,
    whoever reads the list (a run's ImageListDataset included); ImageCLEF-DA's published lists keep theirs
    (tests/test_data_fetch.py)."""
    from dmp.data.inputs import ImageListDataset

    listed = tmp_path / "solid_full.txt"
    listed.write_text("solid/images/arrow/a.png 0\nsolid/images/arrow/b.png 0\nsolid/images/arrow/a.png 3\n")
    with pytest.raises(ValueError, match=r"solid_full\.txt:3: 'solid/images/arrow/a\.png' is listed again \(first "
                                         r"on line 1\)"):
        splits.read_list(listed)
    with pytest.raises(ValueError, match=r"solid_full\.txt:3: .* is listed again"):
        ImageListDataset(tmp_path, listed, None, num_classes=10)


def test_empty_per_class_split_is_refused(isolated, capsys):
    """``prepare --splits n0`` would write empty lists (and change the dataset's version): refused before any
    file is written."""
    import argparse

    from dmp.data import cli

    spec = registry.get_dataset("office31")
    for d in spec.domains:
        splits.write_list(registry.lists_dir("office31") / f"{d.name}_full.txt",
                          [(f"{d.folder}/{p}", lab) for p, lab in _full(spec, 2)])
    before = sorted(registry.lists_dir("office31").iterdir())
    with pytest.raises(ValueError, match="split 'n0': K must be at least 1"):
        splits.prepare("office31", ["n2", "n0"])
    with pytest.raises(ValueError, match="unknown split 'n0'"):
        registry.list_file(registry.get_dataset("office31"), "amazon", "n0")
    parser = argparse.ArgumentParser()
    cli.add_subparsers(parser.add_subparsers(dest="command"))
    with pytest.raises(SystemExit) as code:
        cli.main(parser.parse_args(["data", "prepare", "office31", "--splits", "n0"]))
    assert code.value.code == 2 and "K must be at least 1" in capsys.readouterr().err
    assert sorted(registry.lists_dir("office31").iterdir()) == before
