"""The package's layers flow one way: drawn from the source (every import, at the top of a file or inside a
function), no import circle between dmp's packages and top-level modules, and no import from a layer to one above it.
The studies (studies/) sit above dmp: no circle among their modules, no private name imported, and no import of
them from dmp. The layers of dmp/data among themselves: tests/test_data_layers.py."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

DMP = Path(__file__).resolve().parents[1] / "dmp"
STUDIES = DMP.parent / "studies"
# Bottom to top. A unit is a package of dmp/ or a top-level module; a unit may import units of its own layer (no
# circle) and of the layers below it.
LAYERS = [
    ("params", "commands", "io", "run_lock"),  # what the layers declare with, how a command runs, file writing
    ("data",),
    ("manifolds", "losses", "weighting", "anchors", "models", "methods"),
    ("config",),  # the resolver: composes what data and the methods declare
    ("train",),
    ("metrics",),  # a run's metrics.json as a result
    ("suite",),  # the suite's runs and cells, which the tables and figures read
    ("tables", "figures"),
    ("cli", "__main__"),
]
LAYER = {unit: i for i, units in enumerate(LAYERS) for unit in units}
# Edges that run upward today, each with where it has to go; the test fails when one is gone (drop it here then).
PENDING: dict[tuple[str, str], str] = {}


def units() -> set[str]:
    return {p.stem if p.is_file() else p.name for p in DMP.iterdir()
            if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}


def _targets(node, package: str) -> list[str]:
    """The dmp modules an import statement names (``package``: the dotted package the importing file is in)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "dmp"]
    if node.level:
        base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
        return [f"{base}.{node.module}"] if node.module else [f"{base}.{a.name}" for a in node.names]
    if node.module == "dmp":
        return [f"dmp.{a.name}" for a in node.names]
    return [node.module] if node.module and node.module.split(".")[0] == "dmp" else []


def import_edges(root: Path = DMP) -> dict[tuple[str, str], list[str]]:
    """``{(unit, imported unit): ["file:line", ...]}`` over every import of every file under ``root``."""
    edges = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        package = ".".join(parts[:-1])  # (an __init__.py's package is its folder, as a module's)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _targets(node, package):
                a, b = (parts[1] if len(parts) > 1 else None), (target.split(".") + [None])[1]
                if a and b and a != b and a != "__init__":
                    edges[a, b].append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return dict(edges)


