"""The method registry (dmp/methods/): names and the unknown-name error, method-scoped config keys, every registered
method trained for 3 iterations on a tiny synthetic task (log.csv holds its own terms), a resumed run identical to
an uninterrupted one for every method with state, the suite's method rows, and no method-name test outside the
registry."""
from __future__ import annotations

import ast
import copy
import csv
import re
from pathlib import Path

import pytest
import torch
import yaml

from dmp import methods
from dmp.config import ConfigError, check_values, describe, resolve
from dmp.methods.base import Method, Needs
from dmp.train import train
from dmp.train.trainer import LOG_BASE
from synthetic import shift_task, small_cfg

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(bottleneck_dims=[16, 8], batch_size=8, iterations=3, log_every=1, checkpoint_every=100,
            eval_batch_size=64, interpolation_per_class=5, save_features=0, intra_start=0, anchor_period=2)


def tiny(method, setting="vanilla", **over):
    return small_cfg(method=method, setting=setting, **{**TINY, **over})


def task(setting):
    return shift_task(classes=4, per_class=12, dim=8, target_classes=2 if setting == "partial" else None)


def log(folder):
    with open(folder / "log.csv", newline="") as fh:
        return list(csv.DictReader(fh))


# ---------------------------------------------------------------------------------------------- names
def test_names_in_registration_order_source_only_and_dmp_first():
    names = methods.names()
    assert names[:7] == ("source_only", "source_only_bn", "frozen_probe", "dmp", "dmp_no_al", "dmp_no_ds", "dmp_ent")
    assert len(set(names)) == len(names)
    assert all(isinstance(methods.get(n), Method) and methods.get(n).name == n for n in names)


def test_unknown_method_is_refused_with_the_closest_names_before_any_work():
    with pytest.raises(ConfigError, match=r"'method' = 'dmp_nal' is not a registered method \(did you mean "
                                          r"'dmp_no_al'"):
        resolve(tiny("dmp_nal"))
    with pytest.raises(ConfigError, match="registered: source_only, source_only_bn, frozen_probe, dmp"):
        methods.get("nothing_like_it")


def test_register_refuses_a_second_method_of_the_same_name_and_one_without_label():
    with pytest.raises(ValueError, match="registered twice"):
        methods.register(type("Again", (Method,), {"name": "dmp", "label": "x"}))
    with pytest.raises(ValueError, match="no label"):
        methods.register(type("NoLabel", (Method,), {"name": "zz_no_label"}))
    assert "zz_no_label" not in methods.names()


def test_labels_are_the_registrys_in_tables_and_figures():
    from dmp.figures.plot import method_label as figure_label
    from dmp.tables.render import method_label as table_label
    for name in methods.names():
        assert table_label(name) == figure_label(name) == methods.get(name).label
    assert table_label("jan") == "JAN"  # a paper row no registered method runs


def test_a_methods_footnote_is_printed_under_the_tables_that_hold_its_row():
    import pandas as pd

    from dmp.tables.render import notes

    class Toy(Method):
        name, label, footnote = "zz_note", "Toy", "closest documented form (docs/method.md)."

    methods.register(Toy)
    try:
        agg = pd.DataFrame({"row": ["dmp", "zz_note", "zz_note"], "n": [3, 3, 3], "expected": [3, 3, 3]})
        assert notes(agg, "vanilla", False).count("Toy: closest documented form (docs/method.md).") == 1
        assert not any("Toy" in n for n in notes(agg[agg["row"] == "dmp"], "vanilla", False))
    finally:
        methods._REGISTRY.pop("zz_note", None)


# ---------------------------------------------------------------------------------------------- config keys
def test_method_scoped_keys_exist_only_for_their_methods():
    declared = methods.declared_params()
    if not declared:
        pytest.skip("no registered method declares a key of its own")
    key, (owner, param) = next(iter(declared.items()))
    cfg = resolve(tiny(owner))
    assert cfg[key] == param.default
    assert key not in resolve(tiny("dmp"))  # a DMP run's config is the one it always had
    with pytest.raises(ConfigError, match=rf"config key '{key}' belongs to method\(s\) .*{owner}.*not to method "
                                          r"'dmp'"):
        resolve(tiny("dmp", **{key: param.default}))
    check_values({key: param.default}, "config train")  # the Snakemake config check knows it
    text = describe()
    assert f"method {owner} (" in text and key in text


