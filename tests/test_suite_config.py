"""The Snakemake config's trainer settings (``train:`` and every ``overrides[].set``) are resolved and validated
against the trainer's registry when the suite is built, before any job runs; errors name the config key."""
from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import pytest
import yaml

from dmp.suite import Suite
from tests import hang_guard

ROOT = Path(__file__).resolve().parents[1]
PAPER = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
DEMO = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
OVERRIDES = [{"when": {"dataset": "office31"}, "set": {"lambda2": 5e3}},
             {"when": {"setting": "partial"}, "set": {"intra_start": "15ep"}},
             {"when": {"method": "dmp"}, "set": {}}]


def suite_error(base: dict, **changes) -> str:
    cfg = copy.deepcopy(base)
    cfg.update(copy.deepcopy(changes))
    with pytest.raises(ValueError) as err:
        Suite(cfg)
    return str(err.value)


@pytest.mark.parametrize("base", [PAPER, DEMO], ids=["paper", "demo"])
def test_shipped_configs_and_valid_overrides_pass(base):
    cfg = copy.deepcopy(base)
    cfg["overrides"] = OVERRIDES
    Suite(cfg)


def test_a_misspelled_key_names_where_it_is_and_the_key_meant():
    err = suite_error(PAPER, train={"device": "cuda", "lamda1": 3})
    assert err.startswith("config train.lamda1: unknown config key (did you mean 'lambda1'?)")
    overrides = OVERRIDES + [{"when": {"method": "dmp"}, "set": {"lamda1": 3}}]
    assert suite_error(PAPER, overrides=overrides).startswith("config overrides[3].set.lamda1: unknown config key")


@pytest.mark.parametrize("key, value, expect", [("lambda1", -1, "a finite number >= 0"),
                                                ("k", 0, "a positive integer"),
                                                ("optimizer", "adamw", "one of adam, sgd"),
                                                ("intra_start", "ep", "an iteration count")])
def test_an_invalid_value_names_where_it_is(key, value, expect):
    overrides = copy.deepcopy(OVERRIDES)
    overrides[2]["set"][key] = value
    err = suite_error(PAPER, overrides=overrides)
    assert err.startswith(f"config overrides[2].set.{key} = {value!r} is invalid: expected {expect}")


def test_k_larger_than_the_classes_of_a_table_dataset():
    # ImageCLEF (12 classes) is in the paper tables; Office-Home has 65, so k=50 fails on ImageCLEF only
    err = suite_error(PAPER, train={"device": "cuda", "k": 50})
    assert err.startswith("config train.k = 50 is larger than the number of classes of dataset 'imageclef' (12)")
    overrides = [{"when": {"dataset": "demo"}, "set": {"k": 11}}]
    assert suite_error(DEMO, overrides=overrides).startswith(
        "config overrides[0].set.k = 11 is larger than the number of classes of dataset 'demo' (10)")
    ok = copy.deepcopy(PAPER)
    ok["overrides"] = [{"when": {"dataset": "officehome"}, "set": {"k": 50}}]
    Suite(ok)


@pytest.mark.parametrize("key", ["dataset", "source", "target", "setting", "method", "metric", "seed",
                                 "source_split", "target_split", "threads"])
def test_keys_the_suite_sets_per_run_are_refused(key):
    value = {"seed": 1, "threads": 2}.get(key, "x")
    err = suite_error(DEMO, train={"device": "cpu", key: value})
    assert err.startswith(f"config train.{key}: '{key}' is set for each run by the suite")
    err = suite_error(DEMO, overrides=[{"when": {}, "set": {key: value}}])
    assert err.startswith(f"config overrides[0].set.{key}: '{key}' is set for each run by the suite")


def test_a_constraint_between_keys_names_the_sections_and_the_run():
    overrides = [{"when": {"method": "dmp_ent"}, "set": {"entropy_weight": 0}}]
    err = suite_error(DEMO, overrides=overrides)
    assert re.match(r"config train and overrides\[0\]\.set, run results/demo/runs/demo/partial/S-N/dmp_ent/G/"
                    r"full-partial/seed0: .*'entropy_weight' must be > 0 for method dmp_ent", err), err


