"""Rendering of an aggregated table: LaTeX (booktabs, ``mean^{std}`` as the paper prints it, best per column in
bold), Markdown (tabulate), and the comparison view (ours vs. the paper, difference, within the spread?).

Cells are formatted one by one and laid out with pandas (Styler.to_latex) and tabulate; nothing here joins cells
into rows by hand.
"""
from __future__ import annotations

import math

import pandas as pd
from tabulate import tabulate

from dmp.suite import kinds
from dmp.suite.kinds.base import method_label
from dmp.tables.reported import PLACE

# The paper's row order (reported baselines are sorted by it). A row prints its method's label (method_label: the
# registry's, dmp/methods/, else the paper's name of a row no registered method runs).
ROW_ORDER = ("frozen_probe", "source_only", "source_only_bn", "dan", "dann", "jan", "iwan", "pada", "san", "etn", "cdan", "cdan_e",
             "bsp_dann", "bsp_cdan", "hafn", "safn", "dmp_no_al", "dmp_no_ds", "dmp", "dmp_ent")
DASH = "–"
TOLERANCE_NOTE = ("within spread: |ours - paper| <= 2 * sqrt(std_ours^2 + std_paper^2) + half the paper's last "
                  "printed digit (std = sample std over seeds, ddof=1; the paper's std is 0 where it prints none); "
                  "'n/a' with fewer than 2 finished seeds")


def decimals(unit: str) -> int:
    return 3 if unit == "s/B" else 1


def fmt(x: float, unit: str) -> str:
    return f"{x:.{decimals(unit)}f}"


def row_label(table: str, row: str, tex: bool = False) -> str:
    """How a row id of ``table`` prints (its kind's word: dmp/suite/kinds/)."""
    return kinds.get(table).row_label(row, tex)


def tex_escape(text: str) -> str:
    """Escape a label for LaTeX; '->' becomes an arrow."""
    if text.startswith("$") and text.endswith("$"):
        return text
    for char, repl in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("#", r"\#"), ("_", r"\_"),
                       ("{", r"\{"), ("}", r"\}")):
        text = text.replace(char, repl)
    return text.replace("->", r"$\rightarrow$")


def _entries(agg: pd.DataFrame, reported: pd.DataFrame, table: str, block: str) -> pd.DataFrame:
    """The cells of one block, ours then the reported baselines placed in our columns: columns row, label,
    column, value, std, n, expected, unit, derived, reported."""
    ours = agg[agg["block"] == block]
    entries = pd.DataFrame({
        "row": ours["row"], "label": [row_label(table, r) for r in ours["row"]], "column": ours["column"],
        "value": ours["mean"], "std": ours["std"].where(~ours["derived"]), "n": ours["n"],
        "expected": ours["expected"], "unit": ours["unit"], "derived": ours["derived"], "reported": False})
    place = (ours[[f"key_{k}" for k in PLACE]].set_axis(list(PLACE), axis=1).assign(column_shown=ours["column"])
             .drop_duplicates())
    ours_rows = set(zip(ours["key_method"], ours["key_variant"]))
    base = reported.merge(place, on=list(PLACE))
    # Baselines are whole rows without a variant; variant tables (ablation, sample size, alphas) hold only ours.
    keep = pd.Series([(m, v) not in ours_rows and v == "" for m, v in zip(base["method"], base["variant"])],
                     index=base.index, dtype=bool)
    base = base[keep]
    order = {m: i for i, m in enumerate(ROW_ORDER)}
    base = base.sort_values("method", key=lambda m: m.map(order).fillna(len(order)), kind="stable")
    if len(base):
        base = pd.DataFrame({
            "row": "reported:" + base["method"], "label": [f"{method_label(m)} (reported)"
                                                             for m in base["method"]],
            "column": base["column_shown"], "value": base["value_num"], "std": base["std_num"], "n": 0,
            "expected": 0, "unit": base["unit"], "derived": base["column_shown"] == "Mean", "reported": True})
        entries = pd.concat([base, entries], ignore_index=True)
    return entries.reset_index(drop=True)


