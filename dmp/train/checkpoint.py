"""Checkpoint files (atomic writes live in :mod:`dmp.io`) and the identity of a run folder."""
from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml

from ..config import PARAMS, ConfigError, load_yaml
from ..io import atomic_write, write_json, write_text
from ..run_lock import LOCK_FILE, RunFolderBusy, holds_run_lock, run_lock  # noqa: F401 (re-exported)

__all__ = ["CheckpointError", "LOCK_FILE", "RUNTIME_KEYS", "RunFolderBusy", "check_log", "check_run_folder",
           "config_changes", "holds_run_lock", "load_states", "load_torch", "read_metrics_file", "run_lock",
           "save_json", "save_text", "save_torch", "write_config"]

# Config keys that change how a run executes, not what it computes: a run may resume with other values, and a table
# takes a run whatever their values. log_accuracy_every only adds a record beside the result (the target accuracy
# during training, for diagnosis; evaluating in between leaves every number of the run as it is, a tested property).
RUNTIME_KEYS = ("threads", "num_workers", "device", "checkpoint_every", "compile", "input_cache", "log_accuracy_every")
RUN_FILES = ("checkpoint.pt", "metrics.json", "log.csv")


class CheckpointError(ConfigError):
    """A checkpoint that cannot be loaded (the command line reports it as ``error: ...``)."""


def save_torch(obj, path):
    """Write ``obj`` atomically; a failure (e.g. a full disk: :func:`dmp.io.atomic_write`) names the file."""
    try:
        atomic_write(path, lambda fh: torch.save(obj, fh))
    except OSError as exc:
        if str(path) in str(exc):
            raise
        err = OSError(f"cannot write {path}: {exc}")
        err.errno = exc.errno
        raise err from exc
    except RuntimeError as exc:
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
    problem = _field_problem(state)
    if problem:
        raise CheckpointError(f"{path}: {problem}{hint}")
    return state


def _shape_problem(saved, fresh, where: str) -> str | None:
    """The first tensor of ``saved`` whose shape (or nesting) differs from the one at the same key of ``fresh`` (this
    run's state before resuming), else None; where ``fresh`` holds no tensor (None, anchors not computed yet) any
    value passes."""
    if isinstance(fresh, torch.Tensor):
        if not isinstance(saved, torch.Tensor):
            return f"{where} is a {type(saved).__name__}, not a tensor"
        return (None if saved.shape == fresh.shape else
                f"tensor {where} has shape {list(saved.shape)}, this run's has {list(fresh.shape)}")
    if isinstance(fresh, dict):
        if not isinstance(saved, dict):
            return f"{where} is a {type(saved).__name__}, not a mapping"
        return next(filter(None, (_shape_problem(saved[k], v, f"{where}.{k}") for k, v in fresh.items()
                                  if k in saved)), None)
    if isinstance(fresh, (list, tuple)) and fresh and isinstance(fresh[0], (torch.Tensor, dict, list, tuple)):
        if not isinstance(saved, (list, tuple)) or len(saved) != len(fresh):
            return f"{where} holds {len(saved) if isinstance(saved, (list, tuple)) else 'no list of'} entries, " \
                   f"this run's {len(fresh)}"
        return next(filter(None, (_shape_problem(a, b, f"{where}[{i}]") for i, (a, b) in
                                  enumerate(zip(saved, fresh)))), None)
    return None


def load_states(path, state: dict, fresh: dict, parts: dict) -> None:
    """Load ``state`` (read by :func:`load_torch` from ``path``) into ``parts`` (``{key: object with
    load_state_dict}``, None skipped): first every tensor's shape against ``fresh`` (this run's own state: a
    checkpoint of another network or a tampered file), then each part; a failure raises :class:`CheckpointError`
    naming the file and the tensor or key, before any step runs."""
    sums, saved = fresh.get("anchors", {}).get("_sum"), state.get("anchors")
    if sums is not None and isinstance(saved, dict):  # anchors exist after a refresh (else None), shaped as the sums
        shaped = {"class_means": sums, "means": [s[0] for s in sums], "mean_prediction": fresh["anchors"]["_pred_sum"]}
        fresh = {**fresh, "anchors": {**fresh["anchors"],
                                      **{k: v for k, v in shaped.items() if saved.get(k) is not None}}}
    # the provenance is a record, one entry per launch (a checkpoint of a run resumed n times holds n + 1, this
    # launch's state one): not a shape to compare; its fields are checked by load_torch
    problem = _shape_problem({k: state[k] for k in fresh if k in state and k != "provenance"}, fresh, "checkpoint")
    hint = "; delete it to restart the run from the beginning"
    if problem:
        raise CheckpointError(f"{path}: {problem.replace('checkpoint.', '', 1)}{hint}")
    for key, part in parts.items():
        if part is None:
            continue
        try:
            part.load_state_dict(state[key])
        except Exception as exc:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            detail = " ".join((lines[1:] if len(lines) > 1 else lines) or [type(exc).__name__])
            raise CheckpointError(f"{path}: {key!r} does not fit this run ({_first_line(ValueError(detail))})"
                                  f"{hint}") from exc
        if isinstance(part, torch.optim.Optimizer):  # its buffers are used (and fail) only at the next step
            for group in part.param_groups:
                for i, p in enumerate(group["params"]):
                    for name, buf in part.state.get(p, {}).items():
                        if isinstance(buf, torch.Tensor) and buf.dim() and buf.shape != p.shape:
                            raise CheckpointError(f"{path}: tensor {key}.state.{name} of parameter {i} has shape "
                                                  f"{list(buf.shape)}, its parameter {list(p.shape)}{hint}")


