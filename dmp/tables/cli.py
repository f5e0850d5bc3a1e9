"""``dmp tables build TABLE`` (also ``python -m dmp.tables build TABLE``): write
``<results>/tables/TABLE.{md,tex,comparison.md,comparison.csv,card.md,card.tex}`` from the runs that exist, or one row with
``--row DATASET ROW`` (``<results>/tables/rows/TABLE/DATASET/ROW.md``)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from dmp.commands import command_main
from dmp.io import write_text
from dmp.suite import Suite, kinds

# The paper's numbers (dmp/tables/reported.py; pandas, like the table code, is imported only to build a table, so
# that every `dmp` command starts without it).
REPORTED_CSV = Path(__file__).with_name("reported_results.csv")


def build(config: dict, table: str, reported_csv=REPORTED_CSV, results: str | None = None,
          out: str | None = None, row: tuple[str, str] | None = None) -> list[Path]:
    """Build one table (or one of its rows); returns the files written.  Runs are read from
    ``<results>/runs`` (``results`` defaults to the config's), tables go to ``<out or results>/tables``."""
    from dmp.tables.card import card, card_latex, card_markdown
    from dmp.tables.render import comparison_markdown, render, row_label

    results = results or Suite(config).results
    out_dir = Path(out or results) / "tables"
    agg, reported, comp = compared(config, table, reported_csv, results)
    if row is not None:
        block, row_id = row
        sel = (comp["row"] == row_id).to_numpy() & (agg["block"] == block).to_numpy()
        if not sel.any():
            raise KeyError(f"table {table!r} has no row {row_id!r} in block {block!r}")
        text = comparison_markdown(comp[sel].reset_index(drop=True), table, agg.attrs["skipped"])
        path = out_dir / "rows" / table / block / f"{row_id}.md"
        write_text(path, text.replace("ours vs. the paper", f"row {row_label(table, row_id)} ({block})", 1))
        return [path]
    md, tex = render(agg, reported, table)
    report = card(comp)
    files = {f"{table}.md": md, f"{table}.tex": tex,
             f"{table}.comparison.md": comparison_markdown(comp, table, agg.attrs["skipped"]),
             f"{table}.comparison.csv": comp.to_csv(index=False, lineterminator="\n"),
             f"{table}.card.md": card_markdown(report, table), f"{table}.card.tex": card_latex(report, table)}
    for name, text in files.items():
        write_text(out_dir / name, text)
    return [out_dir / name for name in files]


def compared(config: dict, table: str, reported_csv=REPORTED_CSV, results: str | None = None):
    """(aggregated cells, the paper's numbers, the comparison view) of ``table`` from the runs that exist."""
    from dmp.tables.aggregate import aggregate
    from dmp.tables.render import comparison
    from dmp.tables.reported import load_reported

    suite = Suite(config)
    reported = load_reported(reported_csv)
    agg = aggregate(suite, suite.table_cells(table), results or suite.results)
    return agg, reported, comparison(agg, reported)


def headline(config: dict, table: str, block: str | None = None, reported_csv=REPORTED_CSV,
             results: str | None = None) -> str:
    """The Mean column of ``table``'s report card for one block (default: the first) as a short Markdown table: the
    README's headline result, rebuilt from the runs by ``dmp tables headline``."""
    from dmp.tables.card import card, headline as render_headline

    _, _, comp = compared(config, table, reported_csv, results)
    blocks = list(dict.fromkeys(comp["block"]))
    block = block or blocks[0]
    if block not in blocks:
        raise KeyError(f"table {table!r} has no block {block!r} (its blocks: {', '.join(blocks)})")
    return render_headline(card(comp[comp["block"] == block].reset_index(drop=True)), table)


def load_config(args) -> dict:
    """The suite config of ``--config`` (a YAML file) or ``--config-json``, checked as a suite config: an error
    names the file or the option."""
    from dmp.commands import error_message

    where = "--config-json" if args.config_json else args.config
    if args.config_json:
        try:
            config = json.loads(args.config_json)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--config-json: not JSON ({exc})") from None
    else:
        with open(args.config) as fh:
            config = yaml.safe_load(fh)
    try:
        Suite(config)
    except Exception as exc:  # noqa: BLE001 (a value of the wrong kind: say where it came from)
        raise ValueError(f"{where}: {error_message(exc)}") from exc
    return config


def _run(args):
    config = load_config(args)
    tables = [t for t in kinds.names() if t in config["tables"]] if args.table == "all" else [args.table]
    for table in tables:
        for path in build(config, table, args.reported, args.results, args.out,
                          tuple(args.row) if args.row else None):
            print(path)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", choices=(*kinds.names(), "all"), help="paper table to build (all: every configured)")
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="suite config YAML (config/config.yaml, config/demo.yaml)")
    src.add_argument("--config-json", help="the suite config as a JSON string (used by the Snakemake rules)")
    parser.add_argument("--reported", default=str(REPORTED_CSV), help="the paper's numbers (CSV)")
    parser.add_argument("--results", help="folder holding runs/ (default: the config's 'results')")
    parser.add_argument("--out", help="write tables under OUT/tables (default: the results folder)")
    parser.add_argument("--row", nargs=2, metavar=("DATASET", "ROW"), help="only this row, as Markdown")
    parser.set_defaults(func=_run)


def _run_headline(args):
    print(headline(load_config(args), args.table, args.block, args.reported, args.results), end="")


def add_subparsers(sub) -> None:
    """Adds ``dmp tables build`` and ``dmp tables headline``."""
    tables = sub.add_parser("tables", help="build the paper's tables from the suite's runs", description=__doc__)
    inner = tables.add_subparsers(dest="tables_command", required=True, metavar="COMMAND")
    add_arguments(inner.add_parser("build", help="build a table (or one row) from the runs that exist",
                                   description=__doc__))
    p = inner.add_parser("headline", help="print a table's Mean column, ours beside the paper's with a verdict "
                         "(the README's headline result)")
    p.add_argument("table", choices=[n for n in kinds.names() if kinds.get(n).headline],
                   help="the table (a kind of methods by tasks, with a Mean column)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="suite config YAML")
    src.add_argument("--config-json", help="the suite config as a JSON string")
    p.add_argument("--block", help="the table's block (a dataset of the config; default: its first)")
    p.add_argument("--reported", default=str(REPORTED_CSV), help="the paper's numbers (CSV)")
    p.add_argument("--results", help="folder holding runs/ (default: the config's 'results')")
    p.set_defaults(func=_run_headline)


def main(argv=None):
    """``python -m dmp.tables ARGV``: the same as ``dmp tables ARGV``."""
    command_main("tables", add_subparsers, argv)
