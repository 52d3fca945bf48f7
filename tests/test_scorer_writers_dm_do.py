"""How the scorer reads what writers dm (a vendor knowledge-base article: Environment / Issue / Resolution / Root Cause
/ Diagnostic Steps / Not Applicable), dn ("Short answer:" then "Long answer:", closed by "If you only do one thing:")
and do (an issue ticket closed with Resolution / Root cause / Fix or Workaround / Won't do / Follow-up fields) showed:
60 answers written and labelled blind on 2026-12-06, the session's final unseen batch, first read 65.4 / 56.7 / 91.7 %
(verdict / id / violations) on 4bb2e17.

The classes: a Resolution, Workaround or "If you only do one thing" section leads (a "Short answer" one advises but is
not forced first: it often argues, "no, and lowering the micro-batch would only hide it"); Diagnostic Steps and Known
Limitations are checks and background, not the fix; "不做的改动" is advice against; "would only hide" argues against
what it names; and verl's Ulysses size (ulysses_sequence_parallel_size) is the context-parallel fix.
"""

from __future__ import annotations


def test_a_kb_articles_resolution_leads_and_its_diagnostic_steps_do_not(scorer):
    # dm-004 (writer dm)
    text = ("## 解决方法\n1. 保存 HF 格式前把参数逐块 `full_tensor()` 后立即 `.cpu()`，写完一块释放一块；"
            "或者训练中只保存分片检查点。\n\n## 诊断步骤\n"
            "- 在 `save_checkpoint` 前后打印 `torch.cuda.memory_allocated()`，可看到保存开始后分配量迅速上升。\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix != "track-memory-per-step"


def test_if_you_only_do_one_thing_is_the_first_fix(scorer):
    # the shape of dn-013 (writer dn), its closing line given with the verb a value alone leaves out
    text = ("Short answer: it's your batch settings.\n\nLong answer: free_cache_engine=True releases vLLM's KV cache "
            "during training, which helps a little.\n\n**If you only do one thing:** lower "
            "`ppo_micro_batch_size_per_gpu` to 2.\n")
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"


def test_would_only_hide_argues_against_what_it_names(scorer):
    # p-009 (writer p), read again once a "Short answer:" label counts as advice
    text = ("Short answer: **no, the models aren't simply too big for B200/B300**, and lowering the micro-batch "
            "would only hide the real problem.\n")
    assert "reduce-micro-batch" not in scorer.read_markdown(text).recommended


def test_verls_ulysses_size_is_context_parallelism(scorer):
    text = "Set `actor_rollout_ref.actor.ulysses_sequence_parallel_size=2` so each GPU holds half of every sequence."
    assert scorer.read_markdown(text).first_fix == "increase-cp"
