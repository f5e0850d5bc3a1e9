# One job per (dataset, setting, task, method, metric, source/target split, seed).
# benchmark.tsv (Snakemake's per-job wall time, CPU time, memory) feeds `python -m dmp.suite timing`.
#
# Resumable: the job's only output is metrics.json (the trainer writes it last, atomically), so an interrupted
# job leaves checkpoint.pt in its folder and the rerun resumes from it.
# Stale on code change: `signature` (a rule parameter) hashes the training code (dmp/**/*.py except dmp/tables/
# and dmp/suite/), the dataset version and the run's arguments; Snakemake reruns a job whose parameter changed
# (its default rerun trigger "params"), and `python -m dmp.suite prepare` first deletes a checkpoint written
# under another signature, so a rerun never resumes from stale weights. `prepare` starts the log afresh only once it
# holds the run folder's lock: a job refused on a folder in use (another checkout's Snakemake on the same results
# folder) says so on stderr and leaves the running job's train.log as it is.
# train.log is therefore a parameter, not the rule's `log:`: Snakemake removes a job's log files before it runs the
# job, so a second Snakemake (another checkout, the same results folder) would empty the running job's train.log
# before its own prepare is refused. The rule's `log:` is a per-job file under <results>/logs/train/ that holds only
# what the job says on stderr: prepare's refusal, or the last line of train.log (the trainer's `error: ...`) when
# training fails; both are also printed to stderr (train_job_log, common.smk).


rule train:
    """Train and evaluate one run: python -m dmp train --out RUN_DIR key=value ..."""
    output:
        suite_lib.RUN_PATTERN.replace("{results}", RESULTS),
    input:
        data_inputs,
        # config input_cache: on: the caches of the run's domains (rules input_cache_<dataset>, data.smk)
        lambda w: [
            stable_path(str(p))
            for p in input_cache.run_inputs(SUITE.expected_config(SUITE.run_from_wildcards(w)), DATA_DIR or None)
        ],
        # a metrics.json that is no result of this run (placed by hand, another config): retrain it
        lambda w: SUITE.stale_marks(SUITE.run_from_wildcards(w)),
    log:
        train_job_log(suite_lib.RUN_PATTERN),
    benchmark:
        suite_lib.RUN_PATTERN.replace("{results}", RESULTS).replace("metrics.json", "benchmark.tsv")
    wildcard_constraints:
        dataset="[A-Za-z0-9_]+",
        setting="vanilla|partial",
        task="[A-Za-z0-9]+-[A-Za-z0-9]+",
        method="[a-z_]+",
        metric="G|AG|LE",
        source_split="[a-z0-9]+",
        target_split="[a-z0-9]+",
        seed="[0-9]+",
    conda:
        ENV
    params:
        python=PYTHON,
        env=JOB_ENV,
        run_dir=lambda w, output: os.path.dirname(output[0]),
        log=lambda w, output: os.path.join(os.path.dirname(output[0]), "train.log"),
        args=lambda w: SUITE.train_args(SUITE.run_from_wildcards(w)),
        # absent-data:NAME where a features dataset's files are not in place (prepare refuses it, dmp/suite/signature.py)
        signature=lambda w: SUITE.job_signature(SUITE.run_from_wildcards(w)),
    threads: config.get("threads", 1)
    resources:
        **config.get("resources", {}),
        gpu_slots=GPU_SLOTS,
    shell:
        "env {params.env:q} {params.python:q} -m dmp.suite prepare {params.run_dir:q} {params.signature:q} --log {params.log:q} 2> {log:q} "
        "|| {{ cat {log:q} >&2; exit 1; }}; "
        "env {params.env:q} DMP_GPU_SLOTS={resources.gpu_slots} {params.python:q} -m dmp train --quiet --out {params.run_dir:q} {params.args:q} "
        "threads={threads} >> {params.log:q} 2>&1 || {{ tail -n 1 {params.log:q} | tee -a {log:q} >&2; exit 1; }}"
