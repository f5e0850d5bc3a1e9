# Datasets.  The paper's datasets are fetched outside the workflow (`dvc pull` or `python -m dmp data fetch
# NAME`, see docs/datasets.md); a training job on a missing dataset stops with the trainer's error naming what to
# fetch and where to put it.  The generated demo dataset is made by this rule (config demo_data: true).


rule demo_data:
    """The generated demo images (python -m dmp data demo) under DMP_DATA_DIR/demo (config data_dir)."""
    output:
        directory(demo_data_dir()),
    log:
        f"{RESULTS}/logs/demo_data.log",
    conda:
        ENV
    params:
        python=PYTHON,
        env=JOB_ENV,
    shell:
        "{params.env} {params.python} -m dmp data demo > {log} 2>&1"
