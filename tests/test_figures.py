"""The figures: built from stored fixture runs (tests/data/figures, some missing on purpose) and the CSV behind each
compared with a stored reference (tests/data/reference/figures), as the tables are; missing runs are gaps with a
note, never a crash; which runs each figure needs (shared with the tables where they coincide, variant folders
otherwise) and the paper suite's job count; the trainer's accuracy log and features file; the report of tables and
figures rendered in headless Chromium (skipped without Chromium or Playwright)."""
from __future__ import annotations

import copy
import dataclasses
import importlib.util
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dmp.figures.cli import build
from dmp.figures.plan import FIGURES, FigurePlan
from dmp.suite import Run, Suite, variant_name, variant_values
from tests import hang_guard

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
FIXTURE = DATA / "figures"
REFERENCE = DATA / "reference" / "figures"
CONFIG = yaml.safe_load((FIXTURE / "figures_config.yaml").read_text())
TSNE_COLUMNS = ("x", "y")  # t-SNE coordinates: compared to a tolerance (an iterative optimisation)


def load(name: str) -> dict:
    return yaml.safe_load((ROOT / "config" / name).read_text())


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("figures")
    frames = {name: build(CONFIG, name, results=str(FIXTURE), out=str(out))[1] for name in FIGURES}
    return out / "figures", frames


def read_csv(path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False, dtype=str)


# ----------------------------------------------------------------------------- against the stored reference
@pytest.mark.parametrize("name", FIGURES)
def test_figure_data_matches_the_stored_reference(built, name):
    folder, _ = built
    ours, ref = read_csv(folder / f"{name}.csv"), read_csv(REFERENCE / f"{name}.csv")
    hint = (f"{name}.csv differs from tests/data/reference/figures/{name}.csv; if the change is intended, rebuild the "
            f"reference (see tests/data/figures/figures_config.yaml) and review the diff")
    assert list(ours.columns) == list(ref.columns), hint
    exact = [c for c in ours.columns if c not in TSNE_COLUMNS]
    pd.testing.assert_frame_equal(ours[exact], ref[exact], obj=hint)
    for col in set(TSNE_COLUMNS) & set(ours.columns):
        a = pd.to_numeric(ours[col], errors="coerce").to_numpy()
        b = pd.to_numeric(ref[col], errors="coerce").to_numpy()
        assert np.allclose(a, b, rtol=1e-3, atol=1e-3 * np.nanmax(np.abs(b)), equal_nan=True), hint


