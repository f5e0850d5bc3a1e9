"""The README and the docs a newcomer reads: the layout list is the package's folders, every link resolves, every
evidence number of the README is one docs/evidence.md prints (which tests/test_evidence_report.py checks against
the committed runs), the demo's timing stands in one place, and no reference points outside the repository."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DOCS = sorted((ROOT / "docs").glob("*.md"))
# The documents this test holds to "no reference a reader cannot follow" (the others have their own owners' tests).
PLAIN = [ROOT / "README.md", ROOT / "docs" / "workflow.md", ROOT / "docs" / "figures.md", ROOT / "config" / "demo.yaml",
         ROOT / "docs" / "benchmarks.md", ROOT / "docs" / "method.md"]
ISSUE_NUMBER = r"\bissues? ?#?\d+"  # "issue 21", "Issue 23", "issue 19.2", "issues 8 and 9", "issue #8"


def _section(text: str, heading: str) -> str:
    """The body under the Markdown heading ``heading`` (any level), up to the next heading."""
    match = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#+ |\Z)", text, re.S | re.M)
    assert match, f"no heading {heading!r}"
    return match.group(1)


def _layout() -> list[str]:
    block = re.search(r"```\n(.*?)```", _section(README, "Layout"), re.S).group(1)
    return block.splitlines()


def test_readme_layout_lists_every_module_and_package_of_dmp():
    listed = {line.split()[0] for line in _layout() if line.startswith("  ") and line.strip() and
              not line.startswith("   ")}
    present = {p.name for p in (ROOT / "dmp").glob("*.py") if p.stem not in ("__init__", "__main__")}
    present |= {p.name + "/" for p in (ROOT / "dmp").iterdir() if (p / "__init__.py").is_file()}
    assert listed == present


def test_readme_layout_names_every_rule_file_and_top_level_folder():
    text = "\n".join(_layout())
    rules = re.search(r"workflow/rules/\{([a-z,]+)\}\.smk", text).group(1).split(",")
    assert sorted(rules) == sorted(p.stem for p in (ROOT / "workflow" / "rules").glob("*.smk"))
    tracked = {"benchmarks", "config", "datasets", "docs", "dmp", "profiles", "requirements", "scripts", "studies", "tests",
               "workflow"}
    assert {d for d in tracked if (ROOT / d).is_dir()} == tracked
    assert [d for d in tracked if f"{d}/" not in text] == []


def _links(path: Path):
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
        if not re.match(r"[a-z]+:", target):
            yield target


@pytest.mark.parametrize("path", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_relative_links_resolve(path):
    broken = []
    for target in _links(path):
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md":
            headings = re.findall(r"^#+ (.*)$", dest.read_text(), re.M)
            anchors = {re.sub(r"[^a-z0-9 _-]", "", h.lower()).replace(" ", "-") for h in headings}
            if anchor not in anchors:
                broken.append(target)
    assert broken == []


@pytest.mark.parametrize("path", [p for p in PLAIN if p.suffix == ".md"], ids=lambda p: p.name)
def test_no_heading_twice(path):
    headings = re.findall(r"^#+ .*$", path.read_text(), re.M)
    assert [h for h in set(headings) if headings.count(h) > 1] == []


@pytest.mark.parametrize("path", [*PLAIN, ROOT / "docs" / "evidence.md"], ids=lambda p: p.name)
def test_no_reference_a_reader_cannot_follow(path):
    text = path.read_text()
    found = re.findall(rf"NOTES\.md|{ISSUE_NUMBER}|another owner|today's|shared/paper|\.\./shared", text, re.I)
    assert found == []


@pytest.mark.parametrize("folder", ["dmp", "studies", "tests", "scripts", "benchmarks", "workflow"])
def test_no_code_cites_an_issue_number(folder):
    """A docstring or comment says what is checked and why: an issue number is nothing a reader of the code can
    follow. The pattern itself is tried on the forms such citations took (this file, which holds them, is skipped)."""
    cited = ["issue 21", "(Issue 23: a run", "issue 19.2", "issues 8 and 9", "issue #8", "ISSUE 24, item 3"]
    assert [c for c in cited if not re.search(ISSUE_NUMBER, c, re.I)] == []
    assert not re.search(ISSUE_NUMBER, "tissue 3, issues of the data, issue_count = 843", re.I)
    files = [p for p in sorted((ROOT / folder).rglob("*.py")) if p != Path(__file__).resolve()]
    found = {str(p.relative_to(ROOT)): hits for p in files
             if (hits := re.findall(ISSUE_NUMBER, p.read_text(errors="replace"), re.I))}
    assert found == {}


def test_the_demo_timing_stands_in_one_place():
    timings = {p.name: re.findall(r"\d+ min \d+ s", p.read_text()) for p in [ROOT / "README.md", *DOCS]}
    assert {name: found for name, found in timings.items() if found} == {"workflow.md": ["9 min 57 s", "9 min 35 s"]}
    assert "docs/workflow.md#demo-timings" in README


def _evidence_table(text: str) -> dict[str, dict[str, str]]:
    """{row label: {column: cell}} of the first Markdown table in ``text``."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|") and not re.match(r"\|[ :|-]+\|$", line.strip())]
    header, body = rows[0], rows[1:]
    return {row[0]: dict(zip(header[1:], row[1:])) for row in body}


