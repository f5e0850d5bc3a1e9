"""File helpers shared by the package: atomic writes (a crash never leaves a half-written file where a reader
would take it) and file hashing."""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
from pathlib import Path
from typing import Callable

# Temporary files of atomic_write: ``.NAME.XXXX.tmp.EXT`` beside ``NAME.EXT`` (XXXX random).
TEMP_NAME = re.compile(r"\..+\.\w+\.tmp(\.[^.]+)?")


def atomic_write(path, write: Callable, binary: bool = True) -> None:
    """Call ``write(fh)`` on a temporary file beside ``path`` (same suffix), fsync it, then rename it into place.
    The file is created like ``open()`` creates one: mode 0666 less the process umask."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp{path.suffix}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8", "newline": "\n"})) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        named = _naming(exc, path)
        if named is exc:
            raise
        raise named from exc


def _naming(exc: BaseException, path) -> BaseException:
    """The error of a failed write of ``path``, naming it: a full disk (ENOSPC/EDQUOT, also when a library such as
    torch.save reports it as its own error raised while handling it) says so; another system error gets the file
    name; anything else is returned unchanged."""
    cause = exc
    while cause is not None and not (isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT)):
        cause = cause.__cause__ or cause.__context__
    if cause is not None:
        what = "no space left on device" if cause.errno == errno.ENOSPC else "disk quota exceeded"
        return OSError(cause.errno, f"{what} while writing {path}; free some space there and run the command again")
    if isinstance(exc, OSError) and exc.strerror and not exc.filename:
        return OSError(exc.errno, f"{exc.strerror} while writing {path}")
    return exc


@contextlib.contextmanager
def write_errors_named(path):
    """Context of a direct (non-atomic) write of ``path``: a failure raises :func:`_naming`'s error naming it (a full
    disk says so)."""
    try:
        yield
    except Exception as exc:
        named = _naming(exc, path)
        if named is exc:
            raise
        raise named from exc


def remove_temp_files(folder) -> list[str]:
    """Delete the temporary files that :func:`atomic_write` leaves in ``folder`` when killed mid-write; returns
    their names."""
    found = [p for p in Path(folder).glob(".*.tmp*") if TEMP_NAME.fullmatch(p.name)]
    for p in found:
        p.unlink(missing_ok=True)
    return [p.name for p in found]


def write_text(path, text: str) -> None:
    atomic_write(path, lambda fh: fh.write(text), binary=False)


def write_json(path, obj) -> None:
    write_text(path, json.dumps(obj, indent=1, sort_keys=True) + "\n")


def sha256_file(path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()
