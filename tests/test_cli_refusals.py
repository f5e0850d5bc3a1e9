"""A refused command leaves nothing behind and says why in one line: a weights file that is not there is refused
with the rest of the config, before any work (`dmp config`, `dmp train`, the suite's plan), a refused `dmp train`
leaves no --out folder holding only its lock file, and output cut short by its reader (`| head -1`) ends quietly."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import dmp.train
from dmp.cli import main
from dmp.config import ConfigError
from dmp.run_lock import run_lock
from dmp.suite import Suite

ROOT = Path(__file__).resolve().parents[1]
DEMO_RUN = ["dataset=demo", "source=S", "target=O"]
NOPE = "config key 'weights_path' = '/nope.pt': no such file"


def _error(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(list(argv))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    return err


def test_a_weights_path_that_is_no_file_is_refused_with_the_config(capsys, tmp_path):
    assert _error(capsys, "config", *DEMO_RUN, "weights_path=/nope.pt").startswith(f"error: {NOPE} ")
    assert "a folder, not a weights file" in _error(capsys, "config", *DEMO_RUN, f"weights_path={tmp_path}")
    weights = tmp_path / "w.pt"
    weights.write_bytes(b"weights")
    with pytest.raises(SystemExit) as exit_:
        main(["config", *DEMO_RUN, f"weights_path={weights}"])
    assert exit_.value.code == 0 and f"weights_path: {weights}" in capsys.readouterr().out


def test_train_refuses_a_missing_weights_file_before_making_its_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(dmp.train, "train", lambda *a, **k: pytest.fail("trained with a missing weights file"))
    out = tmp_path / "run"
    assert _error(capsys, "train", "--out", str(out), *DEMO_RUN, "weights_path=/nope.pt").startswith(
        f"error: {NOPE} ")
    assert not out.exists()


def test_a_train_refused_after_taking_its_folder_leaves_no_lock_only_folder(capsys, tmp_path, monkeypatch):
    def refuse(user, out, progress):
        with run_lock(out):  # as dmp.train.train: the folder and its lock first, then a refusal
            raise ConfigError("refused")
    monkeypatch.setattr(dmp.train, "train", refuse)
    out = tmp_path / "run"
    assert _error(capsys, "train", "--out", str(out), *DEMO_RUN) == "error: refused\n"
    assert not out.exists()
    out.mkdir()  # a folder that was there before the command is the user's: kept
    assert _error(capsys, "train", "--out", str(out), *DEMO_RUN) == "error: refused\n"
    assert out.is_dir()


def test_the_suite_checks_a_weights_file_but_not_the_demo_weights_its_rule_writes(tmp_path):
    cfg = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
    cfg["results"] = str(tmp_path / "results")  # its demo weights are not written yet
    Suite(cfg)
    cfg["train"] = {**(cfg.get("train") or {}), "weights_path": "/nope.pt"}
    with pytest.raises(ConfigError, match=r"^config train, run .*: config key 'weights_path' = '/nope.pt': no such"):
        Suite(cfg)


@pytest.mark.parametrize("argv", [["config", "--show"], ["data", "list"]])
def test_output_cut_short_by_its_reader_ends_quietly(argv):
    """`dmp config --show | head -1`: the reader closes the pipe (here before the command writes at all, so that
    every write meets the closed pipe); no "Broken pipe" error, status 0."""
    import os

    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "dmp", *argv], cwd=ROOT, stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=300)
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (0, "")
