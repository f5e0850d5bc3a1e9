"""Load a file of ``scripts/`` or ``benchmarks/`` (tools, not a package) as a module, for the tests of those files."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"


def load_script(name: str, folder: str = "scripts"):
    """``<folder>/<name>.py`` as a fresh module; its sibling files are importable, as when it runs as a script."""
    where = ROOT / folder
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))
    spec = importlib.util.spec_from_file_location(name, where / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
