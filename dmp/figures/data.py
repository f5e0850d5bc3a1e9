"""The data behind each figure, as one pandas frame per figure (written as ``<name>.csv``; the plots are drawn from
it alone, :mod:`dmp.figures.plot`).

Every frame has a ``note`` column: empty where the row's runs are all there, else why a value is missing or rests
on fewer seeds than configured.  A run that is missing, unfinished or of another config never raises: its row
keeps NaN values (a gap in the plot) and a note.  Means and standard deviations are over seeds (sample std,
ddof=1, NaN below two seeds), as in the tables."""
from __future__ import annotations

import numpy as np
import pandas as pd

from dmp import methods
from dmp.figures.load import RunReader, rel
from dmp.figures.plan import FigurePlan


def _stats(values) -> dict:
    values = [float(v) for v in values if v is not None and np.isfinite(v)]
    if not values:
        return {"mean": np.nan, "std": np.nan, "n": 0}
    return {"mean": float(np.mean(values)), "std": float(np.std(values, ddof=1)) if len(values) > 1 else np.nan,
            "n": len(values)}


def _seed_note(n: int, expected: int) -> str:
    if n == 0:
        return f"no finished run (0 of {expected} seeds)"
    return f"{n} of {expected} seeds" if n < expected else ""


def _accuracy_rows(reader: RunReader, run, seeds, **columns) -> dict:
    found = reader.seeds(run, seeds)
    stats = _stats(m.get("accuracy") for m in found.values())
    return {**columns, **stats, "expected": len(seeds), "run": rel(run), "note": _seed_note(stats["n"], len(seeds))}


def _class_labels(plan: FigurePlan, dataset: str) -> list[str]:
    return [plan.suite.class_label(dataset, c) for c in plan.suite.class_names(dataset)]


# ---------------------------------------------------------------------------------------------------- hyper
def hyper(plan: FigurePlan, spec: dict, reader: RunReader) -> pd.DataFrame:
    """One row per (grid, task, lambda1, lambda2): accuracy over seeds; ``peak`` marks each task's best cell."""
    rows = [_accuracy_rows(reader, run, spec["seeds"], grid=i, dataset=panel["dataset"], setting=panel["setting"],
                           task=task, method=panel["method"], lambda1=float(l1), lambda2=float(l2))
            for i, panel, task, l1, l2, run in plan.hyper_points(spec)]
    frame = pd.DataFrame(rows)
    frame["peak"] = False
    for _, group in frame.groupby(["grid", "task"], sort=False):
        if group["mean"].notna().any():
            frame.loc[group["mean"].idxmax(), "peak"] = True
    return frame


# ---------------------------------------------------------------------------------------------------- k
def k(plan: FigurePlan, spec: dict, reader: RunReader) -> pd.DataFrame:
    """One row per (task, k), then per k the mean and the std (ddof=1) over the tasks' mean accuracies."""
    setting = spec.get("setting", "vanilla")
    rows = [_accuracy_rows(reader, plan.run(spec["dataset"], setting, t, spec["method"], spec["metric"], k=int(kk)),
                           spec["seeds"], task=t, k=int(kk))
            for t in spec["tasks"] for kk in spec["ks"]]
    frame = pd.DataFrame(rows)
    summary = []
    for kk, group in frame.groupby("k", sort=False):
        vals = group["mean"].dropna()
        note = "" if len(vals) == len(group) else f"{len(vals)} of {len(group)} tasks"
        summary.append({"task": "mean over tasks", "k": kk, "mean": vals.mean() if len(vals) else np.nan,
                        "n": len(vals), "expected": len(group), "note": note})
        summary.append({"task": "std over tasks", "k": kk, "mean": vals.std(ddof=1) if len(vals) > 1 else np.nan,
                        "n": len(vals), "expected": len(group), "note": note})
    return pd.concat([frame, pd.DataFrame(summary)], ignore_index=True)


