"""How the scorer reads what writers dp (a coding agent's changelog entry: Changed / Added / Not changed
(on purpose) / To verify, in Chinese 修改 / 新增 / 刻意未改 / 待验证), dq (a pasted chat between the user and
the agent, whose advice moves over the turns) and dr (a backlog by priority: P0 / P1 / P2 / Rejected /
Investigate) showed: 60 answers written and labelled blind on 2026-12-06, the session's final unseen batch,
first read 69.8 / 50.0 / 81.7 % (verdict / id / violations) on 0a722fd.

The classes: a value changed with an arrow ("`micro_train_batch_size_per_gpu` `2` -> `1`") lowers that setting; an
"Added" / "新增" section is advice and "刻意未改" advice against; a probe that prints the allocator's counters
(``print(torch.cuda.memory_allocated())``) is the per-step measurement, and one that prints the allocator's settings
confirms the setting; DeepSpeed's offload configs by name (zero3_offload) offload the optimizer; and in a pasted chat,
advice the user then reports done ("User: Done. ...") is no longer what comes first.
"""

from __future__ import annotations


def test_a_changelog_arrow_that_lowers_the_micro_batch_is_the_micro_batch_fix(scorer):
    # dp-012 (writer dp), dp-020 (zh)
    text = ("### Changed\n- `trainer.train_batch_size` `128` -> `64` and "
            "`trainer.micro_train_batch_size_per_gpu` `2` -> `1` (global batch kept with gradient accumulation).\n")
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"
    text = "### 修改\n1. `policy.train_micro_batch_size`: `4` -> `2`（`policy.train_global_batch_size` 不变）\n"
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"
    # raised, it is no micro-batch cut
    raised = "### Changed\n- `policy.train_micro_batch_size`: `2` -> `4`\n"
    assert "reduce-micro-batch" not in scorer.read_markdown(raised).recommended


def test_a_smaller_packed_row_is_a_smaller_micro_batch(scorer):
    # dp-015 (writer dp): NeMo Automodel's packed_sequence_size is the micro-batch's token count
    text = ("### Changed\n- `cohere_command_r_7b.yaml`:\n  ```diff\n   packed_sequence:\n"
            "  -  packed_sequence_size: 8192\n  +  packed_sequence_size: 4096\n  ```\n")
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"


def test_deepspeeds_offload_config_by_name_offloads_the_optimizer(scorer):
    # dp-006 (writer dp)
    text = ("### Changed (apply in this order)\n1. `deepspeed`: `deepspeed_zero3` -> `deepspeed_zero3_offload` "
            "(optimizer state, and with it the fp32 master copy, moves to CPU RAM)\n")
    assert scorer.read_markdown(text).first_fix == "optimizer-cpu-offload"


def test_an_added_probe_of_the_allocators_counters_is_the_per_step_measurement(scorer):
    # dp-001 (writer dp): the probe leads what the changelog added
    text = ("### 新增（先做这一条，跑 2 步）\n- 在 `compute_ref_log_prob` 前后各打一行：\n  ```python\n"
            "  logger.info(f\"[step {step}] {tag} alloc={torch.cuda.memory_allocated()/2**30:.1f}G \"\n"
            "              f\"reserved={torch.cuda.memory_reserved()/2**30:.1f}G\")\n  ```\n\n"
            "### 刻意未改\n- micro batch：峰值来自缓存没还，不是单步放不下，调小只会让它多撑一两步。\n")
    assert scorer.read_markdown(text).first_fix == "track-memory-per-step"


def test_a_call_named_while_explaining_is_no_probe(scorer):
    # dk-014 (writer dk): the profiler's own arithmetic, not something the user is told to run
    text = ("The profiler still derives \"torch memory\" from torch.cuda.memory_reserved(), which isn't a reliable "
            "number once a custom allocator is in use, so lower gpu_memory_utilization to 0.6.\n")
    assert scorer.read_markdown(text).first_fix == "shrink-colocated-engine"


def test_printing_what_the_allocator_runs_with_confirms_the_setting(scorer):
    # dp-005 (writer dp)
    text = ("### Added\n- In `train.py`, right after the first CUDA allocation, print what the allocator really runs "
            "with (do this first):\n  ```python\n  torch.zeros(1, device=\"cuda\")\n  print(\"expandable_segments:\",\n"
            "        torch.cuda.memory._snapshot()[\"allocator_settings\"][\"expandable_segments\"])\n  ```\n\n"
            "### Changed\n- Launcher env: `PYTORCH_ALLOC_CONF=expandable_segments:True` -> "
            "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`.\n")
    assert scorer.read_markdown(text).first_fix == "confirm-setting-applied"


def test_in_a_pasted_chat_advice_the_user_reports_done_is_not_first(scorer):
    # dq-014 (writer dq): the probe ran; the final advice is the allocator setting
    text = ("**User:** Trainer `memory_reserved` goes up every step and at step 9 the weight sync OOMs.\n\n"
            "**Agent:** First separate a real leak from allocator behaviour: log both counters after every step.\n\n"
            "```python\nprint(step, torch.cuda.memory_allocated() / 2**30,\n"
            "      torch.cuda.memory_reserved() / 2**30)\n```\n\n"
            "**User:** Done. Allocated is flat around 14 GiB after every step; reserved is what climbs.\n\n"
            "**Agent:** Then it's not a leak. Fix it at the allocator level:\n\n"
            "```bash\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n```\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "expandable-segments"
    assert "track-memory-per-step" in answer.recommended
    # a question from the user reports nothing done: the first advice still leads
    asked = text.replace("**User:** Done. Allocated", "**User:** Should I worry that allocated")
    assert scorer.read_markdown(asked).first_fix == "track-memory-per-step"


def test_the_run_restated_and_a_setting_kept_on_are_no_advice(scorer):
    # dq-006 and dq-013 (writer dq): "你现在 ... ZeRO-3" restates the run; "zero3_offload 也不用关" keeps it on
    restated = scorer.read_markdown("你现在 --micro_train_batch_size 16、ZeRO-3、actor 和 ref 共卡，"
                                    "一张 80G 卡上本来就紧。\n")
    assert "megatron-fsdp" not in restated.recommended
    kept = scorer.read_markdown("不能，这些都是显存手段，对主机侧泄漏无效。zero3_offload 也不用关。直接升级。\n")
    assert "optimizer-cpu-offload" not in kept.recommended