def test_readme_evidence_numbers_are_the_evidence_reports():
    evidence = (ROOT / "docs" / "evidence.md").read_text()
    table = _evidence_table(_section(README, "Evidence"))
    assert len(table) >= 4
    for label, cells in table.items():
        heading = re.fullmatch(r"\[(.+)\]\(docs/evidence\.md#[\w-]+\)", label).group(1)
        section = _section(evidence, heading)
        printed = _evidence_table(section)
        assert cells.pop("seeds") == re.search(r"(\d+) seeds?\b", section).group(1), heading
        for method, value in cells.items():
            avg = printed.get(method, {}).get("Avg", "").split(" ± ")[0]
            assert value == avg, (heading, method, value, avg)
    numbers = set(re.findall(r"\b\d+\.\d\b", README))
    in_table = {v for cells in table.values() for v in cells.values()}
    headline = re.search(r"<!-- headline:.*?<!-- /headline -->", README, re.S).group(0)
    in_table |= set(re.findall(r"\b\d+\.\d\b", headline))   # the headline table's, checked against its render
    # Python and PyTorch versions, the 0.1x lr, ImageNet top-1 of EfficientNet-Lite0 and of ResNet-50
    assert numbers <= in_table | {"3.11", "3.13", "3.14", "2.11", "2.14", "0.1", "75.1", "76.1"}, numbers - in_table


def test_readme_gives_pip_install_and_the_dmp_command():
    assert "pip install -e '.[test]'" in README and "pip install -c requirements/constraints.txt" in README
    assert "dmp --help" in README and "dmp train --out" in README
    assert [h for h in re.findall(r"^## (.*)$", README, re.M)][:4] == [
        "The two commands", "The headline result", "The paper suite in three steps", "Evidence"]


def test_readme_headline_is_the_report_cards_render(monkeypatch):
    """The README's headline table is what ``dmp tables headline`` renders from the committed runs today (the Mean
    column of the report card: ours with its 95 % interval, the paper's, the difference, the verdict), so it cannot
    go stale; the sentences around it quote no number the table does not print."""
    import yaml

    from dmp.tables.cli import headline

    match = re.search(r"<!-- headline: dmp tables headline (\w+) --config (\S+) -->\n(.*?)<!-- /headline -->", README,
                      re.S)
    assert match, "README.md has no headline block"
    table, config, shown = match.groups()
    monkeypatch.chdir(ROOT)                                   # the config's results folder is relative to the project
    assert shown == headline(yaml.safe_load((ROOT / config).read_text()), table)
    assert "| DMP " in shown and "| Frozen probe" in shown


# Words about the project's own history (which machine, which session, what the code did before): a reader of the
# documents and the code needs what holds, not how it came about. "used to" counts in its past-habit sense ("they
# used to stay"), not as the passive "is used to weight" or the participle ", used to choose".
HISTORY_WORDS = r"lent GPU|\bnext lease\b|\bleases?\b|machine still warm|our machines|reachable here|\bused to\b"
PASSIVE = {"is", "are", "was", "were", "be", "been", "being", "not", "never"}
# Left out: the measurement logs, partly written by scripts (docs/evidence.md, docs/benchmarks.md).
HISTORY_EXEMPT = {"docs/evidence.md", "docs/benchmarks.md"}


def history_words(text: str) -> list[str]:
    """The history words of ``text`` (a passive or participle "used to" aside)."""
    found = []
    for match in re.finditer(HISTORY_WORDS, text, re.I):
        before = text[:match.start()].rstrip()
        if match.group(0).lower() == "used to" and (before.endswith(",") or (before.split() or [""])[-1].lower()
                                                      in PASSIVE):
            continue
        found.append(match.group(0))
    return found


def test_the_history_word_pattern():
    assert history_words("a lent GPU; the next lease; leases; machine still warm; our machines; reachable here; "
                         "they used to stay") == ["lent GPU", "next lease", "leases", "machine still warm",
                                                  "our machines", "reachable here", "used to"]
    assert history_words("the 2017 release; the predictions are used to weight; never\nused to select; indices, "
                         "used to choose") == []


def test_no_history_words_in_the_docs_the_configs_and_the_code():
    files = [ROOT / "README.md", *DOCS, *sorted((ROOT / "config").rglob("*.yaml")),
             *sorted((ROOT / "dmp").rglob("*.py"))]
    found = {rel: hits for path in files if (rel := str(path.relative_to(ROOT))) not in HISTORY_EXEMPT
             and (hits := history_words(path.read_text(errors="replace")))}
    assert found == {}


def test_the_docs_index_names_every_page_and_the_terms():
    index = (ROOT / "docs" / "README.md").read_text()
    assert {p.name for p in DOCS if p.name != "README.md"} == set(re.findall(r"\]\(([a-z0-9_]+\.md)\)", index))
    defined = set()  # the first column of the glossary ("trunk / head" defines both)
    for term in re.findall(r"^\| ([^|]+?) \|", _section(index, "Terms"), re.M):
        defined |= {term, *term.split(" / ")}
    wanted = {"partial setting", "intra-class term", "warm-up", "head", "trunk", "views", "stages 5-6", "CPU form",
              "BatchNorm mode", "anchors", "source / target split", "frozen probe"}
    assert wanted - defined == set()
