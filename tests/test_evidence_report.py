"""docs/evidence.md is what ``python -m studies report`` renders from the committed runs: no number in it was typed
in or left behind by an older run. And the sections of the evidence studies (studies/) on fabricated runs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from studies import comparison, evidence, geometry, prototypes, runs, tables
from studies.records import evidence_runs

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "results" / "evidence" / "runs"
# Lines that depend on this clone rather than on the runs: whether each run's commit is in the clone's history depends
# on how it was cloned.
LOCAL = ("Seeds: ",)


def _stable(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.startswith(LOCAL)]


@pytest.mark.skipif(not RUNS.exists(), reason="no committed evidence runs")
def test_evidence_md_is_rendered_from_the_committed_runs():
    text = evidence.render(evidence_runs(RUNS), prototypes.collect(RUNS), geometry.collect(RUNS), RUNS)
    assert _stable(text) == _stable((ROOT / "docs" / "evidence.md").read_text())


def _runs(study, dataset, method, accs, tasks=("M->U", "U->M")):
    """Rows of :func:`collect`'s frame: ``accs[task index][seed]`` for one method."""
    return [dict(study=study, dataset=dataset, setting="vanilla", variant="default", task=t, method=method, seed=s,
                 accuracy=a, commit="c", dataset_version="v", code_version="c", weights="none")
            for t, row in zip(tasks, accs) for s, a in enumerate(row)]


def test_comparison_section_puts_the_main_study_beside_and_says_where_dmp_loses(monkeypatch):
    """An unbalanced fixture: DMP beats DANN on M->U and loses on U->M; CDAN+E is missing a seed (not shown); the
    main study's seed 3 is not in the comparison (left out of DMP's cells)."""
    import pandas as pd
    rows = (_runs("main", "mnist_usps", "dmp", [[90, 92, 94, 10], [60, 62, 64, 10]])
            + _runs("main", "mnist_usps", "source_only", [[80, 80, 80, 80], [50, 50, 50, 50]])
            + _runs("comparison", "mnist_usps", "dann", [[70, 74, 78], [70, 71, 72]])
            + _runs("comparison", "mnist_usps", "cdan_e", [[99, 99, 99], [99, 99]]))
    quoted = {("mnist_usps", "M->U", "dann"): 77.1, ("mnist_usps", "U->M", "dann"): 73.0}  # a fixture, not the papers'
    monkeypatch.setattr(comparison, "PUBLISHED", quoted)
    monkeypatch.setattr(comparison, "PUBLISHED_SOURCE", {"mnist_usps": "a fixture"})
    lines = comparison.section(pd.DataFrame(rows))
    text = "\n".join(lines)
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert [line.split("|")[1].strip() for line in table] == ["", "Source only", "DMP", "DANN"]  # no CDAN+E row
    dmp = next(line for line in table if line.startswith("| DMP "))
    # DMP over seeds 0..2 only: M->U 92 +- 2, U->M 62 +- 2, Avg (per seed 75, 77, 79) 77 +- 2
    assert [c.strip() for c in dmp.split("|")[2:5]] == ["92.0 ± 2.0", "62.0 ± 2.0", "77.0 ± 2.0"]
    # DANN Avg: per seed 70, 72.5, 75 -> 72.5; DMP - DANN = +4.5; lower on U->M (62 < 71)
    assert "DMP against DANN: Avg +4.5; DMP lower on 1 of 2 tasks (U->M), and on 3 of 6 (task, seed)" in text
    # the published numbers, and ours minus them (DANN M->U 74.0 - 77.1, U->M 71.0 - 73.0)
    assert "DANN M->U 77.1 (ours 74.0, -3.1); DANN U->M 73.0 (ours 71.0, -2.0)" in text
    assert "Highest Avg (77.0): DMP." in text
    assert "CDAN+E" not in text


