# The DMP reproduction suite: every table of the paper from our own runs (see docs/workflow.md).
#   snakemake --cores 4 all_tables                                  paper suite (config/config.yaml)
#   snakemake --cores 2 all_tables --configfile config/demo.yaml    embedded CPU demo
# Rules are thin: the logic (which runs each table needs, their arguments) is in dmp/suite.py, the tables are
# built by dmp/tables/.
from snakemake.utils import min_version, validate

min_version("9.0")


# The paper suite unless a suite config is given with --configfile (e.g. config/demo.yaml), which then replaces
# it instead of being merged into it; --config key=value overrides single keys of either.
if not workflow.config_settings.configfiles:

    configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"


localrules:
    all_tables,
    table,
    row,
    demo_data,



rule all_tables:
    """Every table of config["tables"] (the default target)."""
    input:
        table_outputs(SUITE.tables),


include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/tables.smk"