def _best(entries: pd.DataFrame, table: str) -> pd.Series:
    """True where a cell is the best of its column (highest accuracy, lowest time), ties included."""
    shown = entries.apply(lambda e: float(fmt(e["value"], e["unit"])) if pd.notna(e["value"]) else math.nan,
                          axis=1)
    best = shown.groupby(entries["column"]).transform(kinds.get(table).best)
    return shown.eq(best) & shown.notna()


def _cell_md(e, bold: bool) -> str:
    if pd.isna(e["value"]):
        return DASH
    text = fmt(e["value"], e["unit"])
    text = f"**{text}**" if bold else text
    if pd.notna(e["std"]):
        text += f" ± {fmt(e['std'], e['unit'])}"
    if not e["reported"] and e["n"] < e["expected"]:
        text += " †"
    return text


def _cell_tex(e, bold: bool) -> str:
    if pd.isna(e["value"]):
        return "--"
    text = fmt(e["value"], e["unit"])
    text = f"\\textbf{{{text}}}" if bold else text
    if pd.notna(e["std"]):
        text += f"^{{{fmt(e['std'], e['unit'])}}}"
    text = f"${text}$"
    if not e["reported"] and e["n"] < e["expected"]:
        text += r"$^\dagger$"
    return text


def _grid(entries: pd.DataFrame, texts: list[str]) -> pd.DataFrame:
    """Rows x columns grid of formatted cells (pandas pivot keeps first-appearance order)."""
    frame = entries.assign(text=texts)
    rows = list(dict.fromkeys(frame["label"]))
    cols = list(dict.fromkeys(frame.sort_values("reported", kind="stable")["column"]))  # our column order
    grid = frame.pivot(index="label", columns="column", values="text").reindex(index=rows, columns=cols)
    return grid.fillna(DASH)


def _unit_headers(entries: pd.DataFrame, table: str) -> dict[str, str]:
    """Column headers with their unit, ``A->W (s/E)``, for a table whose kind says so (the time table: s/E and s/B
    columns told apart where they are read)."""
    if not kinds.get(table).unit_headers:
        return {}
    return {col: f"{col} ({unit})" for col, unit in dict(zip(entries["column"], entries["unit"])).items()}


def notes(agg: pd.DataFrame, table: str, any_reported: bool) -> list[str]:
    """The notes under a table: missing runs and seeds, how ours and the reported rows are printed, then the notes of
    its kind (dmp/suite/kinds/) and the metrics.json files not used."""
    out = []
    if (agg["n"] == 0).any():
        out.append(f"{DASH}: no finished run ({int((agg['n'] == 0).sum())} cell(s); run the table's target, "
                   f"or the row's, to fill them).")
    if ((agg["n"] > 0) & (agg["n"] < agg["expected"])).any():
        out.append("†: mean over fewer seeds than configured (some runs missing).")
    out.append(f"Ours: mean ± sample std (ddof=1) over {int(agg['expected'].max())} seed(s) of our runs; "
               "bold: best in the column (highest accuracy, lowest time) among the rows shown.")
    if any_reported:
        out.append("(reported): copied from the paper (dmp/tables/reported_results.csv), not rerun by us.")
    return out + kinds.get(table).notes(agg) + skipped_notes(agg.attrs.get("skipped", {}))


def skipped_notes(skipped: dict[str, str]) -> list[str]:
    """One note per metrics.json the table did not use (damaged, unfinished or of another run), saying why."""
    return [f"Not used: {path} ({why})." for path, why in sorted(skipped.items())]


