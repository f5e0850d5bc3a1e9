"""studies/office31/headline.py: a departure's rows beside the headline form's and the paper's, on hand-made
comparison frames whose answers are known."""
from __future__ import annotations

import pandas as pd

from studies.office31.headline import beside_headline


def _frame(rows):
    """A comparison frame as dmp.tables.cli.compared gives it: one Mean cell per row (and a task cell that must be
    ignored)."""
    cells = []
    for row, ours, paper, seeds in rows:
        cells.append({"row": row, "column": "Mean", "ours": ours, "paper": paper, "seeds": seeds})
        cells.append({"row": row, "column": "A->W", "ours": 0.0, "paper": 0.0, "seeds": seeds})
    return pd.DataFrame(cells)


def test_each_row_is_read_against_the_paper_with_a_point_of_margin():
    nan = float("nan")
    departure = _frame([("source_only", 88.3, 87.1, 1), ("dann", 80.0, 86.5, 1), ("pada", 91.0, 92.7, 1),
                        ("etn", 95.0, nan, 1), ("dmp", nan, 96.6, 0)])
    headline = _frame([("source_only", 87.9, 87.1, 3), ("dann", 50.3, 86.5, 3), ("pada", 91.5, 92.7, 3),
                       ("etn", 94.3, nan, 3), ("dmp", 96.0, 96.6, 3)])
    lines = beside_headline(departure, headline, "partial", "SGD")
    body = {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| ") and "---" not in line}
    # 88.3 is 1.2 from 87.1, 87.9 is 0.8: the headline is nearer, but by 0.4 < 1 point: neither
    assert body["Source only"].endswith("| +1.2 / +0.8 | neither (within 1 point) | 1 / 3 |")
    # 80.0 is 6.5 from 86.5, 50.3 is 36.2: the departure, by far
    assert body["DANN"].endswith("| 80.0 | 50.3 | 86.5 | -6.5 / -36.2 | this departure | 1 / 3 |")
    # 91.0 is 1.7 from 92.7, 91.5 is 1.2: within a point of each other
    assert "neither" in body["PADA"]
    # no paper number: both Avgs, no verdict
    assert body["ETN"].endswith("| 95.0 | 94.3 | – | – | – | 1 / 3 |")
    assert not any("DMP" in line for line in lines)  # the departure has no finished DMP run
    assert lines[0].startswith("SGD, beside the headline form")


def test_the_headline_nearer_by_more_than_a_point_is_named():
    departure, headline = _frame([("dann", 70.0, 82.2, 1)]), _frame([("dann", 83.0, 82.2, 1)])
    (row,) = [line for line in beside_headline(departure, headline, "vanilla", "x") if line.startswith("| DANN")]
    assert row.endswith("| -12.2 / +0.8 | the headline form | 1 / 1 |")


def test_nothing_in_common_gives_no_lines():
    assert beside_headline(_frame([("dann", 70.0, 82.2, 1)]), _frame([("cdan_e", 80.0, 87.7, 1)]), "vanilla", "x") == []
