"""Every job count and every cost figure quoted in README.md and docs/*.md is what its command prints today.

A quoted figure is marked with the command that gives it, an HTML comment right before the number (invisible on the
rendered page):

    <!--jobs: ARGS; RULES-->N      `snakemake -n ARGS` lists N jobs of RULES (`train`, `train+train_variant`, or
                                   `total`); run on a fresh clone (here: with --forceall)
    <!--hours: ARGS[; KEY=VALUE]-->N
                                   `python benchmarks/throughput.py ARGS` prints a total of N hours (rounded to the
                                   quoted digits); KEY=VALUE: the same on a copy of the --suite-hours config with
                                   that key set (e.g. comparison_methods=false, DMP's rows only)

The fast tests find every "N ... jobs" phrase of the documents and every "N hours" of the README and the suite's
documents and require the mark (or an entry of ALLOWED, a number that counts no command's jobs); the slow ones run
the dry runs and the estimates and compare."""
from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from tests import hang_guard
from tests.scripts_module import load_script

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Documents whose hour figures must all be marked (docs/benchmarks.md also records measured CPU hours of other
# scripts; its marked figures are checked like every other).
HOURS_DOCS = [ROOT / "README.md", *(ROOT / "docs" / f"{n}.md" for n in ("workflow", "figures", "datasets", "method"))]
MARK = re.compile(r"<!--(?P<kind>jobs|hours):(?P<body>[^>]*?)-->(?:\*\*)?(?P<n>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)")
JOB_PHRASE = re.compile(r"(?<![\w.,])(?P<n>(?:\d{1,3}(?:,\d{3})+|\d+))\s+(?:(?!per\b)[A-Za-z'+-]+\s+){0,2}?jobs?\b")
HOUR_PHRASE = re.compile(r"(?<![\w.,])(?P<n>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\s+(?:[\w'-]+\s+){0,2}?(?:GPU[- ])?hours\b|(?<![\w.,])(?P<h>\d+\.\d+) h\b")
# (file, the matched phrase): numbers of jobs that are no command's count.
ALLOWED = {
    ("workflow.md", "8 jobs"),                 # "8 jobs at once, one GPU each": the --resources gpu=8 example
    ("workflow.md", "2 concurrent DMP jobs"),  # a measurement of two jobs sharing one GPU
    ("benchmarks.md", "59 jobs"),              # a dated GPU measurement: the demo config of that day
}


def _marks(path: Path):
    """``(line, kind, args, extra, quoted)`` of every mark of ``path``."""
    text = path.read_text()
    for m in MARK.finditer(text):
        args, _, extra = " ".join(m.group("body").split()).partition(";")
        yield text.count("\n", 0, m.start()) + 1, m.group("kind"), args.strip(), extra.strip(), m.group("n")


def _all_marks():
    return [(path.name, *mark) for path in DOCS for mark in _marks(path)]


def _unmarked(path: Path, phrase: re.Pattern) -> list[str]:
    text = path.read_text()
    found = []
    for m in phrase.finditer(text):
        if re.search(r"-->(?:\*\*)?$", text[:m.start()]) or (path.name, " ".join(m.group(0).split())) in ALLOWED:
            continue
        found.append(f"{path.name}:{text.count(chr(10), 0, m.start()) + 1}: {' '.join(m.group(0).split())!r}")
    return found


# ----------------------------------------------------------------------------------------------- fast checks
def test_every_job_count_is_marked_with_its_command():
    unmarked = [hit for path in DOCS if path.name != "evidence.md" for hit in _unmarked(path, JOB_PHRASE)]
    assert not unmarked, "job counts without a <!--jobs: ...--> mark:\n" + "\n".join(unmarked)


def test_every_cost_figure_is_marked_with_its_command():
    unmarked = [hit for path in HOURS_DOCS for hit in _unmarked(path, HOUR_PHRASE)]
    assert not unmarked, "hours without a <!--hours: ...--> mark:\n" + "\n".join(unmarked)


def test_the_scan_finds_an_unmarked_count(tmp_path):
    """The scanners themselves: an unmarked count and an unmarked cost are found, marked ones are not."""
    doc = tmp_path / "x.md"
    doc.write_text("lists 1,548 training jobs and <!--jobs: all; train-->651 jobs; about 96 H200 hours and\n"
                   "<!--hours: --suite-hours c.yaml-->36 GPU hours, 102.5 h\n")
    assert [h.split(": ", 1)[1] for h in _unmarked(doc, JOB_PHRASE)] == ["'1,548 training jobs'"]
    assert [h.split(": ", 1)[1] for h in _unmarked(doc, HOUR_PHRASE)] == ["'96 H200 hours'", "'102.5 h'"]


def test_marks_are_well_formed_and_never_start_a_line():
    marks = _all_marks()
    assert {m[2] for m in marks} == {"jobs", "hours"} and len(marks) >= 30
    for name, line, kind, args, extra, _ in marks:
        where = f"{name}:{line}"
        if kind == "jobs":
            assert re.fullmatch(r"\w+(\+\w+)*", extra), where
            tokens = args.split()
            assert re.fullmatch(r"all|all_tables|all_figures|table_\w+|figure_\w+|row_\w+", tokens[0]), where
            for flag, value in zip(tokens[1::2], tokens[2::2]):
                assert flag in ("--configfile", "--config"), where
                assert flag == "--config" or (ROOT / value).is_file(), where
        else:
            tokens = dict(zip(args.split()[::2], args.split()[1::2]))
            assert set(tokens) <= {"--suite-hours", "--figures"} and "--suite-hours" in tokens, where
            assert all((ROOT / v).is_file() for v in tokens.values()), where
            assert not extra or re.fullmatch(r"\w+=\w+", extra), where
    for path in DOCS:  # a line opening with "<!--" starts an HTML block: the rest of the paragraph is not Markdown
        bad = [n for n, line in enumerate(path.read_text().splitlines(), 1)
               if re.match(r"<!--(jobs|hours):", line.lstrip())]   # (the README's headline marker is a block of its own)
        assert not bad, f"{path.name}: lines {bad} start with a mark"


# ----------------------------------------------------------------------------------------------- the commands
def _fresh_clone_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("DMP_DATASETS_DIR", "DMP_DATA_DIR")}


