"""The tests' guard against a hung subprocess. A time limit in a test guards against a hang; it is no speed check (a
busy machine is not a failure): :func:`run` fails a command only when it has written nothing, on stdout or stderr,
for ``quiet`` seconds (no progress), or has run ``quiet * 10`` seconds in all, and the failure names the command and
shows the end of what it wrote. Size ``quiet`` for a machine ten times slower than an idle one: at least ten times
the longest silence of the command on an idle machine (its whole run, for a command that prints at the end)."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

TAIL = 2000  # characters of each stream shown when a guard fires


def run(args, *, quiet: float, cwd=None, env=None, text: bool = True, check: bool = False,
        total: float | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run(args, capture_output=True, text=text, cwd=cwd, env=env, check=check)`` under the guard
    (see the module docstring). The command runs in its own process group, killed whole when the guard fires (a
    Snakemake call and its jobs alike)."""
    total = quiet * 10 if total is None else total
    proc = subprocess.Popen([str(a) for a in args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
    last = [time.monotonic()]

    def read(name, pipe):
        for chunk in iter(lambda: os.read(pipe.fileno(), 65536), b""):
            chunks[name].append(chunk)
            last[0] = time.monotonic()

    readers = [threading.Thread(target=read, args=(n, p), daemon=True)
               for n, p in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for t in readers:
        t.start()
    start = time.monotonic()
    while proc.poll() is None:
        now = time.monotonic()
        if now - last[0] > quiet or now - start > total:
            why = (f"no output for {now - last[0]:.0f} s" if now - last[0] > quiet
                   else f"{now - start:.0f} s in all")
            _kill_group(proc)
            for t in readers:
                t.join(timeout=30)
            pytest.fail(f"hang guard: {why} (still running after {now - start:.0f} s): "
                        f"{' '.join(map(str, args))[:300]}\n{_tails(chunks)}", pytrace=False)
        time.sleep(0.2)
    for t in readers:
        t.join()
    proc.stdout.close()
    proc.stderr.close()
    out = {k: b"".join(v) for k, v in chunks.items()}
    if text:
        out = {k: v.decode(errors="replace") for k, v in out.items()}
    done = subprocess.CompletedProcess(args, proc.returncode, out["stdout"], out["stderr"])
    if check:
        done.check_returncode()
    return done


def wait(procs, *, limit: float, what=lambda: "") -> list[int]:
    """The exit statuses of the ``Popen`` objects ``procs``, each waited for; fails naming the ones still running
    after ``limit`` seconds in all, and what the callable ``what`` then says (e.g. their log so far), killing them."""
    end = time.monotonic() + limit
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(0.0, end - time.monotonic())))
        except subprocess.TimeoutExpired:
            running = [q.pid for q in procs if q.poll() is None]
            said = what()
            for q in procs:
                q.kill()
            pytest.fail(f"hang guard: processes {running} still running after {limit:.0f} s; {said}", pytrace=False)
    return codes


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _tails(chunks) -> str:
    parts = []
    for name, data in chunks.items():
        data = b"".join(data).decode(errors="replace")
        parts.append(f"--- its last {name} ---\n{data[-TAIL:] if data else '(nothing)'}")
    return "\n".join(parts)
