"""Where a number comes from: git commit, code hash, package versions, machine."""
from __future__ import annotations

import hashlib
import platform
import subprocess
from importlib import metadata
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def git_commit() -> str:
    """``<sha>`` of the checkout holding the package, ``<sha>-dirty`` with uncommitted changes to dmp/,
    or ``unknown`` outside git."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PACKAGE_DIR, capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", str(PACKAGE_DIR)], cwd=PACKAGE_DIR,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def code_version(exclude: tuple[str, ...] = (), root: Path = PACKAGE_DIR) -> str:
    """sha256 (16 hex) of every ``*.py`` file's path and content under ``root`` (the package), leaving out the
    files whose first path component (relative to ``root``) is in ``exclude``."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in exclude:
            continue
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def packages() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in ("torch", "torchvision", "numpy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out
