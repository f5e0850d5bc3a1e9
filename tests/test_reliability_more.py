"""Reliability of the remaining command-line surfaces: ``data`` sub-commands on system errors, image sizes, damaged
checkpoints, the suite's timing inputs and the tables' inputs. Each test is one way a careless
or hostile user could get a traceback or a late or unclear error; each checks the one-line refusal
naming the file, line or key."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from data_fixtures import isolated  # noqa: F401 (fixture)

from dmp.cli import main as dmp_main

REPO = Path(__file__).resolve().parents[1]


def _one_line_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exc:
        dmp_main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and err.rstrip().endswith(lines[0]), err
    return lines[0]


# ----------------------------------------------------------------------------------------------- data commands
def _unwritable_roots(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    return [Path("/proc/x"), blocker / "demo"]


def test_data_demo_into_an_unwritable_root_is_one_line_naming_the_root(tmp_path, capsys):
    for root in _unwritable_roots(tmp_path):
        err = _one_line_error(capsys, ["data", "demo", "--root", str(root)])
        assert f"cannot generate the demo dataset in {root}: " in err, err
    assert (tmp_path / "a-file").read_text() == "not a folder\n"


def test_data_demo_with_debug_shows_the_traceback(tmp_path):
    root = tmp_path / "a-file" / "demo"
    root.parent.write_text("x")
    for argv in (["--debug", "data", "demo", "--root", str(root)], ["data", "demo", "--root", str(root), "--debug"]):
        with pytest.raises(OSError, match="cannot generate the demo dataset"):
            dmp_main(argv)


def test_the_data_module_entry_point_prints_one_line_not_a_traceback():
    """``python -m dmp.data.cli`` (its own parser) as ``dmp data``: one line, exit 2; ``--debug`` the traceback."""
    run = [sys.executable, "-m", "dmp.data.cli", "demo", "--root", "/proc/x"]
    plain = subprocess.run(run, cwd=REPO, capture_output=True, text=True)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    assert plain.stderr.strip() == "error: cannot generate the demo dataset in /proc/x: No such file or directory"
    debug = subprocess.run(run + ["--debug"], cwd=REPO, capture_output=True, text=True)
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def test_a_data_error_of_the_registry_keeps_its_plain_message(capsys):
    err = _one_line_error(capsys, ["data", "verify", "no_such_dataset_x"])
    assert err.startswith("error: unknown dataset 'no_such_dataset_x'"), err


# ----------------------------------------------------------------------------------------------- image sizes
@pytest.mark.parametrize("key, value", [("resize", 100_000), ("crop", 100_000), ("resize", 4097)])
def test_a_huge_resize_or_crop_is_refused_when_the_config_is_resolved(key, value):
    from dmp.config import ConfigError, resolve
    from dmp.params import MAX_IMAGE_SIDE

    user = {**dict(dataset="office31", source="amazon", target="webcam", resize=MAX_IMAGE_SIDE), key: value}
    with pytest.raises(ConfigError) as err:
        resolve(user)
    assert str(err.value) == (f"config key {key!r} = {value} is invalid: expected a positive integer "
                              f"<= {MAX_IMAGE_SIDE}")


def test_the_image_side_bound_itself_is_accepted():
    from dmp.config import resolve
    from dmp.params import MAX_IMAGE_SIDE

    cfg = resolve(dict(dataset="office31", source="amazon", target="webcam", resize=MAX_IMAGE_SIDE,
                       crop=MAX_IMAGE_SIDE))
    assert (cfg["resize"], cfg["crop"]) == (MAX_IMAGE_SIDE, MAX_IMAGE_SIDE)


def test_train_with_a_huge_resize_is_refused_before_a_run_folder_is_made(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DMP_DATA_DIR", str(tmp_path / "no-data"))
    out = tmp_path / "run"
    err = _one_line_error(capsys, ["train", "--out", str(out), "dataset=demo", "source=S", "target=O",
                                   "resize=100000"])
    assert "config key 'resize' = 100000" in err and not out.exists()


# ----------------------------------------------------------------------------------------------- checkpoints
def _tampered(state: dict, where: str):
    """``state`` with the tensor at ``where`` (``model.<key>``, ``opt.<buffer>``, ``anchors._sum``, ``weights``)
    replaced by one of another shape, or the model key dropped (``model-missing``); returns the name the error
    must carry."""
    import torch

    if where == "model":
        key = next(k for k, v in state["model"].items() if v.dim() == 2)
        state["model"][key] = torch.zeros(*state["model"][key].shape[::-1], 3)
        return f"model.{key}"
    if where == "model-missing":
        key = next(iter(state["model"]))
        del state["model"][key]
        return key
    if where == "opt":
        slot, buffers = next((i, b) for i, b in state["opt"]["state"].items() if b)
        name = next(n for n, t in buffers.items() if isinstance(t, torch.Tensor) and t.dim())
        buffers[name] = torch.zeros(7, 5)
        return f"opt.state.{name}"
    if where == "anchors":
        state["anchors"]["_sum"][0] = torch.zeros(2, 2, dtype=torch.float64)
        return "anchors._sum[0]"
    state["weights"] = torch.ones(state["weights"].numel() + 4)
    return "weights"


@pytest.mark.parametrize("where", ["model", "model-missing", "opt", "anchors", "weights"])
def test_a_checkpoint_tensor_of_the_wrong_shape_is_refused_naming_the_file_and_the_tensor(tmp_path, where):
    import torch
    from synthetic import shift_task, small_cfg

    from dmp.train import train
    from dmp.train.checkpoint import CheckpointError

    cfg = small_cfg(iterations=20, intra_start=5)
    assert train(cfg, tmp_path, task=shift_task(), progress=False, stop_after=10) is None
    path = tmp_path / "checkpoint.pt"
    state = torch.load(path, weights_only=True)
    name = _tampered(state, where)
    torch.save(state, path)
    log = (tmp_path / "log.csv").read_text()
    with pytest.raises(CheckpointError) as exc:
        train(cfg, tmp_path, task=shift_task(), progress=False)
    message = str(exc.value)
    assert message.startswith(f"{path}: ") and name in message and "\n" not in message, message
    assert not (tmp_path / "metrics.json").exists() and (tmp_path / "log.csv").read_text() == log


# ----------------------------------------------------------------------------------------------- files of the suite
def test_declare_with_dvc_stages_yaml_a_folder_is_one_line_naming_it(isolated, capsys):  # noqa: F811
    from dmp.data import registry

    stages = registry.DATASETS_DIR / "dvc_stages.yaml"
    (stages / "inside").mkdir(parents=True)
    err = _one_line_error(capsys, ["data", "declare"])
    assert err == f"error: {stages}: Is a directory", err
    assert (stages / "inside").is_dir()


def _timed_runs(tmp_path, bench: str | None = None, metrics: str | None = None) -> Path:
    results = tmp_path / "results"
    good_bench = "s\th:m:s\tmax_rss\tcpu_time\n64.5\t0:01:04\t1390.6\t44.5\n"
    for seed, (b, m) in enumerate([(good_bench, '{"train_seconds": 40.0, "anchor_seconds": 4.5}'),
                                   (bench or good_bench, metrics or '{"train_seconds": 30, "anchor_seconds": 0}')]):
        run = results / "runs" / "demo" / "S-O" / f"seed{seed}"
        run.mkdir(parents=True)
        (run / "benchmark.tsv").write_text(b)
        (run / "metrics.json").write_text(m)
    return results


def test_suite_timing_sums_the_benchmark_and_the_trainers_seconds(tmp_path, capsys):
    results = _timed_runs(tmp_path, bench="s\th:m:s\tmax_rss\tcpu_time\n50\t0:00:50\t1\t20.5\n")
    with pytest.raises(SystemExit) as exc:
        dmp_main(["suite", "timing", str(results)])
    assert exc.value.code == 0
    row = capsys.readouterr().out.splitlines()[-1].replace("|", " ").split()
    # wall 64.5 + 50, cpu 44.5 + 20.5, train 40 + 30, anchor 4.5 + 0, other 114.5 - 74.5
    assert row == ["2", "114.5", "65", "70", "4.5", "40", "57.2", "35%"], row


@pytest.mark.parametrize("bench, metrics, expect", [
    ("s\th:m:s\tcpu_time\nabc\t0:00:01\t1\n", None, "seed1/benchmark.tsv line 2 column 's' = 'abc' is not a time"),
    ("s\th:m:s\tcpu_time\n12\t0:00:12\n", None, "seed1/benchmark.tsv line 2: 2 fields, the header has 3"),
    ("\x00\x01garbage", None, "seed1/benchmark.tsv: not a Snakemake benchmark file"),
    ("s\tcpu_time\n", None, "seed1/benchmark.tsv: not a Snakemake benchmark file"),
    ("s\tcpu_time\n-3\t1\n", None, "seed1/benchmark.tsv line 2 column 's' = '-3' is not a time"),
    (None, '{"train_seconds": 5', "seed1/metrics.json is not a metrics file (cut off or corrupt"),
    (None, "[1, 2]", "seed1/metrics.json holds a JSON list, not a run's metrics"),
    (None, '{"train_seconds": "x", "anchor_seconds": 1}', "seed1/metrics.json key 'train_seconds' = 'x' is not"),
    (None, '{"train_seconds": 1}', "seed1/metrics.json key 'anchor_seconds' = 'None' is not a time"),
])
def test_suite_timing_on_a_damaged_row_is_one_line_naming_the_file_and_line(tmp_path, capsys, bench, metrics,
                                                                           expect):
    results = _timed_runs(tmp_path, bench, metrics)
    err = _one_line_error(capsys, ["suite", "timing", str(results)])
    assert f"{results}/runs/demo/S-O/{expect}" in err, err


REPORTED_HEADER = "table,dataset,setting,method,variant,task,column,value,std,unit,source\n"


@pytest.mark.parametrize("body, expect", [
    ("t,d,s,m,v,k,c,1,,%,x\n\nt,d,s,m,v,k,c2,abc,,%,x\n", "line 4: column 'value' = 'abc' is not a number"),
    ("t,d,s,m,v,k,c,1,0.x,%,x\n", "line 2: column 'std' = '0.x' is not a number"),
    ("t,d,s,m,v,k,c,1,,%,x\nt,d,s,m,v,k,c,1,,%,x,extra\n", "line 3: 12 fields, the header has 11"),
    ("t,d,s,m,v,k,c,1,,%\n", "line 2: 10 fields, the header has 11"),
    ("t,d,s,m,v,k,c,1,,%,x\nt,d,s,m,v,k,c,2,,%,y\n", "line 3: duplicate cells"),
    ("t,d,s,m,v,k,c,1,,%,caf\xe9\n".encode("latin-1"), "line 2: not UTF-8 text (byte 0xe9)"),
])
def test_tables_build_with_a_bad_reported_csv_is_one_line_naming_the_file_and_line(tmp_path, capsys, body, expect):
    path = tmp_path / "reported.csv"
    data = body if isinstance(body, bytes) else body.encode()
    path.write_bytes(REPORTED_HEADER.encode() + data)
    err = _one_line_error(capsys, ["tables", "build", "all", "--config", str(REPO / "config" / "demo.yaml"),
                                   "--reported", str(path), "--out", str(tmp_path / "out")])
    assert err == f"error: {path} {expect}" or err.startswith(f"error: {path} {expect}"), err
    assert not (tmp_path / "out").exists()


def test_the_shipped_reported_csv_still_reads_as_pandas_read_it():
    import pandas as pd

    from dmp.tables.reported import REPORTED_CSV, load_reported

    expected = pd.read_csv(REPORTED_CSV, dtype=str, keep_default_na=False)
    expected["value_num"] = pd.to_numeric(expected["value"])
    expected["std_num"] = pd.to_numeric(expected["std"].replace("", None)).astype(float)
    pd.testing.assert_frame_equal(load_reported(), expected)


@pytest.mark.parametrize("text, expect", [
    ("{", "--config-json: not JSON (Expecting property name"),
    ("[1]", "--config-json: a suite config needs `seeds` (a list) and `tables` (a mapping)"),
    ('{"tables": 5}', "--config-json: a suite config needs `seeds`"),
])
def test_tables_build_with_a_bad_config_json_is_one_line_naming_the_option(tmp_path, capsys, text, expect):
    err = _one_line_error(capsys, ["tables", "build", "all", "--config-json", text, "--out", str(tmp_path / "o")])
    assert err.startswith(f"error: {expect}"), err
    assert not (tmp_path / "o").exists()


def test_tables_build_with_a_config_file_that_is_a_list_names_the_file(tmp_path, capsys):
    path = tmp_path / "suite.yaml"
    path.write_text("- 1\n- 2\n")
    err = _one_line_error(capsys, ["tables", "build", "all", "--config", str(path)])
    assert err.startswith(f"error: {path}: a suite config needs `seeds`"), err


# ----------------------------------------------------------------------------------------------- the run lock
def test_a_prepare_refused_on_a_folder_in_use_leaves_the_running_jobs_log_as_it_is(tmp_path, capsys):
    """Another process trains into the folder (it holds the lock): a second checkout's train job is refused on
    stderr, and the running job's train.log keeps every line."""
    import fcntl
    import os

    from dmp.run_lock import LOCK_FILE

    run = tmp_path / "run"
    run.mkdir()
    log = run / "train.log"
    log.write_text("iteration 1200 of 5000\n")
    (run / "checkpoint.pt").write_text("the running job's weights")
    fd = os.open(run / LOCK_FILE, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as the running trainer holds it
        err = _one_line_error(capsys, ["suite", "prepare", str(run), "0123456789abcdef", "--log", str(log)])
    finally:
        os.close(fd)
    assert "is in use by another training process" in err
    assert log.read_text() == "iteration 1200 of 5000\n"
    assert (run / "checkpoint.pt").read_text() == "the running job's weights"


def test_a_prepare_that_holds_the_folder_starts_the_log_afresh(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    log = run / "train.log"
    log.write_text("a failed attempt's output\n")
    (run / "checkpoint.pt").write_text("weights of other code")
    with pytest.raises(SystemExit) as exc:
        dmp_main(["suite", "prepare", str(run), "0123456789abcdef", "--log", str(log)])
    assert exc.value.code == 0 and capsys.readouterr().err == ""
    assert log.read_text() == f"{run}: removed files of a run with other code/arguments (signature 0123456789abcdef)\n"
    assert not (run / "checkpoint.pt").exists()
    with pytest.raises(SystemExit):
        dmp_main(["suite", "prepare", str(run), "0123456789abcdef", "--log", str(log)])
    assert log.read_text() == ""  # nothing removed this time: an empty log for the trainer to append to


def test_the_train_rule_lets_prepare_start_its_log_instead_of_the_shell():
    """The shell must not truncate train.log (``> ...``) before prepare holds the run folder's lock, and train.log is
    no ``log:`` of the rule (Snakemake removes a job's log files before the job runs): a parameter."""
    text = (REPO / "workflow" / "rules" / "train.smk").read_text()
    rule = text[text.index("rule train:"):]
    log = rule[rule.index("    log:"):rule.index("    benchmark:")]
    assert "train.log" not in log and "train_job_log(" in log, log
    assert 'log=lambda w, output: os.path.join(os.path.dirname(output[0]), "train.log")' in rule
    shell = rule[rule.index("    shell:"):]
    prepare = shell[shell.index("-m dmp.suite prepare"):shell.index("||")]
    assert "--log {params.log:q}" in prepare and prepare.count(">") == 1 and "2> {log:q}" in prepare, prepare
    assert "-m dmp train" in shell and "> {params.log" not in shell.replace(">> {params.log:q}", "")
    variant = (REPO / "workflow" / "rules" / "figures.smk").read_text()
    variant = variant[variant.index("use rule train as train_variant"):variant.index("rule figure:")]
    assert "train.log" not in variant and "train_job_log(suite_lib.VARIANT_RUN_PATTERN)" in variant


def _demo_train_job(tmp_path):
    """A demo config writing under ``tmp_path`` whose first train job has its inputs in place (an empty data folder,
    a weights file that is no weights: a job that got past prepare would stop at once, training nothing):
    (config file, the job's metrics.json, its run folder)."""
    import yaml

    from dmp.suite import Suite

    cfg = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    cfg["results"], cfg["data_dir"] = str(tmp_path / "results"), str(tmp_path / "data")
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(cfg))
    (tmp_path / "data" / "demo").mkdir(parents=True)
    weights = Path(Suite(cfg).demo_weights())
    weights.parent.mkdir(parents=True)
    weights.write_text("not a weights file\n")
    metrics = Path(Suite(cfg).all_runs()[0].metrics_path(cfg["results"]))
    metrics.parent.mkdir(parents=True)
    return path, metrics, metrics.parent


@pytest.mark.slow
def test_a_second_snakemake_on_a_running_job_leaves_its_train_log_as_it_is(tmp_path):
    """Snakemake itself (not only prepare): a train job started while another process trains into its folder (holds
    the lock) is refused, names the refusal on stderr and in its own job log, and the running job's train.log keeps
    every line (it was the rule's ``log:``, which Snakemake removed before the job ran)."""
    import fcntl
    import os

    from dmp.run_lock import LOCK_FILE
    from tests import hang_guard

    config, metrics, run = _demo_train_job(tmp_path)
    log = run / "train.log"
    log.write_text("iteration 1200 of 5000\n")
    fd = os.open(run / LOCK_FILE, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as the running trainer holds it
        proc = hang_guard.run([sys.executable, "-m", "snakemake", "--cores", "1", metrics, "--configfile", config],
                              cwd=REPO, quiet=1800)
    finally:
        os.close(fd)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "is in use by another training process" in proc.stderr, proc.stderr[-3000:]
    assert log.read_text() == "iteration 1200 of 5000\n"
    job_log = tmp_path / "results" / "logs" / "train" / f"{run.relative_to(tmp_path / 'results' / 'runs')}.log"
    assert "is in use by another training process" in job_log.read_text()
    assert not metrics.exists()


@pytest.mark.slow
def test_a_failed_train_job_puts_the_last_line_of_its_train_log_on_stderr(tmp_path):
    """A job that stops (here on a weights file that is no weights, before any training): the trainer's one-line
    error, the last line of train.log, is on Snakemake's stderr and is the job's log."""
    from tests import hang_guard

    config, metrics, run = _demo_train_job(tmp_path)
    proc = hang_guard.run([sys.executable, "-m", "snakemake", "--cores", "1", metrics, "--configfile", config],
                          cwd=REPO, quiet=1800)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    last = (run / "train.log").read_text().splitlines()[-1]
    assert last.startswith("error: "), last
    assert last in proc.stderr.splitlines(), proc.stderr[-3000:]
    job_log = tmp_path / "results" / "logs" / "train" / f"{run.relative_to(tmp_path / 'results' / 'runs')}.log"
    assert job_log.read_text() == last + "\n"


# ----------------------------------------------------------------------------------------------- backbones
def test_a_weights_path_that_is_a_folder_is_named_as_a_folder_in_one_plain_line(tmp_path):
    from dmp.commands import error_message
    from dmp.models.backbones import build_backbone

    for weights, says in ((tmp_path, "is a folder, not a weights file"), (tmp_path / "none.pt", "does not exist")):
        with pytest.raises(Exception) as exc:
            build_backbone("efficientnet_lite0", weights_path=str(weights))
        assert error_message(exc.value) == f"weights_path {weights} {says}"  # no class name before it


@pytest.mark.parametrize("backbone, stage", [("efficientnet_lite0", 0), ("efficientnet_lite0", 7),
                                             ("efficientnet_lite0", -1), ("resnet50", 3), ("smallcnn", 1)])
def test_extract_features_refuses_a_trunk_stage_without_a_head_before_reading_weights(tmp_path, monkeypatch, capsys,
                                                                                     backbone, stage):
    monkeypatch.setenv("DMP_DATA_DIR", str(tmp_path / "data"))
    argv = ["data", "extract-features", "demo", "--out-name", "feats_x", "--backbone", backbone,
            "--weights-path", str(tmp_path / "missing.pt"), "--trunk-stage", str(stage)]
    err = _one_line_error(capsys, argv)
    assert err.startswith(f"error: --trunk / --views / --trunk-stage: backbone {backbone} has no part that reads its "
                          f"trunk from stage {stage} ("), err
    with pytest.raises(ValueError, match="has no part that reads its trunk"):
        dmp_main(["--debug", *argv])
    assert not (tmp_path / "data").exists()
