"""The pseudo-label diagnosis of the Office-31 study as tables and readings: what L_DS adds with DMP's own
pseudo-labels and with the true labels of a fraction q of the target read by its intra-class term, each run scored
on the images none of them read labels of, beside the paper's share; and the same for each variant of the term
(:data:`VARIANTS`). The runs are made by :mod:`studies.office31.pseudo_label_runs`."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pandas as pd

from studies.office31.common import STUDY, provenance
from studies.office31.pseudo_label_runs import read_mask, variant_root
from studies.records import diagnoses, office31_runs

PSEUDO = "diagnosis/pseudo_labels"
"""Under :data:`~studies.office31.common.STUDY`, the diagnosis's runs: ``q<q>/<task>/<method>/seed<k>/diagnosis.json``."""


def _diagnosis_runs(root: Path) -> dict:
    """``{(q, task, method, seed): diagnosis.json}`` of the pseudo-label diagnosis."""
    out = {}
    for f, d in diagnoses(root, "q*/*/*/seed*/diagnosis.json"):
        out[(d["fraction"], f.parts[-4].replace("-", "->"), d["method"], d["seed"])] = d
    return out


def _accuracy_on(run: dict, read: list[bool], held_out: bool = True) -> float:
    """A run's accuracy (%) on the target images not in ``read`` (``held_out``), or on those in it."""
    pairs = [(p, y) for p, y, r in zip(run["predictions"], run["labels"], read) if r != held_out]
    return 100.0 * sum(p == y for p, y in pairs) / len(pairs)


def _at_start(run: dict) -> float | None:
    """The target accuracy (%) last measured at or before the intra-class term's start."""
    before = [r["accuracy"] for r in run.get("accuracy_log", []) if r["iteration"] <= run["intra_start_iteration"]]
    return before[-1] if before else None


GAP_CLOSED = (0.25, 0.75)
"""The shares of the gap between L_DS's own share and the paper's that read as "part of" and as "accounts for"."""


class Variant(NamedTuple):
    """The pseudo-label diagnosis again with one key of DMP's intra-class term changed (``--set``): a key that acts
    on that term only, which DMP (No DS) does not have, so DMP (No DS)'s runs are the plain diagnosis's."""
    overrides: dict
    name: str  # the heading: "the pseudo-labels' quality with <name>"
    short: str  # the variant, in a reading
    plain: str  # the default, in a reading
    what: str  # what the variant changes, in a verdict
    question: str  # why it is run


VARIANTS = (
    Variant({"weight_norm": "mean_one"}, "the unweighted intra-class term", "c w = 1", "the printed w = 1/c",
            "its scale", "With its own pseudo-labels the stronger term lowers DMP (above); does it, given right "
            "labels, give the paper's share?"),
    Variant({"intra_grad_p": "false"}, "p as a constant weight in the intra-class term", "p constant",
            "the paper's gradient into p", "the term's gradient into p",
            "The paper's gradient of the intra-class term has a part through p, which raises the confidence of each "
            "image's current Top-1 label, right or wrong; without it (p a constant weight), does L_DS add the "
            "paper's share?"),
)


def _pseudo_label_rows(paper: pd.DataFrame, runs: dict) -> tuple[list[str], dict]:
    """The diagnosis table's rows, and ``{q: {(task, seed): numbers}}`` of each row (see :func:`pseudo_label_check`)."""
    lines, shares = [], {}
    for (q, task, method, seed), run in sorted(runs.items()):
        no_ds, own = runs.get((0.0, task, "dmp_no_ds", seed)), runs.get((0.0, task, "dmp", seed))
        if method != "dmp" or not q or no_ds is None or own is None:
            continue
        read = read_mask(run["images"], seed, q).tolist()
        acc = [_accuracy_on(r, read) for r in (no_ds, own, run)]
        start = _at_start(own)
        ref = paper.loc["dmp", task] - paper.loc["dmp_no_ds", task]
        on_read = (_accuracy_on(own, read, False), _accuracy_on(run, read, False))
        shares.setdefault(q, {})[(task, seed)] = dict(
            own=acc[1] - acc[0], lifted=acc[2] - acc[0], ref=ref, before=on_read[0], after=on_read[1],
            paper_no_ds=paper.loc["dmp_no_ds", task], paper_dmp=paper.loc["dmp", task],
            labelled=None if start is None else 100 * q + (1 - q) * start)
        right = "–" if start is None else f"{start:.1f} / {100 * q + (1 - q) * start:.1f}"
        lines.append(f"| {task} | {seed} | {q:g} | {right} | {acc[0]:.1f} | {acc[1]:.1f} | {acc[2]:.1f} | "
                     f"{acc[1] - acc[0]:+.1f} | {acc[2] - acc[0]:+.1f} | {ref:+.1f} | "
                     f"{on_read[0]:.1f} / {on_read[1]:.1f} |")
    return lines, shares


