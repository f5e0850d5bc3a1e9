"""One GPU per training job (dmp/train/devices.py), on the CPU with a simulated device count: concurrent jobs get
distinct devices, a crashed job frees its slot, a device assigned by SLURM (or the user) is left alone."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from dmp.train import devices
from dmp.train.devices import GpuSlotError, gpu_slot, slot_devices

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A fake training job: claims a slot, records what CUDA_VISIBLE_DEVICES it got, and holds the slot until every job
# has recorded one (so the jobs truly overlap), or kills itself while holding it.
JOB = textwrap.dedent("""
    import importlib.util, os, sys, time, pathlib
    spec = importlib.util.spec_from_file_location("devices", sys.argv[4])  # the module alone: no torch import
    devices = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(devices)
    out, n, crash = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "crash"
    gpu_slot = devices.gpu_slot
    with gpu_slot(poll=0.05) as claim:
        (out / f"{os.getpid()}.dev").write_text(os.environ["CUDA_VISIBLE_DEVICES"])
        if crash:
            os.kill(os.getpid(), 9)
        deadline = time.time() + 60
        while len(list(out.glob("*.dev"))) < n and time.time() < deadline:
            time.sleep(0.05)
""")


def _env(tmp_path, slots, **extra):
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(DMP_GPU_SLOTS=str(slots), DMP_GPU_LOCK_DIR=str(tmp_path / "locks"), PYTHONPATH=PROJECT, **extra)
    return env


def _jobs(tmp_path, n, slots, mode="hold", wait_for=None, **extra):
    """``n`` fake jobs, each holding its slot until ``wait_for`` (default ``n``) devices are recorded."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    args = [str(out), str(wait_for or n), mode, devices.__file__]
    return [subprocess.Popen([sys.executable, "-c", JOB, *args], env=_env(tmp_path, slots, **extra))
            for _ in range(n)], out


def test_four_concurrent_jobs_get_four_distinct_devices(tmp_path):
    procs, out = _jobs(tmp_path, 4, 4)
    assert [p.wait(timeout=90) for p in procs] == [0] * 4
    assert sorted(p.read_text() for p in out.glob("*.dev")) == ["0", "1", "2", "3"]


def test_jobs_take_the_devices_listed_in_cuda_visible_devices(tmp_path):
    procs, out = _jobs(tmp_path, 2, 2, CUDA_VISIBLE_DEVICES="5,2,7")
    assert [p.wait(timeout=90) for p in procs] == [0, 0]
    assert sorted(p.read_text() for p in out.glob("*.dev")) == ["2", "5"]


def test_a_crashed_job_frees_its_slot(tmp_path):
    procs, out = _jobs(tmp_path, 1, 1, mode="crash")
    assert procs[0].wait(timeout=90) == -signal.SIGKILL
    assert [p.read_text() for p in out.glob("*.dev")] == ["0"]
    env = {"DMP_GPU_SLOTS": "1", "DMP_GPU_LOCK_DIR": str(tmp_path / "locks")}
    start = time.time()
    with gpu_slot(env, poll=0.05) as claim:  # the only slot, taken by the killed job: free again at once
        assert claim == {"slot": 0, "device": "0"} and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert time.time() - start < 5 and "CUDA_VISIBLE_DEVICES" not in env


def test_a_second_claim_waits_for_the_first_to_end(tmp_path):
    env = {"DMP_GPU_SLOTS": "1", "DMP_GPU_LOCK_DIR": str(tmp_path / "locks")}
    procs, out = _jobs(tmp_path, 1, 1, wait_for=2)  # holds device 0 until 2 devices are recorded
    while not list(out.glob("*.dev")):
        time.sleep(0.05)
    (out / "other.dev").write_text("-")  # lets the job end
    with gpu_slot(env, poll=0.05) as claim:
        assert procs[0].poll() is not None  # the claim was granted only once the holder had ended
        assert claim["device"] == "0"


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
