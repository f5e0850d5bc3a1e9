"""The figures drawn with matplotlib from their data frames alone (:mod:`dmp.figures.data`): what the CSV holds is
what the plot shows.  Missing values are gaps (grey cells, broken lines, an empty panel) and every note of the
frame is printed under the figure."""
from __future__ import annotations

import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

GAP = "0.85"  # grey of a missing cell


def method_label(method: str) -> str:
    from dmp import methods  # the registry's label (dmp/methods/)
    return methods.label(method)


def task_label(task: str) -> str:
    return task.replace("->", "→")


def seeds_text(spec: dict) -> str:
    """``seed 0`` for a figure drawn from one run, ``mean over seeds 0, 1, 2`` otherwise."""
    seeds = [spec["seed"]] if "seed" in spec else list(spec.get("seeds", []))
    return f"seed {seeds[0]}" if len(seeds) == 1 else "mean over seeds " + ", ".join(map(str, seeds))


def headline(fig, what: str, spec: dict, setting: str | None = None, methods=(), tasks=None) -> None:
    """The figure's title, so that it reads without its caption: what it shows, then the dataset and task(s), the
    setting, the method(s) and the seeds (the parts a panel title already names are left out by the caller)."""
    tasks = tasks if tasks is not None else (spec.get("tasks") or [spec["task"]] if "dataset" in spec else [])
    parts = [f"{spec['dataset']} {', '.join(task_label(t) for t in tasks)}"] if "dataset" in spec else []
    parts += [setting] if setting else []
    parts += [", ".join(method_label(m) for m in methods)] if methods else []
    fig.suptitle(f"{what}: " + "; ".join(parts + [seeds_text(spec)]), fontsize=9)


def ink(rgba) -> str:
    """Black or white, whichever reads on a cell of colour ``rgba`` (relative luminance, ITU-R BT.709)."""
    r, g, b = rgba[:3]
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.45 else "white"


def legend_below(ax, handles, labels, ncol: int = 2) -> None:
    """The legend under the axes, outside the data."""
    ax.legend(handles, labels, fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=ncol,
              frameon=False)


def _grid(n: int, width: float = 3.6, height: float = 3.2, rows: int = 1):
    cols = max(1, int(np.ceil(n / rows)))
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    return fig, axes


def _empty(ax, text="no data"):
    ax.set_facecolor(GAP)
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


def add_notes(fig, notes: list[str], limit: int = 8) -> None:
    """Print ``notes`` (deduplicated) under the figure: which values are missing and why."""
    notes = list(dict.fromkeys(n for n in notes if n))
    if not notes:
        return
    lines = [textwrap.shorten(n, 160) for n in notes[:limit]]
    if len(notes) > limit:
        lines.append(f"... and {len(notes) - limit} more (see the CSV's note column)")
    fig.text(0.01, -0.01, "Gaps:\n" + "\n".join(lines), ha="left", va="top", fontsize=6, color="0.25")


def _fmt(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def frame_notes(frame: pd.DataFrame, *columns) -> list[str]:
    """Notes of the frame, prefixed by the given columns of their row."""
    out = []
    for _, row in frame[frame["note"].fillna("").astype(str) != ""].iterrows():
        where = " ".join(f"{c}={_fmt(row[c])}" for c in columns if c in row and pd.notna(row[c]))
        out.append(f"{where}: {row['note']}" if where else str(row["note"]))
    return out


# ---------------------------------------------------------------------------------------------------- hyper
def hyper(frame: pd.DataFrame, spec: dict):
    panels = list(frame.groupby(["grid", "task"], sort=False))
    fig, axes = _grid(len(panels), 3.9, 3.4)
    for ax, ((grid, task), group) in zip(axes.flat, panels):
        l1 = sorted(group["lambda1"].unique())
        l2 = sorted(group["lambda2"].unique())
        values = np.full((len(l1), len(l2)), np.nan)
        for _, row in group.iterrows():
            values[l1.index(row["lambda1"]), l2.index(row["lambda2"])] = row["mean"]
        cmap = matplotlib.colormaps["viridis"].with_extremes(bad=GAP)
        im = ax.imshow(np.ma.masked_invalid(values), origin="lower", cmap=cmap, aspect="auto")
        for i in range(len(l1)):
            for j in range(len(l2)):
                missing = np.isnan(values[i, j])
                ax.text(j, i - 0.15 if len(l1) < 4 else i, "–" if missing else f"{values[i, j]:.1f}", ha="center",
                        va="center", fontsize=6, color="black" if missing else ink(cmap(im.norm(values[i, j]))))
        peak = group[group["peak"]]
        if len(peak):
            row = peak.iloc[0]
            i, j = l1.index(row["lambda1"]), l2.index(row["lambda2"])
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
            ax.annotate("", xy=(j, i + 0.12), xytext=(j, i + 0.45), arrowprops=dict(arrowstyle="-|>", color="red",
                                                                                     lw=1.5))
        ax.set_xticks(range(len(l2)), [f"{v:g}" for v in l2], fontsize=7, rotation=45)
        ax.set_yticks(range(len(l1)), [f"{v:g}" for v in l1], fontsize=7)
        ax.set_xlabel("λ2")
        ax.set_ylabel("λ1")
        first = group.iloc[0]
        ax.set_title(f"{task_label(task)} ({first['dataset']}, {first['setting']}, {method_label(first['method'])})",
                     fontsize=8)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="accuracy (%)")
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    headline(fig, "Target accuracy (%) over λ1 × λ2, peak framed", spec)
    fig.tight_layout()
    add_notes(fig, frame_notes(frame, "task", "lambda1", "lambda2"))
    return fig


