"""How the scorer reads the misreadings that writers hh (a tutor), ii (a code review of the config) and jj (an edited
Q&A-site answer) showed: issue 26's unseen batch of 2026-12-05, first read 52.2 / 42.4 / 53.0 % (verdict / id /
violations).

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: struck-through advice (~~...~~) is withdrawn; a "Common mistakes" / 误区 / "outdated" section,
a "won't fix:" label; a blockquote is someone else's words (a comment, a log, a helper's output); the sentence after
a list that opens on "None of them" still speaks of it; "don't affect"; a block whose lead-in opens on "if ... still
OOMs" is the fallback; and a spelling (trace host RSS per process, per step).
"""

from __future__ import annotations


def test_struck_through_advice_is_withdrawn(scorer):
    # jj-010
    answer = scorer.read_markdown("~~Try `num_workers=0` on the dataloader~~. Struck; see comment.\n")
    assert "reduce-dataloader-workers" in answer.avoided and not answer.recommended


def test_common_mistakes_and_wont_fix_are_advice_against(scorer):
    # hh-009 (a tutor's section), ii-016 (a review label)
    text = ("### Common mistakes\n- `expandable_segments` - a GPU allocator setting; your GPUs are fine.\n"
            "- Lowering the micro-batch - it changes the GPU's activations, not host RAM.\n")
    answer = scorer.read_markdown(text)
    assert {"expandable-segments", "reduce-micro-batch"} <= set(answer.avoided) and not answer.recommended
    text = ("**won't fix:** `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`, full recompute, smaller micro-batch — "
            "those act on GPU memory and this is host RAM.\n")
    answer = scorer.read_markdown(text)
    assert {"expandable-segments", "full-recompute"} <= set(answer.avoided) and not answer.recommended


def test_a_quoted_comment_is_not_the_answers_advice(scorer):
    # jj-011: another user's comment, quoted
    text = "> 评论 @ds_grpo：我之前加了 expandable_segments:True、把 micro batch 调小，一点变化都没有。\n"
    assert not scorer.read_markdown(text).recommended


def test_the_sentence_after_a_list_that_opens_on_none_of_them_speaks_of_it(scorer):
    # ii-006, jj-002
    for text, fix in [
        ("I'd hold off on the usual knobs: expandable segments, a smaller ppo_micro_batch_size_per_gpu, full "
         "recompute, a larger TP. None of them touches host RSS; I'd drop any of those changes from this PR.",
         "full-recompute"),
        ("Micro-batch, recompute and activation offload don't affect a conversion at all.", "activation-cpu-offload"),
    ]:
        answer = scorer.read_markdown(text + "\n")
        assert fix in answer.avoided and fix not in answer.recommended, text


def test_a_block_whose_lead_in_opens_on_still_ooms_is_the_fallback(scorer):
    # ii-011: the stale processes come first; the smaller engine share only if it still OOMs
    text = ("Before relaunching:\n\n```bash\nray stop --force\nnvidia-smi --query-compute-apps=pid,used_memory "
            "--format=csv\n```\n\n**suggestion:** if the GPUs are clean and it still OOMs at 41, drop the rollout "
            "share a bit:\n\n```suggestion\nactor_rollout_ref.rollout.gpu_memory_utilization=0.85\n```\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "kill-stale-processes" and "shrink-colocated-engine" in answer.recommended
    # s-014: a lead-in that opens on its own step names the block's first change
    text = ("Start with TP4, re-run the simulator, then add recompute if it's still above ~75 GB:\n```\n"
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4\n"
            "+actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full\n```\n")
    assert scorer.read_markdown(text).first_fix == "increase-tp"


def test_tracing_host_rss_per_process_is_the_per_step_measurement(scorer):
    # hh-009
    text = "### Step 1 - Try this first: trace host RSS per process, per step\n"
    assert scorer.read_markdown(text).first_fix == "track-memory-per-step"
