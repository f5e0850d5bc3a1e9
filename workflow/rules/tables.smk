# Tables: one target per table (table_<name>), one per row (row_<table>_<dataset>_<row>, see docs/workflow.md).
# Built by `python -m dmp.tables` from the runs' metrics.json and dmp/tables/reported_results.csv; the table code
# is an input, so editing it rebuilds the tables (cheap) without rerunning any training.
TABLE_CODE = sorted(str(p) for p in Path("dmp/tables").glob("*.py")) + SUITE_CODE


rule table:
    """LaTeX + Markdown table, comparison view (Markdown + CSV) of one paper table."""
    output:
        [f"{RESULTS}/tables/{{table}}.{ext}" for ext in TABLE_FILES],
    input:
        metrics=lambda w: metrics_inputs(SUITE.table_runs(w.table)),
        reported="dmp/tables/reported_results.csv",
        code=TABLE_CODE,
    log:
        f"{RESULTS}/logs/table_{{table}}.log",
    wildcard_constraints:
        table="|".join(suite_lib.TABLES),
    conda:
        ENV
    params:
        python=PYTHON,
        config=lambda w: suite_lib.table_config_json(config, w.table),
    shell:
        "{params.python:q} -m dmp.tables build {wildcards.table:q} --config-json {params.config:q} "
        "--reported {input.reported:q} > {log:q} 2>&1"


rule row:
    """One row of a table (its runs, all seeds) as Markdown: results/tables/rows/<table>/<dataset>/<row>.md."""
    output:
        f"{RESULTS}/tables/rows/{{table}}/{{block}}/{{row}}.md",
    input:
        metrics=lambda w: metrics_inputs(SUITE.row_runs(w.table, w.block, w.row)),
        reported="dmp/tables/reported_results.csv",
        code=TABLE_CODE,
    log:
        f"{RESULTS}/logs/row_{{table}}_{{block}}_{{row}}.log",
    wildcard_constraints:
        table="|".join(suite_lib.TABLES),
    conda:
        ENV
    params:
        python=PYTHON,
        config=lambda w: suite_lib.table_config_json(config, w.table),
    shell:
        "{params.python:q} -m dmp.tables build {wildcards.table:q} --config-json {params.config:q} "
        "--reported {input.reported:q} --row {wildcards.block:q} {wildcards.row:q} > {log:q} 2>&1"


for _table in SUITE.tables:

    rule:
        name:
            f"table_{_table}"
        input:
            table_inputs([_table]),


for _name, (_table, _block, _row) in SUITE.rows().items():

    rule:
        name:
            _name
        input:
            f"{RESULTS}/tables/rows/{_table}/{_block}/{_row}.md",
            metrics_inputs(SUITE.row_runs(_table, _block, _row)),  # its runs, whatever the row file (table_inputs)
