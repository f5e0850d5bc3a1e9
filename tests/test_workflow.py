"""The Snakemake suite: config validation, job enumeration (dry runs), lint, the SLURM profile, resumability guard,
and a reduced demo end to end.  Tests that run Snakemake are marked slow."""
from __future__ import annotations

import copy
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from dmp import suite as suite_lib
from dmp.suite import Suite, prepare, yaml_value
from dmp.suite import signature as suite_signature
from tests import hang_guard

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def load(name: str) -> dict:
    return yaml.safe_load((ROOT / "config" / name).read_text())


def snakemake(*args, quiet=1800):
    """Snakemake's output; a hang guard of ``quiet`` seconds without output (tests/hang_guard.py)."""
    return hang_guard.run([*SNAKEMAKE, *args], cwd=ROOT, quiet=quiet)


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a dry run: rule -> count."""
    block = output.split("Job stats:")[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M)}


def expected_train_jobs(cfg: dict) -> int:
    """Distinct training runs of a suite config, counted straight from its table definitions (independently
    of dmp/suite/): shared runs (ablation G = the vanilla/partial G runs, time and interpolation = vanilla
    runs, sample size n50/n50 only if it names the same splits) count once."""
    runs = set()
    tables = cfg["tables"]
    for name, setting, target in (("vanilla", "vanilla", "full"), ("partial", "partial", "partial")):
        spec = tables.get(name)
        for dataset, block in (spec or {}).get("datasets", {}).items():
            runs |= {(dataset, setting, t, m, spec["metric"], "full", target)
                     for t in block["tasks"] for m in block.get("methods", spec["methods"])}
    if "manifold_ablation" in tables:
        spec = tables["manifold_ablation"]
        for setting, method in spec["methods"].items():
            target = "partial" if setting == "partial" else "full"
            runs |= {(spec["dataset"], setting, t, method, metric, "full", target)
                     for t in spec["tasks"] for metric in spec["metrics"]}
    if "sample_size" in tables:
        spec = tables["sample_size"]
        runs |= {(spec["dataset"], "vanilla", t, spec["method"], "G", s, u)
                 for t in spec["tasks"] for s in spec["source_splits"] for u in spec["target_splits"]}
    if "time" in tables:
        spec = tables["time"]
        runs |= {(c["dataset"], "vanilla", c["task"], m, "G", "full", "full")
                 for c in spec["columns"] for m in spec["methods"]}
    if "interpolation" in tables:
        spec = tables["interpolation"]
        runs.add((spec["dataset"], "vanilla", spec["task"], spec["method"], "G", "full", "full"))
    return len(runs) * len(cfg["seeds"])


# ----------------------------------------------------------------------------- config validation
def schema_error(cfg: dict) -> str:
    """The error of the Snakefile's check: the schema file, then each table block against its kind's schema."""
    from snakemake.utils import validate

    with pytest.raises(Exception) as err:
        cfg = copy.deepcopy(cfg)
        validate(cfg, str(SCHEMA))
        suite_lib.check_tables(cfg, SCHEMA)
    return str(err.value)


@pytest.mark.parametrize("name", ["config.yaml", "demo.yaml"])
def test_shipped_configs_are_valid(name):
    from snakemake.utils import validate

    cfg = load(name)
    validate(cfg, str(SCHEMA))
    Suite(cfg)


def test_schema_rejects_typo_in_method_metric_table_and_task():
    cfg = load("config.yaml")
    bad = copy.deepcopy(cfg)
    bad["tables"]["manifold_ablation"]["metrics"] = ["G", "AGG"]
    assert "AGG" in schema_error(bad)
    bad = copy.deepcopy(cfg)
    bad["tables"]["vanila"] = bad["tables"].pop("vanilla")
    assert "vanila" in schema_error(bad)
    bad = copy.deepcopy(cfg)
    bad["tables"]["partial"]["datasets"]["office31"]["tasks"][0] = "A-W"
    assert "A-W" in schema_error(bad)
    bad = copy.deepcopy(cfg)
    bad["overrides"] = [{"when": {"methd": "dmp"}, "set": {}}]
    assert "methd" in schema_error(bad)


def test_suite_rejects_an_unregistered_method_naming_the_key_and_the_closest_name():
    """Method names are the registry's (dmp/methods/); the schema only checks their form."""
    cfg = load("config.yaml")
    bad = copy.deepcopy(cfg)
    bad["tables"]["vanilla"]["methods"][-1] = "dmpp"
    with pytest.raises(ValueError, match=r"tables\.vanilla\.method\(s\): 'dmpp' is not a registered method \(did you "
                                         r"mean 'dmp'"):
        Suite(bad)
    bad = copy.deepcopy(cfg)
    bad["tables"]["vanilla"]["datasets"]["office31"]["methods"] = ["cdan_ee"]
    with pytest.raises(ValueError, match=r"datasets\.office31\.methods: 'cdan_ee' is not a registered method"):
        Suite(bad)