def render(agg: pd.DataFrame, reported: pd.DataFrame, table: str) -> tuple[str, str]:
    """(Markdown, LaTeX) of a whole table, one sub-table per block (dataset)."""
    kind = kinds.get(table)
    md, tex, any_reported = [f"# {kind.title}", ""], [f"% {kind.title} (generated by python -m dmp.tables)"], False
    for block in dict.fromkeys(agg["block"]):
        entries = _entries(agg, reported, table, block)
        any_reported |= bool(entries["reported"].any())
        best = _best(entries, table)
        name = kind.block_label(block)
        md_grid = _grid(entries, [_cell_md(e, b) for (_, e), b in zip(entries.iterrows(), best)])
        md_grid = md_grid.rename(columns=_unit_headers(entries, table))
        md += [f"## {name}", "", tabulate(md_grid, headers=[""] + list(md_grid.columns), tablefmt="github",
                                          disable_numparse=True), ""]
        tex_grid = _grid(entries, [_cell_tex(e, b) for (_, e), b in zip(entries.iterrows(), best)])
        tex_grid = tex_grid.rename(columns=_unit_headers(entries, table))
        tex_grid.index = [tex_escape(l) if not l.startswith("$") else l for l in tex_grid.index]
        tex_grid.columns = [tex_escape(c) for c in tex_grid.columns]
        tex_grid.columns.name = tex_escape(name)
        body = tex_grid.style.to_latex(hrules=True, column_format="l" + "c" * tex_grid.shape[1])
        tex += [r"\begin{table}[t]", r"\centering", f"\\caption{{{tex_escape(kind.title)}: {tex_escape(name)}}}",
                body.rstrip(), r"\end{table}", ""]
    foot = notes(agg, table, any_reported)
    md += [f"- {n}" for n in foot]
    tex += [r"% Notes:"] + [f"% {n}" for n in foot]
    return "\n".join(md) + "\n", "\n".join(tex) + "\n"


def comparison(agg: pd.DataFrame, reported: pd.DataFrame) -> pd.DataFrame:
    """Our cells beside the paper's: ours mean/std/seeds, paper value/std, diff = ours - paper, tolerance and
    ``within`` (yes / no / n/a), as defined in :data:`TOLERANCE_NOTE`."""
    keys = [f"key_{k}" for k in ("table", "dataset", "setting", "method", "variant", "task", "column")]
    paper = reported.set_axis([f"key_{c}" if f"key_{c}" in keys else c for c in reported.columns], axis=1)
    merged = agg.merge(paper[keys + ["value", "value_num", "std_num"]], on=keys, how="left")
    places = [int(len(v.split(".")[1])) if isinstance(v, str) and "." in v else 0 for v in merged["value"]]
    tol = 2 * (merged["std"].fillna(0) ** 2 + merged["std_num"].fillna(0) ** 2) ** 0.5 + \
        pd.Series([0.5 * 10 ** -p for p in places], index=merged.index)
    diff = merged["mean"] - merged["value_num"]
    within = pd.Series("n/a", index=merged.index)
    ok = merged["n"].ge(2) & diff.notna()
    within[ok] = ["yes" if d <= t else "no" for d, t in zip(diff[ok].abs(), tol[ok])]
    return pd.DataFrame({
        "dataset": merged["key_dataset"], "setting": merged["key_setting"], "row": merged["row"],
        "column": merged["column"], "unit": merged["unit"], "ours": merged["mean"].round(4),
        "ours_std": merged["std"].round(4), "seeds": merged["n"], "paper": merged["value_num"],
        "paper_std": merged["std_num"], "diff": diff.round(4), "tolerance": tol.where(ok).round(4),
        "within": within, "block": merged["block"]})


def side_by_side(comp: pd.DataFrame, table: str, spread: str) -> dict[str, list]:
    """The printed columns of ours beside the paper's, cell by cell: ``row`` label, ``column``, ``ours`` (mean ±
    ``comp[spread]``), ``seeds``, ``paper`` (value ± its printed std) and ``diff``; a dash where there is no number."""
    def num(x, unit):
        return DASH if pd.isna(x) else fmt(x, unit)

    def pm(values, spreads):
        return [num(m, u) if pd.isna(s) else f"{num(m, u)} ± {num(s, u)}"
                for m, s, u in zip(values, spreads, comp["unit"])]

    return {"row": [row_label(table, r) for r in comp["row"]], "column": list(comp["column"]),
            "ours": pm(comp["ours"], comp[spread]), "seeds": list(comp["seeds"].astype(str)),
            "paper": pm(comp["paper"], comp["paper_std"]),
            "diff": [DASH if pd.isna(d) else f"{d:+.{decimals(u)}f}" for d, u in zip(comp["diff"], comp["unit"])]}