def test_a_method_check_runs_on_the_resolved_config():
    with pytest.raises(ConfigError, match="'entropy_weight' must be > 0 for method dmp_ent"):
        resolve(tiny("dmp_ent", entropy_weight=0))


# ---------------------------------------------------------------------------------------------- training
@pytest.mark.parametrize("method", methods.names())
@pytest.mark.parametrize("setting", ["vanilla", "partial"])
def test_every_registered_method_trains_three_iterations(tmp_path, method, setting):
    m = methods.get(method)
    metrics = train(tiny(method, setting), tmp_path, task=task(setting), progress=False)
    assert metrics["status"] == "complete" and metrics["iterations"] == 3
    rows = log(tmp_path)
    assert list(rows[0]) == LOG_BASE + list(m.terms)  # iteration, lr, loss, ce, then the method's own terms
    assert [int(r["iteration"]) for r in rows] == [0, 1, 2]
    assert all(torch.isfinite(torch.tensor([float(v) for v in r.values()])).all() for r in rows)
    needs = m.needs(metrics["config"])
    assert (metrics["schedule"]["anchor_refreshes"] > 0) == needs.refreshes
    if type(m).total is Method.total:  # the default objective: ce + the declared weights times the terms
        w = m.weights(metrics["config"])
        for r in rows:
            expected = float(r["ce"]) + sum(w[t] * float(r[t]) for t in m.terms)
            assert float(r["loss"]) == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_source_only_has_no_target_terms_and_its_loss_is_the_cross_entropy(tmp_path):
    train(tiny("source_only"), tmp_path, task=task("vanilla"), progress=False)
    assert all(r["loss"] == r["ce"] for r in log(tmp_path))


STATEFUL = [n for n in methods.names()
            if methods.get(n).build_modules(resolve(tiny(n)), TINY["bottleneck_dims"], 4) is not None]


