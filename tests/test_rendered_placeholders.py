"""No unfilled placeholder in a rendered evidence sentence (issue 27, item 3).

A rule's ``explain`` text (knowledge/rules.yaml, en and zh) is filled from facts; a fact the rule can fire
without renders as "?" ("stage ? would need about ?").  Each rule is run through the engine on its own
``tests.fires`` examples and its evidence is rendered the way ``report.build`` renders it, so an example that
fires a rule is also one whose sentence reads whole: a fact the text names is in the example (the readers
always give it with the facts the condition reads), or the text has a default for it (``{fact|list:default}``).
"""

from __future__ import annotations

import pytest
from memtune import engine, knowledge, report
from memtune.textfmt import _PLACEHOLDER

KB = knowledge.load()
RULES = KB.entries("rules")
LANGS = ("en", "zh")
CASES = [(r["id"], i) for r in RULES for i in range(len(r["tests"]["fires"]))]


def unfilled(template: str, facts: dict) -> list[str]:
    """The placeholders of ``template`` that ``facts`` leaves unknown and that have no default."""
    return [m.group(0) for m in _PLACEHOLDER.finditer(template) if facts.get(m.group(1)) is None and m.group(3) is None]


def rendered_evidence(facts: dict, rule_id: str, lang: str) -> dict[str, str]:
    """Rule id -> evidence sentence, as the report of the engine's diagnosis of ``facts`` prints them; the rule
    under test is rendered the same way where the engine drops it (its example stands in for facts the engine
    computes itself, such as the violated constraints)."""
    diag = engine.diagnose(facts, KB)
    out = {}
    for cause in report.build(diag, facts, KB, lang)["causes"]:
        out.update(zip(cause["rules"], cause["evidence"], strict=True))
    if rule_id not in out:
        rule = KB.get("rules", rule_id)
        cause = KB.get("causes", rule["cause"])
        out[rule_id] = report._evidence(rule_id, KB.by_id["rules"], KB, cause, diag, {**diag.facts, **facts}, lang)
    return out


@pytest.mark.parametrize("rule_id,index", CASES, ids=[f"{r}-fires{i}" for r, i in CASES])
def test_evidence_renders_without_unfilled_placeholders(rule_id, index):
    facts = KB.get("rules", rule_id)["tests"]["fires"][index]
    for lang in LANGS:
        for rid, text in rendered_evidence(facts, rule_id, lang).items():
            template = report._explain(KB.by_id["rules"], rid, KB)[lang]
            assert "{" not in text, f"{rid} ({lang}): a placeholder is left as written: {text}"
            assert text.count("?") == template.count("?"), (
                f"{rid} ({lang}) rendered an unknown fact as '?' {unfilled(template, {**facts})}: {text}")


@pytest.mark.parametrize("rule", RULES, ids=[r["id"] for r in RULES])
def test_every_explain_placeholder_is_known_in_each_firing_example(rule):
    """The same, read off the text: which placeholder each example leaves unknown (the message above names it)."""
    for index, facts in enumerate(rule["tests"]["fires"]):
        for lang in LANGS:
            assert not unfilled(rule["explain"][lang], facts), (rule["id"], index, lang)


def test_the_check_sees_an_unfilled_placeholder():
    assert unfilled("stage {estimate.peak_stage} of {x|list:all}", {}) == ["{estimate.peak_stage}"]
    assert unfilled("stage {estimate.peak_stage}", {"estimate.peak_stage": 0}) == []
