"""The knowledge base as a whole: valid, cross-referenced, every stable id present, every fix exercised."""

import shutil

import pytest
import yaml
from conftest import SKILL, read_yaml, write_yaml
from memtune import knowledge


def test_shipped_knowledge_base_is_valid(kb):
    assert knowledge.validate(kb) == []


def test_every_stable_id_exists(kb):
    for table, ids in kb.index["required_ids"].items():
        assert set(ids) <= set(kb.by_id[table]), table


def test_every_cause_and_fix_is_reachable_from_a_rule_or_a_situation(kb):
    """A fix no rule or situation recommends or warns about is dead knowledge (sqlfluff: every rule has a test);
    a cause is concluded by a rule or supported by a situation (causes.yaml situation.supports)."""
    named = {f for r in kb.entries("rules") for f in r.get("fixes", [])}
    named |= {a["fix"] for r in kb.entries("rules") for a in r.get("avoid", [])}
    named |= {f for c in kb.entries("constraints") for f in c.get("blocks_fixes", [])}
    for cause in kb.entries("causes"):
        sit = cause.get("situation") or {}
        named |= {*sit.get("fixes", []), *([sit["check_fix"]] if sit.get("check_fix") else [])}
    assert set(kb.by_id["fixes"]) - named == set()
    concluded = {r["cause"] for r in kb.entries("rules")}
    concluded |= {c["id"] for c in kb.entries("causes") if (c.get("situation") or {}).get("supports")}
    assert concluded == set(kb.by_id["causes"])


@pytest.fixture
def kb_copy(tmp_path, private_home):
    """An editable copy of knowledge/ (its start-up cache goes to the test's own home, not the user's)."""
    dst = tmp_path / "knowledge"
    shutil.copytree(SKILL / "knowledge", dst)
    knowledge.load.cache_clear()
    yield dst
    knowledge.load.cache_clear()


def _edit(path, mutate):
    data = read_yaml(path)
    mutate(data)
    write_yaml(path, data)


def test_unknown_fix_in_rule_is_reported(kb_copy):
    _edit(kb_copy / "rules.yaml", lambda d: d["rules"][0]["fixes"].append("no-such-fix"))
    problems = knowledge.validate(knowledge.load(str(kb_copy)))
    assert any("unknown fix 'no-such-fix'" in p for p in problems)


def test_where_a_new_rule_stands_does_not_reorder_a_causes_fixes(kb_copy):
    """A narrow rule placed first in rules.yaml once moved its fix to the front of its cause's own fixes (the order
    a check's follow-up and a situation-only proposal use); each cause now states that order in causes.yaml."""
    from memtune.engine import cause_fixes

    before = knowledge.load(str(kb_copy))
    want = {c["id"]: cause_fixes(c["id"], before) for c in before.entries("causes")}
    rule = {**before.get("rules", "rl-loss-over-the-vocabulary"), "id": "narrow-first", "cause": "checkpoint-load",
            "fixes": ["offload-trainer-states", "convert-sharded"]}
    _edit(kb_copy / "rules.yaml", lambda d: d["rules"].insert(0, rule))
    knowledge.load.cache_clear()
    after = knowledge.load(str(kb_copy))
    assert after.entries("rules")[0]["id"] == "narrow-first"
    assert {c: cause_fixes(c, after) for c in want} == want
    # every cause states its fixes, except a refused configuration: its fix is the setting the refusing check names
    # (the violated constraint's alternatives, through the rules' fixes_from), not one list for every refusal
    assert all(fixes for cause, fixes in want.items() if cause != "config-incompatibility")
    assert want["config-incompatibility"] == []


def test_unknown_fact_in_condition_is_reported(kb_copy):
    bogus = {"all": [{"fact": "log.nope", "truthy": True}]}
    _edit(kb_copy / "rules.yaml", lambda d: d["rules"][0].update({"when": bogus}))
    problems = knowledge.validate(knowledge.load(str(kb_copy)))
    assert any("unknown fact 'log.nope'" in p for p in problems)


