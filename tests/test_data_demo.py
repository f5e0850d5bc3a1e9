"""The generated demo dataset: layout, determinism, committed lists, and domains that really differ."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
from data_fixtures import isolated  # noqa: F401 (fixture)

from dmp.data import demo, fetch, registry, splits, verify


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return demo.generate(tmp_path_factory.mktemp("demo") / "data", progress=False)


def _digest(root):
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.png")):
        h.update(p.relative_to(root).as_posix().encode() + p.read_bytes())
    return h.hexdigest()


def test_layout_and_counts(generated):
    from PIL import Image

    spec = registry.get_dataset("demo")
    assert len(spec.domains) >= 3 and len(spec.classes) >= 8
    for d in spec.domains:
        entries = verify.scan_domain(spec, d, generated)  # Office-31 layout: <domain>/images/<class>/<file>
        assert len(entries) == d.count == 300
        verify.check_counts(spec, {d.name: verify.per_class(spec, entries)})
        with Image.open(generated / entries[0][0]) as img:
            assert img.size == (32, 32) and img.mode == "RGB"


def test_generation_is_deterministic(generated, tmp_path):
    again = demo.generate(tmp_path / "again", progress=False)
    assert _digest(again) == _digest(generated)
    assert np.array_equal(np.asarray(demo.render("noisy", "star", 3)), np.asarray(demo.render("noisy", "star", 3)))
    assert not np.array_equal(np.asarray(demo.render("noisy", "star", 3)), np.asarray(demo.render("noisy", "star", 4)))


def test_committed_lists_match_the_generated_data(generated):
    spec = registry.get_dataset("demo")
    for d in spec.domains:
        assert splits.read_list(registry.list_file("demo", d.name)) == verify.scan_domain(spec, d, generated)
        part = splits.read_list(registry.list_file("demo", d.name, "partial"))
        assert sorted({lab for _, lab in part}) == list(range(5)) and len(part) == 150
        n10 = splits.read_list(registry.list_file("demo", d.name, "n10"))
        assert np.bincount([lab for _, lab in n10]).tolist() == [10] * 10


def test_domains_differ_in_style(generated):
    """Simple image statistics separate the domains: colourfulness, local noise and edge sharpness."""
    from PIL import Image

    spec = registry.get_dataset("demo")
    stats = {}
    for d in spec.domains:
        imgs = np.stack([np.asarray(Image.open(generated / p), np.float32)
                         for p, _ in verify.scan_domain(spec, d, generated)])
        colour = np.median(imgs.std(axis=3).mean(axis=(1, 2)))
        diff = np.abs(np.diff(imgs, axis=2)).reshape(len(imgs), -1)
        noise, edge = np.median(diff.mean(axis=1)), np.median(np.percentile(diff, 99, axis=1))
        stats[d.name] = (colour, noise, edge)
    assert stats["blurry"][0] < 0.35 * min(stats[n][0] for n in ("solid", "outline"))  # grey
    assert stats["noisy"][1] > 1.5 * stats["solid"][1]  # textured
    assert stats["blurry"][2] < 0.75 * min(stats[n][2] for n in ("solid", "outline"))  # soft edges


def test_fetch_demo_generates_and_verifies(isolated):
    root = fetch.fetch("demo", progress=False)
    assert (root / "solid" / "images" / "arrow").is_dir()
    assert sum(verify.verify("demo")["outline"].values()) == 300
