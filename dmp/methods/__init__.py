"""The method registry: every training method is one module of this package (interface: :mod:`dmp.methods.base`).

``get(name)`` returns the registered method (an unknown name raises :class:`dmp.params.ConfigError` with the closest
names), ``names()`` lists them in registration order, ``label(name)`` is how tables and figures print one. Every
module of the package is imported here: ``source_only`` and ``dmp`` first, the others in alphabetical order, so a
new method is one new module (plus its reference test) and nothing else.
"""
from __future__ import annotations

import difflib
import importlib
import pkgutil

from ..params import ConfigError
from .base import Method, Needs, Param, StepContext

__all__ = ["Method", "Needs", "Param", "StepContext", "get", "label", "names", "register", "scoped_params"]

_REGISTRY: dict[str, Method] = {}


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: add a :class:`Method` subclass to the registry under ``cls.name``."""
    name = cls.name
    if not name or not name.isidentifier() or name != name.lower():
        raise ValueError(f"method class {cls.__name__}: name {name!r} must be a lower-case identifier")
    if name in _REGISTRY:
        raise ValueError(f"method {name!r} is registered twice ({type(_REGISTRY[name]).__name__}, {cls.__name__})")
    if not cls.label:
        raise ValueError(f"method {name!r} has no label (how tables and figures print it)")
    if cls.target not in ("loss", "bn", "none"):
        raise ValueError(f"method {name!r}: target = {cls.target!r}, expected loss, bn or none")
    _REGISTRY[name] = cls()
    return cls


def names() -> tuple[str, ...]:
    """The registered method names, in registration order."""
    return tuple(_REGISTRY)


def get(name) -> Method:
    """The registered method ``name``; an unknown name raises ConfigError naming the closest ones."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ConfigError(f"config key 'method' = {unknown(name)}") from None


def unknown(name) -> str:
    """``'x' is not a registered method (did you mean ...?); registered: ...`` for an unknown method name."""
    close = difflib.get_close_matches(str(name), _REGISTRY, n=3)
    hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
    return f"{name!r} is not a registered method{hint}; registered: {', '.join(_REGISTRY)}"


def label(name: str) -> str:
    """How tables and figures print a method (its name when it is not registered)."""
    return _REGISTRY[name].label if name in _REGISTRY else name


def declared_params() -> dict[str, tuple[str, Param]]:
    """Every method-scoped config key: ``{key: (declaring method, Param)}``; a key declared twice is an error."""
    out: dict[str, tuple[str, Param]] = {}
    for m in _REGISTRY.values():
        for key, param in m.params.items():
            if key in out:
                raise ValueError(f"config key {key!r} is declared by methods {out[key][0]!r} and {m.name!r}: "
                                 f"declare it once and list it in the other's `uses`")
            out[key] = (m.name, param)
    return out


def scoped_params(name: str) -> dict[str, Param]:
    """The method-scoped config keys of method ``name``: its ``params`` and those it ``uses``."""
    m, declared = get(name), declared_params()
    missing = [k for k in m.uses if k not in declared]
    if missing:
        raise ValueError(f"method {name!r} uses config key(s) {', '.join(missing)} that no method declares")
    return {**m.params, **{k: declared[k][1] for k in m.uses}}


def owners(key: str) -> list[str]:
    """The methods whose config has the method-scoped key ``key``."""
    return [m.name for m in _REGISTRY.values() if key in m.params or key in m.uses]


def _import_all():
    found = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name != "base" and not m.name.startswith("_"))
    for module in sorted(found, key=lambda n: (n not in ("source_only", "dmp"), n != "source_only", n)):
        importlib.import_module(f"{__name__}.{module}")


_import_all()
