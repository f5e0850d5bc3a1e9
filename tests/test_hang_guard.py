"""The subprocess hang guard of the tests (tests/hang_guard.py): a finished command's output and status come back as
from subprocess.run; a command that stops writing and never ends fails the test, naming the command and showing
what it wrote."""
import subprocess
import sys

import pytest

from tests.hang_guard import run, wait

HANGS = "import signal, sys; print('step 3 of 5', flush=True); sys.stderr.write('warming up\\n'); signal.pause()"


def test_a_finished_command_returns_like_subprocess_run():
    done = run([sys.executable, "-c", "import sys; print('out'); sys.stderr.write('err'); sys.exit(3)"], quiet=600)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err")
    assert run([sys.executable, "-c", "print('x')"], quiet=600, text=False).stdout == b"x\n"
    with pytest.raises(subprocess.CalledProcessError):
        run([sys.executable, "-c", "raise SystemExit(1)"], quiet=600, check=True)


def test_a_silent_command_that_never_ends_fails_naming_itself():
    """(The guard fires after 1 s without output whatever the machine's speed: the command never ends.)"""
    with pytest.raises(pytest.fail.Exception) as failed:
        run([sys.executable, "-c", HANGS], quiet=1)
    message = str(failed.value)
    assert message.startswith("hang guard: no output for ") and "signal.pause()" in message
    assert "--- its last stdout ---" in message and "--- its last stderr ---" in message


def test_wait_names_the_processes_still_running():
    procs = [subprocess.Popen([sys.executable, "-c", "pass"]), subprocess.Popen([sys.executable, "-c", HANGS],
                                                                               stdout=subprocess.DEVNULL)]
    procs[0].wait()  # ended, whatever the machine's speed
    with pytest.raises(pytest.fail.Exception) as failed:
        wait(procs, limit=1, what=lambda: "events: claimed")
    assert f"processes [{procs[1].pid}] still running after 1 s; events: claimed" in str(failed.value)
    assert procs[1].wait() != 0
