"""Score answers against scenario expectations and aggregate the benchmark metrics.

Free text and JSON end up as the same ``Answer`` (see answer.py), so one set of rules
scores both:

* first fix  — the answer's first recommended fix is one of ``expect.first_fix``;
* cause      — the answer's top cause is one of ``expect.cause``;
* include    — each ``fixes_include`` id is recommended somewhere (micro-averaged recall);
* avoid      — each ``avoid_include`` id is flagged as avoid / not-first (micro-averaged recall);
* violations — each ``never_recommend`` id that the answer recommends counts one;
* mentions   — each literal appears in the answer text (case and spacing ignored).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memtune.errors import UserError
from memtune.recognize import Recognizer

from .answer import Answer, Grading, current_settings, fix_settings, fix_switches, from_json, from_markdown
from .scenario import Scenario, kb_entries

METRICS = ("first_fix_accuracy", "cause_accuracy", "include_recall", "avoid_recall", "violations", "mentions_recall")


@dataclass
class Check:
    expected: list[str]
    got: str | None
    ok: bool


@dataclass
class Recall:
    expected: list[str]
    missing: list[str]


@dataclass
class ScenarioScore:
    id: str
    category: str
    language: str
    source: str = "markdown"
    set: str = "dev"  # the scenario batch (reported separately)
    first_fix: Check | None = None
    cause: Check | None = None
    fixes_include: Recall | None = None
    avoid_include: Recall | None = None
    violations: list[str] = field(default_factory=list)
    mentions: Recall | None = None
    error: str | None = None
    why: dict[str, str] = field(default_factory=dict)  # the text behind the first fix, violations and cause

    @property
    def passed(self) -> bool:
        checks_ok = all(c.ok for c in (self.first_fix, self.cause) if c is not None)
        recalls_ok = all(not r.missing for r in (self.fixes_include, self.avoid_include, self.mentions) if r)
        return self.error is None and checks_ok and recalls_ok and not self.violations

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["passed"] = self.passed
        return data


@dataclass(frozen=True)
class Scorer:
    """Recognition tables plus grading vocabulary: everything needed to read a free-text answer."""

    fixes: Recognizer
    causes: Recognizer
    grading: Grading
    switches: dict[str, dict[str, bool]] = field(default_factory=dict)  # fix -> setting -> on/off it writes
    settings: dict[str, tuple[str, str]] = field(default_factory=dict)  # fix -> (setting, value) it writes first

    @classmethod
    def from_kb(cls, kb_root: Path | None = None, grading: Grading | None = None) -> Scorer:
        """Fix patterns from knowledge/fixes.yaml; cause cues from causes.yaml if it has any, else grading.yaml."""
        grading = grading or Grading.load()
        fixes = Recognizer.from_recognize(kb_entries("fixes", kb_root), "knowledge/fixes.yaml")
        if not fixes.ids:
            raise UserError("knowledge/fixes.yaml: no fix declares `recognize`, free-text answers cannot be scored")
        fallback = Recognizer.from_phrases(grading.cause_phrases, "benchmarks/grading.yaml: causes")
        causes = Recognizer.from_recognize(kb_entries("causes", kb_root), "knowledge/causes.yaml").merged(fallback)
        entries = kb_entries("fixes", kb_root)
        return cls(fixes, causes, grading, fix_switches(entries), fix_settings(entries))

    def read_markdown(self, text: str, inputs: Mapping[str, Any] | None = None) -> Answer:
        """``inputs``: the scenario's inputs, so a command line that repeats the run's settings is read as such."""
        return from_markdown(text, self.fixes, self.causes, self.grading, self.switches,
                             current_settings(inputs) if inputs else None, self.settings)

    @staticmethod
    def read_json(diagnosis: dict[str, Any], markdown: str = "") -> Answer:
        return from_json(diagnosis, markdown)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def score(scenario: Scenario, answer: Answer) -> ScenarioScore:
    expect = scenario.expect
    result = ScenarioScore(scenario.id, scenario.category, scenario.language, source=answer.source, set=scenario.set)
    if "first_fix" in expect:
        result.first_fix = Check(expect["first_fix"], answer.first_fix, answer.first_fix in expect["first_fix"])
    if "cause" in expect:
        result.cause = Check(expect["cause"], answer.top_cause, answer.top_cause in expect["cause"])
    recommended, avoided = set(answer.recommended), set(answer.avoided)
    if "fixes_include" in expect:
        wanted = expect["fixes_include"]
        result.fixes_include = Recall(wanted, [f for f in wanted if f not in recommended])
    if "avoid_include" in expect:
        wanted = expect["avoid_include"]
        result.avoid_include = Recall(wanted, [f for f in wanted if f not in avoided])
    result.violations = [f for f in expect.get("never_recommend", []) if f in recommended]
    for ident in [answer.first_fix, *result.violations]:
        if ident and ident in answer.why:
            result.why[ident] = answer.why[ident]
    if answer.top_cause and f"cause:{answer.top_cause}" in answer.why:
        result.why[f"cause:{answer.top_cause}"] = answer.why[f"cause:{answer.top_cause}"]
    if "mentions" in expect:
        text = _norm(answer.text)
        result.mentions = Recall(expect["mentions"], [m for m in expect["mentions"] if _norm(m) not in text])
    return result


def failed(scenario: Scenario, error: str) -> ScenarioScore:
    """A scenario the runner could not get an answer for: every expectation counts as missed."""
    result = score(scenario, Answer(source="error"))
    result.error = error
    return result


def _ratio(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def summarize(scores: Iterable[ScenarioScore]) -> dict[str, Any]:
    """The headline numbers for a group of scenario scores (None where nothing was expected)."""
    scores = list(scores)
    ff = [s.first_fix for s in scores if s.first_fix]
    ca = [s.cause for s in scores if s.cause]

    def recall(attr: str) -> float | None:
        recalls = [getattr(s, attr) for s in scores if getattr(s, attr)]
        total = sum(len(r.expected) for r in recalls)
        return _ratio(total - sum(len(r.missing) for r in recalls), total)

    return {
        "scenarios": len(scores),
        "passed": sum(s.passed for s in scores),
        "errors": sum(s.error is not None for s in scores),
        "first_fix_accuracy": _ratio(sum(c.ok for c in ff), len(ff)),
        "cause_accuracy": _ratio(sum(c.ok for c in ca), len(ca)),
        "include_recall": recall("fixes_include"),
        "avoid_recall": recall("avoid_include"),
        "violations": sum(len(s.violations) for s in scores),
        "mentions_recall": recall("mentions"),
    }


def metrics(scores: list[ScenarioScore]) -> dict[str, Any]:
    """The benchmark's JSON result: overall numbers, per category, per scenario."""
    categories = sorted({s.category for s in scores})
    result = summarize(scores)
    result["per_category"] = {c: summarize(s for s in scores if s.category == c) for c in categories}
    sets = sorted({s.set for s in scores})
    result["per_set"] = {name: summarize(s for s in scores if s.set == name) for name in sets}
    result["per_scenario"] = [s.to_dict() for s in scores]
    return result