@pytest.mark.parametrize("name", FIGURES)
def test_every_figure_writes_pdf_png_and_csv(built, name):
    folder, _ = built
    assert (folder / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"
    assert (folder / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (folder / f"{name}.csv").stat().st_size > 0


# ----------------------------------------------------------------------------- values and gaps
def test_hyper_grid_values_peak_and_gaps(built):
    _, frames = built
    frame = frames["hyper"].set_index(["task", "lambda1", "lambda2"])
    missing = frame.loc[("A->W", 50.0, 10.0)]
    assert missing["n"] == 0 and np.isnan(missing["mean"]) and "no finished run" in missing["note"]
    half = frame.loc[("I->P", 1.0, 1000.0)]
    assert half["n"] == 1 and half["note"] == "1 of 2 seeds"
    # the preset point (10, 5000) is the vanilla table's run, read from its folder
    preset = frame.loc[("I->P", 10.0, 5000.0)]
    assert preset["run"] == "runs/imageclef/vanilla/I-P/dmp/G/full-full/seed*"
    for task, group in frames["hyper"].groupby("task"):
        assert group["peak"].sum() == 1
        assert group.loc[group["peak"], "mean"].iloc[0] == group["mean"].max()


def test_k_summary_rows_are_mean_and_std_over_tasks(built):
    _, frames = built
    frame = frames["k"]
    tasks = frame[~frame["task"].str.contains("over tasks")]
    unfinished = tasks[(tasks["task"] == "P->I") & (tasks["k"] == 3)].iloc[0]
    assert unfinished["n"] == 0 and "no finished run" in unfinished["note"]  # status: running counts as missing
    for k, group in tasks.groupby("k"):
        vals = group["mean"].dropna()
        mean = frame[(frame["task"] == "mean over tasks") & (frame["k"] == k)].iloc[0]
        std = frame[(frame["task"] == "std over tasks") & (frame["k"] == k)].iloc[0]
        assert mean["mean"] == pytest.approx(vals.mean())
        assert (np.isnan(std["mean"]) and len(vals) < 2) or std["mean"] == pytest.approx(vals.std(ddof=1))


def test_dprime_error_indices_and_eigenvalues(built):
    _, frames = built
    frame = frames["dprime"]
    assert list(frame["d_prime"]) == list(range(1, 12))  # batch size 12 in the fixture: d' = 1 .. b_s - 1
    assert (frame["e_AG"] > 0).all() and (frame["e_G"] > 0).all()
    assert (np.diff(frame["eig_source"]) <= 1e-12).all()  # eigenvalues in descending order


def test_convergence_has_accuracy_and_objective_against_epochs(built):
    _, frames = built
    frame = frames["convergence"]
    acc = frame[frame["series"] == "accuracy"]
    assert list(acc["iteration"]) == list(range(0, 101, 20)) and (acc["n"] == 2).all()
    assert acc["epoch"].iloc[-1] == pytest.approx(100 / 25)
    assert len(frame[frame["series"] == "objective"]) == 10


def test_missing_runs_and_features_are_gaps_with_a_note(built):
    _, frames = built
    tsne = frames["tsne"]
    gap = tsne[tsne["method"] == "source_only"]
    assert len(gap) == 1 and gap["x"].isna().all() and "no features.npz" in gap["note"].iloc[0]
    dmp = tsne[tsne["method"] == "dmp"]
    assert set(dmp["domain"]) == {"source", "target"} and dmp.groupby(["domain", "class"]).size().max() == 6
    confusion = frames["confusion"]
    gap = confusion[(confusion["setting"] == "partial") & (confusion["method"] == "source_only")]
    assert len(gap) == 1 and gap["value"].isna().all() and gap["note"].iloc[0].startswith("no finished run")
    partial_dmp = confusion[(confusion["setting"] == "partial") & (confusion["method"] == "dmp")]
    assert partial_dmp["true"].nunique() == 6 and partial_dmp["pred"].nunique() == 12  # VisDA R6: 6 true classes
    rows = partial_dmp.groupby("true")["value"].sum()
    assert np.allclose(rows, 100.0)


def test_weights_mark_the_shared_classes(built):
    _, frames = built
    frame = frames["weights"]
    dmp = frame[frame["method"] == "dmp"]
    assert list(dmp["shared"]) == [True] * 6 + [False] * 6  # VisDA S->R6: the first 6 classes
    assert dmp["mean"].sum() == pytest.approx(1.0, abs=1e-3)
    assert (dmp["weights_from"] == "class_weights").all()


def test_shared_classes_counts_target_classes(built):
    _, frames = built
    frame = frames["shared_classes"]
    assert sorted(frame["n_classes"].unique()) == [10, 20, 31]
    one = frame[(frame["method"] == "dmp") & (frame["target_split"] == "first20")].iloc[0]
    assert one["n"] == 1 and one["note"] == "1 of 2 seeds"


def test_interpolation_tsne_has_one_panel_per_alpha_of_the_table(built):
    _, frames = built
    frame = frames["interpolation_tsne"]
    assert list(dict.fromkeys(frame["alpha"].astype(str))) == CONFIG["tables"]["interpolation"]["alphas"]
    assert frame["x"].notna().all() and frame.groupby(["alpha", "class"]).size().max() == 4


# ----------------------------------------------------------------------------- readable without the caption
def _draw(built, name):
    """The figure drawn again from its built frame (the CLI's arguments), rendered so that extents are final."""
    from dmp.figures import plot

    _, frames = built
    plan = FigurePlan(CONFIG)
    spec = plan.spec(name)
    kwargs = {}
    if name in ("tsne", "interpolation_tsne", "confusion"):
        kwargs["class_order"] = [plan.suite.class_label(spec["dataset"], c)
                                 for c in plan.suite.class_names(spec["dataset"])]
    fig = plot.PLOTS[name](frames[name], spec, **kwargs)
    fig.canvas.draw()
    return fig


@pytest.mark.parametrize("name, words", [
    ("hyper", ["λ1 × λ2", "mean over seeds 0, 1"]),
    ("k", ["imageclef I→P, P→I", "vanilla", "DMP", "mean over seeds 0, 1"]),
    ("dprime", ["imageclef I→P", "vanilla", "DMP", "seed 0"]),
    ("convergence", ["office31 A→W", "vanilla", "DMP", "mean over seeds 0, 1"]),
    ("tsne", ["visda2017 S→R", "vanilla", "seed 0"]),
    ("confusion", ["visda2017 S→R", "mean over seeds 0, 1"]),
    ("weights", ["visda2017 S→R", "partial", "mean over seeds 0, 1"]),
    ("shared_classes", ["office31 A→W", "partial", "mean over seeds 0, 1"]),
    ("interpolation_tsne", ["visda2017 S→R", "vanilla", "DMP", "seed 0"]),
])
def test_titles_name_task_setting_method_and_seeds(built, name, words):
    """The figure's title with the panel titles name what the caption would: task, setting, method, seeds."""
    import matplotlib.pyplot as plt

    fig = _draw(built, name)
    text = " | ".join([fig._suptitle.get_text()] + [ax.get_title() for ax in fig.axes])
    plt.close(fig)
    assert [w for w in words if w not in text] == [], text
    if name in ("hyper", "confusion", "tsne", "weights"):  # the method of each panel in its own title
        assert "DMP" in text and ("Source only" in text or name == "hyper")


def test_confusion_matrices_have_a_colour_bar(built):
    import matplotlib.pyplot as plt

    fig = _draw(built, "confusion")
    bars = [ax for ax in fig.axes if ax.get_ylabel() == "% of the true class"]
    drawn = [ax for ax in fig.axes if ax.images]
    assert len(drawn) == 3 and len(bars) == len(drawn)  # one panel is a gap (no finished run)
    plt.close(fig)


def test_hyper_annotations_contrast_with_their_cell(built):
    """Dark text on light cells (viridis' yellow peak), light text on dark ones: by the cell colour's luminance."""
    import matplotlib.pyplot as plt

    fig = _draw(built, "hyper")
    colours = []
    for ax in fig.axes:
        if not ax.images:
            continue
        image = ax.images[0]
        values = image.get_array()
        for t in ax.texts:
            if t.get_text() in ("–", ""):
                continue
            i, j = np.unravel_index(np.ma.argmin(np.abs(values - float(t.get_text()))), values.shape)
            r, g, b, _ = image.cmap(image.norm(values[i, j]))
            colours.append((0.2126 * r + 0.7152 * g + 0.0722 * b, t.get_color()))
    plt.close(fig)
    assert colours and {c for lum, c in colours if lum > 0.6} == {"black"}
    assert {c for lum, c in colours if lum < 0.3} == {"white"}


def test_weight_error_bars_never_go_below_zero(built):
    """A weight is >= 0: a bar whose seed std exceeds its mean has its error bar stop at 0 (the upper one is kept)."""
    import matplotlib.pyplot as plt
    from matplotlib.container import ErrorbarContainer

    from dmp.figures import plot

    _, frames = built
    frame = frames["weights"].copy()
    wide = frame.index[(frame["method"] == "dmp") & ~frame["shared"].astype(bool)][0]
    frame.loc[wide, "std"] = 3 * frame.loc[wide, "mean"]  # an outlier class whose seeds disagree
    fig = plot.weights(frame, FigurePlan(CONFIG).spec("weights"))
    segments = [seg for ax in fig.axes for c in ax.containers if isinstance(c, ErrorbarContainer)
                for coll in c.lines[2] for seg in coll.get_segments()]
    plt.close(fig)
    assert segments and min(seg[:, 1].min() for seg in segments) == 0
    assert max(seg[:, 1].max() for seg in segments) >= 4 * frame.loc[wide, "mean"] - 1e-12


@pytest.mark.parametrize("name", ["k", "dprime", "convergence"])
def test_legends_lie_outside_the_data(built, name):
    import matplotlib.pyplot as plt

    fig = _draw(built, name)
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None:
            assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer)), name
    plt.close(fig)


