"""Checkpoint files (atomic writes live in :mod:`dmp.io`) and the identity of a run folder."""
from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml

from ..config import PARAMS, ConfigError, load_yaml
from ..io import atomic_write, write_json, write_text

__all__ = ["CheckpointError", "RUNTIME_KEYS", "check_run_folder", "config_changes", "load_torch", "save_json",
           "save_text", "save_torch", "write_config"]

# Config keys that change how a run executes, not what it computes: a run may resume with other values.
RUNTIME_KEYS = ("threads", "num_workers", "device", "checkpoint_every")
RUN_FILES = ("checkpoint.pt", "metrics.json", "log.csv")


class CheckpointError(ConfigError):
    """A checkpoint that cannot be loaded (the command line reports it as ``error: ...``)."""


def save_torch(obj, path):
    """Write ``obj`` atomically; a failure (e.g. a full disk) names the file."""
    try:
        atomic_write(path, lambda fh: torch.save(obj, fh))
    except (OSError, RuntimeError) as exc:
        err = OSError(f"cannot write {path}: {exc}")
        err.errno = getattr(exc, "errno", None)
        raise err from exc


def save_json(obj, path):
    write_json(path, obj)


def save_text(text: str, path):
    write_text(path, text)


def load_torch(path, keys=()):
    """Load a file written by :func:`save_torch`: a dict holding at least ``keys``. Only tensors and plain
    values are unpickled (``weights_only``), so a tampered file cannot run code; a file that cannot be loaded
    raises :class:`CheckpointError` naming it."""
    hint = "; delete it to restart the run from the beginning"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(f"{path} cannot be loaded ({type(exc).__name__}: corrupt, truncated, or holding "
                              f"objects other than tensors and plain values){hint}") from exc
    if not isinstance(state, dict) or not set(keys) <= set(state):
        raise CheckpointError(f"{path} is not a checkpoint of this trainer{hint}")
    return state


def config_changes(old: dict, new: dict) -> list[str]:
    """Keys (other than :data:`RUNTIME_KEYS`) whose values differ between two resolved configs. A key that one
    config lacks (a run recorded before the option existed) counts as its declared default, the behaviour that
    run had."""
    def value(cfg, k):
        return cfg[k] if k in cfg else (PARAMS[k].default if k in PARAMS else None)
    return sorted(k for k in set(old) | set(new) if k not in RUNTIME_KEYS and value(old, k) != value(new, k))


def check_run_folder(out, cfg: dict) -> None:
    """Refuse (:class:`ConfigError`) to train ``cfg`` into ``out`` when ``out`` holds files of another run: its
    ``config.yaml`` (the run's identity; else the config in its ``metrics.json``) differs from ``cfg``, or it
    holds a ``log.csv`` of unknown config and no checkpoint (a checkpoint's own config is checked on resume)."""
    out = Path(out)
    if not any((out / n).exists() for n in RUN_FILES):
        return
    if (out / "config.yaml").exists():
        stored = load_yaml(out / "config.yaml")
    elif (out / "metrics.json").exists():
        stored = json.loads((out / "metrics.json").read_text()).get("config") or {}
    elif not (out / "checkpoint.pt").exists():
        raise ConfigError(f"{out} holds a log.csv of an unknown run; use another --out folder or delete it")
    else:
        return
    changed = config_changes(stored, cfg)
    if changed:
        raise ConfigError(f"{out} holds another run, whose config differs in: {', '.join(changed)}; "
                          f"use another --out folder or delete it")


def write_config(out, cfg: dict) -> None:
    """Record ``cfg`` as the identity of the run in ``out`` (``config.yaml``)."""
    save_text(yaml.safe_dump(cfg, sort_keys=True), Path(out) / "config.yaml")