def _pseudo_label_readings(shares: dict) -> list[str]:
    """Per q: what L_DS adds with the q labels read, beside DMP's own share and the paper's; the gap closed."""
    readings = []
    for q, by_run in shares.items():
        rows = list(by_run.values())
        own, lifted, ref, before, after, paper_no_ds, paper_dmp = (
            sum(r[k] for r in rows) / len(rows)
            for k in ("own", "lifted", "ref", "before", "after", "paper_no_ds", "paper_dmp"))
        labelled = [r["labelled"] for r in rows if r["labelled"] is not None]
        right = "" if not labelled else f"the term's labels right on {sum(labelled) / len(labelled):.1f} % at its start, "
        closed = (lifted - own) / (ref - own) if ref > own else None
        if closed is None:
            verdict = "DMP's own share is already the paper's"
        elif closed >= GAP_CLOSED[1]:
            verdict = "the pseudo-labels' quality accounts for the gap"
        elif closed >= GAP_CLOSED[0]:
            verdict = "the pseudo-labels' quality accounts for part of the gap"
        else:
            verdict = "the pseudo-labels' quality is not what limits L_DS here"
        readings.append(f"With q = {q:g} ({len(rows)} run{'s' if len(rows) > 1 else ''}; {right}where the paper's "
                        f"DMP (No DS) ends at {paper_no_ds:.1f} % and its DMP at {paper_dmp:.1f} %) L_DS adds {lifted:+.1f}, "
                        f"against {own:+.1f} with DMP's own pseudo-labels and the paper's {ref:+.1f} on the same "
                        f"tasks" + ("" if closed is None else f": the labels close {100 * closed:.0f} % of the gap")
                        + f", so {verdict}; on the read images themselves DMP is right on {before:.1f} % without "
                        f"and {after:.1f} % with their labels read.")
    return readings


def _variant_reading(plain: dict, changed: dict, variant: Variant) -> str:
    """Per q, on the tasks and seeds both ran: L_DS's share with the variant against the default, each with DMP's
    own pseudo-labels and with the q labels read, beside the paper's share; whether the variant reaches it."""
    out = []
    for q, by_run in changed.items():
        both = sorted(set(by_run) & set(plain.get(q, {})))
        if not both:
            continue
        mean = lambda rows, k: sum(r[k] for r in rows) / len(rows)  # noqa: E731
        v_rows, p_rows = [by_run[b] for b in both], [plain[q][b] for b in both]
        v_own, v_lift, p_own, p_lift, ref = (mean(v_rows, "own"), mean(v_rows, "lifted"), mean(p_rows, "own"),
                                             mean(p_rows, "lifted"), mean(v_rows, "ref"))
        if v_own >= ref - 1.0:
            verdict = f"with {variant.short} L_DS adds the paper's share with DMP's own pseudo-labels: {variant.what} limits L_DS"
        elif v_lift >= ref - 1.0:
            verdict = f"with right labels and {variant.short} L_DS adds the paper's share: {variant.what} limits L_DS"
        elif v_lift > p_lift + 1.0 or v_own > p_own + 1.0:
            verdict = f"{variant.short} adds more, short of the paper's share"
        else:
            verdict = f"{variant.short} adds no more, even with right labels: {variant.what} is not what limits L_DS here"
        where = ", ".join(f"{t} seed {k}" for t, k in both)
        out.append(f"With q = {q:g} ({where}) L_DS adds {v_own:+.1f} with {variant.short} and DMP's own pseudo-labels, "
                   f"{v_lift:+.1f} with the q labels read, against {p_own:+.1f} and {p_lift:+.1f} with "
                   f"{variant.plain} and the paper's {ref:+.1f}: {verdict}.")
    return " ".join(out)


