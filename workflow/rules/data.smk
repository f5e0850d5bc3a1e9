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



# The input cache (config input_cache: on, e.g. `train: {input_cache: true}`): each image decoded and resized once per
# domain and size (python -m dmp data cache; dmp/data/cache.py). One rule per image dataset, whose output is the
# domain's cache beside its data folder (where the jobs' DMP_DATA_DIR places it), rebuilt when the domain's list
# changes; a train job with input_cache on depends on the caches of its two domains at its resize (rule train).
from dmp.data import cache as input_cache

for _spec in input_cache.image_datasets():
    _name = _spec.name

    rule:
        name:
            f"input_cache_{_name}"
        output:
            *(stable_path(str(p)) for p in input_cache.cache_files(_spec, "{domain}", "{size}", DATA_DIR or None)),
        input:
            # the generated demo (rule demo_data), else the domain's list when in place (without it the job stops
            # with the CLI's error naming how to fetch the dataset)
            lambda w, name=_name: (
                [demo_data_dir()]
                if name == "demo" and config.get("demo_data", False)
                else [
                    stable_path(str(p))
                    for p in [SUITE.registry.lists_dir(name) / f"{w.domain}_full.txt"]
                    if p.is_file()
                ]
            ),
        log:
            f"{RESULTS}/logs/input_cache/{_name}_{{domain}}_{{size}}.log",
        wildcard_constraints:
            domain="[A-Za-z0-9_]+",
            size="[0-9]+",
        threads: 8
        conda:
            ENV
        params:
            python=PYTHON,
            env=JOB_ENV,
            dataset=_name,
        shell:
            "env {params.env:q} {params.python:q} -m dmp data cache {params.dataset:q} --resize {wildcards.size} "
            "--domains {wildcards.domain:q} --workers {threads} > {log:q} 2>&1"
