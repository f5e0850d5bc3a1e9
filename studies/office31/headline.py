"""The headline Office-31 form (config/office31_lite.yaml: 224 px crops of 256 px images, EfficientNet-Lite0's head
fine-tuned on its stored trunk, the frozen probe as the floor) as sections of docs/evidence.md: each table (vanilla,
partial) with the paper's rows, the gains and the share of source-only's errors each method removes beside the paper's.

Everything comes from the suite's own table code (``dmp.tables.cli.compared``, the same cells, checks and paper
numbers as ``dmp tables build``) over the committed runs under the config's results folder.

    python -m studies headline            # prints the sections
"""
from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from dmp.metrics import RecordError
from dmp.tables.cli import compared
from dmp.tables.render import gains, gains_markdown, row_label
from studies.office31.absent import absent_lines
from studies.office31.selection import selection_lines
from studies.office31.terms import NEARER_BY
from studies.records import ROOT, records

CONFIG = ROOT / "config" / "office31_lite.yaml"
DEPARTURES = {
    "config/office31_lite_bn_train.yaml": (
        "BatchNorm re-estimated on the training batches",
        "The same form with the head's BatchNorm layers in PyTorch's default mode (`backbone_bn: train`: their "
        "statistics re-estimated on the training batches, so a source-only head keeps the source's statistics and every "
        "adapting method's also blend in the target batches') instead of on their ImageNet statistics; its runs are "
        "config/office31_lite_bn_train.yaml's. The paper does not say which mode it uses."),
    "config/office31_lite_sgd.yaml": (
        "The compared rows with the optimiser of the papers they are cited from",
        "The same form with SGD (momentum 0.9, weight decay 5e-4, lr 0.01 annealed as lr / (1 + 10 p)^0.75, the "
        "backbone at 0.1x) instead of Adam 2e-4: the protocol of the papers the paper's compared rows are cited from, "
        "CDAN's (NeurIPS 2018: the vanilla ResNet-50, DANN and CDAN+E rows) and PADA's (ECCV 2018: the partial "
        "ResNet-50, DANN and PADA rows); its runs are config/office31_lite_sgd.yaml's (the target accuracy logged "
        "every 50 iterations, for this diagnosis only; training unchanged)."),
}
"""A departure's config -> (title, what it changes); its table is printed below the headline's table of each setting
the departure's config has a table for, with the gains over its own source-only where it has that row."""
TITLES = {"vanilla": "Office-31 at the paper's input size, EfficientNet-Lite0 head fine-tuned",
          "partial": "Office-31 partial at the paper's input size, EfficientNet-Lite0 head fine-tuned"}
FORM = ("The paper's six tasks on the 4,110 real Office-31 images at the paper's input size, run through the suite "
        "(config/office31_lite.yaml: `snakemake --cores 2 all_tables --configfile config/office31_lite.yaml`; tables, "
        "their comparison with the paper and report card in `results/office31_224/tables/`): 224 px crops of the images "
        "resized to 256 px, EfficientNet-Lite0 with its ImageNet weights (ImageNet top-1 75.1 %; the paper's ResNet-50: "
        "76.1 %), its head (last 1x1 convolution + BatchNorm, 0.41 M of 3.4 M weights) fine-tuned at 0.1x lr on the "
        "trunk's stored activations of 8 random crops + flips per image (`dmp data extract-features --views 8`), "
        "Office-31's preset for every task and method (Adam 2e-4, batch 50, 40 epochs of the source, lambda1 10, "
        "lambda2 {lambda2}, the intra-class term from epoch 15, anchors every epoch), the last iterate, no target label "
        "for any choice. The frozen probe is source-only with nothing of the backbone fine-tuned (its weights held, its "
        "BatchNorm on the ImageNet statistics): the floor a fine-tuned row is read against.")


def _provenance(results: Path, dataset: str, setting: str) -> tuple[str, int]:
    """(one line: the runs' dataset versions, weights, commits, code versions, run and seed counts; the seed count)."""
    try:
        runs = [m for _, m in records(results / "runs" / dataset / setting, "*/*/*/*/seed*/metrics.json")]
    except RecordError as err:
        raise SystemExit(f"error: {err}") from None
    if not runs:
        return "", 0

    def listed(key, width=None):
        return ", ".join(sorted({str(r.get(key))[:width] if width else str(r.get(key)) for r in runs}))

    seeds = len({r["seed"] for r in runs})
    return (f"Dataset `{dataset}` version {listed('dataset_version')}; weights sha256 {listed('weights_sha256', 12)}; "
            f"commits {listed('git_commit', 10)}; code versions (the hash of dmp/ a run executed) "
            f"{listed('code_version', 12)}; {len(runs)} runs, {seeds} seed{'s' if seeds != 1 else ''}."), seeds


def _cell(mean, std, n):
    if mean != mean:  # NaN: no finished run
        return "–"
    return f"{mean:.1f}" if n < 2 or std != std else f"{mean:.1f} ± {std:.1f}"


