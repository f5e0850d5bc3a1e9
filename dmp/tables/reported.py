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
    df, lines = _read(path)
    missing = [c for c in (*KEY, "value", "std", "unit") if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    for col in ("value", "std"):  # a number or empty (NaN)
        num = pd.to_numeric(df[col].where(df[col] != ""), errors="coerce")
        bad = num.isna() & (df[col] != "")
        if bad.any():
            i = int(bad.to_numpy().argmax())
            raise ValueError(f"{path} line {lines[i]}: column {col!r} = {df[col].iloc[i]!r} is not a number")
        df[f"{col}_num"] = num.astype(float)
    dup = df.duplicated(list(KEY))
    if dup.any():
        raise ValueError(f"{path} line {lines[int(dup.to_numpy().argmax())]}: duplicate cells "
                         f"{df.loc[dup, list(KEY)].to_dict('records')[:3]}")
    return df


def _read(path: Path) -> tuple[pd.DataFrame, list[int]]:
    """The CSV's rows as strings under its header, and each row's line number; text that is not UTF-8 or a row
    with another number of fields than the header (which would shift the columns) raises naming the line."""
    import csv
    import io

    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ValueError(f"{path} line {line}: not UTF-8 text (byte {raw[exc.start]:#04x})") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, [])
        rows, lines = [], []
        for row in reader:
            if not any(row):
                continue  # a blank line
            if len(row) != len(header):
                raise ValueError(f"{path} line {reader.line_num}: {len(row)} fields, the header has {len(header)}")
            rows.append(row)
            lines.append(reader.line_num)
    except csv.Error as exc:
        raise ValueError(f"{path} line {reader.line_num}: not CSV ({exc})") from None
    if not header:
        raise ValueError(f"{path}: empty (expected the header line {','.join((*KEY, 'value', 'std', 'unit'))})")
    return pd.DataFrame(rows, columns=header, dtype=str), lines
