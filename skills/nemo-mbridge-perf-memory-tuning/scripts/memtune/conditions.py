"""The small condition language that rules and constraints use, evaluated without eval().

A condition is one of::

    {fact: NAME, <op>: VALUE}        ops: eq ne gt ge lt le in not_in contains
                                          exists truthy matches
    {all: [COND, ...]}  {any: [COND, ...]}  {not: COND}

VALUE may be a literal or ``{fact: OTHER, scale: 0.9}`` to compare two facts.
An unknown fact (None) makes every comparison false except ``exists: false``
and ``truthy: false``, so a rule never fires on evidence nobody gave.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

OPERATORS = ("eq", "ne", "gt", "ge", "lt", "le", "in", "not_in", "contains", "exists", "truthy", "matches")


def evaluate(cond: Mapping[str, Any], facts: Mapping[str, Any]) -> bool:
    """True when ``cond`` holds over the flat fact mapping."""
    return compiled(cond)(facts)


Check = Callable[[Mapping[str, Any]], bool]
_COMPILED: dict[int, tuple[Mapping[str, Any], Check]] = {}  # id -> (the condition, kept alive so its id stays its)
COMPILED_KEPT = 4096  # conditions remembered; the knowledge base has a few hundred


def compiled(cond: Mapping[str, Any]) -> Check:
    """``cond`` as a function of the facts, built once per condition object: the planner checks a few hundred
    conditions tens of thousands of times, and walking the mapping each time (which key is present, which of
    twelve operators) cost more than the comparisons.  Same results as walking it, errors included."""
    hit = _COMPILED.get(id(cond))
    if hit is not None and hit[0] is cond:
        return hit[1]
    check = _compile(cond)
    if len(_COMPILED) >= COMPILED_KEPT:
        _COMPILED.clear()
    _COMPILED[id(cond)] = (cond, check)
    return check


def _compile(cond: Mapping[str, Any]) -> Check:
    if "all" in cond:
        parts = tuple(_compile(c) for c in cond["all"])
        return lambda facts: all(p(facts) for p in parts)
    if "any" in cond:
        parts = tuple(_compile(c) for c in cond["any"])
        return lambda facts: any(p(facts) for p in parts)
    if "not" in cond:
        inner = _compile(cond["not"])
        return lambda facts: not inner(facts)
    name = cond["fact"]
    op = next((o for o in OPERATORS if o in cond), None)
    if op is None:
        def unusable(facts: Mapping[str, Any]) -> bool:
            raise ValueError(f"condition on {name!r} names no operator")
        return unusable
    operand = cond[op]
    if isinstance(operand, Mapping) and "fact" in operand:
        other, scale = operand["fact"], operand.get("scale", 1)

        def versus(facts: Mapping[str, Any]) -> bool:
            value = facts.get(other)
            return _apply(op, facts.get(name), None if value is None else value * scale)
        return versus
    return lambda facts: _apply(op, facts.get(name), operand)


def referenced_facts(cond: Mapping[str, Any]) -> Iterator[str]:
    """Every fact name a condition reads (for knowledge-base cross-checks)."""
    for key in ("all", "any"):
        for sub in cond.get(key, []):
            yield from referenced_facts(sub)
    if "not" in cond:
        yield from referenced_facts(cond["not"])
    if "fact" in cond:
        yield cond["fact"]
        for op in OPERATORS:
            ref = cond.get(op)
            if isinstance(ref, Mapping) and "fact" in ref:
                yield ref["fact"]


def _resolve(operand: Any, facts: Mapping[str, Any]) -> Any:
    if isinstance(operand, Mapping) and "fact" in operand:
        other = facts.get(operand["fact"])
        if other is None:
            return None
        return other * operand.get("scale", 1)
    return operand


def _apply(op: str, value: Any, operand: Any) -> bool:
    if op == "exists":
        return (value is not None and value != [] and value != {}) == bool(operand)
    if op == "truthy":
        return bool(value) == bool(operand)
    if value is None or (operand is None and op not in ("eq", "ne")):
        return False
    if op == "eq":
        return value == operand
    if op == "ne":
        return value != operand
    if op == "in":
        return value in operand
    if op == "not_in":
        return value not in operand
    if op == "contains":
        if isinstance(value, str):
            return isinstance(operand, str) and operand in value
        return operand in value if isinstance(value, (list, tuple, set, dict)) else False
    if op == "matches":
        return re.search(operand, str(value)) is not None
    try:
        if op == "gt":
            return value > operand
        if op == "ge":
            return value >= operand
        if op == "lt":
            return value < operand
        return value <= operand
    except TypeError:
        return False
