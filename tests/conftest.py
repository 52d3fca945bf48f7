"""Test setup: import memtune from scripts/ exactly as the skill launcher does."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(SKILL / "scripts"))


@pytest.fixture(autouse=True)
def private_home(tmp_path_factory, monkeypatch):
    """apply's backup journal lives under the user's home (~/.local/state): give every test its own home."""
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
