"""The studies' runs declared as data (studies/catalog.py): every committed run of a study is one its module
declares (so Snakemake knows how to make it again), a run is found by the file it writes, one command makes it, and
Snakemake's dry run lists a study's jobs (workflow/rules/studies.smk)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from studies import __main__ as cli
from studies import catalog, runs
from studies.office31 import declared
from studies.records import ROOT
from tests import hang_guard

COMMITTED = {"results/evidence/runs": ("**/seed*/metrics.json", "**/seed*/prototypes.json", "**/seed*/geometry.json"),
             "results/office31_lite/departures": ("**/seed*/metrics.json",),
             "results/office31_lite/checks": ("**/seed*/metrics.json",),
             "results/office31_lite/diagnosis": ("**/seed*/diagnosis.json",)}


def _targets() -> set[str]:
    return {catalog.target(r) for study in catalog.STUDIES for r in catalog.declared(study)}


def test_every_declared_run_writes_a_file_of_its_own():
    listed = [catalog.target(r) for study in catalog.STUDIES for r in catalog.declared(study)]
    assert len(listed) == len(set(listed))


def test_every_committed_run_of_a_study_is_declared():
    committed = {str(p.relative_to(ROOT)) for folder, patterns in COMMITTED.items() for pattern in patterns
                 for p in (ROOT / folder).glob(pattern)}
    if not committed:
        pytest.skip("no committed runs of the studies")
    # a diagnosis run's own training record lies beside its diagnosis.json
    committed = {p for p in committed if not (p.startswith("results/office31_lite/diagnosis")
                                              and p.endswith("metrics.json"))}
    assert sorted(committed - _targets()) == []


def test_a_run_is_found_by_its_file_or_its_folder():
    run = next(r for r in catalog.declared("lockin") if r.config["method"] == "dmp")
    file = catalog.target(run)
    assert catalog.find(file) == run == catalog.find(str(Path(file).parent)) == catalog.find(ROOT / file)
    with pytest.raises(KeyError, match="no study declares"):
        catalog.find("results/evidence/runs/lockin/demo/partial/solid-outline/dmp/m7/seed0")


def test_a_run_is_made_by_its_kind(monkeypatch):
    """A training run through dmp's Python API, a departure through ``dmp train``'s command line with its words,
    a diagnosis by its own maker; what it reads made first (:func:`studies.catalog.prepare`)."""
    made, words = [], []
    monkeypatch.setattr(catalog, "prepare", lambda r: made.append(("prepare", r.kind)))
    monkeypatch.setattr(catalog, "MAKERS", {k: (lambda r, k=k: made.append((k, r.folder))) for k in catalog.MAKERS})
    departure = next(r for r in declared.departure_runs() if r.folder.parts[0] == "head_frozen")
    assert cli.main(["run", catalog.target(departure)]) == 0
    assert made == [("prepare", "dmp train"), ("dmp train", departure.folder)]
    monkeypatch.setattr("dmp.cli.main", lambda argv: words.append(argv))
    runs.dmp_train(departure)
    assert words[0][:3] == ["train", "--out", str(ROOT / "results/office31_lite/departures" / departure.folder)]
    assert {"dataset=office31_lite0_t128", "backbone_lr_mult=0", "source=amazon", "target=webcam", "setting=vanilla",
            "metric=G", f"method={departure.config['method']}"} <= set(words[0][3:])


def test_the_runs_command_lists_a_part_of_a_study(capsys):
    assert cli.main(["runs", "comparison", "--only", "demo", "--method", "pada"]) == 0
    listed = capsys.readouterr().out.split()
    assert len(listed) == 2 * 3 and all(re.fullmatch(
        r"results/evidence/runs/comparison/demo/partial/solid-(outline|noisy)/pada/default/seed[012]/metrics\.json",
        p) for p in listed)


@pytest.mark.slow
def test_a_dry_run_lists_a_study_s_jobs():
    """Every run of the checks forced: one job each, and no other job (nothing the runs read is a DAG step)."""
    proc = hang_guard.run([sys.executable, "-m", "snakemake", "-n", "-F", "study_office31_checks", "--quiet", "rules"],
                          cwd=ROOT, quiet=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    block = proc.stdout.split("Job stats:")[1]
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M)}
    assert counts == {"studies_run": len(declared.check_runs()), "study_office31_checks": 1,
                      "total": len(declared.check_runs()) + 1}