def comparison_markdown(comp: pd.DataFrame, table: str, skipped: dict[str, str] | None = None) -> str:
    """The comparison view as Markdown, one line per cell we run (``skipped``: see :func:`skipped_notes`)."""
    shown = pd.DataFrame({"dataset": comp["dataset"], "setting": comp["setting"],
                          **side_by_side(comp, table, "ours_std"), "within spread": comp["within"]})
    lines = [f"# {kinds.get(table).title}: ours vs. the paper", "",
             tabulate(shown, headers="keys", tablefmt="github", showindex=False, disable_numparse=True), "",
             f"- {TOLERANCE_NOTE}.", f"- {DASH}: no finished run, or no number printed in the paper."]
    lines += [f"- {n}" for n in skipped_notes(skipped or {})]
    extra = gains_markdown(gains(comp), table)
    lines += [""] + extra if extra else []
    return "\n".join(lines) + "\n"


BASELINE = "source_only"  # the row gains and error shares are measured from (the paper's "ResNet" rows)
GAINS_NOTE = ("gain: the row's Mean minus source-only's Mean, ours from our runs, the paper's from its printed Means; "
              "errors removed: the gain as a share of source-only's errors, gain / (100 - source-only's Mean), a "
              "comparison that a stronger or weaker baseline does not distort")


def gains(comp: pd.DataFrame) -> pd.DataFrame:
    """Per block (our dataset block, setting) that has a source-only row, each row's Mean beside the paper's, then its gain
    over source-only and the share of source-only's errors it removes (:data:`GAINS_NOTE`), ours and the paper's.
    Accuracy ("%") Means only; a value the paper does not print (or a run not finished) is NaN."""
    means = comp[(comp["column"] == "Mean") & (comp["unit"] == "%")]
    out = []
    for (_, setting), block in means.groupby(["block", "setting"], sort=False):
        base = block[block["row"] == BASELINE]
        if base.empty:
            continue
        so_ours, so_paper = float(base["ours"].iloc[0]), float(base["paper"].iloc[0])
        for _, r in block.iterrows():
            if r["row"] == BASELINE:
                continue
            g_ours, g_paper = r["ours"] - so_ours, r["paper"] - so_paper
            out.append({"dataset": r["dataset"], "block": r["block"], "setting": setting, "row": r["row"], "ours": r["ours"],
                        "paper": r["paper"], "diff": r["ours"] - r["paper"], "gain_ours": g_ours,
                        "gain_paper": g_paper, "errors_removed_ours": 100 * g_ours / (100 - so_ours),
                        "errors_removed_paper": 100 * g_paper / (100 - so_paper)})
    cols = ["dataset", "block", "setting", "row", "ours", "paper", "diff", "gain_ours", "gain_paper", "errors_removed_ours",
            "errors_removed_paper"]
    return pd.DataFrame(out, columns=cols)


def gains_markdown(table_gains: pd.DataFrame, table: str) -> list[str]:
    """The gains view as Markdown lines (empty when no block has a source-only row)."""
    if table_gains.empty:
        return []

    def sig(x, pct=False):
        return DASH if pd.isna(x) else f"{x:+.1f}" + (" %" if pct else "")

    shown = pd.DataFrame({
        "block": table_gains["block"], "setting": table_gains["setting"],
        "row": [row_label(table, r) for r in table_gains["row"]],
        "Mean, ours": [DASH if pd.isna(x) else f"{x:.1f}" for x in table_gains["ours"]],
        "Mean, paper": [DASH if pd.isna(x) else f"{x:.1f}" for x in table_gains["paper"]],
        "diff": [sig(x) for x in table_gains["diff"]],
        "gain, ours": [sig(x) for x in table_gains["gain_ours"]],
        "gain, paper": [sig(x) for x in table_gains["gain_paper"]],
        "errors removed, ours": [sig(x, True) for x in table_gains["errors_removed_ours"]],
        "errors removed, paper": [sig(x, True) for x in table_gains["errors_removed_paper"]]})
    return ["## Gains over source-only", "",
            tabulate(shown, headers="keys", tablefmt="github", showindex=False, disable_numparse=True), "",
            f"- {GAINS_NOTE}."]

