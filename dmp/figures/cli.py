"""``dmp figures build NAME`` (also ``python -m dmp.figures build NAME``) writes
``<results>/figures/NAME.{pdf,png,csv}`` from the runs that exist (missing runs are gaps with a note, never an
error); ``caption NAME`` prints the figure's report caption; ``table-html`` renders a table's Markdown files as one
HTML page (the report's view of a table)."""
from __future__ import annotations

import json
from pathlib import Path

from dmp.commands import command_main
from dmp.figures.plan import DEFAULTS_FROM_TABLE
from dmp.io import atomic_write, write_text
from dmp.tables.cli import load_config

FIGURE_FILES = ("pdf", "png", "csv")
# Keys of a suite config that decide a figure: its runs (and their trainer settings) and its labels.
CONFIG_KEYS = ("results", "seeds", "class_labels", "train", "overrides", "demo_data")


def figure_outputs(results: str, names) -> list[str]:
    """The files of figures ``names``: ``<results>/figures/<name>.{pdf,png,csv}``."""
    return [f"{results}/figures/{n}.{ext}" for n in names for ext in FIGURE_FILES]


def table_pages(results: str, tables) -> list[str]:
    """The report's HTML page of each table: ``<results>/tables/<table>.html``."""
    return [f"{results}/tables/{t}.html" for t in tables]


def figure_config(config: dict, name: str) -> dict:
    """The part of a suite config that figure ``name`` needs (the Snakemake rule's parameter: the figure is rebuilt
    when it changes)."""
    part = {k: config[k] for k in CONFIG_KEYS if k in config}
    part["figures"] = {name: config["figures"][name]}
    table = DEFAULTS_FROM_TABLE.get(name)  # the table whose block gives the figure its defaults
    part["tables"] = {table: config["tables"][table]} if table in config.get("tables", {}) else {}
    return part


def figure_config_json(config: dict, name: str) -> str:
    """``figure_config`` as JSON, in the config's key order (the order of the figure's panels and series, as
    ``dmp figures build --config`` reads it)."""
    return json.dumps(figure_config(config, name), separators=(",", ":"))


def build(config: dict, name: str, results: str | None = None, out: str | None = None):
    """Build figure ``name``: returns ``(paths written, data frame)``.  Runs are read from ``<results>/runs``
    (default: the config's ``results``), the files go to ``<out or results>/figures``."""
    from dmp.figures import data, plot
    from dmp.figures.load import RunReader
    from dmp.figures.plan import FigurePlan

    plan = FigurePlan(config)
    spec = plan.spec(name)
    results = results or plan.suite.results
    reader = RunReader(plan.suite, results)
    frame = data.BUILDERS[name](plan, spec, reader)
    frame = frame[[c for c in frame.columns if c != "note"] + ["note"]]
    kwargs = {}
    if name in ("tsne", "interpolation_tsne", "confusion"):
        kwargs["class_order"] = [plan.suite.class_label(spec["dataset"], c)
                                 for c in plan.suite.class_names(spec["dataset"])]
    fig = plot.PLOTS[name](frame, spec, **kwargs)
    out_dir = Path(out or results) / "figures"
    paths = [out_dir / f"{name}.{ext}" for ext in FIGURE_FILES]
    write_text(paths[2], frame.to_csv(index=False, float_format="%.6g", lineterminator="\n"))
    atomic_write(paths[0], lambda fh: fig.savefig(fh, format="pdf", bbox_inches="tight",
                                                  metadata={"CreationDate": None, "Creator": "dmp.figures"}))
    atomic_write(paths[1], lambda fh: fig.savefig(fh, format="png", dpi=150, bbox_inches="tight"))
    import matplotlib.pyplot as plt
    plt.close(fig)
    return paths, frame


def _run(args):
    from dmp.figures.plan import FigurePlan

    if args.figures_command == "table-html":
        from dmp.figures.report import table_page
        print(table_page(args.markdown, args.out))
        return
    config = load_config(args)
    plan = FigurePlan(config)
    names = plan.names if args.figure == "all" else [args.figure]
    for name in names:
        if args.figures_command == "caption":
            from dmp.figures.captions import caption
            print(caption(plan, name))
        else:
            for path in build(config, name, args.results, args.out)[0]:
                print(path)


def add_subparsers(sub) -> None:
    """Adds ``dmp figures {build,caption,table-html}``."""
    from dmp.figures.plan import FIGURES

    figures = sub.add_parser("figures", help="build the paper's figures from the suite's runs", description=__doc__)
    sub = figures.add_subparsers(dest="figures_command", required=True, metavar="COMMAND")
    figures.set_defaults(func=_run)
    for command, text in (("build", "build a figure from the runs that exist"),
                          ("caption", "print a figure's caption (reStructuredText)")):
        p = sub.add_parser(command, help=text, description=text)
        p.add_argument("figure", choices=(*FIGURES, "all"), help="the figure (all: every configured)")
        src = p.add_mutually_exclusive_group(required=True)
        src.add_argument("--config", help="suite config YAML (config/config.yaml, config/demo.yaml)")
        src.add_argument("--config-json", help="the suite config as a JSON string (used by the Snakemake rules)")
        p.add_argument("--results", help="folder holding runs/ (default: the config's 'results')")
        p.add_argument("--out", help="write figures under OUT/figures (default: the results folder)")
    text = "one HTML page of a table's Markdown files (for the report)"
    p = sub.add_parser("table-html", help=text, description=text)
    p.add_argument("markdown", nargs="+", help="Markdown files (the table, then its comparison view)")
    p.add_argument("--out", required=True, help="the HTML file to write")


def main(argv=None):
    """``python -m dmp.figures ARGV``: the same as ``dmp figures ARGV``."""
    command_main("figures", add_subparsers, argv)
