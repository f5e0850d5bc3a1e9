"""Every path or value the Snakemake rules put into a shell command is quoted: a ``results`` folder with a space or
a ``;`` is one word, never shell syntax."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
import yaml
from tests import hang_guard

pytestmark = pytest.mark.slow  # both run Snakemake
ROOT = Path(__file__).resolve().parents[1]


def snakemake(*args, quiet=1800):
    """Snakemake's output; a hang guard of ``quiet`` seconds without output (tests/hang_guard.py)."""
    return hang_guard.run([sys.executable, "-m", "snakemake", *args], cwd=ROOT, quiet=quiet)


def weird_config(tmp_path, name: str) -> tuple[Path, str, Path]:
    """``config/NAME`` writing under ``<tmp>/a b;touch <tmp>/INJECTED`` (data too): (config file, results,
    marker file a broken command would create)."""
    marker = tmp_path / "INJECTED"
    results = f"{tmp_path}/a b;touch {marker}"
    cfg = yaml.safe_load((ROOT / "config" / name).read_text())
    cfg["results"] = results
    if "data_dir" in cfg:
        cfg["data_dir"] = f"{results}/da ta"
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path, results, marker


def shell_commands(output: str) -> list[str]:
    """The shell commands of a dry run with --printshellcmds (the lines that call the project's python)."""
    return [line.strip() for line in output.splitlines() if " -m dmp" in line and not line.startswith(" " * 4 + "[")]


def test_every_demo_command_keeps_paths_and_values_as_one_word(tmp_path):
    """Dry run of the whole demo with a results folder holding a space and a ';': each command, split as a POSIX
    shell splits it, has the run folder, log, data folder and weights file as single words."""
    path, results, _ = weird_config(tmp_path, "demo.yaml")
    proc = snakemake("-n", "-p", "all_tables", "--configfile", str(path), "--forceall")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    commands = shell_commands(proc.stdout)
    train = [c for c in commands if " -m dmp train " in c]
    assert len(train) == 62 and len([c for c in commands if "-m dmp.tables build" in c]) == 6
    for cmd in commands:
        words = shlex.split(cmd)
        assert not any(w.startswith("b;touch") or w == "touch" for w in words), cmd
    for cmd in train:
        words = shlex.split(cmd)
        run_dir = words[words.index("--out") + 1]
        assert run_dir.startswith(f"{results}/runs/demo/"), cmd
        assert words[words.index("prepare") + 1] == run_dir
        assert f"DMP_DATA_DIR={results}/da ta" in words
        assert f"weights_path={results}/weights/smallcnn_demo.pt" in words
        assert f"{run_dir}/train.log" in words
    data = next(c for c in commands if " -m dmp data demo" in c)
    assert f"DMP_DATA_DIR={results}/da ta" in shlex.split(data)
    weights = next(c for c in commands if " -m dmp pretrain-demo" in c)
    assert shlex.split(weights)[shlex.split(weights).index("--out") + 1] == f"{results}/weights/smallcnn_demo.pt"


def test_a_table_job_runs_in_a_results_folder_with_a_space_and_a_semicolon(tmp_path):
    """The table rule executed for real (no runs needed with require_runs=False): the table lands in the odd folder
    and the text after ';' is never run."""
    path, results, marker = weird_config(tmp_path, "config.yaml")
    proc = snakemake("--cores", "1", "table_time", "--configfile", str(path), "--config", "require_runs=False")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (Path(results) / "tables" / "time.md").read_text().startswith("# Training time")
    assert not marker.exists()
