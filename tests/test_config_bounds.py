"""Method-scoped sizes and weights are bounded when the config is resolved, before any data is read or memory
allocated: a value past the bound is one ConfigError naming the key, the bound itself is accepted."""
from __future__ import annotations

import pytest

from dmp.cli import main
from dmp.config import ConfigError, resolve
from dmp.params import MAX_WEIGHT, MAX_WIDTH

TASK = dict(dataset="demo", source="solid", target="outline")


@pytest.mark.parametrize("method, key, value, expect", [
    ("dann", "dann_hidden", 1_000_000_000, f"a positive integer <= {MAX_WIDTH}"),
    ("iwan", "iwan_trade_off", 1e300, "a finite number >= 0 and at most 1e+06"),
    ("hafn", "hafn_radius", 1e30, "a finite number >= 0 and at most 1e+06"),
])
def test_a_value_past_its_bound_is_refused_naming_the_key(method, key, value, expect):
    with pytest.raises(ConfigError) as err:
        resolve({**TASK, "method": method, key: value})
    message = str(err.value)
    assert message.startswith(f"config key {key!r} = ") and message.endswith(f"expected {expect}")
    assert "\n" not in message


@pytest.mark.parametrize("method, key, value", [
    ("dann", "dann_hidden", MAX_WIDTH), ("iwan", "iwan_trade_off", MAX_WEIGHT), ("hafn", "hafn_radius", MAX_WEIGHT),
    ("dann", "dann_hidden", 1024), ("iwan", "iwan_trade_off", 3.0), ("hafn", "hafn_radius", 25.0),
])
def test_the_bound_and_the_papers_values_are_accepted(method, key, value):
    assert resolve({**TASK, "method": method, key: value})[key] == value


def test_the_cli_refuses_a_huge_width_before_looking_for_data(tmp_path, monkeypatch, capsys):
    """No data under DMP_DATA_DIR: the refusal is the key's, not the missing dataset's, and no run folder is made."""
    monkeypatch.setenv("DMP_DATA_DIR", str(tmp_path / "no-data"))
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as code:
        main(["train", "--out", str(out), "dataset=demo", "source=S", "target=O", "method=dann",
              "dann_hidden=1000000000"])
    err = capsys.readouterr().err
    assert code.value.code == 2 and err.count("\n") == 1
    assert err.startswith("error: config key 'dann_hidden' = 1000000000 is invalid")
    assert not out.exists()
