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
        "env {params.env:q} {params.python:q} -m dmp data demo > {log:q} 2>&1"


rule demo_weights:
    """The demo's stand-in for ImageNet weights: the small CNN pre-trained once on generated shapes that are no
    demo domain (python -m dmp pretrain-demo); every demo run fine-tunes from this file (weights_path)."""
    output:
        SUITE.demo_weights(),
    log:
        f"{RESULTS}/logs/demo_weights.log",
    threads: 2  # the count the pre-training recipe fixes (dmp/train/pretrain.py)
    conda:
        ENV
    params:
        python=PYTHON,
    shell:
        "{params.python:q} -m dmp pretrain-demo --out {output:q} > {log:q} 2>&1"