# ---------------------------------------------------------------------------------------------------- d'
def dprime(plan: FigurePlan, spec: dict, reader: RunReader) -> pd.DataFrame:
    r"""Error indices :math:`e^G(d')`, :math:`e^{AG}(d')` (:func:`dmp.manifolds.error_index`) and the covariance
    eigenvalues of each domain against ``d'`` = 1 .. b_s - 1, for batches of ``b_s`` (the run's batch size) source
    and target features of the last manifold layer (features.npz), averaged over ``batches`` random batch pairs."""
    import torch

    from dmp.manifolds.error_index import covariance_spectrum, error_index

    run = plan.run(spec["dataset"], spec.get("setting", "vanilla"), spec["task"], spec["method"],
                   spec["metric"]).with_seed(spec["seed"])
    columns = ["d_prime", "e_G", "e_AG", "eig_source", "eig_target", "batch_size", "batches", "run", "note"]
    feats = reader.features(run)
    if feats is None:
        return pd.DataFrame([{"run": rel(run), "note": reader.notes.get(rel(run), "no features")}], columns=columns)
    metrics = reader.metrics(run)
    hs, ht = feats["source_features"].astype(np.float64), feats["target_features"].astype(np.float64)
    b = min(int(metrics["config"]["batch_size"]), len(hs), len(ht))
    note = "" if b == int(metrics["config"]["batch_size"]) else \
        f"only {b} saved samples per domain (batch size {metrics['config']['batch_size']})"
    d = hs.shape[1]
    if d < b:
        note = (note + "; " if note else "") + f"feature dimension {d} < batch size: d' up to {d - 1}"
    dims = list(range(1, min(b, d)))
    rng = np.random.default_rng(0)
    e = {"G": [], "AG": []}
    eig_s, eig_t = [], []
    for _ in range(int(spec["batches"])):
        bs = torch.from_numpy(hs[rng.choice(len(hs), b, replace=False)])
        bt = torch.from_numpy(ht[rng.choice(len(ht), b, replace=False)])
        for kind in e:
            e[kind].append(error_index(bs, bt, dims, kind).numpy())
        eig_s.append(covariance_spectrum(bs)[: len(dims)].numpy())
        eig_t.append(covariance_spectrum(bt)[: len(dims)].numpy())
    with np.errstate(invalid="ignore"):
        frame = pd.DataFrame({"d_prime": dims, "e_G": np.mean(e["G"], 0), "e_AG": np.mean(e["AG"], 0),
                              "eig_source": np.mean(eig_s, 0), "eig_target": np.mean(eig_t, 0)})
    frame["batch_size"], frame["batches"], frame["run"], frame["note"] = b, int(spec["batches"]), rel(run), note
    return frame[columns]


# ---------------------------------------------------------------------------------------------------- convergence
def convergence(plan: FigurePlan, spec: dict, reader: RunReader) -> pd.DataFrame:
    """Target accuracy (metrics.json ``accuracy_log``, measured every ``log_accuracy_every`` iterations for this
    plot only) and the objective L (log.csv ``loss``) against iterations and epochs, mean and std over seeds."""
    run = plan.run(spec["dataset"], spec.get("setting", "vanilla"), spec["task"], spec["method"], spec["metric"],
                   log_accuracy_every=int(spec["log_accuracy_every"]))
    found = reader.seeds(run, spec["seeds"])
    series = {"accuracy": [], "objective": []}
    per_epoch = None
    for seed, m in found.items():
        per_epoch = m.get("iterations_per_epoch") or per_epoch
        if not m.get("accuracy_log"):
            reader.notes[rel(run.with_seed(seed))] = "finished, but no accuracy_log (log_accuracy_every = 0)"
        for r in m.get("accuracy_log") or []:
            series["accuracy"].append((seed, int(r["iteration"]), float(r["accuracy"])))
        for r in reader.log(run.with_seed(seed)) or []:
            series["objective"].append((seed, int(r["iteration"]), float(r["loss"])))
    rows = []
    for name, values in series.items():
        if not values:
            rows.append({"series": name, "run": rel(run), "expected": len(spec["seeds"]),
                         "note": "; ".join(f"{p}: {w}" for p, w in sorted(reader.notes.items())) or "no data"})
            continue
        df = pd.DataFrame(values, columns=["seed", "iteration", "value"])
        for it, group in df.groupby("iteration"):
            stats = _stats(group["value"])
            rows.append({"series": name, "iteration": it, "epoch": it / per_epoch if per_epoch else np.nan,
                         **stats, "expected": len(spec["seeds"]), "run": rel(run),
                         "note": _seed_note(stats["n"], len(spec["seeds"]))})
    return pd.DataFrame(rows, columns=["series", "iteration", "epoch", "mean", "std", "n", "expected", "run",
                                       "note"])


