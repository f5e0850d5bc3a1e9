"""Tests of dmp/tables/reported_results.csv (the paper's reported numbers) and scripts/extract_reported.py."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
CSV = ROOT / "dmp" / "tables" / "reported_results.csv"
SCRIPT = ROOT / "scripts" / "extract_reported.py"
PAPER = ROOT.parent / "shared" / "paper" / "dmp-tpami.tex"

COLUMNS = ["table", "dataset", "setting", "method", "variant", "task", "column", "value", "std", "unit", "source"]
KEY = COLUMNS[:7]
TABLE_LABELS = {
    "vanilla": "tab:4Dataset_vanilla", "partial": "tab:4Datasets_partial",
    "manifold_ablation": "tab:Manifold_Ablation", "interpolation": "tab:DiscriInterpola",
    "sample_size": "tab:SampleSize&TimeComparison", "time": "tab:SampleSize&TimeComparison",
}
METHODS = {"source_only", "dmp", "dmp_no_al", "dmp_no_ds", "dmp_ent", "dan", "dann", "jan", "cdan", "cdan_e",
           "bsp_dann", "bsp_cdan", "hafn", "safn", "pada", "san", "iwan", "etn"}
DATASETS = {"visda2017", "officehome", "imageclef", "office31"}
# Rows of the PAPER whose printed Mean is not the mean of its printed columns by more than rounding explains: each
# printed column is off its true value by at most 0.05 and so is their mean, the printed Mean by another 0.05, so
# |mean of the printed columns - printed Mean| <= 0.10 for a consistent row.  Listed (strict xfail, so a fix of the
# CSV that hides them fails the test) so the discrepancy is visible, never corrected.
PAPER_MEAN_MISMATCHES = {
    ("vanilla", "visda2017", "vanilla", "cdan", ""): "VisDA CDAN: class accuracies average 73.91, printed Mean 73.7",
    ("vanilla", "imageclef", "vanilla", "source_only", ""): "ImageCLEF ResNet-50: tasks average 80.82, printed 80.7",
    ("vanilla", "imageclef", "vanilla", "dmp_no_al", ""): "ImageCLEF DMP (No AL): tasks average 87.17, printed 87.3",
}
MEAN_TOLERANCE = 0.10


def _read() -> pd.DataFrame:
    return pd.read_csv(CSV, keep_default_na=False, dtype={"std": str, "variant": str})


@pytest.fixture(scope="module")
def df() -> pd.DataFrame:
    return _read()


def _load_script():
    """Import scripts/extract_reported.py (not a package) once."""
    if "extract_reported" not in sys.modules:
        spec = importlib.util.spec_from_file_location("extract_reported", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules["extract_reported"] = module  # dataclasses need the module registered
        spec.loader.exec_module(module)
    return sys.modules["extract_reported"]


def _cell(df, **where) -> pd.Series:
    rows = df
    for k, v in where.items():
        rows = rows[rows[k] == v]
    assert len(rows) == 1, f"{where} matched {len(rows)} rows"
    return rows.iloc[0]


# ----------------------------------------------------------------------------- (a) format
def test_columns_and_types(df):
    assert list(df.columns) == COLUMNS
    assert CSV.read_text(encoding="utf-8").splitlines()[0] == ",".join(COLUMNS)
    assert pd.api.types.is_float_dtype(df["value"])
    assert not pd.read_csv(CSV)["value"].isna().any()  # default NaN parsing: every value present
    stds = pd.to_numeric(df.loc[df["std"] != "", "std"])
    assert not stds.isna().any() and (stds >= 0).all()
    for col in ("table", "dataset", "setting", "method", "task", "column", "unit", "source"):
        assert (df[col] != "").all(), f"empty {col}"


def test_no_duplicate_keys_and_sorted(df):
    assert not df.duplicated(KEY).any(), df[df.duplicated(KEY, keep=False)]
    keys = list(df[KEY].itertuples(index=False, name=None))
    assert keys == sorted(keys)


def test_value_sets(df):
    assert set(df["table"]) == set(TABLE_LABELS)
    assert set(df["dataset"]) <= DATASETS
    assert set(df["setting"]) == {"vanilla", "partial"}
    assert set(df["method"]) <= METHODS
    assert set(df["unit"]) == {"%", "s/E", "s/B"}
    assert (df["source"] == "reported: " + df["table"].map(TABLE_LABELS)).all()
    pct = df[df["unit"] == "%"]["value"]
    assert ((pct >= 0) & (pct <= 100)).all()
    assert (df.loc[df["unit"] != "%", "table"] == "time").all()
    variants = {
        "manifold_ablation": {"G", "AG", "LE"},
        "sample_size": {f"ns{s}_nt{t}" for s in (10, 30, 50) for t in (10, 30, 50)},
        "interpolation": {"alpha0", "alpha0.1", "alpha0.3", "alpha0.5"},
    }
    for table, group in df.groupby("table"):
        assert set(group["variant"]) == variants.get(table, {""}), table
    tasks = df[df["column"] != df["task"]]  # class-wise VisDA cells and VisDA Mean
    assert set(tasks["task"]) == {"S->R"} and set(tasks["dataset"]) == {"visda2017"}
    assert (df.loc[df["task"] == "Mean", "column"] == "Mean").all()


def test_expected_row_counts(df):
    counts = df.groupby(["table", "dataset"]).size().to_dict()
    assert counts[("vanilla", "visda2017")] == 11 * 13  # 11 methods x (12 classes + Mean)
    assert counts[("vanilla", "officehome")] == 13 * 13
    assert counts[("vanilla", "office31")] == counts[("vanilla", "imageclef")] == 11 * 7
    assert counts[("partial", "officehome")] == 10 * 13
    assert counts[("partial", "visda2017")] == 10 - 3  # IWAN, SAN, ETN print "-"
    assert counts[("manifold_ablation", "imageclef")] == 2 * 3 * 7
    assert counts[("interpolation", "visda2017")] == 4 * 13
    assert counts[("sample_size", "imageclef")] == 2 * 9
    assert sum(v for (t, _), v in counts.items() if t == "time") == 3 * 4


# ----------------------------------------------------------------------------- (b) spot checks
@pytest.mark.parametrize("where, value, std", [
    (dict(table="vanilla", dataset="office31", method="dmp", column="A->W"), 93.0, "0.3"),
    (dict(table="vanilla", dataset="office31", method="cdan", column="W->D"), 100.0, "0.0"),
    (dict(table="vanilla", dataset="visda2017", method="dmp", column="Mean"), 79.3, ""),
    (dict(table="vanilla", dataset="visda2017", method="bsp_cdan", column="sktbrd"), 77.9, ""),
    (dict(table="vanilla", dataset="visda2017", method="source_only", column="plane"), 55.1, ""),
    (dict(table="vanilla", dataset="imageclef", method="dmp_no_al", column="Mean"), 87.3, ""),
    (dict(table="partial", dataset="officehome", method="dmp_ent", column="Mean"), 73.5, ""),
    (dict(table="partial", dataset="office31", method="dmp", column="A->D"), 95.0, "1.0"),
    (dict(table="partial", dataset="visda2017", method="dmp_ent", column="S->R6"), 72.7, ""),
    (dict(table="manifold_ablation", setting="partial", variant="LE", column="I->P"), 81.0, ""),
    (dict(table="manifold_ablation", setting="vanilla", variant="AG", column="Mean"), 88.9, ""),
    (dict(table="sample_size", variant="ns10_nt30", column="I->P"), 78.4, ""),
    (dict(table="sample_size", variant="ns50_nt10", column="P->I"), 91.4, ""),
    (dict(table="interpolation", variant="alpha0.5", column="plane"), 100.0, ""),
    (dict(table="interpolation", variant="alpha0.1", column="Mean"), 85.1, ""),
])
def test_spot_values(df, where, value, std):
    row = _cell(df, **where)
    assert row["value"] == value and row["std"] == std


def test_time_rows(df):
    assert _cell(df, table="time", dataset="visda2017", method="dmp", task="S->R")[["value", "unit"]].tolist() == [
        0.767, "s/B"]
    assert _cell(df, table="time", dataset="officehome", method="cdan_e", task="Ar->Cl")[["value", "unit"]].tolist() \
        == [72.0, "s/E"]
    assert set(df[df["table"] == "time"]["method"]) == {"source_only", "cdan_e", "dmp"}


def test_missing_entries_are_omitted(df):
    s_r6 = df[df["task"] == "S->R6"]
    assert not {"iwan", "san", "etn"} & set(s_r6["method"])
    assert len(df[(df["method"] == "iwan") & (df["dataset"] == "officehome")]) == 13


def test_manifold_ablation_method_ids_match_main_tables(df):
    """G rows equal the main tables' DMP rows: vanilla -> dmp, partial -> dmp_ent (why the partial id is dmp_ent)."""
    def row(**where):
        sel = df[(df[list(where)] == pd.Series(where)).all(axis=1)]
        return dict(zip(sel["column"], sel["value"]))

    for setting, method in (("vanilla", "dmp"), ("partial", "dmp_ent")):
        ablation = row(table="manifold_ablation", setting=setting, variant="G")
        assert set(df[(df["table"] == "manifold_ablation") & (df["setting"] == setting)]["method"]) == {method}
        assert ablation == row(table=setting, dataset="imageclef", method=method)


