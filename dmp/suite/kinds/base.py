"""The interface of a table kind (one module of ``dmp/suite/kinds/`` per kind, decorated with
:func:`dmp.suite.kinds.register`). The suite asks a kind which cells (and so which runs) its config block needs, the
table code asks it for the title, the row labels and the notes; neither tests a table's name.

What a kind declares (class attributes first, then methods to override):

``name``
    The key of its block under ``tables:`` in a suite config, the names of its files
    (``<results>/tables/<name>.md``), its Snakemake target (``table_<name>``) and the ``table`` column of
    ``dmp/tables/reported_results.csv``.
``title``
    The heading of its Markdown and LaTeX files.
``order``
    Its place in every list of tables (``dmp tables build all``, the schema's error naming the kinds): the paper's
    tables 1 to 6, a new kind after them by default.
``schema``
    The JSON schema of its config block (:func:`block_schema` makes the usual one: the keys several kinds share and
    its own); it may refer to the shared definitions (``#/$defs/task``, ``method``, ``metric``, ``name``, ``setting``,
    ``split``, ``tasks``) of ``workflow/schemas/config.schema.yaml``. The Snakefile checks every block against its
    kind's schema before any job runs (:func:`dmp.suite.check_tables`).
``best``
    ``"max"`` when the highest number of a column is the best (accuracies), ``"min"`` when the lowest is (times).
``unit_headers``
    True to print each column's unit in its header (``A->W (s/E)``): a table whose columns have different units.
``headline``
    True when ``dmp tables headline`` can print its Mean column (a table of methods with a Mean over tasks).

:meth:`cells` (suite, spec) -> list of :class:`dmp.suite.Cell`
    Every printed number of the block ``spec``, ours only (the paper's rows come from the reported CSV); each
    names its run (seed None), the key path of its value in metrics.json and its key in the reported CSV
    (:func:`dmp.suite.reported_key`). A cell without a run is a derived Mean of its row. The suite's runs of the
    table are the runs of its cells. ``suite`` gives the rows (:meth:`~dmp.suite.Suite.table_methods`) and the
    dataset's classes (:meth:`~dmp.suite.Suite.class_names`, :meth:`~dmp.suite.Suite.class_label`).
:meth:`row_label` (row, tex) -> str
    How a row id prints (default: the method's label).
:meth:`block_label` (block) -> str
    How a block (a dataset, as a rule) is headed.
:meth:`notes` (agg) -> list of str
    The notes this kind adds under the general ones, from the aggregated cells (:func:`dmp.tables.aggregate`).
"""
from __future__ import annotations

from typing import ClassVar

import yaml

# The paper's rows that no registered method runs (copied from the paper only), as the paper prints them.
PAPER_LABELS = {"dan": "DAN", "dann": "DANN", "jan": "JAN", "iwan": "IWAN", "pada": "PADA", "san": "SAN",
                "etn": "ETN", "cdan": "CDAN", "cdan_e": "CDAN+E", "bsp_dann": "BSP+DANN", "bsp_cdan": "BSP+CDAN",
                "hafn": "HAFN", "safn": "SAFN"}
DATASET_LABELS = {"office31": "Office-31", "officehome": "Office-Home", "imageclef": "ImageCLEF-DA",
                  "visda2017": "VisDA-2017", "demo": "Demo (generated shapes)"}


# The schemas of the keys that several kinds' blocks hold (``#/$defs/...``: workflow/schemas/config.schema.yaml).
SHARED_KEYS = {"dataset": {"$ref": "#/$defs/name"}, "task": {"$ref": "#/$defs/task"},
               "tasks": {"$ref": "#/$defs/tasks"}, "method": {"$ref": "#/$defs/method"},
               "methods": {"type": "array", "items": {"$ref": "#/$defs/method"}, "minItems": 1, "uniqueItems": True},
               "setting": {"$ref": "#/$defs/setting"}, "metric": {"$ref": "#/$defs/metric"}}


def block_schema(required, shared=(), own: str = "") -> dict:
    """The schema of a config block that holds the keys ``shared`` (their schemas: :data:`SHARED_KEYS`) and those of
    ``own`` (YAML text: key -> schema), in that order, ``required`` among them, and no other key."""
    properties = {key: SHARED_KEYS[key] for key in shared}
    properties.update(yaml.safe_load(own) or {})
    return {"type": "object", "additionalProperties": False, "required": list(required), "properties": properties}


def method_label(method: str) -> str:
    """A table row's method label: the registry's, else the paper's name of a row we do not run."""
    from dmp import methods
    return methods.label(method) if method in methods.names() else PAPER_LABELS.get(method, method)


class TableKind:
    """A kind of table (see the module docstring for what a kind declares)."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    order: ClassVar[int] = 100
    schema: ClassVar[dict] = {"type": "object"}
    best: ClassVar[str] = "max"
    unit_headers: ClassVar[bool] = False
    headline: ClassVar[bool] = False

    def cells(self, suite, spec: dict) -> list:
        raise NotImplementedError(f"table kind {self.name!r} does not say which cells it prints")

    def row_label(self, row: str, tex: bool = False) -> str:
        return method_label(row)

    def block_label(self, block: str) -> str:
        return DATASET_LABELS.get(block, block)

    def notes(self, agg) -> list[str]:
        return []