# ---------------------------------------------------------------------------------------------------- t-SNE
def _per_class(labels: np.ndarray, per_class: int) -> np.ndarray:
    """The first ``per_class`` indices of each class (the saved samples are already a random choice)."""
    return np.sort(np.concatenate([np.flatnonzero(labels == c)[:per_class] for c in np.unique(labels)])) \
        if len(labels) else np.zeros(0, np.int64)


def tsne(plan: FigurePlan, spec: dict, reader: RunReader) -> pd.DataFrame:
    """2-D t-SNE (:func:`dmp.figures.embed.tsne`) of each method's source and target features (features.npz,
    ``per_class`` samples per class and domain), one embedding per method; with domain, class and whether the
    model classified the sample correctly."""
    from dmp.figures.embed import tsne as embed

    labels = _class_labels(plan, spec["dataset"])
    columns = ["method", "domain", "class", "correct", "x", "y", "run", "note"]
    rows = []
    for method in spec["methods"]:
        run = plan.run(spec["dataset"], spec.get("setting", "vanilla"), spec["task"], method,
                       spec["metric"]).with_seed(spec["seed"])
        feats = reader.features(run)
        if feats is None:
            rows.append(pd.DataFrame([{"method": method, "run": rel(run), "note": reader.notes.get(rel(run))}],
                                     columns=columns))
            continue
        parts = []
        for domain in ("source", "target"):
            idx = _per_class(feats[f"{domain}_labels"], int(spec["per_class"]))
            parts.append((domain, feats[f"{domain}_features"][idx], feats[f"{domain}_labels"][idx],
                          feats[f"{domain}_pred"][idx]))
        xy = embed(np.concatenate([p[1] for p in parts]))
        frame = pd.DataFrame({"method": method,
                              "domain": np.concatenate([[d] * len(p) for d, p, _, _ in parts]),
                              "class": [labels[i] for i in np.concatenate([p[2] for p in parts])],
                              "correct": pd.array(np.concatenate([p[2] == p[3] for p in parts]), dtype="boolean"),
                              "x": xy[:, 0], "y": xy[:, 1], "run": rel(run), "note": ""})
        rows.append(frame)
    return pd.concat(rows, ignore_index=True)[columns]


def interpolation_tsne(plan: FigurePlan, spec: dict, reader: RunReader) -> pd.DataFrame:
    """2-D t-SNE of the interpolated target features ``alpha h_i + (1 - alpha) h_j`` (same-class pairs, saved by the
    run) for each alpha, one embedding per alpha, with the class and whether the classifier got it right."""
    from dmp.figures.embed import tsne as embed

    labels = _class_labels(plan, spec["dataset"])
    columns = ["alpha", "class", "correct", "x", "y", "run", "note"]
    run = plan.run(spec["dataset"], "vanilla", spec["task"], spec["method"], spec["metric"]).with_seed(spec["seed"])
    feats = reader.features(run)
    rows = []
    for alpha in spec["alphas"]:
        if feats is None:
            rows.append(pd.DataFrame([{"alpha": alpha, "run": rel(run), "note": reader.notes.get(rel(run))}],
                                     columns=columns))
            continue
        sel = np.flatnonzero(np.isclose(feats["interp_alpha"], float(alpha)))
        sel = sel[_per_class(feats["interp_labels"][sel], int(spec["per_class"]))]
        if len(sel) < 3:
            rows.append(pd.DataFrame([{"alpha": alpha, "run": rel(run), "note": "too few saved interpolations"}],
                                     columns=columns))
            continue
        xy = embed(feats["interp_features"][sel])
        y, pred = feats["interp_labels"][sel], feats["interp_pred"][sel]
        rows.append(pd.DataFrame({"alpha": alpha, "class": [labels[i] for i in y],
                                  "correct": pd.array(y == pred, dtype="boolean"),
                                  "x": xy[:, 0], "y": xy[:, 1], "run": rel(run), "note": ""}))
    return pd.concat(rows, ignore_index=True)[columns]


