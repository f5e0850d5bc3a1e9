"""docs/evidence.md is what scripts/evidence.py renders from the committed runs: no number in it was typed in or left
behind by an older run."""
from __future__ import annotations

from pathlib import Path

import pytest
from scripts_module import load_script

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "results" / "evidence" / "runs"
# Lines that depend on this clone rather than on the runs: the weights files are made on demand (not committed), and
# whether each run's commit is in the clone's history depends on how it was cloned.
LOCAL = ("Pre-trained small CNNs", "Seeds: ")


def _stable(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.startswith(LOCAL)]


@pytest.mark.skipif(not RUNS.exists(), reason="no committed evidence runs")
def test_evidence_md_is_rendered_from_the_committed_runs():
    report = load_script("evidence_report")
    text = report.render(report.collect(RUNS), report.collect_prototypes(RUNS), RUNS.parent / "weights",
                         report.collect_geometry(RUNS))
    assert _stable(text) == _stable((ROOT / "docs" / "evidence.md").read_text())