def test_suite_rejects_unknown_dataset_and_task_naming_them():
    cfg = load("config.yaml")
    bad = copy.deepcopy(cfg)
    bad["tables"]["vanilla"]["datasets"]["office32"] = bad["tables"]["vanilla"]["datasets"].pop("office31")
    with pytest.raises(ValueError, match="office32"):
        Suite(bad)
    bad = copy.deepcopy(cfg)
    bad["tables"]["sample_size"]["tasks"] = ["I->X"]
    with pytest.raises(ValueError, match=r"tables\.sample_size.*I->X"):
        Suite(bad)
    bad = copy.deepcopy(cfg)
    bad["tables"]["sample_size"]["source_splits"] = ["n10", "n20"]
    with pytest.raises(ValueError, match=r"tables\.sample_size.*'n20'"):
        Suite(bad)


def test_the_words_true_and_false_of_a_config_option_are_the_booleans():
    """`--config comparison_methods=false` (config/config.yaml's header) gives Snakemake's string 'false': the
    schema's boolean keys take it as the boolean, other keys keep the string."""
    from snakemake.utils import validate

    cfg = load("config.yaml")
    cfg.update(comparison_methods="false", require_runs="True", results="false")
    suite_lib.ready_for_schema(cfg, SCHEMA)
    assert (cfg["comparison_methods"], cfg["require_runs"], cfg["results"]) == (False, True, "false")
    validate(cfg, str(SCHEMA))
    cfg["comparison_methods"] = "maybe"
    suite_lib.ready_for_schema(cfg, SCHEMA)
    with pytest.raises(Exception) as err:
        validate(cfg, str(SCHEMA))
    assert suite_lib.schema_problem(err.value) == (f"config key 'comparison_methods': 'maybe' is not of type "
                                                   f"'boolean' (see {suite_lib.SCHEMA_FILE})")


def test_the_seeds_of_a_config_option_are_the_integers_they_spell():
    """`--config seeds=[0,1]` gives Snakemake's strings '0' and '1': the seeds are those integers; an item that
    spells no integer, and every other key, keeps its schema error."""
    from snakemake.utils import validate

    cfg = load("config.yaml")
    cfg.update(seeds=["0", " 7", 2], threads="3")
    suite_lib.ready_for_schema(cfg, SCHEMA)
    assert cfg["seeds"] == [0, 7, 2] and cfg["threads"] == "3"
    validate({**cfg, "threads": 3}, str(SCHEMA))
    for seeds, says in ((["-1"], "-1 is less than the minimum of 0"), (["1.5"], "'1.5' is not of type 'integer'"),
                        (["x"], "'x' is not of type 'integer'")):
        cfg = {**load("config.yaml"), "seeds": seeds}
        suite_lib.ready_for_schema(cfg, SCHEMA)
        with pytest.raises(Exception) as err:
            validate(cfg, str(SCHEMA))
        assert suite_lib.schema_problem(err.value) == f"config key 'seeds[0]': {says} (see {suite_lib.SCHEMA_FILE})"
    cfg = {**load("config.yaml"), "threads": "3"}
    suite_lib.ready_for_schema(cfg, SCHEMA)
    with pytest.raises(Exception) as err:
        validate(cfg, str(SCHEMA))
    assert suite_lib.schema_problem(err.value).startswith("config key 'threads': '3' is not of type 'integer'")