def circles(edges) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan)."""
    graph = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(set(graph) | {b for bs in graph.values() for b in bs}):
        if v not in index:
            visit(v)
    return found


def _shown(edges, pairs) -> str:
    return "; ".join(f"{a} -> {b} ({', '.join(edges[a, b][:3])})" for a, b in sorted(pairs))


def test_every_unit_is_in_one_layer():
    declared = [u for layer in LAYERS for u in layer]
    assert len(declared) == len(set(declared)), "a unit is in two layers"
    assert sorted(units()) == sorted(declared), "add the new module or package of dmp/ to LAYERS"


def test_no_import_circle():
    edges = {e: w for e, w in import_edges().items() if e not in PENDING}
    found = circles(edges)
    assert not found, "import circles: " + " | ".join(
        " <-> ".join(c) + ": " + _shown(edges, [(a, b) for (a, b) in edges if a in c and b in c]) for c in found)


def test_no_upward_import():
    edges = import_edges()
    upward = [(a, b) for (a, b) in edges if LAYER.get(b, -1) > LAYER.get(a, -1) and (a, b) not in PENDING]
    assert not upward, "imports against the layer order: " + _shown(edges, upward)


@pytest.mark.parametrize("edge", sorted(PENDING))
def test_pending_edges_still_exist(edge):
    assert edge in import_edges(), f"{edge[0]} -> {edge[1]} is gone: remove it from PENDING"


@pytest.mark.parametrize("folder", ["benchmarks", "scripts"])
def test_tools_import_each_other_one_way(folder):
    """The benchmark scripts import their shared pieces from one module (benchmarks/step_probes.py), the tools of
    scripts/ none of each other: never each other in a circle, at the top of a file or inside a function."""
    root = DMP.parent / folder
    names = {p.stem for p in root.glob("*.py")}
    edges = defaultdict(list)
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            found = [node.module] if isinstance(node, ast.ImportFrom) and not node.level else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in found:
                if name and name.split(".")[0] in names and name.split(".")[0] != path.stem:
                    edges[path.stem, name.split(".")[0]].append(f"{folder}/{path.name}:{node.lineno}")
    found = circles(edges)
    assert not found, f"import circles among {folder}/: " + " | ".join(
        " <-> ".join(c) + ": " + _shown(edges, [(a, b) for (a, b) in edges if a in c and b in c]) for c in found)


def study_imports(root: Path = STUDIES) -> list[tuple[str, str, list[str], str]]:
    """``[(module, imported module, imported names, "file:line")]`` over every import of every file under ``root``
    (a package named as ``root``'s folder; relative imports resolved; ``from a import b`` of a module ``b`` is an
    import of ``a.b``)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = ".".join(parts[:-1])
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(root.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                found += [(module, a.name, [], where) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                for a in node.names:
                    sub = root.parent.joinpath(*f"{base}.{a.name}".split("."))
                    if sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file():
                        found.append((module, f"{base}.{a.name}", [], where))
                    else:
                        found.append((module, base, [a.name], where))
    return found


def test_no_import_circle_among_the_studies():
    edges = defaultdict(list)
    for module, target, _, where in study_imports():
        if target.split(".")[0] == STUDIES.name and target != module:
            edges[module, target].append(where)
    found = circles(edges)
    assert not found, "import circles among studies/: " + " | ".join(
        " <-> ".join(c) + ": " + _shown(edges, [(a, b) for (a, b) in edges if a in c and b in c]) for c in found)


def test_the_studies_import_no_private_name():
    """dmp's public names only, and the studies' own (a name of another module that starts with ``_`` is that
    module's alone)."""
    private = [f"{target} {', '.join(names)} ({where})" for module, target, names, where in study_imports()
               if target != "__future__" and (any(p.startswith("_") for p in target.split("."))
                                              or any(n.startswith("_") for n in names))]
    assert private == []


def test_dmp_never_imports_the_studies():
    upward = [where for _, target, _, where in study_imports(DMP) if target.split(".")[0] == STUDIES.name]
    assert upward == []


def test_the_studies_graph_sees_what_it_must(tmp_path):
    """Against a hand-made package: ``from pkg import mod`` is an import of the module, ``from .mod import _x`` a
    private name, and a circle through two modules is found."""
    pkg = tmp_path / "studies"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from studies.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import _x\n")
    imports = study_imports(pkg)
    assert [(m, t, n) for m, t, n, _ in imports] == [("studies.a", "studies.sub.b", []),
                                                     ("studies.sub.b", "studies.a", ["_x"])]
    assert circles({(m, t): [] for m, t, _, _ in imports}) == [["studies.a", "studies.sub.b"]]


def test_the_graph_sees_what_it_must(tmp_path):
    """Against a hand-made package: a relative import inside a function, an absolute one, ``from .. import x`` and a
    circle through three units are all found (so an empty result above means no such import, not a blind parser)."""
    pkg = tmp_path / "dmp"
    for name in ("a", "b"):
        (pkg / name).mkdir(parents=True)
        (pkg / name / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("def f():\n    from ..b import y\n")
    (pkg / "b" / "y.py").write_text("from .. import c\n")
    (pkg / "c.py").write_text("import dmp.a.x\nfrom dmp import b\n")
    edges = import_edges(pkg)
    assert sorted(edges) == [("a", "b"), ("b", "c"), ("c", "a"), ("c", "b")]
    assert edges["a", "b"] == ["dmp/a/x.py:2"]
    assert circles(edges) == [["a", "b", "c"]]
