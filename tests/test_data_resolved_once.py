"""A dataset is looked up by name once per operation: the entry point (a run's ``build_task``, ``fetch``,
``verify``, ``prepare``, an input cache's ``build``) resolves the name with ``registry.get_dataset`` and hands the
``DatasetSpec`` down; the functions below it (data root, lists, version, arrays, split sizes) never look it up
again."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from data_fixtures import isolated  # noqa: F401 (fixture)

from dmp.config import resolve
from dmp.data import cache, fetch, registry, splits, verify
from dmp.data.demo import generate
from dmp.data.inputs import build_task


@pytest.fixture
def lookups(monkeypatch):
    """The names ``registry.get_dataset`` is asked for (every caller reaches it through the module)."""
    asked, real = [], registry.get_dataset

    def counting(name, *args, **kwargs):
        asked.append(name)
        return real(name, *args, **kwargs)
    monkeypatch.setattr(registry, "get_dataset", counting)
    return asked


def _demo(isolated, per_class=2):
    demo = registry.get_dataset("demo")
    isolated.use(dataclasses.replace(demo, images_per_class=per_class, domains=tuple(
        dataclasses.replace(d, count=per_class * 10) for d in demo.domains)))
    generate(isolated.path / "data" / "demo", per_class=per_class, progress=False)  # DMP_DATA_DIR=<tmp>/data
    splits.prepare("demo", ["full", "partial"])


def test_a_runs_image_data_is_resolved_once(isolated, lookups):
    _demo(isolated)
    for extra in ({}, {"target_split": "partial"}):
        cfg = resolve({"dataset": "demo", "source": "solid", "target": "outline", **extra})
        lookups.clear()
        task = build_task(cfg)
        assert lookups == ["demo"]  # the lists, the version of what it reads, the data root: one lookup
        assert len(task.source_train) == 20 and len(task.target_eval) == (20 if not extra else 10)


def test_a_run_from_the_input_cache_is_resolved_once(isolated, lookups):
    _demo(isolated)
    lookups.clear()
    for d in ("solid", "outline"):
        cache.build("demo", d, 8, progress=False)
    assert lookups == ["demo", "demo"]  # one per build
    cfg = resolve({"dataset": "demo", "source": "solid", "target": "outline", "input_cache": True, "resize": 8,
                   "crop": 8})
    lookups.clear()
    build_task(cfg)
    assert lookups == ["demo"]


def test_fetch_verify_prepare_each_resolve_once_and_the_helpers_never(isolated, lookups):
    _demo(isolated)
    for operation in (lambda: fetch.fetch("demo", progress=False), lambda: verify.verify("demo", progress=False),
                      lambda: splits.prepare("demo", ["full"])):
        lookups.clear()
        operation()
        assert lookups == ["demo"]
    spec = registry.get_dataset("demo")
    lookups.clear()
    lists = list(splits.run_lists(spec, "solid", "full", "outline", "partial").values())
    assert len(registry.dataset_version(spec, lists, content=True)) == 12
    assert splits.split_size(spec, "solid", "partial") == 10  # 5 partial classes x 2 images
    assert registry.require_dataset(spec) == registry.data_root(spec)
    assert lookups == []


def test_a_runs_feature_data_is_resolved_once(isolated, monkeypatch, lookups):
    monkeypatch.delenv("DMP_DATA_DIR")
    root = registry.DATASETS_DIR / "feats"
    (root / "data").mkdir(parents=True)
    for d, n in (("src", 9), ("tgt", 6)):
        np.savez(root / "data" / f"{d}.npz", X=np.arange(n * 4, dtype=np.float32).reshape(n, 4), y=np.arange(n) % 3)
    (root / "dataset.yaml").write_text("kind: features\nclasses: [a, b, c]\ndomains:\n"
                                       "  - {name: src, file: src.npz}\n  - {name: tgt, file: tgt.npz}\n")
    cfg = resolve({"dataset": "feats", "source": "src", "target": "tgt"})
    lookups.clear()
    task = build_task(cfg)
    assert lookups == ["feats"]  # both domains' arrays, their views, the version
    assert len(task.source_train) == 9 and len(task.target_eval) == 6
