"""How the scorer reads what writers cn / co (a short chat reply: the first line already says what to do),
cp / cq (a plain-text decision tree followed to the user's leaf) and cr / cs (an FAQ the answer anticipates, "Q: ... /
A: ..." or "问：…… / 答：……") showed: 120 answers written and labelled blind on 2026-12-06, first read
56.5 / 51.7 / 85.8 % (verdict / id / violations) on f420b27.

The classes: an FAQ answer that opens on "也不用" / "不用" / "也不对症" says no to the option its question named; the
chat voice names fixes in the words people type - "turn on gradient checkpointing" (whole-layer recompute in
Hugging Face trainers), "drop per_device_train_batch_size", "从 8 砍到 2", "log allocated vs reserved on steps 1
and 2", "a build with the streaming HF export", "empty_cache() after every save".
"""

from __future__ import annotations


def test_an_faq_reply_that_opens_on_no_need_argues_against(scorer):
    # cr-003 (writer cr)
    text = ("**问：那把 micro batch 调小呢？**\n答：也不用。残留的是 rotary 缓存，不是激活，跟 batch 大小无关。\n\n"
            "**问：第一步怎么确认是它？**\n答：在 offload 前后各打一次显存，看剩下的那一截是不是每一步都一样。\n")
    answer = scorer.read_markdown(text)
    assert "reduce-micro-batch" not in answer.recommended and "reduce-micro-batch" in answer.avoided


def test_a_chat_reply_names_its_fix_as_people_type_it(scorer):
    # co-017, co-008, co-005, co-004 (writer co)
    cases = [
        ("Turn on gradient checkpointing and drop `per_device_train_batch_size` to 1 with more grad accumulation.",
         "full-recompute"),
        ("我一般先把 per_device_train_batch_size 从 8 砍到 2，gradient_accumulation_steps 调到 32，global batch 不变。",
         "reduce-micro-batch"),
        ("First thing I'd do is log allocated vs reserved on steps 1 and 2, right after `offload_after_refit()`.",
         "track-memory-per-step"),
        ("Don't buy a bigger rank-0 box, pull an MLite build with PR #121 (streaming HF export).",
         "checkpoint-save-memory"),
    ]
    for text, fix in cases:
        assert scorer.read_markdown(text).first_fix == fix, text


def test_an_empty_cache_after_every_save_is_the_saves_fix(scorer):
    # ao-011 (writer ao), read again once "log memory_allocated / memory_reserved" became a per-step record
    text = ("Add torch.cuda.empty_cache() after every save and after the load. Log memory_allocated / "
            "memory_reserved on rank 0 around both calls to confirm.")
    assert scorer.read_markdown(text).first_fix == "checkpoint-save-memory"


def test_a_decision_tree_advises_by_the_leaf_the_user_is_on(scorer):
    # cp-015 (writer cp): the branches for other phases name the engine share; the user's leaf narrows the graphs
    text = ("```\nOOM 在哪个阶段？\n├─ rollout 生成 → 调 gpu_memory_utilization / max_num_seqs\n"
            "└─ update policy（训练） ← 你\n    └─ 叶子：缩小 CUDA graph 的捕获范围\n```\n\n"
            "你在这条分支：update 阶段 OOM → 开着 vLLM cudagraph → "
            "缩小 CUDA graph 的捕获范围（narrow the CUDA-graph scope）。\n")
    answer = scorer.read_markdown(text)
    assert "shrink-colocated-engine" not in answer.recommended
    assert answer.first_fix == "narrow-cuda-graph-scope"


def test_a_tree_rooted_in_a_check_asks_that_check_first(scorer):
    # ak-004 (writer ak): the tree's root question is the first thing to look at
    text = ("```\nWhich rank died first, and with what?\n   │\n"
            "   ├── torch.cuda.OutOfMemoryError in save_sharded_optimizer\n   │      └──> gather_dtensor=False\n"
            "   └── killed by the OOM killer\n          └──> save the optimizer less often\n```\n")
    assert scorer.read_markdown(text).first_fix == "find-first-failing-rank"


