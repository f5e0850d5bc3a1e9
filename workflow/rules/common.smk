# Shared state of the rules: the validated suite (dmp/suite/, imported by the Snakefile as suite_lib) and the small helpers the rules call.
# Shell commands: every path or value is formatted with Snakemake's `{...:q}` (shlex.quote; a list param quotes each
# item), so a `results` folder with a space or a `;` is one word, never shell syntax.
import os
import sys

try:
    SUITE = suite_lib.Suite(config)
except ValueError as err:  # a config error: its message alone (it names the key), no traceback
    raise WorkflowError(str(err)) from None
RESULTS = SUITE.results
TABLE_FILES = ("md", "tex", "comparison.md", "comparison.csv", "card.md", "card.tex")
ENV = "../envs/dmp.yaml"
# The suite's code (runs, cells, the table registry): an input of the table and figure rules, which it can change.
SUITE_CODE = sorted(str(p) for p in Path("dmp/suite").rglob("*.py"))


def stable_path(path):
    """``path`` relative to the working directory when inside it: rule parameters (part of Snakemake's rerun
    trigger "params") then do not change when the checkout moves."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


# Jobs run with the interpreter that runs Snakemake (e.g. .venv/bin/python), or the rule's conda env's python.
PYTHON = "python" if "conda" in str(workflow.deployment_settings.deployment_method).lower() else stable_path(
    sys.executable
)
# DMP_DATA_DIR for every job (`env {params.env:q} ...`): the demo keeps its generated data under results/ (config
# data_dir).
DATA_DIR = stable_path(os.path.abspath(config["data_dir"])) if config.get("data_dir") else ""
JOB_ENV = [f"DMP_DATA_DIR={DATA_DIR}"] if DATA_DIR else []
# `--resources gpu=N` on one machine: every training job claims its own GPU among N (dmp/train/devices.py), told N
# as the resource gpu_slots (not a rule parameter, so that a new N reruns nothing; no limit is set on it); a job
# that SLURM gives one GPU keeps it.
_gpus = getattr(workflow.global_resources.get("gpu"), "value", None)
GPU_SLOTS = _gpus if isinstance(_gpus, int) and _gpus > 0 else 0


def table_outputs(tables):
    return [f"{RESULTS}/tables/{t}.{ext}" for t in tables for ext in TABLE_FILES]


def table_inputs(tables):
    """The targets of ``tables``: their files and, as inputs of the target itself, their runs' metrics.json. A table
    file that is present (committed, or built before a block was added) would otherwise keep its missing runs
    untrained: Snakemake leaves a missing input alone when its consumer's output is present and newer."""
    return table_outputs(tables) + [p for t in tables for p in metrics_inputs(SUITE.table_runs(t))]


def metrics_inputs(runs):
    """metrics.json of ``runs``; with ``require_runs: false`` only those that exist (tables then show dashes)."""
    paths = [r.metrics_path(RESULTS) for r in runs]
    if config.get("require_runs", True):
        return paths
    return [p for p in paths if os.path.exists(p)]


def demo_data_dir():
    """Where the demo images are generated (the registry's data root of demo for DMP_DATA_DIR = data_dir);
    relative to the working directory when inside it."""
    root = os.path.join(DATA_DIR, "demo") if DATA_DIR else str(SUITE.registry.data_root(SUITE.spec("demo")))
    return stable_path(root)


def train_job_log(pattern):
    """The Snakemake log of a train job (rules train, train_variant) whose metrics.json is ``pattern`` (a run
    pattern with {results}): <results>/logs/train/<the run folder's path under runs/>.log, never a file of the run
    folder (Snakemake removes a job's logs before it runs the job; the run's train.log is a parameter)."""
    return os.path.dirname(pattern).replace("{results}/runs/", f"{RESULTS}/logs/train/") + ".log"


def data_inputs(wildcards):
    """The demo's data folder and pre-trained backbone for demo runs (rules demo_data, demo_weights); nothing for
    fetched datasets."""
    if wildcards.dataset == "demo" and config.get("demo_data", False):
        return [demo_data_dir(), SUITE.demo_weights()]
    return []


def report_absent_data(runs):
    """Once, on stderr, from the main Snakemake process (not the jobs' own calls on a cluster): the datasets of
    ``runs`` whose files are not in place here, each with the command that brings it (a dry run still lists their
    jobs; each would stop on the missing data). The demo that rule demo_data generates is no such dataset."""
    from dmp.suite.signature import bring_command

    absent = []
    for name in sorted({r.dataset for r in runs} - ({"demo"} if config.get("demo_data", False) else set())):
        spec = SUITE.spec(name)
        try:
            SUITE.registry.require_dataset(spec)
        except SUITE.registry.DatasetMissingError:
            absent.append(f"{name} ({bring_command(SUITE.registry, spec)})")
    if absent and workflow.is_main_process:
        print(f"Datasets not in place here (their jobs are listed, and would stop on the missing data): "
              f"{'; '.join(absent)}", file=sys.stderr)
