"""The table code against stored reference tables built from fixed metrics files (tests/data), plus direct checks
of the aggregation, the reported rows, missing runs and the comparison view.

The fixtures: tests/data/fixture/runs/**/metrics.json (written once by tests/data/make_fixture_runs.py) and the
reference tables tests/data/reference/tables/* (built once from them, see tests/data/tables_config.yaml)."""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dmp.suite import Run, Suite
from dmp.tables.cli import build
from dmp.tables.render import comparison
from dmp.tables.reported import REPORTED_CSV, load_reported

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
REFERENCE = DATA / "reference" / "tables"
CONFIG = yaml.safe_load((DATA / "tables_config.yaml").read_text())
RUNS_ROOT = str(DATA / "fixture")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("tables")
    for table in CONFIG["tables"]:
        build(CONFIG, table, results=RUNS_ROOT, out=str(out))
    return out / "tables"


def read_csv(path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False, dtype=str)


def md_row(section: str, label: str) -> list[str]:
    """The cells of the Markdown row labelled ``label`` (exactly)."""
    for line in section.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if cells and cells[0] == label:
            return cells[1:]
    raise AssertionError(f"no row {label!r}")


def fixture_values(run: Run, key: tuple[str, ...], seeds=(0, 1, 2)) -> list[float]:
    """Values straight from the fixture files (finished runs only), without the table code."""
    out = []
    for seed in seeds:
        path = Path(run.with_seed(seed).metrics_path(RUNS_ROOT))
        if not path.exists():
            continue
        metrics = json.loads(path.read_text())
        if metrics["status"] != "complete":
            continue
        for k in key:
            metrics = metrics[k]
        out.append(metrics)
    return out


@pytest.mark.parametrize("name", sorted(p.name for p in REFERENCE.iterdir()))
def test_tables_match_the_stored_reference_byte_for_byte(built, name):
    assert (built / name).read_bytes() == (REFERENCE / name).read_bytes(), (
        f"{name} differs from tests/data/reference/tables/{name}; if the change is intended, rebuild the "
        f"reference (see tests/data/tables_config.yaml) and review the diff")


def test_every_table_writes_latex_markdown_and_comparison(built):
    for table in CONFIG["tables"]:
        for ext in ("md", "tex", "comparison.md", "comparison.csv"):
            assert (built / f"{table}.{ext}").is_file()
        tex = (built / f"{table}.tex").read_text()
        assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex


def test_mean_and_std_over_seeds_match_the_fixture_files(built):
    comp = read_csv(built / "vanilla.comparison.csv")
    run = Run("office31", "vanilla", "A->W", "dmp", "G", "full", "full")
    values = fixture_values(run, ("accuracy",))
    assert len(values) == 3
    row = comp[(comp.dataset == "office31") & (comp.row == "dmp") & (comp.column == "A->W")].iloc[0]
    assert float(row.ours) == pytest.approx(statistics.mean(values), abs=1e-4)
    assert float(row.ours_std) == pytest.approx(statistics.stdev(values), abs=1e-4)
    assert f"{statistics.mean(values):.1f}^{{{statistics.stdev(values):.1f}}}" in (built / "vanilla.tex").read_text()


def test_task_mean_is_mean_of_per_seed_task_means(built):
    comp = read_csv(built / "vanilla.comparison.csv")
    tasks = CONFIG["tables"]["vanilla"]["datasets"]["office31"]["tasks"]
    per_seed = []
    for seed in (0, 1, 2):
        vals = [fixture_values(Run("office31", "vanilla", t, "source_only", "G", "full", "full"),
                               ("accuracy",), seeds=(seed,)) for t in tasks]
        per_seed.append(statistics.mean(v[0] for v in vals))
    row = comp[(comp.dataset == "office31") & (comp.row == "source_only") & (comp.column == "Mean")].iloc[0]
    assert float(row.ours) == pytest.approx(statistics.mean(per_seed), abs=1e-4)


