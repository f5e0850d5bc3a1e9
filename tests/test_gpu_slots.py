"""One GPU per training job (dmp/train/devices.py), on the CPU with a simulated device count: concurrent jobs get
distinct devices, a crashed job frees its slot, a device assigned by SLURM (or the user) is left alone.

The fake jobs log what they do, in order, to one file (``claimed PID`` once they hold a slot, ``released PID``
before they let it go), and the tests assert on that order, never on timing or on whether a process has been
reaped yet."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from dmp.train import devices
from dmp.train.devices import GpuSlotError, gpu_slot, slot_devices
from tests.hang_guard import wait

HANG = 600  # seconds in all for a test's fake jobs to end: a guard against a hang (they take about one idle)

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WAITING = "are taken; waiting for one"  # what gpu_slot says (once) when every slot is taken and it starts waiting

# A fake training job: claims a slot, records what CUDA_VISIBLE_DEVICES it got, and holds the slot until N devices
# are recorded (so the jobs truly overlap), or kills itself while holding it. It waits as long as it takes: the
# fixture kills whatever is left at the end of a test.
JOB = textwrap.dedent("""
    import importlib.util, os, sys, time, pathlib
    spec = importlib.util.spec_from_file_location("devices", sys.argv[4])  # the module alone: no torch import
    devices = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(devices)
    out, n, crash = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "crash"

    def log(event):  # one O_APPEND write a line: the lines land whole, in the order the jobs write them
        fd = os.open(out / "events", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, f"{event} {os.getpid()}\\n".encode())
        os.close(fd)

    with devices.gpu_slot(poll=0.05) as claim:
        log("claimed")
        (out / f"{os.getpid()}.dev").write_text(os.environ["CUDA_VISIBLE_DEVICES"])
        if crash:
            os.kill(os.getpid(), 9)
        while len(list(out.glob("*.dev"))) < n:
            time.sleep(0.05)
        log("released")  # written while the slot is still held
""")


def _env(tmp_path, slots, **extra):
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(DMP_GPU_SLOTS=str(slots), DMP_GPU_LOCK_DIR=str(tmp_path / "locks"), PYTHONPATH=PROJECT, **extra)
    return env


@pytest.fixture
def jobs(tmp_path):
    """``jobs(n, slots, ...)``: start ``n`` fake jobs, each holding its slot until ``wait_for`` (default ``n``)
    devices are recorded in the shared ``out`` folder; any job still running when the test ends is killed."""
    started = []

    def start(n, slots, mode="hold", wait_for=None, stderr=None, **extra):
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        args = [str(out), str(wait_for or n), mode, devices.__file__]
        procs = [subprocess.Popen([sys.executable, "-c", JOB, *args], env=_env(tmp_path, slots, **extra),
                                  stderr=stderr, text=True) for _ in range(n)]
        started.extend(procs)
        return procs, out

    yield start
    for p in started:
        if p.poll() is None:
            p.kill()
        p.communicate()


def events(out):
    """The jobs' log, in the order written: ``[("claimed", pid), ("released", pid), ...]``."""
    return [(event, int(pid)) for event, pid in (line.split() for line in (out / "events").read_text().splitlines())]


def test_four_concurrent_jobs_get_four_distinct_devices(jobs):
    procs, out = jobs(4, 4)
    assert _wait(procs, out) == [0] * 4
    assert sorted(p.read_text() for p in out.glob("*.dev")) == ["0", "1", "2", "3"]
    assert [e for e, _ in events(out)] == ["claimed"] * 4 + ["released"] * 4  # all four held a slot at once


def test_jobs_take_the_devices_listed_in_cuda_visible_devices(jobs):
    procs, out = jobs(2, 2, CUDA_VISIBLE_DEVICES="5,2,7")
    assert _wait(procs, out) == [0, 0]
    assert sorted(p.read_text() for p in out.glob("*.dev")) == ["2", "5"]


def test_a_crashed_job_frees_its_slot(jobs, tmp_path, capsys):
    procs, out = jobs(1, 1, mode="crash")
    assert _wait(procs, out) == [-signal.SIGKILL]
    assert [p.read_text() for p in out.glob("*.dev")] == ["0"]
    assert events(out) == [("claimed", procs[0].pid)]  # killed while holding the slot: it never released it
    env = {"DMP_GPU_SLOTS": "1", "DMP_GPU_LOCK_DIR": str(tmp_path / "locks")}
    with gpu_slot(env, poll=0.05) as claim:  # the only slot, taken by the killed job: free again at once
        assert claim == {"slot": 0, "device": "0"} and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert "CUDA_VISIBLE_DEVICES" not in env
    assert WAITING not in capsys.readouterr().err  # granted on the first try, without waiting


