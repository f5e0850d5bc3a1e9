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
