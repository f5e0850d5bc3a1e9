import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session", autouse=True)
def _checkout_datasets_unchanged():
    """No test writes into this checkout's datasets/ (lock files, lists, declarations): tests fetch into tmp_path
    (the ``isolated`` fixture of tests/data_fixtures.py)."""
    from data_fixtures import checkout_datasets_state

    before = checkout_datasets_state()
    yield
    after = checkout_datasets_state()
    changed = sorted(p for p in {*before, *after} if before.get(p) != after.get(p))
    assert not changed, f"tests wrote into the checkout's datasets/: {', '.join(changed)}"
