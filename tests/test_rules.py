"""Every rule's own examples: `fires` must satisfy its condition, `silent` must not (sqlfluff-style)."""

import pytest
from conftest import read_kb
from memtune.conditions import evaluate
from memtune.textfmt import fill

RULES = read_kb("rules")["rules"]
CASES = [(r["id"], kind, i, facts) for r in RULES for kind in ("fires", "silent")
         for i, facts in enumerate(r["tests"][kind])]


@pytest.mark.parametrize("rule_id,kind,index,facts", CASES, ids=[f"{c[0]}-{c[1]}{c[2]}" for c in CASES])
def test_rule_examples(rule_id, kind, index, facts):
    rule = next(r for r in RULES if r["id"] == rule_id)
    assert evaluate(rule["when"], facts) is (kind == "fires")


@pytest.mark.parametrize("rule", RULES, ids=[r["id"] for r in RULES])
def test_explanations_fill_without_unknowns(rule):
    """With its first firing example, each explanation names only facts that example knows, in both languages."""
    facts = rule["tests"]["fires"][0]
    for lang in ("en", "zh"):
        text = fill(rule["explain"][lang], facts)
        assert text.strip()


def test_every_rule_id_unique():
    ids = [r["id"] for r in RULES]
    assert len(ids) == len(set(ids))