def test_every_figure_builds_without_any_run(tmp_path):
    """No run at all: every figure is drawn, empty, with its notes; nothing raises."""
    for name in FIGURES:
        paths, frame = build(CONFIG, name, results=str(tmp_path / "nothing"), out=str(tmp_path))
        assert all(p.exists() for p in paths)
        assert (frame["note"].astype(str) != "").any(), name


# ----------------------------------------------------------------------------- which runs
def test_figure_runs_are_the_table_runs_where_they_coincide():
    plan = FigurePlan(load("config.yaml"))
    table_runs = set(plan.suite.all_runs())
    # the preset points of the grids, k = 1, the VisDA runs of t-SNE, confusion and weights, d' and interpolation
    for name in ("tsne", "confusion", "weights", "dprime", "interpolation_tsne"):
        assert set(plan.runs(name)) <= table_runs, name
    hyper = plan.runs("hyper")
    assert Run("imageclef", "vanilla", "I->P", "dmp", "G", "full", "full", 0) in hyper
    assert Run("office31", "partial", "W->A", "dmp", "G", "full", "partial", 2) in hyper
    assert len([r for r in hyper if not r.variant]) == 4 * 3  # one preset point per task, 3 seeds
    assert {variant_values(r.variant).get("k") for r in plan.runs("k") if r.variant} == set(range(2, 13))


