"""Which cells of the two Office-31 tables fit in one GPU command: a dry run of workflow/gpu/gpu_office31.sh's packing.

Runs nothing. It lists the cells (task, method, seed) of the vanilla and the partial table of a suite config (the
office31 blocks of config/config.yaml: their methods, six tasks, the seeds asked for), takes each run's iterations from
its resolved config and schedule (as ``python -m dmp config --schedule`` does), its seconds per iteration from a table
of measured rates (workflow/gpu/office31_rates.tsv: method, runs sharing the GPU, seconds per iteration), and lays the
cells out as the runner does: a set-up time first (install, verify, input cache), then ``--parallel`` slots; the next
cell in order whose estimate (``start + margin x iterations x rate``) ends before the deadline (``--seconds`` less
``--finish``) starts when the earliest slot frees. It prints each cell's estimate and its simulated start and end, or
why it does not fit, and a count per table.

A method without a measured rate takes the slowest rate measured for that count of runs sharing the GPU (marked
``assumed``). A count without a measurement takes the nearest larger count measured, else the largest smaller one scaled
by the ratio of the counts (runs time-slice one GPU).

    python workflow/gpu/office31_packing.py                               # seed 0 of both tables, 3 at a time, 540 s
    python workflow/gpu/office31_packing.py --seeds 0 1 2 --parallel 4 --order longest
"""

import argparse
import csv
import dataclasses
import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TASKS = ("A->W", "D->W", "W->D", "A->D", "D->A", "W->A")
NAMES = {"A": "amazon", "D": "dslr", "W": "webcam"}
FIRST = ("source_only", "dmp")  # the runner's first methods of each seed 0 task


@dataclasses.dataclass(frozen=True)
class Cell:
    table: str  # vanilla or partial (the run's setting)
    task: str
    method: str
    seed: int

    def folder(self) -> str:
        """The run's folder under a results folder (the suite's run layout)."""
        split = "partial" if self.table == "partial" else "full"
        return (f"runs/office31_256/{self.table}/{self.task.replace('->', '-')}/{self.method}/G/full-{split}/"
                f"seed{self.seed}")

    def __str__(self):
        return f"{self.table} {self.task.replace('->', '-')}/{self.method}/{self.seed}"


def table_methods(config: Path, table: str) -> list[str]:
    """The methods of ``table``'s office31 block in the suite config ``config`` (its own list, else the table's)."""
    import yaml

    spec = yaml.safe_load(config.read_text())["tables"][table]
    block = spec["datasets"]["office31"] or {}
    return list(block.get("methods") or spec["methods"])


def cells(methods: dict[str, list[str]], seeds) -> list[Cell]:
    """The cells in the runner's order, table by table: seed 0 of source-only and DMP task by task, then each other
    method on the six tasks; then each further seed, method by method."""
    out = []
    for table, names in methods.items():
        first, rest = [m for m in FIRST if m in names], [m for m in names if m not in FIRST]
        if 0 in seeds:
            out += [Cell(table, t, m, 0) for t in TASKS for m in first]
            out += [Cell(table, t, m, 0) for m in rest for t in TASKS]
        out += [Cell(table, t, m, s) for s in seeds if s != 0 for m in first + rest for t in TASKS]
    return out


def iterations(cell: Cell) -> int:
    """T_max of the cell's run: Office-31's preset for its setting, the schedule of its source domain."""
    return _iterations(cell.table, cell.task, cell.method)


@functools.lru_cache(maxsize=None)
def _iterations(setting: str, task: str, method: str) -> int:
    from dmp.config import resolve
    from dmp.data import registry
    from dmp.train.schedule import schedule

    source, target = (NAMES[x] for x in task.split("->"))
    cfg = resolve({"dataset": "office31", "source": source, "target": target, "method": method, "setting": setting})
    return schedule(cfg, registry.get_dataset("office31").domain(source).count)["iterations"]


