"""How the scorer reads the misreadings that writers kk (an issue-tracker triage bot), ll (a maintainer's triage
comment) and mm (a vendor support email) showed: the session's last unseen batch of 2026-12-05, first read
57.5 / 55.0 / 85.0 % (verdict / id / violations).

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: a paragraph of "Field: value" lines is one unit per field; a line that opens on a rejection
mark (❌) argues against all it names; 请不要采用 closing a sentence; "Symptoms" / 问题概述 restate the report.
"""

from __future__ import annotations


def test_a_triage_bots_fields_are_read_one_by_one(scorer):
    # kk-020: one paragraph, each line a field
    text = ("✅ **Triage** — Severity: Low · Confidence: High\n"
            "Likely cause: `state_dict = torch.load(restore_path)` has no `map_location`, so every tensor is restored "
            "to the CUDA device it was saved from.\n"
            "Suggested action: `torch.load(restore_path, map_location='cpu')` (as Megatron-LM's checkpointing.py).\n"
            "Not recommended: ❌ `expandable_segments`, smaller micro-batch, selective or full recompute — the memory "
            "is the loaded state dict.\n"
            "Labels: checkpoint-load, nemo, good-first-issue\n")
    answer = scorer.read_markdown(text)
    assert {"expandable-segments", "reduce-micro-batch", "full-recompute"} <= set(answer.avoided)
    assert not answer.recommended


def test_a_question_and_its_answer_stay_one_unit(scorer):
    # gg-022's FAQ lines are labels too, but the answer reads its question
    text = ("Q: Would `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` help?\n"
            "A: No — and don't set it here: it's incompatible with vLLM's sleep-mode allocator.\n")
    assert "expandable-segments" in scorer.read_markdown(text).avoided


def test_a_line_that_opens_on_a_rejection_mark_argues_against_all_it_names(scorer):
    # kk-021
    text = "❌ micro-batch, selective/full recompute, activation offload — nothing has run forward yet.\n"
    answer = scorer.read_markdown(text)
    assert {"full-recompute", "activation-cpu-offload"} <= set(answer.avoided) and not answer.recommended


def test_please_do_not_adopt_closes_a_chinese_sentence_against_its_list(scorer):
    # mm-012
    text = ('开启 expandable_segments、调小 micro batch，或清理"占用显存的其他进程"（同卡上的那个进程就是 vLLM 本身）'
            "都与该断言无关，请不要采用。\n")
    answer = scorer.read_markdown(text)
    assert {"expandable-segments", "reduce-micro-batch"} <= set(answer.avoided) and not answer.recommended


def test_a_symptoms_section_restates_the_report(scorer):
    # ff-007
    text = ("## Symptoms\nEvery Megatron-FSDP job in the perf/release sweep OOMs at once, across models.\n\n"
            "## Remediation\n1. Pin the container to the previous nightly until the fix lands.\n")
    assert "megatron-fsdp" not in scorer.read_markdown(text).recommended