def table_lines(comp, table: str, paper_rows: bool = True) -> list[str]:
    """Our rows (mean ± std over seeds per task, Avg) each followed by the paper's row where it prints one (and
    ``paper_rows``)."""
    columns = list(dict.fromkeys(comp["column"]))
    header = ["method", *[c if c != "Mean" else "Avg" for c in columns], "seeds"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row, part in comp.groupby("row", sort=False):
        by = part.set_index("column")
        seeds = int(by.loc[[c for c in columns if c != "Mean"], "seeds"].min())
        ours = [_cell(by.loc[c, "ours"], by.loc[c, "ours_std"], by.loc[c, "seeds"]) for c in columns]
        lines.append(f"| {row_label(table, row)} | " + " | ".join(ours) + f" | {seeds} |")
        if paper_rows and by["paper"].notna().any():
            paper = ["–" if v != v else f"{v:.1f}" for v in by.loc[columns, "paper"]]
            lines.append(f"| {row_label(table, row)}, paper (ResNet-50, reported) | " + " | ".join(paper) + " | |")
    return lines


def section(config_path: Path = CONFIG) -> list[str]:
    """The sections of every table of the config that has finished runs (none: no lines)."""
    config = yaml.safe_load(config_path.read_text())
    results = ROOT / config["results"]
    out = []
    for table in ("vanilla", "partial"):
        if table not in config["tables"]:
            continue
        for dataset in config["tables"][table]["datasets"]:
            provenance, seeds = _provenance(results, dataset, table)
            if not seeds:
                continue
            _, _, comp = compared(config, table, results=str(results))
            comp = comp[comp["block"] == dataset].reset_index(drop=True)
            out += [f"## {TITLES[table]}", "", FORM.format(lambda2="5e3" if table == "vanilla" else "1"), "",
                    provenance + " Rows without \"paper\" are ours: mean ± sample std over the seeds (one seed: the "
                    "value); Avg = the mean over the 6 tasks per seed, then mean ± std; – = no finished run.", "",
                    *table_lines(comp, table), "", *gains_markdown(gains(comp), table)[2:], ""]
            out += departure_lines(dataset, table, comp)
            if table == "partial":
                out += absent_classes(results, dataset, [c for c in dict.fromkeys(comp["column"]) if c != "Mean"])
    return out


def absent_classes(results: Path, dataset: str, tasks: list[str]) -> list[str]:
    """The share of the target predicted as a class it does not have, for the methods of every departure with a
    partial table, in the headline form and in each such departure (:func:`studies.office31.absent.absent_lines`)."""
    forms, methods = {"the headline form": results}, []
    for path, (title, _) in DEPARTURES.items():
        config = yaml.safe_load((ROOT / path).read_text())
        if "partial" in config["tables"]:
            forms[title[0].lower() + title[1:]] = ROOT / config["results"]
            methods += [m for m in config["tables"]["partial"]["methods"] if m not in methods]
    return absent_lines(forms, dataset, methods, tasks) if methods else []


def departure_lines(dataset: str, table: str, headline=None) -> list[str]:
    """Each departure of :data:`DEPARTURES` with a ``table`` of finished runs: what it changes, its provenance, its
    table, its gains over its own source-only where it ran that row, and (``headline``: the headline form's
    comparison frame of the same table) each of its rows' Avg beside the headline form's and the paper's."""
    out = []
    for path, (title, text) in DEPARTURES.items():
        config = yaml.safe_load((ROOT / path).read_text())
        if table not in config["tables"]:
            continue
        results = ROOT / config["results"]
        provenance, seeds = _provenance(results, dataset, table)
        if not seeds:
            continue
        _, _, comp = compared(config, table, results=str(results))
        comp = comp[comp["block"] == dataset]
        ran = comp.groupby("row", sort=False)["seeds"].transform("max") > 0   # rows with a finished run
        comp = comp[ran].reset_index(drop=True)
        out += [f"### {title}", "", text, "", provenance, "", *table_lines(comp, table, paper_rows=False), "",
                *gains_markdown(gains(comp), table)[2:]]
        out += [""] if out[-1] else []
        if headline is not None:
            out += beside_headline(comp, headline, table, title)
        out += selection_lines(results, dataset, table, comp)
    return out


def beside_headline(departure, headline, table: str, title: str) -> list[str]:
    """Each row of a departure with an Avg, beside the headline form's Avg of the same row and the paper's: which of
    the two forms is nearer the paper's number, by more than :data:`NEARER_BY` points (else "neither"). Both Avgs are
    the ``Mean`` cells of the same table code (:func:`dmp.tables.cli.compared`), each over its own form's seeds (both
    counts printed)."""
    lines = []
    for row, part in departure[departure["column"] == "Mean"].groupby("row", sort=False):
        mine = part.iloc[0]
        theirs = headline[(headline["row"] == row) & (headline["column"] == "Mean")]
        if mine["ours"] != mine["ours"] or theirs.empty or theirs.iloc[0]["ours"] != theirs.iloc[0]["ours"]:
            continue
        paper, base = mine["paper"], theirs.iloc[0]
        seeds = f"{int(mine['seeds'])} / {int(base['seeds'])}"
        if paper != paper:
            lines.append(f"| {row_label(table, row)} | {mine['ours']:.1f} | {base['ours']:.1f} | – | – | – | {seeds} |")
            continue
        gap, base_gap = abs(mine["ours"] - paper), abs(base["ours"] - paper)
        near = ("this departure" if gap < base_gap - NEARER_BY else
                "the headline form" if base_gap < gap - NEARER_BY else f"neither (within {NEARER_BY:g} point)")
        lines.append(f"| {row_label(table, row)} | {mine['ours']:.1f} | {base['ours']:.1f} | {paper:.1f} | "
                     f"{mine['ours'] - paper:+.1f} / {base['ours'] - paper:+.1f} | {near} | {seeds} |")
    if not lines:
        return []
    return [f"{title}, beside the headline form (Avg of the 6 tasks; seeds: this departure's / the headline's):", "",
            "| row | this departure | the headline form | paper | diff to the paper | nearer the paper | seeds |",
            "|---|---|---|---|---|---|---|", *lines, ""]


def main(argv=None) -> int:
    argparse.ArgumentParser(prog="python -m studies headline", description=__doc__.split("\n\n")[0]).parse_args(argv)
    print("\n".join(section()))
    return 0

