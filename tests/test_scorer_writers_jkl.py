"""How the scorer reads the misreadings that writers j, k and l (issue 26) showed, one test per class.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test); the scenario inputs are the ones that answer was written for, cut to the settings that matter.  The
scorer is the shipped one (knowledge/fixes.yaml and zh/fixes.yaml recognisers, grading.yaml), because these
classes are about what the knowledge base recognises as well as how an answer is read.
"""

from __future__ import annotations

import pytest

EXPANDABLE_ON = {"env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}}


# -- a setting the run already has is not a new recommendation -------------------------------------------------

def test_prose_about_a_setting_the_run_already_has_is_not_advice(scorer):
    # b-019: a recap of what the user runs, written as the setting itself
    text = "- tried TP1/EP8 and TP2/EP8, MBS 4 and MBS 2, with `expandable_segments:True`\n"
    assert "expandable-segments" not in scorer.read_markdown(text, EXPANDABLE_ON).recommended
    # without the inputs saying so, the same words are all the scorer has to go on
    assert "expandable-segments" in scorer.read_markdown(text, {"env": {}}).recommended


def test_an_export_in_prose_is_a_command_even_when_the_run_has_the_value(scorer):
    # c-027: set after CUDA initialised, the fix is exporting it where it takes effect
    text = "改法：在启动命令里先 `export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` 再 `torchrun ...`。\n"
    assert scorer.read_markdown(text, EXPANDABLE_ON).first_fix == "expandable-segments"


# -- several flags in one block: the fix is the setting whose value changes -------------------------------------

def test_a_parallel_size_written_lower_is_not_its_increase(scorer):
    # k-009: at TP8 PP4, "TP4 PP8" is a pipeline increase that keeps 32 GPUs, not a TP increase
    text = ("**Option A — go to PP8 (I'd start here).** On 32 GPUs that means TP4 PP8:\n\n"
            "```bash\n--tensor-model-parallel-size 4 --pipeline-model-parallel-size 8\n```\n")
    inputs = {"config": {"model": {"tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 4}}}
    answer = scorer.read_markdown(text, inputs)
    assert answer.first_fix == "increase-pp"
    assert "increase-tp" not in answer.recommended


def test_a_companion_written_off_beside_the_fix_is_part_of_the_fix(scorer):
    # k-020: moe_pad_expert_input_to_capacity: false next to a capacity factor is token dropping, not against it
    text = ("## 方案一（我会先试这个）：限制每个 expert 的 token 数\n\n```yaml\nmodel:\n"
            "  moe_expert_capacity_factor: 1.25\n  moe_token_drop_policy: probs\n"
            "  moe_pad_expert_input_to_capacity: false\n```\n\n"
            "## 方案二：把整个 MoE 层纳入选择性重计算\n\n```yaml\nmodel:\n  recompute_granularity: selective\n"
            "  recompute_modules: [moe]\n```\n")
    answer = scorer.read_markdown(text, {"config": {"model": {"recompute_granularity": "selective"}}})
    assert answer.first_fix == "moe-token-drop"
    assert "moe-token-drop" not in answer.avoided


def test_a_block_that_keeps_the_run_s_setting_beside_the_new_line_recommends_the_new_line(scorer):
    # k-014 / l-004: the export line the container already has, then the one the assert asks for
    block = "```bash\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\nexport NCCL_GRAPH_REGISTER=0\n```\n"
    for lead in ("## 推荐修复\n\n保留 expandable segments，启动前加一行：\n\n",
                 "解决：启动前（torchrun / srun 之前）加一行，expandable segments 可以保留：\n"):
        answer = scorer.read_markdown(lead + block, EXPANDABLE_ON)
        assert answer.first_fix == "nccl-graph-register-off", lead
        assert "expandable-segments" not in answer.recommended, lead


def test_keeping_the_setting_does_not_cover_a_changed_value(scorer):
    # e-002: "you already have expandable_segments" and then a new allocator config: that is advice
    text = ("Even though you already have `expandable_segments:True`, the allocator can still hold on to freed "
            "blocks. I'd extend the allocator config:\n\n```bash\n"
            "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,garbage_collection_threshold:0.6\n```\n")
    assert scorer.read_markdown(text, EXPANDABLE_ON).first_fix == "expandable-segments"


def test_a_comment_saying_keep_it_keeps_the_setting(scorer):
    # k-003: "# keep it" on the export line of a setting the run has
    text = ("## Recommended fix\n\n```python\ncfg.train.micro_batch_size = 1          # keep GBS\n```\n```bash\n"
            "export NCCL_GRAPH_REGISTER=0\n"
            "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True   # keep it\n```\n")
    answer = scorer.read_markdown(text, {**EXPANDABLE_ON, "overrides": ["train.micro_batch_size=2"]})
    assert answer.first_fix == "reduce-micro-batch"
    assert "expandable-segments" not in answer.recommended


@pytest.mark.parametrize("text", [
    # j-002: what the user tried, reported as having changed nothing
    "That's graph memory capacity, not fragmentation — which is why MBS 2 vs 4 and expandable segments "
    "changed nothing.",
    # j-005: a verdict after the fix, and what it does not touch
    "Smaller MBS / expandable segments: no — they don't touch NCCL multicast memory.",
])
def test_a_fix_said_to_change_nothing_is_not_advice(scorer, text):
    answer = scorer.read_markdown(text, {"env": {}})
    assert "expandable-segments" not in answer.recommended
    assert "expandable-segments" in answer.avoided


def test_can_not_use_in_chinese_argues_against(scorer):
    # l-014: layer-wise offload named to say PP=4 cannot use it, inside the fine-grained option
    text = ("**方案一：细粒度激活 offload**。PP=4 用不了层级的 `cpu_offloading`"
            "（只支持 PP=1，而且和 CUDA Graph 不兼容），"
            "但细粒度 offload 支持 PP>1，把专家那部分的输入卸到 CPU：\n\n```\n"
            "model.fine_grained_activation_offloading=true\nmodel.offload_modules=[expert_fc1,moe_act]\n```\n")
    answer = scorer.read_markdown(text, {"config": {"model": {"pipeline_model_parallel_size": 4}}})
    assert answer.first_fix == "fine-grained-activation-offload"
    assert "activation-cpu-offload" not in answer.recommended


# -- recognizer gaps: the fix is in the answer, spelled as these writers spell it -----------------------------

@pytest.mark.parametrize(("source", "text", "fix"), [
    ("j-008", "```\n--dataloader_persistent_workers false\n--dataloader_num_workers 2\n```\n",
     "reduce-dataloader-workers"),
    ("l-008", "1. 在 4.1.3 上直接显式关掉，并把 worker 数调小：\n", "reduce-dataloader-workers"),
    ("c-014", "- Relaunch the container with a real shared-memory size:\n  ```bash\n"
              "  docker run --gpus all --shm-size=16g ...   # or --ipc=host\n  ```\n", "reduce-dataloader-workers"),
    ("j-009", "1. Convert sharded: launch the export with `NPROC_PER_NODE=8` and a PP/EP split so each process "
              "loads and writes only its slice, layer by layer.\n", "convert-sharded"),
    ("l-010", "在 config 的 `model.llm` 里加 `device_map='auto'`，让权重分摊到 4 张卡上（不够会落到 CPU）：\n",
     "convert-sharded"),
    ("j-016", "```\n--expert_model_parallel_size 4\n```\n", "increase-ep"),
    ("k-022", "```bash\nactor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 \\\n"
              "actor_rollout_ref.actor.megatron.sequence_parallel=True\n```\n", "increase-tp"),
    ("k-022", "我会先把 TP 从 1 提到 2，同时保持 ETP=1。\n", "increase-tp"),
    ("k-018", "先 `nvidia-smi` 确认 PID 50321 是旧作业的 rank，然后 `kill -9 50321`，再重启作业即可。\n",
     "kill-stale-processes"),
    ("c-017", "找到占着 GPU 0 的那个进程，确认是之前残留的作业后 `kill` 掉。\n", "kill-stale-processes"),
    ("k-021", "## 先做这一步：逐步记录内存曲线\n\n每个 step 记录一次各个 worker 的 CPU RSS 和 GPU 显存。\n",
     "track-memory-per-step"),
    ("j-018", "Find which rank stalled first:\n```bash\ngrep -HnE 'Watchdog caught|Traceback' logs/rank*.log\n```\n",
     "find-first-failing-rank"),
    ("k-010", "Keep the weights in FP8 only. In plain TE, build the model under `fp8_model_init`:\n",
     "fp8-param-gather"),
    ("j-010", "1. 先升级 ms-swift / Megatron-Core 到加载优化器时不重复持有状态、"
              "load 完就释放缓存的版本，其它配置不动。\n",
     "memory-efficient-optimizer-load"),
    ("j-020", "First check the sleep actually reached every vLLM shard — run this right after generation.\n",
     "confirm-setting-applied"),
    ("l-011", "**解决方案**：给第一段少分几层 LLM decoder，把空间让给 ViT。\n", "rebalance-pipeline-stages"),
])
def test_the_fix_is_recognised_as_these_writers_write_it(scorer, source, text, fix):
    assert scorer.read_markdown(text, {"env": {}}).first_fix == fix, source


def test_use_cpu_in_chinese_is_not_context_parallelism(scorer):
    # d-017: "用 CPU offload" once read as "用 CP"
    text = "我知道你不太想用 CPU offload，但目前最稳的办法还是它：\n"
    assert "increase-cp" not in scorer.read_markdown(text, {"env": {}}).recommended


def test_adding_gpus_in_chinese(scorer):
    # j-007
    text = "- 想真正把权重显存降下来，只能加卡，用更大的 TP/DP 把权重切开\n"
    assert scorer.read_markdown(text, {"env": {}}).recommended == ["add-gpus"]


# -- a verification step is not the fix -----------------------------------------------------------------------

def test_listing_the_gpu_processes_is_a_check_not_the_kill(scorer):
    # j-020: the nvidia-smi listing checks whether the engine slept; it kills nothing
    text = ("First check the sleep actually reached every vLLM shard — run this right after generation:\n"
            "```bash\nnvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv\n```\n")
    answer = scorer.read_markdown(text, {"env": {}})
    assert answer.first_fix == "confirm-setting-applied"
    assert "kill-stale-processes" not in answer.recommended


def test_a_looping_nvidia_smi_tracks_memory_over_steps(scorer):
    # g-005
    text = ("## 先做：每一步记一次显存\n\n```bash\n"
            "nvidia-smi --query-compute-apps=pid,used_memory --format=csv -l 10\n```\n")
    answer = scorer.read_markdown(text, {"env": {}})
    assert answer.first_fix == "track-memory-per-step"
    assert "kill-stale-processes" not in answer.recommended


def test_a_lead_that_waits_for_a_check_leads_the_action(scorer):
    # a-030: "after confirming it is yours, end it:" is the kill, not a confirmation section
    text = ("2. 确认 1873 是你自己之前残留的作业后，直接结束它：\n   ```bash\n   kill -9 1873\n   ```\n")
    assert scorer.read_markdown(text, {"env": {}}).first_fix == "kill-stale-processes"


def test_other_people_is_not_do_not(scorer):
    # e-026: 别 in 别人 is not "don't"
    text = "2. 确认不是别人的作业后 `kill -9 1873`；\n"
    answer = scorer.read_markdown(text, {"env": {}})
    assert answer.first_fix == "kill-stale-processes"
    assert answer.avoided == []


# -- several flags in one block, with the prose that introduces it --------------------------------------------

def test_the_prose_before_a_block_names_its_change_first(scorer):
    # a-023: the block restates PP (not known to the scorer) and sets the first stage's layers
    text = ("只给第一段减负：让第一个 stage 少放几层 decoder，其余层由后面的 stage 分担。\n\n"
            "```bash\nmegatron sft ... \\\n"
            "  --pipeline_model_parallel_size 4 \\\n  --decoder_first_pipeline_num_layers 4\n```\n")
    assert scorer.read_markdown(text, {"env": {}}).first_fix == "rebalance-pipeline-stages"


def test_the_first_flag_of_a_block_leads_when_the_prose_names_none(scorer):
    # l-009: both flags are changes; the block's first one is the answer's first fix
    text = ("### 解决方案\n**一、先把激活压下来**（最快见效，不影响断点续训的语义）：\n"
            "```bash\n--micro_batch_size 1 \\\n"
            "--recompute_granularity full \\\n--recompute_method uniform \\\n--recompute_num_layers 1\n```\n")
    answer = scorer.read_markdown(text, {"env": {}})
    assert answer.first_fix == "reduce-micro-batch"
    assert "full-recompute" in answer.recommended


# -- add-ons and options ------------------------------------------------------------------------------------

def test_an_add_on_does_not_outrank_the_fix_it_is_added_to(scorer):
    # k-006: the upgrade is the fix; the allocator export is "while you're at it"
    text = ("## Recommended fix\n\nPick up Megatron-LM PR #3558 (or any release containing it). It keeps the loaded "
            "optimizer state on the CPU until `optimizer.load_state_dict`.\n\nWhile you're at it, I'd also run the "
            "resume with\n\n```bash\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n```\n")
    answer = scorer.read_markdown(text, {"env": {}})
    assert answer.first_fix == "memory-efficient-optimizer-load"
    assert "expandable-segments" in answer.recommended


def test_the_option_the_answer_starts_with_is_the_first_fix(scorer):
    # k-009: "Option A (I'd start here)" before "Option B"
    text = ("**Option A — go to PP8 (I'd start here).** On 32 GPUs that means TP4 PP8:\n\n"
            "```bash\n--tensor-model-parallel-size 4 --pipeline-model-parallel-size 8\n```\n\n"
            "**Option B — rebalance the stages you have.** Give stage 0 fewer layers:\n\n"
            "```bash\n--account-for-embedding-in-pipeline-split\n--decoder-first-pipeline-num-layers 13\n```\n")
    inputs = {"config": {"model": {"tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 4}}}
    answer = scorer.read_markdown(text, inputs)
    assert answer.first_fix == "increase-pp"
    assert "rebalance-pipeline-stages" in answer.recommended


def test_naming_the_run_s_setting_in_the_fix_s_explanation_is_not_advice(scorer):
    # k-003: expandable segments is already set; the sentence explains what the new line does for it
    text = ("## Recommended fix\n\nMBS 1 roughly halves the activation footprint the graph has to capture compared "
            "to MBS 2, and with `NCCL_GRAPH_REGISTER=0` the expandable segments can actually be remapped.\n")
    assert "expandable-segments" not in scorer.read_markdown(text, EXPANDABLE_ON).recommended
    # asking for it is still advice, whatever the run has
    text = "## Recommended fix\n\nTurn on expandable segments before the launch.\n"
    assert "expandable-segments" in scorer.read_markdown(text, EXPANDABLE_ON).recommended
