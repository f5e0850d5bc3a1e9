# The DMP reproduction suite: every table of the paper from our own runs (see docs/workflow.md).
#   snakemake --cores 4 all_tables                                  paper suite (config/config.yaml)
#   snakemake --cores 2 all_tables --configfile config/demo.yaml    embedded CPU demo
# Rules are thin: the logic (which runs each table needs, their arguments) is in dmp/suite/, the tables are
# built by dmp/tables/.  Figures (docs/figures.md): `all` (the default target) = all_tables + all_figures; one figure:
# figure_<name>; which runs a figure needs is in dmp/figures/plan.py, the figures are built by dmp/figures/.
import os
import sys

from snakemake.utils import min_version, validate

min_version("9.0")

sys.path.insert(0, workflow.basedir)
from dmp import suite as suite_lib


# The paper suite unless a suite config is given with --configfile (e.g. config/demo.yaml), which then replaces
# it instead of being merged into it; --config key=value overrides single keys of either.
if not workflow.config_settings.configfiles:

    configfile: "config/config.yaml"


# One line for a refused config (a key the schema does not know, with the closest one; a value of the wrong type),
# not the whole schema; `--config comparison_methods=false` is the boolean (Snakemake gives the string 'false'), and
# `--config seeds=[0,1]` the integers (Snakemake gives the strings '0' and '1').
# Each block under `tables:` is checked against the schema its table kind declares (dmp/suite/kinds/).
try:
    suite_lib.ready_for_schema(config, os.path.join(workflow.basedir, suite_lib.SCHEMA_FILE))
    validate(config, suite_lib.SCHEMA_FILE)
    suite_lib.check_tables(config, os.path.join(workflow.basedir, suite_lib.SCHEMA_FILE))
except (ValueError, WorkflowError) as err:
    raise WorkflowError(suite_lib.schema_problem(err)) from None


include: "workflow/rules/common.smk"


localrules:
    all_tables,
    table,
    row,
    demo_data,
    demo_weights,



rule all_tables:
    """Every table of config["tables"], and each of its runs (table_inputs)."""
    input:
        table_inputs(SUITE.tables),


include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/studies.smk"


report_absent_data(SUITE.all_runs() + FIGURE_PLAN.all_runs())


localrules:
    all,
    all_figures,


rule all_figures:
    """Every figure of config["figures"]: results/figures/<name>.{pdf,png,csv}."""
    input:
        figure_outputs(RESULTS, FIGURE_PLAN.names),


rule all:
    """Every table and every figure (the default target), and the tables' HTML pages for the report
    (`snakemake --report results/report.html`)."""
    default_target: True
    input:
        rules.all_tables.input,
        rules.all_figures.input,
        table_pages(RESULTS, SUITE.tables),
