"""A run folder belongs to one run: another config is refused (nothing overwritten or appended), the same
config resumes or returns its stored metrics, and log.csv never holds rows twice."""
import csv
import json
import re

import pytest

from dmp.config import ConfigError
from dmp.train import train
from synthetic import shift_task, small_cfg

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
