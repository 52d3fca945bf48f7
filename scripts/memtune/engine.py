"""The rule engine: facts + knowledge base -> Diagnosis.  Pure; names no fix, cause or model.

Ranking, in words: every rule whose condition holds (a ``fallback`` rule only when
no other does) contributes its cause (with the rule's confidence; a cause keeps the
highest) and its ordered fixes.  Causes
are ranked by confidence, then by rule order in rules.yaml.  Fixes are taken
from the fired rules in that same order.  A fix is then moved out of the
recommendations when (a) some fired rule says to avoid it, (b) a constraint
blocks it in this situation, or (c) its ``already_applied_when`` holds.  A fix's
``companions`` follow it when their condition holds; a rule's ``fixes_from``
adds the ``alternatives`` of the constraints named by those facts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .conditions import evaluate
from .knowledge import Knowledge


@dataclass
class CauseFinding:
    id: str
    confidence: float
    rules: list[str] = field(default_factory=list)  # ids of the rules that concluded it


@dataclass
class FixAdvice:
    id: str
    rank: int
    rules: list[str] = field(default_factory=list)  # rules that recommended it


@dataclass
class AvoidAdvice:
    id: str
    source: str  # rule or constraint id
    source_kind: str  # "rule" | "constraint" | "applied"
    reason: dict[str, str]  # {en, zh}


@dataclass
class Violation:
    id: str  # constraints.yaml id


@dataclass
class Diagnosis:
    kb_version: str
    causes: list[CauseFinding]
    fixes: list[FixAdvice]
    avoid: list[AvoidAdvice]
    already_applied: list[str]
    violations: list[Violation]
    fired_rules: list[str]
    facts: dict[str, Any] = field(default_factory=dict)  # the facts the rules saw, derived ones included


def check_constraints(flat: Mapping[str, Any], kb: Knowledge) -> list[Violation]:
    """Constraints the given config/env already violates."""
    return [
        Violation(con["id"])
        for con in kb.entries("constraints")
        if con.get("violated_when") and evaluate(con["violated_when"], flat)
    ]


def _constraint_alternatives(rule: Mapping[str, Any], flat: Mapping[str, Any], kb: Knowledge) -> list[str]:
    """Fixes a constraint offers instead of the setting it forbids, for the constraints the rule points at."""
    out: list[str] = []
    for fact in rule.get("fixes_from", []):
        for con_id in flat.get(fact) or []:
            out += kb.by_id.get("constraints", {}).get(con_id, {}).get("alternatives", [])
    return out


def diagnose(flat: Mapping[str, Any], kb: Knowledge) -> Diagnosis:
    violations = check_constraints(flat, kb)
    # Rules may reason over the violations themselves (cause config-incompatibility).
    flat = {**flat, "derived.violated_constraints": [v.id for v in violations]}
    rules = kb.entries("rules")
    fired = [(pos, rule) for pos, rule in enumerate(rules) if evaluate(rule["when"], flat)]
    if any(not rule.get("fallback") for _, rule in fired):
        fired = [(pos, rule) for pos, rule in fired if not rule.get("fallback")]

    causes: dict[str, CauseFinding] = {}
    first_pos: dict[str, int] = {}
    for pos, rule in fired:
        finding = causes.setdefault(rule["cause"], CauseFinding(rule["cause"], 0.0))
        finding.confidence = max(finding.confidence, float(rule["confidence"]))
        finding.rules.append(rule["id"])
        first_pos.setdefault(rule["cause"], pos)
    ranked_causes = sorted(causes.values(), key=lambda c: (-c.confidence, first_pos[c.id]))

    cause_rank = {c.id: i for i, c in enumerate(ranked_causes)}
    ordered_rules = sorted(fired, key=lambda pr: (cause_rank[pr[1]["cause"]], -float(pr[1]["confidence"]), pr[0]))

    applied = [
        fix["id"]
        for fix in kb.entries("fixes")
        if fix.get("already_applied_when") and evaluate(fix["already_applied_when"], flat)
    ]
    rule_fixes = {rule["id"]: [*rule.get("fixes", []), *_constraint_alternatives(rule, flat, kb)]
                  for _, rule in fired}

    avoid: dict[str, AvoidAdvice] = {}
    for _, rule in ordered_rules:
        for item in rule.get("avoid", []):
            avoid.setdefault(item["fix"], AvoidAdvice(item["fix"], rule["id"], "rule", item["reason"]))
    # A constraint's blocked fix is worth a warning only if something put it on the table: a fired
    # rule, the user's question, or the config itself (then it has to be turned off).
    proposed = {f for ids in rule_fixes.values() for f in ids}
    proposed |= {*(flat.get("question.mentioned_fixes") or []), *applied}
    for con in kb.entries("constraints"):
        if con.get("blocks_when") and evaluate(con["blocks_when"], flat):
            for fix_id in con.get("blocks_fixes", []):
                if fix_id in proposed:
                    avoid.setdefault(fix_id, AvoidAdvice(fix_id, con["id"], "constraint", con["message"]))

    fixes: dict[str, FixAdvice] = {}

    def recommend(fix_id: str, because: str) -> None:
        if fix_id in avoid or fix_id in applied:
            return
        fixes.setdefault(fix_id, FixAdvice(fix_id, len(fixes) + 1)).rules.append(because)
        for companion in kb.get("fixes", fix_id).get("companions", []):
            if companion["fix"] not in fixes and evaluate(companion["when"], flat):
                recommend(companion["fix"], fix_id)

    for _, rule in ordered_rules:
        for fix_id in rule_fixes[rule["id"]]:
            recommend(fix_id, rule["id"])

    return Diagnosis(
        kb_version=kb.version,
        causes=ranked_causes,
        fixes=list(fixes.values()),
        avoid=list(avoid.values()),
        already_applied=applied,
        violations=violations,
        fired_rules=[rule["id"] for _, rule in fired],
        facts=flat,
    )
