"""Test setup: import memtune from scripts/ exactly as the skill launcher does."""

import ast
import functools
import gc
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(SKILL / "scripts"))


# The heavy sweeps (every log pattern pumped to 1 MB, every signature line repeated, 520 generated layouts) run in
# full as CI's own step (.ci/run sets MEMTUNE_FULL_SWEEPS=1); the suite a maintainer runs takes an even sample of
# each, so it stays under 90 s on two cores and still reaches every kind of case.
FULL_SWEEPS = os.environ.get("MEMTUNE_FULL_SWEEPS") == "1"


def sweep(cases: list[Any], every: int, most: int | None = None) -> list[Any]:
    """All ``cases`` under MEMTUNE_FULL_SWEEPS=1, else every ``every``-th of them (the same ones each run), and at
    most ``most`` of those, evenly spread: a sample of the benchmark's scenarios, which grow by a hundred a week,
    stays as long to run as it was."""
    if FULL_SWEEPS:
        return list(cases)
    picked = list(cases)[::every]
    if most is None or len(picked) <= most:
        return picked
    return [picked[i * len(picked) // most] for i in range(most)]


def sweep_examples(full: int, every: int) -> int:
    """Hypothesis ``max_examples``: ``full`` under MEMTUNE_FULL_SWEEPS=1, else the first ``full // every`` of the
    same derandomized sequence."""
    return full if FULL_SWEEPS else max(1, full // every)


def read_yaml(path: Path) -> Any:
    """A YAML file the tests read for their own data (knowledge tables, fixtures): ``yaml.safe_load`` with
    libyaml's parser where PyYAML has it, the same data several times faster."""
    with open(path, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def write_yaml(path: Path, data: Any) -> None:
    """Write ``data`` as a test's edited knowledge table: ``yaml.safe_dump`` with libyaml's emitter where PyYAML has
    it (the same text, several times faster on the large tables)."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    path.write_text(yaml.dump(data, Dumper=dumper, allow_unicode=True, sort_keys=False), encoding="utf-8")


def read_kb(name: str) -> Any:
    """Knowledge table ``name`` as the skill loads it: ``<name>.yaml`` with its language catalogs (knowledge/zh/)
    merged in, so a test sees the Chinese text that the English file no longer holds."""
    from memtune.knowledge import read_table

    return read_table(SKILL / "knowledge", name)


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The syntax tree of a source file, parsed once per run: several tests walk every module of the package
    (none changes a tree)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def pytest_configure(config):
    """The young generation is collected every 100,000 allocations instead of every 700.

    The suite ends up holding ~700,000 live objects, most of them in the estimator's bounded part caches that
    the planner tests fill (memtune plan pauses the collector for the same reason).  With the default thresholds
    the collector re-scanned them in ~80 full passes, 11 s of a run, and freed almost nothing.  Garbage cycles
    are still freed: at the next young collection, or, for the few that outlive one, at a rarer older one or by
    pytest's collections at the end of the run."""
    gc.set_threshold(100_000, 20, 10)


@pytest.fixture(scope="session", autouse=True)
def _release_caches_at_the_end():
    """Drop what the run kept for speed once the last test is done: pytest then runs five full garbage collections
    (to report unraisable exceptions), each of which scans every live object, and the estimator's part caches
    and the parsed syntax trees are most of them (1.1 million objects, 0.75 s a collection)."""
    yield
    parsed.cache_clear()
    static = sys.modules.get("memtune.estimator.static")
    if static is not None:
        static.clear_caches()


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


@pytest.fixture(scope="session")
def diagnosed():
    """``scenario -> benchmarks.producers.diagnose_runs(scenario)``, run once per benchmark scenario and session:
    the answer-lead and scorer tests read the same 190 JSON and Markdown answers."""
    from benchmarks.producers import diagnose_runs

    runs = {}

    def runs_of(scenario):
        if scenario.path not in runs:
            runs[scenario.path] = diagnose_runs(scenario)
        return runs[scenario.path]

    return runs_of


@pytest.fixture
def shared_dir():
    if not SHARED.is_dir():
        pytest.skip("../shared is not beside this checkout")
    return SHARED


@pytest.fixture(scope="session")
def scorer():
    """The benchmark's free-text scorer with the shipped knowledge base (a module may define its own)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks.score import Scorer

    return Scorer.from_kb()