def _dry_run(args: str) -> dict[str, int]:
    """Rule -> count of `snakemake -n ARGS` as on a fresh clone (--forceall: runs that exist here still count)."""
    proc = hang_guard.run([sys.executable, "-m", "snakemake", "-n", *args.split(), "--forceall", "--quiet", "rules"],
                          cwd=ROOT, env=_fresh_clone_env(), quiet=3600)
    assert proc.returncode == 0, f"snakemake -n {args}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    stats = proc.stdout.split("Job stats:")[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M)}


@pytest.mark.slow
def test_job_counts_are_what_the_dry_runs_list():
    marks = [m for m in _all_marks() if m[2] == "jobs"]
    counts = {args: _dry_run(args) for args in sorted({m[3] for m in marks})}
    wrong = []
    for name, line, _, args, rules, quoted in marks:
        listed = sum(counts[args].get(rule, 0) for rule in rules.split("+"))
        if int(quoted.replace(",", "")) != listed:
            wrong.append(f"{name}:{line}: quotes {quoted}, `snakemake -n {args}` lists {listed} ({rules})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.slow
def test_cost_figures_are_what_the_estimate_prints(tmp_path, monkeypatch):
    throughput = load_script("throughput", "benchmarks")
    from dmp.data import registry

    # The registry reads every declaration again on each lookup; they do not change during the test.
    monkeypatch.setattr(registry, "_all_specs", functools.cache(registry._all_specs))
    monkeypatch.delenv("DMP_DATASETS_DIR", raising=False)
    monkeypatch.delenv("DMP_DATA_DIR", raising=False)

    @functools.cache
    def hours(args: str, extra: str) -> float:
        tokens = dict(zip(args.split()[::2], args.split()[1::2]))
        config = ROOT / tokens["--suite-hours"]
        if extra:
            key, value = extra.split("=")
            cfg = yaml.safe_load(config.read_text())
            cfg[key] = yaml.safe_load(value)
            config = tmp_path / f"{key}_{value}.yaml"
            config.write_text(yaml.safe_dump(cfg))
        argv = ["--suite-hours", str(config)] + (["--figures", str(ROOT / tokens["--figures"])]
                                                 if "--figures" in tokens else [])
        with contextlib.redirect_stdout(io.StringIO()) as out:
            total = throughput.main(argv)
        last = out.getvalue().strip().splitlines()[-1].split()
        assert last[0] == "all" and float(last[-1]) == round(total, 1)  # what it prints is what it returns
        return total

    wrong = []
    by_command = defaultdict(list)
    for name, line, kind, args, extra, quoted in _all_marks():
        if kind == "hours":
            by_command[(args, extra)].append((name, line, quoted))
    for (args, extra), quotes in by_command.items():
        total = hours(args, extra)
        for name, line, quoted in quotes:
            digits = len(quoted.partition(".")[2])
            if f"{total:.{digits}f}" != quoted:
                wrong.append(f"{name}:{line}: quotes {quoted}, `throughput.py {args}`"
                             f"{' with ' + extra if extra else ''} prints {total:.1f}")
    assert not wrong, "\n".join(wrong)
