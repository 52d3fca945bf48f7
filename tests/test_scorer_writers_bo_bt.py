"""How the scorer reads what writers bo / br (a commit message and PR description), bp / bs (an answer compressed
into symbols: MBS↓, TP↑, CP×2, ✓ ✗ ①②③) and bq / bt (a terminal transcript of what was tried) showed: 120
answers written and labelled blind on 2026-12-06, first read 66.7 / 54.2 / 90.8 % (verdict / id / violations)
on c8ade6c.

The classes:
- the symbols name the change: a batch size followed by ↓ lowers it, TP / PP / CP followed by ↑ or ×2 raise it, and
  --gradient_checkpointing true is full recompute;
- a cross right after an option (TP↑8 ✗) strikes it;
- a transcript's read-only command ($ nvidia-smi, $ grep ...) is a check that was run, and a command whose comment
  says it failed (# same OOM) is an attempt that failed, neither is advice;
- in a code block, a fix read from a line derived from the block (a diff's "lower KEY") stands where KEY is written.
"""

from __future__ import annotations


def test_symbols_name_the_change(scorer):
    # bp-003 (writer bp): the ordinals give the order, the arrows the direction
    text = ("① per_device_train_batch_size ↓1, grad_accum ↑ (keep global) ✓ ② --gradient_checkpointing true ✓ (full) "
            "③ vllm_gpu_memory_utilization 0.9→0.5 ✓\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "reduce-micro-batch"
    assert {"full-recompute", "shrink-colocated-engine"} <= set(answer.recommended)


def test_a_cross_after_an_option_strikes_it(scorer):
    text = "① MBS 4↓1 ✓\n② TP↑8 ✗ (不跨节点)\n"
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "reduce-micro-batch" and "increase-tp" in answer.avoided
    assert "increase-tp" not in answer.recommended


def test_a_transcripts_checks_and_failed_attempts_are_not_advice(scorer):
    # bq-003 / bq-010 (writer bq): the agent's nvidia-smi is a check; the max_tokens_per_mb run OOMed again
    text = ("```\n$ nvidia-smi --query-gpu=memory.used --format=csv -l 2 &\n"
            "$ python -m areal.launcher.local ... actor.mb_spec.max_tokens_per_mb=4096  # same OOM\n"
            "```\n\n"
            "Run this instead:\n\n"
            "```\n$ python3 -m verl.trainer.main_ppo ... actor_rollout_ref.rollout.gpu_memory_utilization=0.35\n```\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "shrink-colocated-engine"
    assert "reduce-micro-batch" not in answer.recommended and "track-memory-per-step" not in answer.recommended


def test_a_fix_read_from_a_diff_stands_where_its_key_is_written(scorer):
    # jj-007 (writer jj): the diff lowers the per-device batch first, then turns on checkpointing
    text = ("```diff\n- per_device_train_batch_size: 4\n+ per_device_train_batch_size: 1\n"
            "+ gradient_accumulation_steps: 4\n+ gradient_checkpointing: true\n```\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "reduce-micro-batch" and "full-recompute" in answer.recommended
