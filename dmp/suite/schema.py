"""The suite config's checks around its JSON schema (``workflow/schemas/config.schema.yaml``): a key the schema does
not know in one line with the closest known key, ``--config key=false`` as the boolean, a refused value in one line
naming its key, and each ``tables:`` block against the schema its table kind declares (dmp/suite/kinds/)."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

SCHEMA_FILE = "workflow/schemas/config.schema.yaml"  # the suite config's schema (the Snakefile checks against it)
KINDS_DIR = "dmp/suite/kinds/"  # where each table kind declares the schema of its block
# The strings Snakemake gives for `--config key=true` / `key=false` (it reads only True and False as booleans).
BOOLEAN_WORDS = {"true": True, "false": False}
INTEGER = re.compile(r"[+-]?[0-9]+")  # an item of `--config seeds=[0,1]` (a string) that spells an integer
PROJECT = Path(__file__).resolve().parents[2]


def results_folder(value) -> str:
    """The config's ``results`` folder, checked: a non-empty path other than the filesystem root (every output is
    planned under it) without braces (Snakemake would read ``{name}`` in an output path as a wildcard)."""
    if not isinstance(value, str) or not value.strip() or not value.strip("/") or any(c in value for c in "{}"):
        raise ValueError(f"config results = {value!r:.60}: the folder of every output must be a non-empty path, not "
                         f"the filesystem root, without braces {{ }} (Snakemake wildcards)")
    return value


def ready_for_schema(config: dict, schema_path) -> None:
    """Make the config Snakemake gives (the config file, then each ``--config key=value``) ready for the schema check,
    in place: a top-level key the schema does not know is refused in one line naming the closest known key (the
    schema's own error quotes the whole schema); ``--config comparison_methods=false`` gives the string 'false',
    taken as the boolean for the schema's boolean keys; ``--config seeds=[0,1]`` gives the strings '0' and '1'
    (Snakemake reads a list's items as strings), taken as the integers they spell (any other item is left to the
    schema's check)."""
    known = (yaml.safe_load(Path(schema_path).read_text()) or {}).get("properties", {})
    unknown = [k for k in config if k not in known]
    if unknown:
        raise ValueError(unknown_key_message(str(unknown[0]), "", known))
    for key, value in config.items():
        if known[key].get("type") == "boolean" and isinstance(value, str) and value.lower() in BOOLEAN_WORDS:
            config[key] = BOOLEAN_WORDS[value.lower()]
    if isinstance(config.get("seeds"), list):
        config["seeds"] = [int(s) if isinstance(s, str) and INTEGER.fullmatch(s.strip()) else s
                           for s in config["seeds"]]


def unknown_key_message(key: str, where: str, known, see: str = SCHEMA_FILE) -> str:
    """The one line for a key the suite config's schema has no place for (``where``: the dotted path above it)."""
    from ..config import did_you_mean

    keys = f"; the keys there: {', '.join(known)}" if known else ""
    return (f"config key {(where + '.' if where else '') + key!r} is not a key of the suite config"
            f"{did_you_mean(key, known)}{keys} (see {see})")


def check_tables(config: dict, schema_path=None) -> None:
    """Check each block under ``tables:`` against the schema of its table kind (after the schema file's check, as the
    Snakefile does): a name that is no table kind, or a block the kind's schema refuses, is one line naming the key.
    The kinds' schemas may refer to the shared ``$defs`` of the schema file (``schema_path``, default the project's)."""
    import jsonschema

    from . import kinds

    tables = config.get("tables")
    if not isinstance(tables, dict):
        return
    for name in tables:
        if name not in kinds.names():
            raise ValueError(unknown_key_message(str(name), "tables", kinds.names(), KINDS_DIR))
    defs = yaml.safe_load(Path(schema_path or PROJECT / SCHEMA_FILE).read_text()).get("$defs", {})
    for name, block in tables.items():
        schema = {"$defs": defs, **kinds.get(name).schema}
        error = next(iter(jsonschema.Draft202012Validator(schema).iter_errors(block)), None)
        if error is not None:
            raise ValueError(_problem(error, ["tables", name, *error.absolute_path], KINDS_DIR))


def schema_problem(err: Exception) -> str:
    """One line for a suite config the schema check refused: the key's path and what is wrong with it, instead of
    the whole schema that ``snakemake.utils.validate``'s error quotes (it raises its ``WorkflowError`` while
    handling jsonschema's error); any other error: its own text."""
    import jsonschema

    found = [e for e in (err, err.__cause__, err.__context__) if isinstance(e, jsonschema.exceptions.ValidationError)]
    if not found:
        return " ".join(str(err).split())
    return _problem(found[0], list(found[0].absolute_path), SCHEMA_FILE)


def _problem(error, path: list, see: str) -> str:
    """The one line of a jsonschema ``error`` at the config path ``path``."""
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {})
        extra = [k for k in error.instance if k not in known]
        if extra:
            return unknown_key_message(str(extra[0]), where, known, see)
    message = " ".join(error.message.split())
    message = message if len(message) <= 200 else message[:197] + "..."
    return f"config {'key ' + repr(where) if where else 'file'}: {message} (see {see})"
