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
