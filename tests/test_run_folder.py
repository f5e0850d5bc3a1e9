"""A run folder belongs to one run: another config is refused (nothing overwritten or appended), the same
config resumes or returns its stored metrics, and log.csv never holds rows twice."""
import csv
import json
import re

import pytest

from dmp.config import ConfigError
from dmp.run_lock import RunFolderBusy
from dmp.train import train
from synthetic import shift_task, small_cfg
from tests import hang_guard

CFG = small_cfg(iterations=20, intra_start=5, log_every=10)


def run(out, cfg=CFG, **kw):
    return train(cfg, out, task=shift_task(), progress=False, **kw)


def files(out):
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def iterations(out):
    with open(out / "log.csv", newline="") as fh:
        return [int(r["iteration"]) for r in csv.DictReader(fh)]


@pytest.mark.parametrize("remove", [(), ("checkpoint.pt",), ("checkpoint.pt", "config.yaml")])
def test_another_config_is_refused_and_nothing_is_touched(tmp_path, remove):
    run(tmp_path)
    for name in remove:
        (tmp_path / name).unlink()
    before = files(tmp_path)
    message = f"{tmp_path} holds another run, whose config differs in: lambda1, seed;"
    with pytest.raises(ConfigError, match=re.escape(message)):
        run(tmp_path, dict(CFG, lambda1=1.0, seed=3))
    assert files(tmp_path) == before


def test_a_log_of_unknown_origin_is_refused(tmp_path):
    run(tmp_path)
    for name in ("checkpoint.pt", "config.yaml", "metrics.json"):
        (tmp_path / name).unlink()
    before = files(tmp_path)
    with pytest.raises(ConfigError, match="log.csv of an unknown run"):
        run(tmp_path)
    assert files(tmp_path) == before


def test_the_same_config_returns_the_stored_metrics(tmp_path):
    first = run(tmp_path)
    before = files(tmp_path)
    assert run(tmp_path) == first == json.loads((tmp_path / "metrics.json").read_text())
    assert files(tmp_path) == before


def test_a_rerun_without_checkpoint_does_not_repeat_log_rows(tmp_path):
    run(tmp_path)
    assert iterations(tmp_path) == [0, 10, 19]
    for name in ("checkpoint.pt", "metrics.json"):  # as if killed before the first checkpoint
        (tmp_path / name).unlink()
    run(tmp_path)
    assert iterations(tmp_path) == [0, 10, 19]


def test_a_resume_may_change_runtime_keys_only(tmp_path):
    assert run(tmp_path, stop_after=12) is None
    assert iterations(tmp_path) == [0, 10]
    run(tmp_path, dict(CFG, checkpoint_every=7, device="cpu"))
    assert iterations(tmp_path) == [0, 10, 19]


def test_a_folder_holding_only_an_old_config_yaml_is_free(tmp_path):
    run(tmp_path)
    for name in ("checkpoint.pt", "metrics.json", "log.csv"):  # what `dmp.suite prepare` removes
        (tmp_path / name).unlink()
    assert run(tmp_path, dict(CFG, seed=3))["seed"] == 3
    assert "seed: 3" in (tmp_path / "config.yaml").read_text()


def test_a_run_recorded_before_an_option_existed_is_the_same_run_at_its_default():
    from dmp.train.checkpoint import config_changes
    new = dict(CFG, shift=0, scale_jitter=0.0)
    old = {k: v for k, v in new.items() if k not in ("shift", "scale_jitter")}   # written by an older version
    assert config_changes(old, new) == []
    assert config_changes(old, dict(new, shift=2)) == ["shift"]


def test_a_finished_run_recorded_before_an_option_existed_is_not_trained_again(tmp_path):
    run(tmp_path)
    for name in ("metrics.json", "config.yaml"):  # as an older version wrote them, without intra_grad_p
        path = tmp_path / name
        text = path.read_text()
        if name == "metrics.json":
            m = json.loads(text)
            del m["config"]["intra_grad_p"]
            text = json.dumps(m)
        else:
            text = "".join(line for line in text.splitlines(True) if not line.startswith("intra_grad_p:"))
        path.write_text(text)
    before = {n: (tmp_path / n).read_bytes() for n in ("metrics.json", "log.csv", "checkpoint.pt")}
    assert "intra_grad_p" not in run(tmp_path)["config"]
    assert {n: (tmp_path / n).read_bytes() for n in before} == before


