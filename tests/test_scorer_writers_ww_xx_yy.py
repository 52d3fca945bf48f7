"""How the scorer reads the misreadings that writers ww (an incident commander's write-up: Impact / Timeline / Root
cause / Mitigation / Rejected options), xx (a busy expert's one-to-five-line reply) and yy (a teaching assistant
contrasting options, ending on an explicit order) showed: written 2026-12-06, first read 73.3 / 60.0 / 86.7 %
(verdict / id / violations) on 7fe1b9c (70.0 / 58.3 / 86.7 on fc4d159), then learned.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: "顺序：先…再…别…" / "Order:" states the plan; "与其 X，不如 Y：" leads a block that does Y; a
Chinese verb cue with an object after it ("；别动 micro-batch") is said of that object, unless it points back ("先别动
它们", "都不会让…"); Impact / Timeline / 影响 / 故障复盘 restate the incident, 立即缓解 is the plan; "(if needed)" /
必要时 put a step after the first; a verdict cell "采纳（模型大时）" is conditional; and spellings (Adam 状态挪到 CPU,
换到 8 卡, MBS↓, --batch_size 1, batch 先减半, log GPU mem before/after the offload, 找第一个死掉的 worker, 把 layernorm
加进重算, 第一个 stage 的层数调少).
"""

from __future__ import annotations


def test_an_order_line_states_the_plan_and_a_verb_cue_speaks_of_its_object(scorer):
    # yy-007
    text = ("顺序：先在启动脚本里加 NCCL_GRAPH_REGISTER=0；实在不想改 NCCL 才考虑去掉 expandable_segments；"
            "别动 micro-batch 和重计算。\n")
    assert scorer.read_markdown(text).first_fix == "nccl-graph-register-off"


def test_rather_than_x_y_leads_a_block_that_does_y(scorer):
    # yy-007
    text = ("与其关掉 expandable segments（你本来是为了减少碎片才开的），不如按断言信息说的补上 NCCL 那一条：\n\n"
            "```bash\nexport NCCL_GRAPH_REGISTER=0\n```\n")
    assert scorer.read_markdown(text).first_fix == "nccl-graph-register-off"


def test_a_cue_that_points_back_still_argues_against_the_list(scorer):
    # vv-018
    text = "所以显存分配器设置（expandable_segments）、micro batch、重计算这些 GPU 侧的旋钮都不相干，先别动它们。\n"
    assert "expandable-segments" in scorer.read_markdown(text).avoided


def test_an_incident_write_up_files_its_sections(scorer):
    # ww-014
    text = ("**影响**\n- 跑几个小时后训练进程被杀（exit code 9）。\n\n**立即缓解**\n"
            "- [ ] @你：每个 step 记录一次各 rank 主进程及其 dataloader worker 的内存，分匿名页 / 文件页。\n")
    assert scorer.read_markdown(text).first_fix == "track-memory-per-step"


def test_if_needed_puts_a_step_after_the_first(scorer):
    # ww-015
    text = ("- [ ] check that the engine sleeps before the update\n"
            "- [ ] (if needed) set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to smooth out the spike.\n")
    answer = scorer.read_markdown(text)
    assert "expandable-segments" in answer.recommended and answer.first_fix != "expandable-segments"


def test_a_verdict_cell_with_a_condition_is_conditional(scorer):
    # ff-013
    text = ("| 方案 | 省什么 | 代价 | 结论 |\n|---|---|---|---|\n"
            "| ZeRO-3 + --adam_offload | Adam 状态移到内存 | 速度变慢 | 采纳（模型大时） |\n")
    assert "optimizer-cpu-offload" not in scorer.read_markdown(text).recommended


def test_terse_spellings(scorer):
    # xx-015, xx-008, ww-009, ww-005, yy-011
    assert scorer.read_markdown("Now: MBS↓ (keep GBS) so the per-forward B shrinks.\n").first_fix == \
        "reduce-micro-batch"
    assert scorer.read_markdown("--batch_size 1 --accumulation_steps 16, same effective batch.\n").first_fix == \
        "reduce-micro-batch"
    assert scorer.read_markdown("换到 8 卡（或 2 个节点），其它配置先不动。\n").first_fix == "add-gpus"
    assert scorer.read_markdown("启动参数加 --adam_offload，把 Adam 状态挪到 CPU 侧。\n").first_fix == \
        "optimizer-cpu-offload"
    assert scorer.read_markdown("顺序：先找第一个死掉的 worker 和它的 dmesg，再决定减什么。\n").first_fix == \
        "find-first-failing-rank"


def test_a_norm_added_to_recompute_and_fewer_layers_on_the_first_stage(scorer):
    # yy-015, yy-013
    assert scorer.read_markdown("顺序：先把 RMSNorm 加进重算，再看碎片。\n").first_fix == "selective-recompute"
    assert scorer.read_markdown("顺序：先把第一个 stage 的层数调少，然后再加选择性重计算。\n").first_fix == \
        "rebalance-pipeline-stages"
