"""The paper's printed numbers (dmp/tables/reported_results.csv, one row per printed cell)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

REPORTED_CSV = Path(__file__).with_name("reported_results.csv")
KEY = ("table", "dataset", "setting", "method", "variant", "task", "column")
# The cell position without the row: where a reported row of a baseline is placed.
PLACE = ("table", "dataset", "setting", "task", "column")


def load_reported(path: str | Path = REPORTED_CSV) -> pd.DataFrame:
    """The reported numbers as strings (exactly as printed), indexed by nothing; ``value_num``/``std_num`` are
    the floats (NaN where empty)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"reported results {path} not found (it ships with the package: "
                                f"dmp/tables/reported_results.csv)")
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in (*KEY, "value", "std", "unit") if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    df["value_num"] = pd.to_numeric(df["value"], errors="raise")
    df["std_num"] = pd.to_numeric(df["std"].replace("", None), errors="raise")
    dup = df.duplicated(list(KEY))
    if dup.any():
        raise ValueError(f"{path}: duplicate cells {df.loc[dup, list(KEY)].to_dict('records')[:3]}")
    return df
