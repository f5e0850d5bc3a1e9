"""Checkpoint files (atomic writes live in :mod:`dmp.io`)."""
from __future__ import annotations

import torch

from ..io import atomic_write, write_json, write_text

__all__ = ["load_torch", "save_json", "save_text", "save_torch"]


def save_torch(obj, path):
    atomic_write(path, lambda fh: torch.save(obj, fh))


def save_json(obj, path):
    write_json(path, obj)


def save_text(text: str, path):
    write_text(path, text)


def load_torch(path):
    return torch.load(path, map_location="cpu", weights_only=False)
