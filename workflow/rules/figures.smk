# Figures: one target per figure (figure_<name>) writing results/figures/<name>.{pdf,png,csv}, built by
# `python -m dmp.figures build NAME` from the runs' files; which runs each figure needs is decided by
# dmp/figures/plan.py.  The figure code is an input, so editing it redraws the figures without rerunning training.
#
# Figure runs whose trainer settings differ from the suite's for that run (a point of the lambda grid, another k, the
# accuracy log of the convergence plot) are *variant* runs, trained by rule train_variant (rule train with the
# variant's folder: .../<source>-<target>/<variant>/seed<k>/); every other figure run is the tables' run.
#
# Report: the figures (PNG, and their CSV) and an HTML page of each table (rule table_html) are marked with report(),
# so `snakemake --report results/report.html` (or .zip) after `snakemake all` shows every table and figure.
from dmp.figures import plan as figure_plan_lib
from dmp.figures.captions import caption as figure_caption
from dmp.figures.cli import figure_config_json, figure_outputs, table_pages

try:
    FIGURE_PLAN = figure_plan_lib.FigurePlan(SUITE)
    FIGURE_PLAN.validate()
except ValueError as err:  # a config error: its message alone (it names the key), no traceback
    raise WorkflowError(str(err)) from None
FIGURE_CODE = sorted(str(p) for p in Path("dmp/figures").glob("*.py")) + SUITE_CODE


localrules:
    figure,
    table_html,


use rule train as train_variant with:
    output:
        suite_lib.VARIANT_RUN_PATTERN.replace("{results}", RESULTS),
    log:
        train_job_log(suite_lib.VARIANT_RUN_PATTERN),
    benchmark:
        suite_lib.VARIANT_RUN_PATTERN.replace("{results}", RESULTS).replace("metrics.json", "benchmark.tsv")
    wildcard_constraints:
        dataset="[A-Za-z0-9_]+",
        setting="vanilla|partial",
        task="[A-Za-z0-9]+-[A-Za-z0-9]+",
        method="[a-z_]+",
        metric="G|AG|LE",
        source_split="[a-z0-9]+",
        target_split="[a-z0-9]+",
        variant=suite_lib.VARIANT_RE,
        seed="[0-9]+",


rule figure:
    """One figure: PDF and PNG (matplotlib) and the CSV of the plotted data."""
    output:
        pdf=f"{RESULTS}/figures/{{name}}.pdf",
        png=report(
            f"{RESULTS}/figures/{{name}}.png",
            caption="../report/figure.rst",
            category="Figures",
            labels={"figure": "{name}", "file": "plot"},
        ),
        csv=report(
            f"{RESULTS}/figures/{{name}}.csv",
            caption="../report/figure_data.rst",
            category="Figures",
            labels={"figure": "{name}", "file": "data (CSV)"},
        ),
    input:
        metrics=lambda w: metrics_inputs(FIGURE_PLAN.runs(w.name)),
        code=FIGURE_CODE,
    log:
        f"{RESULTS}/logs/figure_{{name}}.log",
    wildcard_constraints:
        name="|".join(figure_plan_lib.FIGURES),
    conda:
        ENV
    params:
        python=PYTHON,
        config=lambda w: figure_config_json(config, w.name),
        caption=lambda w: figure_caption(FIGURE_PLAN, w.name),
    shell:
        "{params.python:q} -m dmp.figures build {wildcards.name:q} --config-json {params.config:q} > {log:q} 2>&1"


rule table_html:
    """A table and its comparison view as one HTML page, for the report."""
    output:
        report(
            f"{RESULTS}/tables/{{table}}.html",
            caption="../report/table.rst",
            category="Tables",
            labels={"table": "{table}"},
        ),
    input:
        table=f"{RESULTS}/tables/{{table}}.md",
        comparison=f"{RESULTS}/tables/{{table}}.comparison.md",
        code="dmp/figures/report.py",
    log:
        f"{RESULTS}/logs/table_html_{{table}}.log",
    wildcard_constraints:
        table="|".join(suite_lib.TABLES),
    conda:
        ENV
    params:
        python=PYTHON,
        runs=lambda w: len(SUITE.table_runs(w.table)),
    shell:
        "{params.python:q} -m dmp.figures table-html {input.table:q} {input.comparison:q} --out {output:q} "
        "> {log:q} 2>&1"


for _figure in FIGURE_PLAN.names:

    rule:
        name:
            f"figure_{_figure}"
        input:
            figure_outputs(RESULTS, [_figure]),
