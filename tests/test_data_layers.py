"""The data layer flows one way: each module of dmp/data imports only modules of the layers before it (no import
cycles, top-level or inside functions), and each imports on its own in a fresh interpreter."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from tests import hang_guard

DATA = Path(__file__).resolve().parents[1] / "dmp" / "data"
# spec -> fetch/verify -> lists -> loader -> Task; demo (the generator) and io at the bottom, the CLI on top
LAYERS = ["demo", "spec", "catalog", "registry", "load", "verify", "archive", "download", "fetch", "splits",
          "cache", "cached_images", "declare", "inputs", "cli"]


def _imports(module: str) -> set[str]:
    """dmp.data modules imported anywhere in ``module`` (relative or absolute, at any depth)."""
    tree = ast.parse((DATA / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:
                found.update(a.name for a in node.names)
            elif node.module and node.module.startswith("dmp.data."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[2] for a in node.names if a.name.startswith("dmp.data."))
    return found & set(LAYERS)


def test_every_module_is_in_a_layer():
    assert sorted(p.stem for p in DATA.glob("*.py") if p.stem != "__init__") == sorted(LAYERS)


@pytest.mark.parametrize("module", LAYERS)
def test_imports_flow_one_way(module):
    later = {m for m in _imports(module) if LAYERS.index(m) >= LAYERS.index(module)}
    assert not later, f"dmp/data/{module}.py imports {sorted(later)}, which come after it in {LAYERS}"


@pytest.mark.slow
def test_each_module_imports_alone():
    for modules in (["spec"], ["catalog"], ["registry"], ["verify"], ["fetch"], ["splits"], ["cli"]):
        code = "import importlib\n" + "\n".join(f"importlib.import_module('dmp.data.{m}')" for m in modules)
        res = hang_guard.run([sys.executable, "-c", code], cwd=DATA.parents[1], quiet=600)
        assert res.returncode == 0, res.stderr


def test_module_sizes_stay_small():
    for p in DATA.glob("*.py"):
        assert len(p.read_text().splitlines()) <= 400, p.name
