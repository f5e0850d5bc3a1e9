"""Checkpoints are loaded as tensors and plain values only: a tampered file cannot run code, and a corrupt one
stops the run with one message that names it. Leftover temporary files are removed when a run resumes."""
import os
import shlex

import pytest
import torch

import dmp.train
from dmp.cli import main
from dmp.train import train
from dmp.train.checkpoint import CheckpointError
from synthetic import shift_task, small_cfg

CFG = small_cfg(iterations=20, intra_start=5)


def interrupted_run(out, **over):
    assert train(dict(CFG, **over), out, task=shift_task(), progress=False, stop_after=10) is None
    return out / "checkpoint.pt"


def plain(value):
    """True if ``value`` holds only tensors and plain Python values."""
    if isinstance(value, dict):
        return all(isinstance(k, (str, int)) and plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(map(plain, value))
    return value is None or isinstance(value, (torch.Tensor, str, int, float, bool))


@pytest.mark.parametrize("over", [{}, dict(optimizer="sgd", method="dmp_ent", anchor_mode="accumulate",
                                           setting="partial", anchor_period=4)])
def test_checkpoint_holds_tensors_and_plain_values_only(tmp_path, over):
    state = torch.load(interrupted_run(tmp_path, **over), weights_only=True)
    assert plain(state) and torch.is_tensor(state["weights"])


class Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {shlex.quote(str(self.marker))}",)


def test_a_tampered_checkpoint_does_not_run_code(tmp_path):
    path = interrupted_run(tmp_path / "run")
    marker = tmp_path / "pwned"
    state = torch.load(path, weights_only=True)
    state["weights"] = Payload(marker)
    torch.save(state, path)
    torch.load(path, weights_only=False)  # the payload works when unpickled without restrictions ...
    assert marker.exists()
    marker.unlink()
    with pytest.raises(CheckpointError, match="delete it"):  # ... and is refused on resume
        train(CFG, tmp_path / "run", task=shift_task(), progress=False)
    assert not marker.exists()


@pytest.mark.parametrize("damage", ["truncated", "empty", "not a checkpoint"])
def test_a_damaged_checkpoint_gives_one_message_naming_it(tmp_path, damage):
    path = interrupted_run(tmp_path)
    if damage == "not a checkpoint":
        torch.save({"model": torch.zeros(1)}, path)
    else:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"")
    with pytest.raises(CheckpointError) as err:
        train(CFG, tmp_path, task=shift_task(), progress=False)
    assert str(path) in str(err.value) and "delete it to restart the run" in str(err.value)


def test_the_command_line_reports_a_damaged_checkpoint_as_an_error(tmp_path, monkeypatch, capsys):
    path = interrupted_run(tmp_path)
    path.write_bytes(path.read_bytes()[:100])
    real = dmp.train.train
    monkeypatch.setattr(dmp.train, "train", lambda user, out, progress: real(CFG, out, task=shift_task(),
                                                                             progress=False))
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--out", str(tmp_path), "--quiet"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(path) in err and "delete it" in err and err.count("\n") == 1


def test_leftover_temporary_files_are_removed_when_a_run_resumes(tmp_path):
    interrupted_run(tmp_path)
    leftovers = [".checkpoint.pt.0123456789abcdef.tmp.pt", ".log.csv.k2x_9qab.tmp.csv", ".config.yaml.ab12cd34.tmp"]
    for name in leftovers + ["notes.tmp.txt"]:
        (tmp_path / name).write_text("partial")
    train(CFG, tmp_path, task=shift_task(), progress=False)
    assert not [n for n in leftovers if (tmp_path / n).exists()]
    assert (tmp_path / "notes.tmp.txt").exists()  # not ours


@pytest.mark.parametrize("name, damage, says", [
    ("metrics.json", b"[1, 2, 3]\n", "holds a JSON list, not a run's metrics"),
    ("metrics.json", b'{"status": "complete", "accur', "is not a metrics file (cut off or corrupt"),
    ("config.yaml", bytes(range(256)) * 4, "is not a run config (not a YAML text file"),
    ("config.yaml", b"- a\n- b\n", "is not a run config"),
    ("log.csv", b"<html>garbage,,\n1,2\n", "is not a training log (line 1 is not the header"),
    ("log.csv", b"\x89PNG\r\n\x1a\n\xff\xfe", "is not a training log (not UTF-8 text)"),
    ("log.csv", b"iteration,lr,loss,ce\n0,0.1,1,1\nten,0.1,1,1\n", "is not a training log (line 3 has no integer"),
])
def test_a_corrupt_or_foreign_run_file_gives_one_line_naming_it(tmp_path, name, damage, says):
    """What a run folder holds is read before any work: a damaged file is named, with what to do, and left as is."""
    from dmp.commands import error_message

    interrupted_run(tmp_path)
    (tmp_path / "metrics.json").write_text("{}")  # (a file of each kind in the folder)
    (tmp_path / name).write_bytes(damage)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ValueError) as err:
        train(CFG, tmp_path, task=shift_task(), progress=False)
    message = error_message(err.value)
    assert f"{tmp_path / name} {says}" in message and "delete" in message and "\n" not in message, message
    assert len(message) < 400
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
