"""The condition language: each operator, unknown facts, fact-to-fact comparison, nesting."""

import pytest
from memtune.conditions import evaluate, referenced_facts


@pytest.mark.parametrize("cond,facts,expected", [
    ({"fact": "a.x", "eq": 3}, {"a.x": 3}, True),
    ({"fact": "a.x", "ne": 3}, {"a.x": 4}, True),
    ({"fact": "a.x", "gt": 3}, {"a.x": 3}, False),
    ({"fact": "a.x", "ge": 3}, {"a.x": 3}, True),
    ({"fact": "a.x", "lt": 3}, {"a.x": 2}, True),
    ({"fact": "a.x", "le": 3}, {"a.x": 4}, False),
    ({"fact": "a.x", "in": ["p", "q"]}, {"a.x": "q"}, True),
    ({"fact": "a.x", "not_in": ["p", "q"]}, {"a.x": "r"}, True),
    ({"fact": "a.x", "contains": "lora"}, {"a.x": ["lora", "fp8"]}, True),
    ({"fact": "a.x", "contains": "lora"}, {"a.x": 5}, False),
    ({"fact": "a.x", "contains": 8}, {"a.x": "fp8"}, False),
    ({"fact": "a.x", "contains": "KEY"}, {"a.x": {"KEY": "1"}}, True),
    ({"fact": "a.x", "exists": True}, {"a.x": []}, False),
    ({"fact": "a.x", "exists": False}, {}, True),
    ({"fact": "a.x", "truthy": False}, {"a.x": None}, True),
    ({"fact": "a.x", "matches": "^run_script"}, {"a.x": "run_script.py"}, True),
    ({"fact": "a.x", "gt": 3}, {"a.x": "text"}, False),
])
def test_operators(cond, facts, expected):
    assert evaluate(cond, facts) is expected


def test_unknown_fact_never_satisfies_a_comparison():
    for op in ("eq", "gt", "ge", "lt", "le", "in", "not_in", "contains", "matches"):
        assert evaluate({"fact": "a.missing", op: [1] if op in ("in", "not_in") else 1}, {}) is False


def test_fact_to_fact_comparison_with_scale():
    cond = {"fact": "log.free", "lt": {"fact": "gpu.cap", "scale": 0.5}}
    assert evaluate(cond, {"log.free": 10, "gpu.cap": 30})
    assert not evaluate(cond, {"log.free": 20, "gpu.cap": 30})
    assert not evaluate(cond, {"log.free": 10})


def test_nesting_and_references():
    either = {"any": [{"fact": "b.y", "gt": 2}, {"not": {"fact": "c.z", "truthy": True}}]}
    cond = {"all": [{"fact": "a.x", "eq": 1}, either]}
    assert evaluate(cond, {"a.x": 1, "b.y": 0, "c.z": False})
    assert not evaluate(cond, {"a.x": 1, "b.y": 0, "c.z": True})
    assert sorted(referenced_facts(cond)) == ["a.x", "b.y", "c.z"]


def test_condition_without_operator_is_an_error():
    with pytest.raises(ValueError):
        evaluate({"fact": "a.x"}, {})


def test_a_short_circuit_skips_a_malformed_branch_as_the_walk_did():
    assert evaluate({"any": [{"fact": "a.x", "eq": 1}, {"fact": "a.y"}]}, {"a.x": 1}) is True
    with pytest.raises(ValueError):
        evaluate({"any": [{"fact": "a.x", "eq": 2}, {"fact": "a.y"}]}, {"a.x": 1})


def _walk(cond, facts):
    """The condition language read directly from its mapping (what ``evaluate`` did before it compiled)."""
    from memtune.conditions import OPERATORS, _apply

    if "all" in cond:
        return all(_walk(c, facts) for c in cond["all"])
    if "any" in cond:
        return any(_walk(c, facts) for c in cond["any"])
    if "not" in cond:
        return not _walk(cond["not"], facts)
    op = next(o for o in OPERATORS if o in cond)
    operand = cond[op]
    if isinstance(operand, dict) and "fact" in operand:
        other = facts.get(operand["fact"])
        operand = None if other is None else other * operand.get("scale", 1)
    return _apply(op, facts.get(cond["fact"]), operand)


def _kb_conditions(kb):
    for rule in kb.entries("rules"):
        if rule.get("when"):
            yield rule["when"]
    for con in kb.entries("constraints"):
        if con.get("violated_when"):
            yield con["violated_when"]


def test_compiled_conditions_agree_with_walking_them(kb):
    """Every rule and constraint condition of the knowledge base, over facts of mixed kinds (None, numbers,
    switches, text, lists): compiled and walked give the same verdicts, and fail the same way."""
    import random

    rnd = random.Random(7)
    conds = list(_kb_conditions(kb))
    assert len(conds) > 50
    for cond in conds:
        names = sorted(set(referenced_facts(cond)))
        for _ in range(40):
            facts = {n: rnd.choice([None, 0, 1, 2, 8, 3.5, 1e12, True, False, "te", "selective", ["core_attn"], []])
                     for n in names if rnd.random() < 0.9}
            assert _outcome(evaluate, cond, facts) == _outcome(_walk, cond, facts), (cond, facts)


def _outcome(fn, cond, facts):
    """The verdict, or the type of the error (a list scaled by a float fails the same way in both)."""
    try:
        return fn(cond, facts)
    except (TypeError, ValueError) as exc:
        return type(exc)


def test_a_compiled_condition_is_never_served_for_another():
    first, second = {"fact": "a.x", "eq": 1}, {"fact": "a.x", "eq": 2}
    assert evaluate(first, {"a.x": 1}) and not evaluate(second, {"a.x": 1})
    del first
    third = {"fact": "a.x", "eq": 3}  # may reuse a freed id: the cache keeps its conditions, so it cannot
    assert evaluate(third, {"a.x": 3})