def test_visda_mean_is_the_mean_of_class_accuracies_not_overall_accuracy(built):
    comp = read_csv(built / "vanilla.comparison.csv")
    run = Run("visda2017", "vanilla", "S->R", "dmp", "G", "full", "full")
    class_means = fixture_values(run, ("mean_class_accuracy",))
    overall = fixture_values(run, ("accuracy",))
    row = comp[(comp.dataset == "visda2017") & (comp.row == "dmp") & (comp.column == "Mean")].iloc[0]
    assert float(row.ours) == pytest.approx(statistics.mean(class_means), abs=1e-4)
    assert float(row.ours) != pytest.approx(statistics.mean(overall), abs=1e-2)
    plane = comp[(comp.dataset == "visda2017") & (comp.row == "dmp") & (comp.column == "plane")].iloc[0]
    assert float(plane.ours) == pytest.approx(
        statistics.mean(fixture_values(run, ("per_class_accuracy", "aeroplane"))), abs=1e-4)


def test_missing_runs_print_as_a_dash_with_a_footnote_never_zero(built):
    md = (built / "partial.md").read_text()
    visda = md.split("## VisDA-2017")[1]
    assert md_row(visda, "Source only") == ["–"]
    assert "–: no finished run" in md
    comp = read_csv(built / "partial.comparison.csv")
    row = comp[(comp.dataset == "visda2017") & (comp.row == "source_only")].iloc[0]
    assert (row.ours, row.seeds, row.within) == ("", "0", "n/a")
    assert r"--" in (built / "partial.tex").read_text()


def test_unfinished_and_partially_seeded_runs_are_marked(built):
    comp = read_csv(built / "partial.comparison.csv")
    row = comp[(comp.dataset == "office31") & (comp.row == "source_only") & (comp.column == "A->W")].iloc[0]
    assert row.seeds == "2"  # seed 2 has status "running": not counted
    md = (built / "vanilla.md").read_text()
    dmp = md_row(md.split("## Office-31")[1], "DMP")
    assert dmp[2].endswith("†") and not dmp[0].endswith("†")  # W->D: 2 of 3 seeds
    assert "†: mean over fewer seeds" in md


def test_reported_rows_come_from_the_csv_and_are_marked(built):
    reported = load_reported()
    md = (built / "vanilla.md").read_text().split("## Office-31")[1]
    line = md_row(md, "CDAN+E (reported)")
    cdan_e = reported[(reported.table == "vanilla") & (reported.dataset == "office31") & (reported.method == "cdan_e")
                      & (reported.column == "A->W")].iloc[0]
    assert line[0].replace("*", "") == f"{cdan_e.value} ± {cdan_e['std']}"
    assert all("reported" not in c for c in md_row(md, "DMP") + md_row(md, "Source only"))
    # our methods' paper numbers are never shown as rows of the main table (only in the comparison view)
    assert "| DMP (reported)" not in (built / "vanilla.md").read_text()


def test_best_per_column_is_bold(built):
    md = (built / "manifold_ablation.md").read_text()
    lines = [l for l in md.splitlines() if l.startswith("| Vanilla") or l.startswith("| Partial")]
    cells = [[c.strip() for c in l.split("|")[2:-1]] for l in lines]
    for col in range(len(cells[0])):
        values = [float(row[col].split(" ")[0].strip("*")) for row in cells]
        bold = [row[col].startswith("**") for row in cells]
        assert bold == [v == max(values) for v in values]


def _spread_agg(column, mean, std, key_task=None):
    return pd.DataFrame({
        "block": "x", "row": "dmp", "column": column, "group": "", "unit": "%", "derived": False, "mean": mean,
        "std": std, "n": 3, "expected": 3, "key_table": "vanilla", "key_dataset": "office31",
        "key_setting": "vanilla", "key_method": "dmp", "key_variant": "", "key_task": key_task or column,
        "key_column": column})


def test_within_spread_rule():
    agg = _spread_agg(["A->W", "D->W", "W->D"], [93.5, 90.0, 99.0], [0.2, 0.2, float("nan")]).assign(n=[3, 3, 1])
    comp = comparison(agg, load_reported())
    # paper A->W 93.0 (std 0.3): |0.5| <= 2*sqrt(0.04+0.09)+0.05 = 0.77 -> yes; D->W 99.0: no; 1 seed: n/a
    assert list(comp["within"]) == ["yes", "no", "n/a"]
    assert comp["diff"].iloc[0] == pytest.approx(0.5)


