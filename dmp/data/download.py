"""Downloading one archive from its mirrors, through ``gdown`` for every URL (plain HTTP(S) as well as Google
Drive, whose confirmation pages gdown handles): resumed transfers (HTTP Range, per mirror, so bytes of two
mirrors are never spliced), a size limit, a per-read timeout and an overall deadline per download, and a check
that what arrived is not an HTML page. A pinned checksum is checked here; everything else is checked by
:mod:`dmp.data.fetch` on the extracted content."""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
from pathlib import Path

from ..io import sha256_file
from .registry import FetchError
from .spec import Archive

PARTIAL = ".partial"  # downloads/<this>/<mirror hash>/: interrupted transfers, resumed from the same mirror


class _TooLarge(Exception):
    pass


class _Failed(Exception):
    """One mirror did not deliver (the message says why)."""


def size_limit(archive: Archive, override: int | None = None, locked_size: int | None = None) -> int | None:
    """Bytes a download of ``archive`` may reach: ``override`` (``--max-size``), else twice its declared size,
    else twice the size locked at the first fetch (None: no limit)."""
    if override:
        return int(override)
    size = archive.size or locked_size
    return 2 * int(size) if size else None


def _part_dir(dest: Path, url: str) -> Path:
    return dest / PARTIAL / hashlib.sha1(url.encode()).hexdigest()[:12]


def _looks_like_html(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(512).lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html", b"<head", b"<?xml"))


def _get(url: str, out: Path, *, timeout: float, deadline: float, retries: int, max_bytes: int | None,
         progress: bool) -> None:
    """Download ``url`` to ``out`` with gdown (resuming a partial file of the same mirror); raise _Failed."""
    import gdown
    import requests

    def check_size(done, total):
        if max_bytes and ((total or 0) > max_bytes or done > max_bytes):
            raise _TooLarge(f"{max(done, total or 0):,} bytes")

    out.parent.mkdir(parents=True, exist_ok=True)
    cancel = threading.Event()
    timer = threading.Timer(deadline, cancel.set)
    timer.daemon = True
    timer.start()
    try:
        gdown.download(url=url, output=str(out), quiet=not progress, use_cookies=False, resume=True,
                       timeout=timeout, retries=max(retries - 1, 0), cancel=cancel, progress=check_size)
    except _TooLarge as exc:
        shutil.rmtree(out.parent, ignore_errors=True)
        raise _Failed(f"the file is larger than the size limit of {max_bytes:,} bytes ({exc}): not the "
                      f"expected archive, or raise the limit with --max-size") from None
    except gdown.DownloadCancelled:
        raise _Failed(f"no complete download within the deadline of {deadline:g} s (raise it with --deadline; "
                      f"the partial file is kept and resumed next time)") from None
    except gdown.FileURLRetrievalError as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        why = lines[1] if len(lines) > 1 and lines[0].startswith("Failed to retrieve") else " ".join(lines)
        raise _Failed(f"Google Drive did not give the file: {why}") from None
    except gdown.DownloadError as exc:
        if "incomplete" not in str(exc):  # e.g. a server that no longer honours the range: start afresh
            shutil.rmtree(out.parent, ignore_errors=True)
        raise _Failed(" ".join(str(exc).split())) from None
    except (requests.RequestException, OSError) as exc:
        raise _Failed(f"{exc.__class__.__name__}: {exc}") from None
    finally:
        timer.cancel()
    if cancel.is_set() and not out.is_file():
        raise _Failed(f"no complete download within the deadline of {deadline:g} s")


def download(archive: Archive, dest: Path, *, max_bytes: int | None = None, retries: int = 3,
             timeout: float = 60, deadline: float = 3600, progress: bool = True) -> tuple[Path, str, list[str]]:
    """Get ``archive`` into ``dest/<filename>`` from its mirrors in turn. Returns the path, the mirror used and
    the log of failed mirrors; raises FetchError with that log when none delivered. A file with the wrong pinned
    checksum, an HTML page or a file over ``max_bytes`` is deleted, never kept as the archive."""
    final = Path(dest) / archive.filename
    log = []
    for url in archive.urls:
        out = _part_dir(Path(dest), url) / archive.filename
        try:
            _get(url, out, timeout=timeout, deadline=deadline, retries=retries, max_bytes=max_bytes,
                 progress=progress)
            if _looks_like_html(out):
                raise _Failed("the server sent an HTML page instead of the archive (a login, quota or "
                              "confirmation page: download it in a browser instead)")
            if archive.sha256:
                got = sha256_file(out)
                if got != archive.sha256:
                    raise _Failed(f"checksum mismatch for {archive.filename}: expected sha256 {archive.sha256}, "
                                  f"got {got}")
        except _Failed as exc:
            kept = [p for p in out.parent.glob("*.part") if p.stat().st_size] if out.parent.is_dir() else []
            if out.is_file() or not kept:  # complete but wrong (never resumed), or nothing to resume
                shutil.rmtree(out.parent, ignore_errors=True)
            log.append(f"{url}: {exc}")
            continue
        finally:
            with contextlib.suppress(OSError):
                out.parent.parent.rmdir()  # the .partial folder, once empty
        os.replace(out, final)
        shutil.rmtree(out.parent, ignore_errors=True)
        with contextlib.suppress(OSError):
            out.parent.parent.rmdir()
        return final, url, log
    raise FetchError("\n".join(log) or f"{archive.filename}: no direct download URL")
