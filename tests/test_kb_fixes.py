"""Checks on knowledge/fixes.yaml and knowledge/measurements.yaml.

The tables are read straight from disk (not through ``knowledge.load``) so these tests run even
while other tables listed in index.yaml are still being written.  Schema checks use the same
jsonschema + referencing registry that ``knowledge._schema_problems`` builds.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import pytest
from conftest import SKILL, read_kb, read_yaml

KB = SKILL / "knowledge"

# The constraint ids fixes may name in requires/conflicts (contract with constraints.yaml).
CONSTRAINT_IDS = set(read_yaml(KB / "index.yaml")["required_ids"]["constraints"])
NOT_MEMORY_FIXES = {"change-vpp", "confirm-setting-applied", "find-first-failing-rank", "track-memory-per-step"}


@cache
def _table(name: str) -> dict[str, Any]:
    return read_kb(name)


def _fixes() -> list[dict[str, Any]]:
    return _table("fixes")["fixes"]


def _fix_ids() -> list[str]:
    return [fix["id"] for fix in _fixes()]


def _own_text(fix: dict[str, Any], lang: str | None = None) -> str:
    """Title, summary, effects and apply lines (the fix's own and its per-framework ones): the text a fix's
    recognizers must describe."""
    langs = [lang] if lang else ["en", "zh"]
    parts = [fix[key][code] for key in ("title", "summary", "memory_effect", "throughput_cost") for code in langs]
    if lang in (None, "en"):
        parts += [line for lines in fix["apply"].values() for line in lines]
        parts += [line for entry in fix.get("frameworks") or [] for line in entry["lines"]]
    return "\n".join(parts)


def _matchers(fix: dict[str, Any]) -> list[tuple[str, Any]]:
    """(kind, matcher) for every literal, pattern and phrase of a fix."""
    rec = fix["recognize"]
    out: list[tuple[str, Any]] = [("literal", lit) for lit in rec.get("literals", [])]
    out += [("pattern", re.compile(pat)) for pat in rec.get("patterns", [])]
    out += [("phrase", ph) for phrases in rec.get("phrases", {}).values() for ph in phrases]
    return out


def _hits(matcher: tuple[str, Any], text: str) -> bool:
    kind, value = matcher
    if kind == "pattern":
        return value.search(text) is not None
    return value.lower() in text.lower()


def _validator(table: str):
    import jsonschema
    from referencing import Registry, Resource

    schemas = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in (KB / "schema").glob("*.schema.json")}
    registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas.values())
    return jsonschema.Draft202012Validator(schemas[f"{table}.schema.json"], registry=registry)


@pytest.mark.parametrize("table", ["fixes", "measurements"])
def test_table_matches_its_schema(table):
    problems = _validator(table).iter_errors(_table(table))
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in problems]
    assert errors == []


def test_every_stable_fix_id_exists_once():
    index = _table("index")
    ids = _fix_ids()
    assert len(ids) == len(set(ids))
    assert set(index["required_ids"]["fixes"]) - set(ids) == set()


def test_measurement_ids_unique_and_every_reference_resolves():
    ids = [m["id"] for m in _table("measurements")["measurements"]]
    assert len(ids) == len(set(ids))
    missing = {(fix["id"], ref) for fix in _fixes() for ref in fix.get("measurements", []) if ref not in ids}
    assert missing == set()


def test_every_measurement_is_cited_by_a_fix():
    cited = {ref for fix in _fixes() for ref in fix.get("measurements", [])}
    uncited = {m["id"] for m in _table("measurements")["measurements"]} - cited
    assert uncited == set()


def test_requires_and_conflicts_name_known_constraints():
    unknown = {
        (fix["id"], ref)
        for fix in _fixes()
        for key in ("requires", "conflicts")
        for ref in fix.get(key, [])
        if ref not in CONSTRAINT_IDS
    }
    assert unknown == set()


def test_constraints_table_agrees_when_present():
    if not (KB / "constraints.yaml").is_file():
        pytest.skip("constraints.yaml not written yet")
    declared = {c["id"] for c in _table("constraints")["constraints"]}
    referenced = {ref for fix in _fixes() for key in ("requires", "conflicts") for ref in fix.get(key, [])}
    assert referenced - declared == set()


def test_already_applied_conditions_name_real_facts():
    from memtune.conditions import evaluate, referenced_facts
    from memtune.facts import Facts
    from memtune.situation import Situation

    declared = {f["name"]: None for f in read_yaml(SKILL / "knowledge" / "facts.yaml")["facts"]}  # derived.*
    flat = {**declared, **Facts().flatten(), **Situation().flatten()}
    for fix in _fixes():
        cond = fix.get("already_applied_when")
        if cond is None:
            continue
        assert set(referenced_facts(cond)) <= set(flat), fix["id"]
        # With nothing known, no fix may count as already applied.
        assert evaluate(cond, flat) is False, fix["id"]


def test_memory_fix_flag():
    flags = {fix["id"]: fix.get("is_memory_fix", True) for fix in _fixes()}
    assert {fid for fid, flag in flags.items() if not flag} == NOT_MEMORY_FIXES


def test_every_fix_has_evidence_and_an_interface():
    for fix in _fixes():
        assert fix["evidence"], fix["id"]
        assert any(fix["apply"].values()), fix["id"]


def test_contradiction_resolutions_are_recorded():
    """Fixes touched by facts-sheet section 20 say which claim won (evidence notes)."""
    notes = {fix["id"]: " ".join(e.get("note", "") for e in fix["evidence"]) for fix in _fixes()}
    for fid in (
        "expandable-segments",
        "nccl-graph-register-off",
        "full-recompute",
        "selective-recompute",
        "optimizer-cpu-offload",
        "activation-cpu-offload",
        "distributed-optimizer",
        "moe-token-drop",
    ):
        assert "Contradiction" in notes[fid], fid


@pytest.mark.parametrize("fix_id", _fix_ids())
def test_recognizers_compile_and_describe_their_own_fix(fix_id):
    fix = next(f for f in _fixes() if f["id"] == fix_id)
    rec = fix["recognize"]
    text = _own_text(fix)
    for lit in rec.get("literals", []):
        assert lit.lower() in text.lower(), f"literal {lit!r} not in the fix's own text"
    for pat in rec.get("patterns", []):
        assert re.compile(pat).search(text), f"pattern {pat!r} matches nothing in the fix's own text"
    for lang, phrases in rec.get("phrases", {}).items():
        own = _own_text(fix, lang).lower()
        assert any(ph.lower() in own for ph in phrases), f"no {lang} phrase occurs in the fix's {lang} text"
    # The titles alone must be enough to recognise the fix, in both languages.
    for lang in ("en", "zh"):
        assert any(_hits(m, fix["title"][lang]) for m in _matchers(fix)), f"{lang} title not recognised"


def test_recognizers_do_not_confuse_fixes():
    """No fix's recognizers fire on another fix's title (selective vs full, optimizer vs activation offload...)."""
    clashes = []
    for owner in _fixes():
        for other in _fixes():
            if other is owner:
                continue
            for lang in ("en", "zh"):
                title = other["title"][lang]
                clashes += [
                    (owner["id"], m[1] if m[0] != "pattern" else m[1].pattern, other["id"])
                    for m in _matchers(owner)
                    if _hits(m, title)
                ]
    assert clashes == []


def test_no_literal_is_shared_between_fixes():
    seen: dict[str, str] = {}
    for fix in _fixes():
        for lit in fix["recognize"].get("literals", []):
            key = lit.lower()
            assert key not in seen, f"{lit!r} in both {seen[key]} and {fix['id']}"
            seen[key] = fix["id"]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        # Snippets written the way an agent's Markdown answer states a fix (not copied from the KB).
        ("Export `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` before torchrun.", "expandable-segments"),
        ("Switch to `model.recompute_granularity=full` with the block method.", "full-recompute"),
        ("Add selective recomputation of `moe_act`.", "selective-recompute"),
        ("Raise TP from 4 to 8 inside the node.", "increase-tp"),
        ("Go from PP 4 → 8 and keep DP.", "increase-pp"),
        ("Change VPP 5 → 10 only to shrink the bubble.", "change-vpp"),
        ("Offload the optimizer states to host memory at a 0.5 fraction.", "optimizer-cpu-offload"),
        ("Offload activations to the CPU for 4 layers (needs PP=1).", "activation-cpu-offload"),
        ("把 TP 增大到 8。", "increase-tp"),
        ("建议关闭 CUDA graph。", "disable-cuda-graphs"),
    ],
)
def test_answer_snippets_map_to_one_fix(answer, expected):
    matched = {fix["id"] for fix in _fixes() if any(_hits(m, answer) for m in _matchers(fix))}
    assert matched == {expected}
