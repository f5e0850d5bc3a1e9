"""What decides a result is part of a run's identity on resume: the thread count the run started with and the
dataset version."""
import pytest
import torch

from dmp.config import ConfigError
from dmp.train import train
from tests.synthetic import shift_task, small_cfg


def _outcome(m):
    return m["accuracy"], m["confusion_matrix"], m["class_weights"], m["interpolation"]


def test_resume_keeps_the_thread_count_it_started_with(tmp_path):
    before = torch.get_num_threads()
    try:
        cfg = small_cfg(iterations=40, intra_start=10, bottleneck_dims=[256, 128], threads=1)
        ref = train(cfg, tmp_path / "ref", task=shift_task(), progress=False)
        assert train(cfg, tmp_path / "run", task=shift_task(), progress=False, stop_after=20) is None
        resumed = train(dict(cfg, threads=2), tmp_path / "run", task=shift_task(), progress=False)
        assert resumed["threads"] == 1 and ref["threads"] == 1
        assert _outcome(resumed) == _outcome(ref)
        assert (tmp_path / "ref" / "log.csv").read_text() == (tmp_path / "run" / "log.csv").read_text()
    finally:
        torch.set_num_threads(before)


def test_resume_on_another_dataset_version_is_refused(tmp_path):
    cfg = small_cfg(iterations=40, intra_start=10)
    train(cfg, tmp_path, task=shift_task(), progress=False, stop_after=20)
    changed = shift_task()
    changed.dataset_version = "other"
    with pytest.raises(ConfigError, match="dataset version"):
        train(cfg, tmp_path, task=changed, progress=False)