@pytest.mark.parametrize("diff, within", [(0.76, "yes"), (-0.76, "yes"), (0.78, "no"), (-0.78, "no")])
def test_within_spread_factor_two_is_pinned(diff, within):
    """Paper A->W 93.0 +- 0.3, ours std 0.2: the bound is 2 * sqrt(0.2^2 + 0.3^2) + 0.05 = 0.771 (a factor 3 would
    give 1.13 and let 0.78 through; a factor 1 would give 0.41 and stop 0.76)."""
    comp = comparison(_spread_agg(["A->W"], [93.0 + diff], [0.2]), load_reported())
    assert comp["within"].iloc[0] == within
    assert comp["tolerance"].iloc[0] == pytest.approx(2 * (0.2 ** 2 + 0.3 ** 2) ** 0.5 + 0.05, abs=1e-4)


@pytest.mark.parametrize("diff, within", [(0.04, "yes"), (0.06, "no")])
def test_within_spread_half_digit_term_is_pinned(diff, within):
    """Paper DMP Office-31 Mean 90.5 has no std: with our std 0 the bound is the half digit, 0.05."""
    paper = _cell_value("vanilla", "office31", "dmp", "Mean")
    comp = comparison(_spread_agg(["Mean"], [paper + diff], [0.0]), load_reported())
    assert comp["within"].iloc[0] == within and comp["tolerance"].iloc[0] == pytest.approx(0.05)


def _cell_value(table, dataset, method, column) -> float:
    rep = load_reported()
    row = rep[(rep.table == table) & (rep.dataset == dataset) & (rep.method == method) & (rep.column == column)]
    assert len(row) == 1 and row["std"].iloc[0] == ""
    return float(row["value"].iloc[0])


def test_row_target_writes_one_row(tmp_path):
    paths = build(CONFIG, "vanilla", results=RUNS_ROOT, out=str(tmp_path), row=("office31", "dmp"))
    text = paths[0].read_text()
    assert paths[0] == tmp_path / "tables" / "rows" / "vanilla" / "office31" / "dmp.md"
    assert text.count("| office31 ") == 4 and "source_only" not in text


