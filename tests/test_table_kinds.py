"""The table registry (dmp/suite/kinds/) says everything the suite and the table code ask of a table: a toy table kind
registered in one place (here) is planned and rendered through the suite from a tiny config, and no module outside
the registry tests a table's name."""
from __future__ import annotations

import ast
import copy
import json
import re
import statistics
from pathlib import Path

import jsonschema
import pytest
import yaml

from dmp.suite import Run, Suite, check_tables, kinds, reported_key

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
RUNS_ROOT = str(ROOT / "tests" / "data" / "fixture")
PAPER_TABLES = ("vanilla", "partial", "manifold_ablation", "sample_size", "time", "interpolation")


# ---------------------------------------------------------------------------------------------- the registry
def test_the_registry_holds_the_papers_tables_in_their_order():
    assert kinds.names()[:len(PAPER_TABLES)] == PAPER_TABLES
    defs = yaml.safe_load(SCHEMA.read_text())["$defs"]
    for name in kinds.names():
        kind = kinds.get(name)
        assert kind.name == name and kind.title and kind.best in ("max", "min")
        jsonschema.Draft202012Validator.check_schema({"$defs": defs, **kind.schema})
    with pytest.raises(KeyError, match="'vanila' is not a table kind \\(did you mean 'vanilla'"):
        kinds.get("vanila")


def test_register_refuses_a_kind_it_cannot_use(monkeypatch):
    monkeypatch.setattr(kinds, "_REGISTRY", dict(kinds._REGISTRY))
    with pytest.raises(ValueError, match="registered twice"):
        kinds.register(type("Again", (kinds.TableKind,), {"name": "vanilla", "title": "x"}))
    with pytest.raises(ValueError, match="no title"):
        kinds.register(type("NoTitle", (kinds.TableKind,), {"name": "zz_untitled"}))
    with pytest.raises(ValueError, match="best"):
        kinds.register(type("Best", (kinds.TableKind,), {"name": "zz_best", "title": "x", "best": "mean"}))


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in [
    *(ROOT / "config").rglob("*.yaml"), ROOT / "tests" / "data" / "tables_config.yaml"]))
def test_every_shipped_config_passes_its_kinds_schemas(path):
    check_tables(yaml.safe_load((ROOT / path).read_text()), SCHEMA)


def test_a_block_its_kind_refuses_is_one_line_naming_the_key():
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    bad = copy.deepcopy(cfg)
    bad["tables"]["time"]["columns"][1]["unit"] = "s/X"
    with pytest.raises(ValueError, match=r"^config key 'tables\.time\.columns\[1\]\.unit': 's/X' is not one of"):
        check_tables(bad, SCHEMA)
    bad = copy.deepcopy(cfg)
    bad["tables"]["interpolation"]["alpha"] = bad["tables"]["interpolation"].pop("alphas")
    with pytest.raises(ValueError, match=r"^config key 'tables\.interpolation\.alpha' is not a key of the suite "
                                         r"config \(did you mean 'alphas'\?\)"):
        check_tables(bad, SCHEMA)


# ---------------------------------------------------------------------------------------------- a toy kind
def test_a_toy_table_registered_in_one_place_is_planned_and_rendered(tmp_path, monkeypatch):
    from dmp.tables.cli import build, main as tables_main

    monkeypatch.setattr(kinds, "_REGISTRY", dict(kinds._REGISTRY))

    @kinds.register
    class Toy(kinds.TableKind):
        name = "toy_accuracy"
        title = "Toy: target accuracy per task"
        schema = {"type": "object", "additionalProperties": False, "required": ["dataset", "tasks", "methods"],
                  "properties": {"dataset": {"$ref": "#/$defs/name"}, "tasks": {"$ref": "#/$defs/tasks"},
                                 "methods": {"type": "array", "items": {"$ref": "#/$defs/method"}}}}

        def cells(self, suite, spec):
            from dmp.suite import Cell
            return [Cell(self.name, spec["dataset"], method, task, Run(spec["dataset"], "vanilla", task, method, "G",
                                                                       "full", "full"),
                         ("accuracy",), reported_key(self.name, spec["dataset"], "vanilla", method, "", task, task))
                    for method in suite.table_methods(spec["methods"]) for task in spec["tasks"]]

        def notes(self, agg):
            return ["Toy: a note of its own."]

    config = {"results": RUNS_ROOT, "seeds": [0, 1, 2],
              "tables": {"toy_accuracy": {"dataset": "office31", "tasks": ["A->W", "D->W"],
                                          "methods": ["source_only", "dmp"]}}}
    check_tables(config, SCHEMA)
    with pytest.raises(ValueError, match=r"tables\.toy_accuracy\.tasks"):
        check_tables({**config, "tables": {"toy_accuracy": {**config["tables"]["toy_accuracy"], "tasks": "A->W"}}},
                     SCHEMA)

    suite = Suite(config)  # planned: its runs, its row targets
    runs = {Run("office31", "vanilla", t, m, "G", "full", "full", s)
            for t in ("A->W", "D->W") for m in ("source_only", "dmp") for s in (0, 1, 2)}
    assert set(suite.table_runs("toy_accuracy")) == runs == set(suite.all_runs())
    assert suite.rows()["row_toy_accuracy_office31_dmp"] == ("toy_accuracy", "office31", "dmp")

    paths = build(config, "toy_accuracy", results=RUNS_ROOT, out=str(tmp_path))  # rendered
    md = (tmp_path / "tables" / "toy_accuracy.md").read_text()
    assert md.startswith("# Toy: target accuracy per task\n\n## Office-31\n") and "- Toy: a note of its own." in md
    values = []
    for seed in (0, 1, 2):
        metrics = json.loads(Path(Run("office31", "vanilla", "A->W", "dmp", "G", "full", "full", seed)
                                      .metrics_path(RUNS_ROOT)).read_text())
        values.append(metrics["accuracy"])
    dmp_row = next(line for line in md.splitlines() if line.startswith("| DMP ")).replace("*", "")
    assert f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}" in dmp_row
    assert {p.name for p in paths} >= {"toy_accuracy.tex", "toy_accuracy.comparison.csv", "toy_accuracy.card.md"}

    path = tmp_path / "toy.yaml"  # the command line knows it too
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(SystemExit) as done:
        tables_main(["build", "all", "--config", str(path), "--out", str(tmp_path / "cli")])
    assert done.value.code == 0
    assert (tmp_path / "cli" / "tables" / "toy_accuracy.md").read_text() == md


