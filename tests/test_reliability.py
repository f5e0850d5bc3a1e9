"""Issue 23: every value is validated once, in one place (dmp/config.py), before any job, by the command line and the
Snakemake config check alike; messages name the key and never print a value longer than a line; YAML aliases are
bounded."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from dmp.cli import main
from dmp.config import ConfigError, check_values, resolve
from dmp.suite import Suite
from test_cli_errors import cli_error

ROOT = Path(__file__).resolve().parents[1]
DEMO = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
RUN = ["dataset=demo", "source=S", "target=O"]

# (override, key, what the message says is expected): each passed `snakemake -n` and failed or diverged inside a job
BAD = [("betas=[2, 3]", "betas", "two numbers in [0, 1)"),
       ("betas=[a, b]", "betas", "two numbers in [0, 1)"),  # was a TypeError inside torch.optim.Adam
       ("momentum=50", "momentum", "a number in [0, 1]"),
       ("le_eps=.inf", "le_eps", "a finite number > 0"),
       ("seed=10000000000000000", "seed", "an integer in [0, 2**32)"),  # was an overflow at the first anchor pass
       ("source_split=n0", "source_split", "full, partial, first<N> or n<K>"),
       ("target_split=bogus", "target_split", "full, partial, first<N> or n<K>")]




@pytest.mark.parametrize("override, key, expect", BAD)
def test_a_bad_value_is_refused_by_the_command_line_naming_the_key(capsys, override, key, expect):
    err = cli_error(capsys, "config", *RUN, override)
    assert err.startswith(f"error: config key {key!r} = ") and "is invalid: expected " in err and expect in err


@pytest.mark.parametrize("override, key, expect", [b for b in BAD if not b[1].endswith("_split")])
def test_a_bad_value_is_refused_by_the_suite_config_check_alike(override, key, expect):
    """(The suite's splits come from its tables, checked by the schema's pattern and the registry.)"""
    cfg = copy.deepcopy(DEMO)
    if key == "seed":  # the suite's seeds come from `seeds`; the schema bounds them too
        cfg["seeds"] = [10**16]
        with pytest.raises(ValueError, match=r"config train, run .*/seed10000000000000000: config key 'seed' = "):
            Suite(cfg)
        return
    cfg["train"] = yaml.safe_load(override.replace("=", ": ", 1))
    with pytest.raises(ValueError) as err:
        Suite(cfg)
    message = str(err.value)
    assert message.startswith(f"config train.{key} = ") and "is invalid: expected " in message and expect in message


def test_good_edges_pass():
    cfg = resolve({"dataset": "demo", "source": "solid", "target": "outline", "betas": [0, 0.9999], "momentum": 1,
                   "seed": 2**32 - 1, "crop": 24, "source_split": "n10", "target_split": "first3"})
    assert cfg["momentum"] == 1.0 and cfg["seed"] == 2**32 - 1
    check_values({"betas": [0.5, 0.5], "momentum": 0, "le_eps": 1e-9}, "config train")


def test_crop_larger_than_resize_is_refused_by_both(capsys):
    err = cli_error(capsys, "config", *RUN, "crop=300")  # the demo's images are resized to 24
    assert "config key 'crop' = 300 is larger than 'resize' = 24" in err
    cfg = copy.deepcopy(DEMO)
    cfg["train"] = {"crop": 300}
    with pytest.raises(ValueError, match=r"config train.*'crop' = 300 is larger than 'resize' = 24"):
        Suite(cfg)
    cfg["train"] = {"crop": 300, "resize": 320}  # a dependent pair is checked on the run's whole config
    Suite(cfg)


def test_a_long_value_is_cut_to_a_line(capsys):
    err = cli_error(capsys, "config", *RUN, "lr=[" + ", ".join(["123456789"] * 10_000) + "]")
    assert len(err) < 200 and "config key 'lr' = [" in err
    with pytest.raises(ConfigError) as exc:
        check_values({"lambda1": "x" * 100_000}, "config train")
    assert len(str(exc.value)) < 200


# 377 bytes whose aliases expand to 9**8 = 43 million values (a "billion laughs" document): today an 80 MB message
BOMB = "".join(f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefg", "bcdefgh"))
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + BOMB + "lr: *h\n"


def test_yaml_aliases_are_bounded(capsys, tmp_path):
    assert len(BOMB) < 400
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    err = cli_error(capsys, "config", "--config", str(path), *RUN)
    assert err == (f"error: {path}: the YAML expands to more than 100,000 values through its aliases (*name); write "
                   f"the values out\n")
    err = cli_error(capsys, "config", *RUN, "bottleneck_dims=" + BOMB.replace("\n", ", ").join("{}"))
    assert "override bottleneck_dims: the YAML expands to more than 100,000 values" in err
    path.write_text("resize: &r 28\ncrop: *r\n")  # an alias that expands to little is fine
    with pytest.raises(SystemExit) as exit_:
        main(["config", "--config", str(path), *RUN])
    assert exit_.value.code == 0 and "crop: 28\n" in capsys.readouterr().out


def test_a_binary_config_file_names_the_file(capsys, tmp_path):
    path = tmp_path / "run.yaml"
    path.write_bytes(bytes(range(256)))
    err = cli_error(capsys, "config", "--config", str(path), *RUN)
    assert err == f"error: {path}: not a YAML text file (not UTF-8 text); give a run config file\n"


def test_a_key_that_is_no_name_names_the_file(capsys, tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("lr: 0.001\n1: 2\n")  # was: TypeError: unsupported operand type(s) for +: 'int' and 'str'
    err = cli_error(capsys, "config", "--config", str(path), *RUN)
    assert err == f"error: {path}: config key 1 is not a name (see python -m dmp config --show)\n"
