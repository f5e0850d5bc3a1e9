"""studies/prototypes.py (the evidence study "prototypes"): nearest-source-class-mean accuracy per manifold layer at
the intra-class term's start, on a features dataset declared in a temporary registry."""
from __future__ import annotations

import numpy as np
import pytest
from data_fixtures import isolated  # noqa: F401 (fixture)

from dmp.data import registry
from studies import prototypes as study


def _script():
    return study


def _declare(separation: float, n: int = 120, dim: int = 16):
    """Two domains of 3 Gaussian classes; ``separation`` scales the class centres (0: no class structure)."""
    rng = np.random.default_rng(0)
    centres = separation * rng.normal(size=(3, dim))
    root = registry.DATASETS_DIR / "blobs"
    (root / "data").mkdir(parents=True)
    for name, shift in (("src", 0.0), ("tgt", 0.3)):
        y = np.arange(n) % 3
        x = centres[y] + rng.normal(size=(n, dim)) + shift
        np.savez(root / "data" / f"{name}.npz", X=x.astype(np.float32), y=y)
    (root / "dataset.yaml").write_text("kind: features\nclasses: [a, b, c]\ndomains:\n"
                                       "  - {name: src, file: src.npz}\n  - {name: tgt, file: tgt.npz}\n")


@pytest.mark.parametrize("separation, structured", [(4.0, True), (0.0, False)])
def test_nearest_class_means_tell_structured_from_unstructured_features(isolated, monkeypatch, separation,  # noqa: F811
                                                                       structured):
    monkeypatch.delenv("DMP_DATA_DIR")
    _declare(separation)
    out = _script().diagnose(dict(dataset="blobs", source="src", target="tgt", batch_size=20, epochs=4,
                                  intra_start="2ep", seed=0, threads=1))
    assert out["iteration"] == 12  # 2 epochs of ceil(120 / 20) iterations
    assert [layer["dim"] for layer in out["layers"]] == [1024, 512]
    source_ncm = [layer["ncm_source"] for layer in out["layers"]]
    if structured:
        assert min(source_ncm) > 90 and out["classifier_target"] > 80
    else:  # labels independent of the features: about chance (1/3), far below the structured case
        assert max(source_ncm) < 60
    assert out["config"]["method"] == "dmp_no_al" and "git_commit" in out and out["dataset_version"]