@pytest.mark.slow
def test_a_bad_config_fails_the_dry_run_at_once_with_one_message(tmp_path):
    cfg = copy.deepcopy(PAPER)
    cfg["overrides"] = copy.deepcopy(OVERRIDES)
    cfg["overrides"][2]["set"]["lambda1"] = -1
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = hang_guard.run([sys.executable, "-m", "snakemake", "-n", "all_tables", "--configfile", str(path)],
                          cwd=ROOT, quiet=1800)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    message = "config overrides[2].set.lambda1 = -1 is invalid: expected a finite number >= 0"
    assert out.count(message) == 1, out
    assert "Job stats" not in out and "rule train" not in out


@pytest.mark.parametrize("results", ["", "/", "//", "out/{dataset}", "res{", "a}b"])
def test_results_must_be_a_folder_without_wildcards(results):
    """``results: ""`` would plan every output at the filesystem root, and braces would become Snakemake wildcards:
    both the schema and the suite's own check refuse them."""
    from snakemake.utils import validate

    cfg = copy.deepcopy(DEMO)
    cfg["results"] = results
    with pytest.raises(Exception, match="results"):
        validate(copy.deepcopy(cfg), str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    assert suite_error(DEMO, results=results).startswith(f"config results = {results!r}: the folder of every output")
    cfg["results"] = "out/results dir"  # any other path is fine
    validate(cfg, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    assert Suite(cfg).results == "out/results dir"


@pytest.mark.slow
def test_snakemake_retrains_a_run_whose_metrics_are_no_result_of_it(tmp_path):
    """A metrics.json placed in a run folder (2 iterations, lambda2 = 0: no DMP run) or left unfinished would be kept
    by Snakemake (it has no record of the file, so no rerun trigger fires) and printed by the tables. The train
    rule's input marks such a run stale: Snakemake retrains it, and only it; prepare then clears its folder."""
    import json
    import shutil

    from dmp.suite import STALE_MARK, prepare

    fixture = tmp_path / "fixture"
    shutil.copytree(ROOT / "tests" / "data" / "fixture", fixture)
    cfg = yaml.safe_load((ROOT / "tests" / "data" / "tables_config.yaml").read_text())
    cfg["results"] = str(fixture)
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    foreign = fixture / "runs/office31/vanilla/A-W/dmp/G/full-full/seed0/metrics.json"
    fine = fixture / "runs/office31/vanilla/A-W/dmp/G/full-full/seed1/metrics.json"
    unfinished = fixture / "runs/office31/partial/A-W/source_only/G/full-partial/seed2/metrics.json"
    metrics = json.loads(foreign.read_text())
    metrics["config"].update(iterations=2, lambda2=0.0)
    foreign.write_text(json.dumps(metrics))
    proc = hang_guard.run([sys.executable, "-m", "snakemake", "-n", str(foreign), str(fine), str(unfinished),
                           "--quiet", "rules", "--configfile", str(tmp_path / "cfg.yaml")], cwd=ROOT,
                          quiet=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^train\s+2$", proc.stdout, re.M), proc.stdout
    mark = foreign.with_name(STALE_MARK)
    assert "a run of another config: iterations 2 (expected None), lambda2 0.0" in mark.read_text()
    assert not fine.with_name(STALE_MARK).exists()
    (foreign.parent / "config.yaml").write_text("iterations: 2\n")
    assert prepare(foreign.parent, "sig")  # what the train job does first: the foreign run's files go
    assert sorted(p.name for p in foreign.parent.iterdir()) == [".dmp-run.lock", "suite_signature.txt"]


def test_the_signature_covers_the_keys_a_table_checks():
    """The train rule's signature hashes the whole resolved config (what the tables check), not the runtime keys."""
    def signature(**train):
        cfg = copy.deepcopy(DEMO)
        cfg["train"] = {**(cfg.get("train") or {}), **train}
        suite = Suite(cfg)
        return suite.signature(suite.all_runs()[0])

    base = signature()
    assert signature(anchor_bn="eval") != base and signature(lambda2=0) != base
    assert signature(checkpoint_every=7, num_workers=0) == base


def test_a_suite_wide_compile_mode_reaches_the_compilable_methods_only():
    """``train: {compile: step}`` compiles DMP and source-only; a method that does not declare ``compilable`` (its
    terms follow the training progress) gets ``compile=off`` instead of a job that stops on a config error; the
    signature stays (a runtime key)."""
    from dmp import methods

    cfg = copy.deepcopy(DEMO)
    cfg["train"] = {**(cfg.get("train") or {}), "compile": "step"}
    suite, eager = Suite(cfg), Suite(copy.deepcopy(DEMO))
    seen = {}
    for run in suite.all_runs():
        seen[run.method] = suite.expected_config(run)["compile"]
        assert suite.signature(run) == eager.signature(run)
    assert seen["dmp"] == seen["source_only"] == "step" and seen["dann"] == seen["pada"] == "off", seen
    assert all((mode == "step") == methods.get(name).compilable for name, mode in seen.items()), seen


def test_a_suite_wide_input_cache_reaches_the_image_datasets_only():
    """``train: {input_cache: true}`` (Snakemake passes it as the string "true") caches the image datasets' inputs;
    a features dataset in the same suite runs without (a single run asking for it there is refused instead), and its
    train job waits for no cache."""
    from dmp.data.cache import run_inputs

    cfg = copy.deepcopy(DEMO)
    cfg["train"] = {**(cfg.get("train") or {}), "input_cache": "true"}
    cfg["tables"]["vanilla"]["datasets"]["office_caltech10"] = {"tasks": ["A->W"]}
    suite = Suite(cfg)
    kinds = {}
    for run in suite.table_runs("vanilla"):
        config = suite.expected_config(run)
        kinds[run.dataset] = (config["input_cache"], len(run_inputs(config)))
    assert kinds == {"demo": (True, 2), "office_caltech10": (False, 0)}, kinds


def test_a_tables_config_json_resolves_each_run_to_the_config_the_suite_trains():
    """The table rule gets a part of the suite config as JSON: it must carry every key that decides a run's arguments
    (``train``, ``overrides``, ``demo_data``), or the table expects another config and prints dashes."""
    import json

    from dmp.suite import table_config_json

    cfg = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
    cfg.update(train={**cfg["train"], "iterations": 20}, overrides=[{"when": {"method": "dann"}, "set": {"k": 2}}])
    part = json.loads(table_config_json(cfg, "vanilla"))
    full, table = Suite(cfg), Suite(part)
    runs = full.table_runs("vanilla")
    assert {r.method for r in runs} >= {"dann", "dmp"}
    for run in runs:
        assert table.expected_config(run) == full.expected_config(run), run
    assert full.expected_config(runs[0])["iterations"] == 20


def test_words_reach_keys_as_meant():
    """YAML 1.1 reads ``off``/``on`` as booleans and Snakemake's ``--config`` passes the values inside a mapping as
    strings: ``compile=off`` means "off" (not False, which the key refuses), ``"true"`` in a suite's train mapping
    means True; a word that means neither stays refused."""
    from dmp.config import ConfigError, check_values, parse_overrides, resolve

    base = dict(dataset="demo", source="solid", target="outline")
    cfg = resolve({**base, **parse_overrides(["compile=off", "input_cache=on", "manifold_bn=no"])})
    assert (cfg["compile"], cfg["input_cache"], cfg["manifold_bn"]) == ("off", True, False)
    cfg = resolve({**base, "input_cache": "true", "intra_grad_p": "False"})
    assert cfg["input_cache"] is True and cfg["intra_grad_p"] is False
    check_values({"input_cache": "true", "compile": False}, "train")  # the suite's own check agrees
    for bad in ({"input_cache": "maybe"}, {"compile": True}, {"precision": False}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            resolve({**base, **bad})
