"""Tables -> cells -> runs: each configured table asks its kind (dmp/suite/kinds/) for its cells; a table's runs are
its cells' runs on every seed; a row target (``row_<table>_<block>_<row>``) is one row's runs."""
from __future__ import annotations

import json

from . import kinds
from .runs import Cell, Run, task_from_slug


class TableCells:
    """The cells and runs of a :class:`~dmp.suite.Suite`'s tables."""

    def validate_methods(self):
        """Every method a table names is registered (dmp/methods/); the error names the config key."""
        from .. import methods

        def check(where, name):
            if name not in methods.names():
                raise ValueError(f"config {where}: {methods.unknown(name)}")

        for table, spec in self.tables.items():
            single = spec.get("method") if isinstance(spec, dict) else None
            listed = spec.get("methods", []) if isinstance(spec, dict) else []
            listed = listed.values() if isinstance(listed, dict) else listed
            for name in ([single] if single else []) + list(listed):
                check(f"tables.{table}.method(s)", name)
            for dataset, block in (spec.get("datasets") or {}).items() if isinstance(spec, dict) else []:
                for name in block.get("methods", []):
                    check(f"tables.{table}.datasets.{dataset}.methods", name)

    def table_methods(self, listed) -> list[str]:
        """The rows of a table or block: ``listed``, without the comparison methods when ``comparison_methods`` is
        false."""
        if self.comparison_methods:
            return list(listed)
        from .. import methods
        return [m for m in listed if not methods.get(m).comparison]

    def table_cells_by_table(self) -> dict[str, list[Cell]]:
        return {t: self.table_cells(t) for t in kinds.names() if t in self.tables}

    def table_cells(self, table: str) -> list[Cell]:
        """Every printed cell of ``table`` (ours only; reported baseline rows come from the CSV)."""
        if table not in self.tables:
            raise KeyError(f"table {table!r} is not in this config's 'tables' (has: {sorted(self.tables)})")
        return kinds.get(table).cells(self, self.tables[table])

    def table_runs(self, table: str) -> list[Run]:
        """The distinct runs (every seed) a table reads, sorted."""
        keys = {c.run for c in self.table_cells(table) if c.run is not None}
        return sorted(k.with_seed(s) for k in keys for s in self.seeds)

    def all_runs(self) -> list[Run]:
        return sorted({r for t in self.tables for r in self.table_runs(t)})

    def rows(self) -> dict[str, tuple[str, str, str]]:
        """Row targets: ``row_<table>_<dataset>_<row>`` -> (table, block, row)."""
        out = {}
        for table in self.tables:
            for cell in self.table_cells(table):
                name = f"row_{table}_{cell.block}_{cell.row}".replace(".", "p")
                out[name] = (table, cell.block, cell.row)
        return out

    def row_runs(self, table: str, block: str, row: str) -> list[Run]:
        keys = {c.run for c in self.table_cells(table) if c.run is not None and (c.block, c.row) == (block, row)}
        return sorted(k.with_seed(s) for k in keys for s in self.seeds)

    def run_from_wildcards(self, w) -> Run:
        """The Run of the train rule's wildcards (``task`` as the folder slug 'A-W'; ``variant`` for the figures'
        rule train_variant)."""
        return Run(w.dataset, w.setting, task_from_slug(w.task), w.method, w.metric, w.source_split,
                   w.target_split, int(w.seed), getattr(w, "variant", ""))


def table_config_json(config: dict, table: str) -> str:
    """The part of a suite config that ``python -m dmp.tables build TABLE`` needs, as JSON (a rule parameter:
    the table is rebuilt when it changes).  The config's key order is kept: it is the order of the table's blocks and
    rows (``python -m dmp.tables build --config`` reads the same YAML in the same order).  The keys that decide a
    run's arguments (``train``, ``overrides``, ``demo_data``) come along: a table uses a metrics.json only if its
    config is the one the suite's arguments resolve to (:meth:`Suite.expected_config`)."""
    keys = ("results", "seeds", "class_labels", "demo_data", "train", "overrides")
    part = {k: config[k] for k in keys if k in config}
    part["tables"] = {table: config["tables"][table]}
    return json.dumps(part, separators=(",", ":"))