def test_a_comparison_table_takes_its_base_rows_from_its_own_study_only_where_all_have_run():
    """An unbalanced fixture: the comparison study ran source-only, DMP (No AL) and DMP itself on every task and seed
    of the demo table (code version c, as DANN), but on the digits table its DMP misses seed 2 of U->M. The demo
    table must show its own rows (one version), the digits table the main study's (code version old: flagged), and
    the intro must say which table uses which."""
    import pandas as pd
    demo, old = ("S->N", "S->O"), lambda rows: [dict(r, code_version="old") for r in rows]
    rows = []
    for dataset, tasks in (("demo", demo), ("mnist_usps", ("M->U", "U->M"))):
        rows += (old(_runs("main", dataset, "source_only", [[70, 70, 70], [60, 60, 60]], tasks))
                 + old(_runs("main", dataset, "dmp_no_al", [[80, 80, 80], [70, 70, 70]], tasks))
                 + old(_runs("main", dataset, "dmp", [[90, 92, 94, 10], [60, 62, 64, 10]], tasks))
                 + _runs("comparison", dataset, "source_only", [[71, 71, 71], [61, 61, 61]], tasks)
                 + _runs("comparison", dataset, "dmp_no_al", [[81, 81, 81], [71, 71, 71]], tasks)
                 + _runs("comparison", dataset, "dmp", [[95, 96, 97], [85, 86, 87] if dataset == "demo" else [85, 86]],
                         tasks)
                 + _runs("comparison", dataset, "dann", [[75, 75, 75], [65, 65, 65]], tasks))
    text = "\n".join(comparison.section(pd.DataFrame(rows)))
    intro, demo_md, digits_md = text.split("\n### ")
    assert ("The source-only and DMP rows are this study's own runs of the same tasks, seeds, presets and backbone "
            "weights (`COMPARISON_BASE` in studies/comparison.py, run with the comparison methods) in the table "
            "\"demo, vanilla\", and the main study's runs of the same seeds in the table \"mnist_usps, vanilla\" "
            "(where this study has not run them for every task and seed).") in intro

    def cells(md, name):
        line = next(line for line in md.splitlines() if line.startswith("| ") and line.split("|")[1].strip() == name)
        return [c.strip() for c in line.split("|")[2:5]]
    assert [line.split("|")[1].strip() for line in demo_md.splitlines() if line.startswith("| ")] == [
        "", "Source only", "DMP (No AL)", "DMP", "DANN"]
    # demo: its own DMP runs (S->N 96 +- 1, S->O 86 +- 1; Avg per seed 90, 91, 92), all of one version
    assert cells(demo_md, "DMP") == ["96.0 ± 1.0", "86.0 ± 1.0", "91.0 ± 1.0"]
    assert cells(demo_md, "Source only") == ["71.0 ± 0.0", "61.0 ± 0.0", "66.0 ± 0.0"]
    assert "Every row: data version v; backbone weights sha256 none; code version (hash of dmp/) c." in demo_md
    assert "DMP against DANN: Avg +21.0" in demo_md  # DANN: per seed 70
    # digits: the main study's DMP over seeds 0..2 (92 +- 2, 62 +- 2; Avg 77 +- 2), flagged as of another code version
    assert cells(digits_md, "DMP") == ["92.0 ± 2.0", "62.0 ± 2.0", "77.0 ± 2.0"]
    assert cells(digits_md, "Source only") == ["70.0 ± 0.0", "60.0 ± 0.0", "65.0 ± 0.0"]
    assert "**Not one version: the rows differ in code version (hash of dmp/)**" in digits_md
    assert "- DMP: code version (hash of dmp/) old" in digits_md
    assert "- DANN: code version (hash of dmp/) c" in digits_md


def test_the_comparison_study_runs_its_tables_base_rows_with_the_same_tasks_seeds_and_weights():
    """The comparison study's demo runs: the comparison methods and the source-only and DMP rows of both demo tables,
    every one on the 2 tasks x 3 seeds, with the one weights file, under the study's own folder."""
    jobs = [(r.config, r.folder) for r in comparison.runs() if r.config["dataset"] == "demo"]
    vanilla, partial = ["source_only", "dmp_no_al", "dmp", "dann", "cdan_e"], ["source_only", "dmp", "dmp_ent", "pada"]
    assert {(c["setting"], c["method"]) for c, _ in jobs} == ({("vanilla", m) for m in vanilla}
                                                               | {("partial", m) for m in partial})
    assert len(jobs) == 2 * 3 * (len(vanilla) + len(partial)) == len({out for _, out in jobs})
    assert {c["weights_path"] for c, _ in jobs} == {runs.weights_path("demo")}
    assert {out.parts[0] for _, out in jobs} == {"comparison"}
    assert {(c["source"], c["target"], c["seed"]) for c, _ in jobs if c["method"] == "dmp_ent"} == {
        (s, t, seed) for s, t in (("solid", "outline"), ("solid", "noisy")) for seed in range(3)}


def test_a_data_version_per_task_shared_by_every_row_is_one_version():
    """A run's data version covers the lists it reads: on the demo each task has its own. Rows that share each
    task's version are of one version (named per task); a row of another version on one task only is flagged."""
    import pandas as pd
    per_task = {"S->N": "aaaa", "S->O": "bbbb"}
    rows = [dict(r, dataset_version=per_task[r["task"]]) for m in ("dmp", "pada")
            for r in _runs("comparison", "demo", m, [[90, 91], [80, 81]], ("S->N", "S->O"))]
    assert tables.versions(pd.DataFrame(rows), "method") == ([
        "Every row: data version aaaa (S->N), bbbb (S->O); backbone weights sha256 none; code version (hash of dmp/) "
        "c.", ""], [])
    rows[-1] = dict(rows[-1], dataset_version="cccc")  # PADA, S->O, seed 1
    above, below = tables.versions(pd.DataFrame(rows), "method")
    assert above[0].startswith("**Not one version: the rows differ in data version**")
    assert below == ["- DMP: data version aaaa, bbbb", "- PADA: data version aaaa, bbbb, cccc", ""]


