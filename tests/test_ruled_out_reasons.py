"""A ruled-out cause or fix is said with the reason of each rules_out branch that held, and no other.

Every branch of causes.yaml / fixes.yaml situation.rules_out carries an example (flat situation facts under which it
alone holds); each example runs through the engine here and must render exactly its own branch's reason, as semgrep
tests a rule with its examples.  A reason of a branch that did not hold would tell the user something the evidence
never said (a request "larger than the GPU" when no request was read at all).
"""

import contextlib
import io

import pytest
from memtune import cli, engine, knowledge, pipeline, report

LANGS = ("en", "zh")


def _branches(table: str) -> list[tuple[str, int, dict]]:
    kb = knowledge.load()
    return [(entry["id"], n, branch) for entry in kb.entries(table)
            for n, branch in enumerate((entry.get("situation") or {}).get("rules_out") or [])]


def _id(value):
    return value if isinstance(value, (str, int)) else None


def _rendered_why(flat: dict, cause_id: str, kb, lang: str) -> str | None:
    """The reason the answer gives for ruling ``cause_id`` out under ``flat`` (None when it is not ruled out)."""
    diag = engine.diagnose(flat, kb)
    rows = {row["id"]: row["why"] for row in report.ruled_out_report(diag.ruled_out, kb, lang)}
    return rows.get(cause_id)


@pytest.mark.parametrize("cause_id, index, branch", _branches("causes"), ids=_id)
def test_each_cause_branch_says_its_own_reason_when_it_holds(cause_id, index, branch, kb):
    for lang in LANGS:
        assert _rendered_why(dict(branch["example"]), cause_id, kb, lang) == branch["why"][lang]


@pytest.mark.parametrize("fix_id, index, branch", _branches("fixes"), ids=_id)
def test_each_fix_branch_says_its_own_reason_when_it_holds(fix_id, index, branch, kb):
    flat = {**branch["example"], "question.mentioned_fixes": [fix_id]}  # proposed, so the situation can avoid it
    avoided = {a.id: a for a in engine.diagnose(flat, kb).avoid}
    assert fix_id in avoided
    assert engine.fix_ruled_out_whys(kb.get("fixes", fix_id), flat) == (branch["why"],)
    if avoided[fix_id].source_kind == "situation":  # a fired rule's own avoid reason, when there is one, comes first
        assert avoided[fix_id].reason == branch["why"]


def test_nothing_is_ruled_out_on_no_evidence(kb):
    assert engine.diagnose({}, kb).ruled_out == {}
    assert not [f["id"] for f in kb.entries("fixes") if engine.fix_ruled_out(f, {})]


def test_several_branches_that_hold_are_all_said_once_each(kb):
    """A request larger than the GPU during a rollout: both of capacity-model-state's branches hold."""
    branches = kb.get("causes", "capacity-model-state")["situation"]["rules_out"]
    flat = {**branches[0]["example"], **branches[1]["example"]}
    why = _rendered_why(flat, "capacity-model-state", kb, "en")
    assert why == f"{branches[0]['why']['en']}; {branches[1]['why']['en']}"
    zh = _rendered_why(flat, "capacity-model-state", kb, "zh")
    assert zh == f"{branches[0]['why']['zh']}\uff1b{branches[1]['why']['zh']}"


def test_a_fix_ruled_out_twice_says_both_reasons(kb):
    branches = kb.get("fixes", "expandable-segments")["situation"]["rules_out"]
    flat = {**branches[0]["example"], **branches[1]["example"]}
    whys = engine.fix_ruled_out_whys(kb.get("fixes", "expandable-segments"), flat)
    assert engine.join_reasons(whys, {"en": " "})["en"] == f"{branches[0]['why']['en']} {branches[1]['why']['en']}"


def test_kb_validate_refuses_an_example_that_fires_another_branch():
    forward, loss = {"situation.phase": "forward"}, {"situation.phase": "loss"}
    branches = [{"when": {"fact": "situation.phase", "eq": "forward"}, "example": forward},
                {"when": {"fact": "situation.phase", "in": ["forward", "loss"]}, "example": loss}]
    assert knowledge.rules_out_example_problems("t", branches) == [
        "t: rules_out[0].example makes branches [0, 1] hold, not only its own"]


# --- the report that found it: host RAM that grows every step, no OOM message at all ---------------------------------

GROWING_HOST_RAM = "训练的时候内存会不断的增加，最后会出现 OOM 的情况，更新了 vllm 版本后依然没有解决"


def _unheld_reasons(flat: dict, kb) -> dict[str, list[str]]:
    """Per cause, the English reasons of its rules_out branches that do not hold under ``flat``."""
    return {c["id"]: [b["why"]["en"] for b in (c.get("situation") or {}).get("rules_out") or []
                      if not engine.fired_branches([b], flat)] for c in kb.entries("causes")}


def test_growing_host_ram_is_not_ruled_out_by_a_request_nobody_read(kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=GROWING_HOST_RAM), kb)
    assert flat.get("situation.failed") is None and flat.get("log.requested_bytes") is None
    rows = report.ruled_out_report(diag.ruled_out, kb, "en")
    assert {"fragmentation", "capacity-model-state", "foreign-process"} <= {r["id"] for r in rows}
    unheld = _unheld_reasons(flat, kb)
    for row in rows:
        assert not [text for text in unheld[row["id"]] if text in row["why"]], row
        assert "request" not in row["why"] and "larger than" not in row["why"], row


def test_the_answer_line_for_growing_host_ram_gives_no_request_size_reason():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["diagnose", "--question", GROWING_HOST_RAM, "--lang", "en"]) == 0
    line = next(ln for ln in out.getvalue().splitlines() if ln.startswith("Ruled out by the situation"))
    for false_reason in ("larger than the free memory", "larger than the whole GPU", "larger than the GPU",
                         "freeing another process", "lists no other process"):
        assert false_reason not in line
    assert "host (CPU) memory ran out and no GPU allocation failed" in line
