"""workflow/gpu/office31_packing.py, the dry run of the GPU runner's packing: on a tiny rates table, the cells that fit
and their simulated times, worked out by hand; the rates' fall-backs; the cells' order and iterations."""
from __future__ import annotations

import pytest
from scripts_module import load_script

packing = load_script("office31_packing", "workflow/gpu")
RATES = "method\tparallel\ts_per_iter\trun\nsource_only\t2\t0.1\tx\ndmp\t2\t0.2\ty\n"
ITERATIONS = {"A": 100, "D": 20, "W": 40}  # by source domain


def _rates(tmp_path):
    (tmp_path / "rates.tsv").write_text("# a tiny table\n" + RATES)
    return packing.read_rates(tmp_path / "rates.tsv")


def test_the_cells_that_fit_and_their_times_on_a_tiny_rates_table(tmp_path):
    """Two slots after 10 s of set-up, 5 s of start per run, deadline 90 - 5 s: estimates 5 + iterations x rate
    (source-only 0.1 s, DMP 0.2 s per iteration; 100 / 20 / 40 iterations from A / D / W). In the runner's order
    each cell takes the earliest free slot; the last one, W->A DMP (13 s), would end at 92 s: it does not fit.
    Longest first, the two slots end at 81 s and the 7 s cells no longer fit (85 s < 88 s)."""
    rates = _rates(tmp_path)
    todo = packing.cells({"vanilla": ["source_only", "dmp"]}, [0])
    kw = dict(seconds=90, parallel=2, setup=10, start=5, finish=5, margin=1.0,
              iterations_of=lambda c: ITERATIONS[c.task[0]])
    got = {str(s.cell): (s.start, s.end) for s in packing.pack(todo, rates, **kw)}
    assert got == {
        "vanilla A-W/source_only/0": (10, 25), "vanilla A-W/dmp/0": (10, 35),
        "vanilla D-W/source_only/0": (25, 32), "vanilla D-W/dmp/0": (32, 41),
        "vanilla W-D/source_only/0": (35, 44), "vanilla W-D/dmp/0": (41, 54),
        "vanilla A-D/source_only/0": (44, 59), "vanilla A-D/dmp/0": (54, 79),
        "vanilla D-A/source_only/0": (59, 66), "vanilla D-A/dmp/0": (66, 75),
        "vanilla W-A/source_only/0": (75, 84), "vanilla W-A/dmp/0": (None, None)}
    longest = packing.pack(todo, rates, order="longest", **kw)
    assert sorted(str(s.cell) for s in longest if s.start is None) == ["vanilla D-A/source_only/0",
                                                                       "vanilla D-W/source_only/0"]
    assert max(s.end for s in longest if s.start is not None) == 81
    text = packing.report(packing.pack(todo, rates, **kw), 90, 2)
    assert text.splitlines()[-1] == "vanilla: 11 of 12 cells fit in 90 s with 2 at a time (156 s of runs in all)"
    assert "vanilla W-A/dmp/0" in text.splitlines()[-2] and text.splitlines()[-2].endswith("(does not fit)")


def test_a_missing_rate_takes_the_slowest_and_a_missing_count_the_nearest(tmp_path):
    rates = _rates(tmp_path)
    assert packing.rate(rates, "dmp", 2) == (0.2, "measured")
    assert packing.rate(rates, "dann", 2) == (0.2, "assumed (the slowest measured)")
    assert packing.rate(rates, "source_only", 1) == (0.1, "measured at 2 sharing")  # the nearest larger count
    value, how = packing.rate(rates, "source_only", 3)  # above every count: scaled by 3 / 2
    assert value == pytest.approx(0.15) and how == "measured at 2 sharing x 1.50"


def test_the_cells_come_in_the_runners_order_with_the_schedules_iterations():
    six = ["source_only", "dann", "cdan_e", "dmp_no_al", "dmp_no_ds", "dmp"]  # gpu_office31.sh's methods
    order = [str(c) for c in packing.cells({"vanilla": six}, [0, 1])]
    assert order[:4] == ["vanilla A-W/source_only/0", "vanilla A-W/dmp/0", "vanilla D-W/source_only/0",
                         "vanilla D-W/dmp/0"]
    assert order[12:14] == ["vanilla A-W/dann/0", "vanilla D-W/dann/0"] and order[36:38] == [
        "vanilla A-W/source_only/1", "vanilla D-W/source_only/1"]
    assert order[42] == "vanilla A-W/dmp/1" and len(order) == len(set(order)) == 72
    assert [packing.iterations(packing.Cell(t, f"{s}->W" if s != "W" else "W->A", "dmp", 0))
            for t in ("vanilla", "partial") for s in "ADW"] == [2280, 400, 640] * 2
    assert packing.Cell("partial", "A->W", "dmp_ent", 2).folder() == \
        "runs/office31_256/partial/A-W/dmp_ent/G/full-partial/seed2"


def test_the_command_leaves_out_the_done_cells_and_prints_the_counts(tmp_path, capsys):
    (tmp_path / "rates.tsv").write_text(RATES.replace("\t2\t", "\t3\t").replace("0.1", "0.01").replace("0.2", "0.02"))
    done = tmp_path / "results" / packing.Cell("vanilla", "A->W", "source_only", 0).folder()
    done.mkdir(parents=True)
    (done / "metrics.json").write_text("{}")
    slots = packing.main(["--rates", str(tmp_path / "rates.tsv"), "--results", str(tmp_path / "results"),
                          "--tables", "vanilla", "--methods", "source_only", "dmp", "--seconds", "1000",
                          "--setup", "0", "--start", "0", "--finish", "0", "--margin", "1"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("11 cells to pack (1 done in ")
    assert out[-1] == "vanilla: 11 of 11 cells fit in 1000 s with 3 at a time (176 s of runs in all)"
    assert len(slots) == 11 and all(s.start is not None for s in slots)