def test_schema_error_names_table_and_path(kb_copy):
    _edit(kb_copy / "fixes.yaml", lambda d: d["fixes"][0].pop("undo"))
    problems = knowledge.validate(knowledge.load(str(kb_copy)))
    assert any(p.startswith("fixes.yaml: fixes/0") and "'undo' is a required property" in p for p in problems)


def test_catalog_text_without_english_and_english_without_translation_are_reported(kb_copy):
    """knowledge/zh/ mirrors the English tables: a translation of a unit that is gone, or English text whose
    translation is missing, is one line naming the file and the key path."""
    _edit(kb_copy / "zh" / "fixes.yaml", lambda d: d["fixes"].update({"no-such-fix": {"title": {"zh": "无"}}}))
    _edit(kb_copy / "zh" / "causes.yaml", lambda d: d["causes"]["fragmentation"]["title"].pop("zh"))
    problems = knowledge.validate(knowledge.load(str(kb_copy)))
    assert "zh/fixes.yaml: fixes/no-such-fix: no English counterpart in fixes.yaml" in problems
    assert ("causes.yaml: causes/fragmentation/title: English text without its zh translation "
            "(add it to zh/causes.yaml)") in problems


def test_catalog_merges_units_by_id_and_list_items_by_position():
    table = {"units": [{"id": "a", "t": {"en": "A"}}, {"id": "b", "t": {"en": "B"}}],
             "words": ["x", "z"], "pairs": [{"en": "p"}]}
    catalog = {"units": {"b": {"t": {"zh": "乙"}}}, "words": {1: "y", 3: "w"}, "pairs": {0: {"zh": "对"}}}
    assert knowledge.merge_catalog(table, catalog) == []
    assert table == {"units": [{"id": "a", "t": {"en": "A"}}, {"id": "b", "t": {"en": "B", "zh": "乙"}}],
                     "words": ["x", "y", "z", "w"], "pairs": [{"en": "p", "zh": "对"}]}
    assert knowledge.merge_catalog(table, {"units": {"gone": {"t": {"zh": "丙"}}}}) == ["units/gone"]


def test_comment_that_cuts_a_value_is_reported(kb_copy):
    path = kb_copy / "causes.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("schema_version: 1", "schema_version: 1\nnote_for_test: see PR #3107", 1),
                    encoding="utf-8")
    problems = [p for p in knowledge._truncation_problems(knowledge.load(str(kb_copy))) if p.startswith("causes")]
    assert len(problems) == 1 and "causes.yaml:6:" in problems[0] and "quote the value" in problems[0]


def test_malformed_yaml_names_file_and_line(kb_copy):
    (kb_copy / "ui.yaml").write_text("ui: [unclosed\n", encoding="utf-8")
    with pytest.raises(knowledge.KnowledgeError, match=r"ui.yaml: line \d+"):
        knowledge.load(str(kb_copy))


def test_a_key_given_twice_in_one_mapping_is_a_problem():
    """YAML keeps the last of two equal keys: a second `patterns:` once erased a recogniser (issue 8)."""
    import yaml
    from memtune.knowledge import _duplicate_keys

    text = "fixes:\n  - id: a\n    recognize:\n      patterns: ['x']\n      literals: [y]\n      patterns: ['z']\n"
    problems = _duplicate_keys(yaml.compose(text), "fixes.yaml")
    assert problems == ["fixes.yaml:6: key 'patterns' given twice in one mapping (first at line 4); "
                        "YAML keeps only the last"]
    assert _duplicate_keys(yaml.compose("a: {b: 1}\nc: {b: 2}\n"), "x.yaml") == []


def test_kb_validate_compiles_every_log_regex(kb_copy, capsys):
    """Commands compile a signature's regex only when a log reaches it; `kb validate` compiles them all, so a
    broken one in an entry no example exercises is still one line naming the entry, and exit 1."""
    from memtune import cli

    path = kb_copy / "signatures.yaml"
    data = read_yaml(path)
    data["signatures"][-1]["regex"] = "Tried to allocate ("
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="ascii")  # the table stays ASCII
    assert cli.main(["kb", "validate", "--dir", str(kb_copy)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any("signatures.yaml:" in line and "invalid regex" in line for line in lines), lines