# ---------------------------------------------------------------------------------------------- no name tests
def name_tests(source: str, names) -> list[int]:
    """The lines of ``source`` that test a table's name: a comparison (``table == "time"``, ``"interpolation" in
    config["tables"]``), a lookup (``config["tables"]["time"]``, ``tables.get("time")``) with a table name's literal
    on something that names a table, or a dispatch on it (``getattr(self, f"_cells_{table}")``)."""
    def literal(node):
        if isinstance(node, ast.Constant):
            return node.value in names
        return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(literal(e) for e in node.elts)

    def about_tables(node):
        return any((isinstance(n, ast.Name) and "table" in n.id.lower())
                   or (isinstance(n, ast.Attribute) and "table" in n.attr.lower())
                   or (isinstance(n, ast.Constant) and n.value == "tables") for n in ast.walk(node))

    def is_test(n):
        if isinstance(n, ast.Compare):
            operands = [n.left, *n.comparators]
            return any(literal(o) for o in operands) and any(about_tables(o) for o in operands)
        if isinstance(n, ast.Subscript):
            return literal(n.slice) and about_tables(n.value)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and n.args:
            return literal(n.args[0]) and about_tables(n.func.value)
        return (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr"
                and len(n.args) > 1 and isinstance(n.args[1], ast.JoinedStr) and about_tables(n.args[1]))

    return sorted({n.lineno for n in ast.walk(ast.parse(source)) if is_test(n)})


def table_name_tests(root: Path) -> list[str]:
    """``file:line`` of every table-name test in dmp/ outside the registry, and in workflow/ and the Snakefile (a
    line that mentions a table and compares with a table name's literal)."""
    names = set(kinds.names())
    kinds_dir = root / "dmp" / "suite" / "kinds"
    found = [f"{p.relative_to(root)}:{line}" for p in sorted((root / "dmp").rglob("*.py"))
             if kinds_dir not in p.parents for line in name_tests(p.read_text(), names)]
    quoted = "|".join(sorted(names, key=len, reverse=True))
    pattern = re.compile(rf"""(==|!=|\bin)\s*[(\[{{]?\s*["']({quoted})["']|["']({quoted})["']\s*(==|!=|\bin\b)""")
    for path in [*sorted((root / "workflow").rglob("*.smk")), root / "Snakefile"]:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if "table" in code and pattern.search(code):
                found.append(f"{path.relative_to(root)}:{i}")
    return found


def test_the_name_test_sees_what_it_must(tmp_path):
    """The old dispatch and string branches are found; a setting or a split that is spelled like a table is not."""
    source = ('cells = getattr(self, f"_cells_{table}")(spec)\nif table == "manifold_ablation":\n    pass\n'
              'best = "min" if table == "time" else "max"\nok = table in ("vanilla", "partial")\n'
              'part = config["tables"]["interpolation"] if "interpolation" in config.get("tables", {}) else {}\n'
              'spec = self.suite.tables.get("interpolation", {})\n'
              'split = "partial" if setting == "partial" else "full"\nx = metrics.get("interpolation")\n')
    assert name_tests(source, set(PAPER_TABLES)) == [1, 2, 4, 5, 6, 7]
    (tmp_path / "dmp" / "tables").mkdir(parents=True)
    (tmp_path / "workflow" / "rules").mkdir(parents=True)
    (tmp_path / "dmp" / "tables" / "render.py").write_text('if table == "time":\n    pass\n')
    (tmp_path / "workflow" / "rules" / "x.smk").write_text('if wildcards.table == "vanilla":\n    pass\n'
                                                            'if wildcards.setting == "partial":\n    pass\n')
    (tmp_path / "Snakefile").write_text("")
    assert table_name_tests(tmp_path) == ["dmp/tables/render.py:1", "workflow/rules/x.smk:1"]


def test_no_module_outside_the_registry_tests_a_table_name():
    found = table_name_tests(ROOT)
    assert not found, ("a table's name is tested outside dmp/suite/kinds/ (ask its kind, dmp.suite.kinds.get(name), "
                       "instead): " + ", ".join(found))
