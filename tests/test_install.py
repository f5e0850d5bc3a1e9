"""The install: pyproject.toml's supported ranges, the exact versions of the demo and CI
(requirements/constraints.txt), the conda environment of every rule (workflow/envs/dmp.yaml) and the licence.

`make check-install` (run by .ci/run) checks with pip that the ranges resolve; these tests check that the three
files agree with each other, parsed with `packaging` (the parser pip itself uses)."""

import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _requirements(strings):
    return {canonicalize_name(r.name): r for r in map(Requirement, strings)}


def _pins(lines, where):
    """{name: Version} of `name==version` lines (comments and blank lines skipped); anything else is an error."""
    pins = {}
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"{where}:{number}: {line!r} is not an exact pin"
        pins[canonicalize_name(req.name)] = Version(specs[0].version)
    return pins


def _constraints():
    path = ROOT / "requirements" / "constraints.txt"
    return _pins(path.read_text().splitlines(), path.name)


def _conda_env():
    env = yaml.safe_load((ROOT / "workflow" / "envs" / "dmp.yaml").read_text())
    python = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python=")]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return python, _pins(pip, "dmp.yaml")


def _within(requirements, pins, where):
    """Every requirement pinned in `pins` at a version its specifier admits: the list of what is wrong."""
    wrong = []
    for name, req in requirements.items():
        if name not in pins:
            wrong.append(f"{req.name}: not in {where}")
        elif pins[name] not in req.specifier:
            wrong.append(f"{req.name}: {where} has {pins[name]}, pyproject.toml asks {req.specifier}")
    return wrong


def test_constraints_lie_within_the_ranges():
    project = _pyproject()["project"]
    required = _requirements(project["dependencies"] + project["optional-dependencies"]["test"])
    assert _within(required, _constraints(), "requirements/constraints.txt") == []


def test_ranges_admit_the_oldest_and_newest_tested_versions():
    """The oldest tested (torch 2.11 / torchvision 0.26 on Python 3.12, docs/benchmarks.md's GPU machine) and the
    newest (the constraints' torch on this Python) are both inside the ranges: no exact pin narrows the install."""
    project = _pyproject()["project"]
    required = _requirements(project["dependencies"])
    for name, oldest in {"torch": "2.11.0", "torchvision": "0.26.0"}.items():
        assert Version(oldest) in required[name].specifier, (name, oldest)
    python = SpecifierSet(project["requires-python"])
    assert Version("3.11") in python and Version("3.12") in python
    assert not [r for r in required.values() if any(s.operator == "==" for s in r.specifier)]


def test_the_running_python_is_supported():
    import platform

    assert Version(platform.python_version()) in SpecifierSet(_pyproject()["project"]["requires-python"])


def test_conda_env_of_the_rules_has_every_dependency_at_the_constraints_version():
    project = _pyproject()["project"]
    python, pins = _conda_env()
    required = _requirements(project["dependencies"])
    assert _within(required, pins, "workflow/envs/dmp.yaml") == []
    constraints = _constraints()
    assert {n: v for n, v in pins.items() if constraints.get(n) != v} == {}
    assert len(python) == 1
    version = Version(python[0].split("=", 1)[1])
    assert version in SpecifierSet(project["requires-python"])


@pytest.mark.parametrize("spec, pins, expected", [
    (["torch>=2.11,<2.15"], {"torch": Version("2.15.0")}, ["torch: x has 2.15.0, pyproject.toml asks <2.15,>=2.11"]),
    (["matplotlib>=3.8"], {}, ["matplotlib: not in x"]),
    (["scikit-learn>=1.4"], {"scikit-learn": Version("1.9.1")}, []),
])
def test_within_finds_missing_and_out_of_range(spec, pins, expected):
    assert _within(_requirements(spec), pins, "x") == expected


def test_licence_file_and_field():
    project = _pyproject()["project"]
    text = (ROOT / "LICENSE").read_text()
    assert project["license"] == "MIT" and text.startswith("MIT License")
    assert "the DMP reproduction suite authors" in text
    assert "LICENSE" in project["license-files"]


def test_makefile_installs_with_the_constraints():
    makefile = (ROOT / "Makefile").read_text()
    assert "CONSTRAINTS := requirements/constraints.txt" in makefile
    assert "pip install --quiet -c $(CONSTRAINTS) -e '.[test]'" in makefile
    assert "make check-install" in (ROOT / ".ci" / "run").read_text()
