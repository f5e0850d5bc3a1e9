"""The command line reports every error as one line ``error: ...`` with exit status 2 and no traceback
(``python -m dmp --debug ...`` shows it); the paper's domain letters are accepted as domains."""
from __future__ import annotations

import dataclasses
import errno
import sys
from pathlib import Path

import pytest

import dmp.train
from dmp.cli import main
from dmp.data.inputs import TensorDataset
from synthetic import shift_task, small_cfg
from tests import hang_guard

ROOT = Path(__file__).resolve().parents[1]


def cli_error(capsys, *argv) -> str:
    """Run ``python -m dmp ARGV`` in-process; it must fail with exit status 2 and one line ``error: ...``."""
    with pytest.raises(SystemExit) as exit_:
        main(list(argv))
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.fixture
def no_training(monkeypatch):
    """``python -m dmp train`` with dmp.train.train replaced: records the config it would train."""
    seen = []
    monkeypatch.setattr(dmp.train, "train", lambda user, out, progress: seen.append(user) or {
        "accuracy": 1.0, "mean_class_accuracy": 1.0})
    return seen


def test_a_misspelled_dataset_or_domain_is_one_line(capsys, tmp_path, no_training):
    err = cli_error(capsys, "train", "--out", str(tmp_path), "dataset=ofice31", "source=amazon", "target=webcam")
    assert "unknown dataset 'ofice31'" in err and "office31" in err
    err = cli_error(capsys, "train", "--out", str(tmp_path), "dataset=office31", "source=amazn", "target=webcam")
    assert "no domain 'amazn'" in err and "amazon (A)" in err
    err = cli_error(capsys, "config", "dataset=demo", "source=solid", "target=X")
    assert "no domain 'X'" in err
    assert not no_training


def test_paper_letters_are_accepted_as_domains(capsys, tmp_path, no_training):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--quiet", "--out", str(tmp_path), "dataset=demo", "source=S", "target=O"])
    assert exit_.value.code == 0
    assert (no_training[0]["source"], no_training[0]["target"]) == ("solid", "outline")  # the registry's names
    with pytest.raises(SystemExit):
        main(["config", "dataset=office31", "source=A", "target=webcam"])
    out = capsys.readouterr().out
    assert "source: amazon\n" in out and "target: webcam\n" in out


def test_cuda_without_a_gpu_is_one_line(capsys, tmp_path, monkeypatch, no_training):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    err = cli_error(capsys, "train", "--out", str(tmp_path), "dataset=demo", "source=S", "target=O", "device=cuda")
    assert "device=cuda" in err and "device=cpu" in err
    assert not no_training


@pytest.mark.parametrize("text, where", [("dataset: demo\nsource: [solid\n", "line 3, column 1"),
                                         ("dataset: demo\n  source: solid\n", "line 2, column 9")])
def test_malformed_yaml_names_file_and_line(capsys, tmp_path, text, where, no_training):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    err = cli_error(capsys, "train", "--config", str(path), "--out", str(tmp_path / "out"))
    assert f"{path}: malformed YAML" in err and where in err


def test_a_malformed_override_value_names_the_override(capsys, tmp_path, no_training):
    err = cli_error(capsys, "train", "--out", str(tmp_path), "dataset=demo", "source=S", "target=O",
                    "bottleneck_dims=[1,")
    assert err.startswith("error: override 'bottleneck_dims=[1,': the value is not valid YAML")


@pytest.mark.parametrize("exc, message", [
    # an expected error is its message alone; an unexpected one names its type, on one line
    ("missing", "dataset 'office31' is not in place: missing ... Fetch it with ..."),
    (ZeroDivisionError("division by zero\nsecond line"), "ZeroDivisionError: division by zero second line"),
])
def test_errors_from_the_trainer_are_one_line(capsys, tmp_path, monkeypatch, exc, message):
    from dmp.data.registry import DatasetMissingError
    if exc == "missing":
        exc = DatasetMissingError(message)

    def fail(user, out, progress):
        raise exc
    monkeypatch.setattr(dmp.train, "train", fail)
    assert cli_error(capsys, "train", "--out", str(tmp_path)) == f"error: {message}\n"


def test_a_table_config_without_seeds_or_tables_is_one_line(capsys, tmp_path):
    err = cli_error(capsys, "tables", "build", "vanilla", "--config-json", "{}", "--out", str(tmp_path))
    assert "needs `seeds` (a list) and `tables` (a mapping)" in err


def test_ctrl_c_is_one_line_with_status_130(capsys, tmp_path, monkeypatch):
    def interrupt(user, out, progress):
        raise KeyboardInterrupt
    monkeypatch.setattr(dmp.train, "train", interrupt)
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--out", str(tmp_path)])
    assert exit_.value.code == 130 and capsys.readouterr().err == "error: interrupted\n"


def test_a_missing_config_file_is_one_line(capsys, tmp_path):
    err = cli_error(capsys, "train", "--config", str(tmp_path / "nope.yaml"), "--out", str(tmp_path))
    assert err == f"error: {tmp_path / 'nope.yaml'}: No such file or directory\n"