def test_variant_runs_have_their_own_folder_arguments_and_signature():
    suite = Suite(load("config.yaml"))
    plain = Run("imageclef", "vanilla", "I->P", "dmp", "G", "full", "full", 0)
    variant = dataclasses.replace(plain, variant=variant_name({"lambda1": 0.5, "lambda2": 100.0}))
    assert variant.folder("results") == \
        "results/runs/imageclef/vanilla/I-P/dmp/G/full-full/lambda1=0.5,lambda2=100.0/seed0"
    assert "lambda1=0.5" in suite.train_args(variant) and "lambda2=100.0" in suite.train_args(variant)
    assert suite.signature(variant) != suite.signature(plain)

    class Wildcards:
        dataset, setting, task, method, metric = "imageclef", "vanilla", "I-P", "dmp", "G"
        source_split, target_split, seed, variant = "full", "full", "0", "lambda1=0.5,lambda2=100.0"
    assert suite.run_from_wildcards(Wildcards) == variant
    from dmp.config import parse_overrides, resolve
    cfg = resolve(parse_overrides(suite.train_args(variant)))
    assert (cfg["lambda1"], cfg["lambda2"]) == (0.5, 100.0)


def test_figures_config_is_checked_before_any_job():
    from snakemake.utils import validate

    schema = ROOT / "workflow" / "schemas" / "config.schema.yaml"
    for name in ("config.yaml", "demo.yaml"):
        validate(load(name), str(schema))
    bad = load("config.yaml")
    bad["figures"]["hyper"]["panels"][0]["lamda1"] = [1]
    with pytest.raises(Exception, match="lamda1"):
        validate(bad, str(schema))
    bad = load("demo.yaml")
    bad["figures"]["k"]["ks"] = [1, 11]  # the demo has 10 classes
    with pytest.raises(ValueError, match="figures.k"):
        FigurePlan(bad).validate()
    bad = load("demo.yaml")
    bad["figures"]["shared_classes"]["target_splits"] = ["partial", "first7"]  # no such split of the demo
    with pytest.raises(ValueError, match="figures.shared_classes.*first7"):
        FigurePlan(bad).validate()
    # methods are the registry's: a comparison method plots, a misspelled one is refused naming the closest
    cfg = load("demo.yaml")
    cfg["figures"]["confusion"]["panels"][0]["method"] = "dann"
    validate(cfg, str(schema))
    FigurePlan(cfg).validate()
    cfg["figures"]["confusion"]["panels"][0]["method"] = "dannn"
    validate(cfg, str(schema))
    with pytest.raises(ValueError, match=r"figures\.confusion.*'dannn'.*did you mean 'dann'"):
        FigurePlan(cfg).validate()


def test_demo_figures_add_only_a_handful_of_runs():
    cfg = load("demo.yaml")
    plan = FigurePlan(cfg)
    extra = set(plan.all_runs()) - set(plan.suite.all_runs())
    assert len(extra) <= 8, sorted(r.folder("") for r in extra)
    assert set(plan.names) == set(FIGURES)


def _job_counts(output: str) -> dict[str, int]:
    import re
    block = output.split("Job stats:")[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M)}