def test_a_misspelled_config_key_is_one_line_with_the_closest_key():
    """As `dmp config` answers a typo: one line with "did you mean", not the whole schema."""
    from snakemake.utils import validate

    cfg = load("config.yaml")
    cfg["comparision_methods"] = False
    with pytest.raises(ValueError) as err:
        suite_lib.ready_for_schema(cfg, SCHEMA)
    message = str(err.value)
    assert message.startswith("config key 'comparision_methods' is not a key of the suite config (did you mean "
                              "'comparison_methods'?); the keys there: results, seeds,") and "\n" not in message
    cfg = load("config.yaml")
    cfg["tables"]["vanila"] = cfg["tables"].pop("vanilla")  # below the top level: the schema's error, in one line
    validate(cfg, str(SCHEMA))
    with pytest.raises(Exception) as err:
        suite_lib.check_tables(cfg, SCHEMA)  # (a table's name and block: its kind's, dmp/suite/kinds/)
    assert suite_lib.schema_problem(err.value).startswith(
        "config key 'tables.vanila' is not a key of the suite config (did you mean 'vanilla'?)")


def test_an_undeclared_dataset_names_where_its_declaration_goes(monkeypatch):
    """config/examples/own_images.yaml before its dataset is declared: the error says where the dataset.yaml goes
    and which section of docs/datasets.md gives its keys."""
    monkeypatch.delenv("DMP_DATASETS_DIR", raising=False)
    monkeypatch.chdir(ROOT)
    cfg = yaml.safe_load((ROOT / "config" / "examples" / "own_images.yaml").read_text())
    with pytest.raises(ValueError) as err:
        Suite(cfg)
    message = str(err.value)
    assert message.startswith("config tables.vanilla (mine P->S): unknown dataset 'mine': declare it in "
                              "datasets/mine/dataset.yaml (every key: docs/datasets.md, \"Bring your own image "
                              "dataset\"")
    assert "## Bring your own image dataset\n" in (ROOT / "docs" / "datasets.md").read_text()


@pytest.mark.slow
def test_config_words_and_typos_on_the_snakemake_command_line():
    """The documented `--config comparison_methods=false` plans DMP's rows only; a misspelled key stops the
    workflow with the one line of the closest key, not the schema; `--config seeds=[0]` plans seed 0 only."""
    proc = snakemake("-n", "all_tables", "--config", "comparison_methods=false", "--quiet", "rules")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert 0 < job_counts(proc.stdout)["train"] < expected_train_jobs(load("config.yaml"))
    proc = snakemake("-n", "all_tables", "--config", "comparision_methods=false")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "(did you mean 'comparison_methods'?)" in out
    assert len(out.splitlines()) < 10 and "Failed validating" not in out, out
    proc = snakemake("-n", "all_tables", "--config", "seeds=[0]", "--quiet", "rules")  # Snakemake gives ['0']
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    cfg = load("config.yaml")
    assert job_counts(proc.stdout)["train"] == expected_train_jobs({**cfg, "seeds": [0]})


@pytest.mark.slow
def test_a_dry_run_names_the_absent_datasets_and_how_to_bring_each(tmp_path):
    """The paper suite with no data in place: the jobs are listed, and one line on stderr names each absent dataset
    with its command."""
    import os

    env = {**os.environ, "DMP_DATA_DIR": str(tmp_path / "no_data")}
    proc = hang_guard.run([*SNAKEMAKE, "-n", "all_tables", "--quiet", "rules"], cwd=ROOT, env=env, quiet=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("Datasets not in place here")]
    assert len(lines) == 1, proc.stderr
    for name in ("office31", "officehome", "imageclef", "visda2017"):
        assert f"{name} (python -m dmp data fetch {name})" in lines[0]
    assert job_counts(proc.stdout)["train"] == expected_train_jobs(load("config.yaml"))


