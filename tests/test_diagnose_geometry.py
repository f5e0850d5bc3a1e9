"""studies/geometry.py (the evidence study "geometry"): what a finished run's features say about the two domains."""
from __future__ import annotations

import json

import numpy as np
import pytest

from studies import geometry as study


def _script():
    return study


def _run(tmp_path, hs, ys, ht, yt, batch_size=8):
    (tmp_path / "metrics.json").write_text(json.dumps({"config": {"batch_size": batch_size}}))
    np.savez(tmp_path / "features.npz", source_features=hs, source_labels=ys, target_features=ht, target_labels=yt)
    return tmp_path


def _blobs(rng, n=40, dim=24, classes=4, noise=0.3):
    centres = rng.normal(size=(classes, dim))
    y = np.repeat(np.arange(classes), n // classes)
    return (centres[y] + noise * rng.normal(size=(len(y), dim))).astype(np.float32), y


def test_identical_domains(tmp_path):
    rng = np.random.default_rng(0)
    h, y = _blobs(rng)
    g = _script().geometry(_run(tmp_path, h, y, h, y))
    assert g["class_mean_cosine"] == pytest.approx(1.0)
    assert g["ncm_target"] == 100.0
    assert 0 < g["grassmann"] < 2 * 7  # random batches of one set still differ; at most 2 d' with d' = b_s - 1


def test_swapped_target_classes_are_read(tmp_path):
    """The same features with the target's labels permuted: the class structure disagrees, the subspaces do not."""
    rng = np.random.default_rng(0)
    h, y = _blobs(rng)
    same = _script().geometry(_run(tmp_path, h, y, h, y))
    g = _script().geometry(_run(tmp_path, h, y, h, (y + 1) % 4))
    assert g["ncm_target"] == 0.0 and g["class_mean_cosine"] < 0.5
    assert g["grassmann"] == pytest.approx(same["grassmann"])