@pytest.mark.slow
def test_dry_run_of_all_on_the_paper_config_counts_table_and_figure_jobs():
    """`snakemake -n all`: the tables' training jobs, the figures' extra ones (counted here from the config, not
    with dmp/figures), one job per figure and per table page."""
    from test_workflow import expected_train_jobs

    cfg = load("config.yaml")
    proc = hang_guard.run([sys.executable, "-m", "snakemake", "-n", "all", "--quiet", "rules"], cwd=ROOT,
                          quiet=3600)  # silent until done: 145 s on 2 idle cores, over 600 s on a loaded one
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    counts = _job_counts(proc.stdout)
    figs, seeds = cfg["figures"], len(cfg["seeds"])
    presets = {"vanilla": (10.0, 5000.0), "partial": (10.0, 1.0)}  # dmp/config.py PRESETS (paper)
    grid_points = [len(p["lambda1"]) * len(p["lambda2"]) - (presets[p["setting"]][0] in p["lambda1"]
                                                             and presets[p["setting"]][1] in p["lambda2"])
                   for p in figs["hyper"]["panels"]]
    variants = sum(len(p["tasks"]) * n for p, n in zip(figs["hyper"]["panels"], grid_points)) * seeds
    variants += len(figs["k"]["tasks"]) * len([k for k in figs["k"]["ks"] if k != 1]) * seeds
    variants += seeds  # the convergence run
    shared = len(figs["shared_classes"]["tasks"]) * len(figs["shared_classes"]["methods"]) \
        * len(figs["shared_classes"]["target_splits"]) * seeds
    assert counts["train_variant"] == variants == 621
    assert counts["train"] == expected_train_jobs(cfg) + shared
    assert counts["figure"] == len(FIGURES) and counts["table_html"] == counts["table"] == len(cfg["tables"])


# ----------------------------------------------------------------------------- trainer: accuracy log and features
@pytest.mark.slow
def test_accuracy_log_leaves_training_unchanged_and_features_are_saved(tmp_path):
    from synthetic import shift_task, small_cfg

    from dmp.train import train

    runs = {}
    for every in (0, 9):
        cfg = small_cfg(num_workers=0, iterations=30, checkpoint_every=15, log_accuracy_every=every, save_features=5)
        runs[every] = train(cfg, tmp_path / f"every{every}", task=shift_task(), progress=False)
    a, b = runs[0], runs[9]
    assert a["accuracy"] == b["accuracy"] and a["confusion_matrix"] == b["confusion_matrix"]
    # so a table takes the run with the log where it expects the run without (a runtime key)
    from dmp.metrics import read_metrics
    assert read_metrics(tmp_path / "every9" / "metrics.json", a["config"], ())[1] is None
    assert (tmp_path / "every0" / "log.csv").read_text() == (tmp_path / "every9" / "log.csv").read_text()
    assert a["accuracy_log"] == [] and [r["iteration"] for r in b["accuracy_log"]] == [0, 9, 18, 27, 30]
    assert b["accuracy_log"][-1]["accuracy"] == pytest.approx(b["accuracy"])
    with np.load(tmp_path / "every9" / "features.npz") as f:
        assert f["source_features"].shape == (20, 64) and f["target_features"].shape == (20, 64)  # 5 x 4 classes
        assert np.bincount(f["target_labels"]).tolist() == [5, 5, 5, 5]
        assert sorted(set(f["interp_alpha"].round(3))) == pytest.approx([0.0, 0.1, 0.3, 0.5])
    assert b["features"]["file"] == "features.npz"


# ----------------------------------------------------------------------------- the report in a browser
def _chromium():
    spec = importlib.util.spec_from_file_location("render_report", ROOT / "scripts" / "render_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, module.find_chromium()


@pytest.mark.slow
def test_report_of_tables_and_figures_renders_in_headless_chromium(built, tmp_path):
    """`snakemake all --report` on a suite whose tables and figures exist (built from the fixture runs), then the
    page opened in Chromium: both categories in the menu, every figure an image, every table a page with cells."""
    if importlib.util.find_spec("playwright") is None:
        pytest.skip("playwright is not installed (pip install playwright; the system Chromium is used)")
    render, chromium = _chromium()
    if chromium is None:
        pytest.skip("no Chromium (apt-get install chromium)")
    results = tmp_path / "results"
    shutil.copytree(FIXTURE / "runs", results / "runs")
    cfg = copy.deepcopy(CONFIG)
    cfg.update(results=str(results), require_runs=False)
    shutil.copytree(built[0], results / "figures")
    from dmp.figures.report import table_page
    from dmp.tables.cli import build as build_table
    for table in cfg["tables"]:
        build_table(cfg, table)
        table_page([results / "tables" / f"{table}.md", results / "tables" / f"{table}.comparison.md"],
                   results / "tables" / f"{table}.html")
    configfile = tmp_path / "config.yaml"
    configfile.write_text(yaml.safe_dump(cfg))
    report = tmp_path / "report.html"
    proc = render.build_report(str(configfile), str(report))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    expected = render.expected_entries(cfg)
    assert render.check_report(str(report), expected, chromium) == []
    expected["Figures"].append("no_such_figure.png")  # the check does fail on a missing entry
    assert render.check_report(str(report), expected, chromium) == ["Figures: no_such_figure.png is not in the report"]
