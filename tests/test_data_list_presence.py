"""`dmp data list` says whether each dataset's files are on this machine, and a mistyped dataset name is answered
with the close registered names in its one-line error."""
from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
from PIL import Image

from dmp.data import cli, registry

MINE = """kind: images
title: two domains of my own
domains:
  - {name: photo, short: P}
  - {name: sketch, short: S}
"""


def _data(*argv) -> int:
    parser = argparse.ArgumentParser()
    cli.add_subparsers(parser.add_subparsers(dest="command"))
    return cli.main(parser.parse_args(["data", *argv]))


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A declaration of one's own (DMP_DATASETS_DIR) and an empty data folder (DMP_DATA_DIR)."""
    (tmp_path / "decl" / "mine").mkdir(parents=True)
    (tmp_path / "decl" / "mine" / "dataset.yaml").write_text(MINE)
    monkeypatch.setenv("DMP_DATASETS_DIR", str(tmp_path / "decl"))
    monkeypatch.setenv("DMP_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def _listed(capsys) -> dict[str, str]:
    """``{name: the line's presence column}`` of `data list`, and the same from `data list --json`."""
    assert _data("list") == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert _data("list", "--json") == 0
    as_json = {d["name"]: d["data"] for d in json.loads(capsys.readouterr().out) if "data" in d}
    for name, state in as_json.items():
        assert lines[name].endswith(f"]  {state}"), lines[name]
    return as_json


def test_data_list_says_what_is_in_place_on_this_machine(lab, capsys):
    state = _listed(capsys)
    assert state["mine"] == "not fetched (dmp data fetch mine)"
    assert state["demo"] == "not generated (dmp data demo)"  # DMP_DATA_DIR is empty: no generated demo either
    assert state["office31"] == "not fetched (dmp data fetch office31)"
    for domain, cls in (("photo", "cat"), ("sketch", "dog")):
        path = lab / "data" / "mine" / domain / cls / "0.png"
        path.parent.mkdir(parents=True)
        Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(path)
    state = _listed(capsys)
    assert state["mine"] == "data in place"
    assert state["office31"] == "not fetched (dmp data fetch office31)"


def test_one_domain_missing_is_not_in_place(lab, capsys):
    (lab / "data" / "mine" / "photo" / "cat").mkdir(parents=True)
    assert _listed(capsys)["mine"] == "not fetched (dmp data fetch mine)"


@pytest.mark.parametrize("typed, meant", [("ofice31", "office31"), ("Office31", "office31"),
                                          ("mnist_ups", "mnist_usps"), ("mien", "mine")])
def test_a_mistyped_name_suggests_the_close_ones(lab, typed, meant):
    with pytest.raises(KeyError) as err:
        registry.get_dataset(typed)
    message = err.value.args[0]
    assert f"unknown dataset {typed!r} (did you mean {meant}" in message
    assert "known datasets: office31, " in message and ", mine" in message


def test_a_name_like_none_suggests_nothing(lab):
    with pytest.raises(KeyError) as err:
        registry.get_dataset("zzz")
    assert err.value.args[0].startswith("unknown dataset 'zzz'; known datasets: ")


def test_the_command_line_error_is_one_line_with_the_suggestion(lab, capsys):
    with pytest.raises(SystemExit):
        _data("verify", "ofice31")
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: unknown dataset 'ofice31' (did you mean office31"), err
