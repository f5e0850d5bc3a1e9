import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session", autouse=True)
def _checkout_datasets_unchanged():
    """No test writes into this checkout's datasets/ (lock files, lists, declarations): tests fetch into tmp_path
    (the ``isolated`` fixture of tests/data_fixtures.py)."""
    from data_fixtures import checkout_datasets_state

    from dmp.data import registry

    write_lock, checkout = registry.write_lock, (registry.PROJECT / "datasets").resolve()

    def guarded(name, lock):  # the offending test fails at once, naming the file
        path = registry.lock_path(name).resolve()
        assert checkout not in path.parents, f"a test wrote {path} into the checkout: use the isolated fixture"
        return write_lock(name, lock)

    before = checkout_datasets_state()
    registry.write_lock = guarded
    yield
    registry.write_lock = write_lock
    after = checkout_datasets_state()
    changed = sorted(p for p in {*before, *after} if before.get(p) != after.get(p))
    assert not changed, f"tests wrote into the checkout's datasets/: {', '.join(changed)}"