# ----------------------------------------------------------------------------- (c) reproducible
@pytest.mark.skipif(not PAPER.is_file(), reason=f"paper source {PAPER} not present")
def test_extractor_reproduces_csv_byte_for_byte(tmp_path):
    out = tmp_path / "reported.csv"
    subprocess.run([sys.executable, str(SCRIPT), str(PAPER), "--out", str(out)], check=True, capture_output=True)
    assert out.read_bytes() == CSV.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["reported.csv"]  # no temp file left behind


def test_extractor_missing_paper_names_the_file(tmp_path):
    missing = tmp_path / "nope.tex"
    res = subprocess.run([sys.executable, str(SCRIPT), str(missing), "--out", str(tmp_path / "x.csv")],
                         capture_output=True, text=True)
    assert res.returncode != 0 and str(missing) in res.stderr
    assert not (tmp_path / "x.csv").exists()


SMALL_TABLE = r"""
\begin{table}\caption{x}\label{tab:small}
\begin{tabular}{c||ccc}
\toprule[1pt]
\multirow{2}{*}{Methods} & \multicolumn{2}{c||}{Office-31} & VisDA-2017 \\
 & A$\rightarrow$W & Mean & S$\rightarrow$R6 \\
\hline
\hline
ResNet-50 \cite{he} & $\textbf{75.6}^{1.1}$ & 75.6 & - \\ % a comment & 1.0
DMP+ent & $ 96.6^{0.9}$ & \textbf{96.6} & 72.7 \\
\bottomrule[1pt]
\end{tabular}
\end{table}
"""