def test_a_block_that_opens_on_a_command_and_branches_on_its_outcome_is_a_plan(scorer):
    # ak-001 (writer ak): the command is the advice, its outcomes the branches
    text = ('```\nrecompute_modules=["mla_up_proj"]\n        │\n        ├── 能跑 ──> 完成\n'
            "        │\n        └── 仍 OOM ──> 抓一次 memory snapshot\n```\n")
    assert scorer.read_markdown(text).first_fix == "selective-recompute"


# Writers ct / cu (a code review of the user's config, closed by "Request changes:"), cv / cw (a runbook) and cx / cy
# (a head-to-head comparison closed by "Verdict:"), 120 answers, 54 in Chinese, written blind on 2026-12-06, first
# read 63.8 / 49.2 / 86.7 % on d38d322.

def test_a_comparison_advises_the_option_its_verdict_picks(scorer):
    # cy-011 (writer cy)
    text = ("- **Option A: selective recompute of core attention** (`recompute_modules=[core_attn]`): saves most.\n"
            "- **Option B: full recompute** (`--recompute-granularity full`): saves more, ~30% more compute.\n\n"
            "**Verdict: A** as the one-flag fix on the current setup; skip B.\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "selective-recompute" and "full-recompute" not in answer.recommended


def test_a_reviews_summary_leads_and_its_comments_stay_advice(scorer):
    # ct-018 (writer ct): the summary names the change first; the comments above it are not a story told before it
    text = ("suggestion (first): Offload the optimizer state to host memory with FSDP2's CPU offload.\n\n"
            "nit: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True won't find the missing tens of GB. Skip it.\n\n"
            "Request changes: enable FSDP2 CPU offload for the optimizer state (PR #622) first.\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "optimizer-cpu-offload" and "expandable-segments" not in answer.recommended


def test_a_review_comment_that_adds_to_the_last_is_an_add_on(scorer):
    # ct-003 (writer ct): "建议： 同时在环境变量里加上 ..." comes beside the first suggestion, not before it
    text = ("建议： 打开 packing（--packing true），让长短样本拼成定长序列。\n\n"
            "建议： 同时在环境变量里加上 PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'，减少碎片。\n")
    assert scorer.read_markdown(text).first_fix == "sequence-packing"


# Writers cz / da (an email or memo to the team), db / dc (a hypothesis list H1 / H2 / H3) and de / df (an on-call
# checklist with status marks), 120 answers, 54 in Chinese, the session's final unseen batch, first read
# 64.6 / 60.8 / 95.0 % on 2e98422.

def test_a_checklist_item_marked_done_is_the_run_as_it_is(scorer):
    # de-007 (writer de): "✅ --workers 80 --partitions 4" says what the user ran; "✅ 先按步记录…" (kk-001) advises
    text = ("✅ --workers 80 --partitions 4, 43 GB input\n\n⬜ Lower --workers to 16 and rerun the preprocessing.\n")
    answer = scorer.read_markdown(text)
    assert "shard-preprocessing" not in answer.recommended
    text = "✅ 先按步记录 vLLM sleep 之后的残留显存，看是不是逐步上涨。\n\n❌ expandable_segments：不是碎片。\n"
    assert scorer.read_markdown(text).first_fix == "track-memory-per-step"


def test_the_words_the_final_batch_named_fixes_in(scorer):
    cases = [
        ("在 4.4.2 的命令里显式加上 --vit_gradient_checkpointing true", "full-recompute"),  # cz-008
        # da-019
        ("第一步：把视频相关的环境变量同样加到 rollout 服务上，并确认服务端真的用上了。", "confirm-setting-applied"),
        ("Test: a memory snapshot around step 1 (below).", "track-memory-per-step"),  # db-005
        ("训练配置里写同一个 tokenized_path，直接从磁盘加载已经分好词的数据。", "shard-preprocessing"),  # dc-017
    ]
    for text, fix in cases:
        assert scorer.read_markdown(text).first_fix == fix, text