# ---------------------------------------------------------------------------------------------------- k
def k(frame: pd.DataFrame, spec: dict):
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    tasks = frame[~frame["task"].isin(["mean over tasks", "std over tasks"])]
    for task, group in tasks.groupby("task", sort=False):
        ax.plot(group["k"], group["mean"], marker="o", ms=3, lw=1, label=task_label(task))
    mean = frame[frame["task"] == "mean over tasks"]
    ax.plot(mean["k"], mean["mean"], ls="--", color="c", lw=2, label="mean over tasks")
    ax.set_xlabel("k (Top-k truncation of the intra-class loss)")
    ax.set_ylabel("accuracy (%)")
    ax.set_xticks(sorted(frame["k"].dropna().unique()))
    std = frame[frame["task"] == "std over tasks"]
    ax2 = ax.twinx()
    ax2.plot(std["k"], std["mean"], ls="--", color="brown", lw=2, label="std over tasks")
    ax2.set_ylabel("std over tasks (%)", color="brown")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    legend_below(ax, lines[0] + lines2[0], lines[1] + lines2[1], ncol=4)
    headline(fig, "Accuracy against k", spec, spec.get("setting", "vanilla"), [spec["method"]])
    fig.tight_layout()
    add_notes(fig, frame_notes(tasks, "task", "k"))
    return fig


# ---------------------------------------------------------------------------------------------------- d'
def dprime(frame: pd.DataFrame, spec: dict):
    fig, axes = _grid(2, 4.2, 3.4)
    valid = frame.dropna(subset=["d_prime"])
    for ax, (kind, label) in zip(axes.flat, (("e_G", "$e^G(d')$"), ("e_AG", "$e^{AG}(d')$"))):
        if valid.empty:
            _empty(ax, "no features")
            continue
        b = int(valid["batch_size"].iloc[0])
        ax.plot(valid["d_prime"], valid[kind], color="tab:red", lw=1.5, label=label)
        ref = valid.loc[valid["d_prime"] == b - 1, kind]
        if len(ref) and np.isfinite(ref.iloc[0]):
            ax.axhline(ref.iloc[0], ls="--", color="tab:blue", lw=1,
                       label=f"{label[:-5]}(b_s - 1)$, $b_s - 1 = {b - 1}$")
        ax.set_yscale("log")
        ax.set_xlabel("d'")
        ax.set_ylabel(f"error index {label}")
        ax2 = ax.twinx()
        ax2.plot(valid["d_prime"], valid["eig_source"], color="0.3", lw=1, ls=":", label="eigenvalues (source)")
        ax2.plot(valid["d_prime"], valid["eig_target"], color="0.6", lw=1, ls="-.", label="eigenvalues (target)")
        ax2.set_yscale("log")
        ax2.set_ylabel("eigenvalue $\\lambda_{d'}$")
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        legend_below(ax, h1 + h2, l1 + l2)
        ax.set_title(f"{label}, batch size $b_s$ = {b}", fontsize=8)
    headline(fig, "Error index and eigenvalues against d'", spec, spec.get("setting", "vanilla"), [spec["method"]])
    fig.tight_layout()
    add_notes(fig, frame_notes(frame.drop_duplicates("note"), "run"))
    return fig


