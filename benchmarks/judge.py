"""An outside judge (an LLM, a person behind a script) beside the rule scorer: ``run.py --judge-cmd CMD``.

The command runs once per answer, without a shell and in its own process group (as ``--agent-cmd``
does), and reads one JSON document on stdin:

    {"scenario": {"id", "question", "expect", "fix_ids", "cause_ids"}, "answer": "<the Markdown answer>"}

It prints one JSON object: ``{"first_fix": ID|null, "recommended": [ID...], "avoided": [ID...],
"cause": ID|null}`` using the ids given.  Its verdicts are scored exactly like the rule scorer's
and every disagreement between the two is listed, so a reader sees where to look.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import producers
from .answer import Answer
from .scenario import KnownIds, Scenario
from .score import ScenarioScore, score

MAX_VERDICT_BYTES = 64 * 1024


@dataclass(frozen=True)
class Disagreement:
    scenario: str
    measure: str  # first_fix | violations | cause
    rules: Any
    judge: Any


def request(scenario: Scenario, markdown: str, ids: KnownIds) -> str:
    return json.dumps({
        "scenario": {"id": scenario.id, "question": scenario.question, "expect": scenario.expect,
                     "fix_ids": sorted(ids.fixes), "cause_ids": sorted(ids.causes)},
        "answer": markdown,
    }, ensure_ascii=False)


def parse_verdict(text: str, ids: KnownIds) -> Answer:
    """The judge's JSON as an Answer; ValueError names what is wrong."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")

    def one(key: str, known: frozenset[str]) -> str | None:
        value = data.get(key)
        if value is not None and value not in known:
            raise ValueError(f"{key}: unknown id {value!r}")
        return value

    def many(key: str) -> list[str]:
        values = data.get(key) or []
        if not isinstance(values, list) or any(v not in ids.fixes for v in values):
            raise ValueError(f"{key}: expected a list of fix ids")
        return list(values)

    first = one("first_fix", ids.fixes)
    recommended = many("recommended")
    if first and first not in recommended:
        recommended.insert(0, first)
    cause = one("cause", ids.causes)
    return Answer(recommended=recommended, avoided=many("avoided"), causes=[cause] if cause else [],
                  first_fix=first, source="judge")


def judge(scenario: Scenario, markdown: str, command: str, ids: KnownIds, timeout: float) -> Answer | str:
    """The judge's reading of one answer, or an error string."""
    try:
        code, out, err, error = producers.run_agent(producers.agent_argv(command), request(scenario, markdown, ids),
                                                    producers.agent_env(scenario), timeout, MAX_VERDICT_BYTES)
    except OSError as exc:
        return f"judge command could not start: {exc}"
    if error:
        return error.replace("agent", "judge")
    if code != 0:
        return f"judge command exited {code}: {producers.last_line(err)}"
    try:
        return parse_verdict(out.decode("utf-8", "replace"), ids)
    except (ValueError, TypeError) as exc:
        return f"judge verdict is not usable: {exc}"


def disagreements(rules: ScenarioScore, judged: ScenarioScore) -> list[Disagreement]:
    out = []
    if rules.first_fix and judged.first_fix and rules.first_fix.ok != judged.first_fix.ok:
        out.append(Disagreement(rules.id, "first_fix", rules.first_fix.got, judged.first_fix.got))
    if sorted(rules.violations) != sorted(judged.violations):
        out.append(Disagreement(rules.id, "violations", rules.violations, judged.violations))
    if rules.cause and judged.cause and rules.cause.ok != judged.cause.ok:
        out.append(Disagreement(rules.id, "cause", rules.cause.got, judged.cause.got))
    return out


def score_judged(scenario: Scenario, verdict: Answer | str) -> ScenarioScore | None:
    return score(scenario, verdict) if isinstance(verdict, Answer) else None
