"""Dataset versions: Office-Home's 2017 release (the paper's) and the current official release are told apart by
their counts; the paper's dataset refuses the newer one, saying what was found and what the paper used, and the
newer one can be selected as the named variant (own counts, lists, lock and version). VisDA's per-class counts are
checked, not only the domain totals."""
from __future__ import annotations

import dataclasses
import shutil

import pytest
from data_fixtures import DEAD, build_packaging, isolated, small_spec  # noqa: F401

from dmp.data import fetch, registry, splits, verify
from dmp.data.registry import FetchError


def test_declared_releases():
    paper, current = registry.get_dataset("officehome"), registry.get_dataset("officehome_15913")
    assert paper.total == 15588 and current.total == 15913
    assert [d.count for d in current.domains] == [2496, 4464, 4503, 4450]
    assert current.variant_of == "officehome" and paper.variant_of is None
    assert current.classes == paper.classes and current.partial_classes == paper.partial_classes
    assert [s.name for s in registry.releases(registry.get_dataset("officehome"))] == ["officehome_15913"]
    new, old = registry.get_dataset("officehome_15913"), registry.get_dataset("officehome")
    assert registry.download_dir(new) == registry.download_dir(old)  # same archives
    assert registry.data_root(new) != registry.data_root(old)
    visda = registry.get_dataset("visda2017")
    for d in visda.domains:
        assert len(d.class_counts) == 12 and sum(d.class_counts) == d.count


def _scaled(isolated):
    """officehome at 2 images per class, the 15,913 release at 3: both registered, offline."""
    urls = lambda a: [f"{DEAD}/{a.filename}"]  # noqa: E731
    paper = isolated.use(small_spec("officehome", 2, urls))
    current = isolated.use(small_spec("officehome_15913", 3, urls))
    return paper, current


def test_the_newer_release_is_refused_with_what_was_found_and_what_the_paper_used(isolated, tmp_path):
    paper, current = _scaled(isolated)
    build_packaging("officehome", "original", registry.download_dir(registry.get_dataset("officehome")),
                    per_class=3)  # the newer one
    with pytest.raises(FetchError) as err:
        fetch.fetch("officehome", progress=False, retries=1)
    msg = str(err.value)
    assert "195 images, expected 130" in msg
    assert "current official release (its ImageInfo.csv lists 15,913 images) (780 images: Art 195" in msg
    assert "the paper used 2017 release (15,588 images; the paper's) (520 images: Art 130" in msg
    assert "python -m dmp data fetch officehome_15913" in msg and "dataset=officehome_15913" in msg
    assert not registry.data_root(registry.get_dataset("officehome")).exists()
    # selected explicitly, the same archive is the variant: its own counts, lists, lock and version
    root = fetch.fetch("officehome_15913", progress=False)
    assert root == registry.data_root(registry.get_dataset("officehome_15913"))
    splits.prepare("officehome_15913", ["full"])
    assert len(splits.read_list(registry.list_file(registry.get_dataset("officehome_15913"), "Real_World"))) == 195
    assert registry.lock_path("officehome_15913").is_file() and not registry.lock_path("officehome").exists()
    assert (registry.dataset_version(registry.get_dataset("officehome_15913"))
            != registry.dataset_version(registry.get_dataset("officehome")))


def test_the_paper_release_is_not_taken_for_the_variant(isolated, tmp_path):
    _scaled(isolated)
    build_packaging("officehome", "tllib", registry.download_dir(registry.get_dataset("officehome")), per_class=2)
    with pytest.raises(FetchError, match=r"These are the counts of 2017 release .*: that is dataset 'officehome'"):
        fetch.fetch("officehome_15913", progress=False, retries=1)
    fetch.fetch("officehome", progress=False)


def test_hand_placed_folders_of_the_newer_release_get_the_same_hint(isolated, tmp_path):
    _scaled(isolated)
    (arc,) = build_packaging("officehome", "original", tmp_path, per_class=3)
    shutil.unpack_archive(arc, tmp_path / "x")
    for d in ("Art", "Clipart", "Product"):
        shutil.move(tmp_path / "x" / "OfficeHomeDataset_10072016" / d,
                    registry.data_root(registry.get_dataset("officehome")) / d)
    shutil.move(tmp_path / "x" / "OfficeHomeDataset_10072016" / "Real World",
                registry.data_root(registry.get_dataset("officehome")) / "Real_World")
    with pytest.raises(ValueError, match="the paper used 2017 release"):
        verify.verify("officehome")


def test_visda_per_class_counts_are_checked(isolated, tmp_path):
    """Right totals, wrong classes: one 'bus' image filed under 'car' is caught."""
    spec = small_spec("visda2017", 2, lambda a: [f"{DEAD}/{a.filename}"])
    spec = isolated.use(dataclasses.replace(spec, domains=tuple(
        dataclasses.replace(d, class_counts=(2, 2, 2, 2) + (2,) * 8) for d in spec.domains)))
    build_packaging("visda2017", "original", tmp_path / "ok", 2)
    root = registry.data_root(registry.get_dataset("visda2017"))
    for arc in (tmp_path / "ok").iterdir():
        shutil.unpack_archive(arc, root)
    verify.verify("visda2017")
    moved = next((root / "train" / "bus").iterdir())
    moved.rename(root / "train" / "car" / moved.name)
    with pytest.raises(ValueError, match=r"24 images.*|per-class counts differ from the published ones: bus: 1 "
                                         r"\(expected 2\), car: 3 \(expected 2\)"):
        verify.verify("visda2017")
    assert sum(spec.domain("synthetic").class_counts) == spec.domain("synthetic").count


@pytest.mark.parametrize("setting", ["vanilla", "partial"])
def test_another_release_trains_with_the_paper_preset_of_its_dataset(setting):
    from dmp.config import resolve
    base = dict(source="Art", target="Clipart", setting=setting)
    paper = resolve(dict(base, dataset="officehome"))
    current = resolve(dict(base, dataset="officehome_15913"))
    assert {k: v for k, v in current.items() if k != "dataset"} == {k: v for k, v in paper.items() if k != "dataset"}
    assert current["lambda2"] == (1.0 if setting == "partial" else 5e3)
