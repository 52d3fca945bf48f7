"""Test setup: import memtune from scripts/ exactly as the skill launcher does."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(SKILL / "scripts"))


@pytest.fixture
def private_home(tmp_path_factory, monkeypatch):
    """A home of the test's own: for apply's backup journal ($HOME/.local/state) and the knowledge cache
    ($HOME/.cache) when a test looks at them (the rest share the user's cache, filled once)."""
    home = tmp_path_factory.mktemp("home")
    home.chmod(0o700)
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture(scope="session")
def kb():
    from memtune import knowledge

    return knowledge.load()


@pytest.fixture(scope="session")
def snapshot_files(tmp_path_factory):
    """File name -> path of the fixture snapshot pickles, built by tests/fixtures/snapshots/make_snapshots.py."""
    sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "snapshots"))
    import make_snapshots

    return make_snapshots.write(tmp_path_factory.mktemp("snapshots"))


@pytest.fixture
def shared_dir():
    if not SHARED.is_dir():
        pytest.skip("../shared is not beside this checkout")
    return SHARED
