"""A run's metrics.json as a result: read it, check that it is a finished run of the config a table or figure
expects and that its values can be right, and look up a number in it.

A metrics.json is used only if it is a finished run (``status: complete``) of the run the reader expects: its recorded
config is the whole config ``python -m dmp train`` resolves for that run (:meth:`~dmp.suite.Suite.expected_config`:
every key that changes a result, not only the run's identity; a key recorded before it existed counts as its default,
the runtime keys aside), its accuracies lie in [0, 100] and its times are finite and >= 0, with a finite number at
every key the reader needs from it; any other file is skipped, and the reader says why. The research reports
(the package ``studies``) read every record with the same checks
(:func:`load_record`) and stop at one that fails them, naming the file."""
from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from dmp import methods
from dmp.config import PARAMS, short_repr
from dmp.io import sha256_file
from dmp.train.checkpoint import RUNTIME_KEYS

ACCURACY_KEYS = ("accuracy", "mean_class_accuracy")  # percentages, also per class and per interpolation alpha
TIME_KEYS = ("seconds_per_iter", "seconds_per_epoch", "train_seconds", "anchor_seconds", "wall_seconds",
             "seconds_per_epoch_wall", "seconds_per_batch_wall")


class RecordError(ValueError):
    """A run record (metrics.json) no reader may use; the message is one line naming the file and why."""


def parse_record(path) -> tuple[dict | None, str | None]:
    """``(metrics, None)`` if ``path`` holds a JSON object, else ``(None, why)`` (a file cut off mid-write, or not
    JSON, is ``unreadable``): the first check of every reader of run records."""
    try:
        metrics = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        return None, f"unreadable ({type(exc).__name__})"
    if not isinstance(metrics, dict):
        return None, "not a JSON object"
    return metrics, None


REPORT_KEYS = ("accuracy", "git_commit", "dataset_version", "config/dataset", "config/method", "config/seed",
               "config/source", "config/target")
"""What the research reports (the package ``studies``) read of every run record."""


def load_record(path, required=REPORT_KEYS) -> dict:
    """A run record as the research reports read it, with the checks ``dmp tables`` applies (:func:`read_metrics`):
    a readable JSON object (:func:`parse_record`), a finished run (a ``status`` other than ``complete`` is refused;
    trainers write the record only when a run completes), the values of :func:`value_problem` (accuracies in
    [0, 100], finite times >= 0; ``mean_class_accuracy`` only where recorded) and every key path of ``required``
    (``config/seed``: key ``seed`` of ``config``) present. Anything else raises :class:`RecordError`, one line
    naming the file and why: a report never prints a number from a record that cannot be right."""
    metrics, why = parse_record(path)
    if metrics is not None:
        status = metrics.get("status", "complete")
        missing = [k for k in required if _get(metrics, k.split("/")) is _MISSING]
        why = (f"status {status!r}, not 'complete'" if status != "complete" else
               value_problem(metrics, required=("accuracy",)) or (
                   f"no key {', '.join(missing)}" if missing else None))
    if why:
        raise RecordError(f"{path}: {why}")
    return metrics


_MISSING = object()


def _get(metrics: dict, keys):
    """The value at the key path ``keys`` of a metrics dict, or ``_MISSING``."""
    value = metrics
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return _MISSING
        value = value[key]
    return value


