"""How the scorer reads the misreadings that writers ag (a community post with 👉 ✅ ❌ ⚠️ markers), ah (an experiment
ladder: Try 1 / Try 2 with expected effect, cost and stop condition, then "Rejected:") and ai (a machine-readable JSON /
YAML block first, then a short summary) showed: written 2026-12-05, first read 73.7 / 48.3 / 90.0 % (verdict / id /
violations) on aa1664b (the same on fb3e4fc), then learned.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: a JSON / YAML object whose keys say what their values are ("actions", "do_not", "不建议", "why")
is read as labelled prose, a config block is not; "Try 1" is the primary and a later try is no first step; "drop
--flag" takes the flag out; "不考虑：" advises against; a clause that opens on "still not enough" ("还不够的话",
"仍不行:") is the fallback, with or without an "if".
"""

from __future__ import annotations


def test_a_json_answer_files_each_value_under_its_key(scorer):
    # ai-001, ai-020
    text = ('```json\n{\n  "诊断": "不是 OOM：训练已正常结束，之后是进程退出阶段的 NCCL 挂起",\n'
            '  "建议": [{"改动": "升级 ms-swift 到包含 PR #8385 的版本", "代价": "无"}],\n'
            '  "不建议": ["调小 micro_batch_size —— 训练已经跑完，退出阶段与 batch 无关",\n'
            '            "加卡重跑 —— 不会改变析构顺序"]\n'
            '}\n```\n')
    answer = scorer.read_markdown(text)
    assert {"reduce-micro-batch", "add-gpus"} <= set(answer.avoided) and not answer.recommended
    text = ('```json\n{\n  "diagnosis": "not an OOM: the weight-sync bucket is smaller than one tensor",\n'
            '  "fix": "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=3072",\n'
            '  "rejected": ["more nodes", "smaller batch", "changing PP"]\n}\n```\n')
    answer = scorer.read_markdown(text)
    assert "add-gpus" in answer.avoided and "add-gpus" not in answer.recommended


def test_a_yaml_answer_reads_its_actions_in_order_and_its_why_as_explanation(scorer):
    # ai-005
    text = ("```yaml\ndiagnosis: activation memory from long responses in the update step\n"
            "actions:\n  - change: override_transformer_config.recompute_granularity=full\n"
            "    why: splits activations and weights across more GPUs\n"
            "avoid:\n  - rolling back verl - version changes are rarely the cause\n```\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "full-recompute" and "add-gpus" not in answer.recommended


def test_a_config_block_is_not_a_structured_answer(scorer):
    text = "```yaml\nmodel:\n  tensor_model_parallel_size: 8\n  recompute_granularity: full\n```\n"
    assert scorer.read_markdown(text).first_fix == "full-recompute"


def test_try_1_is_first_and_a_later_try_is_not(scorer):
    # ah-015
    text = ("Try 2 - only if you later run short of memory: use --recompute-granularity full.\n\n"
            "Try 1: drop --recompute-activations and keep --use-flash-attn.\n")
    answer = scorer.read_markdown(text)
    assert "selective-recompute" in answer.avoided and "selective-recompute" not in answer.recommended
    text = "尝试 2： 加 --use_distributed_optimizer true。\n\n尝试 1： 把 micro batch 降一档。\n"
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"


def test_an_english_removal_verb_only_removes_a_flag(scorer):
    assert scorer.read_markdown("Drop MBS to 1 first.\n").first_fix == "reduce-micro-batch"


def test_not_considered_argues_against(scorer):
    # ah-006
    text = "不考虑：加卡、分片转换、改 PYTORCH_CUDA_ALLOC_CONF——都是按 OOM 处理，这里不是 OOM。\n"
    answer = scorer.read_markdown(text)
    assert {"add-gpus", "convert-sharded"} <= set(answer.avoided) and not answer.recommended


def test_a_clause_opening_on_still_not_enough_is_the_fallback(scorer):
    # ag-016, ai-011
    text = ("👉 先把 --offload_bridge true 打开。\n\n"
            "👉 还不够的话，把 colocate 的 vLLM 显存比例（`--vllm_gpu_memory_utilization`）再降一点。\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix is None and "shrink-colocated-engine" in answer.recommended
    assert scorer.read_markdown("仍不行: 适当调低 vLLM 的 gpu_memory_utilization\n").first_fix is None