@pytest.mark.parametrize("table", list(CONFIG["tables"]))
def test_the_snakemake_rule_and_the_cli_build_the_same_bytes(tmp_path, table):
    """`snakemake table_<t>` builds from the rule's JSON parameter, `python -m dmp.tables build --config` from the
    YAML: one table, whatever the entry point (the fixture config lists office31 after visda2017 and vanilla before
    partial, so a builder that sorted the config's keys would print other rows first)."""
    from dmp.suite import table_config_json

    via_rule = build(json.loads(table_config_json(CONFIG, table)), table, results=RUNS_ROOT, out=str(tmp_path / "a"))
    via_cli = build(CONFIG, table, results=RUNS_ROOT, out=str(tmp_path / "b"))
    assert [p.name for p in via_rule] == [p.name for p in via_cli]
    for a, b in zip(via_rule, via_cli):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_time_table_headers_carry_their_unit(built):
    """s/E and s/B columns told apart where they are read: the unit is in each column's header (the fixture config
    has one column of each); the section names what it holds."""
    text = (built / "time.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("|  "))
    units = {c["task"]: c["unit"] for c in CONFIG["tables"]["time"]["columns"]}
    assert set(units.values()) == {"s/E", "s/B"}
    assert [c.strip() for c in header.strip("|").split("|")][1:] == [f"{t} ({u})" for t, u in units.items()]
    assert "## Per task (vanilla runs)" in text and "all datasets" not in text


def test_reported_csv_is_the_packaged_one():
    """The tables' default CSV is a package data file of the installed package (pyproject's package-data), and the
    one the table builder reads when given none."""
    import importlib.resources
    import inspect
    import tomllib
    from fnmatch import fnmatch

    shipped = importlib.resources.files("dmp.tables") / "reported_results.csv"
    assert REPORTED_CSV.read_bytes() == shipped.read_bytes()
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["dmp"]
    assert any(fnmatch("tables/reported_results.csv", g) for g in globs)
    assert inspect.signature(build).parameters["reported_csv"].default == REPORTED_CSV
    assert load_reported().equals(load_reported(ROOT / "dmp" / "tables" / "reported_results.csv"))


def test_cells_cover_every_configured_column():
    suite = Suite(CONFIG)
    cells = suite.table_cells("interpolation")
    assert len(cells) == len(CONFIG["tables"]["interpolation"]["alphas"]) * (12 + 1)
    assert {c.column for c in cells} >= {"plane", "sktbrd", "Mean"}


def test_a_dataset_without_reported_numbers_renders(built):
    """The demo (or any dataset the paper does not report) has no reported rows: ours only, no crash."""
    from dmp.tables.aggregate import aggregate
    from dmp.tables.render import render

    suite = Suite(CONFIG)
    agg = aggregate(suite, suite.table_cells("vanilla"), RUNS_ROOT)
    md, tex = render(agg, load_reported().iloc[0:0], "vanilla")
    assert "(reported)" not in md and "| DMP " in md and r"\bottomrule" in tex


def _printed_key(note: str, column: str) -> str:
    """The metrics.json key a table note says ``column`` prints (the first one named after '<column>: ')."""
    m = re.search(rf"(?:^|[:;] ){re.escape(column)}: [^;]*?metrics\.json `(\w+)`", note)
    assert m, f"the note does not say which metrics.json value column {column!r} prints: {note!r}"
    return m.group(1)


def _visda_note(text: str, prefix: str = "- ") -> str:
    lines = [l for l in text.splitlines() if l.startswith(f"{prefix}VisDA-2017: ")]
    assert len(lines) == 1, f"expected one VisDA-2017 note, got {lines}"
    return lines[0]


def test_partial_visda_footnote_names_the_metric_it_prints(built):
    """S->R6 (partial): the footnote names the metrics.json value, and the printed number is that value."""
    note = _visda_note((built / "partial.md").read_text())
    key = _printed_key(note, "S->R6")
    assert key == "accuracy"  # overall accuracy over the 6 shared classes' target images
    assert "`mean_class_accuracy`" in note  # ... and it says which one it is not
    assert note[2:] in (built / "partial.tex").read_text()  # the LaTeX notes say the same
    run = Run("visda2017", "partial", "S->R", "dmp_ent", "G", "full", "partial")
    printed, other = fixture_values(run, (key,)), fixture_values(run, ("mean_class_accuracy",))
    comp = read_csv(built / "partial.comparison.csv")
    row = comp[(comp.dataset == "visda2017") & (comp.row == "dmp_ent") & (comp.column == "S->R6")].iloc[0]
    assert float(row.ours) == pytest.approx(statistics.mean(printed), abs=1e-4)
    assert float(row.ours) != pytest.approx(statistics.mean(other), abs=1e-2)  # the fixture tells them apart


def test_vanilla_visda_footnote_names_the_metric_of_the_class_columns_and_the_mean(built):
    text = (built / "vanilla.md").read_text()
    note = _visda_note(text)
    assert _printed_key(note, "Mean") == "mean_class_accuracy"
    assert _printed_key(note, "class columns") == "per_class_accuracy"
    assert note[2:] in (built / "vanilla.tex").read_text()
    # Office-31 (task columns, overall accuracy: the general note) gets no block note of its own
    assert not [l for l in text.splitlines() if l.startswith("- Office-31: ")]


def test_visda_footnote_follows_the_metric_the_cells_read():
    """The note is derived from the cells: make the S->R6 cell read mean_class_accuracy and the note says so."""
    from dataclasses import replace

    from dmp.tables.aggregate import aggregate
    from dmp.tables.render import render

    suite = Suite(CONFIG)
    cells = [replace(c, value=("mean_class_accuracy",)) if c.block == "visda2017" else c
             for c in suite.table_cells("partial")]
    agg = aggregate(suite, cells, RUNS_ROOT)
    md, tex = render(agg, load_reported(), "partial")
    note = _visda_note(md)
    assert _printed_key(note, "S->R6") == "mean_class_accuracy"
    run = Run("visda2017", "partial", "S->R", "dmp_ent", "G", "full", "partial")
    shown = md_row(md.split("## VisDA-2017")[1], "DMP+ent")[0].split(" ")[0].strip("*")
    assert shown == f"{statistics.mean(fixture_values(run, ('mean_class_accuracy',))):.1f}"


def test_damaged_unfinished_and_foreign_metrics_are_skipped_and_named(tmp_path):
    """A metrics.json that is not valid JSON, lacks a finite value the table reads, has no config, or is the run of
    another config (here: a source-only run, or a copy of another seed) is not used, and the footnote says why."""
    import shutil

    shutil.copytree(DATA / "fixture" / "runs", tmp_path / "runs")

    def path(task, method, seed):
        return tmp_path / Run("office31", "vanilla", task, method, "G", "full", "full", seed).metrics_path("")[1:]

    def edit(p, change):
        metrics = json.loads(p.read_text())
        change(metrics)
        p.write_text(json.dumps(metrics))

    edit(path("A->W", "dmp", 0), lambda m: m["config"].update(method="source_only"))
    path("A->W", "dmp", 1).write_text(path("A->W", "dmp", 1).read_text()[:50])
    edit(path("D->W", "dmp", 0), lambda m: m.update(accuracy=float("nan")))
    edit(path("D->W", "source_only", 0), lambda m: m["config"].update(seed=5))
    edit(path("D->W", "source_only", 1), lambda m: m.pop("config"))
    build(CONFIG, "vanilla", results=str(tmp_path), out=str(tmp_path))
    comp = read_csv(tmp_path / "tables" / "vanilla.comparison.csv")
    cell = comp[(comp.dataset == "office31") & (comp.row == "dmp") & (comp.column == "A->W")].iloc[0]
    kept = fixture_values(Run("office31", "vanilla", "A->W", "dmp", "G", "full", "full"), ("accuracy",), seeds=(2,))
    assert cell.seeds == "1" and float(cell.ours) == pytest.approx(kept[0], abs=1e-4)
    rel = "runs/office31/vanilla/{}/{}/G/full-full/seed{}/metrics.json"
    expected = [
        f"Not used: {rel.format('A-W', 'dmp', 0)} (a run of another config: method 'source_only' (expected 'dmp')).",
        f"Not used: {rel.format('A-W', 'dmp', 1)} (unreadable (JSONDecodeError)).",
        f"Not used: {rel.format('D-W', 'dmp', 0)} (accuracy nan is not an accuracy in [0, 100]).",
        f"Not used: {rel.format('D-W', 'source_only', 0)} (a run of another config: seed 5 (expected 0)).",
        f"Not used: {rel.format('D-W', 'source_only', 1)} (no recorded config)."]
    for name, prefix in (("vanilla.md", "- "), ("vanilla.tex", "% "), ("vanilla.comparison.md", "- ")):
        notes = [l for l in (tmp_path / "tables" / name).read_text().splitlines() if "Not used: " in l]
        assert notes == [prefix + n for n in expected], name


def test_a_run_is_used_only_with_the_whole_config_and_values_it_claims(tmp_path):
    """Not only the identity keys: a run with 2 iterations and lambda2 = 0 placed in the DMP folder is not
    DMP; an accuracy outside [0, 100] or a non-finite time is no result. Each is footnoted and left out; a run
    recorded before a key existed (the key absent) is the run at that key's default and is used."""
    import shutil

    shutil.copytree(DATA / "fixture" / "runs", tmp_path / "runs")

    def path(task, method, seed):
        return tmp_path / Run("office31", "vanilla", task, method, "G", "full", "full", seed).metrics_path("")[1:]

    def edit(p, change):
        metrics = json.loads(p.read_text())
        change(metrics)
        p.write_text(json.dumps(metrics))

    edit(path("A->W", "dmp", 0), lambda m: m["config"].update(iterations=2, lambda2=0.0))
    edit(path("A->W", "dmp", 1), lambda m: m.update(accuracy=1234.5))
    edit(path("A->W", "dmp", 2), lambda m: m["config"].pop("anchor_bn"))  # an older record: the default, used
    edit(path("D->W", "dmp", 0), lambda m: m.update(seconds_per_iter=float("inf")))
    edit(path("D->W", "dmp", 1), lambda m: m["per_class_accuracy"].update(back_pack=-3.0))
    edit(path("D->W", "source_only", 0), lambda m: m["config"].update(threads=7, device="cuda"))  # runtime: used
    build(CONFIG, "vanilla", results=str(tmp_path), out=str(tmp_path))
    comp = read_csv(tmp_path / "tables" / "vanilla.comparison.csv")

    def cell(method, task):
        return comp[(comp.dataset == "office31") & (comp.row == method) & (comp.column == task)].iloc[0]

    kept = fixture_values(Run("office31", "vanilla", "A->W", "dmp", "G", "full", "full"), ("accuracy",), seeds=(2,))
    assert cell("dmp", "A->W").seeds == "1" and float(cell("dmp", "A->W").ours) == pytest.approx(kept[0], abs=1e-4)
    assert cell("dmp", "D->W").seeds == "1" and cell("source_only", "D->W").seeds == "3"
    rel = "runs/office31/vanilla/{}/{}/G/full-full/seed{}/metrics.json"
    expected = [
        f"Not used: {rel.format('A-W', 'dmp', 0)} (a run of another config: iterations 2 (expected None), "
        f"lambda2 0.0 (expected 5000.0)).",
        f"Not used: {rel.format('A-W', 'dmp', 1)} (accuracy 1234.5 is not an accuracy in [0, 100]).",
        f"Not used: {rel.format('D-W', 'dmp', 0)} (seconds_per_iter inf is not a finite time >= 0).",
        f"Not used: {rel.format('D-W', 'dmp', 1)} (per_class_accuracy/back_pack -3.0 is not an accuracy in "
        f"[0, 100])."]
    notes = [line for line in (tmp_path / "tables" / "vanilla.md").read_text().splitlines() if "Not used: " in line]
    assert notes == ["- " + n for n in expected]


def _copy_and_edit(tmp_path):
    """A copy of the fixture runs and ``edit(run, seed, change)`` of one run's metrics.json in it."""
    import shutil

    shutil.copytree(DATA / "fixture" / "runs", tmp_path / "runs")

    def edit(run: Run, seed: int, change):
        p = tmp_path / run.with_seed(seed).metrics_path("")[1:]
        metrics = json.loads(p.read_text())
        change(metrics)
        p.write_text(json.dumps(metrics))

    return edit


def _notes(path) -> list[str]:
    return [line for line in Path(path).read_text().splitlines() if "Not used: " in line]


def test_a_missing_key_counts_as_its_default_even_where_the_run_expects_another_value(tmp_path):
    """A key absent from a recorded config is the key's declared default: a partial DMP+ent run lacking ``lambda2``
    ran at the default 5000, not at the partial preset's 1 the table expects, so it is not used (a reader that
    took the missing key for the expected value would table it); lacking ``anchor_bn`` (expected = default) it is."""
    from dmp.config import PARAMS

    assert PARAMS["lambda2"].default == 5000.0  # the independent premise: default != the expected 1.0
    edit = _copy_and_edit(tmp_path)
    run = Run("office31", "partial", "A->W", "dmp_ent", "G", "full", "partial")
    assert fixture_values(run, ("config", "lambda2")) == [1.0, 1.0, 1.0]
    edit(run, 0, lambda m: m["config"].pop("lambda2"))
    edit(run, 1, lambda m: m["config"].pop("anchor_bn"))
    build(CONFIG, "partial", results=str(tmp_path), out=str(tmp_path))
    comp = read_csv(tmp_path / "tables" / "partial.comparison.csv")
    cell = comp[(comp.dataset == "office31") & (comp.row == "dmp_ent") & (comp.column == "A->W")].iloc[0]
    kept = fixture_values(run, ("accuracy",), seeds=(1, 2))
    assert cell.seeds == "2" and float(cell.ours) == pytest.approx(statistics.mean(kept), abs=1e-4)
    rel = "runs/office31/partial/A-W/dmp_ent/G/full-partial/seed0/metrics.json"
    assert f"- Not used: {rel} (a run of another config: lambda2 5000.0 (expected 1.0))." in _notes(
        tmp_path / "tables" / "partial.md")
    assert not [n for n in _notes(tmp_path / "tables" / "partial.md") if "A-W/dmp_ent/G/full-partial/seed1" in n]


def test_a_perfect_accuracy_and_a_zero_time_are_results(tmp_path):
    """100 % (common on Office-31 D->W and W->D), a class at 0 % and a time of 0 s (anchor_seconds of every method
    without anchor refreshes) lie inside the ranges a result may have: the runs are used, the values printed as
    they are, 100.0 bold beside the paper's 100.0 and 0.0 s the best time."""
    edit = _copy_and_edit(tmp_path)
    w_d = Run("office31", "vanilla", "W->D", "dmp", "G", "full", "full")
    a_w = Run("office31", "vanilla", "A->W", "source_only", "G", "full", "full")
    seeds = [s for s in (0, 1, 2) if (tmp_path / w_d.with_seed(s).metrics_path("")[1:]).exists()]
    assert len(seeds) == 2  # the fixture's W->D has 2 of 3 seeds

    def perfect(m):
        m.update(accuracy=100.0, mean_class_accuracy=100.0)
        m["per_class_accuracy"] = {k: 100.0 for k in m["per_class_accuracy"]}

    def zero_time(m):
        m.update(anchor_seconds=0, seconds_per_epoch=0.0)
        m["per_class_accuracy"][next(iter(m["per_class_accuracy"]))] = 0.0  # a class never recognised

    for s in seeds:
        edit(w_d, s, perfect)
    for s in (0, 1, 2):
        edit(a_w, s, zero_time)
    for table in ("vanilla", "time"):
        build(CONFIG, table, results=str(tmp_path), out=str(tmp_path))
        assert not [n for n in _notes(tmp_path / "tables" / f"{table}.md") if "W-D/dmp" in n or "A-W/source" in n]
    comp = read_csv(tmp_path / "tables" / "vanilla.comparison.csv")
    cell = comp[(comp.dataset == "office31") & (comp.row == "dmp") & (comp.column == "W->D")].iloc[0]
    assert (cell.seeds, float(cell.ours), float(cell.ours_std)) == ("2", 100.0, 0.0)
    office = (tmp_path / "tables" / "vanilla.md").read_text().split("## Office-31")[1]
    assert md_row(office, "DMP")[2] == "**100.0** ± 0.0 †"
    assert md_row(office, "CDAN (reported)")[2] == "**100.0** ± 0.0"  # a tie: both bold
    source_only = md_row((tmp_path / "tables" / "time.md").read_text(), "Source only")
    assert source_only[0] == "**0.0** ± 0.0"


def test_weights_at_another_path_are_the_same_weights_only_with_the_same_bytes(tmp_path):
    """A run that recorded another weights file is used only when the recorded sha256 is the expected file's: a copy
    of the weights moved elsewhere is the same run; another file is another run, footnoted."""
    import hashlib

    from dmp.tables.aggregate import read_metrics

    weights, copy, other = (tmp_path / n for n in ("w.pt", "copy.pt", "other.pt"))
    weights.write_bytes(b"weights A")
    copy.write_bytes(b"weights A")
    other.write_bytes(b"weights B")
    run = Run("office31", "vanilla", "A->W", "dmp", "G", "full", "full", 0)
    metrics = json.loads(Path(run.metrics_path(RUNS_ROOT)).read_text())
    expected = {**metrics["config"], "weights_path": str(weights)}

    def verdict(path):
        recorded = {**metrics, "config": {**metrics["config"], "weights_path": str(path)},
                    "weights_sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        (tmp_path / "metrics.json").write_text(json.dumps(recorded))
        return read_metrics(tmp_path / "metrics.json", expected, [("accuracy",)])

    assert verdict(weights)[1] is None and verdict(copy)[1] is None
    assert verdict(copy)[0]["accuracy"] == metrics["accuracy"]
    used, why = verdict(other)
    assert used is None and why.startswith("a run of another config: weights_path '") and "/other.pt' (expected '" in why


def test_weights_file_replaced_at_the_same_path_is_not_the_run_s_weights(tmp_path):
    """A run that loaded ``w.pt`` (its recorded sha256) is refused once ``w.pt`` holds other bytes, at the same path;
    a run that recorded no sha256 cannot be checked and is used as before."""
    import hashlib

    from dmp.tables.aggregate import read_metrics

    weights = tmp_path / "w.pt"
    weights.write_bytes(b"weights A")
    run = Run("office31", "vanilla", "A->W", "dmp", "G", "full", "full", 0)
    metrics = json.loads(Path(run.metrics_path(RUNS_ROOT)).read_text())
    expected = {**metrics["config"], "weights_path": str(weights)}
    recorded = {**metrics, "config": expected, "weights_sha256": hashlib.sha256(b"weights A").hexdigest()}
    (tmp_path / "metrics.json").write_text(json.dumps(recorded))
    assert read_metrics(tmp_path / "metrics.json", expected, [("accuracy",)])[1] is None
    weights.write_bytes(b"weights B, swapped in after the run")
    used, why = read_metrics(tmp_path / "metrics.json", expected, [("accuracy",)])
    assert used is None and f"the run loaded {hashlib.sha256(b'weights A').hexdigest()[:12]}" in why
    unrecorded = {**recorded, "weights_sha256": None}
    (tmp_path / "metrics.json").write_text(json.dumps(unrecorded))
    assert read_metrics(tmp_path / "metrics.json", expected, [("accuracy",)])[1] is None


def test_gains_and_error_shares_are_measured_from_each_blocks_own_source_only():
    """Hand-computed: two blocks of one paper dataset with different source-only Means (70.0 and 50.0); DMP at 85.0
    and 60.0 gains +15.0 (half of source-only's 30 errors) and +10.0 (a fifth of 50); the paper's 76.1 -> 87.4 is
    +11.3, 47.3 % of its errors. A per-task column and a time cell are not Means of accuracy and are left out."""
    from dmp.tables.render import gains, gains_markdown

    rows = []
    for block, so, dmp in (("b1", 70.0, 85.0), ("b2", 50.0, 60.0)):
        for row, ours, paper in (("source_only", so, 76.1), ("dmp", dmp, 87.4), ("frozen_probe", so + 1, None)):
            rows.append({"dataset": "office31", "block": block, "setting": "vanilla", "row": row, "column": "Mean",
                         "unit": "%", "ours": ours, "paper": paper})
        rows.append({"dataset": "office31", "block": block, "setting": "vanilla", "row": "dmp", "column": "A->W",
                     "unit": "%", "ours": 1.0, "paper": 2.0})
    g = gains(pd.DataFrame(rows))
    dmp = g[g["row"] == "dmp"].set_index("block")
    assert list(dmp["gain_ours"]) == pytest.approx([15.0, 10.0])
    assert list(dmp["errors_removed_ours"]) == pytest.approx([50.0, 20.0])
    assert list(dmp["gain_paper"]) == pytest.approx([11.3, 11.3])
    assert dmp["errors_removed_paper"].iloc[0] == pytest.approx(100 * 11.3 / 23.9)
    assert dmp.loc["b1", "diff"] == pytest.approx(-2.4)
    probe = g[g["row"] == "frozen_probe"]
    assert list(probe["gain_ours"]) == pytest.approx([1.0, 1.0]) and probe["gain_paper"].isna().all()
    text = "\n".join(gains_markdown(g, "vanilla"))
    line = next(l for l in text.splitlines() if l.startswith("| b1") and "| DMP " in l)
    assert [c.strip() for c in line.strip("|").split("|")][3:] == ["85.0", "87.4", "-2.4", "+15.0", "+11.3",
                                                                   "+50.0 %", "+47.3 %"]


def test_report_card_verdicts_and_intervals_are_the_stated_ones():
    """Hand-computed: 3 seeds with sample std 1.0 give a 95 % half-width t(0.975, 2) / sqrt(3) = 4.3027 / 1.7321 =
    2.484; a vanilla cell 2.0 points off is reproduced, 2.1 is not; a partial cell 2.9 off is (tolerance 3);
    no run, no paper number and a time cell each get their own verdict and are counted as the summary says."""
    from dmp.tables.card import card, card_markdown

    comp = pd.DataFrame([
        # block, setting, row, column, unit, ours, ours_std, seeds, paper, paper_std, diff
        ("b", "vanilla", "dmp", "A->W", "%", 91.0, 1.0, 3, 93.0, 0.2, -2.0),
        ("b", "vanilla", "dmp", "D->W", "%", 96.9, 0.0, 1, 99.0, 0.1, -2.1),
        ("b", "partial", "dmp", "A->W", "%", 96.1, 0.5, 2, 99.0, 0.0, -2.9),
        ("b", "vanilla", "dann", "A->W", "%", float("nan"), float("nan"), 0, 82.0, 0.4, float("nan")),
        ("b", "vanilla", "frozen_probe", "A->W", "%", 70.0, 0.1, 2, float("nan"), float("nan"), float("nan")),
        ("b", "vanilla", "dmp", "A->W ", "s/E", 5.0, 0.1, 2, 30.0, float("nan"), -25.0)],
        columns=["block", "setting", "row", "column", "unit", "ours", "ours_std", "seeds", "paper", "paper_std", "diff"])
    comp["dataset"] = "office31"
    c = card(comp)
    assert list(c["verdict"]) == ["reproduced", "not reproduced", "reproduced", "not run", "not in the paper",
                                  "not compared"]
    assert c["ci95"].iloc[0] == pytest.approx(4.302653 / 3 ** 0.5, abs=1e-5) and pd.isna(c["ci95"].iloc[1])
    text = card_markdown(c, "vanilla")
    assert "2 of 4 cells the paper prints reproduced, 1 not reproduced, 1 not run." in text
    assert "| 91.0 ± 2.5 | 3       | 93.0 ± 0.2 | -2.0   | reproduced" in text