# -- one writer per run folder (fcntl.flock on out/.dmp-run.lock, held for the whole run) ----------------------------
HOLDER = """
import fcntl, os, sys
os.makedirs(sys.argv[1], exist_ok=True)
fd = os.open(os.path.join(sys.argv[1], ".dmp-run.lock"), os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.readline()
"""


def hold_lock(out):
    """Another process holding the run folder's lock (as a running ``dmp train`` does); stop it with .kill()."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], cwd=root, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "locked\n"
    return proc


def test_a_second_process_on_the_same_folder_is_refused_at_once_whatever_its_config(tmp_path, monkeypatch):
    import fcntl
    import time

    run(tmp_path, stop_after=12)
    before = files(tmp_path)
    holder = hold_lock(tmp_path)
    flock = fcntl.flock

    def no_wait(fd, op):  # "at once" without a clock: a blocking flock would wait for the holder, who never ends
        assert op & (fcntl.LOCK_NB | fcntl.LOCK_UN), "a blocking flock: the refusal would wait for the holder"
        return flock(fd, op)

    def no_sleep(seconds):
        raise AssertionError(f"slept {seconds} s (a retry loop) before refusing")

    try:
        for cfg in (CFG, dict(CFG, lambda1=1.0, seed=3)):  # the same run, another run: both refused
            with monkeypatch.context() as m:
                m.setattr(fcntl, "flock", no_wait)
                m.setattr(time, "sleep", no_sleep)
                with pytest.raises(RunFolderBusy,
                                   match=re.escape(f"{tmp_path} is in use by another training process")):
                    run(tmp_path, cfg)
        assert holder.poll() is None  # refused while the holder held the lock (it ends only when killed)
        assert files(tmp_path) == before  # nothing written, log.csv untouched
    finally:
        holder.kill()
        holder.wait()
    assert run(tmp_path)["iterations"] == 20  # the kernel released the killed holder's lock: the run resumes
    assert iterations(tmp_path) == [0, 10, 19]


def test_the_lock_is_released_when_the_run_ends_or_fails(tmp_path):
    import fcntl
    import os

    from dmp.train.checkpoint import LOCK_FILE

    def free():
        fd = os.open(tmp_path / LOCK_FILE, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)

    run(tmp_path)
    assert free()
    with pytest.raises(ConfigError):
        run(tmp_path, dict(CFG, seed=3))
    assert free()


def test_the_command_line_refuses_a_busy_folder_with_one_line(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    holder = hold_lock(tmp_path / "run")
    try:
        proc = hang_guard.run([sys.executable, "-m", "dmp", "train", "--out", str(tmp_path / "run"), "dataset=demo",
                               "source=S", "target=O", "iterations=5"], cwd=Path(__file__).resolve().parents[1],
                              quiet=600)
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 2
    assert proc.stderr == (f"error: {tmp_path / 'run'} is in use by another training process (it holds "
                           f"{tmp_path / 'run' / '.dmp-run.lock'}); wait until it ends or use another --out folder\n")


def test_the_jobs_prepare_step_takes_the_run_lock_without_importing_torch(tmp_path):
    """Every Snakemake train job starts with `python -m dmp.suite prepare` (under the run folder's lock): it must not
    pay torch's import (seconds per job on a small machine)."""
    import subprocess
    import sys

    code = ("import sys; from dmp import suite; suite.prepare(sys.argv[1], 'abc'); "
            "print(sorted(m for m in ('torch', 'pandas') if m in sys.modules))")
    from pathlib import Path

    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    assert (tmp_path / "run" / "suite_signature.txt").read_text() == "abc\n"
