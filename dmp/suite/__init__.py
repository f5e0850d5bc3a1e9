"""The logic behind the Snakemake suite: which training runs each paper table needs, where each run lives, and the
``python -m dmp train`` arguments of a run.  The Snakefile and ``workflow/rules/*.smk`` only call what this package
exports.

Its modules, one concern each: :mod:`~dmp.suite.runs` (runs, cells and their folders), :mod:`~dmp.suite.kinds` (the
table registry: one module per kind of table, its cells, title, rows, notes and config schema),
:mod:`~dmp.suite.cells` (tables -> cells -> runs), :mod:`~dmp.suite.arguments` (a run's trainer arguments),
:mod:`~dmp.suite.signature` (what decides a run's result), :mod:`~dmp.suite.records` (whether a run folder holds a
result of its run; ``prepare``), :mod:`~dmp.suite.schema` (the config checks around the JSON schema),
:mod:`~dmp.suite.core` (:class:`Suite`, a validated suite config), :mod:`~dmp.suite.timing` and
:mod:`~dmp.suite.cli` (``dmp suite``).

``python -m dmp.suite prepare RUN_DIR SIGNATURE`` is called by the train rule before the trainer: it removes a
checkpoint that was written for other code or other arguments, so a resumed run never mixes the two.
"""
from __future__ import annotations

from . import kinds
from .cells import table_config_json
from .cli import add_subparsers, main
from .core import Suite
from .records import SIGNATURE_FILE, STALE_FILES, STALE_MARK, prepare
from .runs import (RUN_KEYS, RUN_PATTERN, SUITE_KEYS, VARIANT_RE, VARIANT_RUN_PATTERN, Cell, Run, default_split,
                   reported_key, task_from_slug, task_slug, variant_name, variant_values, yaml_value)
from .schema import (BOOLEAN_WORDS, SCHEMA_FILE, check_tables, ready_for_schema, results_folder, schema_problem,
                     unknown_key_message)
from .signature import NOT_TRAINING_CODE, PACKAGE_DIR, _data_version, training_code_version
from .timing import timing

TABLES = kinds.names()  # the registered table kinds (the Snakemake rules' table wildcard)

__all__ = ["BOOLEAN_WORDS", "Cell", "NOT_TRAINING_CODE", "PACKAGE_DIR", "RUN_KEYS", "RUN_PATTERN", "Run",
           "SCHEMA_FILE", "SIGNATURE_FILE", "STALE_FILES", "STALE_MARK", "SUITE_KEYS", "Suite", "TABLES",
           "VARIANT_RE", "VARIANT_RUN_PATTERN", "add_subparsers", "check_tables", "default_split", "kinds", "main",
           "prepare", "ready_for_schema", "reported_key", "results_folder", "schema_problem", "table_config_json",
           "task_from_slug", "task_slug", "timing", "training_code_version", "unknown_key_message", "variant_name",
           "variant_values", "yaml_value", "_data_version"]
