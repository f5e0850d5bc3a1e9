"""Atomically written files get the permissions of an ordinary ``open()``: 0666 less the umask."""
import os
import stat

import pytest
import torch

from dmp.io import TEMP_NAME, atomic_write, write_text
from dmp.train.checkpoint import save_torch


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_respect_the_umask(tmp_path, umask, mask, mode):
    umask(mask)
    write_text(tmp_path / "a.json", "{}\n")
    save_torch({"x": torch.zeros(2)}, tmp_path / "b.pt")
    for name in ("a.json", "b.pt"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == mode, name


def test_temporary_names_are_recognised_as_leftovers(tmp_path):
    seen = []
    atomic_write(tmp_path / "c.pt", lambda fh: seen.extend(p.name for p in tmp_path.iterdir()))
    assert len(seen) == 1 and TEMP_NAME.fullmatch(seen[0]) and seen[0].startswith(".c.pt.")
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]


@pytest.fixture
def full_disk(monkeypatch):
    """atomic_write's temporary files opened on /dev/full: every write fails with ENOSPC, as on a full disk."""
    import dmp.io

    real_open = os.open

    def open_full(path, flags, mode=0o777, **kw):
        if TEMP_NAME.fullmatch(os.path.basename(str(path))):
            real_open(path, flags, mode)  # (the temporary file exists, as on a real disk, and must be removed)
            return real_open("/dev/full", os.O_WRONLY)
        return real_open(path, flags, mode, **kw)

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    monkeypatch.setattr(dmp.io.os, "open", open_full)


@pytest.mark.parametrize("what", ["text", "checkpoint"])
def test_a_full_disk_says_so_and_names_the_file(tmp_path, full_disk, what):
    from dmp.commands import error_message

    path = tmp_path / ("metrics.json" if what == "text" else "checkpoint.pt")
    with pytest.raises(OSError) as err:
        if what == "text":
            write_text(path, "x" * 100_000)
        else:
            save_torch({"x": torch.zeros(100_000)}, path)
    assert error_message(err.value) == (f"no space left on device while writing {path}; free some space there and "
                                        f"run the command again")
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_a_full_disk_names_the_log_a_run_appends_to(tmp_path):
    """log.csv is appended to, not written atomically: its writer names it too (dmp/train/trainer.py _append_log)."""
    from dmp.commands import error_message
    from dmp.io import write_errors_named

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    log = tmp_path / "log.csv"
    with pytest.raises(OSError) as err:
        with write_errors_named(log), open("/dev/full", "a") as fh:  # (as the disk holding log.csv when full)
            fh.write("0,0.1,1.0,1.0\n" * 10_000)
            fh.flush()
    assert error_message(err.value) == (f"no space left on device while writing {log}; free some space there and "
                                        f"run the command again")