@pytest.mark.parametrize("method", STATEFUL)
def test_resumed_run_equals_uninterrupted_for_methods_with_modules(tmp_path, method):
    """The method's modules (a discriminator, a random map) are in the optimizer and the checkpoint: stopping after
    2 of 5 iterations and resuming gives the same log.csv, metrics and module weights as one run."""
    setting = "partial" if methods.get(method).needs(resolve(tiny(method))).mean_prediction else "vanilla"
    cfg = tiny(method, setting, iterations=5, checkpoint_every=2)
    ref = train(cfg, tmp_path / "ref", task=task(setting), progress=False)
    assert train(cfg, tmp_path / "run", task=task(setting), progress=False, stop_after=2) is None
    again = train(cfg, tmp_path / "run", task=task(setting), progress=False)
    assert (tmp_path / "ref" / "log.csv").read_text() == (tmp_path / "run" / "log.csv").read_text()
    assert (again["accuracy"], again["target_mean_prediction"]) == (ref["accuracy"], ref["target_mean_prediction"])
    a = torch.load(tmp_path / "ref" / "checkpoint.pt", weights_only=True)["modules"]
    b = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)["modules"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_method_with_modules_trains_them(tmp_path):
    """A registered toy method whose only term is a trained module: the optimizer steps it (its weight moves) and
    the checkpoint holds it; the network's first step is the one every method starts from."""

    class Toy(Method):
        name, label, terms = "zz_toy", "Toy", ("toy",)

        def needs(self, cfg):
            return Needs("loss")

        def build_modules(self, cfg, dims, classes):
            return torch.nn.ModuleDict({"head": torch.nn.Linear(dims[-1], 1)})

        def losses(self, ctx):
            return {"toy": ctx.modules["head"](ctx.feats_t[-1]).pow(2).mean()}

    methods.register(Toy)
    try:
        cfg = resolve(tiny("zz_toy", iterations=3))
        from dmp.train.trainer import Trainer
        t = Trainer(cfg, task("vanilla"), tmp_path, progress=False)
        before = t.modules["head"].weight.detach().clone()
        assert any(p is t.modules["head"].weight for g in t.opt.param_groups for p in g["params"])
        t.run()
        assert not torch.equal(before, t.modules["head"].weight)
        saved = torch.load(tmp_path / "checkpoint.pt", weights_only=True)["modules"]
        assert torch.equal(saved["head.weight"], t.modules["head"].weight.detach())
        assert list(log(tmp_path)[0]) == LOG_BASE + ["toy"]
    finally:
        methods._REGISTRY.pop("zz_toy", None)


# ---------------------------------------------------------------------------------------------- suite
def suite_config(**over):
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg.update(over)
    return cfg


def test_paper_suite_runs_the_comparison_rows_and_one_key_keeps_dmps_rows_only():
    from dmp.suite import Suite
    every = Suite(suite_config())
    rows = every.rows()
    assert {"row_vanilla_office31_cdan_e", "row_vanilla_officehome_bsp_cdan", "row_partial_office31_pada",
            "row_partial_officehome_etn", "row_time_all_cdan_e"} <= set(rows)
    ran = {r.method for r in every.all_runs()}
    assert {"dann", "cdan", "cdan_e", "bsp_dann", "bsp_cdan", "hafn", "safn", "pada", "iwan", "san", "etn"} <= ran
    # the paper's rows only: no BSP on Office-31 (the paper reports it on Office-Home and VisDA-2017)
    assert not any(r.method.startswith("bsp") and r.dataset == "office31" for r in every.all_runs())
    dmp_only = Suite(suite_config(comparison_methods=False))
    assert {r.method for r in dmp_only.all_runs()} == {m for m in ran if not methods.get(m).comparison}
    assert len(dmp_only.all_runs()) < len(every.all_runs())


# ---------------------------------------------------------------------------------------------- no name tests
def method_name_tests(root: Path) -> list[str]:
    """``file:line`` of every comparison of a registered method name as a string literal (``== "dmp"``,
    ``in ("source_only", ...)``) in dmp/ (outside dmp/methods/) and workflow/, Snakefile included."""
    names = set(methods.names())
    found = []

    def literal_names(node):
        if isinstance(node, ast.Constant) and node.value in names:
            return True
        return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(literal_names(e) for e in node.elts)

    files = [p for p in (root / "dmp").rglob("*.py") if "methods" not in p.relative_to(root / "dmp").parts[:1]]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Compare) and any(literal_names(x) for x in [node.left, *node.comparators]):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    quoted = "|".join(sorted(names, key=len, reverse=True))
    pattern = re.compile(rf"""(==|!=|\bin)\s*[(\[{{]?\s*["']({quoted})["']|["']({quoted})["']\s*(==|!=)""")
    for path in [*(root / "workflow").rglob("*.smk"), root / "Snakefile"]:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line.split("#")[0]):
                found.append(f"{path.relative_to(root)}:{i}")
    return found


def test_no_module_outside_the_registry_tests_a_method_name():
    assert method_name_tests(ROOT) == []


def test_the_name_test_finds_one(tmp_path):
    """The check above can fail: the pre-registry trainer's tests are found."""
    (tmp_path / "dmp" / "train").mkdir(parents=True)
    (tmp_path / "workflow" / "rules").mkdir(parents=True)
    (tmp_path / "Snakefile").write_text("")
    (tmp_path / "dmp" / "train" / "trainer.py").write_text(
        'if method != "dmp_no_ds":\n    pass\nuses = cfg["method"] not in ("source_only", "source_only_bn")\n')
    (tmp_path / "workflow" / "rules" / "x.smk").write_text('if wildcards.method == "dmp":\n    pass\n')
    assert method_name_tests(tmp_path) == ["dmp/train/trainer.py:1", "dmp/train/trainer.py:3",
                                           "workflow/rules/x.smk:1"]