# ---------------------------------------------------------------------------------------------------- convergence
def convergence(frame: pd.DataFrame, spec: dict):
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    acc = frame[(frame["series"] == "accuracy") & frame["mean"].notna()]
    obj = frame[(frame["series"] == "objective") & frame["mean"].notna()]
    x = "epoch" if frame["epoch"].notna().any() else "iteration"
    if len(acc):
        ax.plot(acc[x], acc["mean"], color="tab:blue", marker="o", ms=2, lw=1.5, label="target accuracy")
        ax.fill_between(acc[x], acc["mean"] - acc["std"].fillna(0), acc["mean"] + acc["std"].fillna(0),
                        color="tab:blue", alpha=0.2)
    ax.set_xlabel(x)
    ax.set_ylabel("target accuracy (%)", color="tab:blue")
    ax2 = ax.twinx()
    if len(obj):
        ax2.plot(obj[x], obj["mean"], color="tab:orange", lw=1, label="objective L")
    ax2.set_ylabel("objective L (training batches)", color="tab:orange")
    if not len(acc) and not len(obj):
        _empty(ax)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    if h1 or h2:
        legend_below(ax, h1 + h2, l1 + l2)
    headline(fig, "Convergence", spec, spec.get("setting", "vanilla"), [spec["method"]])
    fig.tight_layout()
    add_notes(fig, frame_notes(frame.drop_duplicates("note"), "series"))
    return fig


# ---------------------------------------------------------------------------------------------------- t-SNE
def _class_colors(classes):
    cmap = matplotlib.colormaps["tab10" if len(classes) <= 10 else "tab20"]
    return {c: cmap(i % cmap.N) for i, c in enumerate(classes)}


def tsne(frame: pd.DataFrame, spec: dict, class_order=None):
    methods = list(dict.fromkeys(frame["method"]))
    fig, axes = _grid(3 * len(methods), 3.2, 3.0, rows=3)
    classes = class_order or sorted(frame["class"].dropna().unique())
    colors = _class_colors(classes)
    for col, method in enumerate(methods):
        data = frame[(frame["method"] == method) & frame["x"].notna()]
        panels = [("by domain", data, "domain"), ("by class", data, "class"),
                  ("target, by class", data[data["domain"] == "target"], "class")]
        for row, (title, sub, by) in enumerate(panels):
            ax = axes[row, col]
            if sub.empty:
                _empty(ax, "no features")
            elif by == "domain":
                for domain, color in (("source", "tab:blue"), ("target", "tab:red")):
                    part = sub[sub["domain"] == domain]
                    ax.scatter(part["x"], part["y"], s=3, color=color, label=domain, alpha=0.7, linewidths=0)
                ax.legend(fontsize=6, markerscale=3, loc="best")
            else:
                for c in classes:
                    part = sub[sub["class"] == c]
                    ax.scatter(part["x"], part["y"], s=3, color=colors[c], label=c, alpha=0.8, linewidths=0)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{method_label(method)}: {title}", fontsize=8)
    handles = [plt.Line2D([], [], ls="", marker="o", ms=4, color=colors[c]) for c in classes]
    fig.legend(handles, classes, fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5))
    headline(fig, "t-SNE of the last manifold layer", spec, spec.get("setting", "vanilla"))
    fig.tight_layout()
    add_notes(fig, frame_notes(frame, "method"))
    return fig


