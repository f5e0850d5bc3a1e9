"""Atomic file writes: a crash never leaves a half-written checkpoint or metrics file behind."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch


def _atomic(path: Path, write):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_torch(obj, path):
    _atomic(path, lambda fh: torch.save(obj, fh))


def save_json(obj, path):
    _atomic(path, lambda fh: fh.write((json.dumps(obj, indent=1, sort_keys=True) + "\n").encode()))


def save_text(text: str, path):
    _atomic(path, lambda fh: fh.write(text.encode()))


def load_torch(path):
    return torch.load(path, map_location="cpu", weights_only=False)