def read_metrics(path, expected: dict, keys) -> tuple[dict | None, str | None]:
    """``(metrics, None)`` if ``path`` holds a finished run whose recorded config matches ``expected`` (the run's
    :meth:`~dmp.suite.Suite.expected_config`, or a part of it) and whose values pass :func:`value_problem`, with a
    finite number at each key path of ``keys``; ``(None, why)`` if it holds anything else; ``(None, None)`` if there
    is no file (a run not done yet)."""
    path = Path(path)
    if not path.exists():
        return None, None
    metrics, why = parse_record(path)
    if metrics is None:
        return None, why
    if metrics.get("status") != "complete":
        return None, f"status {metrics.get('status')!r}, not 'complete'"
    if metrics.get("target_labels_read"):
        return None, (f"a run that read target labels ({metrics['target_labels_read']}): a diagnosis, never a "
                      f"result of a table")
    config = metrics.get("config")
    if not isinstance(config, dict):
        return None, "no recorded config"
    foreign = config_differences(config, expected, metrics.get("weights_sha256"))
    if foreign:
        more = f" and {len(foreign) - 4} more" if len(foreign) > 4 else ""
        return None, "a run of another config: " + ", ".join(foreign[:4]) + more
    problem = value_problem(metrics)
    if problem:
        return None, problem
    stacked = [p["stacked_with"] for p in metrics.get("provenance") or []
               if isinstance(p, dict) and p.get("stacked_with")]
    if stacked and any(k and k[-1] in TIME_KEYS for k in keys):
        return None, (f"trained stacked with seeds {stacked[-1]} (dmp train --seeds): its seconds are the shared "
                      f"step's, not a single run's time")
    bad = ["/".join(k) for k in keys if lookup(metrics, k) is None]
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        return None, "no finite number at " + ", ".join(bad[:3]) + more
    return metrics, None


def config_differences(config: dict, expected: dict, weights_sha256=None) -> list[str]:
    """``key recorded (expected value)`` for each key of ``expected`` the recorded ``config`` differs in (a key it
    lacks counts as its declared default; runtime keys are ignored). ``weights_path`` compares the file: another
    path to a file with the recorded ``weights_sha256`` is the same weights, and the same path to a file whose
    sha256 is no longer the recorded one is not."""
    out = []
    for key, want in sorted(expected.items()):
        have = config[key] if key in config else _default(key)
        if key == "weights_path" and have == want and isinstance(want, str) and weights_sha256:
            now = _sha256(want)
            if now is not None and now != weights_sha256:  # the same path, another file since the run
                out.append(f"weights_path {short_repr(want, 30)} (its file has sha256 {now[:12]} now, the run "
                           f"loaded {str(weights_sha256)[:12]})")
            continue
        if key in RUNTIME_KEYS or have == want:
            continue
        if key == "weights_path" and isinstance(want, str) and weights_sha256 and weights_sha256 == _sha256(want):
            continue
        out.append(f"{key} {short_repr(have, 30)} (expected {short_repr(want, 30)})")
    return out


def _default(key):
    if key in PARAMS:
        return PARAMS[key].default
    declared = methods.declared_params()
    return declared[key][1].default if key in declared else None


def _sha256(path: str) -> str | None:
    p = Path(path)
    if not p.is_file():
        return None
    st = p.stat()
    return _sha256_of(str(p), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=None)
def _sha256_of(path: str, mtime_ns: int, size: int) -> str:
    """The file's sha256, hashed once per (path, modification time, size)."""
    return sha256_file(path)


def value_problem(metrics: dict, required=ACCURACY_KEYS) -> str | None:
    """Why the values of a finished run's metrics cannot be right (an accuracy outside [0, 100], a time that is not
    a finite number >= 0; a top-level accuracy of ``required`` missing), else None."""
    sections = [("", metrics)]
    if isinstance(metrics.get("interpolation"), dict):
        sections += [(f"interpolation/{a}/", v) for a, v in metrics["interpolation"].items() if isinstance(v, dict)]
    for where, section in sections:
        for key in ACCURACY_KEYS:
            value = section.get(key)
            if (key in section or (not where and key in required)) and not (_number(value) and 0 <= value <= 100):
                return f"{where}{key} {short_repr(value, 30)} is not an accuracy in [0, 100]"
        per_class = section.get("per_class_accuracy", {})
        if not isinstance(per_class, dict):
            return f"{where}per_class_accuracy is not a mapping of class: accuracy"
        for name, value in per_class.items():
            if _number(value) and not 0 <= value <= 100:
                return f"{where}per_class_accuracy/{name} {short_repr(value, 30)} is not an accuracy in [0, 100]"
    for key in TIME_KEYS:
        if key in metrics and not (_number(metrics[key]) and metrics[key] >= 0):
            return f"{key} {short_repr(metrics[key], 30)} is not a finite time >= 0"
    return None


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def lookup(metrics: dict, keys: tuple[str, ...]) -> float | None:
    """The number at ``keys`` in a metrics dict, None if absent or not finite."""
    value = _get(metrics, keys)
    if value is _MISSING or isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)
