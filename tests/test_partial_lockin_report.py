"""studies/lockin.py: the lock-in section of docs/evidence.md on fabricated run folders, against counts made
by hand (a collapse threshold on the wrong side, a momentum read from the wrong key, or a confusion rate over the
wrong axis gives other numbers)."""
from __future__ import annotations

import json

from studies import lockin

CLASSES = ["arrow", "circle", "hexagon"]


def _write(root, method, variant, seed, acc, per_class, momentum=None, confusion=None):
    cfg = {"dataset": "demo", "method": method, "seed": seed, "source": "solid", "target": "outline"}
    if momentum is not None:
        cfg["mean_prediction_momentum"] = momentum
    path = root / "lockin/demo/partial/solid-outline" / method / variant / f"seed{seed}" / "metrics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "accuracy": acc, "per_class_accuracy": dict(zip(CLASSES, per_class)), "class_names": CLASSES,
        "confusion_matrix": confusion or [[1, 0, 0], [0, 1, 0], [0, 0, 1]], "dataset_version": "v1",
        "weights_sha256": "a" * 64, "code_version": "c" * 16, "git_commit": "0123456789ab", "config": cfg}))


def test_collapses_per_momentum_and_the_near_pair(tmp_path):
    report = lockin
    _write(tmp_path, "dmp", "m0", 0, 66.7, [100.0, 0.0, 100.0], 0.0)        # circle lost
    _write(tmp_path, "dmp", "m0", 1, 70.0, [100.0, 10.0, 100.0], 0.0)       # at the threshold: collapsed
    _write(tmp_path, "dmp", "m0", 2, 99.0, [100.0, 97.0, 100.0])            # no key: the paper's momentum 0
    _write(tmp_path, "dmp", "m0.9", 0, 90.0, [100.0, 10.5, 100.0], 0.9)     # just above it: not collapsed
    _write(tmp_path, "dmp", "m0.9", 1, 100.0, [100.0, 100.0, 100.0], 0.9)
    # source-only: circle -> hexagon 6 of 20, hexagon -> circle 1 of 10, arrow -> circle 1 of 10
    _write(tmp_path, "source_only", "m0", 0, 80.0, [90.0, 70.0, 90.0], confusion=[[9, 1, 0], [0, 7, 3], [0, 1, 9]])
    _write(tmp_path, "source_only", "m0", 1, 80.0, [100.0, 70.0, 100.0], confusion=[[10, 0, 0], [0, 7, 3], [0, 0, 10]])
    lines = report.section(tmp_path)
    assert "| S->O | 0 (paper) | 78.6 ± 17.8 | 66.7 | 2 of 3 | circle |" in lines
    assert "| S->O | 0.9 | 95.0 ± 7.1 | 90.0 | 0 of 2 | – |" in lines
    # Fisher's exact test on [[2, 1], [0, 2]]: p = 0.4 (hypergeometric: tables at least as extreme, two-sided)
    assert ("Collapsed runs over both tasks: momentum 0: 2 of 3; momentum 0.9: 0 of 2 (against the paper's: Fisher's "
            "exact test p = 0.40).") in lines
    assert ("Source-only on the same seeds confuses, on the target (true -> predicted): circle -> hexagon 30.0 %, "
            "arrow -> circle 5.0 %, hexagon -> circle 5.0 %.") in lines
    assert any("7 runs." in line for line in lines)


def test_no_runs_no_section(tmp_path):
    assert lockin.section(tmp_path) == []