def test_parser_on_small_table():
    ex = _load_script()
    recs = [r for r in ex._comparison(SMALL_TABLE, "tab:small", "partial", "partial") if r]
    got = {(r["method"], r["dataset"], r["task"], r["column"]): (r["value"], r["std"]) for r in recs}
    assert got == {
        ("source_only", "office31", "A->W", "A->W"): ("75.6", "1.1"),
        ("source_only", "office31", "Mean", "Mean"): ("75.6", ""),
        ("dmp_ent", "office31", "A->W", "A->W"): ("96.6", "0.9"),
        ("dmp_ent", "office31", "Mean", "Mean"): ("96.6", ""),
        ("dmp_ent", "visda2017", "S->R6", "S->R6"): ("72.7", ""),
    }


@pytest.mark.parametrize("change, message", [
    (("DMP+ent", "DMP+xyz"), "DMP+xyz"),
    (("72.7", "7x.7"), "7x.7"),
    (("Office-31", "Office-32"), "Office-32"),
    (("tab:small", "tab:other"), "tab:small"),
])
def test_parser_errors_name_the_culprit(change, message):
    ex = _load_script()
    with pytest.raises(ex.ExtractError, match=message.replace("+", r"\+").replace(".", r"\.")):
        ex._comparison(SMALL_TABLE.replace(*change), "tab:small", "partial", "partial")


# ----------------------------------------------------------------------------- (d) internal consistency
def _mean_rows():
    df = _read()
    df = df[df["unit"] == "%"]
    rows = []
    for key, group in df.groupby(["table", "dataset", "setting", "method", "variant"]):
        printed = group[group["column"] == "Mean"]["value"]
        if printed.empty:
            continue
        parts = group[(group["column"] != "Mean") & (group["task"] != "S->R6")]["value"]
        marks = [pytest.mark.xfail(strict=True, reason=f"the paper's printed Mean disagrees with its columns: "
                                   f"{PAPER_MEAN_MISMATCHES[key]}")] if key in PAPER_MEAN_MISMATCHES else []
        rows.append(pytest.param(key, float(printed.iloc[0]), parts.tolist(), marks=marks, id="/".join(key)))
    return rows


@pytest.mark.parametrize("key, printed, parts", _mean_rows())
def test_printed_mean_matches_columns(key, printed, parts):
    assert len(parts) in (6, 12), key
    assert abs(sum(parts) / len(parts) - printed) <= MEAN_TOLERANCE + 1e-9, (key, sum(parts) / len(parts), printed)