def test_a_second_claim_is_granted_only_after_the_first_is_released(jobs):
    (holder,), out = jobs(1, 1, wait_for=2)  # holds device 0 until 2 devices are recorded
    while not (out / f"{holder.pid}.dev").exists():  # the holder has its slot
        assert holder.poll() is None, "the holder ended before it claimed a slot"
        time.sleep(0.05)
    (second,), _ = jobs(1, 1, wait_for=2, stderr=subprocess.PIPE)
    # the second job found the only slot taken (the holder cannot let it go before a second device is recorded)
    assert WAITING in second.stderr.readline()
    (out / "other.dev").write_text("-")  # lets the holder end
    assert _wait([holder, second], out) == [0, 0]
    assert events(out) == [("claimed", holder.pid), ("released", holder.pid),
                           ("claimed", second.pid), ("released", second.pid)]
    assert (out / f"{second.pid}.dev").read_text() == "0"


def test_more_visible_devices_than_slots_a_job_stays_within_its_slots(jobs, tmp_path):
    """CUDA_VISIBLE_DEVICES lists 4 devices, DMP_GPU_SLOTS is 2: with both slots held (here, by this process), a
    third job waits for one of the two (it never takes a third visible device); once one is free it gets it."""
    env = {"DMP_GPU_SLOTS": "2", "DMP_GPU_LOCK_DIR": str(tmp_path / "locks"), "CUDA_VISIBLE_DEVICES": "5,2,7,9"}
    assert slot_devices(env) == ["5", "2"]
    first, second = dict(env), dict(env)
    with gpu_slot(first, poll=0.05) as a, gpu_slot(second, poll=0.05) as b:
        assert (a, b) == ({"slot": 0, "device": "5"}, {"slot": 1, "device": "2"})
        (job,), out = jobs(1, 2, wait_for=1, stderr=subprocess.PIPE, CUDA_VISIBLE_DEVICES="5,2,7,9")
        # it says it waits (after trying the two slots) instead of recording a device: a job that took device 7
        # or 9 would have written its device and ended without a word
        line = job.stderr.readline()
        assert WAITING in line, f"the third job did not wait: stderr {line!r}, devices {_devices(out)}"
        assert _devices(out) == []
    assert _wait([job], out) == [0]  # it ended once a slot was free
    assert _devices(out) in (["5"], ["2"])
    assert sorted(p.name for p in (tmp_path / "locks").iterdir()) == ["gpu2.lock", "gpu5.lock"]


def _devices(out):
    return [p.read_text() for p in out.glob("*.dev")]


def _wait(procs, out):
    """The jobs' exit statuses; a hang fails naming the jobs still running, what they logged and the devices."""
    def said():
        log = (out / "events").read_text().split("\n") if (out / "events").exists() else []
        return f"their events: {[line for line in log if line]}; devices recorded: {sorted(_devices(out))}"
    return wait(procs, limit=HANG, what=said)


def test_assigned_devices_are_left_alone():
    assert slot_devices({"DMP_GPU_SLOTS": "4", "CUDA_VISIBLE_DEVICES": "3"}) is None  # SLURM --gpus=1, or a pin
    assert slot_devices({"DMP_GPU_SLOTS": "0"}) is None and slot_devices({}) is None
    env = {"DMP_GPU_SLOTS": "4", "CUDA_VISIBLE_DEVICES": "3"}
    with gpu_slot(env) as claim:
        assert claim is None and env["CUDA_VISIBLE_DEVICES"] == "3"
    assert slot_devices({"DMP_GPU_SLOTS": "2"}) == ["0", "1"]


def test_bad_slot_settings_are_one_line_errors():
    with pytest.raises(GpuSlotError, match=r"CUDA_VISIBLE_DEVICES=0,1 lists 2 devices: ask for at most 2"):
        slot_devices({"DMP_GPU_SLOTS": "4", "CUDA_VISIBLE_DEVICES": "0,1"})
    with pytest.raises(GpuSlotError, match="expected the number of GPUs"):
        slot_devices({"DMP_GPU_SLOTS": "all"})
