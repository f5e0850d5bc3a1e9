"""The table code against stored reference tables built from fixed metrics files (tests/data), plus direct checks
of the aggregation, the reported rows, missing runs and the comparison view.

The fixtures: tests/data/fixture/runs/**/metrics.json (written once by tests/data/make_fixture_runs.py) and the
reference tables tests/data/reference/tables/* (built once from them, see tests/data/tables_config.yaml)."""
from __future__ import annotations

import json
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


def test_within_spread_rule():
    agg = pd.DataFrame({
        "block": "x", "row": ["dmp"] * 3, "column": ["A->W", "D->W", "W->D"], "group": "", "unit": "%",
        "derived": False, "mean": [93.5, 90.0, 99.0], "std": [0.2, 0.2, float("nan")], "n": [3, 3, 1],
        "expected": 3, "key_table": "vanilla", "key_dataset": "office31", "key_setting": "vanilla",
        "key_method": "dmp", "key_variant": "", "key_task": ["A->W", "D->W", "W->D"],
        "key_column": ["A->W", "D->W", "W->D"]})
    comp = comparison(agg, load_reported())
    # paper A->W 93.0 (std 0.3): |0.5| <= 2*sqrt(0.04+0.09)+0.05 = 0.77 -> yes; D->W 99.0: no; 1 seed: n/a
    assert list(comp["within"]) == ["yes", "no", "n/a"]
    assert comp["diff"].iloc[0] == pytest.approx(0.5)


def test_row_target_writes_one_row(tmp_path):
    paths = build(CONFIG, "vanilla", results=RUNS_ROOT, out=str(tmp_path), row=("office31", "dmp"))
    text = paths[0].read_text()
    assert paths[0] == tmp_path / "tables" / "rows" / "vanilla" / "office31" / "dmp.md"
    assert text.count("| office31 ") == 4 and "source_only" not in text


def test_reported_csv_is_the_packaged_one():
    assert REPORTED_CSV == ROOT / "dmp" / "tables" / "reported_results.csv"


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
