"""benchmarks/throughput.py runs on CPU at a tiny size and prints every figure it documents (input pipeline, model
step, end to end, their ratios, the anchor pass's share; the figures themselves are measurements, not checked
here)."""
import json
import os
import sys
from pathlib import Path

import pytest
from tests import hang_guard

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # ~10 s of CPU; 20-40 s wall on a loaded 2-core machine
def test_small_cpu_run_prints_every_figure(tmp_path):
    out = tmp_path / "figures.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = hang_guard.run(
        [sys.executable, str(ROOT / "benchmarks" / "throughput.py"), "--size", "small", "--device", "cpu",
         "--crop", "32", "--batch", "2", "--steps", "1", "--warmup", "1", "--images", "4", "--workers", "1",
         "--threads", "1", "--json", str(out)],
        quiet=1800, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout
    for label in ("RANDOM-INIT ResNet-50 (timing only", "input pipeline alone", "model step alone",
                  "end to end", "end-to-end / model-only", "DMP / two-domain CE step",
                  "DMP / source-only per epoch", "paper's time table: 1.60", "anchor pass share of an epoch",
                  "anchor_mode: accumulate", "loop's host time per step"):
        assert label in text, (label, text)
    r = json.loads(out.read_text())
    assert r["device"] == "cpu" and r["workers"] == 1 and r["batch"] == 2
    figures = [*r["pipeline_images_per_s"].values(), *r["model_images_per_s"].values(),
               *r["end_to_end_images_per_s"].values(), *r["seconds_per_epoch_wall"].values(),
               r["anchor_pass_seconds"]["vanilla"], r["anchor_pass_seconds"]["partial"]]
    figures += [v for k, v in r["ratios"].items()]
    assert set(r["pipeline_images_per_s"]) == {"amazon", "webcam", "dslr", "two-domain"}
    assert all(isinstance(v, (int, float)) and v > 0 for v in figures), r
    assert 0 < r["ratios"]["anchor_share_vanilla"] < r["ratios"]["anchor_share_partial"] < 1
    host = r["end_to_end_host_seconds_per_step"]
    for run in ("source_only", "dmp"):  # the host's time in the loop is part of the loop's time
        assert 0 < host[f"input_{run}"] + host[f"step_{run}"] <= r["seconds_per_step"][f"end_to_end_{run}"], host
    assert r["ops_per_step"]["dmp_host_reads"] == 0 and not r["two_domain_ce_compiled"]


@pytest.mark.slow  # ~30 s: aot_eager compilations of three steps
def test_compiled_cached_run_compiles_the_reference_too_and_counts_no_ops(tmp_path):
    """--compile step: the two-domain CE reference is compiled as the DMP step is (else their ratio compares a
    compiled step with an eager one), and the eager-only op count is skipped, not printed for the graphs."""
    out = tmp_path / "figures.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", DMP_COMPILE_BACKEND="aot_eager")
    proc = hang_guard.run(
        [sys.executable, str(ROOT / "benchmarks" / "throughput.py"), "--size", "small", "--device", "cpu",
         "--crop", "32", "--batch", "2", "--steps", "1", "--warmup", "1", "--images", "4", "--threads", "1",
         "--input-cache", "--compile", "step", "--json", str(out)],
        quiet=1800, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["compile"] == "step" and r["input_cache"] and r["ops_per_step"] is None and r["two_domain_ce_compiled"]
    assert "not counted: compile=step" in proc.stdout
    assert r["seconds_per_step"]["model_two_domain_ce"] > 0


@pytest.mark.slow  # ~10 s of CPU; a minute or two of wall on a loaded 2-core machine
def test_the_device_input_pipeline_runs_every_figure(tmp_path):
    """--input-cache --input-device: the batches cut from the cache held whole on the device (config input_device)."""
    out = tmp_path / "figures.json"
    proc = hang_guard.run(
        [sys.executable, str(ROOT / "benchmarks" / "throughput.py"), "--size", "small", "--device", "cpu",
         "--crop", "32", "--batch", "2", "--steps", "1", "--warmup", "1", "--images", "4", "--threads", "1",
         "--input-cache", "--input-device", "--json", str(out)],
        quiet=1800, env=dict(os.environ, OMP_NUM_THREADS="1"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["input_cache"] and r["input_device"] and "held whole on the device, crops drawn there" in proc.stdout
    assert all(v > 0 for v in r["pipeline_images_per_s"].values()) and r["ops_per_step"]["dmp_host_reads"] == 0


def test_the_device_input_pipeline_needs_the_cache(capsys):
    from scripts_module import load_script

    with pytest.raises(SystemExit):
        load_script("throughput", "benchmarks").main(["--device", "cpu", "--input-device"])
    assert "--input-device holds the input cache on the device: give --input-cache too" in capsys.readouterr().err


def test_suite_hours_estimate_covers_every_run_of_the_paper_suite():
    import importlib.util

    import yaml

    from dmp.suite import Suite

    spec = importlib.util.spec_from_file_location("throughput", ROOT / "benchmarks" / "throughput.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    config = ROOT / "config" / "config.yaml"
    times = bench.paper_times()
    per = bench.suite_hours(config, times, job_overhead_s=30.0)
    runs = Suite(yaml.safe_load(config.read_text())).all_runs()
    assert sum(r["runs"] for r in per.values()) == len(runs) > 0
    assert all(r["steps_s"] > 0 and r["eval_s"] > 0 and r["anchors_s"] > 0 for r in per.values())
    # a configuration the paper did not time is scaled from one it did: VisDA partial = ResNet-50, batch 32
    assert bench.step_seconds(times, "resnet50", 32, "dmp") == pytest.approx(0.767 * 4.1 / 7.8)
    assert bench.step_seconds(times, "resnet50", 50, "source_only") == pytest.approx(6.7 / 57)
