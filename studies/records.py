"""The one reader of the studies' run folders. Every run record (metrics.json) goes through dmp's own record check,
:func:`dmp.metrics.load_record` (the checks ``dmp tables`` applies: a record cut off, an accuracy outside [0, 100]
or a key missing raises :class:`dmp.metrics.RecordError`, one line naming the file), so no study prints a number
from a record that cannot be right. The diagnoses' own files beside a run (prototypes.json, geometry.json,
diagnosis.json) are read as plain JSON."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from dmp.metrics import REPORT_KEYS, load_record

ROOT = Path(__file__).resolve().parents[1]
EVIDENCE = ROOT / "results" / "evidence" / "runs"
"""The evidence studies' runs: ``<study>/<dataset>/<setting>/<task>/<method>/<variant>/seed<k>/``."""
OFFICE31 = ROOT / "results" / "office31_lite"
"""The Office-31 study on the real images: the suite's runs, the departures, the checks and the diagnoses."""
SHORT = {"amazon": "A", "dslr": "D", "webcam": "W", "mnist": "M", "usps": "U", "solid": "S", "outline": "O",
         "noisy": "N", "blurry": "B"}
"""A domain's letter in a task's name (``A->W``)."""


def records(root: Path, pattern: str, required=REPORT_KEYS):
    """``(path, record)`` of every metrics.json under ``root`` matching ``pattern``, in path order, each checked by
    :func:`dmp.metrics.load_record` with the key paths ``required``."""
    for path in sorted(Path(root).glob(pattern)):
        yield path, load_record(path, required)


def diagnoses(root: Path, pattern: str):
    """``(path, content)`` of every diagnosis file (JSON) under ``root`` matching ``pattern``, in path order."""
    for path in sorted(Path(root).glob(pattern)):
        yield path, json.loads(path.read_text())


def task_of(config: dict) -> str:
    """A run's task as the tables name it, ``S->T``."""
    return f"{SHORT[config['source']]}->{SHORT[config['target']]}"


def run_versions(m: dict) -> dict:
    """What a run's number depends on besides its config: the data version, the backbone weights file (sha256;
    ``none`` where the run loads no file: identity backbone or random init; ``not recorded`` where it loaded one
    whose hash its metrics.json lacks) and the code version (the hash of dmp/ the run executed)."""
    c = m["config"]
    sha = m.get("weights_sha256")
    loads = c.get("weights_path") or (c.get("backbone") != "identity" and c.get("pretrained", True))
    return dict(dataset_version=m["dataset_version"], code_version=m.get("code_version") or "not recorded",
                weights=sha[:12] if sha else "not recorded" if loads else "none",
                weights_file=Path(m.get("weights_file") or c.get("weights_path") or "").name if loads else "")


EVIDENCE_KEYS = ("accuracy", "git_commit", "dataset_version", *(f"config/{k}" for k in (
    "dataset", "setting", "source", "target", "method", "seed")))
"""What :func:`evidence_runs` reads of every run record."""


def evidence_runs(root: Path = EVIDENCE) -> pd.DataFrame:
    """The evidence studies' runs under ``root``, one row each: its study and variant (from its folder), dataset,
    setting, task, method, seed, accuracy, commit and :func:`run_versions`."""
    rows = []
    for path, m in records(root, "*/*/*/*/*/*/seed*/metrics.json", EVIDENCE_KEYS):
        c = m["config"]
        study, variant = path.relative_to(root).parts[0], path.parts[-3]
        rows.append(dict(study=study, dataset=c["dataset"], setting=c["setting"], variant=variant, task=task_of(c),
                         method=c["method"], seed=c["seed"], accuracy=m["accuracy"], commit=m["git_commit"][:10],
                         **run_versions(m)))
    return pd.DataFrame(rows)


def office31_runs(pattern: str, root: Path = OFFICE31) -> pd.DataFrame:
    """The Office-31 runs whose metrics.json match ``pattern`` under ``root``, one row each: its folder (``path``,
    the parts under ``root``; ``file``, the record itself), BatchNorm mode, GPU, dataset, method, seed, task,
    accuracy, commit (``-dirty`` kept), code version, dataset version, weights sha256 and seconds per epoch."""
    rows = []
    for path, m in records(root, pattern, (*REPORT_KEYS, "weights_sha256")):
        c = m["config"]
        rows.append(dict(path=path.relative_to(root).parts, file=path, bn=c.get("backbone_bn", "train"),
                         gpu=(m.get("gpu") or {}).get("name", ""), dataset=c["dataset"], method=c["method"],
                         seed=c["seed"], task=task_of(c), accuracy=m["accuracy"],
                         commit=m["git_commit"][:10] + ("-dirty" if m["git_commit"].endswith("-dirty") else ""),
                         code=m.get("code_version", "")[:12],
                         version=m["dataset_version"], weights=m["weights_sha256"],
                         epoch_s=m.get("seconds_per_epoch")))
    return pd.DataFrame(rows)