def test_labels_out_of_range_are_one_line(capsys, tmp_path, monkeypatch):
    """Labels beyond the class list (here class 3 of 4 relabelled 4) stop the run with one line.  (Image lists and
    array datasets are checked when read, naming the file; this is the trainer's own guard.)"""
    task = shift_task(classes=4)
    labels = task.source_train.labels.numpy().copy()
    labels[labels == 3] = 4
    task = dataclasses.replace(task, source_train=TensorDataset(task.source_train.x.numpy(), labels))
    real = dmp.train.train
    monkeypatch.setattr(dmp.train, "train", lambda user, out, progress: real(
        small_cfg(iterations=2), out, task=task, progress=False))
    assert cli_error(capsys, "train", "--out", str(tmp_path)) == (
        "error: the task's source_train labels span 0..4, outside the 4 classes 0..3\n")


@pytest.mark.parametrize("exc, text", [
    (OSError(errno.ENOSPC, "No space left on device", "/results/run/metrics.json"),
     "error: /results/run/metrics.json: No space left on device\n"),
    (PermissionError(errno.EACCES, "Permission denied", "/results/run"), "error: /results/run: Permission denied\n"),
    (OSError(errno.EROFS, "Read-only file system", "/results/run"), "error: /results/run: Read-only file system\n"),
])
def test_system_errors_are_one_line_naming_the_file(capsys, tmp_path, monkeypatch, exc, text):
    def fail(user, out, progress):
        raise exc
    monkeypatch.setattr(dmp.train, "train", fail)
    assert cli_error(capsys, "train", "--out", str(tmp_path)) == text


def test_disk_full_inside_torch_save_names_the_system_error(capsys, tmp_path, monkeypatch):
    """torch.save on a full disk raises a RuntimeError while handling the OSError (ENOSPC): the line says ENOSPC."""
    def fail(user, out, progress):
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")
    monkeypatch.setattr(dmp.train, "train", fail)
    err = cli_error(capsys, "train", "--out", str(tmp_path))
    assert err.startswith("error: No space left on device (RuntimeError: [enforce fail")


def test_a_corrupt_checkpoint_is_one_line(capsys, tmp_path, monkeypatch):
    (tmp_path / "checkpoint.pt").write_bytes(b"not a checkpoint")
    real = dmp.train.train
    monkeypatch.setattr(dmp.train, "train", lambda user, out, progress: real(
        small_cfg(iterations=2), out, task=shift_task(), progress=False))
    err = cli_error(capsys, "train", "--out", str(tmp_path))
    assert str(tmp_path / "checkpoint.pt") in err and "cannot be loaded" in err


def test_debug_shows_the_traceback(tmp_path, monkeypatch):
    with pytest.raises(KeyError, match="ofice31"):
        main(["--debug", "train", "--out", str(tmp_path), "dataset=ofice31", "source=A", "target=W"])
    with pytest.raises(KeyError, match="ofice31"):  # the one --debug, after the command name too
        main(["train", "--out", str(tmp_path), "dataset=ofice31", "--debug", "source=A", "target=W"])


def test_a_misspelled_key_in_train_suggests_the_key(capsys, tmp_path, monkeypatch):
    from dmp.config import resolve

    monkeypatch.setattr(dmp.train, "train", lambda user, out, progress: resolve(user) and pytest.fail("trained"))
    err = cli_error(capsys, "train", "--out", str(tmp_path), "dataset=demo", "source=solid", "target=outline",
                    "lamda1=0.5")
    assert "lamda1 (did you mean 'lambda1'?)" in err
    assert "(did you mean" not in cli_error(capsys, "config", "dataset=demo", "zzzzzz=1")


def _parsers(parser, path=("dmp",)):
    """(command path, parser) of `dmp` and of every sub-command, depth first."""
    import argparse

    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, (*path, name))


def test_every_command_and_option_has_plain_help():
    import argparse

    from dmp.cli import build_parser

    commands = {path: p for path, p in _parsers(build_parser())}
    assert {p[1] for p in commands if len(p) == 2} >= {"train", "config", "data", "tables", "figures", "suite"}
    for path, parser in commands.items():
        assert parser.prog == " ".join(path)
        undocumented = [a.option_strings or a.dest for a in parser._actions
                        if not a.help and not isinstance(a, argparse._SubParsersAction)]  # (each command has help)
        assert undocumented == [], path
        text = parser.format_help()
        assert "``" not in text and "python -m dmp " not in text.replace("`python -m dmp`", ""), (path, text)
        assert "--debug" in text, path


@pytest.mark.parametrize("module, command", [("dmp.tables.cli", "tables"), ("dmp.figures.cli", "figures"),
                                             ("dmp.suite", "suite")])
def test_module_entry_points_are_the_dmp_commands(capsys, module, command):
    import importlib

    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(module).main(["--help"])
    assert exit_.value.code == 0
    via_module = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert via_module == capsys.readouterr().out and via_module.startswith(f"usage: dmp {command} ")


@pytest.mark.slow
@pytest.mark.parametrize("module, args", [
    ("dmp", ["train", "--out", "{tmp}/run", "dataset=ofice31", "source=A", "target=W"]),
    ("dmp.tables", ["build", "vanilla", "--config", "{tmp}/missing.yaml"]),
    ("dmp.figures", ["build", "k", "--config", "{tmp}/missing.yaml"]),
    ("dmp.suite", ["timing", "{tmp}/no-results"]),
])
def test_every_entry_point_prints_one_line_and_exits_2(tmp_path, module, args):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = hang_guard.run([sys.executable, "-m", module, *args], cwd=ROOT, quiet=600)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    debug = hang_guard.run([sys.executable, "-m", module, "--debug", *args], cwd=ROOT, quiet=600)
    assert debug.returncode == 1 and "Traceback" in debug.stderr