def read_rates(path: Path) -> dict[tuple[str, int], float]:
    """``{(method, runs sharing the GPU): seconds per iteration}`` of a rates table (tab-separated, ``#`` comments,
    a header ``method parallel s_per_iter ...``)."""
    rows = [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return {(r["method"], int(r["parallel"])): float(r["s_per_iter"]) for r in csv.DictReader(rows, delimiter="\t")}


def rate(rates: dict, method: str, parallel: int) -> tuple[float, str]:
    """``(seconds per iteration, how it was found)`` of ``method`` with ``parallel`` runs sharing the GPU."""
    counts = sorted({p for _, p in rates})
    if parallel in counts:
        at, scale = parallel, 1.0
    elif any(p > parallel for p in counts):
        at, scale = min(p for p in counts if p > parallel), 1.0
    else:
        at = max(counts)
        scale = parallel / at
    if (method, at) in rates:
        how = "measured" if at == parallel else f"measured at {at} sharing" + (" x %.2f" % scale if scale != 1 else "")
        return rates[method, at] * scale, how
    slowest = max(v for (_, p), v in rates.items() if p == at)
    return slowest * scale, "assumed (the slowest measured)"


@dataclasses.dataclass
class Slot:
    cell: Cell
    iterations: int
    rate: float
    how: str
    estimate: float
    start: float | None = None  # simulated seconds from the command's start; None: it does not fit

    @property
    def end(self):
        return None if self.start is None else self.start + self.estimate


def pack(todo: list[Cell], rates: dict, *, seconds: float = 540, parallel: int = 3, setup: float = 50,
         start: float = 30, finish: float = 15, margin: float = 1.1, order: str = "table",
         iterations_of=iterations) -> list[Slot]:
    """The runner's packing of ``todo`` into one command of ``seconds``: ``setup`` seconds first, then ``parallel``
    slots; a cell's estimate is ``start + margin x iterations x rate``; the next cell (in ``todo``'s order, or the
    longest first with ``order="longest"``) whose estimate ends by ``seconds - finish`` takes the earliest free slot.
    Every cell of ``todo`` comes back, with its start, or ``start=None`` when no slot is free early enough."""
    slots = []
    for cell in todo:
        r, how = rate(rates, cell.method, parallel)
        it = iterations_of(cell)
        slots.append(Slot(cell, it, r, how, start + margin * it * r))
    queue = sorted(slots, key=lambda s: -s.estimate) if order == "longest" else list(slots)
    free = [float(setup)] * parallel
    deadline = seconds - finish
    while queue:
        k = min(range(parallel), key=free.__getitem__)
        fitting = next((s for s in queue if free[k] + s.estimate <= deadline), None)
        if fitting is None:
            break
        fitting.start = free[k]
        free[k] += fitting.estimate
        queue.remove(fitting)
    return slots


def report(slots: list[Slot], seconds: float, parallel: int) -> str:
    """The cells, their estimates and simulated times, and the count that fits per table."""
    lines = [f"{'cell':<32} {'iterations':>10} {'s/it':>7} {'estimate':>9} {'start':>6} {'end':>6}  rate"]
    for s in sorted(slots, key=lambda s: (s.start is None, s.start or 0)):
        when = (f"{s.start:6.0f} {s.end:6.0f}" if s.start is not None else f"{'-':>6} {'-':>6}")
        lines.append(f"{str(s.cell):<32} {s.iterations:>10} {s.rate:7.4f} {s.estimate:8.0f}s {when}  {s.how}"
                     + ("" if s.start is not None else "  (does not fit)"))
    for table in dict.fromkeys(s.cell.table for s in slots):
        mine = [s for s in slots if s.cell.table == table]
        fit = [s for s in mine if s.start is not None]
        lines.append(f"{table}: {len(fit)} of {len(mine)} cells fit in {seconds:g} s with {parallel} at a time "
                     f"({sum(s.estimate for s in mine):.0f} s of runs in all)")
    return "\n".join(lines)


def main(argv=None) -> list[Slot]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", type=Path, default=Path(__file__).with_name("office31_rates.tsv"))
    ap.add_argument("--config", type=Path, default=ROOT / "config" / "config.yaml", help="the suite config")
    ap.add_argument("--tables", nargs="+", default=["vanilla", "partial"], choices=("vanilla", "partial"))
    ap.add_argument("--methods", nargs="+", help="only these methods (default: each table's office31 methods)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--seconds", type=float, default=540, help="the command's seconds (SESSION_S) [540]")
    ap.add_argument("--parallel", type=int, default=3, help="runs sharing the GPU (PARALLEL) [3]")
    ap.add_argument("--setup", type=float, default=50, help="seconds before the first run: install, verify, cache "
                    "[50, measured]")
    ap.add_argument("--start", type=float, default=30, help="seconds per run besides its iterations: start-up and the "
                    "final evaluation [30; 17 to 27 measured] (START_S)")
    ap.add_argument("--finish", type=float, default=15, help="seconds kept at the end for the archive (FINISH_S)")
    ap.add_argument("--margin", type=float, default=1.1, help="the estimate's factor on the iterations [1.1]")
    ap.add_argument("--order", choices=("table", "longest"), default="table",
                    help="table: the runner's order; longest: the longest estimate first")
    ap.add_argument("--results", default=str(ROOT / "results" / "office31_gpu"),
                    help="cells with a metrics.json here are done and left out ('' for none)")
    args = ap.parse_args(argv)
    methods = {t: [m for m in table_methods(args.config, t) if not args.methods or m in args.methods]
               for t in args.tables}
    results = Path(args.results) if args.results else None
    todo, done = [], []
    for cell in cells(methods, args.seeds):
        (done if results and (results / cell.folder() / "metrics.json").is_file() else todo).append(cell)
    print(f"{len(todo)} cells to pack ({len(done)} done in {results or 'no results folder'}); {args.seconds:g} s, "
          f"{args.parallel} at a time, {args.setup:g} s of set-up, {args.start:g} s per run, rates {args.rates}")
    slots = pack(todo, read_rates(args.rates), seconds=args.seconds, parallel=args.parallel, setup=args.setup,
                 start=args.start, finish=args.finish, margin=args.margin, order=args.order)
    print(report(slots, args.seconds, args.parallel))
    return slots


if __name__ == "__main__":
    main()