def _field_problem(state: dict) -> str | None:
    """What is wrong with the plain fields of a trainer checkpoint (a tampered or foreign file), else None: the
    iteration an integer in ``0..config iterations``, the thread count a positive integer, the config a mapping, the
    provenance a list of mappings, the times finite numbers >= 0, the dataset version a string, the accuracy log
    ``[iteration, accuracy]`` pairs."""
    import math

    def integer(v):
        return isinstance(v, int) and not isinstance(v, bool)

    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
    config = state.get("config", {})
    if not isinstance(config, dict):
        return f"field 'config' is a {type(config).__name__}, not the run's config (a mapping)"
    last = config.get("iterations")
    checks = {
        "iteration": (lambda v: integer(v) and v >= 0 and (not integer(last) or v <= last),
                      f"an iteration in 0..{last}" if integer(last) else "an iteration >= 0"),
        "threads": (lambda v: integer(v) and 1 <= v <= 65536, "a thread count >= 1"),
        "provenance": (lambda v: isinstance(v, list) and all(isinstance(p, dict) for p in v), "a list of mappings"),
        "dataset_version": (lambda v: isinstance(v, str), "a dataset version (a string)"),
        "accuracy_log": (lambda v: isinstance(v, list) and all(isinstance(r, list) and len(r) == 2 and
                                                               all(map(number, r)) for r in v),
                         "a list of [iteration, accuracy] pairs"),
        **{k: (number, "a time in seconds >= 0") for k in ("train_seconds", "anchor_seconds", "wall_seconds")},
    }
    for key, (ok, what) in checks.items():
        if key in state and not ok(state[key]):
            return f"field {key!r} = {_first_line(ValueError(repr(state[key])))} is not {what}"
    return None


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
    if (out / "log.csv").exists():
        check_log(out / "log.csv")
    if (out / "config.yaml").exists():
        try:
            stored = load_yaml(out / "config.yaml")
        except (ConfigError, yaml.YAMLError) as exc:
            why = _first_line(exc).removeprefix(f"{out / 'config.yaml'}: ")
            raise ConfigError(f"{out / 'config.yaml'} is not a run config ({why}); restore it, or delete the run "
                              f"folder to train the run again") from None
    elif (out / "metrics.json").exists():
        stored = read_metrics_file(out / "metrics.json").get("config") or {}
    elif not (out / "checkpoint.pt").exists():
        raise ConfigError(f"{out} holds a log.csv of an unknown run; use another --out folder or delete it")
    else:
        return
    changed = config_changes(stored, cfg)
    if changed:
        raise ConfigError(f"{out} holds another run, whose config differs in: {', '.join(changed)}; "
                          f"use another --out folder or delete it")


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def check_log(path) -> None:
    """Refuse (:class:`ConfigError` naming the file and line) a ``log.csv`` that is not a training log: a header
    starting with ``iteration`` and an integer iteration on every row (what a resume reads to cut it back)."""
    import csv

    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                return
            if not header or header[0] != "iteration":
                raise ValueError("line 1 is not the header 'iteration,lr,loss,...'")
            for row in reader:
                if row and not row[0].lstrip("-").isdigit():
                    raise ValueError(f"line {reader.line_num} has no integer iteration")
    except (ValueError, csv.Error) as exc:
        why = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else _first_line(exc)
        raise ConfigError(f"{path} is not a training log ({why}); delete it (a resumed run goes on "
                          f"without the rows before its checkpoint) or delete the run folder") from None


def read_metrics_file(path) -> dict:
    """A run's ``metrics.json`` as a dict; a file that is cut off, not JSON or not a JSON object raises
    :class:`CheckpointError` naming it (one line, with what to do)."""
    hint = "delete it (and the run's checkpoint.pt) to train the run again"
    try:
        metrics = json.loads(Path(path).read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is not a metrics file (cut off or corrupt: {_first_line(exc)}); "
                              f"{hint}") from None
    if not isinstance(metrics, dict):
        raise CheckpointError(f"{path} holds a JSON {type(metrics).__name__}, not a run's metrics (an object); "
                              f"{hint}")
    return metrics


def write_config(out, cfg: dict) -> None:
    """Record ``cfg`` as the identity of the run in ``out`` (``config.yaml``)."""
    save_text(yaml.safe_dump(cfg, sort_keys=True), Path(out) / "config.yaml")