def interpolation_tsne(frame: pd.DataFrame, spec: dict, class_order=None):
    alphas = list(dict.fromkeys(frame["alpha"].astype(str)))
    fig, axes = _grid(len(alphas), 3.2, 3.2)
    classes = class_order or sorted(frame["class"].dropna().unique())
    colors = _class_colors(classes)
    for ax, alpha in zip(axes.flat, alphas):
        data = frame[(frame["alpha"].astype(str) == alpha) & frame["x"].notna()]
        if data.empty:
            _empty(ax, "no interpolations")
        for c in classes:
            part = data[data["class"] == c]
            ok = part["correct"].astype(bool)
            ax.scatter(part.loc[ok, "x"], part.loc[ok, "y"], s=8, marker="o", facecolors="none",
                       edgecolors=[colors[c]], linewidths=0.6)
            ax.scatter(part.loc[~ok, "x"], part.loc[~ok, "y"], s=8, marker="x", color=colors[c], linewidths=0.6)
        acc = 100.0 * data["correct"].astype(bool).mean() if len(data) else float("nan")
        ax.set_title(f"α = {alpha}" + (f" ({acc:.1f}% correct)" if len(data) else ""), fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    handles = [plt.Line2D([], [], ls="", marker="o", ms=4, color=colors[c]) for c in classes]
    handles += [plt.Line2D([], [], ls="", marker="o", mfc="none", color="k"),
                plt.Line2D([], [], ls="", marker="x", color="k")]
    fig.legend(handles, list(classes) + ["correct", "misclassified"], fontsize=6, loc="center left",
               bbox_to_anchor=(1.0, 0.5))
    headline(fig, "t-SNE of interpolated target features", spec, "vanilla", [spec["method"]])
    fig.tight_layout()
    add_notes(fig, frame_notes(frame, "alpha"))
    return fig


# ---------------------------------------------------------------------------------------------------- confusion
def confusion(frame: pd.DataFrame, spec: dict, class_order=None):
    panels = list(frame.groupby("panel", sort=True))
    fig, axes = _grid(len(panels), 3.6, 3.4)
    for ax, (_, group) in zip(axes.flat, panels):
        first = group.iloc[0]
        title = f"{method_label(first['method'])} ({first['setting']})"
        data = group.dropna(subset=["value"])
        if data.empty:
            _empty(ax, "no finished run")
            ax.set_title(title, fontsize=8)
            continue
        true = [c for c in class_order if c in set(data["true"])] if class_order else list(dict.fromkeys(data["true"]))
        pred = class_order or list(dict.fromkeys(data["pred"]))
        mat = data.pivot(index="true", columns="pred", values="value").reindex(index=true, columns=pred)
        im = ax.imshow(mat.to_numpy(), cmap="Blues", vmin=0, vmax=100, aspect="auto")
        bar = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
        bar.set_label("% of the true class", fontsize=7)
        bar.ax.tick_params(labelsize=6)
        ax.set_xticks(range(len(pred)), pred, rotation=90, fontsize=6)
        ax.set_yticks(range(len(true)), true, fontsize=6)
        ax.set_xlabel("predicted", fontsize=7)
        ax.set_ylabel("true", fontsize=7)
        ax.set_title(title, fontsize=8)
    headline(fig, "Target confusion matrices", spec)
    fig.tight_layout()
    add_notes(fig, frame_notes(frame.drop_duplicates(["panel", "note"]), "method", "setting"))
    return fig


# ---------------------------------------------------------------------------------------------------- weights
def weights(frame: pd.DataFrame, spec: dict):
    methods = list(dict.fromkeys(frame["method"]))
    fig, axes = _grid(len(methods), 4.4, 3.2)
    for ax, method in zip(axes.flat, methods):
        data = frame[frame["method"] == method]
        x = np.arange(len(data))
        ax.set_title(f"Weights of {method_label(method)}", fontsize=8)
        if data["mean"].isna().all():
            _empty(ax, "no finished run")
            continue
        colors = ["tab:blue" if s else "tab:orange" for s in data["shared"].astype(bool)]
        mean, std = data["mean"].fillna(0).to_numpy(), data["std"].fillna(0).to_numpy()
        # a weight is >= 0: the bar's std is drawn down to 0 at most (asymmetric), never below
        ax.bar(x, mean, yerr=[np.minimum(std, mean), std], color=colors, capsize=1.5)
        ax.set_xticks(x, data["class"], rotation=90, fontsize=6)
        ax.set_ylabel("class weight (± std, clipped at 0)", fontsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color="tab:blue"), plt.Rectangle((0, 0), 1, 1, color="tab:orange")]
    fig.legend(handles, ["shared classes\n(in the target)", "outlier classes"], fontsize=7, loc="center left",
               bbox_to_anchor=(1.0, 0.5))
    headline(fig, "Partial class weights", spec, "partial")
    fig.tight_layout()
    add_notes(fig, frame_notes(frame.drop_duplicates(["method", "note"]), "method"))
    return fig


# ---------------------------------------------------------------------------------------------------- shared
def shared_classes(frame: pd.DataFrame, spec: dict):
    tasks = list(dict.fromkeys(frame["task"]))
    fig, axes = _grid(len(tasks), 4.0, 3.2)
    for ax, task in zip(axes.flat, tasks):
        for method, group in frame[frame["task"] == task].groupby("method", sort=False):
            group = group.sort_values("n_classes")
            line = ax.plot(group["n_classes"], group["mean"], marker="o", ms=3, label=method_label(method))[0]
            ax.fill_between(group["n_classes"], group["mean"] - group["std"].fillna(0),
                            group["mean"] + group["std"].fillna(0), color=line.get_color(), alpha=0.15)
        ax.set_xlabel("number of target classes")
        ax.set_ylabel("accuracy (%)")
        ax.set_title(task_label(task), fontsize=8)
        ax.legend(fontsize=7)
    headline(fig, "Accuracy against the number of target classes", spec, "partial")
    fig.tight_layout()
    add_notes(fig, frame_notes(frame, "task", "method", "target_split"))
    return fig


PLOTS = {"hyper": hyper, "k": k, "dprime": dprime, "convergence": convergence, "tsne": tsne,
         "confusion": confusion, "weights": weights, "shared_classes": shared_classes,
         "interpolation_tsne": interpolation_tsne}
