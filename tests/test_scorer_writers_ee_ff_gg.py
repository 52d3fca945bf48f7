"""How the scorer reads the misreadings that writers ee (a colleague in a team chat), ff (an SRE runbook) and gg (a
hedging chat assistant) showed: issue 26's unseen batch of 2026-12-05, first read 57.1 / 53.0 / 69.7 % (verdict /
id / violations), kept in benchmarks/answers-held/ after that read, then learned.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in
the test).  The classes: a question that names a fix answered no ("Q: Would X help? A: No"), the answer's
paragraph included; a status cell or label 不采纳 / DEFERRED; "no need for"; "Option B" / "B." after the first
option; a verification label that puts itself first ("Confirm it first:"); a dotted key ("a.b.param_offload") is no
clause end, and what follows "but" in "keep X but ..." is a change; and spellings (memory_allocated() every step,
per-step allocated / reserved, 每步记录 memory_allocated(), record a memory snapshot around one sync, release the
load-time cache before saving).
"""

from __future__ import annotations


def test_a_question_answered_no_argues_against_what_it_named(scorer):
    for case, text, fix in [
        ("gg-022", "Q: Would `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` help?\n"
                   "A: No — and don't set it here: it's incompatible with vLLM's sleep-mode allocator.",
         "expandable-segments"),
        ("gg-001", "Q：调小 batch size、开梯度检查点（gradient checkpointing）、设 "
                   "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` 有用吗？\nA：没用。这些都是 GPU 显存侧的手段。",
         "expandable-segments"),
        ("gg-014", "Q：`expandable_segments` 呢？\nA：不是碎片问题，张量是活着的，分配器设置救不了。",
         "expandable-segments"),
    ]:
        answer = scorer.read_markdown(text + "\n")
        assert fix in answer.avoided and not answer.recommended, case


def test_the_answer_to_a_question_answered_no_still_speaks_of_it(scorer):
    # gg-011: the fix named again inside the answer is the one the answer rejects
    text = ("Q: Would expandable_segments or a smaller micro-batch help?\nA: No. The buffers are referenced, so no "
            "allocator setting can free them (and expandable segments do not work with the engine's allocator).\n")
    answer = scorer.read_markdown(text)
    assert {"expandable-segments", "reduce-micro-batch"} <= set(answer.avoided) and not answer.recommended


def test_a_rejected_status_cell_or_label_in_chinese_is_advice_against(scorer):
    # ff-008 (a table row), ff-016 (a label)
    table = ("| 方案 | 结论 | 原因 |\n|---|---|---|\n"
             "| `expandable_segments:True` | 不采纳 | 这些张量仍被引用，是活的分配，不是碎片 |\n")
    assert "expandable-segments" in scorer.read_markdown(table).avoided
    label = "**不采纳**：仅凭“怀疑碎片”就上 `expandable_segments`——先看第 1 步的数据再说。\n"
    answer = scorer.read_markdown(label)
    assert "expandable-segments" in answer.avoided and not answer.recommended


def test_no_need_for_is_advice_against(scorer):
    # gg-016
    text = ("(You haven't hit an OOM, so there's no reason to change the layout — no need for more GPUs or a "
            "different PP degree.)\n")
    answer = scorer.read_markdown(text)
    assert "add-gpus" in answer.avoided and "add-gpus" not in answer.recommended


def test_option_b_is_not_the_first_option(scorer):
    # gg-018: Option A's fix is the first; Option B only follows
    text = ("**Option A – release the load-time cache before saving** (this is what miles did in PR #270).\n\n"
            "**Option B – spread the conversion over more GPUs** (larger torchrun world, model sharded thinner).\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "checkpoint-save-memory" and "add-gpus" in answer.recommended


def test_a_verification_label_that_puts_itself_first_is_the_first_step(scorer):
    # ff-010
    text = ("## Remediation\n1. Confirm it first: record a memory snapshot around one sync "
            "(torch.cuda.memory._record_memory_history() before, _dump_snapshot() after).\n")
    assert scorer.read_markdown(text).first_fix == "track-memory-per-step"


def test_a_dotted_key_is_no_clause_end_and_but_starts_a_change(scorer):
    # ff-003: the key path's dots do not end the "Keep" clause
    kept = "Keep actor_rollout_ref.actor.megatron.param_offload=True; the offload itself is fine.\n"
    assert "offload-trainer-states" not in scorer.read_markdown(kept).recommended
    # j-001: "keep full recompute but go per-layer: ..." changes the recompute setting
    changed = ("- keep full recompute but go per-layer: "
               "+actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers=1\n")
    assert "full-recompute" in scorer.read_markdown(changed).recommended


def test_spellings_of_the_per_step_measurement_and_the_save_fix(scorer):
    for case, text, fix in [
        ("gg-016", "Log `torch.cuda.memory_allocated()` and `memory_reserved()` every step for, say, 50–100 steps.",
         "track-memory-per-step"),
        ("gg-009", "**My recommendation:** do the per-step allocated/reserved vs `rocm-smi` comparison first.",
         "track-memory-per-step"),
        ("ff-015", "1. **Confirm the per-step leak** before touching anything else — log the trainer's memory after "
                   "each sync.", "track-memory-per-step"),
        ("ff-016", "1. 先区分碎片还是容量：每步记录 `torch.cuda.memory_allocated()` 和 "
                   "`torch.cuda.memory_reserved()`。",
         "track-memory-per-step"),
        ("gg-014", "**先确认（建议第一步就做）**：在 update_actor 里按 rank、按 micro-batch 记录 "
                   "`torch.cuda.memory_allocated()`。", "track-memory-per-step"),
        ("gg-018", "**Option A – release the load-time cache before saving** (this is what miles did in PR #270).",
         "checkpoint-save-memory"),
    ]:
        assert scorer.read_markdown(text + "\n").first_fix == fix, case


def test_hedged_noes_and_an_option_the_answer_turns_down(scorer):
    # gg-010: "Probably not much", "Not needed"
    for text, fix in [
        ("Q: Would PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True help?\nA: Probably not much here — it helps when "
         "memory is free but fragmented.", "expandable-segments"),
        ("Q: Should I check for leftover processes?\nA: Not needed; the trace is from your own trainer.",
         "kill-stale-processes"),
    ]:
        answer = scorer.read_markdown(text + "\n")
        assert fix in answer.avoided and fix not in answer.recommended, text
    # gg-002: the verdict stands in the option's second sentence
    text = ('- Option C – "just make rank 0 smaller" (smaller micro-batch, rebalancing pipeline stages, '
            "expandable_segments). I would not do this: the extra memory belongs to the checkpoint workers.\n")
    answer = scorer.read_markdown(text)
    assert {"reduce-micro-batch", "expandable-segments"} <= set(answer.avoided) and not answer.recommended


def test_a_row_whose_verdict_is_only_if_is_conditional_and_a_parallel_size_of_one_raises_nothing(scorer):
    # ff-017
    table = ("| option | saves | cost | verdict |\n|---|---|---|---|\n"
             "| raise rollout TP | per-GPU weights | more GPUs per replica | only if step 1 does not fit |\n")
    assert not scorer.read_markdown(table).recommended
    block = ("1. Run the rollout engine with `pp_size = 1`:\n\n   ```bash\n"
             "   actor_rollout_ref.rollout.name=sglang \\\n"
             "   actor_rollout_ref.rollout.pipeline_model_parallel_size=1\n   ```\n")
    assert "increase-pp" not in scorer.read_markdown(block).recommended