def _write_run(root, study, method, seed, acc, data, code, sha):
    """A metrics.json of the demo's partial S->O task, as a run writes it (the fields the report reads)."""
    import json
    out = root / study / "demo" / "partial" / "solid-outline" / method / "default" / f"seed{seed}"
    out.mkdir(parents=True)
    config = dict(dataset="demo", setting="partial", source="solid", target="outline", method=method, seed=seed,
                  backbone="smallcnn", weights_path="smallcnn_demo.pt")
    (out / "metrics.json").write_text(json.dumps(dict(
        config=config, accuracy=acc, git_commit="0" * 40, dataset_version=data, code_version=code,
        **({"weights_sha256": sha} if sha else {}))))


def test_rows_of_other_data_weights_or_code_are_flagged_row_by_row(tmp_path):
    """Two studies of different versions side by side: the main study's rows (data version aaaa, code version
    c1, weights hash not recorded) and the comparison study's PADA (data version bbbb, code c2, weights 8053...).
    The comparison table must say that its rows differ in all three and give each row's own values."""
    for seed, acc in enumerate((80.0, 90.0)):
        _write_run(tmp_path, "main", "source_only", seed, acc - 10, "aaaa", "c1", None)
        _write_run(tmp_path, "main", "dmp", seed, acc, "aaaa", "c1", None)
        _write_run(tmp_path, "comparison", "pada", seed, acc + 5 * seed, "bbbb", "c2", "80532ca430ff" + "0" * 52)
    text = "\n".join(comparison.section(evidence_runs(tmp_path)))
    assert ("**Not one version: the rows differ in data version, backbone weights sha256, code version (hash of "
            "dmp/)**") in text
    rows = {line.split(":")[0][2:]: line for line in text.splitlines() if line.startswith("- ") and "version" in line}
    assert rows["DMP"] == ("- DMP: data version aaaa; backbone weights sha256 not recorded; code version (hash of "
                           "dmp/) c1")
    assert rows["PADA"] == ("- PADA: data version bbbb; backbone weights sha256 80532ca430ff; code version (hash "
                            "of dmp/) c2")
    # the same rows of one version: one line, no flag
    lines = tables.versions(evidence_runs(tmp_path).query("study == 'main'"), "method")
    assert lines == (["Every row: data version aaaa; backbone weights sha256 not recorded; code version (hash of "
                      "dmp/) c1.", ""], [])


def test_the_weights_line_counts_what_the_runs_recorded():
    """Each file with the sha256 its runs recorded (recorded ones first), runs that recorded none counted apart, and
    runs that load no file (identity backbone) left out."""
    import pandas as pd
    rows = [dict(weights="aaaa", weights_file="cnn.pt")] * 2 + [dict(weights="not recorded", weights_file="cnn.pt")] * 3 \
        + [dict(weights="bbbb", weights_file="gn.pt")] + [dict(weights="none", weights_file="")] * 4
    line = tables.weights_line(pd.DataFrame(rows))[0]
    assert line.endswith("as the runs recorded them: `cnn.pt` sha256 aaaa (2 runs), not recorded (3 runs); `gn.pt` "
                         "sha256 bbbb (1 run). Each table's version line names the file its rows loaded.")
    assert tables.weights_line(pd.DataFrame([dict(weights="none", weights_file="")])) == []


def test_the_prototypes_table_gives_each_row_its_seeds_and_names_the_commits(tmp_path):
    for (task, seed, commit, ncm) in [(("mnist", "usps"), 0, "a" * 40, 90.0), (("mnist", "usps"), 1, "b" * 40, 80.0),
                                      (("usps", "mnist"), 0, "a" * 40, 70.0)]:
        path = tmp_path / "prototypes" / "mnist_usps" / "vanilla" / "-".join(task) / "dmp_no_al" / "default" \
            / f"seed{seed}" / "prototypes.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(dict(
            config=dict(dataset="mnist_usps", source=task[0], target=task[1], seed=seed, backbone="identity"),
            iteration=100, classifier_target=50.0, git_commit=commit, dataset_version="d1",
            layers=[dict(ncm_source=99.0, ncm_target=ncm), dict(ncm_source=98.0, ncm_target=ncm - 10)])))
    import pandas as pd
    no_runs = pd.DataFrame(columns=["study", "setting", "variant", "dataset", "task", "method", "accuracy"])
    lines = prototypes.section(prototypes.collect(tmp_path), no_runs)
    # each row is the mean over its own seeds: M->U over seeds 0, 1 (target NCM 85.0), U->M over seed 0
    assert "| mnist_usps | M->U | 100 | 50.0 | 99.0 / 85.0 | 98.0 / 75.0 | – | – | 2 |" in lines
    assert "| mnist_usps | U->M | 100 | 50.0 | 99.0 / 70.0 | 98.0 / 60.0 | – | – | 1 |" in lines
    assert any(line.endswith(f"Mean over each row's seeds; commits {'a' * 10}, {'b' * 10}.") for line in lines)
