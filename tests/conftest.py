"""Test setup: import memtune from scripts/ exactly as the skill launcher does."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT / "scripts"))


@pytest.fixture(scope="session")
def kb():
    from memtune import knowledge

    return knowledge.load()


@pytest.fixture
def shared_dir():
    if not SHARED.is_dir():
        pytest.skip("../shared is not beside this checkout")
    return SHARED