def absent_features(tmp_path, monkeypatch) -> tuple[dict, dict]:
    """A features dataset ``feats_gone`` declared under ``tmp_path/decl`` (DMP_DATASETS_DIR; Office-31's 224 px trunk
    declaration) whose files are not in place, and config/office31_lite.yaml on it writing under ``tmp_path``: (the
    config, the environment that declares the dataset, also set here)."""
    import os

    decl = tmp_path / "decl" / "feats_gone"
    decl.mkdir(parents=True)
    decl.joinpath("dataset.yaml").write_text((ROOT / "datasets" / "office31_lite0_t224" / "dataset.yaml").read_text())
    text = (ROOT / "config" / "office31_lite.yaml").read_text().replace("office31_lite0_t224v8", "feats_gone")
    cfg = {**yaml.safe_load(text), "results": str(tmp_path / "results")}
    env = {"DMP_DATASETS_DIR": str(tmp_path / "decl"), "DMP_DATA_DIR": str(tmp_path / "no_data")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return cfg, {**os.environ, **env}


def test_a_run_of_an_absent_features_dataset_is_planned_and_prepare_refuses_it(tmp_path, monkeypatch, capsys):
    """A features dataset's version is its files' hash: without them the train job still gets a signature
    (absent-data:NAME, or the one a finished run's folder records, so that Snakemake's params trigger never removes
    its metrics.json), and prepare refuses absent-data:NAME in one line naming the missing files and the command that
    makes them, leaving the run folder as it is."""
    from dmp.cli import main as dmp_main
    from dmp.suite.records import SIGNATURE_FILE

    cfg, _ = absent_features(tmp_path, monkeypatch)
    suite = Suite(cfg)
    run = next(r for r in suite.all_runs() if r.dataset == "feats_gone")
    with pytest.raises(suite.registry.DatasetMissingError):
        suite.signature(run)
    assert suite.job_signature(run) == "absent-data:feats_gone"
    folder = Path(run.folder(suite.results))
    folder.mkdir(parents=True)
    (folder / SIGNATURE_FILE).write_text("0123456789abcdef\n")
    (folder / "checkpoint.pt").write_text("an interrupted run's weights")
    (folder / "train.log").write_text("iteration 1200 of 5000\n")
    assert suite.job_signature(run) == "absent-data:feats_gone"  # unfinished: prepare must refuse it
    with pytest.raises(SystemExit) as exc:
        dmp_main(["suite", "prepare", str(folder), suite.job_signature(run), "--log", str(folder / "train.log")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"error: dataset 'feats_gone' is not in place: missing {tmp_path}/decl/feats_gone/data/"
                          f"amazon.npz (domain amazon), "), err
    assert ("(make it: move " in err and " then dmp data extract-features office31 --out-name feats_gone "
            "--backbone efficientnet_lite0 --trunk)" in err), err
    assert (folder / "checkpoint.pt").read_text() == "an interrupted run's weights"
    assert (folder / "train.log").read_text() == "iteration 1200 of 5000\n"
    assert (folder / SIGNATURE_FILE).read_text() == "0123456789abcdef\n"
    (folder / "metrics.json").write_text("{}")
    assert suite.job_signature(run) == "0123456789abcdef"  # finished: the signature it was made under


@pytest.mark.slow
def test_a_dry_run_lists_the_jobs_of_an_absent_features_dataset(tmp_path, monkeypatch):
    """config/office31_lite.yaml before its trunk's features are extracted: the dry run lists every job (no
    InputFunctionException from the signature's data version) and names the dataset with the command that makes
    it; a real run of one of its jobs stops in one line naming the missing files, before any training."""
    cfg, env = absent_features(tmp_path, monkeypatch)
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = hang_guard.run([*SNAKEMAKE, "-n", "all_tables", "--quiet", "rules", "--configfile", path], cwd=ROOT,
                          env=env, quiet=1800)
    assert proc.returncode == 0 and "Exception" not in proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert job_counts(proc.stdout)["train"] == expected_train_jobs(cfg)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("Datasets not in place here")]
    assert len(lines) == 1 and "feats_gone (make it: move " in lines[0], proc.stderr
    run = next(r for r in Suite(cfg).all_runs() if r.dataset == "feats_gone")
    proc = hang_guard.run([*SNAKEMAKE, "--cores", "1", run.metrics_path(cfg["results"]), "--configfile", path],
                          cwd=ROOT, env=env, quiet=1800)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert errors and errors[0].startswith("error: dataset 'feats_gone' is not in place: missing "), proc.stderr
    assert "then dmp data extract-features office31 --out-name feats_gone" in errors[0]
    assert "Traceback" not in proc.stderr and not Path(run.folder(cfg["results"]), "train.log").exists()


@pytest.mark.slow
def test_bad_config_fails_the_workflow_before_any_job(tmp_path):
    cfg = load("demo.yaml")
    cfg["tables"]["vanilla"]["methods"] = ["source_only", "dmp_noal"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    proc = snakemake("-n", "all_tables", "--configfile", str(bad))
    assert proc.returncode != 0
    assert "dmp_noal" in proc.stdout + proc.stderr


# ----------------------------------------------------------------------------- job enumeration
@pytest.mark.slow
def test_dry_run_paper_suite_lists_every_train_job():
    proc = snakemake("-n", "all_tables", "--quiet", "rules")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    counts = job_counts(proc.stdout)
    cfg = load("config.yaml")
    assert counts["train"] == expected_train_jobs(cfg)
    assert counts["table"] == len(cfg["tables"])
    assert "demo_data" not in counts


@pytest.mark.slow
def test_row_target_runs_only_that_row():
    proc = snakemake("-n", "row_vanilla_office31_dmp", "--quiet", "rules")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cfg = load("config.yaml")
    tasks = cfg["tables"]["vanilla"]["datasets"]["office31"]["tasks"]
    assert job_counts(proc.stdout)["train"] == len(tasks) * len(cfg["seeds"])


@pytest.mark.slow
def test_gpu_count_reaches_every_training_job_without_rerunning_anything():
    """`--resources gpu=N` tells each train job N (DMP_GPU_SLOTS: it claims one of N devices, dmp/train/devices.py),
    as a resource, not a parameter: the jobs' signatures are those of a call without it."""
    cmds = {}
    for extra in ([], ["--resources", "gpu=4"]):
        proc = snakemake("-n", "-p", "row_vanilla_office31_dmp", *extra)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        cmds[len(extra)] = [c for c in proc.stdout.splitlines() if " -m dmp train " in c]
    assert cmds[2] and all(" DMP_GPU_SLOTS=4 " in c for c in cmds[2])
    assert all(" DMP_GPU_SLOTS=0 " in c for c in cmds[0])
    # (the same jobs: Snakemake lists jobs of equal priority in no fixed order)
    assert sorted(c.replace("DMP_GPU_SLOTS=4", "DMP_GPU_SLOTS=0") for c in cmds[2]) == sorted(cmds[0])


@pytest.mark.slow
def test_tables_without_runs_when_runs_are_not_required():
    proc = snakemake("-n", "table_time", "--config", "require_runs=False", "--quiet", "rules")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    counts = job_counts(proc.stdout)
    assert counts["table"] == 1 and "train" not in counts


def test_demo_enumeration_matches_its_table_definitions():
    cfg = load("demo.yaml")
    assert len(Suite(cfg).all_runs()) == expected_train_jobs(cfg)


@pytest.mark.slow
def test_lint_is_clean():
    proc = snakemake("--lint")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Lints for" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_full_demo_dry_run_job_counts_and_train_inputs():
    """config/demo.yaml as `make demo` runs it: 62 train jobs (50 of DMP's rows, 12 of DANN and CDAN+E (vanilla) and
    PADA (partial)), the data and weights jobs once, one job per table, and every train job depends on the demo data folder and the
    pre-trained weights file."""
    proc = snakemake("-n", "all_tables", "--configfile", "config/demo.yaml", "--forceall")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cfg = load("demo.yaml")
    counts = job_counts(proc.stdout)
    assert counts == {"demo_data": 1, "demo_weights": 1, "train": expected_train_jobs(cfg),
                      "table": len(cfg["tables"]), "all_tables": 1, "total": expected_train_jobs(cfg) + 9}
    assert expected_train_jobs(cfg) == 62
    blocks = proc.stdout.split("Job stats:")[1].split("\nrule ")[1:]
    train = [b for b in blocks if b.startswith("train:")]
    assert len(train) == 62
    inputs = {re.search(r"^    input: (.*)$", b, re.M).group(1) for b in train}
    assert inputs == {f"{cfg['data_dir']}/demo, {cfg['results']}/weights/smallcnn_demo.pt"}


# ----------------------------------------------------------------------------- SLURM profile
SLURM_PLUGIN = importlib.util.find_spec("snakemake_executor_plugin_slurm")


@pytest.mark.slow
@pytest.mark.skipif(SLURM_PLUGIN is None, reason="snakemake-executor-plugin-slurm is not installed "
                    "(pip install -e '.[slurm]')")
def test_slurm_profile_requests_what_the_config_says(monkeypatch):
    """`snakemake --profile profiles/slurm` also loads the workflow profile profiles/default, whose values win: the
    training jobs must still ask for the config's GPU, memory and time, the cluster's partition and account, and
    the SLURM profile's latency-wait, keep-going and retries must hold."""
    proc = snakemake("--profile", "profiles/slurm", "-n", "row_vanilla_office31_dmp")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cfg, slurm = load("config.yaml"), yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    train = [b for b in proc.stdout.split("\nrule ")[1:] if b.startswith("train:")]
    assert len(train) == 6 * len(cfg["seeds"])
    for block in train:
        resources = dict(kv.split("=", 1) for kv in re.search(r"^    resources: (.*)$", block, re.M)
                         .group(1).split(", "))
        assert {k: resources[k] for k in ("gpu", "mem_mb", "runtime")} == \
            {k: str(v) for k, v in cfg["resources"].items()}
        assert {k: resources[k] for k in ("slurm_partition", "slurm_account")} == \
            {k: slurm["default-resources"][k] for k in ("slurm_partition", "slurm_account")}
        assert re.search(r"^    threads: (\d+)$", block, re.M).group(1) == str(cfg["threads"])
    from snakemake.cli import parse_args

    monkeypatch.chdir(ROOT)
    _, args = parse_args(["--profile", "profiles/slurm", "-n", "all_tables"])
    assert (args.executor, args.latency_wait, args.keep_going, args.retries, args.jobs) == \
        ("slurm", slurm["latency-wait"], True, slurm["retries"], slurm["jobs"])
    assert args.set_resources == {}
    assert {k: args.default_resources[k].value for k in ("mem_mb", "runtime")} == \
        {k: slurm["default-resources"][k] for k in ("mem_mb", "runtime")}
# ----------------------------------------------------------------------------- run arguments
def test_train_args_are_accepted_by_the_trainer_config():
    """Every run of the paper suite gives `python -m dmp train` arguments its config resolves without error."""
    config = pytest.importorskip("dmp.config")
    suite = Suite(load("config.yaml"))
    for run in suite.all_runs():
        cfg = config.resolve(config.parse_overrides(suite.train_args(run)))
        assert (cfg["dataset"], cfg["method"], cfg["metric"], cfg["seed"]) == \
            (run.dataset, run.method, run.metric, run.seed)
        assert (cfg["source_split"], cfg["target_split"]) == (run.source_split, run.target_split)


def test_a_run_is_resolved_to_registry_domain_names_and_overrides_match_their_runs():
    cfg = load("config.yaml")
    cfg["overrides"] = [{"when": {"dataset": "office31", "task": "A->W"}, "set": {"intra_start": 840}},
                        {"when": {"setting": "vanilla"}, "set": {"lambda2": 5e3}}]
    suite = Suite(cfg)
    run = suite_lib.Run("office31", "vanilla", "A->W", "dmp", "G", "full", "full", 0)
    args = suite.train_args(run)
    assert "source=amazon" in args and "target=webcam" in args
    assert "intra_start=840" in args and "lambda2=5000.0" in args
    other = suite_lib.Run("office31", "vanilla", "D->W", "dmp", "G", "full", "full", 0)
    assert not any(a.startswith("intra_start=") for a in suite.train_args(other))


@pytest.mark.parametrize("value", [5e3, 1e-5, 0.003, 10, True, None, "dmp", [64, 32], "1e-3", "yes"])
def test_yaml_values_read_back_equal(value):
    assert yaml.safe_load(yaml_value(value)) == value


def test_prepare_drops_a_checkpoint_of_another_signature_only(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint.pt").write_text("old weights")
    assert prepare(run, "aaa") is True  # unknown origin: removed
    assert not (run / "checkpoint.pt").exists()
    (run / "checkpoint.pt").write_text("interrupted run")
    assert prepare(run, "aaa") is False  # same signature: resume from it
    assert (run / "checkpoint.pt").read_text() == "interrupted run"
    assert prepare(run, "bbb") is True  # code or arguments changed: stale
    assert not (run / "checkpoint.pt").exists()
    assert (run / suite_lib.SIGNATURE_FILE).read_text().strip() == "bbb"


def test_signature_changes_with_arguments_and_training_code_not_table_code(tmp_path, monkeypatch):
    suite = Suite(load("config.yaml"))
    run = suite_lib.Run("imageclef", "vanilla", "I->P", "dmp", "G", "full", "full", 0)
    assert suite.signature(run) != suite.signature(run.with_seed(1))
    # another suite whose config differs only where no result depends on it (threads, resources, seeds, tables)
    other = load("config.yaml")
    other.update(threads=1, resources={"gpu": 0, "mem_mb": 1000, "runtime": 5}, seeds=[0])
    other["tables"] = {"manifold_ablation": other["tables"]["manifold_ablation"]}
    assert Suite(other).signature(run) == suite.signature(run)
    other["train"] = {**other["train"], "lambda1": 1.0}  # ... but a trainer setting changes it
    assert Suite(other).signature(run) != suite.signature(run)
    pkg = tmp_path / "dmp"
    (pkg / "tables").mkdir(parents=True)
    (pkg / "suite" / "kinds").mkdir(parents=True)
    (pkg / "losses.py").write_text("A = 1\n")
    (pkg / "tables" / "render.py").write_text("B = 1\n")
    (pkg / "suite" / "kinds" / "vanilla.py").write_text("C = 1\n")
    monkeypatch.setattr(suite_signature, "PACKAGE_DIR", pkg)
    version = suite_lib.training_code_version.__wrapped__
    before = version()
    (pkg / "tables" / "render.py").write_text("B = 2\n")
    (pkg / "suite" / "kinds" / "vanilla.py").write_text("C = 2\n")
    assert version() == before
    (pkg / "losses.py").write_text("A = 2\n")
    assert version() != before


# ----------------------------------------------------------------------------- reduced demo, end to end
def _trainer_available() -> str | None:
    for cmd in (["train", "--help"], ["data", "demo", "--help"]):
        proc = hang_guard.run([sys.executable, "-m", "dmp", *cmd], cwd=ROOT, text=False, quiet=600)
        if proc.returncode != 0:
            return f"`python -m dmp {' '.join(cmd)}` does not work yet"
    return None


@pytest.mark.slow
def test_reduced_demo_end_to_end(tmp_path):
    """The demo pipeline on 1 seed, 2 methods, 1 task, few iterations: generates the data, trains, builds the
    tables; a second call has nothing to do."""
    reason = _trainer_available()
    if reason:
        pytest.skip(reason)
    cfg = load("demo.yaml")
    cfg.update(results=str(tmp_path / "results"), data_dir=str(tmp_path / "data"), seeds=[0])
    cfg["train"] = {**cfg["train"], "iterations": 20}
    task = cfg["tables"]["vanilla"]["datasets"]["demo"]["tasks"][0]
    cfg["tables"] = {
        "vanilla": {"methods": ["source_only", "dmp"], "metric": "G", "datasets": {"demo": {"tasks": [task]}}},
        "time": {"methods": ["source_only", "dmp"], "columns": [{"dataset": "demo", "task": task, "unit": "s/E"}]},
        "interpolation": {"dataset": "demo", "task": task, "method": "dmp", "alphas": ["0", "0.5"]}}
    path = tmp_path / "reduced.yaml"
    path.write_text(yaml.safe_dump(cfg))
    code_before = suite_lib.training_code_version.__wrapped__()
    # a hang guard by progress: Snakemake writes a line as each job starts and ends (tests/hang_guard.py)
    proc = snakemake("--cores", "2", "all_tables", "--configfile", str(path), quiet=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    tables = tmp_path / "results" / "tables"
    for table in cfg["tables"]:
        for ext in ("md", "tex", "comparison.md", "comparison.csv"):
            assert (tables / f"{table}.{ext}").stat().st_size > 0
    vanilla = (tables / "vanilla.md").read_text()
    assert "| DMP " in vanilla and "| Source only " in vanilla
    assert "–" not in vanilla.split("- ")[0]  # every cell has its run
    metrics = json.loads(next((tmp_path / "results" / "runs").rglob("metrics.json")).read_text())
    assert metrics["status"] == "complete"
    if suite_lib.training_code_version.__wrapped__() != code_before:
        pytest.skip("dmp/ training code was edited while the test ran: the runs are stale, as they should be")
    again = snakemake("-n", "all_tables", "--configfile", str(path))
    assert "Nothing to be done" in again.stdout + again.stderr  # complete runs are not rerun


def test_timing_summary_splits_wall_time(tmp_path):
    run = tmp_path / "runs" / "demo" / "vanilla" / "S-O" / "dmp" / "G" / "full-full" / "seed0"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"train_seconds": 30.0, "anchor_seconds": 5.0}))
    (run / "benchmark.tsv").write_text("s\th:m:s\tmax_rss\tcpu_time\n50.0\t0:00:50\t100\t40.0\n")
    text = suite_lib.timing(str(tmp_path))
    cells = [c.strip() for c in text.splitlines()[2].split("|")[1:-1]]
    assert [float(c) for c in cells[:6]] == [1, 50, 40, 30, 5, 15] and cells[-1] == "30%"


@pytest.mark.parametrize("target", ["all_tables", "table_vanilla", "row_vanilla_demo_dmp"])
def test_a_present_table_does_not_keep_its_missing_runs_untrained(tmp_path, target):
    """A table file already there (committed, or built before a block was added) and a run of it missing: the
    target still trains the run (Snakemake alone leaves a missing input whose consumer's output is present)."""
    cfg = load("demo.yaml")
    task = cfg["tables"]["vanilla"]["datasets"]["demo"]["tasks"][0]
    cfg.update(results=str(tmp_path / "results"), data_dir=str(tmp_path / "data"), seeds=[0])
    cfg["tables"] = {"vanilla": {"methods": ["dmp"], "metric": "G", "datasets": {"demo": {"tasks": [task]}}},
                     "interpolation": {"dataset": "demo", "task": task, "method": "dmp", "alphas": ["0", "0.5"]}}
    path = tmp_path / "one_run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    files = [f"tables/{t}.{ext}" for t in cfg["tables"] for ext in ("md", "tex", "comparison.md", "comparison.csv")]
    for name in files + ["tables/rows/vanilla/demo/dmp.md"]:
        (tmp_path / "results" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "results" / name).write_text("built before\n")
    proc = snakemake("-n", target, "--configfile", str(path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert job_counts(proc.stdout)["train"] == 1
