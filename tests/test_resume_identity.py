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


def test_labels_outside_the_classes_are_refused_before_training(tmp_path):
    task = shift_task()
    task.target_eval.labels[3] = 4  # 4 classes: 0..3
    with pytest.raises(ConfigError, match="target_(train|eval) labels span 0..4, outside the 4 classes"):
        train(small_cfg(iterations=5), tmp_path, task=task, progress=False)
    assert not (tmp_path / "checkpoint.pt").exists()


def test_a_checkpoint_that_cannot_be_written_names_the_file(tmp_path, monkeypatch):
    from dmp.train import checkpoint

    def full_disk(path, write, binary=True):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(checkpoint, "atomic_write", full_disk)
    with pytest.raises(OSError, match="cannot write .*checkpoint.pt: .*No space left"):
        checkpoint.save_torch({"a": 1}, tmp_path / "checkpoint.pt")
