#!/usr/bin/env python
"""Extract the paper's reported numbers from its LaTeX source into ``dmp/tables/reported_results.csv``.

Usage (from the project root)::

    .venv/bin/python scripts/extract_reported.py PAPER.tex [--out dmp/tables/reported_results.csv]

The paper's LaTeX source is published on arXiv (2008.10030): https://arxiv.org/abs/2008.10030, "TeX Source" under
"Access Paper" (https://arxiv.org/e-print/2008.10030, a gzipped tar of the .tex files). It is not in this
repository; pass the main .tex file (the one with the tables) as the first argument.
Every number comes from parsing the ``tabular`` environments of five labelled tables; none is
typed in here. This file only holds the *names*: how the paper's row labels, dataset headers and
class headers map to the suite's ids (an unknown label is an error, so a changed paper cannot be
silently mis-mapped).

CSV columns (in this order): ``table,dataset,setting,method,variant,task,column,value,std,unit,source``.
``value``/``std`` are kept exactly as printed (``std`` empty where the paper prints none); cells
printed as ``-`` are omitted. Per-task tables store their "Mean" cell with ``task`` = ``column`` =
``"Mean"``; class-wise VisDA tables use ``task`` = ``"S->R"`` and ``column`` = the class as printed
(lower-cased, e.g. ``plane``, ``bcycl``) or ``"Mean"``.
Read it with ``pandas.read_csv(path, keep_default_na=False)`` so empty ``variant``/``std`` stay ``""``.

Method ids for rows whose method the table does not print:
- manifold_ablation: vanilla rows are ``dmp``; partial rows are ``dmp_ent``, because the paper's
  partial ``G`` row is identical to its DMP+ent ImageCLEF row in tab:4Datasets_partial (the
  vanilla ``G`` row is likewise identical to the vanilla DMP row). tests/test_reported.py checks both.
- sample_size, interpolation: ``dmp`` (vanilla setting, as described in the text).
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = PROJECT_ROOT / "dmp" / "tables" / "reported_results.csv"
ARXIV = ("The paper's LaTeX source: https://arxiv.org/e-print/2008.10030 (arXiv 2008.10030, a gzipped tar; pass its "
         "main .tex file).")

COLUMNS = ("table", "dataset", "setting", "method", "variant", "task", "column", "value", "std", "unit", "source")
KEY = COLUMNS[:7]

METHODS = {
    "ResNet": "source_only", "ResNet-50": "source_only", "ResNet-101": "source_only",
    "DAN": "dan", "DANN": "dann", "JAN": "jan", "CDAN": "cdan", "CDAN+E": "cdan_e",
    "BSP+DANN": "bsp_dann", "BSP+CDAN": "bsp_cdan", "HAFN": "hafn", "SAFN": "safn",
    "PADA": "pada", "SAN": "san", "IWAN": "iwan", "ETN": "etn",
    "DMP": "dmp", "DMP (No AL)": "dmp_no_al", "DMP (No DS)": "dmp_no_ds", "DMP+ent": "dmp_ent",
}
DATASETS = {"VisDA-2017": "visda2017", "Office-Home": "officehome", "ImageCLEF": "imageclef", "Office-31": "office31"}
SETTINGS = {"Vanilla": "vanilla", "Partial": "partial"}
VISDA_CLASSES = ("plane", "bcycl", "bus", "car", "horse", "knife", "mcyle", "person", "plant", "sktbrd", "train",
                 "truck")
VISDA_VANILLA_TASK = "S->R"  # synthetic -> real; the class-wise tables print classes, not the task
UNITS = ("%", "s/E", "s/B")


class ExtractError(ValueError):
    """The LaTeX source does not have the structure this extractor expects."""


# ----------------------------------------------------------------------------- LaTeX helpers
def _brace_group(text: str, start: int) -> tuple[str, int]:
    """Return the content of the ``{...}`` group opening at ``text[start]`` and the index after it."""
    if start >= len(text) or text[start] != "{":
        raise ExtractError(f"expected '{{' at offset {start} in {text!r}")
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1:i], i + 1
    raise ExtractError(f"unbalanced braces in {text!r}")


def _unwrap(text: str, command: str, nargs: int, keep: int) -> str:
    """Replace every ``\\command{a1}...{an}`` by its argument number ``keep`` (0-based; -1 drops it)."""
    pattern = "\\" + command + "{"
    while (pos := text.find(pattern)) >= 0:
        end, args = pos + len(pattern) - 1, []
        for _ in range(nargs):
            arg, end = _brace_group(text, end)
            args.append(arg)
        text = text[:pos] + (args[keep] if keep >= 0 else "") + text[end:]
    return text


def _strip_comments(tex: str) -> str:
    return "\n".join(re.sub(r"(?<!\\)%.*", "", line) for line in tex.splitlines())


def _table_source(tex: str, label: str) -> str:
    """Return the comment-free text of the ``table``/``table*`` environment holding ``\\label{label}``."""
    tex = _strip_comments(tex)
    at = tex.find("\\label{" + label + "}")
    if at < 0:
        raise ExtractError(f"table \\label{{{label}}} not found in the paper source")
    begin = max(tex.rfind("\\begin{table}", 0, at), tex.rfind("\\begin{table*}", 0, at))
    end = tex.find("\\end{table", at)
    if begin < 0 or end < 0:
        raise ExtractError(f"\\label{{{label}}} is not inside a table environment")
    return tex[begin:end]


def _cell_text(cell: str) -> str:
    """Plain text of a header/label cell: formatting, citations and math markers removed."""
    cell = _unwrap(_unwrap(_unwrap(cell, "multirow", 3, 2), "textbf", 1, 0), "textit", 1, 0)
    cell = _unwrap(cell, "cite", 1, -1)
    cell = cell.replace("$\\rightarrow$", "->").replace("\\rightarrow", "->").replace("$", "")
    return " ".join(cell.split())


@dataclass
class Block:
    """One ``\\toprule ... \\bottomrule`` block of a tabular: header rows above the first ``\\hline``."""

    header: list[list[str]] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)


def _split_row(row: str) -> list[str]:
    """Split a tabular row at ``&``, expanding ``\\multicolumn{n}{..}{x}`` into n copies of x."""
    cells: list[str] = []
    for cell in row.split("&"):
        cell = cell.strip()
        if cell.startswith("\\multicolumn{"):
            n, end = _brace_group(cell, len("\\multicolumn"))
            _, end = _brace_group(cell, end)
            content, _ = _brace_group(cell, end)
            cells.extend([content.strip()] * int(n))
        else:
            cells.append(cell)
    return cells


def _blocks(table_tex: str) -> list[Block]:
    """Parse every tabular of a table into header/data blocks (raw LaTeX cells)."""
    blocks: list[Block] = []
    bodies = re.findall(r"\\begin\{tabular\}\{[^}]*\}(.*?)\\end\{tabular\}", table_tex, flags=re.S)
    if not bodies:
        raise ExtractError("no tabular environment found")
    rule = re.compile(r"\s*\\(toprule|bottomrule|midrule|hline)(\[[^\]]*\])?")
    for body in bodies:
        in_header = False
        for chunk in body.split("\\\\"):
            while m := rule.match(chunk):
                if m.group(1) == "toprule":
                    blocks.append(Block())
                    in_header = True
                elif m.group(1) in ("hline", "midrule"):
                    in_header = False
                chunk = chunk[m.end():]
            if chunk.strip():
                if not blocks:
                    raise ExtractError("tabular row before any \\toprule")
                (blocks[-1].header if in_header else blocks[-1].rows).append(_split_row(chunk))
    return blocks


_NUMBER = r"[0-9]+(?:\.[0-9]+)?"


def _number(cell: str) -> tuple[str, str, str] | None:
    """``(value, std, unit)`` of a numeric cell as printed, or ``None`` for a missing entry ``-``."""
    text = _unwrap(_unwrap(cell, "textbf", 1, 0), "textit", 1, 0).replace("$", "").replace(" ", "")
    if text == "-":
        return None
    m = re.fullmatch(rf"({_NUMBER})(?:\^\{{({_NUMBER})\}})?(s/[EB])?", text)
    if not m:
        raise ExtractError(f"cannot read a number from cell {cell!r}")
    return m.group(1), m.group(2) or "", m.group(3) or "%"


def _lookup(mapping: dict[str, str], label: str, what: str) -> str:
    try:
        return mapping[label]
    except KeyError:
        raise ExtractError(f"unknown {what} {label!r}; known: {sorted(mapping)}") from None


# ----------------------------------------------------------------------------- table readers
Record = dict[str, str]


def _record(table: str, label: str, dataset: str, setting: str, method: str, variant: str, task: str,
            column: str, cell: str) -> Record | None:
    parsed = _number(cell)
    if parsed is None:
        return None
    value, std, unit = parsed
    return dict(table=table, dataset=dataset, setting=setting, method=method, variant=variant, task=task,
                column=column, value=value, std=std, unit=unit, source=f"reported: {label}")


def _columns(block: Block) -> list[tuple[str, str, str]]:
    """``(dataset, task, column)`` for each data column of a per-task or class-wise block."""
    labels = [_cell_text(c) for c in block.header[-1]]
    groups = [_cell_text(c) for c in block.header[0]] if len(block.header) > 1 else [labels[0]] * len(labels)
    out = []
    for group, label in zip(groups[1:], labels[1:]):
        dataset = _lookup(DATASETS, group, "dataset header")
        if "->" in label:
            out.append((dataset, label, label))
        elif label == "Mean":
            classwise = any(lab.lower() in VISDA_CLASSES for lab in labels)
            out.append((dataset, VISDA_VANILLA_TASK if classwise else "Mean", "Mean"))
        else:
            out.append((dataset, VISDA_VANILLA_TASK, _lookup({c: c for c in VISDA_CLASSES}, label.lower(), "class")))
    return out


def _comparison(tex: str, label: str, table: str, setting: str) -> list[Record]:
    """tab:4Dataset_vanilla / tab:4Datasets_partial: method rows x (dataset, task) columns."""
    records = []
    for block in _blocks(_table_source(tex, label)):
        cols = _columns(block)
        for row in block.rows:
            method = _lookup(METHODS, _cell_text(row[0]), "method label")
            if len(row) - 1 != len(cols):
                raise ExtractError(f"{label}: row {row[0]!r} has {len(row) - 1} cells, header has {len(cols)}")
            records += [_record(table, label, ds, setting, method, "", task, col, cell)
                        for (ds, task, col), cell in zip(cols, row[1:])]
    return records


def _manifold_ablation(tex: str, label: str = "tab:Manifold_Ablation") -> list[Record]:
    (block,) = _blocks(_table_source(tex, label))
    tasks = [_cell_text(c) for c in block.header[-1]][2:]
    records, setting = [], ""
    for row in block.rows:
        setting = _lookup(SETTINGS, _cell_text(row[0]), "setting") if _cell_text(row[0]) else setting
        method = "dmp" if setting == "vanilla" else "dmp_ent"  # see module docstring
        records += [_record("manifold_ablation", label, "imageclef", setting, method, _cell_text(row[1]),
                            task, task, cell) for task, cell in zip(tasks, row[2:])]
    return records


def _interpolation(tex: str, label: str = "tab:DiscriInterpola") -> list[Record]:
    (block,) = _blocks(_table_source(tex, label))
    block.header = [["VisDA-2017"] + block.header[0][1:]]  # the caption names the dataset
    cols = _columns(block)
    return [_record("interpolation", label, ds, "vanilla", "dmp", "alpha" + _cell_text(row[0]), task, col, cell)
            for row in block.rows for (ds, task, col), cell in zip(cols, row[1:])]


def _sample_size_and_time(tex: str, label: str = "tab:SampleSize&TimeComparison") -> list[Record]:
    sizes, times = _blocks(_table_source(tex, label))
    tasks = [_cell_text(c) for c in sizes.header[0]][1:]
    n_target = [_cell_text(c) for c in sizes.header[1]][1:]
    records = [_record("sample_size", label, "imageclef", "vanilla", "dmp", f"ns{_cell_text(row[0])}_nt{nt}",
                       task, task, cell)
               for row in sizes.rows for task, nt, cell in zip(tasks, n_target, row[1:])]
    datasets = [_lookup(DATASETS, _cell_text(c), "dataset header") for c in times.header[0][1:]]
    tasks = [_cell_text(c) for c in times.header[1][1:]]
    records += [_record("time", label, ds, "vanilla", _lookup(METHODS, _cell_text(row[0]), "method label"), "",
                        task, task, cell)
                for row in times.rows for ds, task, cell in zip(datasets, tasks, row[1:])]
    return records


def extract(tex: str) -> list[Record]:
    """All reported cells of the paper as sorted records; raises ExtractError on duplicates or bad cells."""
    records = (_manifold_ablation(tex) + _comparison(tex, "tab:4Dataset_vanilla", "vanilla", "vanilla")
               + _comparison(tex, "tab:4Datasets_partial", "partial", "partial") + _interpolation(tex)
               + _sample_size_and_time(tex))
    records = [r for r in records if r is not None]
    keys = [tuple(r[k] for k in KEY) for r in records]
    if dupes := sorted({k for k in keys if keys.count(k) > 1}):
        raise ExtractError(f"duplicate keys: {dupes}")
    return sorted(records, key=lambda r: tuple(r[k] for k in KEY))


def write_csv(records: list[Record], out: Path) -> None:
    """Write records atomically (temp file in the same folder, then os.replace)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=out.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(records)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] + " " + ARXIV)
    parser.add_argument("tex", type=Path, help="the paper's main LaTeX file (from its arXiv source)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"CSV to write (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    if not args.tex.is_file():
        parser.error(f"paper source {args.tex} not found. {ARXIV}")
    records = extract(args.tex.read_text(encoding="utf-8"))
    write_csv(records, args.out)
    print(f"wrote {len(records)} reported cells to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