# ---------------------------------------------------------------------------------------------------- confusion
def confusion(plan: FigurePlan, spec: dict, reader: RunReader) -> pd.DataFrame:
    """Target confusion matrices of each panel (setting, method): rows normalised to % of the true class, mean over
    seeds; only true classes present in the target (the partial target has fewer)."""
    labels = _class_labels(plan, spec["dataset"])
    rows = []
    for i, panel in enumerate(spec["panels"]):
        run = plan.run(spec["dataset"], panel["setting"], spec["task"], panel["method"], spec["metric"])
        found = reader.seeds(run, spec["seeds"])
        mats = []
        for m in found.values():
            cm = np.asarray(m["confusion_matrix"], dtype=float)
            with np.errstate(invalid="ignore", divide="ignore"):
                mats.append(100.0 * cm / cm.sum(1, keepdims=True))
        base = {"panel": i, "setting": panel["setting"], "method": panel["method"], "expected": len(spec["seeds"]),
                "run": rel(run)}
        if not mats:
            rows.append({**base, "n": 0, "note": _seed_note(0, len(spec["seeds"]))})
            continue
        mean = np.mean(mats, 0)
        note = _seed_note(len(mats), len(spec["seeds"]))
        for t in range(len(labels)):
            if np.isnan(mean[t]).all():
                continue  # class absent from the target
            for p in range(len(labels)):
                rows.append({**base, "true": labels[t], "pred": labels[p], "value": mean[t, p], "n": len(mats),
                             "note": note})
    return pd.DataFrame(rows, columns=["panel", "setting", "method", "true", "pred", "value", "n", "expected", "run",
                                       "note"])


# ---------------------------------------------------------------------------------------------------- weights
def weights(plan: FigurePlan, spec: dict, reader: RunReader) -> pd.DataFrame:
    r"""Partial class weights :math:`\hat w = \pi` (Eq. ClassWeight) per class, mean over seeds, with whether the
    class is one of the target's (shared) classes.  DMP runs: the weights the run trained with (metrics.json
    ``class_weights``, last refresh); source-only runs compute none, so theirs are Eq. ClassWeight applied to the
    model's mean target prediction (``target_mean_prediction``), as the paper's "Weights of ResNet-50"."""
    ds = plan.suite.spec(spec["dataset"])
    labels = _class_labels(plan, spec["dataset"])
    shared = set(ds.partial_classes)
    rows = []
    for method in spec["methods"]:
        run = plan.run(spec["dataset"], "partial", spec["task"], method, spec["metric"])
        found = reader.seeds(run, spec["seeds"])
        per_seed, source = [], ""
        for m in found.values():
            # a method without the mean target prediction has uniform class weights: plot what it predicts
            if not methods.get(m["config"]["method"]).needs(m["config"]).mean_prediction \
                    or not m.get("class_weights"):
                w = np.clip(np.asarray(m["target_mean_prediction"], float), 0, None)
                per_seed.append(w / max(w.sum(), 1e-12))
                source = "target_mean_prediction"
            else:
                per_seed.append(np.asarray(m["class_weights"], float))
                source = "class_weights"
        note = _seed_note(len(per_seed), len(spec["seeds"]))
        for c, label in enumerate(labels):
            stats = _stats([w[c] for w in per_seed])
            rows.append({"method": method, "class": label, "shared": c in shared, **stats,
                         "expected": len(spec["seeds"]), "weights_from": source, "run": rel(run), "note": note})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------------- shared
def shared_classes(plan: FigurePlan, spec: dict, reader: RunReader) -> pd.DataFrame:
    """Accuracy against the number of target classes (target split ``first<N>``: the first N classes in alphabetical
    order; the source keeps every class), per task and method."""
    rows = [_accuracy_rows(reader, plan.run(spec["dataset"], "partial", t, m, spec["metric"], target_split=split),
                           spec["seeds"], task=t, method=m, target_split=split,
                           n_classes=plan.n_classes(spec["dataset"], split))
            for t in spec["tasks"] for m in spec["methods"] for split in spec["target_splits"]]
    return pd.DataFrame(rows)


BUILDERS = {"hyper": hyper, "k": k, "dprime": dprime, "convergence": convergence, "tsne": tsne,
            "confusion": confusion, "weights": weights, "shared_classes": shared_classes,
            "interpolation_tsne": interpolation_tsne}