def pseudo_label_check(paper: pd.DataFrame, root: Path | None = None) -> list[str]:
    """The pseudo-label diagnosis: per task, seed and q where DMP (No DS), DMP and DMP whose intra-class term reads
    the labels of a fraction q of the target all ran, each scored on the images none of them read labels of; what L_DS
    adds (DMP minus DMP (No DS)) with DMP's own pseudo-labels and with the q labels read, beside the paper's share on
    that task; the intra-class term's labels right at its start (DMP's own, and with q read: q + (1 - q) x own); and
    DMP's accuracy on the read images without and with their labels read (what the term does with a right label).
    Read per q: the share of the gap (paper's minus own) that reading the labels closes. Then the same for each of
    :data:`VARIANTS` that ran, read against the default's."""
    root = STUDY / PSEUDO if root is None else root
    runs = _diagnosis_runs(root)
    lines, shares = _pseudo_label_rows(paper, runs)
    if not shares:
        return []
    head = ["| task | seed | q | labels right at the term's start, own / with q | DMP (No DS) | DMP | DMP, q read "
            "| L_DS share, own | L_DS share, q read | paper's L_DS share | read images: DMP / DMP, q read |",
            "|---|" + "---|" * 10]
    out = ["**The pseudo-labels' quality** (`python -m studies pseudo-labels`, a diagnosis that reads target "
           "labels; no table reads its runs). L_DS's target term pulls each target image towards the source anchor "
           "of its predicted class; when it starts (epoch 15) DMP's predictions here are right far less often than "
           "the paper's model's. DMP whose intra-class term reads the true label of a fixed random fraction q of "
           "the target images (everything else DMP's own), beside DMP and DMP (No DS) trained again by the same "
           "code, all scored on the images whose labels were not read (the deeper form's data and preset); the "
           "last column is DMP's accuracy on the read images, without and with their labels read:", "",
           *head, *lines, "", " ".join(_pseudo_label_readings(shares)) + " The read labels act through the read "
           "images, which share the network with the scored ones: the way better pseudo-labels would act."
           + ("" if (prov := office31_runs("q*/*/*/seed*/metrics.json", root)).empty else " " + provenance(prov)), ""]
    for variant in VARIANTS:
        out += _variant_check(paper, runs, shares, variant_root(variant.overrides, root), variant, head)
    return out


def _variant_check(paper, runs: dict, shares: dict, root: Path, variant: Variant, head: list[str]) -> list[str]:
    """The diagnosis table and its readings for ``variant``'s DMP runs under ``root`` (DMP (No DS): ``runs``)."""
    changed = {k: v for k, v in _diagnosis_runs(root).items() if k[2] == "dmp"}
    changed.update({k: v for k, v in runs.items() if k[2] == "dmp_no_ds"})
    lines, v_shares = _pseudo_label_rows(paper, changed)
    if not v_shares:
        return []
    prov = office31_runs("q*/*/*/seed*/metrics.json", root)
    sets = " ".join(f"{k}={v}" for k, v in variant.overrides.items())
    return [f"**The pseudo-labels' quality with {variant.name}** ({variant.short}: "
            f"`python -m studies pseudo-labels --set {sets}`). {variant.question} The same diagnosis with DMP's "
            f"runs at {variant.short} (DMP (No DS) has no intra-class term: its runs are those above):", "",
            *head, *lines, "", " ".join(_pseudo_label_readings(v_shares)) + " "
            + _variant_reading(shares, v_shares, variant) + ("" if prov.empty else " " + provenance(prov)), ""]
