"""The table registry: every kind of table is one module of this package (interface: :mod:`dmp.suite.kinds.base`).

A table kind is the key of its block under ``tables:`` in a suite config. ``get(name)`` returns the registered kind,
``names()`` lists them in their ``order`` (the paper's tables first), ``unknown(name)`` is the one line for a name
that is none. Every module of the package is imported here, so a new table is one new module plus its block in a
config (docs/method.md, "Adding a table"); nothing outside this package tests a table's name
(tests/test_table_kinds.py).
"""
from __future__ import annotations

import difflib
import importlib
import pkgutil

from .base import TableKind

__all__ = ["TableKind", "get", "names", "register", "unknown"]

_REGISTRY: dict[str, TableKind] = {}


def register(cls: type[TableKind]) -> type[TableKind]:
    """Class decorator: add a :class:`TableKind` subclass to the registry under ``cls.name``."""
    problem = _problem(cls)
    if problem:
        raise ValueError(f"table kind {cls.__name__} ({cls.name!r}): {problem}")
    _REGISTRY[cls.name] = cls()
    return cls


def _problem(cls) -> str | None:
    """What keeps ``cls`` out of the registry, if anything."""
    if not (cls.name and cls.name.isidentifier() and cls.name == cls.name.lower()):
        return "its name must be a lower-case identifier"
    if cls.name in _REGISTRY:
        return f"registered twice (also {type(_REGISTRY[cls.name]).__name__})"
    if not cls.title:
        return "no title (the heading of its files)"
    if cls.best not in ("max", "min"):
        return f"best = {cls.best!r}, expected max or min"
    return None


def names() -> tuple[str, ...]:
    """The registered table kinds, by ``order`` (then registration order)."""
    return tuple(sorted(_REGISTRY, key=lambda n: _REGISTRY[n].order))


def get(name) -> TableKind:
    """The registered kind ``name``; an unknown name raises KeyError naming the closest ones."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise KeyError(unknown(name)) from None


def unknown(name) -> str:
    """``'x' is not a table kind (did you mean ...?); the kinds: ...`` for a name that is none."""
    close = difflib.get_close_matches(str(name), _REGISTRY, n=3)
    hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
    return f"{name!r} is not a table kind{hint}; the kinds: {', '.join(names())}"


def _import_all():
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
        importlib.import_module(f"{__name__}.{module}")


_import_all()
