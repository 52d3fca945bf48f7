"""The situation model: what failed, when, where, how memory moves, what changed - and what it does to the causes.

Every cause's situation examples (knowledge/causes.yaml) run through the whole engine here, as semgrep runs a
rule's examples; the unit tests below pin the readers one mechanism at a time.
"""

import contextlib
import io
import json
import subprocess
import sys

import pytest
from conftest import ROOT, SKILL
from memtune import cli, knowledge, pipeline
from memtune.facts import Facts, LogFacts, QuestionFacts, TrainingConfig
from memtune.inputs.oom_log import parse_log
from memtune.inputs.question import parse_question
from memtune.situation import Stated, read_situation

GIB = 2**30
LAUNCHER = [sys.executable, str(SKILL / "scripts" / "memtune.py")]


def _examples():
    kb = knowledge.load()
    return [(cause["id"], i, ex) for cause in kb.entries("causes")
            for i, ex in enumerate((cause.get("situation") or {}).get("examples") or [])]


@pytest.mark.parametrize("cause_id, index, example", _examples(), ids=lambda v: v if isinstance(v, str) else None)
def test_each_cause_example_runs_through_the_engine(cause_id, index, example, kb):
    inputs = pipeline.Inputs(question=example.get("question"), gpu=example.get("gpu"),
                             log=example["log"].splitlines() if example.get("log") else None)
    _, flat, diag = pipeline.run(inputs, kb)
    expect = example["expect"]
    if "top_cause" in expect:
        assert diag.causes and diag.causes[0].id == expect["top_cause"], [c.id for c in diag.causes]
    if "first_fix" in expect:
        assert diag.fixes and diag.fixes[0].id == expect["first_fix"], [f.id for f in diag.fixes]
    for ruled in expect.get("ruled_out", []):
        assert ruled in diag.ruled_out and ruled not in {c.id for c in diag.causes}
    assert set(expect.get("avoided", [])) <= {a.id for a in diag.avoid}
    for name in ("phase", "failed", "where", "trend", "process"):
        if name in expect:
            assert flat[f"situation.{name}"] == expect[name], name


def test_every_cause_says_how_to_tell_it_apart(kb):
    """The check an answer offers when the evidence is thin (causes.yaml situation.check), in both languages."""
    for cause in kb.entries("causes"):
        check = (cause.get("situation") or {}).get("check") or {}
        assert check.get("en") and check.get("zh"), cause["id"]


# --- what failed: the request against the shapes the config implies ------------------------------------------------


def _facts(log=None, config=None, question=None, gpu_bytes=None):
    facts = Facts(log=log or LogFacts(), config=config or TrainingConfig(), question=question or QuestionFacts())
    if gpu_bytes:
        facts.gpu.capacity_bytes = gpu_bytes
    return facts


def test_a_request_larger_than_the_gpu_is_impossible(kb):
    sit = read_situation(_facts(LogFacts(requested_bytes=2.27 * 1024 * GIB, capacity_bytes=79.11 * GIB)), kb)
    assert sit.failed.value == "impossible" and "2.27 TiB" in sit.failed.clues[0].text


def test_a_request_no_gpu_holds_is_impossible_with_the_gpu_unknown(kb):
    """"tries to allocate about 1024G" with no GPU named: larger than the largest GPU the table knows, so no GPU
    could serve it; a request below that stays unread without a capacity to compare."""
    big = parse_question("The MoE run dies at once: torch.zeros tries to allocate about 1024G.", kb)
    sit = read_situation(_facts(question=big), kb)
    assert sit.failed.value == "impossible" and "any GPU (the largest known" in sit.failed.clues[0].text
    small = parse_question("The MoE run dies at once: torch.zeros tries to allocate about 40G.", kb)
    assert read_situation(_facts(question=small), kb).failed is None


def test_logits_only_for_token_counts_the_run_implies(kb):
    cfg = TrainingConfig(vocab_size=151936, seq_length=4096, micro_batch_size=4, tensor_model_parallel_size=1)
    logits = 4 * 4096 * 151936 * 4
    sit = read_situation(_facts(LogFacts(requested_bytes=logits, capacity_bytes=79.11 * GIB), cfg), kb)
    assert sit.failed.value == "logits" and "micro-batch 4 x sequence 4,096" in sit.failed.clues[0].text
    # a size that is some other number of tokens x the vocabulary is not read as logits (3 of the 4 sequences here)
    sit = read_situation(_facts(LogFacts(requested_bytes=logits * 0.75, capacity_bytes=79.11 * GIB), cfg), kb)
    assert sit.failed is None
    # the vocabulary of a stand-in preset proves nothing
    approx = TrainingConfig(vocab_size=151936, seq_length=4096, micro_batch_size=4, approximate_shape="qwen3-8b")
    log = LogFacts(requested_bytes=logits, capacity_bytes=79.11 * GIB)
    assert read_situation(_facts(log, approx), kb).failed is None


def test_logits_from_a_token_count_and_vocabulary_the_user_rounded(kb):
    """"About 20k tokens per GPU and a 131k-entry vocabulary", a 9.94 GiB request: 20,480 x 131,000 x 4 B, fp32
    logits - figures written with 'k' are read both ways (x 1000, x 1024) and matched within 3 %; with no stated
    vocabulary (and no model) the same size stays unread."""
    text = "Long-context GRPO, about 20k tokens per GPU and a 131k-entry vocabulary; backward OOMs."
    log = LogFacts(requested_bytes=9.94 * GIB, capacity_bytes=79.11 * GIB)
    sit = read_situation(_facts(log, question=parse_question(text, kb)), kb)
    assert sit.failed.value == "logits" and "~131k" in sit.failed.clues[0].text
    bare = parse_question("Long-context GRPO, about 20k tokens per GPU; backward OOMs.", kb)
    assert read_situation(_facts(log, question=bare), kb).failed is None
    # exact figures keep the exact tolerance: 2 % off 4,096 x 151,936 x 4 B is some other tensor
    exact = parse_question("4096 tokens per GPU, vocab_size 151936; backward OOMs.", kb)
    off = LogFacts(requested_bytes=4096 * 151936 * 4 * 1.02, capacity_bytes=79.11 * GIB)
    assert read_situation(_facts(off, question=exact), kb).failed is None
    zh = parse_question("每个 rank 大约 8k tokens；词表 248k，log_probs 反向时 OOM。", kb)
    sit = read_situation(_facts(LogFacts(requested_bytes=8192 * 248_000 * 4, capacity_bytes=79.11 * GIB),
                                question=zh), kb)
    assert sit.failed.value == "logits"


def test_a_batch_the_question_states_counts_toward_the_tokens(kb):
    cfg = TrainingConfig(vocab_size=151936, seq_length=4096, micro_batch_size=1)
    q = parse_question("NeMo-RL GRPO, logprob_batch_size 4, max_total_sequence_length 4096", kb)
    sit = read_situation(_facts(LogFacts(requested_bytes=9.27 * GIB, capacity_bytes=79.11 * GIB), cfg, q), kb)
    assert sit.failed.value == "logits" and "batch 4" in sit.failed.clues[0].text


# --- when: frames of the failing traceback, pasted traces, the user's words -----------------------------------------


def test_phase_from_the_frames_of_the_failing_traceback(kb):
    log = parse_log("\n".join([
        "Traceback (most recent call last):",
        '  File "/opt/megatron/training/checkpointing.py", line 401, in save_checkpoint',
        "    state_dict = generate_state_dict(args, model, optimizer)",
        '  File "/opt/megatron/core/dist_checkpointing/serialization.py", line 390, in save',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.11 GiB of which 1.00 GiB is free. Including non-PyTorch memory, this process has 78.10 GiB memory in "
        "use. Of the allocated memory 74.00 GiB is allocated by PyTorch, and 1.50 GiB is reserved by PyTorch but "
        "unallocated.",
    ]), kb)
    sit = read_situation(_facts(log), kb)
    assert sit.phase.value == "checkpoint-save" and sit.phase.source == "log"


def test_names_in_code_lines_are_not_frames(kb):
    """'output_tensor, loss_func = forward_step_func(...)' names loss_func as a variable, not a frame."""
    log = parse_log("\n".join([
        "Traceback (most recent call last):",
        '  File "/opt/megatron/core/pipeline_parallel/schedules.py", line 465, in forward_step',
        "    output_tensor, loss_func = forward_step_func(data_iterator, model)",
        '  File "/opt/megatron/core/transformer/mlp.py", line 198, in forward',
        "    intermediate = self.activation_func(intermediate)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB.",
    ]), kb)
    assert read_situation(_facts(log), kb).phase.value == "forward"


def test_a_pasted_arrow_trace_is_read_for_its_frames(kb):
    text = "MegatronPolicyWorker.train\n  -> get_logprobs (model_utils.py:1383)\n  -> compute_log_probs (x.py:12)\n"
    sit = read_situation(_facts(LogFacts(provided=True)), kb, log_text=text)
    # the same function computes a training loss inside .train: not a log-prob pass
    assert sit.phase.value == "loss"
    sit = read_situation(_facts(LogFacts(provided=True)), kb, log_text="  -> compute_ref_log_prob (ref.py:3)\n")
    assert sit.phase.value == "rl-logprob"


@pytest.mark.parametrize("text, phase", [
    ("It trains fine but OOMs every time it saves a checkpoint.", "checkpoint-save"),
    ("保存 checkpoint 的时候爆显存了", "checkpoint-save"),
    ("用 hf2mcore 的脚本转成 mcore 格式时 OOM", "conversion"),
    ("Resuming from the checkpoint OOMs, but training from scratch fits.", "checkpoint-load"),
    ("The ref log prob pass runs out of memory.", "rl-logprob"),
    ("在建 DistributedOptimizer 的时候就 OOM 了", "model-build"),
    # a conversion that failed in its save step failed in a save: the save's fixes (low-memory save) apply
    ("The HF to Megatron conversion OOMs while saving the Megatron checkpoint.", "checkpoint-save"),
    ("The weights convert fine, but it runs out of memory when the checkpoint is being saved.", "checkpoint-save"),
    ("Ray CPU OOM when computing log probabilities in the Megatron backend.", "rl-logprob"),
    # Megatron-LM's tools/checkpoint_util.py reshards a checkpoint to another TP / PP: a conversion
    ("Reshaping the checkpoint from TP=4 PP=4 to TP=8 with tools/checkpoint_util.py runs out of memory.", "conversion"),
    # the packing step of an SFT dataset, before any training (Megatron-Bridge #5869, blind set s52)
    ("The job gets killed while it is tokenizing/packing the dataset, host RAM just climbs until it is OOM-killed.",
     "data-preprocess"),
    ("数据集打包的时候主机内存一直涨，最后被 OOM kill。", "data-preprocess"),
    # a GRPO script of one's own and an HF Trainer prediction (set issue-24-s104: minimind#827, LlamaFactory#581)
    ("rollout 之后算 policy 的 per-token logp 这一段显存暴涨了 20GB", "rl-logprob"),
    ("Running predictions with --do_predict on the test set runs out of memory.", "eval"),
])
def test_phase_from_the_users_words(text, phase, kb):
    assert read_situation(_facts(question=parse_question(text, kb)), kb).phase.value == phase


@pytest.mark.parametrize("text, process", [
    ("GRPO with vLLM not colocated (separate inference GPUs), the refit runs the training GPUs out of memory.",
     "separate-engine"),
    ("vLLM 不 colocate（单独的推理卡，权重通过 NCCL refit 过去），refit 时训练卡显存不够。", "separate-engine"),
])
def test_an_engine_said_not_to_share_the_gpus_is_separate(text, process, kb):
    q = parse_question(text, kb)
    assert read_situation(_facts(question=q), kb).process.value == process
    assert "trainer-side" in q.topics


def test_a_setting_said_already_written_in_the_config_is_stated(kb):
    # Datawhale unlock-deepseek#22: "yaml li attn_implementation yijing xie le flash_attention_2" - the user names
    # a setting the run should have; whether it does is the first check
    assert _said("yaml \u91cc attn_implementation \u5df2\u7ecf\u5199\u4e86 flash_attention_2\uff0c"
                 "\u4e3a\u4ec0\u4e48 0.5B \u90fd\u8981 50G\uff1f", kb).setting_stated
    assert _said("I've set attn_implementation to flash_attention_2, why does 0.5B take 50G?", kb).setting_stated


@pytest.mark.parametrize("text", [
    # ms-swift / TRL server mode: vLLM is a process of its own on other GPUs (ms-swift#6413)
    "GKD OOMs while loading the teacher; use_vllm=true vllm_mode=server",
    "teacher 加载时 OOM，vLLM 走 server 模式。",
])
def test_an_engine_in_server_mode_does_not_share_the_trainers_gpus(text, kb):
    assert read_situation(_facts(question=parse_question(text, kb)), kb).process.value == "separate-engine"


def test_a_setting_names_the_pass_it_configures_not_the_one_that_failed(kb):
    """A pasted parameter list ("log_prob_micro_batch_size_per_gpu=8") configures the log-prob pass; it does not
    say that pass failed. The same words as a statement still do."""
    listed = "verl PPO OOMs. Params: ppo_micro_batch_size_per_gpu=4, log_prob_micro_batch_size_per_gpu=8."
    assert read_situation(_facts(question=parse_question(listed, kb)), kb).phase is None
    said = "verl PPO OOMs in the log prob pass with log_prob_micro_batch_size_per_gpu=8."
    assert read_situation(_facts(question=parse_question(said, kb)), kb).phase.value == "rl-logprob"


@pytest.mark.parametrize("text", [
    "The machine has 512 GB of RAM, which should load the whole model, yet the conversion runs out of memory.",
    "数据预处理太吃内存了，两个进程就吃了快 800G 内存。",
])
def test_host_ram_said_as_people_say_it(text, kb):
    assert "host-memory" in parse_question(text, kb).topics
    assert "host-memory" not in parse_question("训练时吃显存很厉害，显存占用 70G。", kb).topics


def test_the_phase_named_beside_the_failure_wins(kb):
    """'resume' is context here; the OOM is in the log-prob pass."""
    q = parse_question("We resumed from step 200. Now the old log prob pass OOMs.", kb)
    assert read_situation(_facts(question=q), kb).phase.value == "rl-logprob"


def test_a_phase_beside_memory_said_to_be_higher_is_where_the_memory_is(kb):
    """No failure word: "resume ... uses more memory" places it in the resume, not in the save a later sentence
    names as a constraint (NeMo #14995, blind set s51). A phase beside a failure word still outranks it (ChatLearn
    #77: the generation OOMs; the resume is why there is more memory)."""
    q = parse_question("Resume training will use more memory than before: 1.7G more per GPU with TP2. The customer "
                       "needs to keep ckpt_async_save=True to reduce checkpoint saving time.", kb)
    assert read_situation(_facts(question=q), kb).phase.value == "checkpoint-load"
    q = parse_question("从头训练一切正常；开启续训之后，一开始做 policy generation 就 OOM 了。"
                       "为什么续训会多出这么多显存？", kb)
    assert read_situation(_facts(question=q), kb).phase.value == "rl-rollout"


def test_a_figure_said_as_more_memory_is_an_increase_not_the_cards_size(kb):
    """"there will be more 1.7G memory per gpu" is how much more, not a 1.7 GB GPU; "each GPU has 80GB memory"
    is a card's size."""
    q = parse_question("Resume uses more memory: there will be more 1.7G memory per gpu.", kb)
    assert q.gpu_nominal_gb is None and [f["role"] for f in q.memory_figures] == ["increase"]
    q = parse_question("续训之后每张卡多占了 1.7G 显存。", kb)
    assert q.gpu_nominal_gb is None and [f["role"] for f in q.memory_figures] == ["increase"]
    assert parse_question("8 GPUs, 80GB memory per GPU.", kb).gpu_nominal_gb == 80


def test_a_host_kill_with_no_owner_in_view_measures_before_cutting_workers(kb):
    """Ray's memory monitor killing a task on a 1 TB node says host RAM ran out, not who filled it (OpenRLHF #936,
    blind set s51): the per-process, per-step measurement leads. A DataLoader worker's kill line names the owner."""
    log = ["ERROR - An error occurred during score calculation: Task was killed due to the node running low on "
           "memory."]
    q = ("用 Ray 多机多卡训练时报这个错，已经设了 RAY_DEBUG_DISABLE_MEMORY_MONITOR=1 还是不行，"
         "节点内存 1000G 没法改，怎么优化？")
    _, _, diag = pipeline.run(pipeline.Inputs(log=log, question=q), kb)
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "track-memory-per-step"
    assert "expandable-segments" in {a.id for a in diag.avoid}
    log = ["RuntimeError: DataLoader worker (pid 2637) is killed by signal: Killed."]
    q = "Training is killed after a while; host memory runs out."
    _, _, diag = pipeline.run(pipeline.Inputs(log=log, question=q), kb)
    assert diag.fixes[0].id == "reduce-dataloader-workers"


def test_a_setting_said_never_to_reach_the_run_is_checked_before_anything_is_blamed(kb):
    """verl #1028 (blind set s52): the Megatron backend ignores ppo_micro_batch_size_per_gpu; the user says the
    settings 根本不生效 and that lowering one changed nothing. That the setting did not apply is what they see, so the
    'a smaller micro-batch moved nothing, so it is model state' reading must not stand."""
    q = ("用 megatron 后端跑 GRPO，发现 actor.ppo_micro_batch_size_per_gpu 这个设置根本不生效。"
         "我把 ppo_micro_batch_size_per_gpu 调小了，actor 更新的显存并没有变化，这正常吗？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.not_applied_said"] and "reduce-micro-batch" in flat["situation.tried"]
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"
    q = "I lowered the micro-batch to 1 and the memory did not change at all."
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert not flat["situation.not_applied_said"] and diag.causes[0].id == "capacity-model-state"
    # Megatron-Bridge #3518: the dumped config shows the workload's recompute_modules wiped by the perf scripts
    q = "看 dump 出来的配置，recompute_modules 变成了 []，等于重计算被清空了，显存比更新之前高。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.not_applied_said"] and diag.fixes[0].id == "confirm-setting-applied"


def test_gradient_buffers_said_to_be_back_for_a_log_prob_pass_are_training_buffers(kb):
    """miles #612 (blind set s52): the DDP grad_data buffer comes back to the GPU with the model for the old / ref
    log-prob forward, which runs no backward: the training buffers, not the logits, are what the user names."""
    q = ("miles colocate 模式，每一轮 rollout 结束后 actor wake_up，接着跑 old/ref 的 log prob 前向。"
         "log prob 这几次前向显存很紧。DDP 的 grad_data 缓冲区在 wake_up() 时也从 CPU 整份恢复回 GPU 了，"
         "但里面全是 0，大概占了 ~16 GB。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert "gradients" in flat["situation.components"] and flat["situation.phase"] == "rl-logprob"
    assert diag.causes[0].id == "capacity-model-state" and diag.fixes[0].id == "forward-only-without-training-buffers"


def test_after_the_restart_is_a_memory_trend_only_when_memory_is_what_it_speaks_of(kb):
    """SkyRL #1403 (blind set s52): 'the logits diverge right after the restart' says nothing of memory; 'memory
    stays up after the restart' does."""
    q = parse_question("Loading the checkpoint raises a KeyError; on a resume that does load, the logits diverge "
                       "right after the restart.", kb)
    assert read_situation(_facts(question=q), kb).trend is None
    q = parse_question("GPU memory after the restart is 40 GB higher than before the restart.", kb)
    assert read_situation(_facts(question=q), kb).trend.value == "held"


def test_a_card_named_after_more_is_still_a_card(kb):
    """'two more 80GB A100s' adds cards of 80 GB; 'more 1.7G memory per gpu' is an increase (the review of the
    increase role); 差不多 75G is about 75 GB."""
    assert parse_question("We're adding two more 80GB A100s.", kb).gpu_nominal_gb == 80
    q = parse_question("训练时显存占用差不多 75G 就 OOM 了", kb)
    assert [f["role"] for f in q.memory_figures] == ["oom"]


def test_a_cuda_error_that_is_not_out_of_memory_is_no_oom(kb):
    """ROLL #484: a colocated LoRA weight sync dies in CUDA IPC ("CUDA driver error: unknown error" under
    storage._share_cuda_()); the user first thought it was memory. No engine share or batch changes it."""
    log = ["serialize_named_weights", "-> ForkingPickler", "-> torch.multiprocessing.reductions.reduce_tensor",
           "-> storage._share_cuda_()", "-> CUDA driver error: unknown error"]
    q = "ROLL colocate 的 LoRA 权重同步每次都挂，报 CUDA 错误，我一开始以为是显存不够。这是 OOM 吗？"
    _, _, diag = pipeline.run(pipeline.Inputs(log=log, question=q), kb)
    assert diag.causes[0].id == "not-an-oom"
    assert "shrink-colocated-engine" not in [f.id for f in diag.fixes]


def test_host_memory_counts_only_where_the_user_says_it_ran_out(kb):
    q = parse_question("转换 7B 时在 24G 显存的 A10 上直接 OOM。能不能卸载到 CPU 内存转换？", kb)
    assert read_situation(_facts(question=q), kb).process is None
    q = parse_question("Saving the checkpoint, the host memory runs out and the job is killed.", kb)
    assert read_situation(_facts(question=q), kb).process.value == "host"
    q = parse_question("Ray CPU OOM with the Megatron backend on long sequences.", kb)
    assert read_situation(_facts(question=q), kb).process.value == "host"
    q = parse_question("DefaultCPUAllocator: Can't allocate memory when finetuning Llama-3-8B.", kb)
    assert read_situation(_facts(question=q), kb).process.value == "host"


def test_a_host_oom_in_a_phase_that_loads_no_batch_is_not_the_dataloaders(kb):
    """What is new on the host in a log-prob pass is what it gathers; the workers and a conversion are not."""
    question = "Ray CPU OOM when computing log probabilities on a large node count; float32 copies in ray.get."
    _, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert diag.causes[0].id == "host-oom"
    assert not {"reduce-dataloader-workers", "convert-sharded"} & {f.id for f in diag.fixes}


def test_a_driver_error_that_is_not_out_of_memory_is_no_oom(kb):
    log = ("[torch_memory_saver.cpp] CUresult error: 1 (invalid argument)  file=csrc/core.cpp func=free line=104\n"
           "-> ray.exceptions.ActorUnavailableError\n")
    _, _, diag = pipeline.run(pipeline.Inputs(log=log.splitlines(), question="Is this OOM? update_weights died."), kb)
    assert diag.causes[0].id == "not-an-oom"
    assert "shrink-colocated-engine" not in {f.id for f in diag.fixes}


# --- where and how it moves: per-rank and per-iteration memory lines ------------------------------------------------


def test_memory_that_rises_every_report_grows(kb):
    log = LogFacts(provided=True, report_series=[(1, 40 * GIB), (10, 44 * GIB), (20, 46 * GIB), (30, 48 * GIB)])
    sit = read_situation(_facts(log), kb)
    assert sit.trend.value == "grows" and sit.trend.source == "log"
    flat = LogFacts(provided=True, report_series=[(1, 40 * GIB), (10, 44 * GIB), (20, 44.1 * GIB), (30, 44 * GIB)])
    assert read_situation(_facts(flat), kb).trend.value == "constant"


def test_trend_is_read_from_megatron_memory_lines(kb):
    lines = [f"[Rank 0] (after {i} iterations) memory (MB) | allocated: {30000 + 400 * i} | max allocated: "
             f"{40000 + 400 * i} | reserved: 60000 | max reserved: 60000" for i in (10, 20, 30, 40, 50)]
    sit = read_situation(_facts(parse_log("\n".join(lines), kb)), kb)
    assert sit.trend.value == "grows"


def test_the_first_stage_at_the_limit_is_read_from_per_rank_lines(kb):
    facts = _facts(LogFacts(provided=True))
    facts.stats = {"peak_rank_allocated_ratio": 1.3, "ranks_reported": [0, 8, 16, 24], "peak_rank": 0}
    assert read_situation(facts, kb).where.value == "first-stage"


# --- what changed, what was tried -------------------------------------------------------------------------------


def test_changes_and_tries_from_the_users_clauses(kb):
    q = parse_question("After upgrading the container it OOMs at iteration 3. Same config, it passes with the old "
                       "one. I tried expandable_segments:True, no effect.", kb)
    sit = read_situation(_facts(question=q), kb)
    assert [r.value for r in sit.changed] == ["stack"] and sit.worked_before
    assert "expandable-segments" in [r.value for r in sit.tried]
    assert "expandable-segments" in [r.value for r in sit.no_effect]


# --- what the agent states outranks the words ----------------------------------------------------------------------


def test_what_the_agent_states_wins(kb):
    q = parse_question("It OOMs while saving a checkpoint.", kb)
    sit = read_situation(_facts(question=q), kb, Stated(phase="rl-weight-sync", trend="grows"))
    assert (sit.phase.value, sit.phase.source) == ("rl-weight-sync", "agent")
    assert sit.trend.value == "grows"


def test_cli_flags_are_validated_and_listed_in_help():
    proc = subprocess.run([*LAUNCHER, "diagnose", "--question", "OOM", "--phase", "lunch"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "--phase 'lunch': not a known name" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    helptext = subprocess.run([*LAUNCHER, "diagnose", "--help"], capture_output=True, text=True, cwd=ROOT,
                              timeout=120).stdout
    assert "--phase {" in helptext and "rl-logprob" in helptext and "--trend {" in helptext


def _stdout(argv: list[str]) -> str:
    """memtune's answer, run in-process (the launcher's own checks are the test above's)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(argv) == 0
    return out.getvalue()


def test_the_answer_starts_with_the_situation_as_read():
    args = ["diagnose", "--question", "NeMo-RL GRPO: the ref log prob pass OOMs at the first step",
            "--phase", "rl-logprob", "--framework", "nemo-rl"]
    md = _stdout(args)
    first = [line for line in md.splitlines()[1:] if line.strip()][0]
    assert first.startswith("**Situation as read:**") and "log-prob" in first
    data = json.loads(_stdout([*args, "--format", "json"]))
    assert data["situation"]["fields"]["phase"]["source"] == "agent"
    assert "capacity-activations" in {c["id"] for c in data["situation"]["ruled_out"]}
    assert "capacity-activations" not in {c["id"] for c in data["causes"]}


def test_a_contradicted_cause_is_never_proposed(kb):
    """A checkpoint save has no activations: no activation fix leads, whatever else the words suggest."""
    inputs = pipeline.Inputs(question="Llama3-8B 32K sequence, micro batch 4: it OOMs while saving the checkpoint",
                             stated=Stated(phase="checkpoint-save"))
    _, _, diag = pipeline.run(inputs, kb)
    assert "capacity-activations" in diag.ruled_out
    assert diag.causes[0].id == "checkpoint-save"
    assert diag.fixes[0].id not in {"selective-recompute", "full-recompute", "reduce-micro-batch"}


def test_thin_evidence_names_candidates_with_their_checks(kb):
    from memtune import report

    _, flat, diag = pipeline.run(pipeline.Inputs(question="My Megatron job OOMs sometimes. What should I change?"), kb)
    rep = report.build(diag, flat, kb, "en")
    candidates = rep["situation"]["candidates"]
    if candidates:  # a confident answer needs evidence; when there is none, each remaining cause comes with its check
        assert len(candidates) >= 2 and all(c["check"] for c in candidates)


def test_memory_growth_mentions_no_grad_among_its_mechanisms(kb):
    check = kb.get("causes", "memory-growth")["situation"]["check"]["en"]
    assert "torch.no_grad()" in check and "memtune compare" in check


# --- words a phrase is made of, split by others ----------------------------------------------------------------------


def test_a_gapped_word_reads_its_parts_in_order_within_the_gap():
    from memtune.situation import _Literals

    words = _Literals(["一直…上升", "保存…模型", "keeps…growing"])
    said = lambda text: [w for _, _, w in words.spans(text)]  # noqa: E731
    assert said("显存一直在缓慢地上升") == ["一直在缓慢地上升"]
    assert said("在保存 Megatron 模型的时候") == ["保存 megatron 模型"]
    assert said("memory keeps slowly growing") == ["keeps slowly growing"]
    assert said("上升之后一直没变") == []  # order matters
    assert said("一直" + "很" * (_Literals.GAP + 1) + "上升") == []  # too far apart
    assert said("keepsake growing") == []  # a Latin part still ends on a word boundary


def test_a_phase_said_to_come_later_is_not_where_it_failed(kb):
    said = "It dies with a CUDA OOM right after generation, before the log-prob pass."
    assert read_situation(Facts(question=parse_question(said, kb)), kb).phase is None
    said = "OOM when vLLM wakes up for the next rollout, after the actor update."  # several: the most telling
    assert read_situation(Facts(question=parse_question(said, kb)), kb).phase.value == "rl-weight-sync"
    facts = Facts(question=parse_question("The log-prob pass dies with a CUDA OOM.", kb))
    assert read_situation(facts, kb).phase.value == "rl-logprob"


def test_host_memory_named_as_context_is_not_the_failure(kb):
    """A CUDA OOM on a node with plenty of host RAM is a GPU failure; "it is not a CUDA OOM" is a host one."""
    gpu = read_situation(Facts(question=parse_question(
        "The workers die with a CUDA OOM during initialization; the nodes have 450 GB of host RAM.", kb)), kb)
    assert gpu.gpu_memory_failed and (gpu.process is None or gpu.process.value != "host")
    host = read_situation(Facts(question=parse_question(
        "Host memory reaches the cgroup limit and the pod is killed. It is not a CUDA OOM.", kb)), kb)
    assert not host.gpu_memory_failed and host.process.value == "host"


def test_the_ledger_counts_the_phase_the_situation_read(kb):
    """The GPU ledger takes its phase from the situation (frames, log, words), except where no GPU memory is in
    play: config validation allocates nothing, and a host-memory failure is not the GPU's."""
    def phase_of(text):
        return read_situation(Facts(question=parse_question(text, kb)), kb).ledger_phase(kb)

    assert phase_of("The first step dies in backward with a CUDA OOM.") == "backward"
    assert phase_of("Config validation fails with an AssertionError.") is None
    assert phase_of("While saving a checkpoint the host memory runs out and the job is killed.") is None
    assert phase_of("While saving a checkpoint it runs out of GPU memory.") == "checkpoint-save"


def test_a_megatron_lm_launch_keeps_megatron_core_defaults(kb):
    """A Bridge recipe turns the distributed optimizer on; a Megatron-LM or Pai-Megatron-Patch launch leaves it off
    unless the flag is given, so a question about one is not told it is already on."""
    bridge = pipeline.collect_facts(pipeline.Inputs(question="Llama3-8B SFT with Megatron Bridge, TP2, OOM"), kb)
    mlm = pipeline.collect_facts(pipeline.Inputs(question="Llama3-8B with Megatron-LM pretrain_gpt.py, TP2, OOM"), kb)
    assert bridge.config.use_distributed_optimizer is True and "use_distributed_optimizer" in bridge.config.assumed
    assert mlm.config.use_distributed_optimizer is None


def test_of_two_model_sizes_the_failing_one_is_the_model(kb):
    assert parse_question("单卡跑 0.5B 没问题；换成 8 卡跑 7B 就失败了", kb).model_size_b == 7.0
    assert parse_question("The 1.3B model trains; the 13B one fails at step 1", kb).model_size_b == 13.0


def test_the_answer_names_where_the_memory_was_asked_for(kb):
    """The innermost frames of the failing traceback, innermost first, reach the situation line."""
    log = ('File "megatron/checkpointing.py", line 572, in load_checkpoint\n'
           '  optimizer.load_state_dict(state_dict["optimizer"])\n'
           'File "/opt/conda/lib/python3.10/site-packages/torch/optim/optimizer.py", line 379, in load_state_dict\n'
           '  state_dict = deepcopy(state_dict)\n'
           'File "/opt/conda/lib/python3.10/copy.py", line 146, in deepcopy\n'
           '  y = copier(x, memo)\n')
    facts = Facts(question=parse_question("OOM while resuming from a checkpoint", kb))
    sit = read_situation(facts, kb, None, log)
    assert sit.call_path == ["deepcopy (copy.py)", "load_state_dict (optimizer.py)",
                             "load_checkpoint (checkpointing.py)"]
    inputs = pipeline.Inputs(question="OOM while resuming from a checkpoint", log=log.splitlines())
    _, _, diag = pipeline.run(inputs, kb)
    from memtune.report import situation_report

    assert "`deepcopy (copy.py)`" in situation_report(diag, kb, "en")["line"]


def test_functions_the_user_names_as_where_it_failed(kb):
    said = ("The job dies with a CUDA OOM during initialization, inside _warmup_jit_function (called from "
            "set_jit_fusion_options), before the first iteration; it runs in the backward pass with TP4.")
    sit = read_situation(Facts(question=parse_question(said, kb)), kb)
    assert sit.call_path == ["_warmup_jit_function", "set_jit_fusion_options"]


def test_a_crash_that_is_no_memory_failure_is_quoted(kb):
    log = ["Traceback (most recent call last):",
           "AssertionError: Parameter model.embed_tokens.weight too large for buffer: 1853358080 > 1771261132"]
    _, flat, _ = pipeline.run(pipeline.Inputs(question="refit fails", log=log), kb)
    assert flat["situation.error"].startswith("AssertionError: Parameter model.embed_tokens.weight too large")


def _said(text, kb):
    return read_situation(Facts(question=parse_question(text, kb)), kb)


def test_the_step_that_failed_is_the_one_beside_the_failure(kb):
    """"Step 1 completes, step 2 runs out": the second step, when the first optimizer step has created Adam's state."""
    sit = _said("Step 1 completes fine, but step 2 always runs out of GPU memory.", kb)
    assert sit.step.value == "second-step"
    assert _said("第一步正常，第二步就显存不足了", kb).step.value == "second-step"
    assert _said("It OOMs at the very first step.", kb).step.value == "first-step"


def test_an_engine_on_gpus_of_its_own_is_not_colocated(kb):
    """The engine's name said elsewhere in the message does not make a non-colocated run colocated."""
    sit = _said("Non-colocated: vLLM generation runs on a separate inference cluster; the trainer OOMs.", kb)
    assert sit.process.value == "separate-engine"
    assert _said("vLLM is colocated with the trainer and the update OOMs", kb).process.value == "colocated-engine"


def test_a_forward_only_model_holding_more_than_its_weights(kb):
    sit = _said("The reference model only does forward, yet it takes much more memory than the weights should need.",
                kb)
    assert sit.forward_only and sit.more_than_expected
    sit = _said("ref 模型只做前向、完全不训练，为什么会比预期多占这么多显存？", kb)
    assert sit.forward_only and sit.more_than_expected
    assert not _said("The actor OOMs in the backward pass.", kb).forward_only


def test_a_size_and_a_layout_without_a_sequence_still_give_the_model_state(kb):
    """"A 30B model, PP2 on 8 A100 40GB, OOM": weights + gradients + optimizer per GPU need no sequence length."""
    inputs = pipeline.Inputs(question="Full fine-tuning a 30B GPT model with PP 2 on 8x A100 40GB runs out of memory.")
    facts, flat, diag = pipeline.run(inputs, kb)
    assert not facts.estimate and flat["derived.model_state_bytes"] > 40 * GIB
    assert diag.causes[0].id == "capacity-model-state"
    assert "selective-recompute" not in [f.id for f in diag.fixes]


def test_a_model_named_in_an_auxiliary_role_is_not_the_trained_one(kb):
    q = parse_question("我用 16B 模型做 PPO 训练，4 卡 OOM。reward 模型是 Llama-3-8B-Instruct。", kb)
    assert q.model_name is None and q.model_size_b == 16
    q = parse_question("The critic model is Llama-3-8B and it OOMs.", kb)
    assert q.model_name is not None


def test_host_ram_growing_in_chinese_and_figures_said_live(kb):
    """"内存不断的增加" is host RAM that grows; "(158.5 GiB) reserved but only 19,191 MiB (18.7 GiB) actually live"
    says what is reserved and what is live, so the rest is held by the cache."""
    sit = _said("训练的时候内存会不断的增加，最后会出现 OOM", kb)
    assert sit.trend.value == "grows" and sit.process.value == "host"
    q = parse_question("PyTorch had 162,286 MiB (158.5 GiB) reserved but only 19,191 MiB (18.7 GiB) actually live.", kb)
    assert q.figure("reserved", last=True) > 150 * GIB and q.figure("allocated", last=True) < 20 * GIB


def test_the_answer_quotes_what_the_user_changed_or_tried(kb):
    """The agent checks the reading against the user's words: each change or try is listed with the words it came
    from, cut to the part that says it."""
    text = ("Llama3 70B SFT on 32 H100s OOMs at step 1 after we upgraded to the 25.09 container. "
            "I already tried turning on expandable segments and it made no difference.")
    facts, _, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    from memtune.report import situation_report

    said = {(s["kind"], s["value"]): s["clues"][0] for s in situation_report(diag, kb, "en")["said"]}
    assert "container" in said[("changed", "stack")]
    assert "expandable segments" in said[("tried", "expandable-segments")]
    assert all(len(q) <= 2 + 2 * 32 + 40 for q in said.values())


def test_logits_larger_than_the_gpu_are_still_logits(kb):
    """262,144 tokens x 151,936 vocabulary x 4 B = 148 GiB: no allocator serves it, but it is the run's logits, which
    chunking or a vocabulary split shrink; a size no shape of the run explains stays impossible."""
    cfg = TrainingConfig(vocab_size=151936, seq_length=262144, micro_batch_size=1, tensor_model_parallel_size=1)
    logits = 262144 * 151936 * 4
    sit = read_situation(_facts(LogFacts(requested_bytes=logits, capacity_bytes=139.8 * GIB), cfg), kb)
    assert sit.failed.value == "logits" and "larger than the GPU" in sit.failed.clues[1].text
    sit = read_situation(_facts(LogFacts(requested_bytes=logits * 1.3, capacity_bytes=139.8 * GIB), cfg), kb)
    assert sit.failed.value == "impossible"


def test_a_verb_with_its_ending_is_still_the_fix(kb):
    """"reducing", "decreasing": a stem, not the bare verb, before the \\w* that takes the ending."""
    from memtune.recognize import fix_recognizer

    find = fix_recognizer(kb).find
    assert [m.ident for m in find("reducing the micro batch to 1 makes it fit")] == ["reduce-micro-batch"]
    assert [m.ident for m in find("decreasing the number of workers")] == ["reduce-dataloader-workers"]
    sit = _said("It OOMs at step 1; reducing the micro batch to 1 makes it fit but is slow.", kb)
    assert [r.value for r in sit.worked_with] == ["reduce-micro-batch"]


def test_settings_stated_for_the_reference_model_are_not_the_trainers(kb):
    q = parse_question("ref 的 megatron 配置是 TP1/PP1/CP1、sequence_parallel: True、use_distributed_optimizer: False，"
                       "save_freq: -1。请问这个 OOM 应该怎么解决？", kb)
    assert "use_distributed_optimizer" not in q.layout and "tensor_model_parallel_size" not in q.layout
    q = parse_question("The actor uses TP 4 and use_distributed_optimizer: False. It OOMs.", kb)
    assert q.layout.get("use_distributed_optimizer") is False and q.layout.get("tensor_model_parallel_size") == 4


def test_two_versions_one_that_worked_is_the_stack_moving(kb):
    """"3.12.4 OOMs while 3.10.3 runs normally" says the software moved under a config that fit."""
    sit = _said("同样的训练代码，ms-swift 3.12.4 版本 GRPO 训练报显存 OOM，而 3.10.3 版本正常运行。", kb)
    assert sit.worked_before and [r.value for r in sit.changed] == ["stack"]
    assert not _said("TP 2 and PP 4 with 3.5 GB free; it worked before.", kb).changed


@pytest.mark.parametrize("text", [
    # vllm-project/vllm#15228 (set issue-24-s70): a version at the end of a sentence is still a version
    "Out of Memory error for Qwen2.5 in 0.8.0 and 0.8.1. Worked fine in the previous versions.",
    "With version 0.7.2 the service starts up fine; with 0.8.0 and 0.8.1 the same command runs out of memory.",
    # pytorch/pytorch#97712: the same script measured on two versions, the newer taking more
    "nvidia-smi shows memory usage difference: PyTorch 1.13.1+cu117: 5515MiB, 2.0.0+cu118: 6802MiB",
])
def test_the_previous_version_that_ran_is_the_stack_moving(text, kb):
    sit = _said(text, kb)
    assert sit.worked_before and [r.value for r in sit.changed] == ["stack"]


def test_a_newer_version_that_takes_less_memory_moved_nothing_the_user_blames(kb):
    assert not _said("PyTorch 2.1 uses 20 GB, PyTorch 2.3 uses 18 GB.", kb).changed
    # figures are no versions: "1.5 GiB free, 2.3 GiB reserved" names no software at all
    assert not _said("On torch, GPU 0 has 1.5 GiB free and 2.3 GiB reserved, then 4.1 GiB.", kb).changed


def test_the_model_state_floor_sizes_add_gpus_and_the_fix_shows_its_own_lines_first(kb):
    """70B on one H100: ~1.2 TB of state needs whole nodes, not twice one GPU; an offload shown in two lines shows the
    offload itself, not the distributed optimizer it needs beside it."""
    _, flat, diag = pipeline.run(pipeline.Inputs(question="Training Llama-2-70B with Megatron on one H100 runs out of "
                                                          "memory. How many GPUs do I need?"), kb)
    assert flat["derived.model_state_min_gpus"] > 8 and flat["derived.next_world"] % 8 == 0
    assert flat["derived.next_world"] >= flat["derived.model_state_min_gpus"] and diag.fixes[0].id == "add-gpus"
    from memtune.fixlines import apply_lines

    static = {"bridge_override": ["optimizer.optimizer_cpu_offload=true"]}
    lines = apply_lines(static, ["optimizer.use_distributed_optimizer=true", "optimizer.optimizer_cpu_offload=true"])
    assert lines["bridge_override"][0] == "optimizer.optimizer_cpu_offload=true"


def test_host_memory_named_where_the_gpu_is_fine_outranks_the_colocated_engine(kb):
    """hostram-miles-3089: a colocated run whose GPU memory is fine while the node's RAM fills ran out of host RAM."""
    text = ("miles colocated LoRA RL on one 8xH200 node. Host RAM is huge: the node shows 323.6 GB used while the "
            "trainer is awake. GPU memory is fine. Where does all that host memory go?")
    sit = read_situation(Facts(question=parse_question(text, kb)), kb)
    assert sit.process.value == "host" and sit.gpu_memory_fine
    # without the GPU said to be fine, the engine named first is what shares the GPU
    sit = read_situation(Facts(question=parse_question(text.replace(" GPU memory is fine.", ""), kb)), kb)
    assert sit.process.value == "colocated-engine"


def test_offloading_to_the_cpu_is_ruled_out_where_host_ram_fills(kb):
    """hostram-colossalai-6266: ZeRO cpu offload already on, GPUs at 20 of 80 GB, CPU memory full."""
    text = ("zero_stage=1，zero_cpu_offload=true，80G 的卡显存占用很少，只用了 20G，CPU 内存占满了。"
            "如何增大显存占用、减小 CPU 内存占用？")
    q = parse_question(text, kb)
    assert q.layout.get("optimizer_cpu_offload") is True and "cpu_offloading" not in q.layout
    _, _, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    recommended = {f.id for f in diag.fixes}
    assert not recommended & {"optimizer-cpu-offload", "activation-cpu-offload", "fine-grained-activation-offload"}


def test_growth_words_that_say_it_climbs_until_the_oom(kb):
    q = parse_question("The memory usage increases continuously until the OOM; no error in the log.", kb)
    assert read_situation(Facts(question=q), kb).trend.value == "grows"


def test_words_of_the_precision_and_fault_classes(kb):
    """FP8 primary weights are fp8_param_gather; memory "essentially the same" did not drop; a CUDA 'invalid
    argument' is a fault, not an allocation; asking whether FP8 saves memory is a question about its mechanism."""
    q = parse_question("We keep the parameters natively in FP8 (FP8 primary weights); per-GPU memory is "
                       "essentially the same as with BF16 parameters.", kb)
    assert q.layout.get("fp8_param_gather") is True and "memory-unchanged" in q.topics
    assert "fp8_param_gather" not in parse_question("Should I keep the parameters in FP8?", kb).layout
    assert "cuda-fault" in parse_question("出现 Cuda failure 'invalid argument'，是不是显存不够？", kb).topics
    assert "asks-saving" in parse_question("Megatron 的 FP8 训练能降低显存吗？", kb).topics
    assert "asks-saving" in parse_question("Does FP8 training reduce GPU memory?", kb).topics
    # asking how to save memory is not asking whether a setting does
    for text in ("How can I reduce GPU memory with FP8 on?", "I train with FP8; what should I do to reduce memory?",
                 "FP8 训练 OOM，有什么办法可以降低显存？"):
        assert "asks-saving" not in parse_question(text, kb).topics, text


def test_memory_not_released_where_it_should_be_is_kept_alive(kb):
    """Memory held where it should be gone (after an offload, before training) is the growth question: something
    keeps it alive, and measuring it phase by phase finds what; capacity fixes are not what leads."""
    for text in ("After offloading the actor, part of the GPU memory is never released; what is holding it?",
                 "训练完 offload 之后，总有一部分显存释放不掉。"):
        sit = read_situation(Facts(question=parse_question(text, kb)), kb)
        assert sit.trend.value == "held", text
    said = "Is this extra memory expected, or is something being kept alive? Nothing else changed."
    facts, flat, diag = pipeline.run(pipeline.Inputs(question=said), kb)
    assert diag.causes[0].id == "memory-growth" and diag.fixes[0].id == "track-memory-per-step"
    # memory the user only measures is no retention
    sit = read_situation(Facts(question=parse_question("Memory usage is flat at 60 GB every step.", kb)), kb)
    assert sit.trend is None or sit.trend.value != "held"


def test_a_step_still_ahead_names_the_step_it_failed_before(kb):
    said = "The workers die with a CUDA OOM during worker initialization, before the first training step."
    sit = read_situation(Facts(question=parse_question(said, kb)), kb)
    assert sit.step.value == "before-training" and sit.phase.value == "model-build"
    said = "It OOMs after the first training step, in the optimizer."  # over, not ahead: no step read from it
    sit = read_situation(Facts(question=parse_question(said, kb)), kb)
    assert sit.step is None or sit.step.value != "first-step"


def test_the_open_causes_are_called_a_check_only_when_the_first_fix_is_one(kb):
    """Causes tied on the user's words: the answer names them all, and says the first fix tells them apart only
    when that fix is the check (engine reason thin-evidence), not the top cause's own fix."""
    said = ("The policy workers die with a CUDA OOM during worker initialization, before the first training step, "
            "about 75 GiB per GPU already resident. What is holding that memory?")
    seen = set()
    for question in (said, "OOM, what should I check first?"):
        outs = []
        for fmt in ("json", "markdown"):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                cli.main(["diagnose", "--question", question, "--gpu", "GH200 96GB", "--format", fmt])
            outs.append(out.getvalue())
        report, lead = json.loads(outs[0]), outs[1].split("\n---\n", 1)[0]
        assert report["situation"]["candidates"] and "Cause (still open)" in lead
        is_check = "thin-evidence" in report["fixes"][0]["because"]
        assert ("the check that tells them apart" in lead) == is_check
        seen.add(is_check)
    assert seen == {True, False}  # both ways are met


def test_no_longer_fitting_is_a_memory_failure_and_the_loss_step_a_phase(kb):
    """"It needs 24 GiB and no longer fits" reports the failure as plainly as "OOM"; "the loss step" is the loss."""
    said = "At 12288 tokens the loss step's peak needs 24.35 GiB and no longer fits on the 24 GB card."
    q = parse_question(said, kb)
    assert "oom" in q.topics
    assert read_situation(Facts(question=q), kb).phase.value == "loss"
    assert "oom" in parse_question("单机放不下整个模型", kb).topics
    assert "oom" not in parse_question("This layout doesn't fit the pattern of the recipe.", kb).topics


def test_a_change_that_made_memory_worse_reached_the_run(kb):
    """"I switched recompute to mlp and it OOMs instead" says the setting applied: not a setting that was lost."""
    for said in ("I changed recompute_modules from mla_up_proj to mlp and it made it worse: it OOMs now.",
                 "我把重计算的模块从 mla_up_proj 改成了 mlp，结果反而 OOM 了。"):
        facts, flat, diag = pipeline.run(pipeline.Inputs(question=said), kb)
        assert flat["situation.made_worse"] is True, said
        assert diag.causes[0].id != "setting-not-applied", said
    said = "I set expandable_segments but it made no difference."
    facts, flat, diag = pipeline.run(pipeline.Inputs(question=said), kb)
    assert flat["situation.made_worse"] is False and diag.causes[0].id == "setting-not-applied"


def test_a_phase_said_to_be_over_is_what_came_just_before(kb):
    """"After every checkpoint save, the offload fills host RAM": the save is over, not where it failed, but it is
    what came just before (and may have left pinned buffers behind); in Chinese the word follows (zhihou, suanwan)."""
    for said in ("Every time after a checkpoint is saved, the next offload runs the node out of host memory.",
                 "每次保存 checkpoint 之后，接下来 offload 的时候主机内存就爆了。"):
        sit = read_situation(Facts(question=parse_question(said, kb)), kb)
        assert sit.phase is None and sit.after_phase == "checkpoint-save", said
    said = "ref log-prob 算完、把 ref 模型 offload 回 CPU 的那一刻显存尖峰，被 OOM kill。"
    sit = read_situation(Facts(question=parse_question(said, kb)), kb)
    assert sit.phase is None and sit.after_phase == "rl-logprob"
    sit = read_situation(Facts(question=parse_question("第一步之后就 OOM 了", kb)), kb)
    assert sit.step is None or sit.step.value != "before-training"
    # a phase said to have gone fine is over too (baichuan-inc/Baichuan2#113, set issue-24-s99: the load was fine,
    # deepspeed.initialize - the engine's setup, where ZeRO allocates the optimizer's partitions - ran out)
    said = "模型加载没问题，但是在 deepspeed.initialize 的时候报错 OOM"
    sit = read_situation(Facts(question=parse_question(said, kb)), kb)
    assert sit.phase.value == "model-build" and sit.after_phase == "checkpoint-load"


@pytest.mark.parametrize(("said", "phase"), [
    # Dao-AILab/flash-attention#382 (set issue-24-s99): pip compiling the wheel filled a 39 GB host
    ("pip install flash-attn 一直卡在 Building wheels for collected packages，内存被吃满，整台机器挂掉",
     "package-build"),
    # modelscope/ms-swift#6185: Megatron-SWIFT's export of a LoRA run to a Hugging Face checkpoint
    ("swift export --mcore_adapters ... --to_hf true 最后异常终止了", "conversion"),
    ("用 Megatron-SWIFT 训练完，想合并成 HF 权重，跑到最后挂了", "conversion"),
])
def test_what_people_call_a_build_or_an_export_is_that_phase(said, phase, kb):
    sit = read_situation(Facts(question=parse_question(said, kb)), kb)
    assert sit.phase is not None and sit.phase.value == phase


def test_a_setting_that_seems_not_to_have_run_is_asked_about(kb):
    """"The ref's memory stays at its peak; the offload seems not to have run": whether the setting reached the
    process is the first question, and memory held at its peak is memory not released."""
    said = "我观察 GPU 利用，发现 ref 的显存占用一直保持在峰值，似乎没有执行 offload？"
    facts, flat, diag = pipeline.run(pipeline.Inputs(question=said), kb)
    assert flat["situation.trend"] == "held" and flat["situation.no_effect"]
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"
    said = "The reference model's parameter offload was not executed: its memory never goes down."
    facts, flat, diag = pipeline.run(pipeline.Inputs(question=said), kb)
    assert flat["situation.no_effect"] and flat["situation.trend"] == "held"


def test_a_negation_may_name_the_framework_before_the_setting(kb):
    """"sets no Megatron recompute options" states recompute off, as "no recompute" does."""
    said = "The script sets no Megatron recompute options."
    assert parse_question(said, kb).layout == {"recompute_granularity": None}
    assert parse_question("We run without Megatron FSDP.", kb).layout == {"use_megatron_fsdp": False}


def test_expecting_a_fit_is_not_expecting_a_release(kb):
    """'By rights 7B should fit at TP2' expects a fit, not memory released by an offload or a sleep; 'offload is
    clearly on' does expect the offload to have freed it. A layout change that did nothing applied visibly."""
    said = "7B 模型照理 TP2 应该放得下，我把 TP 提到 4 还是 OOM，显存到底花在哪了？"
    facts, flat, diag = pipeline.run(pipeline.Inputs(question=said), kb)
    assert flat["situation.expected_release"] is False
    clearly_on = parse_question("offload 明明都开着，为什么还是 OOM？", kb)
    assert read_situation(Facts(question=clearly_on), kb).expected_release
    said = "I raised TP from 2 to 4 and it did not help, same OOM."
    facts, flat, diag = pipeline.run(pipeline.Inputs(question=said), kb)
    assert "increase-tp" in flat["situation.no_effect"] and diag.causes[0].id != "setting-not-applied"


def test_memory_that_rises_whatever_the_engine_share_is_kept_alive(kb):
    """"No matter how low I set the engine's memory fraction, memory keeps rising until it OOMs": the share was
    tried without effect, and a rise every step is not another process's fixed share nor a setting that was lost."""
    said = ("With the colocated SGLang rollout, memory keeps rising every step until it OOMs. No matter how low I "
            "set sglang-mem-fraction-static, memory eventually accumulates.")
    facts, flat, diag = pipeline.run(pipeline.Inputs(question=said), kb)
    assert flat["situation.no_effect"] and flat["situation.trend"] == "grows"
    assert "foreign-process" in diag.ruled_out
    assert diag.causes[0].id == "memory-growth" and diag.fixes[0].id == "track-memory-per-step"


def test_a_clause_that_asks_whether_gpu_memory_ran_out_does_not_say_so(kb):
    """"Bus error, insufficient shared memory; is this GPU memory running out?" names host shared memory and only
    asks about the GPU: the DataLoader's workers and their shared memory come first, not a save or a GPU fix; the
    shm limit is what stopped it, not memory of either kind running out (Megatron-LM #878, LLaMA-Factory #7315)."""
    said = "多机跑的时候报 bus error，提示 insufficient shared memory (shm)。这是显存不够了吗？需要调小 batch 吗？"
    facts, flat, diag = pipeline.run(pipeline.Inputs(question=said), kb)
    assert flat["situation.gpu_memory_failed"] is False
    assert diag.causes[0].id == "not-an-oom" and diag.fixes[0].id == "reduce-dataloader-workers"
    said = "Is it the GPU running out of memory? The DataLoader workers get killed by a bus error (shared memory)."
    facts, flat, diag = pipeline.run(pipeline.Inputs(question=said), kb)
    assert flat["situation.gpu_memory_failed"] is False
    for said in ("GPU memory ran out at iteration 3 and it crashed.", "显存不够，训练挂了。"):  # statements
        assert pipeline.run(pipeline.Inputs(question=said), kb)[1]["situation.gpu_memory_failed"] is True


def test_model_state_that_fit_for_several_steps_is_not_what_ran_out(kb):
    """Weights, gradients and the optimizer state (made by the first optimizer step) all exist by the second step;
    "three iterations run fine, then the deferred graph capture OOMs" rules model state out, whatever an
    estimate from assumed defaults says."""
    said = ("Three normal training iterations run fine, then Megatron captures the CUDA graphs and the job dies "
            "with torch.OutOfMemoryError during that capture.")
    facts, flat, diag = pipeline.run(pipeline.Inputs(question=said), kb)
    assert flat["situation.step"] == "later-step" and "capacity-model-state" in diag.ruled_out
    said = "Iteration 1 completes, then iteration 2 dies with CUDA out of memory."  # Adam's state: still model state
    assert "capacity-model-state" not in pipeline.run(pipeline.Inputs(question=said), kb)[2].ruled_out


@pytest.mark.parametrize("text, absent", [
    ("The SkyRL Megatron example OOMs in the policy training step. The script sets no Megatron recompute options.",
     ["full-recompute"]),  # one word may stand between the "no" and the setting
    ("PYTORCH_CUDA_ALLOC_CONF isn't set for this recipe; it OOMs at step 3", ["expandable-segments"]),
    ("training without the distributed optimizer OOMs at the first step", ["distributed-optimizer"]),
    ("没开重计算，第一步就 OOM", ["full-recompute"]),
    ("没有开启分布式优化器，OOM 了", ["distributed-optimizer"]),
    ("I see no reason why recompute fails here", []),  # two words between: not said of the setting
    ("recompute did not help, it still OOMs", []),  # tried, not off
    ("I turned off recompute and now it OOMs", []),  # taken out: a removal, read as such
])
def test_a_memory_setting_said_to_be_off(text, absent, kb):
    _, flat, _ = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.absent"] == absent


def test_a_setting_said_to_be_off_is_the_first_lever_where_the_phase_holds_its_memory(kb):
    question = "Our GRPO policy training step OOMs on 8x H100. The script sets no recompute options."
    _, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert diag.causes[0].id == "capacity-activations" and diag.fixes[0].id == "full-recompute"
    rollout = "The vLLM rollout OOMs during generation; no recompute is set."  # the rollout keeps no activations
    _, _, diag = pipeline.run(pipeline.Inputs(question=rollout), kb)
    assert "full-recompute" not in [f.id for f in diag.fixes[:1]] and diag.causes[0].id != "capacity-activations"


@pytest.mark.parametrize("text, step", [
    ("the run runs out of GPU memory before iteration 1 completes", "first-step"),
    ("it OOMs before the first iteration finishes", "first-step"),
    ("it OOMs before the first step", "before-training"),
    ("after the first step completes it OOMs", "second-step"),  # the first one ran: what follows it failed
])
def test_a_step_said_to_run_to_its_end_is_where_it_failed(text, step, kb):
    _, flat, _ = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.step"] == step


def test_optimizer_state_named_in_a_config_list_does_not_make_a_loss_oom_an_optimizer_one(kb):
    question = ("FP32 main params, grads and Adam moments, no activation recompute; it runs out of GPU memory in the "
                "loss computation of the first iteration")
    _, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "full-recompute" not in {a.id for a in diag.avoid}
    assert "full-recompute" in [f.id for f in diag.fixes]


def test_a_chinese_question_word_runs_on_into_what_it_asks(kb):
    """shifou xiancun buzu ("was GPU memory short?") asks; there is no space after a Chinese word to wait for."""
    q = parse_question("保存 checkpoint 时主机内存被打满，进程被 kill 了。是否显存不足导致的失败？", kb)
    sit = read_situation(_facts(question=q), kb)
    assert not sit.gpu_memory_failed and sit.process.value == "host"


def test_memory_that_rises_every_round_in_chinese_grows(kb):
    q = parse_question("SGLang 进程的 reserved 显存每轮更新都涨一点，跑若干轮以后就 OOM", kb)
    assert read_situation(_facts(question=q), kb).trend.value == "grows"


_FLOAT_CONVERSION_OOM = """\
  File "/root/Megatron-LM/megatron/core/transformer/module.py", line 335, in conversion_helper
    return conversion(val)
  File "/root/Megatron-LM/megatron/core/transformer/module.py", line 373, in float_conversion
    val = val.float()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 61.34 GiB. GPU 3 has a total capacity of 79.11 GiB \
of which 27.07 GiB is free. Process 520735 has 3.17 GiB memory in use. Process 530150 has 48.84 GiB memory in use. \
Of the allocated memory 44.61 GiB is allocated by PyTorch, and 410.55 MiB is reserved by PyTorch but unallocated."""


def test_the_code_that_asked_names_the_tensor_when_no_size_matches(kb):
    """Megatron's Float16Module upcasts the last stage's output, the logits, in float_conversion; no config is given,
    so no size could be matched, but the failing line still says what the request is."""
    facts, flat, diag = pipeline.run(pipeline.Inputs(log=_FLOAT_CONVERSION_OOM.splitlines()), kb)
    assert flat["situation.failed"] == "logits" and flat["situation.failed_source"] == "log"
    reducer = ('  File "/x/torch/nn/parallel/distributed.py", line 1, in _ddp_init_helper\n'
               "    self.reducer = dist.Reducer(\n"
               "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 51.77 GiB. GPU 0 has a total capacity of "
               "79.33 GiB of which 20.1 GiB is free.")
    _, flat, _ = pipeline.run(pipeline.Inputs(log=reducer.splitlines()), kb)
    assert flat["situation.failed"] == "parameters"


def test_a_leak_the_user_asks_about_is_a_suspicion(kb):
    """'Is this a memory leak?' leads to the per-step measurement when nothing else places the memory, says it was
    only asked, and rules nothing out; a request of half the GPU is the step's own tensor, not a leak."""
    question = ("When running off-policy GRPO with slime the training crashes midway, after 37 steps. "
                "Is this a memory leak?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.trend"] is None and flat["situation.suspected_trend"] == "grows"
    assert diag.fixes[0].id == "track-memory-per-step"
    answer = _stdout(["diagnose", "--question", question])
    assert "asked about, not measured" in answer
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=_FLOAT_CONVERSION_OOM.splitlines()), kb)
    assert "memory-growth" in diag.ruled_out and diag.causes[0].id == "logits-loss-memory"


def test_a_second_step_oom_with_no_growth_seen_is_not_a_leak(kb):
    question = "第一步能跑完，第 2 步 OOM 了，是不是哪里有泄漏？"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.step"] == "second-step" and "memory-growth" in diag.ruled_out


def test_an_sft_run_in_an_rl_framework_has_no_rollout_engine(kb):
    sft = parse_question("SFT of gpt-oss-20b with the NeMo-RL Megatron backend OOMs at step 683.", kb)
    assert read_situation(_facts(question=sft), kb).process is None
    grpo = parse_question("GRPO fine-tuning of Qwen3 with NeMo-RL OOMs at step 683.", kb)
    assert read_situation(_facts(question=grpo), kb).process.value == "colocated-engine"


def test_host_memory_filled_by_the_offloaded_optimizer_is_spread_not_offloaded_further(kb):
    question = ("用 slime 在 8×H100 单机上训 Qwen3-30B-A3B，开了 --optimizer-cpu-offload，节点内存 1TB，"
                "第 2 步 train 阶段主机内存 OOM，Ray 把 worker 杀了。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "optimizer-cpu-offload" in flat["situation.changed"] and diag.causes[0].id == "host-oom"
    assert diag.fixes[0].id == "add-gpus"
    assert not {"offload-trainer-states", "activation-cpu-offload"} & {f.id for f in diag.fixes}
    grows = "Host memory grows every step until the node runs out; more nodes?"
    _, _, diag = pipeline.run(pipeline.Inputs(question=grows), kb)
    assert "add-gpus" not in {f.id for f in diag.fixes}  # a leak fills any number of GPUs


def test_a_setting_the_user_asks_about_taking_out_was_not_taken_out(kb):
    """'... and is disabling the distributed optimizer a supported way?' asks; 'it is silently turned back on' says
    the setting did not apply: confirm it before anything else."""
    question = ("I set cfg.ddp.use_distributed_optimizer = False to keep the optimizer state on the GPU, but it is "
                "silently turned back on. Why does my setting not apply, and is disabling the distributed optimizer "
                "a supported way to save memory here?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.removed"] == []
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"
    tried = parse_question("OOM 报错里仍然显示 12 GiB reserved but unallocated。是 expandable segments 没用吗？", kb)
    assert "expandable-segments" in [r.value for r in read_situation(_facts(question=tried), kb).no_effect]


def test_chao_chu_xian_cun_is_an_oom(kb):
    """chaochu xiancun ("exceeds GPU memory") is how many Chinese users say it ran out."""
    assert "oom" in parse_question("全参微调 13B，一直报超出显存，改了参数还是超", kb).topics


def test_thin_evidence_names_model_state_first_when_the_stated_layout_fills_half_the_gpu(kb):
    question = ("How to run llama2 70B pretrain on 32 GPUs (A100 80GB)? It OOMs with tp=4, pp=2, zero=1, "
                "microbatch_size=1.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["derived.model_state_ratio"] >= 0.5 and diag.candidates[0] == "capacity-model-state"
    _, _, diag = pipeline.run(pipeline.Inputs(question="It OOMs, what should I check first?"), kb)
    assert "capacity-model-state" not in diag.candidates[:1]


def test_updating_the_framework_is_a_software_change(kb):
    q = parse_question("After updating verl, the actor update uses more GPU memory than before, same config.", kb)
    assert [r.value for r in read_situation(_facts(question=q), kb).changed] == ["stack"]


def test_host_memory_that_stops_growing_without_workers_is_the_workers(kb):
    question = ("Dataloader 的 num_workers 大于 0 时，CPU 内存（主机内存）随着训练一直涨，最后被 OOM。"
                "num_workers=0 时不会这样。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.worked_with"] == ["reduce-dataloader-workers"]
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "reduce-dataloader-workers"


def test_a_question_about_memory_use_with_no_failure_is_checked_by_measuring(kb):
    """No failure said and no rank in question: there is no failing rank to find, so measure per step."""
    _, flat, diag = pipeline.run(pipeline.Inputs(question="为啥 TP 下显存比同配置下 deepspeed 要高？"), kb)
    assert not flat["situation.failure_said"] and diag.fixes[0].id == "track-memory-per-step"
    hang = "DeepSeek-V3 on 8x H200 hangs at startup and never becomes ready."
    _, _, diag = pipeline.run(pipeline.Inputs(question=hang), kb)
    assert diag.fixes[0].id == "find-first-failing-rank"  # a hang is a failure: which rank stopped first
    _, _, diag = pipeline.run(pipeline.Inputs(question="Why do the last two ranks hold more optimizer state?"), kb)
    assert diag.fixes[0].id == "find-first-failing-rank"  # a question about which ranks: compare them


def test_a_fault_with_no_out_of_memory_anywhere_rules_out_the_memory_causes(kb):
    """NCCL 'Bad address' after a torch_memory_saver pause()/resume() cycle: a transport fault, and resume() here is
    a call in code, not a checkpoint resume."""
    question = ("Multi-node colocate mode: cross-node NCCL operations get 'Bad address' (EFAULT) after "
                "torch_memory_saver's pause()/resume() cycle, during the optimizer step. Is this a memory problem?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.phase"] != "checkpoint-load"
    assert diag.causes[0].id == "not-an-oom" and "capacity-model-state" in diag.ruled_out


def test_growth_step_after_step_that_dies_at_a_save_is_not_the_saves(kb):
    across = ("Host memory keeps growing step after step, and at global_step_50, right while the checkpoint is being "
              "saved, Ray kills two workers.")
    ray = ["(raylet) node_manager.cc:3069: 2 Workers (tasks / actors) killed due to memory pressure (OOM), "
           "0 Workers crashed due to other reasons."]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=across, log=ray), kb)
    assert flat["situation.grows_per_step"] and "checkpoint-save" in diag.ruled_out
    assert "memory-growth" in {c.id for c in diag.causes} and "track-memory-per-step" in [f.id for f in diag.fixes]
    within = "Saving the checkpoint keeps growing in memory until all shards are written, then runs out."
    _, flat, diag = pipeline.run(pipeline.Inputs(question=within), kb)
    assert not flat["situation.grows_per_step"] and "checkpoint-save" not in diag.ruled_out


@pytest.mark.parametrize("text, field, value", [
    ("grpo异步方式训练时，显存单调上涨，直至OOM", "trend", "grows"),
    ("调用 SGLang 的 resume_memory_occupation（训练切回 rollout）就报显存不足", "phase", "rl-weight-sync"),
])
def test_more_ways_people_say_it(text, field, value, kb):
    assert getattr(read_situation(_facts(question=parse_question(text, kb)), kb), field).value == value


def test_a_sharding_setting_said_to_change_nothing_asks_whether_it_applied(kb):
    question = ("我设置了 deepspeed zero3，但发现每张卡占用的显存和 z0 一模一样。启动命令：torchrun src/train.py "
                "--deepspeed examples/deepspeed/ds_z0_config.json --stage sft")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"
    assert "ds_z0_config.json" in [n["text"] for n in flat["question.named"]]  # the file at the end of a path


def test_a_question_about_headroom_before_an_oom_is_checked_by_measuring(kb):
    question = ("训练日志只在第 1 个 iteration 之后打印了一次显存，我一直按这个数来估算离 OOM 还有多少余量。"
                "这个数能代表真实峰值吗？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "headroom" in flat["question.topics"] and diag.fixes[0].id == "track-memory-per-step"


@pytest.mark.parametrize("text", [
    "按文档用 llamafactory-cli export 合并 LoRA 适配器，它一直只用 gpu 0，然后报 OOM",
    "Merging the LoRA into the 72B base model runs out of GPU memory on one A100.",
])
def test_merging_a_lora_adapter_is_a_conversion(text, kb):
    assert read_situation(_facts(question=parse_question(text, kb)), kb).phase.value == "conversion"


def test_an_out_of_memory_only_asked_about_is_not_said(kb):
    """ms-swift #9554: an illegal memory access while building the model, "is this out of GPU memory?" asked beside
    it - the memory causes are ruled out by the fault; a clause that says it ran out still counts."""
    asked = "启用 optimizer_cpu_offload 会导致 illegal memory access。这是显存不够吗？要不要把 micro batch 调小？"
    said = "训练到第 3 步就显存不够了，报 CUDA out of memory。"
    for text, expected in ((asked, False), (said, True)):
        question = parse_question(text, kb)
        facts = Facts(question=question)
        assert read_situation(facts, kb).oom_said is expected, text
    _, _, diag = pipeline.run(pipeline.Inputs(question=asked), kb)
    assert "capacity-model-state" in diag.ruled_out and "capacity-activations" in diag.ruled_out


def test_megatron_build_module_frames_are_the_model_build(kb):
    """Every layer of a Megatron-Core spec is constructed through spec_utils.build_module: an OOM there (ms-swift
    #9191, GLM-5 expert weights) is the model build, with almost nothing in the allocator's cache."""
    log = parse_log("\n".join([
        '[rank97]:   File "/usr/local/lib/python3.12/site-packages/megatron/core/transformer/spec_utils.py", line 119, '
        "in build_module",
        "[rank97]:     return module(",
        '[rank97]:   File "/usr/local/lib/python3.12/site-packages/transformer_engine/pytorch/module/'
        'grouped_linear.py", line 696, in __init__',
        "[rank97]:     torch.empty(",
        "[rank97]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 48.00 MiB. GPU 1 has a total capacity "
        "of 139.81 GiB of which 14.88 MiB is free. Including non-PyTorch memory, this process has 139.78 GiB memory in "
        "use. Of the allocated memory 138.20 GiB is allocated by PyTorch, and 40.42 MiB is reserved by PyTorch but "
        "unallocated.",
    ]), kb)
    sit = read_situation(_facts(log), kb)
    assert sit.phase.value == "model-build" and sit.waste_share < 0.01  # so fragmentation is ruled out


def test_a_pasted_trace_ending_in_the_unfused_softmax_is_the_attention_scores(kb):
    """OpenClaw-RL #52: a trace pasted without its OOM line that ends in Transformer Engine's unfused softmax - the
    s x s scores; why the fused kernel was not chosen is the first check, and the file names never count (a frame in
    param_and_grad_buffer.py is not a gradient buffer by its file's name)."""
    trace = "\n".join([
        'File "/venv/lib/python3.12/site-packages/transformer_engine/pytorch/attention/dot_product_attention/'
        'backends.py", line 552, in forward',
        'File "/venv/lib/python3.12/site-packages/transformer_engine/pytorch/attention/dot_product_attention/'
        'softmax.py", line 188, in forward',
        'File "/venv/lib/python3.12/site-packages/transformer_engine/pytorch/attention/dot_product_attention/'
        'softmax.py", line 141, in forward_torch_softmax',
    ])
    _, _, diag = pipeline.run(pipeline.Inputs(question="8x A800 80GB, 16K-token samples, it OOMs:\n" + trace), kb)
    assert diag.facts["situation.failed"] == "attention-scores"
    assert "unfused-attention-in-the-trace" in diag.fired_rules and diag.fixes[0].id == "confirm-setting-applied"


def test_an_oom_only_asked_about_is_no_oom_topic_for_the_rules(kb):
    """slime #2370: a save that died on a write error, "Is this an out-of-memory problem?" asked - the rules that
    need an OOM said (the save's memory) do not fire on the question mark; "why does it OOM" still says one."""
    asked = ("At the final step save_model writes a 36G checkpoint and the actor dies inside this save. "
             "Is this an out-of-memory problem?")
    _, flat, _ = pipeline.run(pipeline.Inputs(question=asked), kb)
    assert "oom" not in flat["question.topics"]
    _, flat, _ = pipeline.run(pipeline.Inputs(question="Why does my Llama3-70B SFT OOM at step 3?"), kb)
    assert "oom" in flat["question.topics"]


def test_an_offload_that_should_have_moved_weights_back_is_a_setting_to_confirm(kb):
    """"It should go back to the CPU after the ref log-prob pass, yet stays on the GPU; the actor update is then
    tight": the pass where memory is short is the update, what holds it was expected to be released - check that
    the offload setting reached the run."""
    text = ("verl 开了 ref 的 param_offload=True，按理说算完 ref log prob 就该回到 CPU，可是参数一直留在 GPU 上，"
            "后面更新 actor 时显存很紧。")
    from memtune import pipeline

    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.expected_release"] and flat["situation.phase"] == "rl-update"
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"


@pytest.mark.parametrize("text", [
    "Only GPU 0 on every node runs out of memory once saving starts; GPUs 1-7 have headroom.",
    "每个节点的 0 号卡显存都比其他卡少，只有它会 OOM。",
])
def test_gpu_zero_of_every_node_is_another_context_not_fragmentation(text, kb):
    """The same device of every node short in a symmetric layout: something per node (a worker's CUDA context on
    the default device) holds it - not the one-rank fragmentation story, and no allocator setting."""
    from memtune import pipeline

    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.where"] == "device-zero"
    assert "device-zero-holds-another-context" in diag.fired_rules
    assert "expandable-segments" not in [f.id for f in diag.fixes]


@pytest.mark.parametrize("text", [
    "miles already sets SGLANG_DISABLE_TP_MEMORY_INBALANCE_CHECK=true, yet SGLang startup fails with "
    "RuntimeError: The memory capacity is unbalanced. Is this an out-of-memory problem?",
    "The weight update fails with RuntimeError: NCCL error: unhandled system error. The error goes away with "
    "NCCL_SHM_DISABLE=1. Is that the right fix?",
    "为了省内存我加了 --disable-weights-backuper，结果一启动就报 AssertionError: TorchMemorySaver observes invalid "
    "LD_PRELOAD。这是显存不够了吗？",
])
def test_a_crash_beside_a_setting_the_user_set_checks_the_setting_first(text, kb):
    """slime #1936, miles #533, NeMo-RL #564: nothing failed to allocate, and the user names the setting they set or
    that makes the error go away - what the process received of it comes before hunting for a rank."""
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.setting_stated"] and not flat["situation.kernel_fault"]
    assert diag.causes[0].id == "not-an-oom" and diag.fixes[0].id == "confirm-setting-applied"


@pytest.mark.parametrize("text", [
    "启用 optimizer_cpu_offload 会导致 illegal memory access，报错在 rank9。这是显存不够吗？",
    "我增加了参数 --megatron-to-hf-mode bridge，执行后 actor 训练时报 cuBLAS Error: the function failed to launch on "
    "the GPU，这是显存不够吗？",
])
def test_a_kernel_fault_is_pinned_on_the_first_failing_rank_even_after_a_change(text, kb):
    """ms-swift #9554, slime #1622: CUDA reports an illegal address or a failed launch at a later call, so the frame
    misleads whatever the user changed: the first failing rank reruns with CUDA_LAUNCH_BLOCKING=1 first."""
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    # a --flag names no failing pass (the conversion mode is no conversion that ran; "actor xunlian shi" is the update)
    assert flat["situation.kernel_fault"] and flat["situation.phase"] in (None, "rl-update")
    assert diag.causes[0].id == "not-an-oom" and diag.fixes[0].id == "find-first-failing-rank"


def test_an_error_naming_only_its_debugging_hint_states_no_setting(kb):
    """'run with NCCL_DEBUG=INFO for details' is NCCL's own boilerplate, not a setting the run depends on."""
    log = ["RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"]
    _, flat, diag = pipeline.run(pipeline.Inputs(log=log), kb)
    assert flat["situation.error"] and not flat["situation.setting_stated"]
    assert diag.fixes[0].id == "find-first-failing-rank"


@pytest.mark.parametrize("text, field, value", [
    ("Every few steps the rollout engine fails with an OOM when it wakes up.", "step", "later-step"),
    ("The trainer ranks keep losing GPU memory step after step.", "trend", "grows"),
    ("The memory peak happens when the rollout engine is woken up for generation.", "phase", "rl-weight-sync"),
])
def test_how_people_say_when_and_how_it_moves(text, field, value, kb):
    assert getattr(read_situation(_facts(question=parse_question(text, kb)), kb), field).value == value


def test_a_version_that_ran_the_same_script_before_is_said_in_zh(kb):
    text = "同样的脚本在之前的版本上是能跑的，升级 verl 之后才出现 OOM。"
    assert read_situation(_facts(question=parse_question(text, kb)), kb).worked_before


def test_a_colocated_wake_that_fails_only_after_earlier_wakes_fit_is_measured_per_step(kb):
    """verl #2678: the first wake-ups fit with the same engine share, so what runs out is held across steps - the
    per-step measurement leads; the same OOM at the first wake-up is the two shares' sum (shrink the engine)."""
    later = ("verl hybrid engine, Megatron actor colocated with vLLM. Every few steps the rollout engine fails with "
             "an OOM when it wakes up after the weight sync.")
    _, _, diag = pipeline.run(pipeline.Inputs(question=later), kb)
    assert diag.causes[0].id == "memory-growth" and diag.fixes[0].id == "track-memory-per-step"
    first = ("verl hybrid engine, Megatron actor colocated with vLLM. At the first step the rollout engine fails "
             "with an OOM when it wakes up after the weight sync.")
    _, _, diag = pipeline.run(pipeline.Inputs(question=first), kb)
    assert diag.fixes[0].id == "shrink-colocated-engine"


def test_the_setting_check_prints_the_variables_the_user_named():
    """NeMo-RL #564: the check is what the process received of NCCL_SHM_DISABLE, not the allocator's variables;
    with none named it prints the allocator's and NCCL's."""
    named = json.loads(_stdout(["diagnose", "--question", "The weight update fails with RuntimeError: NCCL error: "
                                "unhandled system error. The error goes away with NCCL_SHM_DISABLE=1.",
                                "--format", "json"]))
    fix = named["fixes"][0]
    assert fix["id"] == "confirm-setting-applied"
    assert 'grep -E "NCCL_SHM_DISABLE"' in fix["apply"]["shell"][0]
    unnamed = json.loads(_stdout(["diagnose", "--question", "I set recompute but memory did not change at all.",
                                  "--format", "json"]))
    check = next(f for f in unnamed["fixes"] if f["id"] == "confirm-setting-applied")
    assert "PYTORCH_CUDA_ALLOC_CONF|NCCL_GRAPH_REGISTER" in check["apply"]["shell"][0]


@pytest.mark.parametrize("text", [
    "RL training of a Llama3 model with slime runs fine for about 20 steps and then hits CUDA OOM in the training "
    "phase. I use dynamic batch size with --max-tokens-per-gpu.",
    "verl 开了动态 batch（use_dynamic_bsz），训练跑了几步之后 actor 更新时 OOM。",
])
def test_a_late_oom_with_a_token_budget_lowers_the_budget(text, kb):
    """slime #1237: micro-batches packed up to a token budget meet their worst case late (longer RL responses):
    the budget bounds the peak, and lowering it comes first; one sample as long as the budget is CP's case."""
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert "dynamic-batch" in flat["question.topics"] and "dynamic-batch-late-peak" in diag.fired_rules
    assert diag.fixes[0].id == "reduce-micro-batch"


@pytest.mark.parametrize("text", [
    "这套配置之前一直能跑，换成基于 PyTorch 26.02 的新容器之后就 OOM 了，我们自己的配置一点没改。",
    "This configuration is a regression for us (new nightly container): it now runs out of memory at init.",
])
def test_a_setup_that_ran_before_is_read_in_more_words(text, kb):
    """Megatron-Bridge #2748 / #3597: 'ran all along before', 'is a regression for us' say the same setup worked."""
    assert read_situation(_facts(question=parse_question(text, kb)), kb).worked_before


def test_ray_killing_for_host_memory_while_the_gpu_is_fine_is_the_host(kb):
    """vime #191: 'GPU memory reported no error', Ray's OutOfMemoryError and the node's host_used_GB: host RAM
    ran out (an engine's CPU backup of its weights at each release), whatever the exception's class name says."""
    text = ("GPU 显存没报错，但跑到第 13 步左右 Ray 报 ray.exceptions.OutOfMemoryError 把进程杀了，"
            "监控里节点 host_used_GB 峰值到了 841/882 GB。主机内存是被什么吃掉的？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.process"] == "host" and diag.causes[0].id == "host-oom"


def test_host_memory_that_steps_up_with_each_save_grows(kb):
    """verl #365: memory that rises a notch at every save_freq grows across steps: measure per step first."""
    text = "主机内存利用率随着 save_freq 一截一截往上涨，到最后就 OOM 了，是为什么呀？"
    assert read_situation(_facts(question=parse_question(text, kb)), kb).trend.value == "grows"


def test_a_chinese_question_split_by_a_comma_still_only_asks(kb):
    """ltp-megatron-lm #28: 'shi bu shi ... pinned memory bugou, bei OOM le?' asks whether it ran out in both
    halves: a hang at a save with nothing that says memory ran out is checked first, not the save's memory."""
    text = ("训练正常，但一到保存 dist checkpoint 就卡住不动了，保存用的子进程好像直接挂掉了。"
            "是不是保存时 host 内存 / pinned memory 不够，被 OOM 了？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert not flat["situation.oom_said"] and diag.causes[0].id == "not-an-oom"


def test_memory_that_rises_with_every_save_is_growth_not_the_saves_peak(kb):
    """ltp-megatron-lm #40: a notch more after each save that never comes back is kept across saves: measure it per
    save first; the save's own transient is not what fills the GPU."""
    text = ("每保存一次 checkpoint，显存占用就往上涨一截，保存完也不回落，多存几次之后就可能 OOM。"
            "训练本身的 step 是稳定的。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.grows_per_step"] and diag.fixes[0].id == "track-memory-per-step"


@pytest.mark.parametrize("error, phase", [
    # a check's own message refuses the settings: a start-up refusal wherever it was raised
    ("AssertionError: Gated delta net does not support context parallel for now, but got "
     "self.context_parallel_size=4.", "config-validation"),
    ("[rank0]: ValueError: CPU Offloading is enabled while it is not mentioned what to offload (weights/activations)",
     "config-validation"),
    ("NotImplementedError: FP8 is not supported with this attention backend", "config-validation"),
    # a runtime error's words are no refusal of the configuration, nor is an exception that states no rule
    ("RuntimeError: CUDA error: operation not supported", None),
    ("ValueError: too many values to unpack (expected 2)", None),
])
def test_an_exception_that_states_a_rule_is_a_refused_configuration(error, phase, kb):
    trace = 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    main()\n'
    log = parse_log(f"{trace}{error}\n", kb)
    sit = read_situation(_facts(log), kb)
    assert (sit.phase.value if sit.phase else None) == phase


@pytest.mark.parametrize("text, ruled_out, kept", [
    # NeMo-RL DeepScaleR: named only to be ruled out, weights and optimizer state are no topic and no component
    ("The model is only 1.5B, so weights and optimizer state are small. It runs out of memory at 16k.",
     "optimizer-state", "oom"),
    ("模型只有 1.5B，权重和优化器状态都很小，16k 就爆显存了。", "optimizer-state", "oom"),
])
def test_what_the_user_says_is_small_is_not_what_failed(text, ruled_out, kept, kb):
    q = parse_question(text, kb)
    assert ruled_out not in q.topics and kept in q.topics
    sit = read_situation(_facts(question=q), kb)
    assert not {"weights", "optimizer"} & {r.value for r in sit.components}


def test_a_clause_that_says_where_it_is_fine_still_reads(kb):
    # "the other stages are fine" says where the memory runs out; it rules nothing out
    text = "The last pipeline stage runs out of memory in the log-prob pass while the other stages are fine."
    assert "pipeline-imbalance" in parse_question(text, kb).topics


def test_a_choice_question_names_both_and_says_neither(kb):
    # ColossalAI#2772: host RAM ran out ("爆内存", "oomkilled"); "这是显存不够还是内存不够？" asks which, it does not
    # say the GPU's memory failed
    text = "A100 24G，加载 opt6.7b 爆内存，进程直接 oomkilled。机器内存 80G。 这是显存不够还是内存不够？"
    sit = read_situation(_facts(question=parse_question(text, kb)), kb)
    assert sit.process is not None and sit.process.value == "host"
    # "还是" alone is "still": the clause says it failed
    still = read_situation(_facts(question=parse_question("开了重计算还是 OOM？", kb)), kb)
    assert still.oom_said


def test_the_same_script_on_two_branches_is_the_stack_changing(kb):
    # Megatron-LM#4069 (s48): two release branches named, the script unchanged
    text = ("同一个训练脚本，分别在 core_v0.14.0 和 core_v0.16.0 分支上跑，v0.16.0 的显存占用比 v0.14.0 多了三分之一。"
            "脚本没改，只换了分支。")
    sit = read_situation(_facts(question=parse_question(text, kb)), kb)
    assert sit.worked_before and "stack" in {r.value for r in sit.changed}


def test_a_validation_oom_after_steps_that_fit_measures_before_and_during_it(kb):
    # NeMo-Aligner#444 (s48): one training iteration ran, validation runs out; which rank failed first separates
    # nothing there, memory before and during the pass does (a PP layout named is no rank in question)
    from memtune.engine import _check_fix
    from memtune.ledger import policy

    pol = policy(kb)["candidates"]
    flat = {"situation.failure_said": True, "situation.phase": "eval", "question.topics": ["oom", "pipeline-parallel"]}
    assert _check_fix(pol, flat) == "track-memory-per-step"
    assert _check_fix(pol, {**flat, "situation.where": "some-ranks"}) == "find-first-failing-rank"
    assert _check_fix(pol, {**flat, "situation.phase": "forward"}) == "find-first-failing-rank"


@pytest.mark.parametrize("text, process", [
    # OpenRLHF#908 (s48): OpenRLHF gives its vLLM engines GPUs of their own; naming vLLM is no colocation
    ("2*8*h20 训练 7b，我只要把 micro_train_batch_size 设置为 2 就会 oom。"
     "vllm 1 个 engine、TP=4，actor 8 卡，ref 4 卡。", "separate-engine"),
    # ...unless the words place it: colocate_all_models / sleep put the engines beside the actor
    ("OpenRLHF with --colocate_all_models and vLLM sleep: the actor update runs out of memory.", "colocated-engine"),
    # slime#1053 (s43): a teacher SGLang server started "on these same 8 GPUs" shares them, whatever slime's default
    ("先在后台起 teacher 的 sglang server，等它起来以后再在同样这 8 张卡上跑 slime 的 student 训练，显存分配失败。",
     "colocated-engine"),
    # verl's hybrid engine shares the trainer's GPUs by default: vLLM named is still colocated there
    ("verl GRPO with vLLM rollout runs out of memory in the actor update.", "colocated-engine"),
])
def test_an_engine_named_runs_where_its_framework_places_it(text, process, kb):
    sit = read_situation(_facts(question=parse_question(text, kb)), kb)
    assert sit.process is not None and sit.process.value == process


def test_a_setting_raised_by_its_own_name_is_a_change(kb):
    # OpenRLHF#908 (s48): "只要把 micro_train_batch_size 设置为 2 就会 oom" - no fix's wording, the setting's name
    text = "我只要把 micro_train_batch_size 设置为 2 就会 oom。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.changed"] == ["reduce-micro-batch"]
    assert diag.causes[0].id == "capacity-activations" and diag.fixes[0].id == "reduce-micro-batch"


def test_a_setting_said_to_keep_its_old_value_did_not_change(kb):
    # SkyRL#2206 (s48): the update changed; "the gpu_memory_utilization we used before" did not
    text = ("After updating SkyRL past PR #2062, the generator.gpu_memory_utilization we used before now runs out of "
            "memory when the vLLM engines wake up.")
    sit = read_situation(_facts(question=parse_question(text, kb)), kb)
    assert [r.value for r in sit.changed] == ["stack"] and sit.worked_before


@pytest.mark.parametrize("text, kept, first_fix", [
    # SkyRL#1550 (s48): the optimizer state said to stay during generation: offload it (or check that it is)
    ("With colocate_all, after each weight sync to vLLM the trainer's GPU memory does not drop as much as we expect "
     "- it looks like the optimizer state is still sitting on the GPU during generation.", ["optimizer"],
     "offload-trainer-states"),
    # SGLang#7009 (s48): the trainer's weights stay while SGLang resumes its weights and KV cache together
    ("verl + SGLang 共卡跑 GRPO。训练结束后 optimizer 已经 offload 到 CPU，"
     "但训练权重还留在 GPU 上，等着 update weight；SGLang 被唤醒时权重和 KV cache 一起恢复，显存峰值很高。",
     ["weights"], "offload-trainer-states"),
])
def test_a_state_said_to_stay_on_the_gpu_beside_the_engine_is_offloaded_first(text, kept, first_fix, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.kept"] == kept and flat["situation.trend"] == "held"
    assert diag.fixes[0].id == first_fix


@pytest.mark.parametrize("text, causes", [
    # verl#6266 (s48): everything offloaded, the trainer still holds ~7 GB per GPU: outside PyTorch first
    ("verl colocated 模式，训练阶段结束后参数、梯度、优化器都按配置 offload 了，"
     "可 rollout 阶段训练进程在每张卡上还占着 7 GB 左右。"
     "这部分显存到底是谁占着？", {"memory-growth"}),
    # NeMo-RL#223 (s48): a sleeping vLLM still holds memory that grows with its TP group and with a commit
    ("NeMo-RL GRPO with colocated vLLM: with tensor_parallel_size=2, vLLM does not free all its memory while it is "
     "supposed to be asleep: 7392 MiB per GPU after commit e3af337, 2440 MiB on the commit just before it.",
     {"memory-growth", "version-regression"}),
])
def test_what_stays_after_an_offload_or_a_sleep_is_checked_outside_pytorch_first(text, causes, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    # outside PyTorch first, the causes a missed tensor or the new commit would be beside it, the check that
    # separates them (allocated / reserved against nvidia-smi right after the release) first
    assert diag.causes[0].id == "non-pytorch-memory" and causes <= {c.id for c in diag.causes}
    assert diag.fixes[0].id == "track-memory-per-step"


def test_a_sleep_that_frees_nothing_under_expandable_segments_is_the_setting(kb):
    # vLLM#11743 (s48): "Sleep mode freed 0.00 GiB" with expandable_segments:True in the environment
    text = ("共卡 RL，rollout 用 vLLM 的 sleep mode，环境里设置了 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True。"
            "调用 sleep 之后一点显存都没释放，63 GB 还占着。")
    env = ["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text, env=env), kb)
    assert diag.causes[0].id == "config-incompatibility"
    assert "expandable-segments" in {a.id for a in diag.avoid}


def test_host_ram_in_colocated_rl_with_the_gpus_fine_is_the_engines_host_copy(kb):
    # NeMo-RL#2523 (s48): "GPU memory is not what runs out", a CPU OOM on the node with less RAM
    text = ("NeMo-RL GRPO with colocated vLLM: on a cluster with about 50 GB less host memory per node the job dies "
            "with a CPU out-of-memory. GPU memory is not what runs out.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.process"] == "host" and diag.causes[0].id == "host-oom"
    assert "colocated-engine-sleep-copy-in-host-ram" in diag.fired_rules


def test_the_dataloader_shared_memory_hint_alone_is_the_shm_limit(kb):
    # EasyR1#304 (s48): the log line keeps only PyTorch's hint sentence, without "Bus error"
    log = parse_log("DataLoader worker killed during training (It is possible that dataloader's workers are out of "
                    "shared memory.)\n", kb)
    assert "dataloader-bus-error" in log.signatures


def test_a_release_and_a_commit_with_nothing_else_changed_is_the_stack_moving(kb):
    # NeMo-RL#656 (s47): a release that fit, a commit that does not, "nothing else changed"; the setting named with
    # a value that is no number ("dynamic_batching.enabled=false") is no change of a lever
    text = ("On v0.2.1 this OOMs only when dynamic batching is enabled and runs with dynamic_batching.enabled=false. "
            "On commit 3e5481fd and on main it OOMs with dynamic batching both on and off. Nothing else changed.")
    sit = read_situation(_facts(question=parse_question(text, kb)), kb)
    assert [r.value for r in sit.changed] == ["stack"] and sit.worked_before


def test_a_floor_that_rises_with_each_colocated_sync_is_read_per_step(kb):
    # slime#1731 (s38): "每次同步完 ... 没有完全还回来，跑得越久越紧": per step, beside the engine - measure the three
    # figures after each hand-off; IPC handles are released by the side that opened them (ipc_collect)
    text = ("slime colocate 模式（Megatron 训练 + SGLang 推理同卡），"
            "每个 step 都会走 update_weight_from_tensor 同步权重。"
            "感觉每次同步完训练进程的显存都没有完全还回来，跑得越久越紧，最后在某个阶段 OOM。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.grows_per_step"] and "colocated-handoff-floor-rises" in diag.fired_rules
    assert diag.fixes[0].id == "track-memory-per-step"


def test_more_tp_that_changed_nothing_in_an_rl_trainer_is_what_tp_leaves_whole(kb):
    # verl PR #1629 (issue-12): TP 2 -> 4 still OOMs in verl's Megatron actor: the full-vocabulary logits
    text = ("verl 用 Megatron 后端跑 Qwen2-7B 的 PPO（gsm8k），单机 8×H100，micro batch 4、序列 4k。TP=2 训练时 OOM，"
            "我把 TP 提到 4 还是 OOM，只有 TP2 PP2 能跑但很慢。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert "increase-tp" in flat["situation.tried"] and diag.causes[0].id == "logits-loss-memory"
    assert "increase-tp" in {a.id for a in diag.avoid}


def test_a_phase_said_to_be_over_is_over_in_its_shorter_words_too(kb):
    # Megatron-Bridge#3706 (issue-12): "right after CUDA graph capture, inside optimizer.step": the capture is over
    # ("graph capture" inside "after CUDA graph capture" is no phase of its own); the optimizer step failed
    text = ("It OOMs at iteration 3, right after CUDA graph capture, inside optimizer.step -> "
            "_copy_main_params_to_model_params.")
    sit = read_situation(_facts(question=parse_question(text, kb)), kb)
    assert sit.phase.value == "optimizer-step" and sit.after_phase == "graph-capture"


def test_a_leak_that_more_pp_did_not_stop_keeps_pp_off_the_list(kb):
    # verl PR #7874 (s50): only the last stage grows per micro-batch; "加 PP 也没用" is a lever tried with no effect,
    # and against memory that grows no bigger dose helps: advised against, no step up its ladder (TP, CP)
    text = ("用 verl 的 megatron 后端跑 GRPO，开了 PP（1F1B）。update_actor 阶段显存一个 micro-batch 一个 micro-batch "
            "往上涨，只有最后一个 pipeline stage 在涨。把 micro batch 调小也没用，加 PP 也没用。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert "increase-pp" in flat["situation.no_effect"] and diag.causes[0].id == "memory-growth"
    assert "increase-pp" in {a.id for a in diag.avoid}
    assert not {"increase-tp", "increase-cp"} & {f.id for f in diag.fixes}


def test_weights_resumed_beside_a_sleeping_trainer_are_the_engine_not_a_checkpoint(kb):
    # miles PR #3100 (s50): "the engine weights are resumed" is torch_memory_saver's resume, not a checkpoint load
    text = ("Colocated miles run with --offload-train: the engine weights are resumed before the trainer sleeps, "
            "and during rollout the trainer does not give back all of its GPU memory after sleep().")
    sit = read_situation(_facts(question=parse_question(text, kb)), kb)
    assert sit.phase.value == "rl-weight-sync"
    assert "resume" not in parse_question(text, kb).topics


def test_a_rollout_named_in_chinese_is_the_rollout_phase(kb):
    # sglang PR #9540 (s50): "在 rollout 生成时 OOM" with the stack in the engine's LogitsProcessor
    text = "RL 训练里用 SGLang 做 rollout（和训练共卡），跑了几步之后偶尔在 rollout 生成时 OOM。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.phase"] == "rl-rollout" and diag.fixes[0].id == "shrink-colocated-engine"


def test_an_rl_run_killed_for_host_ram_midway_measures_first_a_dataloader_frame_does_not(kb):
    # EasyR1#185 (s50): Ray kills a worker for memory pressure during "Compute log probs"; NeMo-RL#1155: the
    # DataLoader iterator's own frames put the failure in data loading, whose workers are the owner
    ray = ("Compute log probs:  76%|########  | 244/320 [08:56<02:05,  1.65s/it]\n(raylet) node_manager.cc:3069: "
           "1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons\n")
    _, _, diag = pipeline.run(pipeline.Inputs(log=ray, question="EasyR1 GRPO run dies while computing log probs"), kb)
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "track-memory-per-step"
    mmap = ("RuntimeError: unable to mmap 8216 bytes from file <filename not specified>: Cannot allocate memory (12)\n"
            '  File "/opt/NeMo-RL/nemo_rl/algorithms/sft.py", line 390, in sft_train\n'
            "    for batch in train_dataloader:\n"
            '  File "/usr/lib/python3.12/site-packages/torch/utils/data/dataloader.py", line 733, in __next__\n'
            "    data = self._next_data()\n")
    _, flat, diag = pipeline.run(pipeline.Inputs(log=mmap, question="NeMo-RL SFT at 128k crashes"), kb)
    assert flat["situation.phase"] == "data-loading" and diag.fixes[0].id == "reduce-dataloader-workers"


def test_a_version_that_reverting_to_fixes_is_the_stack_moving(kb):
    # vllm#32714 (s49): two versions, "Reverting to 0.13 fixes problem", "official docker images"
    text = ("In v 0.13.0 sleep level 1 leaves 1.14Gb used on each GPU after sleep. In v 0.14 sleep level 1 leaves "
            "16Gb used. Reverting to 0.13 fixes problem. Using official docker images.")
    sit = read_situation(_facts(question=parse_question(text, kb)), kb)
    assert sit.worked_before and [r.value for r in sit.changed] == ["stack"]


def test_clean_on_older_versions_while_loading_weights_is_a_load_time_regression(kb):
    # vllm#43951 (s49): "OOMs during weight loading ... vLLM 0.21.0; clean on 0.18.0 / 0.20.2"; "fine on one node"
    # (nemo#12637) is a place, not a version, and stays no version word
    text = ("Loading a large MoE model with --enable-sleep-mode OOMs during weight loading. vLLM 0.21.0 (also 0.21.x); "
            "clean on 0.18.0 / 0.19.1 / 0.20.2.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.phase"] == "checkpoint-load" and "stack" in flat["situation.changed"]
    assert {c.id for c in diag.causes[:2]} == {"checkpoint-load", "version-regression"}
    assert "cuda-graph-memory" not in {c.id for c in diag.causes}


def test_a_suspected_leak_is_asked_not_seen(kb):
    # Automodel#2634 (s50): "我们怀疑是跨阶段的显存泄漏 ... 请问到底是不是泄漏？" - the user suspects growth; the
    # per-step figures say otherwise, so growth is a suspicion (suspected_trend), not a trend read
    text = ("我们怀疑是跨阶段的显存泄漏（上一阶段的 model + optimizer 没释放），或者是 FSDP 的问题。"
            "下面是我们打的每步显存，请问到底是不是泄漏？")
    sit = read_situation(_facts(question=parse_question(text, kb)), kb)
    assert sit.trend is not None and sit.flatten()["situation.suspected_trend"] == "grows"
    assert sit.flatten()["situation.trend"] is None


def test_steps_that_ran_fine_first_rule_out_model_state(kb):
    # Automodel#2585 (s50): "前 9 步都正常" - weights, gradients and optimizer state were in place by step 2
    text = "每次都在第 10 步左右反向的时候 CUDA OOM，8 张卡全挂。前 9 步都正常，为什么偏偏第 10 步爆？"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.step"] == "later-step" and "capacity-model-state" in diag.ruled_out


def test_dpo_in_an_rl_framework_runs_no_rollout_engine(kb):
    # NeMo-RL#926 (s50): DPO in NeMo-RL generates nothing, so NeMo-RL's default colocated engine does not apply and
    # the engine's share is no fix; GRPO in the same framework keeps it
    dpo = "我在用 NeMo-RL 对 Nemotron 12B 做 DPO，序列长度想开到 12288，再往上加长度就 OOM。"
    sit = read_situation(_facts(question=parse_question(dpo, kb)), kb)
    assert sit.framework.value == "nemo-rl" and sit.process is None
    grpo = "我在用 NeMo-RL 对 Nemotron 12B 做 GRPO，序列长度想开到 12288，再往上加长度就 OOM。"
    assert read_situation(_facts(question=parse_question(grpo, kb)), kb).process.value == "colocated-engine"


def test_settings_listed_beside_an_unchanged_script_are_the_runs_state_not_changes(kb):
    # Megatron-LM#4069 (issue-12): "开了 Megatron-FSDP ... 脚本没改，只换了分支" - the one change is the stack
    text = ("同一个 Qwen3 MoE 训练脚本（128 个专家 top-8，开了 Megatron-FSDP），分别在 core_v0.14.0 和 core_v0.16.0 "
            "分支上跑，v0.16.0 的显存占用比 v0.14.0 多了三分之一。脚本没改，只换了分支，这是什么原因？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.changed"] == ["stack"] and diag.causes[0].id == "version-regression"


def test_a_configuration_called_a_regression_beside_a_container_is_the_stack_moving(kb):
    # Megatron-Bridge#3597: one container and one commit named, "This configuration is a regression for us"
    text = ("Pre-training DEEPSEEK_V3_PRETRAIN_CONFIG_B200_NVFP4_V2 now runs out of memory right after task "
            "initialization with fp4_param_gather=true. This configuration is a regression for us (container "
            "nvcr.io/nvidian/nemo:nightly-2026-04-28, Bridge commit fcb4c287).")
    sit = read_situation(_facts(question=parse_question(text, kb)), kb)
    assert sit.worked_before and [r.value for r in sit.changed] == ["stack"]
    # it worked before, but nothing calls it a regression: a container named is no change by itself
    plain = "It worked before. We run the nemo:25.02 container with the same config and it OOMs at iteration 3."
    assert not read_situation(_facts(question=parse_question(plain, kb)), kb).changed


def test_a_phase_named_only_in_a_question_is_no_phase_it_failed_in(kb):
    # verl#224: "是否表示内存中保存了 8 份模型参数？" asks about copies kept in memory; it names no save that failed
    text = ("我在单机 8×A800 80G、96G 内存上测试 qwen7b，结果 OOM 了。有 8 个 rollout 进程，每个占 11G 内存。"
            "是否表示内存中保存了 8 份模型参数？如何配置可以减小内存消耗？")
    sit = read_situation(_facts(question=parse_question(text, kb)), kb)
    assert sit.phase is None or sit.phase.value != "checkpoint-save"


def test_the_wake_right_after_the_first_update_is_no_step_whose_earlier_wakes_fit(kb):
    # vllm#13941 (s49): "训练完一步之后调用 wake_up 就直接 OOM" - the first wake beside the trainer's full state (its
    # optimizer state exists from the first update on): no earlier wake of the same sum fit, and what stays is the
    # trainer's new state before anything outside PyTorch
    text = ("8 张 A800（40G）上做 72B 模型的 RL，vLLM 开了 sleep mode 和训练共卡。"
            "训练完一步之后调用 wake_up 就直接 OOM 了。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.step"] == "second-step"
    assert "colocated-wake-fails-after-earlier-wakes-fit" not in diag.fired_rules
    assert "offload-trainer-states" in {f.id for f in diag.fixes[:3]}


def test_a_run_that_fits_on_fewer_gpus_rules_out_what_more_gpus_only_split(kb):
    # verl#2820 (s50): "works with n_gpus_per_node=2, but OOM when n_gpus_per_node > 2" - weights, gradients,
    # optimizer state and a GPU's activations only shrink or stay with more GPUs; "0.5B on one card runs, 7B on
    # 8 cards fails" (Pai-Megatron-Patch#409) compares two models, not two GPU counts
    text = ("The GRPO run works successfully with n_gpus_per_node=2, but encounters OOM errors when "
            "n_gpus_per_node > 2. I would like to utilize all 8 GPUs available.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.fewer_gpus_fit"]
    assert {"capacity-activations", "capacity-model-state"} <= set(diag.ruled_out)
    other = "单卡跑 0.5B 没问题；换成 8 卡跑 7B 就失败了，每张卡 32G 显存都满了。"
    assert not read_situation(_facts(question=parse_question(other, kb)), kb).fewer_gpus_fit


def test_host_ram_named_with_no_gpu_failure_keeps_gpu_share_and_offload_off_the_list(kb):
    # verl#224: "8 个 rollout 进程，每个占 11G 内存" on a 96G node - the engine's GPU share does not change host RAM,
    # and optimizer offload would put more into the RAM that ran out
    text = ("我在单机 8×A800 80G、96G 内存上测试 qwen7b，结果 OOM 了。有 8 个 rollout 进程，每个占 11G 内存。"
            "我阅读了源码和 paper，发现 vllm 会 offload 参数到 cpu memory；是否表示内存中保存了 8 份模型参数？"
            "如何配置可以减小内存消耗？")
    log = ["PID     MEM(GB) COMMAND\n", "40126   11.20   ray::WorkerDict.actor_rollout_generate_sequences\n",
           "40125   11.17   ray::WorkerDict.actor_rollout_generate_sequences\n", "39907   0.54    ray::main_task\n"]
    _, _, diag = pipeline.run(pipeline.Inputs(question=text, log=log, gpu="8×A800 80G"), kb)
    assert diag.causes[0].id == "host-oom"
    assert not {"shrink-colocated-engine", "optimizer-cpu-offload"} & {f.id for f in diag.fixes}


# --- set issue-24-s53 (first score 1/24): the classes it taught, each from a report's own words ---------------


def test_a_step_said_to_finish_is_not_the_one_that_failed(kb):
    # Megatron-Bridge #5283: "Step 1 finishes, then during step 2 nothing moves"
    _, flat, _ = pipeline.run(pipeline.Inputs(question="Step 1 finishes, then during step 2 nothing moves."), kb)
    assert flat["situation.step"] == "second-step"


def test_a_phase_the_failure_clause_places_before_the_failure_is_not_where_it_failed(kb):
    """NeMo-Aligner #91: "the actor does its own rollout generation" describes the setup; the actor "died right after
    the rollout phase": what generation left behind is measured first, not a phase it failed in."""
    text = ("PPO with NeMo-Aligner (the actor does its own rollout generation). The actor has regularly died right "
            "after the rollout phase, when it ships the rollout tokens to the critic server. Training steps fit.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat.get("situation.phase") is None and flat["situation.after_phase"] == "rl-rollout"
    assert diag.causes[0].id == "memory-growth" and diag.fixes[0].id == "track-memory-per-step"
    wake = "Every few steps the rollout engine fails with an OOM when it wakes up after the weight sync."
    _, flat, _ = pipeline.run(pipeline.Inputs(question=wake), kb)
    assert flat["situation.phase"] is not None  # the wake-up it failed in is named beside the failure


def test_a_phase_in_the_failing_sentence_outranks_one_said_to_work(kb):
    """verl #3349: "works well, including saving checkpoints" names a phase that works; "once begin to validate
    data ..., the training task will be crashed" names the one that fails, in another clause of its sentence."""
    text = ("If training without any validation, the whole training process works well, including saving "
            "checkpoints. Meanwhile, once begin to validate data during training process, the training task will "
            "be crashed.")
    log = ["ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task. class_name: "
           "TaskRunner. (1) The process is killed by SIGKILL by OOM killer due to high memory usage."]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text, log=log), kb)
    assert flat["situation.phase"] == "eval"
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "reduce-micro-batch"


def test_an_error_raised_by_cuda_graph_code_runs_without_graphs_first(kb):
    """Megatron-Bridge #3856: an HF export asserts "RNG tracker does not support cudagraphs!" - no allocation failed,
    even though the user assumed one; the graphs are what the error is about."""
    text = "Converting the trained checkpoint to Hugging Face dies right away. I assumed the export ran out of memory."
    log = ['[rank0]:   File "/opt/Megatron-LM/megatron/core/transformer/cuda_graphs.py", line 1470, in __init__',
           "[rank0]: AssertionError: RNG tracker does not support cudagraphs!"]
    _, _, diag = pipeline.run(pipeline.Inputs(question=text, log=log), kb)
    assert diag.fixes[0].id == "disable-cuda-graphs"
    assert {"add-gpus", "expandable-segments"} & {a.id for a in diag.avoid}


def test_how_to_preprocess_a_large_corpus_is_the_host_memory_of_preprocessing(kb):
    # Megatron-DeepSpeed-Llama #13 (zh): no failure said, only how to preprocess TB-scale JSON
    text = ("Megatron-LM的数据预处理只能接收一个json文件，如果我有很多json数据（总量TB级别），"
            "应该先合并成一个超大json再预处理还是先分别处理成.idx和.bin再合并呢？")
    _, _, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "shard-preprocessing"


def test_a_run_that_fits_with_fewer_frames_is_not_short_of_model_state(kb):
    """ms-swift #7326: "stable only up to ~32 frames, increasing max_frames beyond that leads to immediate OOM" -
    weights, gradients and optimizer state do not change with the input; what scales with it does (CP splits it)."""
    text = ("Megatron GRPO with Qwen3-VL-8B on 8 x 80GB: training is stable only up to ~32 frames, and increasing "
            "max_frames beyond that leads to immediate OOM. How do I scale to 180 frames?")
    _, _, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert "capacity-model-state" in diag.ruled_out
    assert diag.causes[0].id == "capacity-activations" and diag.fixes[0].id == "increase-cp"


def test_memory_still_left_after_an_offload_is_held_in_zh(kb):
    # verl #5979: 把 optimizer offload 到 CPU 之后，每张卡上还是剩下大约 4 GB - what the offload does not manage
    text = ("在 verl 里初始化阶段把 actor 的 optimizer offload 到 CPU 之后，每张卡上还是剩下大约 4 GB 说不清来源的显存"
            "（nvidia-smi 看得到，但 PyTorch 的 allocated 对不上），colocate 时会挤占 rollout 的空间。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.trend"] == "held"
    assert diag.fixes[0].id == "track-memory-per-step"


def test_a_host_kill_after_days_of_running_is_memory_that_grew(kb):
    # simpleRL-reason #38 (set s54, zh): Ray worker killed after two days, no CUDA OOM - record RSS per process
    text = "程序跑了两天多之后突然挂掉，报错如下，没有 CUDA out of memory。这是显存不够吗？前两天都好好的。"
    log = ["The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR. There are some "
           "potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage."]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text, log=log), kb)
    assert flat["situation.step"] == "later-step"
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "track-memory-per-step"


def test_memory_lines_of_several_ranks_at_one_iteration_are_no_trend(kb):
    # DeepSpeed #1378 (set s54): first and middle stages' lines after the same 10 iterations, side by side
    log = ["[Rank 0] (after 10 iterations) memory (MB) | allocated: 6824.3 | max allocated: 10824.4 | reserved: 13292.0"
           " | max reserved: 13292.0",
           "[Rank 4] (after 10 iterations) memory (MB) | allocated: 4660.1 | max allocated: 8041.3 | reserved: 10044.0"
           " | max reserved: 10044.0",
           "[Rank 7] (after 10 iterations) memory (MB) | allocated: 6924.3 | max allocated: 10924.4 | reserved: 13392.0"
           " | max reserved: 13392.0"]
    _, flat, _ = pipeline.run(pipeline.Inputs(log=log), kb)
    assert flat.get("situation.trend") != "grows"


def test_a_phase_said_not_to_happen_is_not_where_it_failed(kb):
    # Megatron-LM #2774 (set s54, zh): 没存 checkpoint (no checkpoint was saved) names no save phase
    text = "in-process restart 之后之前占用的显存没有释放。没存 checkpoint 的情况下从第 1 个 iteration 重新开始。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat.get("situation.phase") != "checkpoint-save"
    assert diag.fixes[0].id == "track-memory-per-step"


def test_memory_that_gradually_increases_with_the_steps_grows(kb):
    # TransformerEngine #231 (set s54): "it gradually increases with the number of training steps"
    text = ("Saving the checkpoint needs a huge amount of device memory, and it gradually increases with the number of "
            "training steps.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.trend"] == "grows" and diag.causes[0].id == "memory-growth"


def test_the_launchers_kill_lines_alone_ask_for_the_rank_that_exited(kb):
    # OpenRLHF #977 (set s54, zh): only DeepSpeed launch.py's "Killing subprocess" lines after init
    text = "4卡A100 80G训练RM，进程在 DeepSpeed 初始化后就被 kill 了，是显存不够吗？训练脚本里有 --load_checkpoint。"
    log = ["[2025-04-17 23:16:08,832] [INFO] [stage_1_and_2.py:151:__init__] CPU Offload: False",
           "[2025-04-17 23:16:39,064] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 1619464",
           "[2025-04-17 23:16:39,162] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 1619465"]
    _, _, diag = pipeline.run(pipeline.Inputs(question=text, log=log), kb)
    assert diag.fixes[0].id == "find-first-failing-rank" and "convert-sharded" not in [f.id for f in diag.fixes]


def test_a_memory_saver_said_to_be_off_is_no_sleep_mode(kb):
    # miles #1622 (set s55): "SGLang's enable_memory_saver is off" - expandable segments are not ruled out by it
    text = ("Disaggregated miles run (SGLang on separate GPUs), OOM midway; the OOM message shows about 11 GiB "
            "reserved-but-unallocated while the failing request is only 10.5 GiB. We do not use --offload-train and "
            "SGLang's enable_memory_saver is off.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert "engine-sleep-mode" not in flat["question.topics"]
    assert diag.fixes[0].id == "expandable-segments"


def test_resuming_from_a_saved_checkpoint_is_a_load_in_zh(kb):
    # verl #402 (set s55): 从保存的 checkpoint resume 之后第一轮就 OOM
    text = "只要从保存的 checkpoint resume（trainer.resume_mode=auto），恢复之后第一轮就 OOM，不 resume 就完全没问题。"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.phase"] == "checkpoint-load"


# --- s56 (written blind 2026-12-05, first read 0/13 on fb3e4fc): the classes it showed -----------------------------


def test_the_framework_is_read_from_the_keys_of_the_settings_when_the_words_name_none(kb):
    # OpenRLHF/OpenRLHF#698: an SFT command with micro_train_batch_size and zero_stage, no framework named
    inputs = pipeline.Inputs(question="It runs out of memory during the step function.",
                             overrides=["micro_train_batch_size=1", "zero_stage=2"])
    _, flat, _ = pipeline.run(inputs, kb)
    assert flat["situation.framework"] == "openrlhf"
    assert flat["situation.phase"] == "optimizer-step"  # "the step function" is the optimizer's step
    both = pipeline.Inputs(question="verl run OOMs", overrides=["micro_train_batch_size=1"])
    assert pipeline.run(both, kb)[1]["situation.framework"] == "verl"  # the words win


def test_a_checkpoint_path_in_the_settings_names_the_model(kb):
    # OpenRLHF/OpenRLHF#698: 8B on one A100 80GB with ZeRO-2 dies in the optimizer step: the estimate of weights +
    # grads + Adam (~128 GB) says model state, and moving Adam's state off the GPU is the fix that fits
    inputs = pipeline.Inputs(question="I run out of memory during the step function, batch size 1, seq 128.",
                             overrides=["pretrain=meta-llama/Meta-Llama-3-8B", "micro_train_batch_size=1",
                                        "zero_stage=2", "bf16=true"], gpu="1x A100 80GB")
    facts, _, diag = pipeline.run(inputs, kb)
    assert facts.question.model_name
    assert diag.causes[0].id == "capacity-model-state" and diag.fixes[0].id == "optimizer-cpu-offload"


def test_a_flag_in_a_pasted_command_is_no_phase(kb):
    # OpenRLHF/OpenRLHF#977: "--load_checkpoint" in the command is a setting, not the load_checkpoint() frame
    question = ("openrlhf.cli.train_rm --micro_train_batch_size 1 --zero_stage 2 --load_checkpoint "
                "--gradient_checkpointing; the process is killed right after DeepSpeed init, is it GPU memory?")
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat.get("situation.phase") != "checkpoint-load"


def test_a_kill_while_the_checkpoint_shards_load_is_host_memory_with_a_sharded_load_first(kb):
    # hiyouga/LLaMA-Factory#865 (the progress bar's line ends in the shell's "Killed") and #8836 (every rank SIGTERM'd)
    log = ["In [10]: model = ChatModel(args)",
           "Loading checkpoint shards:  68%|######8   | 19/28 [00:48<00:23,  2.59s/it]Killed"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question="部署模型 Loading checkpoint shards 时被 kill", log=log), kb)
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "convert-sharded"
    assert "reduce-micro-batch" in {a.id for a in diag.avoid} or "reduce-micro-batch" not in {f.id for f in diag.fixes}


def test_an_english_phrase_may_put_a_few_words_between_its_parts(kb):
    # NVIDIA-NeMo/RL#285: "saves a Hugging Face format checkpoint" is a checkpoint save, whatever engine the framework
    # places beside the trainer
    question = ("Training in NeMo-RL runs fine, but when it saves a Hugging Face format checkpoint during training "
                "the job OOMs on our larger model.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.phase"] == "checkpoint-save"
    assert diag.causes[0].id == "checkpoint-save" and diag.fixes[0].id == "checkpoint-save-memory"


def test_an_engine_in_an_sft_runs_package_list_is_installed_not_running(kb):
    # modelscope/ms-swift#7031: an SFT run that jumps after stable steps; sglang is only in its pip list
    question = ("gemma sft训练到一定steps出现显存剧烈增加直到oom。前面的 step 显存都很稳定，"
                "训练到某个 step 之后显存突然大幅上涨然后 OOM。"
                "环境里有 sglang 0.5.1、safetensors 0.6.2、tokenizers 0.21.4 等。这是内存泄漏吗？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat.get("situation.process") != "colocated-engine"
    assert diag.fixes[0].id == "track-memory-per-step"  # memory said to move: the per-step record, not a rank


def test_a_failure_at_the_same_step_every_run_follows_that_steps_batch(kb):
    # modelscope/ms-swift#3327: one card asks for 19.14 GiB at about step 330 of every run: find the batch first
    question = "qwen2.5 3b sft 多机训练 运行到固定的某个step会有一个节点显存 OOM。"
    log = ["[rank62]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 19.14 GiB. GPU 6 has a total "
           "capacity of 79.33 GiB of which 8.35 GiB is free. Including non-PyTorch memory, this process has 70.97 GiB "
           "memory in use. Of the allocated memory 68.65 GiB is allocated by PyTorch, and 853.04 MiB is reserved by "
           "PyTorch but unallocated."]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["situation.trend"] == "spike"
    assert diag.fixes[0].id == "track-memory-per-step" and "add-gpus" in {a.id for a in diag.avoid}


def test_a_ray_kill_is_read_for_the_nodes_memory_and_quoted_as_printed(kb):
    # verl-project/verl#2950: the raylet's node-memory line says what the node held against its RAM
    log = ["ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
           "Memory on the node (IP: 10.20.49.141, ID: 4748aa6d) where the task (actor ID: 9e43ace6, "
           "name=WorkerDict.__init__, pid=4100606, memory used=56.57GB) was running was 246.41GB / 251.54GB "
           "(0.979583), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: c9e16e95) "
           "because it was the most recently scheduled task"]
    facts = parse_log(log, kb)
    assert facts.host_figures == {"killed": "56.57GB", "node_used": "246.41GB", "node_total": "251.54GB",
                                  "threshold": "0.95"}
    assert facts.host_oom
    _, flat, diag = pipeline.run(pipeline.Inputs(log=log), kb)
    from memtune.report import message_figures
    quoted = {m["name"]: m["text"] for m in message_figures(flat)}
    assert quoted["host_node_total"] == "251.54GB" and quoted["host_threshold"] == "0.95"


def test_one_gpu_has_no_first_failing_rank_to_find(kb):
    # a single-GPU run (OpenRLHF/OpenRLHF#698's shape): the check that separates the causes is the per-step record
    inputs = pipeline.Inputs(question="my SFT run OOMs, what should I do?", gpu="1x A100 80GB")
    _, _, diag = pipeline.run(inputs, kb)
    assert diag.fixes[0].id == "track-memory-per-step"
    eight = pipeline.run(pipeline.Inputs(question="my SFT run OOMs, what should I do?", gpu="8x A100 80GB"), kb)[2]
    assert eight.fixes[0].id == "find-first-failing-rank"


def test_the_situation_line_quotes_the_kill_it_read(kb):
    # hiyouga/LLaMA-Factory#865: the shell's "Killed" after the loading progress bar is what the user saw
    argv = ["diagnose", "--question", "Loading checkpoint shards 时被 kill", "--log", "-", "--format", "markdown"]
    log = ("In [10]: model = ChatModel(args)\n"
           "Loading checkpoint shards:  68%|######8   | 19/28 [00:48<00:23,  2.59s/it]Killed\n")
    stdin = sys.stdin
    try:
        sys.stdin = io.StringIO(log)
        md = _stdout(argv)
    finally:
        sys.stdin = stdin
    line = next(line for line in md.splitlines() if line.startswith("**"))
    assert "Killed" in line


def test_memory_used_more_and_more_is_growth(kb):
    # OpenRLHF/OpenRLHF#1065: host RAM "used more and more", "like a ladder" at each checkpoint save
    question = ("Why CPU Memory Is Used More and More? At each saving point the cache becomes larger and the RSS "
                "increases w.r.t. steps; with no checkpoint saves the RAM cache didn't increase like a ladder anymore.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.trend"] == "grows" and diag.fixes[0].id == "track-memory-per-step"


def test_loading_the_whole_pretrained_model_before_sharding_is_a_load_peak(kb):
    # areal-project/AReaL#862 and NovaSky-AI/SkyRL#1419 (set issue-24-s58): the build's peak is the unsharded weights
    question = ("The job runs out of GPU memory during initialization: every rank loads the pretrained weights "
                "directly onto its GPU before FSDP sharding is applied.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "whole-weights-load" in flat["question.topics"]
    assert diag.causes[0].id == "checkpoint-load" and diag.fixes[0].id == "convert-sharded"
    zh = "模型初始化阶段就 OOM 了，还没开始训练。初始化时 rank 0 这张卡加载了完整模型再广播给其他卡。"
    diag = pipeline.run(pipeline.Inputs(question=zh), kb)[2]
    assert diag.causes[0].id == "checkpoint-load"
    # a model build that loads nothing named stays the training state's
    plain = pipeline.run(pipeline.Inputs(question="It runs out of GPU memory during model initialization."), kb)[2]
    assert plain.causes[0].id == "capacity-model-state"


def test_subsequent_training_in_chinese_is_no_resume(kb):
    # OpenRLHF/OpenRLHF#964: "后续训练" (the training that follows) holds the characters of "续训" (resume)
    question = "生成的样本全部放在 GPU 上的一个列表里，在进行后续训练时很容易 OOM。"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat.get("situation.phase") != "checkpoint-load"


def test_growth_from_one_training_stage_to_the_next_is_no_trend(kb):
    # shibing624/MedicalGPT#190 (set issue-24-s59): PT and SFT fit, DPO does not - what DPO adds, not a leak
    question = "按顺序走PT+SFT+DPO微调链路，发现显存占用越来越高，做PT和SFT时单卡能运行，而在做DPO时显存oom"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat.get("situation.trend") != "grows"
    grows = pipeline.run(pipeline.Inputs(question="DPO 训练时显存每一步都越来越高，最后 OOM"), kb)[1]
    assert grows["situation.trend"] == "grows"


def test_fp8_written_as_a_switch_is_fp8_on_not_a_refusal(kb, tmp_path):
    # NVIDIA/TransformerEngine#712 (set issue-24-s59): "fp8: true" names no format; both formats hold one byte
    config = tmp_path / "config.yaml"
    config.write_text("model:\n  num_layers: 32\n  seq_length: 4096\nmixed_precision:\n  fp8: true\n")
    _, flat, _ = pipeline.run(pipeline.Inputs(config=str(config)), kb)
    assert flat["config.fp8"] == "hybrid"


def test_a_phase_not_reached_yet_is_not_where_it_failed_in_zh(kb):
    # OpenRLHF/OpenRLHF#360 (set issue-24-s59): "还没到加载模型的那一步" - it died before loading the model
    question = "运行 ppo_ray 训练时 worker 被杀了。感觉不是 CPU 内存的问题呀，还没到加载模型的那一步。"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat.get("situation.phase") != "checkpoint-load"


def test_a_frameworks_own_keys_reach_the_config_and_other_processes_keys_do_not(kb):
    # OpenRLHF/OpenRLHF#360 (set issue-24-s59): adam_offload=true is DeepSpeed's CPU Adam - host memory holds it
    inputs = pipeline.Inputs(question="Ray 的 worker 被系统杀了，主机内存 1TB",
                             overrides=["adam_offload=true", "micro_train_batch_size=1", "zero_stage=3"])
    _, flat, diag = pipeline.run(inputs, kb)
    assert flat["config.optimizer_cpu_offload"] is True and flat["config.micro_batch_size"] == 1
    # verl: the actor's Megatron layout is read, the rollout engine's tensor parallel size is not
    verl = pipeline.run(pipeline.Inputs(question="OOM in update_actor", overrides=[
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=8"]), kb)[1]
    assert verl["config.tensor_model_parallel_size"] == 4


def test_a_trainer_that_is_not_megatron_gets_no_megatron_layout_fix(kb):
    # hiyouga/LLaMA-Factory#2263 (set issue-24-s59): a DeepSpeed ZeRO-2 run has no pipeline stages to add
    question = "DPO with LoRA on Yi-34B, DeepSpeed ZeRO2 on 8x A100 80GB, runs out of GPU memory at batch 1."
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.trainer"] == "deepspeed"
    assert "increase-pp" not in [f.id for f in diag.fixes]
    # Megatron named beside it: the layout fixes are back on the table
    megatron = pipeline.run(pipeline.Inputs(question=question + " We use the Megatron backend (mcore_adapter)."), kb)
    assert megatron[1]["situation.trainer"] is None


def test_a_server_the_user_started_on_a_gpu_is_another_process(kb):
    # Alibaba-NLP/ZeroSearch#11 (set issue-24-s58): verl's engine runs in the trainer's process; the user's own
    # simulation server holds GPU 0
    question = "先起了一个本地 simulation server 占了一张卡，然后用 verl 跑 GRPO，一启动就 OutOfMemoryError。"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.process"] == "other-process"


def test_state_sharded_over_an_unknown_data_parallel_size_is_an_assumed_estimate(kb, tmp_path):
    # NVIDIA-NeMo/Megatron-Bridge#1552 (set issue-24-s58): Megatron-FSDP on "multiple" nodes - the per-GPU state of a
    # DP size nobody gave is an upper bound, so the user's account of loading the whole HF model at setup leads
    config = tmp_path / "config.yaml"
    config.write_text("model:\n  tensor_model_parallel_size: 1\n  pipeline_model_parallel_size: 1\n"
                      "  seq_length: 2048\nddp:\n  use_megatron_fsdp: true\n  use_distributed_optimizer: true\n")
    question = ("Llama3.1 70B with Megatron FSDP OOMs during model setup: the HF weights are loaded before sharding "
                "(to_megatron_provider(load_weights=True)).")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, config=str(config),
                                                 gpu="multiple 4xH100 (64GB) nodes"), kb)
    assert diag.causes[0].id == "checkpoint-load" and diag.fixes[0].id == "convert-sharded"


def test_transformer_engines_fp8_model_init_names_an_api_not_the_model_build(kb):
    # NVIDIA/TransformerEngine#712 (set issue-24-s59): "profile using fp8_model_init" is not an OOM at model init
    question = "I profiled the peak memory using `fp8_model_init`; enabling fp8 without fp8 primary weights is worse."
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat.get("situation.phase") != "model-build"


def test_an_hf_trainer_run_that_fails_once_evaluation_starts_keeps_the_eval_logits(kb):
    # hiyouga/LLaMA-Factory#5419 (set issue-24-s59): training fits, the first evaluation does not
    question = "LLaMA-Factory 训练 Qwen1.5：训练时显存够用，但是一到 eval 阶段就爆 OOM。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.trainer"] == "hf" and diag.causes[0].id == "logits-loss-memory"
    assert "hf-trainer-eval-keeps-outputs" in diag.causes[0].rules


def test_a_load_said_to_be_finished_is_not_where_it_failed_in_chinese(kb):
    # hiyouga/LlamaFactory#8642 (set issue-24-s60): "模型加载完后" (once the model had loaded) puts the load behind;
    # "更新参数" (updating the parameters) is the optimizer step that then ran out
    question = "模型加载完后，显存占用正常67G，后续模型更新参数直接就爆显存了。"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat.get("situation.phase") == "optimizer-step"


@pytest.mark.parametrize("question, step", [
    # TU2021/D2Skill-AgenticRL#5 (set issue-24-s60): "trains to about step 30, then OOMs"
    ("您好，我复现您的代码，训练进行到30step左右时，就会OOM，请问您有这个情况吗？", "later-step"),
    ("Training OOMs at step 180 every time.", "later-step"),
    # OpenPipe/ART#812 (set issue-24-s87): an RL run counts its training updates
    ("Our RL run dies with an out-of-memory on optimizer update 4.", "later-step"),
    ("It dies after 1 step with CUDA OOM.", "second-step"),
    ("第 2 步就 OOM 了", "second-step"),
    ("OOM at iteration 1", "first-step"),
    # an interval counts how often, not where it failed
    ("I save every 100 steps and it OOMs.", None),
])
def test_a_step_counted_where_it_failed_says_which_step(question, step, kb):
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat.get("situation.step") == step


def test_many_good_steps_rule_out_model_state(kb):
    # weights, gradients and optimizer state were all in place by the second step and fit for thirty
    question = "您好，我复现您的代码，训练进行到30step左右时，就会OOM，请问您有这个情况吗？"
    data = json.loads(_stdout(["diagnose", "--question", question, "--format", "json"]))
    assert "capacity-model-state" in {c["id"] for c in data["situation"]["ruled_out"]}
    assert "capacity-model-state" not in {c["id"] for c in data["causes"]}


def test_a_worker_named_for_its_role_is_built_at_its_init(kb):
    # NVIDIA-NeMo/RL#1922 (set issue-24-s60): "OOM during DTensorPolicyWorker init" is the policy worker's build
    question = "Ran NeMo-RL DPO and consistently hit OOM during DTensorPolicyWorker init on 4xA100-80GB."
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat.get("situation.phase") == "model-build"


def test_nemo_rl_dtensor_worker_is_no_megatron_trainer():
    # NeMo-RL's default policy worker is DTensor (FSDP2 with TP / SP, no pipeline): no Bridge recipe default is
    # assumed for it, and Megatron-only fixes are ruled out - its own TP is not
    question = "NeMo-RL DPO with policy.dtensor_cfg.tensor_parallel_size=4 hits OOM during DTensorPolicyWorker init."
    data = json.loads(_stdout(["diagnose", "--question", question, "--format", "json"]))
    avoided = {a["id"] for a in data["avoid"]}
    assert {"increase-pp", "distributed-optimizer"} <= avoided
    assert "increase-tp" not in avoided
    assert not data.get("assumed")


def test_verl_fsdp_actor_shards_its_own_optimizer_state():
    # verl's actor strategy defaults to FSDP: Megatron's distributed optimizer is not one of its settings
    question = "verl GRPO, actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8, OOM in the actor update."
    data = json.loads(_stdout(["diagnose", "--question", question, "--format", "json"]))
    assert "distributed-optimizer" in {a["id"] for a in data["avoid"]}


def test_a_question_whether_something_is_supported_runs_none_of_it(kb):
    # NVIDIA-NeMo/RL#1922: "Is DPO + LoRA supported?" asks about LoRA; the run is full fine-tuning
    question = "DPO on a 30B model OOMs at init on 4 GPUs. Any known working config? Is DPO + LoRA supported?"
    q = parse_question(question, kb)
    assert "lora" not in q.topics and q.layout.get("peft") != "lora"


def test_a_dataset_called_too_large_runs_host_ram_out_as_it_loads():
    # hiyouga/LlamaFactory#3795 (set issue-24-s61): "内存爆掉" is host RAM; a dataset tokenized whole in memory as
    # it loads is preprocessed once and loaded tokenized (tokenized_path), not fewer DataLoader workers
    question = "数据集过大导致加载数据集时内存爆掉，想要直接加载tokenize之后的数据进行训练"
    data = json.loads(_stdout(["diagnose", "--question", question, "--format", "json"]))
    assert data["causes"][0]["id"] == "host-oom"
    assert data["fixes"][0]["id"] == "shard-preprocessing"


def test_a_ray_resource_refusal_is_no_oom():
    # inclusionAI/AReaL#14 (set issue-24-s61): the workers' declared host memory does not fit the node
    log = ("controller CRITICAL: Ray does not have enough resources to launch workers. Required: 8.0 CPU, 1.0 GPU, "
           "107.42 GB memory. Available: 32.0 CPU, 1.0 GPU, 39.60 GB memory.")
    facts, _, diag = pipeline.run(pipeline.Inputs(log=[log]), knowledge.load())
    assert diag.causes[0].id == "not-an-oom"


@pytest.mark.parametrize("question", [
    # verl-project/verl#26 (set issue-24-s61): the setting changes nothing the user measured
    "I find the parameter `critic.model.enable_gradient_checkpointing` does not change the memory usage of critic "
    "model in FSDP workers.",
    # the same report: a setting the workers never read
    "I also find that the parameter `enable_gradient_checkpointing` is not used by Megatron workers.",
    # sgl-project/sglang#4336 (set issue-24-s61): the release call gave nothing back
    "我用 release_memory_occupation 想让出显存，结果它根本没把 GPU 上的参数卸载掉，之后就 OOM。",
])
def test_a_setting_said_to_change_nothing_did_not_reach_the_run(question, kb):
    _, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert diag.causes[0].id == "setting-not-applied"


def test_automodels_masked_cross_entropy_is_the_loss_and_its_fused_loss_the_fix():
    # NVIDIA-NeMo/Automodel#2603 (set issue-24-s62): masked_ce.py upcasts the logits; the fix is the fused linear CE
    question = ("用 NeMo Automodel 全参微调 Qwen3.5-9B（视觉语言模型），loss_fn 用的是 MaskedCrossEntropy。"
                "一遇到图片 token 很多的 batch，显存会一下子冲到 77 GiB 以上，"
                "然后在 masked_ce.py:84 报 CUDA OOM。")
    data = json.loads(_stdout(["diagnose", "--question", question, "--format", "json"]))
    assert data["causes"][0]["id"] == "logits-loss-memory"
    assert data["fixes"][0]["id"] == "te-cross-entropy-fusion"
    assert "FusedLinearCrossEntropy" in json.dumps(data["fixes"][0])


def test_a_sliver_of_cached_memory_is_no_fragmentation(kb):
    # NVIDIA-NeMo/Automodel#3909 (set issue-24-s62): 2 GiB of 173.6 GiB reserved is the allocator's ordinary slack
    log = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 720.00 MiB. GPU 0 has a total capacity of "
           "184.31 GiB of which 443.94 MiB is free. Of the allocated memory 171.63 GiB is allocated by PyTorch, and "
           "2.00 GiB is reserved by PyTorch but unallocated."]
    question = ("Automodel 的 gpt-oss 配置（loss 用 MaskedCrossEntropy）在 GB200 上 backward 阶段 OOM，"
                "只想分配 720 MiB 就失败了。")
    _, _, diag = pipeline.run(pipeline.Inputs(log=log, question=question), kb)
    assert diag.causes[0].id == "logits-loss-memory"


def test_a_forward_not_yet_reached_is_before_training_in_chinese(kb):
    # NVIDIA-NeMo/Automodel#2866 (set issue-24-s62): "还没跑到第一次 forward 就 OOM 了" - the first forward never ran
    question = "单机 8×H100-80GB，还没跑到第一次 forward 就 OOM 了，栈在 _aggregate_experts。"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat.get("situation.phase") != "forward" and flat.get("situation.step") == "before-training"


def test_a_run_that_trains_without_the_engine_overflows_by_the_engines_share():
    # modelscope/ms-swift#4594 (set issue-24-s63): "使用vllm爆显存，不使用vllm可以正常训练"
    question = ("8*A100执行GRPO完整流程，使用vllm爆显存，不使用vllm可以正常训练但缓慢。"
                "--use_vllm true --vllm_mode colocate")
    data = json.loads(_stdout(["diagnose", "--question", question, "--format", "json"]))
    assert "shrink-colocated-engine" in data["situation"]["worked_with"]
    assert data["fixes"][0]["id"] == "shrink-colocated-engine"


def test_cache_tied_to_collectives_is_record_stream_fragmentation(kb):
    # PyTorch Forums t/191573 (set issue-24-s64): reserved-but-unallocated that goes away without the all_reduce calls
    question = ('Runs with tensor-parallelism enabled that OOM have large amounts of "reserved but not unallocated" '
                "memory. If I remove the all_reduce calls in the TP region, the max batch size goes up 2x.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert {"cache", "collectives"} <= set(flat["situation.components"])
    assert diag.causes[0].id == "fragmentation" and diag.fixes[0].id == "avoid-record-streams"
    # the collectives alone name no cached memory: nothing points at the allocator
    _, flat, _ = pipeline.run(pipeline.Inputs(question="The all_reduce in every TP layer is slow."), kb)
    assert "cache" not in (flat.get("situation.components") or [])


def test_a_growing_gap_between_allocated_and_reserved_is_cached_memory_in_chinese(kb):
    # jjblogs 221285 (set issue-24-s64): "观察到内存分配和保留的差距持续增大"
    question = "70B 模型训练频繁 OOM，在训练循环中加入内存监控代码，观察到内存分配和保留的差距持续增大。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "cache" in flat["situation.components"]
    assert diag.causes[0].id == "fragmentation" and diag.fixes[0].id == "expandable-segments"


def test_a_forward_only_job_failing_at_build_holds_its_training_buffers(kb):
    # NovaSky-AI/SkyRL#1947 (set issue-24-s64): forward-only probes OOM while the policy is initialised
    question = ("4 张 L4（24GB）上跑 SkyRL Megatron 后端，几个只做前向的检查根本不训练，"
                "但初始化 policy 的时候就 OOM 了。bf16 参数才 14 GiB 左右。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, gpu="4x L4 24GB"), kb)
    assert flat["situation.phase"] == "model-build" and flat["situation.forward_only"]
    assert diag.causes[0].id == "capacity-model-state"
    assert diag.fixes[0].id == "forward-only-without-training-buffers"
    # a model loaded from HF weights during init is a checkpoint load, not the build (verl#330's wording)
    question = "模型在初始化、加载 HF 权重的时候就 OOM 了，还没开始训练。"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.phase"] != "model-build"


def test_megatron_cores_fp8_param_is_the_fp8_parameter_setting():
    # verl-project/verl#7232 (set issue-24-s64): TransformerConfig.fp8_param is --fp8-param-gather by another name
    question = ("verl, Megatron backend: FP8 E2E is slower than BF16 on Qwen3-30B-A3B / 8xH200; is this expected, "
                "and should fp8_param change it?")
    data = json.loads(_stdout(["diagnose", "--question", question, "--gpu", "8xH200", "--format", "json"]))
    assert data["causes"][0]["id"] == "precision-buffers"
    assert data["fixes"][0]["id"] == "fp8-param-gather"
    assert "override_transformer_config.fp8_param=True" in json.dumps(data["fixes"][0])



def test_a_failure_after_steps_that_fit_is_checked_step_by_step(kb):
    # d2skill#5 and Search-R1#112 (issue-24 sets): "训练进行到30step左右时，就会OOM", "at step 4 during backward":
    # the layout held for the steps before, so the per-step record shows what moved; which rank failed first does not
    for question in ("您好，我复现您的代码，训练进行到30step左右时，就会OOM，请问这大概是什么原因造成的呢？",
                     "After a few training steps, specifically at step 4 during loss.backward() for the actor, "
                     "I encounter a CUDA out-of-memory error."):
        _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
        assert flat["situation.step"] == "later-step"
        assert diag.fixes[0].id == "track-memory-per-step"
    from memtune.engine import _check_fix
    from memtune.ledger import policy

    pol = policy(kb)["candidates"]
    flat = {"situation.failure_said": True, "situation.step": "later-step"}
    assert _check_fix(pol, flat) == "track-memory-per-step"
    assert _check_fix(pol, {**flat, "situation.where": "single-rank"}) == "find-first-failing-rank"
    assert _check_fix(pol, {**flat, "situation.step": "first-step"}) == "find-first-failing-rank"


def test_thin_evidence_beside_a_colocated_engine_names_the_engine_first(kb):
    # verl#647 / ROLL#171 (issue-24 sets): a colocated RL OOM with little else said - the engine's own memory on the
    # same GPUs is the first candidate, a setting that never reached the run the next
    question = "verl GRPO with vLLM colocated on the same GPUs: the actor update runs out of memory. What to check?"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.process"] == "colocated-engine"
    assert [c.id for c in diag.causes][:2] == ["foreign-process", "setting-not-applied"]


def test_an_update_after_which_something_no_longer_works_is_the_suspect(kb):
    # ChatLearn#283 (issue-24 set): "After upgrading Transformer Engine to 1.13, offloading ... no longer frees the GPU
    # memory it used to free": the same setup worked before the update, so the update leads the candidates
    question = ("ChatLearn RLHF with a Megatron policy colocated with the generation model. After upgrading "
                "Transformer Engine to 1.13, offloading the optimizer states no longer frees the GPU memory.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.worked_before"] and "stack" in flat["situation.changed"]
    assert diag.causes[0].id == "version-regression"
    # "the latest version" said alone is no update that broke a working setup
    question = "TE 是源码最新版，FP8 比 FlashAttention 显存还多得多（11GB vs 27GB），是我哪里用错了？"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert not diag.causes or diag.causes[0].id != "version-regression"


def test_an_option_the_user_is_considering_is_not_what_the_run_uses(kb):
    # EleutherAI/gpt-neox#892 (set issue-24-s65): "现在在考虑干脆只做 LoRA" - the run is a full fine-tune
    question = ("8 卡 A100 (80G) 全参微调 gpt-neox-20B，zero2 / zero3 都 OOM。"
                "现在在考虑干脆只做 LoRA，但还是想问一下全参微调在 8 卡上到底能不能跑？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "lora" not in (flat.get("question.topics") or [])
    assert "lora-frozen-base-weights" not in {r for c in diag.causes for r in c.rules}
    _, flat, _ = pipeline.run(pipeline.Inputs(question="We are thinking about switching to LoRA; full FT OOMs."), kb)
    assert "lora" not in (flat.get("question.topics") or [])


def test_a_separate_engine_that_fails_generating_misses_the_trainers_settings(kb):
    # modelscope/ms-swift#5894 (set issue-24-s65): VIDEO_MAX_PIXELS set on swift rlhf, the swift rollout server fails
    question = ("GRPO训练一段时间后：CUDA out of memory。用 swift rollout 单独起了一个 vLLM 服务（1 张卡），"
                "另外 2 张卡跑 swift rlhf。训练这边已经加了 VIDEO_MAX_PIXELS=50176、FPS_MAX_FRAMES=40，还是 OOM。")
    log = ["ERROR [core.py:398] EngineCore encountered a fatal error.",
           "Traceback (most recent call last):",
           '  File ".../vllm/v1/engine/core.py", line 389, in run_engine_core',
           "    engine_core.run_busy_loop()",
           '  File ".../vllm/model_executor/models/qwen2_vl.py", line 241, in apply_rotary_pos_emb_vision',
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["situation.process"] == "separate-engine" and flat["situation.phase"] == "rl-rollout"
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"
    assert {"reduce-micro-batch", "full-recompute"} <= {a.id for a in diag.avoid}


def test_a_quoted_word_reads_as_the_word(kb):
    # NVIDIA-NeMo/RL#33 (set issue-24-s66): "supposed to be 'asleep'" says the trainer should have let go
    question = ("When the HFPolicy is supposed to be 'asleep' (while vLLM is doing generation), it still takes up "
                "about ~11GB on the GPU for Llama8B according to nvidia-smi. It should be ~0.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.expected_release"] and flat["situation.trend"] == "held"
    assert diag.fixes[0].id == "track-memory-per-step"


def test_ms_swifts_move_to_vllm_is_the_weight_sync(kb):
    # modelscope/ms-swift#7986: "_move_full_model_to_vllm" copies the trainer's weights into the colocated vLLM
    question = ("GRPO colocate mode, DeepSpeed ZeRO-3: OOM in `_move_full_model_to_vllm` since I switched from "
                "3.10.3 to 3.12.3; the same scripts used to work.")
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.phase"] == "rl-weight-sync"


def test_a_few_hundred_mib_held_elsewhere_does_not_own_a_full_gpu(kb):
    # NVIDIA-NeMo/RL#493 (set issue-24-s67): 366 MiB in another process beside 45.8 GiB of the trainer's own tensors
    log = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 560.00 MiB. GPU 0 has a total capacity of "
           "47.41 GiB of which 370.38 MiB is free. Process 21440 has 366.00 MiB memory in use. Including non-PyTorch "
           "memory, this process has 46.64 GiB memory in use. Of the allocated memory 45.80 GiB is allocated by "
           "PyTorch, and 215.61 MiB is reserved by PyTorch but unallocated."]
    question = "Running the NeMo-RL deepscaler GRPO tutorial on a single A6000 48GB: OOM after some time."
    _, _, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert diag.causes[0].id != "foreign-process" and diag.fixes[0].id != "shrink-colocated-engine"


@pytest.mark.parametrize("question", [
    # NVIDIA-NeMo/RL#456 (set issue-24-s67) and verl#3620: the same run fits at the shorter length
    "第一阶段 8K 能跑，但第二阶段把 policy.max_total_sequence_length 设成 16384 之后就显存 OOM。",
    "It runs into OOM during the actor update. The only one that worked is max_prompt_length 7000 and "
    "max_response_length 10000, but I want longer ones.",
])
def test_a_run_that_fits_at_a_shorter_length_holds_activations(question, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "larger-input-fails" in flat["question.topics"]
    assert diag.causes[0].id == "capacity-activations"


def test_vllms_sleep_mode_allocator_failing_is_the_colocated_engine(kb):
    # TideDra/lmm-r1#42 (set issue-24-s67): the user retypes vLLM's cumem_allocator failure in another case; in the
    # question's words or only in the log, it names the colocated engine (vLLM's sleep mode is how it shares GPUs)
    log = ["Runtime Error: Cuda error: out of memory at /workspace/csrc/cumem_allocator.cpp: 62"]
    for question in ("训练Qwen2-VL 7B的模型出现OOM。报错：Runtime Error: Cuda error: out of memory at "
                     "/workspace/csrc/cumem_allocator.cpp: 62 这是怎么回事，要怎么改？",
                     "训练Qwen2-VL 7B的模型出现OOM。这是怎么回事，要怎么改？"):
        _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
        assert flat["situation.process"] == "colocated-engine"
        assert diag.fixes[0].id == "shrink-colocated-engine"
    assert "expandable-segments" not in {f.id for f in diag.fixes}


@pytest.mark.parametrize("question, first_fix", [
    # slime's FSDP notes (set issue-24-s68): the same run fits at 8k responses; raised to 16k, one sample is too long
    ("slime 里做 GRPO，4 张 B200。response_length = 8k 的时候都能跑，把 max response length 提到 16k 之后两个后端都 "
     "OOM 了。micro batch 已经是按 token 动态打包的（max_tokens_per_gpu）。", "increase-cp"),
    # verl#2159 (set issue-24-s68): the OOM comes and goes with the longest completions, micro-batches hold samples
    ("两台机器上跑 GRPO。偶尔会 OOM，原因是某些 completion 特别长，有时是在 backward 的时候 OOM。", "sequence-packing"),
    ("Our GRPO run OOMs occasionally because some completions are very long, sometimes in backward.",
     "sequence-packing"),
])
def test_a_failure_that_follows_the_sample_length_holds_activations(question, first_fix, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "larger-input-fails" in flat["question.topics"]
    assert diag.causes[0].id == "capacity-activations" and diag.fixes[0].id == first_fix


def test_a_length_lowered_without_effect_is_no_larger_input(kb):
    # verl#3124: lowering the lengths did not help, which says nothing about longer inputs failing
    question = ("I have tried to reduce data.max_prompt_length to 1024 and data.max_response_length to 2048, it "
                "still reproduces the OOM error.")
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "larger-input-fails" not in flat["question.topics"]


@pytest.mark.parametrize("question", [
    # NVIDIA/NeMo#7833 (set issue-24-s68): a second trainer.fit in the same process needs more than the first
    "在同一个进程里连续调用两次 trainer.fit，打印 torch.cuda.memory_allocated()，"
    "第二次 fit 的显存明显比第一次高，模型稍大一点第二次就容易 OOM。",
    "Calling trainer.fit twice in one process: the second fit uses noticeably more memory than the first and OOMs.",
])
def test_a_repeat_that_needs_more_than_the_first_holds_memory(question, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.trend"] == "grows"
    assert diag.causes[0].id == "memory-growth"


def test_a_hang_with_no_memory_failure_is_not_an_oom(kb):
    # huggingface/trl#3858 (set issue-24-s68): stuck at step 0, no OOM said or logged - slow generation, not memory
    question = ("when use GRPO + deepspeed_zero3 + ds3_gather_for_generation=False, stuck in the training stage, step "
                "is still 0 after an hour. Is this a deadlock / hang?")
    _, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert diag.causes[0].id == "not-an-oom" and diag.fixes[0].id == "find-first-failing-rank"
    # the same stall beside an OOM the user names is a memory failure to read first
    _, _, diag = pipeline.run(pipeline.Inputs(question=question + " One rank printed CUDA out of memory."), kb)
    assert diag.causes[0].id != "not-an-oom"


def test_a_clause_weighing_an_action_names_no_phase_and_a_suspicion_rules_nothing_out(kb):
    # the OpenRLHF SGLang-backend log (set issue-24-s68): "should I del / empty_cache after the weight update?" is an
    # action weighed, not where it failed; "is SGLang leaking?" is a suspicion, checked first, which has not yet
    # made a smaller micro-batch useless (the OOM there was the training batch)
    question = ("换成 SGLang 之后整个 training pipeline 会 OOM，用 vLLM 就没事。是不是 SGLang 这边内存泄漏了？"
                "要不要在更新权重后手动 del、empty_cache？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.phase"] is None and flat["situation.suspected_trend"] == "grows"
    assert diag.fixes[0].id == "track-memory-per-step"
    assert "reduce-micro-batch" not in {a.id for a in diag.avoid}
    # seen, not suspected, growth does rule it out
    _, _, diag = pipeline.run(pipeline.Inputs(question="显存每一步都在涨，跑到第 300 步 OOM。"), kb)
    assert "reduce-micro-batch" in {a.id for a in diag.avoid}


def test_a_comment_inside_a_continued_launch_command_cuts_it(kb):
    # modelscope/ms-swift#3504 (set issue-24-s69): the env assignments above the comment never reach `swift sft`
    from memtune.inputs.shell_lines import cut_by_comment

    script = ["CUDA_VISIBLE_DEVICES=0,1,2,3 \\", "NPROC_PER_NODE=4 \\", "VIDEO_MAX_PIXELS=16384 \\",
              "# VIDEO_TOTAL_PIXELS=14112000 \\", "swift sft \\", "    --model Qwen/Qwen2.5-VL-7B-Instruct \\",
              "    --train_type full"]
    assert cut_by_comment(script) == "# VIDEO_TOTAL_PIXELS=14112000 \\"
    # a comment above the block, or one that closes it with nothing after, cuts nothing
    assert cut_by_comment(["# launch", "NPROC_PER_NODE=4 \\", "swift sft --train_type full"]) is None
    assert cut_by_comment(["swift sft \\", "    --train_type full \\", "# --freeze_vit true"]) is None
    _, _, diag = pipeline.run(pipeline.Inputs(question="同样的设置在 llama factory 可以训练，但是 swift 爆显存。",
                                              log=script), kb)
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"


def test_an_empty_line_inside_a_continued_launch_command_cuts_it(kb):
    # modelscope/ms-swift#3453 (set issue-24-s70): the backslash joins the empty line, which ends the command, so
    # swift sft starts without NPROC_PER_NODE - one process, one GPU full
    from memtune.inputs.shell_lines import cut_by_comment

    script = ["CUDA_VISIBLE_DEVICES=0,1 \\", "NPROC_PER_NODE=2 \\", "", "swift sft \\", "    --train_type lora"]
    assert cut_by_comment(script) == "(empty line) after NPROC_PER_NODE=2 \\"
    # empty lines between commands, or after the last continued line, cut nothing
    assert cut_by_comment(["export A=1", "", "swift sft \\", "    --train_type lora", ""]) is None
    assert cut_by_comment(["swift sft \\", "    --train_type lora \\", ""]) is None
    _, _, diag = pipeline.run(pipeline.Inputs(question="两张卡只用了一张，另一张只占 3 GB，然后 OOM。", log=script), kb)
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"


@pytest.mark.parametrize("text, reads, not_reads", [
    # InternLM/xtuner#755 (set issue-24-s69): a sequence-parallel size is Ulysses, which splits the sequence
    ("sequence_parallel_size=4，OOM；sequence_parallel_size=7，8GPU跑不了", "context-parallel", "sequence-parallel"),
    ("verl: ulysses_sequence_parallel_size=2 and it still OOMs", "context-parallel", "sequence-parallel"),
    ("TP4 with SP on, and it OOMs in backward", "sequence-parallel", "context-parallel"),  # Megatron's switch
])
def test_a_sequence_parallel_size_is_ulysses_not_megatrons_switch(text, reads, not_reads, kb):
    topics = parse_question(text, kb).topics
    assert reads in topics and not_reads not in topics


def test_host_memory_growing_with_the_ranks_at_start_is_a_copy_per_rank(kb):
    # deepspeedai/DeepSpeed#5290 (set issue-24-s69): 4 ranks each built Llama-2-70B on the CPU outside zero.Init
    question = ("单机 4 张 A100 80G，用 DeepSpeed ZeRO-3 对 Llama-2-70B 做 SFT。"
                "还没等显存出问题，CPU 内存就先爆了，进程被杀。"
                "而且用的 GPU 越多，DeepSpeed 占的 CPU 内存越多，ZeRO-3 不是应该把模型切开吗？")
    _, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "convert-sharded"
    assert "optimizer-cpu-offload" in {a.id for a in diag.avoid}


def test_fine_without_the_engine_names_the_engines_share(kb):
    # huggingface/trl#2688 (set issue-24-s69): "works fine not using vLLM"; not "runs fine without errors"
    question = ("Model is 8B. Works fine not using vLLM w/deepspeed, when enabling vLLM and using deepspeed I get oom "
                "on the vLLM device when the model is loading.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.worked_with"] == ["shrink-colocated-engine"]
    assert diag.fixes[0].id == "shrink-colocated-engine"
    _, flat, _ = pipeline.run(pipeline.Inputs(question="With expandable segments on, the code runs fine without "
                                                       "errors."), kb)
    assert "shrink-colocated-engine" not in (flat["situation.worked_with"] or [])


def test_a_setting_on_that_behaves_as_if_off_did_not_apply(kb):
    # pytorch/pytorch#183387 (set issue-24-s69): PYTORCH_ALLOC_CONF set, the OOM "as if expandable segments were off"
    question = ("On PyTorch 2.9.1 I switched my launcher to PYTORCH_ALLOC_CONF=expandable_segments:True. Since "
                "then the same config goes OOM, and the OOM message shows about 1.91 GiB reserved by PyTorch but "
                "unallocated, as if expandable segments were off. Is the new variable name not honoured?")
    env = ["PYTORCH_ALLOC_CONF=expandable_segments:True"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, env=env), kb)
    assert flat["situation.not_applied_said"] is True
    assert diag.fixes[0].id == "confirm-setting-applied"


@pytest.mark.parametrize("text", [
    # NVIDIA/TransformerEngine#978 and #873 (set issue-24-s70): compile jobs on the CPU, before any training
    "pip install git+https://github.com/NVIDIA/TransformerEngine.git@stable fails: 'Building wheel for "
    "transformer_engine (setup.py)... error', nvcc Killed. Is this a CUDA problem?",
    "每次到 build_wheel 这一步电脑就崩了，桌面会话直接被关掉；编译过程中显存一点都没涨。",
    # NVIDIA/TransformerEngine#1249 (set issue-24-s72): an install that dies with no error of its own
    "TransformerEngine install fails with no clear cause on WSL. What is killing the build?",
    # NVIDIA/TransformerEngine#538 (set issue-24-s74): "an zhuang ... de shi hou bao OOM" - the install step
    "安装 TransformerEngine 的时候报 OOM 挂掉了（还没开始训练，就是装包这一步）。",
])
def test_a_failure_while_a_package_builds_is_host_ram_of_the_compile_jobs(text, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.phase"] == "package-build"
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "limit-build-jobs"
    assert {"reduce-micro-batch", "expandable-segments"} <= {a.id for a in diag.avoid}


def test_building_the_model_is_no_package_build(kb):
    sit = _said("It OOMs while building the model, before the first step.", kb)
    assert sit.phase is None or sit.phase.value != "package-build"


@pytest.mark.parametrize("text", [
    # ByteDance-Seed/VeOmni#159 (set issue-24-s70): a count of GPUs said in words
    "单卡训练的时候是可以正常训练的，相同参数的情况下多卡出现了OOM，单卡训练时有20GB的显存是盈余的。",
    "Single-GPU training works fine; multi-GPU OOMs with the same settings.",
])
def test_fits_on_one_gpu_fails_on_several_is_the_multi_gpu_path(text, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.fewer_gpus_fit"]
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"
    # the other way round is a run that needs more GPUs, not a path that misbehaves
    assert not _said("One GPU runs out of memory; with multiple GPUs it works.", kb).fewer_gpus_fit


def test_dataparallel_in_the_log_is_a_run_spread_over_every_visible_gpu(kb):
    # zai-org/GLM-4#324 (set issue-24-s70): a "single-GPU" fine-tune gathered on GPU 0 of two A40s
    log = ["site-packages/torch/nn/parallel/_functions.py:68: UserWarning: Was asked to gather along dimension 0, but "
           "all input tensors were scalars; will instead unsqueeze and return a vector.",
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 108.00 MiB. GPU 0 has a total capacity of "
           "44.35 GiB of which 20.56 MiB is free."]
    _, _, diag = pipeline.run(pipeline.Inputs(question="单卡微调，另一张卡也被用上了，然后 OOM。", log=log), kb)
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"


@pytest.mark.parametrize("text", [
    # NVIDIA-NeMo/Megatron-Bridge#5291 (set issue-24-s70): an OOM named to say there was none, a scheduler's kill
    "训练跑完了，但之后整个作业就卡住不退出，一直挂到 Slurm 的 time limit 才被杀掉。没有看到 OOM 报错。",
    "The job hangs after the final eval until Slurm's time limit kills it. No OOM error was printed.",
])
def test_a_hang_killed_at_the_time_limit_with_no_oom_is_no_memory_failure(text, kb):
    sit = _said(text, kb)
    assert not sit.oom_said and (sit.process is None or sit.process.value != "host")


def test_a_variable_added_to_see_more_states_no_setting(kb):
    # THUDM/slime#1305: "加了 NCCL_DEBUG=INFO 也看不出什么" is a look, not a setting whose effect is in question
    assert not _said("Cuda failure 999，没看到 OOM，加了 NCCL_DEBUG=INFO 也看不出什么。", kb).setting_stated
    assert _said("加了 NCCL_SHM_DISABLE=1 以后报错就没了。", kb).setting_stated


@pytest.mark.parametrize("text", [
    # pytorch/pytorch#49481 and zai-org/ChatGLM-6B#789 (set issue-24-s70): the job's own ranks on GPU 0
    "nvidia-smi 看到 GPU 0 上除了自己的训练进程，还挂着另外 7 个进程，每个 871MiB。",
    "Multi-GPU training: there are 3 extra processes on GPU 0, each about 800 MiB, and GPU 0 runs out of memory.",
])
def test_the_jobs_own_processes_on_gpu_0_are_contexts_of_other_ranks(text, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.device_zero_crowded"] and diag.causes[0].id == "foreign-process"
    assert "kill-stale-processes" in {a.id for a in diag.avoid}
    assert diag.fixes[0].id == "confirm-setting-applied"


def test_restoring_the_optimizer_state_that_peaks_on_one_gpu_is_the_load(kb):
    # huggingface/accelerate#296 (set issue-24-s70): no OOM word, the peak comes with optimizer.load_state_dict
    text = ("When I load optimizer state with optimizer.load_state_dict on resume, 66GB is used on the first GPU and "
            "20 on others. With 8 processes the code crashes. It does not happen if I don't load the optimizer state.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.phase"] == "checkpoint-load"
    assert diag.causes[0].id == "checkpoint-load" and diag.fixes[0].id == "memory-efficient-optimizer-load"


def test_an_oom_device_far_smaller_than_the_named_gpu_is_another_device(kb):
    # zai-org/VisualGLM-6B#57 (set issue-24-s71): an 80 GB card named, a 3.82 GiB device in the message
    log = ["torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 4; 3.82 GiB total "
           "capacity; 2.94 GiB already allocated; 6.62 MiB free; 3.06 GiB reserved in total by PyTorch)"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question="我显卡的显存明明是80GB，为什么却提示只有很少？", log=log,
                                                 gpu="80GB"), kb)
    assert flat["situation.capacity_mismatch"]
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"
    assert {"expandable-segments", "add-gpus"} <= {a.id for a in diag.avoid}
    # the card the message names is the one the user named: nothing to reconcile
    same = log[0].replace("3.82 GiB total", "79.11 GiB total")
    _, flat, _ = pipeline.run(pipeline.Inputs(question="OOM on my 80GB card", log=[same], gpu="80GB"), kb)
    assert not flat["situation.capacity_mismatch"]


def test_building_flash_attention_from_source_is_a_package_build(kb):
    # NVIDIA/TransformerEngine#346 (set issue-24-s71)
    sit = _said("我从源码装 TransformerEngine，结果安装过程在编译 flash-attention 的时候报内存不足，进程直接挂掉。", kb)
    assert sit.phase is not None and sit.phase.value == "package-build"


def test_a_colocated_failure_on_long_samples_is_the_trainers_not_the_engines_share(kb):
    # the dev case capacity-long-context-64k-no-cp: the engine's share is the same for every sample
    q = parse_question("PPO on a 4B dense model, colocated, full recompute, max length 65536. It OOMs on long "
                       "samples, and dynamic batching does not help.", kb)
    assert "larger-input-fails" in q.topics


def test_loading_pretrained_weights_reads_no_optimizer_state(kb):
    # NVIDIA-NeMo/Automodel#2350 (set issue-24-s71): a fine-tune's start, not a resume
    text = ("Fine-tuning from a Hugging Face checkpoint that is FP8 (dequantize=True) with force_hf on: it OOMs while "
            "loading the checkpoint, before any training step, on every rank.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert diag.causes[0].id == "checkpoint-load" and diag.fixes[0].id == "convert-sharded"
    # restoring a run's own optimizer state is the resume case
    resume = "Resuming from my checkpoint OOMs while loading the optimizer state, before the first step."
    _, _, diag = pipeline.run(pipeline.Inputs(question=resume), kb)
    assert diag.fixes[0].id == "memory-efficient-optimizer-load"


def test_an_oom_named_as_what_a_setting_prevents_is_no_oom(kb):
    # vllm-project/vllm#42609 (set issue-24-s71): the crash is a CUDA error, the OOM only why the setting is there
    text = ("With expandable_segments:True, DP=2 TP=2 crashes with custom_all_reduce 'invalid argument'. We set "
            "expandable_segments globally to avoid fragmentation OOMs.")
    log = ["Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:455 'invalid argument'"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text, log=log), kb)
    assert not flat["situation.oom_said"] and "cuda-error-message-not-oom" in flat["log.signatures"]
    assert diag.causes[0].id == "not-an-oom"


def test_a_family_named_with_another_size_is_not_that_preset(kb):
    # pytorch/torchtitan#1789 (set issue-24-s72): "DeepSeek-V3-16B" is a 16B model, not the 671B preset, even where a
    # folder path names the family ("models/deepseek_v3/train_configs") without a size
    question = ("With DeepSeek-V3-16B (torchtitan/models/deepseek_v3/train_configs/deepseek_v3_16b.toml) we run into "
                "OOM on 8 x H100 80GB.")
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat.get("config.model_name") != "deepseek-v3"


def test_an_oom_while_the_engine_reserves_its_kv_cache_is_the_engines_share(kb):
    # TRL GRPO with a colocated vLLM (set issue-24-s72): the traceback ends in the engine's KV-cache initialisation,
    # which outranks the user's "loading the model": the engine claims its share at start-up
    log = [
        'File "/opt/trl/trainer/grpo_trainer.py", line 421, in __init__',
        "    self.llm = LLM(",
        'File "/opt/vllm/engine/llm_engine.py", line 276, in __init__',
        "    self._initialize_kv_caches()",
        'File "/opt/vllm/engine/llm_engine.py", line 416, in _initialize_kv_caches',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 780.00 MiB. GPU 3 has a total capacity of "
        "23.68 GiB of which 698.94 MiB is free.",
    ]
    question = "用 TRL 的 GRPO 训练，use_vllm 同卡，加载这个 7b 模型的时候就 OOM 了。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["situation.phase"] == "rl-rollout"
    assert diag.fixes[0].id == "shrink-colocated-engine"


def test_memory_that_rises_after_every_micro_batch_grows(kb):
    # Fast-LLM PR #486 (set issue-24-s72): ~164 MiB more after every micro-batch, never given back until the step ends
    question = ("Watching allocated memory per micro-batch, it goes up by roughly 164 MiB after every micro-batch and "
                "never comes back down until the step ends; we OOM once depth_first_micro_batches >= 128.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.trend"] == "grows" and diag.causes[0].id == "memory-growth"


def test_graphs_the_user_measured_as_large_are_the_graph_memory(kb):
    # NVIDIA/Megatron-LM PR #6618 (set issue-24-s72): the memory report shows the CUDA graphs alone above 20 GB
    question = ("CUDA graphs on: the memory report shows the CUDA graphs alone taking more than 20 GB per GPU. "
                "Why are the graphs this big?")
    _, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert diag.causes[0].id == "cuda-graph-memory"
    assert diag.fixes[0].id in {"narrow-cuda-graph-scope", "disable-cuda-graphs"}


def test_an_oom_at_save_pretrained_is_the_save(kb):
    # pytorch/pytorch#111900 (set issue-24-s72): a LoRA run that trained fine OOMs at model.save_pretrained
    question = ("After training 34B-codellama2 with LoRA and FSDP (the training went on well), I got an OOM error when "
                "model.save_pretrained.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.phase"] == "checkpoint-save" and diag.fixes[0].id == "checkpoint-save-memory"


def test_rl_keys_in_the_launch_command_size_the_logprob_pass(kb):
    # verl-project/verl#2450 (set issue-24-s72): the question names no key; the pasted command sets a log-prob
    # micro-batch of 20 over 1k + 2k tokens: 20 x 3,072 x 151,936 x 2 B = 18.7 GB of logits before the FP32 upcast
    log = ["data.max_prompt_length=1024 \\", "data.max_response_length=2048 \\",
           "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=20 \\", "trainer.n_gpus_per_node=8"]
    question = "Qwen/Qwen2.5-VL-3B-Instruct 用 lora 跑 grpo 时会出现 OOM，算力：8*a100(80g)。"
    facts, _, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert facts.question.rl_batch == {"logprob_micro_batch": 20, "prompt_length": 1024, "response_length": 2048}
    assert diag.causes[0].id == "logits-loss-memory" and diag.fixes[0].id == "reduce-micro-batch"


@pytest.mark.parametrize("text", [
    # OpenRLHF/OpenRLHF#901 (set issue-24-s72): a batch named loosely in a clause that says it did nothing
    "OpenRLHF 做 GRPO，一直 OOM。改 batch size 也解决不了。",
    "OpenRLHF GRPO keeps running out of memory. Changing the batch size didn't help.",
])
def test_a_batch_size_said_to_change_nothing_is_the_micro_batch(text, kb):
    _, flat, _ = pipeline.run(pipeline.Inputs(question=text), kb)
    assert "reduce-micro-batch" in flat["situation.no_effect"]


def test_changing_the_global_batch_is_not_the_micro_batch(kb):
    question = "Lowering the global batch size didn't help, it still OOMs."
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "reduce-micro-batch" not in (flat.get("situation.no_effect") or [])


def test_host_memory_said_against_a_gpu_oom_is_the_host(kb):
    # verl-project/verl#4120: "the issue is a system RAM OOM, not a GPU VRAM OOM ... could this be a memory leak?"
    question = ("Training a 7B model with GRPO. The issue is a system RAM OOM, not a GPU VRAM OOM. "
                "Could this be a memory leak issue?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.process"] == "host" and diag.fixes[0].id == "track-memory-per-step"


def test_a_whole_model_copied_on_every_gpu_is_sharded_not_batched(kb):
    # hiyouga/LLaMA-Factory#2379 (set issue-24-s73): Mixtral-8x7B LoRA under accelerate MULTI_GPU (DDP) keeps the
    # whole FP16 model (~93 GB) on each 80 GB A800: only sharding or splitting the weights helps
    question = ("Mixtral-8x7B 单机8卡 8xA800，用 accelerate launch 跑 LLaMA-Factory 的 sft，finetuning_type lora，"
                "per_device_train_batch_size 2，accelerate 配置是 MULTI_GPU、num_processes 8，出现了 OOM。")
    _, _, diag = pipeline.run(pipeline.Inputs(question=question, overrides=["finetuning_type=lora"]), kb)
    assert diag.causes[0].id == "capacity-model-state" and diag.fixes[0].id == "megatron-fsdp"
    assert {"reduce-micro-batch", "add-gpus"} <= {a.id for a in diag.avoid}


def test_the_program_line_of_a_pasted_command_names_the_framework(kb):
    # modelscope/ms-swift#2715 (set issue-24-s73): the question names no framework; the pasted command is `swift sft`
    log = ["CUDA_VISIBLE_DEVICES=0,1 \\", "swift sft \\", "    --model /models/Qwen2.5-14B-Instruct \\",
           "    --max_length 1024"]
    _, flat, _ = pipeline.run(pipeline.Inputs(question="双4090微调qwen2.5-14B成功，多机多卡就 CUDA out of memory。",
                                              log=log, overrides=["train_type=lora"]), kb)
    assert flat["situation.framework"] == "ms-swift" and flat["config.peft"] == "lora"


def test_a_flag_of_another_tool_names_no_framework(kb):
    # vime (set issue-24-s56): "--actor-num-gpus-per-node" reads like OpenRLHF's key, but the program is train.py
    log = ["python train.py \\", "  --train-backend megatron \\", "  --actor-num-gpus-per-node 4 \\",
           "  --rollout-num-gpus 4"]
    _, flat, _ = pipeline.run(pipeline.Inputs(question="Trainer rank 0 sits 10 GiB above the others.", log=log), kb)
    assert flat.get("situation.framework") != "openrlhf"


def test_a_cards_memory_is_the_gpus_not_the_hosts(kb):
    # modelscope/ms-swift#3405 (set issue-24-s73): "di yi zhang ka nei cun bu gou" - the first card's memory ran out
    _, flat, _ = pipeline.run(pipeline.Inputs(question="4090*4，第一张卡内存不够就直接报OOM了。"), kb)
    assert flat.get("situation.process") != "host"
    _, flat, _ = pipeline.run(pipeline.Inputs(question="训练时内存不够，被系统 kill 了。"), kb)
    assert flat["situation.process"] == "host"


def test_muon_is_never_told_to_switch_to_megatron_fsdp(kb):
    # NVIDIA/Megatron-LM#4691 (set issue-24-s73): Megatron-LM asserts emerging optimizers run without FSDP; the
    # layer-wise distributed optimizer is the sharding Muon has
    question = ("When training GLM5 with 6 nodes + Muon optimizer + LoRA in Megatron-LM, it will OOM. "
                "Is there a way to offload the optimizer states of Muon, or what else should I do?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["config.optimizer"] == "muon"
    assert "megatron-fsdp" not in [f.id for f in diag.fixes] and "megatron-fsdp" in [a.id for a in diag.avoid]


def test_a_request_the_size_of_the_named_familys_logits_is_the_logits(kb):
    # baichuan-inc/Baichuan2#370 (set issue-24-s73): no preset knows Baichuan2-13B, but its family's vocabulary
    # (125,696) makes 1.92 GiB = 16 x 512 tokens x 125,696 x 2 B - the logits of the micro-batch
    log = ["torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.92 GiB (GPU 0; 23.70 GiB total "
           "capacity; 16.28 GiB already allocated; 1.74 GiB free; 20.85 GiB reserved in total by PyTorch)"]
    question = "Baichuan2-13B-Chat LoRA on 3090s runs out of memory."
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question, log=log,
                                              overrides=["train.micro_batch_size=16", "model.seq_length=512"]), kb)
    assert flat["situation.failed"] == "logits"


def test_a_node_named_beside_memory_is_not_host_memory(kb):
    # EleutherAI/gpt-neox#1123 (set issue-24-s73): "on a single node, and the memory stays flat" compares layouts
    _, flat, _ = pipeline.run(pipeline.Inputs(question="I tested on a single node, and the memory generally stays "
                                                        "flat as I increase gradient_accumulation_steps."), kb)
    assert flat.get("situation.process") != "host"


def test_a_worker_dead_of_sigbus_is_shared_memory_not_a_kill(kb):
    # deepspeedai/DeepSpeed#4002 (set issue-24-s73): the launcher's only line; Docker's 64 MB /dev/shm
    log = ["[launch.py:315:sigkill_handler] ['/usr/bin/python', '-u', 'main.py', '--local_rank=3'] exits with "
           "return code = -7"]
    _, _, diag = pipeline.run(pipeline.Inputs(question="DeepSpeed-Chat step1 in docker on 4 GPUs just exits.", log=log),
                              kb)
    assert diag.causes[0].id == "not-an-oom" and "container-shared-memory-limit" in diag.causes[0].rules


def test_a_colocated_trainer_whose_state_fills_the_gpus_offloads_before_shrinking_the_engine(kb):
    # PeterGriffinJin/Search-R1#80 (set issue-24-s73): 14B full GRPO on 4x A800 80GB with verl's colocated vLLM:
    # 14B x 18 B / 4 = 63 GB per GPU before the engine's weights and KV cache
    question = ("Training a qwen-14b model using GRPO with verl on 4 A800-SXM4-80GB cards: even with "
                "data.train_batch_size=1 I still get an out of memory error.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.process"] == "colocated-engine"
    assert diag.causes[0].id == "capacity-model-state" and diag.fixes[0].id == "offload-trainer-states"


def test_only_the_library_version_moved_is_the_stack_in_chinese(kb):
    # NVIDIA/apex#475 (set issue-24-s73): "huan dao apex master ... pei zhi mei dong, zhi shi apex ban ben bian le"
    question = "用 apex 的 commit 4a8c4ac 时能跑；换到 apex master 以后就 CUDA OOM。配置没动，只是 apex 版本变了。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.changed"] == ["stack"] and flat["situation.worked_before"]
    assert diag.causes[0].id == "version-regression"


@pytest.mark.parametrize("text", [
    # PaddlePaddle/PaddleNLP#11031 (set issue-24-s74): the expert-load heat map drifts out of balance, then OOM
    "DeepseekV3 结构的 MoE 模型，PP4 EP8，64 专家，热启后看专家访问量热力图，"
    "均衡性越来越差，然后很快就因为 OOM 终止了。",
    "MoE run with EP8: the expert load imbalance grows over training under the default aux loss, then it OOMs.",
])
def test_expert_load_drifting_out_of_balance_is_routing_not_stages(text, kb):
    _, _, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert diag.causes[0].id == "moe-routing-imbalance" and diag.fixes[0].id == "moe-token-drop"


def test_micro_batch_one_and_full_recompute_leave_the_model_state(kb):
    # pytorch/torchtitan#620 (set issue-24-s65): Llama 3 8B OOMs at batch 1 with full activation checkpointing:
    # activations are at their floor; TorchTitan already shards with FSDP2, so the optimizer goes to the host
    question = ("TorchTitan Llama3-8B: I still get the same OOM with batch_size = 1 and activation checkpointing "
                "mode = 'full'. Is there a way to offload training memory to DRAM?")
    overrides = ["training.batch_size=1", "activation_checkpoint.mode=full"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, overrides=overrides), kb)
    assert flat["situation.trainer"] == "dtensor"
    assert diag.causes[0].id == "capacity-model-state" and "activations-at-their-floor" in diag.causes[0].rules
    assert diag.fixes[0].id == "optimizer-cpu-offload"
    assert {"reduce-micro-batch", "full-recompute"} <= {a.id for a in diag.avoid}
    # a long sequence keeps activations in play at batch 1: the rule stays silent
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question + " Sequence length 64k.", overrides=overrides), kb)
    assert flat["config.seq_length"] == 65536
    assert "activations-at-their-floor" not in {r for c in diag.causes for r in c.rules}


@pytest.mark.parametrize("question", [
    # Code-LMs#21 (set issue-24-s65 style): a 2.7B model on one GPU at batch 1 with full recompute
    "单卡训练 2.7B 的模型，micro batch size 1，已经开了全量重计算，还是 CUDA out of memory。",
    "Training a 2.7B model on a single GPU with micro batch size 1 and full recompute still runs out of memory.",
])
def test_one_gpu_has_no_group_to_shard_over(question, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["config.world_size"] == 1
    assert diag.causes[0].id == "capacity-model-state" and diag.fixes[0].id == "optimizer-cpu-offload"
    assert "megatron-fsdp" in {a.id for a in diag.avoid}


@pytest.mark.parametrize("question", [
    # huggingface/peft#1972 (a development case): the guide's ZeRO-3 is in the command, the load log shows no sharding
    "Following the PEFT QLoRA + DeepSpeed ZeRO3 guide for Llama 3.1 405B, but ZeRO-3 doesn't seem to be enabled: "
    "each GPU loads the whole model and runs out of memory.",
    "按 PEFT 的 QLoRA + DeepSpeed ZeRO3 教程微调 Llama 3.1 405B，但 ZeRO-3 好像没开，"
    "每张卡都加载了完整模型，然后显存不足。",
])
def test_a_setting_the_run_does_not_seem_to_have_is_confirmed_first(question, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.not_applied_said"]
    assert diag.fixes[0].id == "confirm-setting-applied"


def test_a_library_put_back_to_the_version_that_fit_is_the_stack(kb):
    # tatsu-lab/stanford_alpaca#278 (set issue-24-s75): transformers 4.28.1 -> 4.31.dev0 and back; the run's memory
    # seen "through wandb" names no pipeline stage
    question = ("A month ago I trained alpaca on 4 A100 80G with per_device_train_batch_size=4 and "
                "transformers==4.28.1. Today, with the same hardware and the same code, it OOMs unless "
                "per_device_train_batch_size=1. "
                "Through wandb I found the transformers version is 4.31.dev0. When I change transformers back to "
                "4.28.1, I can train with batch size 4 again.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "pipeline-imbalance" not in flat["question.topics"]
    assert flat["situation.changed"] == ["stack"] and diag.causes[0].id == "version-regression"


def test_the_hf_trainer_named_by_its_classes_keeps_its_eval_outputs(kb):
    # huggingface/transformers#13597 (set issue-24-s75): Seq2SeqTrainer fits training, OOMs in evaluation
    question = ("I fine-tune t5-base with Seq2SeqTrainer on an A100 40GB. Training fits, but evaluation with "
                "compute_metrics runs out of CUDA memory even at eval batch size 4.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.trainer"] == "hf" and flat["situation.phase"] == "eval"
    assert "hf-trainer-eval-keeps-outputs" in {r for c in diag.causes for r in c.rules}


def test_a_build_that_eats_the_nodes_ram_while_it_hangs_is_the_build_jobs(kb):
    # NVIDIA/TransformerEngine#1996 (set issue-24-s75): ninja stalls at [11/45] while host RAM climbs to the limit
    question = ("在 GB200 节点上从源码安装 TransformerEngine，ninja 编译到 [11/45] 就卡住不动。"
                "设置了 NVTE_CUDA_ARCHS=100 还是一样：我手动看了内存，一直在涨，直到节点内存被吃光。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.phase"] == "package-build" and flat["situation.process"] == "host"
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "limit-build-jobs"


@pytest.mark.parametrize("question, phase", [
    # shuxueslpi/chatGLM-6B-QLoRA (set issue-24-s75): "4bit/8bit jia zai mo xing" is how the weights are held
    ("我用 peft 做 QLoRA 微调 chatglm2-6b（4bit/8bit 加载模型），batchsize=4 就占用 22G 显存，"
     "为什么比 1 代高这么多？", None),
    ("QLoRA on chatglm2-6b (load the model in 4-bit) uses 22G at batch size 4, twice the first generation.", None),
    # transformer-lm#21 (set issue-24-s75): resuming from a checkpoint saved earlier loads it, the save is over
    ("多卡 resume：从之前保存的 checkpoint 继续训练，一启动就 CUDA out of memory，堆栈停在 load_model() 里的 "
     "optimizer.load_state_dict(torch.load(optimizer_path))。", "checkpoint-load"),
])
def test_how_a_model_or_checkpoint_was_stored_is_no_phase_it_failed_in(question, phase, kb):
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.phase"] == phase


def test_one_process_started_for_several_gpus_never_got_the_gpu_count(kb):
    # Lightning-AI/lit-gpt#506 (set issue-24-s75): devices=8, the banner says one process, GPU 0 holds 70B
    question = "Fine-tuning Llama-2-70b with lit-gpt LoRA on 8 A100 (80G), devices set to 8, but it runs into OOM."
    log = ["Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/1",
           "All distributed processes registered. Starting with 1 processes",
           "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.60 GiB (GPU 0; 79.15 GiB total "
           "capacity; 78.60 GiB already allocated; 555.25 MiB free; 78.61 GiB reserved in total by PyTorch)"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["situation.one_process"] and flat["config.world_size"] == 8
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"
    # one GPU, one process: nothing was lost
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question.replace("8 A100", "1 A100").replace(
        ", devices set to 8", ""), log=log), kb)
    assert "one-process-for-several-gpus" not in {r for c in diag.causes for r in c.rules}


@pytest.mark.parametrize("question", [
    # PaddlePaddle/PaddleNLP#1927 (set issue-24-s75): create_pretraining_data.py keeps every instance in host RAM
    "用 create_pretraining_data.py 处理数据内存溢出，执行后内存不断升高，最后超过 16g 环境崩溃。",
    "Running BERT's create_pretraining_data.py, host RAM keeps rising until the 16 GB machine is killed.",
])
def test_building_pretraining_data_offline_is_preprocessing(question, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.phase"] == "data-preprocess"
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "shard-preprocessing"


def test_a_chinese_shells_killed_is_a_host_kill(kb):
    # QwenLM/Qwen3-VL#1938 (set issue-24-s75): decoding a 10-minute video into host RAM, "nei cun 64g ... oom",
    # and the zh_CN shell's word for Killed
    question = "通过 process_vision_info 加载视频为什么内存会 oom？内存 64g。"
    log = ["qwen-vl-utils using torchvision to read video.", "\u5df2\u6740\u6b7b"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["log.host_oom"] and flat["situation.process"] == "host"
    assert diag.causes[0].id == "host-oom"


def test_a_gpu_allocation_failure_in_the_log_outranks_nei_cun_in_words(kb):
    # PaddlePaddle/PaddleNLP#8612 (set issue-24-s76): "dan ka sft nei cun yi chu" beside Paddle's GPU allocator error
    question = "求助，chatglm2 单卡sft内存溢出。已经将batch改到最小，还能怎么办？"
    log = ["ResourceExhaustedError:", "",
           "Out of memory error on GPU 0. Cannot allocate 428.000000MB memory on GPU 0, 79.153320GB memory has been "
           "allocated and available memory is only 175.562500MB."]
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["log.oom_kind"] == "allocator" and flat["log.requested_bytes"]
    assert flat["situation.process"] is None


def test_deepspeeds_sub_group_step_is_the_optimizer_step(kb):
    # OpenBMB/MiniCPM-V#588 (set issue-24-s76): ZeRO-3 fails preparing a sub-group's fp32 gradients at 0 %
    log = ["Traceback (most recent call last):",
           '  File "deepspeed/runtime/zero/stage3.py", line 2117, in _prepare_sub_group',
           "    self._prepare_fp32_grad_for_sub_group(sub_group_id)",
           '  File "deepspeed/runtime/zero/stage3.py", line 2073, in _prepare_fp32_grad_for_sub_group',
           "    self.fp32_partitioned_groups_flat[sub_group_id].grad = single_grad_partition.to(",
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.74 GiB. GPU 0 has a total capacity of "
           "21.99 GiB of which 943.06 MiB is free. Including non-PyTorch memory, this process has 21.05 GiB memory in "
           "use. Of the allocated memory 17.98 GiB is allocated by PyTorch, and 2.59 GiB is reserved by PyTorch but "
           "unallocated. If reserved but unallocated memory is large try setting "
           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."]
    _, flat, diag = pipeline.run(pipeline.Inputs(question="Full fine-tuning on 4x 24GB GPUs OOMs at 0%.", log=log), kb)
    assert flat["situation.phase"] == "optimizer-step"
    assert diag.causes[0].id == "capacity-model-state"


def test_a_source_build_that_stalls_is_its_compile_jobs(kb):
    # NVIDIA/TransformerEngine#1077 (set issue-24-s76): pip stuck at "building wheel", never finishes
    question = ("pip install git+https://github.com/NVIDIA/TransformerEngine.git@stable gets stuck at building wheel. "
                "It never finishes. How do I get it installed?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.phase"] == "package-build"
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "limit-build-jobs"


def test_a_process_said_to_use_only_gpu_0_of_two_never_got_the_second(kb):
    # OpenRLHF/OpenRLHF#742 (set issue-24-s76): "I have 2 GPUs, but the process only uses GPU 0"
    question = "OOM running PPO with Llama 3.2 3B. I have 2 GPUs, but the process only uses GPU 0. Why?"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.one_process"] and flat["config.world_size"] == 2
    assert diag.fixes[0].id == "confirm-setting-applied"


def test_gpu_memory_outside_this_process_cache_is_another_program(kb):
    # baichuan-inc/Baichuan2#208 (set issue-24-s77): a PyTorch < 2.1 message lists no processes; its own totals leave
    # 23.69 - 4.14 - 0.01 = 19.5 GiB held outside this process's cache by a model already running on GPU 0
    question = "两张3090，GPU 0 上已经跑着一个模型，微调 Baichuan2 报 OOM，怎么办？"
    log = ["torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB (GPU 0; 23.69 GiB total "
           "capacity; 4.05 GiB already allocated; 13.00 MiB free; 4.14 GiB reserved in total by PyTorch)"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert 19.4 < flat["log.outside_cache_bytes"] / 2**30 < 19.6
    assert diag.causes[0].id == "foreign-process" and diag.fixes[0].id == "kill-stale-processes"
    assert {"reduce-micro-batch", "expandable-segments"} <= {a.id for a in diag.avoid}
    # the same card filled by this process's own cache: nothing outside it
    full = [log[0].replace("4.05 GiB already allocated", "23.05 GiB already allocated").replace(
        "4.14 GiB reserved", "23.14 GiB reserved")]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=full), kb)
    assert "gpu-held-outside-this-process-cache" not in {r for c in diag.causes for r in c.rules}


def test_weights_larger_than_every_gpu_even_sharded_need_more_gpus(kb):
    # hiyouga/LlamaFactory#9510 (set issue-24-s77): DeepSeek-R1 671B LoRA in BF16 under ZeRO-3 (ds_z3_config.json) on
    # 8x A800: the weights split evenly over all eight GPUs are still more than twice a GPU
    question = ("8卡 A800 80G 用 LLaMA-Factory 对 DeepSeek-R1-0528 做 LoRA 微调，deepspeed 用 ds_z3_config.json，"
                "加载模型时 OOM。")
    overrides = ["finetuning_type=lora", "deepspeed=examples/deepspeed/ds_z3_config.json"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, overrides=overrides), kb)
    assert flat["config.use_torch_fsdp2"] and flat["derived.model_state_floor_ratio"] > 2
    assert diag.causes[0].id == "capacity-model-state" and diag.fixes[0].id == "add-gpus"
    assert {"reduce-micro-batch", "optimizer-cpu-offload"} <= {a.id for a in diag.avoid}
    # a base loaded in 4 bits is a quarter of the BF16 floor: the bound no longer says anything
    _, _, diag = pipeline.run(pipeline.Inputs(question=question.replace("LoRA", "QLoRA"), overrides=overrides), kb)
    assert "weights-alone-exceed-every-gpu" not in {r for c in diag.causes for r in c.rules}


def test_lora_weights_a_small_share_of_the_gpu_are_not_what_filled_it(kb):
    # hiyouga/LlamaFactory#9075 (set issue-24-s77): Qwen2.5-VL-3B LoRA under ZeRO-3 on 4x H100 - its frozen weights are
    # a few percent of each GPU, so "LoRA still stores the base weights" is no reading of this OOM
    question = "训练 qwen-vl-2.5-3b 出现 oom，用的是四卡 H100，LoRA 微调，请问还有什么措施可以降显存？"
    overrides = ["finetuning_type=lora", "deepspeed=examples/deepspeed/ds_z3_offload_config.json"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, overrides=overrides), kb)
    assert flat["derived.model_state_ratio"] < 0.1
    assert "lora-frozen-base-weights" not in {r for c in diag.causes for r in c.rules}


def test_adams_code_line_above_the_error_is_the_optimizer_step(kb):
    # hiyouga/LlamaFactory#1221 (set issue-24-s77): the excerpt keeps no frame, only Adam's update line above the OOM;
    # under the HF Trainer / DeepSpeed, Megatron's precision-aware optimizer is no setting to offer
    question = "8卡V100 32G全量微调llama-7b OOM，batch size=1也OOM，用的是 deepspeed zero stage2 示例配置。"
    log = ["    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)",
           "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.14 GiB (GPU 5; 31.75 GiB total "
           "capacity; 28.28 GiB already allocated; 1.95 GiB free; 28.28 GiB reserved in total by PyTorch)"]
    overrides = ["finetuning_type=full", "per_device_train_batch_size=1", "zero_optimization.stage=2"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log, overrides=overrides), kb)
    assert flat["situation.phase"] == "optimizer-step" and flat["situation.trainer"] == "hf"
    assert diag.causes[0].id == "capacity-model-state"
    assert "precision-aware-optimizer" not in [f.id for f in diag.fixes]
    # a line above the error that is no code of the step names no phase
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question, log=["loss = 1.23", log[1]], overrides=overrides), kb)
    assert flat.get("situation.phase") != "optimizer-step"


@pytest.mark.parametrize("question", [
    # OpenLMLab/collie#98 (set issue-24-s77), as asked and in English
    "8张 V100 显卡，开启 Zero3，TP=1，PP=1，DP=8，LlamaForCausalLM.from_pretrained llama 70B 模型会出现 OOM "
    "(内存不够，不是显存不够)，物理内存 512GB。这是为什么？需要多大内存？",
    "8x V100 32GB with ZeRO-3, DP=8: from_pretrained of Llama 70B gets OOM-killed - host RAM, not GPU memory. "
    "The node has 512 GB of RAM. Why, and how much do I need?",
])
def test_host_ram_below_a_whole_copy_per_rank_is_every_rank_loading(question, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.host_ram_bytes"] == 512e9 and flat["derived.host_load_bytes"] > 1e12
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "convert-sharded"
    assert "every-rank-loads-the-whole-model-into-host-ram" in diag.causes[0].rules
    # the machine's RAM is no GPU figure: beside it, the figure the GPU failed at is still read
    beside = parse_question("Memory peaks at 75 GB right before it OOMs; the node has 512 GB of RAM.", kb)
    assert beside.memory_bytes == 75e9 and beside.figure("host-ram") == 512e9
    # two terabytes hold eight copies: the rule says nothing
    _, _, diag = pipeline.run(pipeline.Inputs(question=question.replace("512", "2048")), kb)
    assert "every-rank-loads-the-whole-model-into-host-ram" not in {r for c in diag.causes for r in c.rules}


def test_a_hang_up_the_launcher_reports_is_no_memory_kill(kb):
    # NVIDIA/Megatron-LM#228 (set issue-24-s77): torchrun got SIGHUP (the terminal closed), not the OOM killer's SIGKILL
    question = "Megatron-LM 训练 GPT，程序跑着跑着就退出了，是不是内存/显存不够被杀了？该怎么排查？"
    log = ["bash 0704_gpt_train.sh", "...",
           "WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, shutting down workers"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert "launcher-hangup-signal" in flat["log.signatures"] and flat["log.crash"]
    assert diag.causes[0].id == "not-an-oom" and "host-oom" not in [c.id for c in diag.causes]
    # a SIGKILL is what a kill for memory sends: no hang-up there
    killed = [*log[:2], log[2].replace("1 death", "9 death")]
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question, log=killed), kb)
    assert "launcher-hangup-signal" not in flat["log.signatures"]


def test_a_bare_exception_line_ends_a_traceback_as_a_crash(kb):
    # NVIDIA/NeMo#8359 (set issue-24-s77): Transformer Engine raises a plain Exception for an attention layout it does
    # not support; "memory layout" in it is no memory failure
    log = ["Traceback (most recent call last):",
           '  File "/workspace/nemo/examples/tuning/megatron_gpt_peft_tuning.py", line 77, in main',
           "    trainer.fit(model)",
           "Exception: The provided qkv memory layout is not supported!"]
    question = "Nemotron LoRA finetune error: 'The provided qkv memory layout is not supported'. Is it GPU memory?"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["log.crash"] and not flat["log.has_memory_failure"]
    assert diag.causes[0].id == "not-an-oom"


def test_an_image_pixel_cap_of_thousands_of_tokens_is_the_sequence(kb):
    # hiyouga/LlamaFactory#9075 (set issue-24-s77): image_max_pixels 67108864 is about 85,600 tokens an image
    question = ("训练 qwen-vl-2.5-3b 出现 oom，图片质量比较高，调低 cutoff_len 又会报 shape mismatch，四卡 H100，"
                "还有什么措施可以降显存？")
    overrides = ["finetuning_type=lora", "cutoff_len=24576", "image_max_pixels=67108864",
                 "per_device_train_batch_size=1"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, overrides=overrides), kb)
    assert flat["situation.image_max_pixels"] == 67108864 and 85000 < flat["situation.image_tokens"] < 86000
    assert diag.causes[0].id == "capacity-activations" and diag.fixes[0].id == "cap-vision-tokens"
    # LLaMA-Factory's default cap is a few hundred tokens an image: no reading of it
    _, _, diag = pipeline.run(pipeline.Inputs(question=question, overrides=[*overrides[:2], "image_max_pixels=589824"]),
                              kb)
    assert "image-tokens-over-the-sequence-budget" not in {r for c in diag.causes for r in c.rules}
    # the processor's own way of writing it is a product
    _, flat, _ = pipeline.run(pipeline.Inputs(question="Qwen2-VL OOM with max_pixels=1280*28*28 in the processor"), kb)
    assert flat["situation.image_max_pixels"] == 1280 * 28 * 28


def test_one_request_of_a_quarter_gpu_in_a_vision_run_is_a_vision_sample(kb):
    # modelscope/ms-swift#2753 (set issue-24-s77): Qwen2-VL-7B LoRA asks 34.83 GiB of a 44.55 GiB A6000
    question = ("用 ms-swift 做 qwen2-vl-7b-instruct 的 LoRA 微调，4 张 A6000 48G，已经设了 MAX_PIXELS=602112，"
                "一次要申请 34.83 GiB。")
    log = ["[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 34.83 GiB. GPU 0 has a total "
           "capacity of 44.55 GiB of which 22.25 GiB is free. Including non-PyTorch memory, this process has 22.29 GiB "
           "memory in use. Of the allocated memory 21.66 GiB is allocated by PyTorch, and 128.77 MiB is reserved by "
           "PyTorch but unallocated."]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert "vision-language" in flat["question.topics"] and flat["situation.image_max_pixels"] == 602112
    assert diag.causes[0].id == "capacity-activations" and diag.fixes[0].id == "cap-vision-tokens"
    assert "expandable-segments" in {a.id for a in diag.avoid}
    # the same request in a text-only run says nothing of vision tokens
    _, _, diag = pipeline.run(pipeline.Inputs(question="LoRA 微调 Qwen2-7B 一次要申请 34.83 GiB。", log=log), kb)
    assert "one-request-is-a-vision-sample" not in {r for c in diag.causes for r in c.rules}


@pytest.mark.parametrize("question", [
    # ChenxinAn-fdu/POLARIS#33 (set issue-24-s77): the change is one sentence, "this solved it" the next
    "复现 POLARIS 的 GRPO 训练（verl）时显存不足。改动后是 ulysses_sequence_parallel_size=2、"
    "ppo_max_token_len_per_gpu=20480。这样确实解决了显存不够的问题。为什么这样就够了？",
    "verl GRPO ran out of GPU memory. I changed ulysses_sequence_parallel_size=2 and ppo_max_token_len_per_gpu=20480. "
    "That fixed the OOM. Why is that enough?",
])
def test_this_fixed_it_refers_to_the_change_named_before(question, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert {"increase-cp", "reduce-micro-batch"} <= set(flat["situation.worked_with"])
    assert diag.fixes[0].id == "increase-cp"
    # a sentence of its own that says nothing fixed it names nothing that worked
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question.replace("确实解决了显存不够的问题", "还是显存不够")
                                              .replace("That fixed the OOM", "It still OOMs")), kb)
    assert not flat["situation.worked_with"]


def test_the_same_data_and_parameters_on_older_versions_ran_before(kb):
    # verl-project/verl#1232 (set issue-24-s77): the new stack OOMs after 50 steps, the old one ran the same settings
    question = ("When training with verl using vLLM 0.8.2, I encounter a CUDA OOM error after 50-60 steps. The same "
                "data and parameters run successfully for many steps without issues using vLLM 0.6.3 and an earlier "
                "verl commit. Why does the new stack run out of memory?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.worked_before"] and "stack" in flat["situation.changed"]
    assert diag.causes[0].id == "version-regression"


def test_memory_held_outside_on_a_card_the_user_did_not_mean_checks_the_index_first(kb):
    # hiyouga/LlamaFactory#1495 (set issue-24-s78): CUDA_VISIBLE_DEVICES=2 chose a busy 3090 on an A800 machine
    question = "服务器上有两张A800，另外三张3090。我用 CUDA_VISIBLE_DEVICES=2 训练，总是显存不够，怎样指定用哪张卡？"
    log = ["torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 54.00 MiB (GPU 0; 23.70 GiB total "
           "capacity; 6.16 GiB already allocated; 31.56 MiB free; 6.26 GiB reserved in total by PyTorch)"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log, gpu="A800"), kb)
    assert flat["situation.capacity_mismatch"] and diag.causes[0].id == "foreign-process"
    assert diag.fixes[0].id == "confirm-setting-applied"
    # the card the user names: another program on it is what to free first
    _, _, diag = pipeline.run(pipeline.Inputs(question=question, log=log, gpu="RTX 3090"), kb)
    assert diag.causes[0].id == "foreign-process" and diag.fixes[0].id == "kill-stale-processes"


def test_the_trainers_dataparallel_line_says_one_process_drives_every_gpu(kb):
    # hiyouga/LlamaFactory#4213 (set issue-24-s78): a ZeRO-2 config under a plain `python` launch never ran
    question = "多卡 3090 用 zero2 训练 OOM，单卡却可以，为什么？"
    log = ["[INFO|trainer.py:2081] >>   Instantaneous batch size per device = 1",
           "[INFO|trainer.py:2083] >>   Training with DataParallel so batch size has been adjusted to: 4"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log, overrides=["zero_optimization.stage=2"]),
                                 kb)
    assert "dataparallel-gather" in flat["log.signatures"]
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"


def test_a_vision_run_with_no_pixel_cap_bounds_its_inputs_first(kb):
    # modelscope/ms-swift#2529 (set issue-24-s78): Qwen2-VL-7B on A800, full-resolution photos, no MAX_PIXELS
    question = "8 张 A800 用 swift 微调 qwen2vl-7B 显存不足，每条数据一张图片。加卡做多机多卡可以解决吗？"
    overrides = ["model_type=qwen2-vl-7b-instruct", "sft_type=lora", "deepspeed=default-zero3"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, overrides=overrides), kb)
    assert "vision-language" in flat["question.topics"] and diag.fixes[0].id == "cap-vision-tokens"
    # with the cap set to a few hundred tokens an image, the inputs are bounded: no such reading
    capped = question.replace("每条数据一张图片", "每条数据一张图片，已设 MAX_PIXELS=602112")
    _, _, diag = pipeline.run(pipeline.Inputs(question=capped, overrides=overrides), kb)
    assert "vision-inputs-without-a-pixel-cap" not in {r for c in diag.causes for r in c.rules}


def test_one_gpu_under_accelerate_offloads_the_optimizer_before_any_split(kb):
    # FireRedTeam/FireRedTTS2#42 (set issue-24-s78): full fine-tune of a 1.7B model on one A10, OOM at the first step
    question = ("我在单卡 NVIDIA A10 (24GB) 上用 accelerate 全参微调（backbone=qwen-1.5b）。batch_size 设成 1、"
                "开了 fp16 和 gradient_checkpointing=True，还是在第一次 optimizer.step() 时 CUDA OOM。")
    log = ["accelerate launch --mixed_precision fp16 posttrain.py \\", "  --config_path ./config_finetune.json"]
    overrides = ["batch_size=1", "mixed_precision=fp16", "gradient_checkpointing=true"]
    inputs = pipeline.Inputs(question=question, log=log, overrides=overrides, gpu="single NVIDIA A10 (24GB)")
    _, flat, diag = pipeline.run(inputs, kb)
    assert flat["config.world_size"] == 1 and flat["situation.trainer"] == "hf"
    assert diag.fixes[0].id == "optimizer-cpu-offload"
    assert not {"increase-tp", "increase-pp", "precision-aware-optimizer"} & {f.id for f in diag.fixes}


def test_memory_on_a_single_gpu_is_no_gpu_count(kb):
    # huggingface/open-r1#579 (set issue-24-s77): "the memory on a single GPU" is per GPU, not one GPU
    question = ("I ran context 20k (32B) on a single node and got OOM. Under data parallelism the memory on a single "
                "GPU should not be different between multi-node and single-node.")
    assert parse_question(question, kb).num_gpus is None
    assert parse_question("Fine-tuning a 7B model on a single GPU runs out of memory.", kb).num_gpus == 1


def test_logits_held_by_the_loss_are_chunked_or_fused_before_the_batch_shrinks(kb):
    # huggingface/nanotron#259 (set issue-24-s78): a snapshot shows the loss holding about 10 GB of fp32 logits; a fused
    # or chunked loss frees them at no throughput cost, a smaller micro-batch costs throughput
    question = ("我在 nanotron 里给第一个训练 step 抓了内存快照，发现最上面 loss 那一块占了差不多 10GB，"
                "主要是 sharded_cross_entropy。loss 为什么会吃这么多显存？要怎么把这块降下来？")
    _, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert diag.causes[0].id == "logits-loss-memory"
    ids = [f.id for f in diag.fixes]
    assert ids[0] in ("te-cross-entropy-fusion", "logits-chunking")
    assert "reduce-micro-batch" not in ids or ids.index("reduce-micro-batch") > 1


def test_a_prediction_run_that_copies_a_model_larger_than_the_gpu_splits_it(kb):
    # hiyouga/LlamaFactory#4803 (set issue-24-s78): Qwen2-72B predict on 8x A100 80G, a whole copy on every card
    question = ("8卡A100 80G 在 72b 的基座 predict 1k的数据显示oom，所有的显卡同时加载整个模型参数，导致oom。"
                "请问需要设置什么参数？")
    overrides = ["model_name_or_path=Qwen/Qwen2-72B-Instruct", "do_predict=true", "finetuning_type=lora"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, overrides=overrides), kb)
    assert flat["situation.forward_only"] and flat["derived.model_weights_ratio"] > 1
    assert diag.causes[0].id == "capacity-model-state" and diag.fixes[0].id == "increase-tp"
    assert "checkpoint-load" not in [c.id for c in diag.causes]
    # a training run of the same model is told to shard its state, not to split it for inference
    _, _, diag = pipeline.run(pipeline.Inputs(question=question.replace("predict", "训练"),
                                              overrides=[o for o in overrides if "predict" not in o]), kb)
    assert "whole-model-per-rank-in-a-forward-only-run" not in {r for c in diag.causes for r in c.rules}


def test_an_oom_message_cut_after_its_first_words_is_still_a_failed_allocation(kb):
    # EleutherAI/lm-evaluation-harness#884 (set issue-24-s79): the pasted traceback ends "RuntimeError: CUDA out of
    # memory", its numbers cut; only PyTorch's caching allocator says "CUDA out of memory", so an allocation failed
    log = ["  File \"/gpt-neox/eval_tasks/eval_adapter.py\", line 461, in run_eval_harness", "...",
           "RuntimeError: CUDA out of memory", "..."]
    question = "GPT-NeoX 410M eval through lm-eval on V100 16GB runs out of memory a few seconds into the requests."
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["log.has_memory_failure"] and flat["log.oom_kind"] == "allocator"
    assert "not-an-oom" not in [c.id for c in diag.causes]


def test_an_adapter_only_asked_about_is_not_the_runs_method(kb):
    # QwenLM/Qwen3-VL#1586 (set issue-24-s79): full SFT of a 30B MoE on four H800 "reported memory errors on all four
    # cards"; "can I only do LoRA/QLoRA?" asks about LoRA, it does not say the run uses it
    question = ("请问qwen3vl-30B-A3B需要多少显存才能进行sft？我现在手上有四卡H800够吗？"
                "用 sh 脚本跑 sft 的时候四张卡都报显存的错误？所以是显存不太够吗，只能做LoRA/QLoRA？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, gpu="四卡H800"), kb)
    assert flat.get("config.peft") is None and "oom" in flat["question.topics"]
    assert diag.causes[0].id == "capacity-model-state"
    assert "lora-frozen-base-weights" not in {r for c in diag.causes for r in c.rules}
    lora = "LoRA SFT of Qwen3-30B-A3B on four H800 runs out of memory."
    _, flat, _ = pipeline.run(pipeline.Inputs(question=lora), kb)
    assert flat["config.peft"] == "lora"


def test_host_memory_seen_running_out_before_the_collectives_time_out_is_the_first_failure(kb):
    # NVIDIA/NeMo#8897 (set issue-24-s79): CPU RAM grows until it is exhausted at 74 % of the epoch, then only NCCL
    # watchdog timeouts: the rank stalled by host memory is the one that stopped first
    question = ("During training, memory is noticed increasing as time goes on, until 74% training done and no memory "
                "available, and then NCCL watchdog timeouts. 8 dataloader workers, single node; it is CPU memory, "
                "not GPU, that is exhausted.")
    log = ["[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=252347, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800190 "
           "milliseconds before timing out."]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["situation.process"] == "host" and flat["situation.trend"] == "grows"
    assert diag.causes[0].id in ("memory-growth", "host-oom") and "not-an-oom" not in [c.id for c in diag.causes]


def test_a_one_process_run_has_no_first_failing_rank_to_find(kb):
    # NVIDIA/Model-Optimizer#1681 (set issue-24-s79): torchrun --nproc_per_node 1, a bare "Exception" and a config dump
    question = ("跑 Puzzletron 示例：`torchrun --nproc_per_node 1 examples/puzzletron/main.py --config "
                "llama-3_1-8B_pruneffn_memory.yaml`，每次都挂在 calculating one block scores 这一步，"
                "Exception 里只有一大段配置打印。这是显存不够吗？")
    log = ["fails on `Puzzletron Progress 6/8: calculating one block scores`", "Exception"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["config.world_size"] == 1
    assert diag.fixes[0].id == "track-memory-per-step"


def test_fsdp_failing_to_clone_a_gathered_parameter_is_the_checkpoint_save(kb):
    # tatsu-lab/stanford_alpaca#65 (set issue-24-s79): the OOM is inside FSDP's full state-dict hook at the final save
    log = ["fully_sharded_data_parallel.py:2224: UserWarning: Failed to clone() tensor with name lm_head.weight. "
           "This may mean that this state_dict entry could point to invalid memory regions. Error: CUDA out of memory. "
           "Tried to allocate 502.00 MiB (GPU 1; 39.59 GiB total capacity; 35.54 GiB already allocated; "
           "276.19 MiB free; "
           "37.22 GiB reserved in total by PyTorch)"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question="LLaMA-7B with HF Trainer and FSDP: OOM right at the end.",
                                                 log=log), kb)
    assert flat["situation.phase"] == "checkpoint-save"
    assert diag.causes[0].id == "checkpoint-save" and diag.fixes[0].id == "checkpoint-save-memory"


def test_a_reward_server_on_the_trainers_gpus_shares_them(kb):
    # TIGER-AI-Lab/EditScore#14 (set issue-24-s79): a vLLM reward server holds 55 GB of each A800 before RL starts
    question = "我用 EditScore 当 reward 跑 RL，reward server 一启动就已经占了 55GB 以上的显存，RL 训练一起来就 OOM。"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question, gpu="8 张 A800 80G"), kb)
    assert flat["situation.process"] == "colocated-engine"


def test_one_gpu_compared_with_another_is_no_gpu_count(kb):
    # NovaSky-AI/SkyRL#1376: "one GPU sits at full utilization and another at zero" on a multi-node run
    question = "Multi-node run: one GPU sits at full utilization and another at zero for minutes, then NCCL times out."
    assert parse_question(question, kb).num_gpus is None


def test_the_checkpoint_path_of_a_pasted_launch_command_names_the_model(kb):
    # OpenGVLab/InternVL#547 (set issue-24-s79): the question says "internvl2", its launch command's
    # --model_name_or_path says 4B: 4B trained in fp16 with Adam is twice a 32 GB V100 before any frame
    question = "我正在对internvl2使用视频数据进行full finetune，显卡为单张32G V100，报错 CUDA out of memory，该怎么改？"
    log = ["torchrun internvl/train/internvl_chat_finetune.py \\",
           "  --model_name_or_path /cache/MODELS/internvl2-4B \\", "  --freeze_llm False \\", "  --fp16 True \\",
           "  --per_device_train_batch_size 1 \\",
           "  --deepspeed zero_stage2_config.json", "torch.cuda.OutOfMemoryError: CUDA out of memory."]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log, gpu="单张32G V100"), kb)
    assert flat["question.model_size_b"] == 4.0
    assert diag.causes[0].id == "capacity-model-state" and diag.fixes[0].id != "cap-vision-tokens"
    # a size in another setting's value is no model ("lr=4e-5", "save_steps=7b") - only a checkpoint path is
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question, overrides=["run_name=test-7b"]), kb)
    assert flat.get("question.model_size_b") is None


def test_library_updates_under_a_script_that_did_not_change_are_the_stack_moving(kb):
    # lightning-AI/lit-llama#389 (set issue-24-s79): FSDP on 4x 40 GB "used to run ... after recent library updates it
    # now OOMs. Nothing in my script changed", the reservation at the limit while allocated memory should fit
    question = ("LLaMA 7B pretraining with FSDP sharded across 4x40GB cards used to run, very close to the limit, and "
                "after recent library updates it now OOMs. Nothing in my script changed. Even when the allocated "
                "memory looks like it should fit, the reserved memory is maxing out.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, gpu="4x40GB cards"), kb)
    assert "stack" in flat["situation.changed"] and "cache" in flat["situation.components"]
    assert {c.id for c in diag.causes[:2]} == {"fragmentation", "version-regression"}


def test_a_rollout_engine_that_finds_the_gpu_taken_at_start_up_names_what_holds_it(kb):
    # volcengine/verl#7596 (set issue-24-s79): vLLM refuses to start, "Free memory on device cuda:0 (31.33/47.4 GiB) on
    # startup is less than desired GPU memory utilization"; with the trainer's param offload said to be on, that
    # offload did not run (FSDP1 with fsdp_size=1 moves nothing)
    log = ["ValueError: Free memory on device cuda:0 (31.33/47.4 GiB) on startup is less than",
           "desired GPU memory utilization (0.85, 40.29 GiB)."]
    question = "verl GRPO with FSDP and a colocated vLLM rollout: the engine will not start."
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["log.kinds"] == ["engine-share-taken"] and diag.causes[0].id == "foreign-process"
    assert diag.fixes[0].id == "offload-trainer-states" and "not-an-oom" not in [c.id for c in diag.causes]
    offloaded = question + " I turned on param_offload precisely so the actor would be on CPU when vLLM comes up."
    _, _, diag = pipeline.run(pipeline.Inputs(question=offloaded, log=log), kb)
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"


def test_the_error_a_workaround_raised_after_an_oom_is_not_the_first_failure(kb):
    # meta-llama/llama-cookbook#626 (set issue-24-s80): save_pretrained of an FSDP + LoRA 70B OOMs; the user then moved
    # the model to the CPU first and got an AssertionError, which is what they pasted
    question = ("4 张 80G 卡上 FSDP + LoRA 微调 Llama3-70B，训练能跑，"
                "但调用 model.save_pretrained 存 checkpoint 就报 CUDA out-of-memory。"
                "我试过先把模型挪到 CPU 再存，结果又报 AssertionError: Expects tensor to be on the "
                "compute device cuda:0, was on cpu。该怎么存？")
    log = ["model.save_pretrained(train_config.output_dir)", "-> CUDA out-of-memory", "...",
           "AssertionError: Expects tensor to be on the compute device cuda:0, was on cpu"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log, gpu="4x80G"), kb)
    assert flat["situation.error_from_a_try"] and flat["situation.oom_said"]
    assert diag.causes[0].id == "checkpoint-save" and "not-an-oom" not in [c.id for c in diag.causes]
    # the same error pasted as the run's own failure is still no OOM
    _, flat, diag = pipeline.run(pipeline.Inputs(question="save_pretrained crashes, why?", log=log[-1:]), kb)
    assert not flat["situation.error_from_a_try"] and diag.causes[0].id == "not-an-oom"


def test_convert_alone_is_no_checkpoint_conversion(kb):
    # volcengine/verl#7462 and NVIDIA-NeMo/RL#1604 (set issue-24-s80): "the trainers convert CriticConfig into
    # TrainingWorkerConfig" and "a lot of conversion warnings about a dtype mismatch" convert no checkpoint
    for question in ("Reading the code, the trainers convert CriticConfig into TrainingWorkerConfig; do my critic "
                     "batch settings reach the critic update at all?",
                     "gpt-oss 20B GRPO needs 2 nodes. As a side note, 120B gives a lot of conversion warnings about "
                     "a dtype mismatch."):
        _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
        assert flat.get("situation.phase") != "conversion", question
    # a converter that is named, or a checkpoint that is converted, is one (InternLM/xtuner#482, NVIDIA/NeMo#8895)
    for question in ("xtuner convert merge 出现 OOM！单卡 a100，合并的时候报显存不足。",
                     "Converting the Mixtral HF checkpoint to .nemo, the host RAM fills up and the process is killed."):
        _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
        assert flat["situation.phase"] == "conversion", question


def test_a_prediction_run_said_in_words_trains_nothing(kb):
    # NVIDIA/bionemo-framework#910: "to do prediction with the Evo2 40b 1M model ... CUDA out-of-memory"
    question = "I use the container to do prediction with the Evo2 40b model on 2*H800 and got a CUDA out-of-memory."
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.forward_only"]
    assert "optimizer-cpu-offload" not in [f.id for f in diag.fixes]


def test_a_jupyter_traceback_names_its_frames_too(kb):
    # unslothai/unsloth#465 (set issue-24-s80): a Colab traceback writes a frame as "/path/operations.py in
    # _convert_to_fp32(tensor)" and numbers its source lines; accelerate upcasting the outputs is the logits
    log = ["OutOfMemoryError                          Traceback (most recent call last)",
           "----> 1 trainer_stats = trainer.train()", "...",
           "/usr/local/lib/python3.10/dist-packages/accelerate/utils/operations.py in _convert_to_fp32(tensor)",
           "    779", "    780     def _convert_to_fp32(tensor):", "--> 781         return tensor.float()",
           "OutOfMemoryError: CUDA out of memory. Tried to allocate 9.47 GiB. GPU 0 has a total capacity of 14.75 GiB "
           "of which 3.78 GiB is free. Process 2116 has 10.95 GiB memory in use."]
    question = ("Fine-tuning unsloth/llama-3-8b-bnb-4bit on a Colab T4 with 18000 context length always runs out "
                "of memory.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["log.frames"] == ["_convert_to_fp32"] and flat["situation.phase"] == "loss"
    assert diag.causes[0].id == "logits-loss-memory"


def test_the_trainers_own_micro_batch_keys_and_a_shortfall_that_grew_are_read(kb):
    # EleutherAI/gpt-neox#785 (set issue-24-s80): "the only difference is train_micro_batch_size_per_gpu=1 ... when I
    # set zero_optimization to stage 2 or 3 it lacks more memory than with stage 1": the setting reached the run
    question = ("It raises an out of memory error when I finetune the 20B model on 8 x A40 (44G) with configs/20B.yml, "
                "the only difference is train_micro_batch_size_per_gpu=1. Why is it that when I set zero_optimization "
                "to stage 2 or 3 it lacks more memory (when it crashes) than with stage 1?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, gpu="8 x A40 (44G)"), kb)
    assert flat["config.micro_batch_size"] == 1 and flat["situation.made_worse"]
    assert "setting-not-applied" not in [c.id for c in diag.causes]
    assert "reduce-micro-batch" not in [f.id for f in diag.fixes]
    # an RL pass's own micro-batch key is not the training micro-batch
    assert parse_question("ppo_micro_batch_size_per_gpu=4 OOM", kb).layout.get("micro_batch_size") is None


def test_memory_said_to_swell_slowly_until_the_oom_grows(kb):
    # OpenRLHF/OpenRLHF#508 (set issue-24-s80): "xiancun zhanyong hui manman de zengda yizhi dao zuihou bao xiancun"
    # (memory slowly swells until the OOM)
    question = ("请问为什么 OpenRLHF 的 dpo 训练过程中显存占用会慢慢的增大一直到最后爆显存呢？"
                "把 micro batch size 设成 1 也一样。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.trend"] == "grows"
    assert diag.causes[0].id == "memory-growth" and diag.fixes[0].id == "track-memory-per-step"


def test_asking_whether_a_setting_reaches_the_run_at_all_checks_it_in_the_process(kb):
    # volcengine/verl#7462 (set issue-24-s80): "Do my critic batch settings reach the critic update at all?"
    question = ("I tune the critic with critic.ppo_micro_batch_size_per_gpu and critic.ppo_max_token_len_per_gpu. "
                "Do my critic batch settings reach the critic update at all, and what does the critic actually "
                "train with?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.not_applied_asked"] and not flat["situation.not_applied_said"]
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"


def test_why_isnt_it_taking_effect_asks_whether_the_setting_reached_the_run(kb):
    # axolotl-ai-cloud/axolotl#2183 (set issue-24-s80): the allocator setting axolotl exports is not in the
    # process; the question puts "it" between "isn't" and "taking effect"
    question = ("axolotl is supposed to enable PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True for me, but the memory "
                "profiler says it wasn't set. Why isn't it taking effect, and is the 37GB real?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.not_applied_asked"] or flat["situation.not_applied_said"]
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"
    # modelscope/ms-swift#10109 (set issue-24-s57): "offload bu shi yijing dakai le ma?" (isn't offload already on?)
    question = "打开了 offload_model，还是 OOM。offload 不是已经打开了吗？"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.not_applied_asked"]


def test_memory_seen_rising_with_several_samples_per_batch_is_the_longest_batch_first(kb):
    # hiyouga/LlamaFactory#922 (set issue-24-s65): ChatGLM2 LoRA, batch 4, OOM after hours, "GPU zhanyong yizhi zengjia"
    # (usage keeps rising); the maintainer: a long sample arrived, lower the batch size
    question = ("微调一段时间OOM。单卡（32G），chatglm2微调，微调了几个小时，OOM。"
                "用deepspeed 2卡跑，似乎GPU占用率一直增加。请问是什么原因呢？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, overrides=["per_device_train_batch_size=4"]), kb)
    assert flat["situation.trend"] == "grows" and flat["situation.trend_source"] == "words"
    assert diag.causes[0].id == "capacity-activations" and diag.fixes[0].id == "reduce-micro-batch"
    assert "track-memory-per-step" in [f.id for f in diag.fixes]  # the check that tells it from a leak follows
    # one sample per micro-batch leaves nothing to lower: the rise is measured first
    _, _, diag = pipeline.run(pipeline.Inputs(question=question, overrides=["per_device_train_batch_size=1"]), kb)
    assert diag.fixes[0].id == "track-memory-per-step"


@pytest.mark.parametrize("question", [
    # QwenLM/Qwen#887 (set issue-24-s89): "wei shenme jia dao 8 tai jiqi haishi bu xing?" (why does going up to 8
    # machines still fail?) - under ZeRO-2 more nodes shrink only the optimizer shard
    "Qwen-14B 全量微调，ds_config 采用 stage2，4096 长度 8 台机器都会 OOM。为什么加到8台机器还是不行？",
    "We went from 4 to 8 nodes and it still OOMs at 4096 tokens with ZeRO-2.",
])
def test_more_machines_that_did_not_help_are_not_proposed_again(kb, question):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "add-gpus" in flat["situation.tried"]
    assert "add-gpus" not in [f.id for f in diag.fixes]


def test_an_engine_on_its_own_gpus_is_not_colocated(kb):
    # meta-pytorch/torchforge#312 (set issue-24-s89): "Policy is vLLM with tensor_parallel_size 4 on its own GPUs"
    question = ("Policy is vLLM with tensor_parallel_size 4 on its own GPUs, and the trainer is 8 procs on one host "
                "with FSDP, seq_len 2048, local_batch_size 8. With selective activation checkpointing the trainer "
                "runs out of memory.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.process"] == "separate-engine"
    assert "shrink-colocated-engine" not in [f.id for f in diag.fixes]


def test_a_batch_that_changed_nothing_is_not_what_made_the_other_change_fit(kb):
    # espnet/espnet#5652 (set issue-24-s89): "batch_size jiang dao 2 ye yiyang; tong yang de shuju huan Branchformer
    # bianmaqi jiu bu hui OOM" (batch 2: the same; the same data with the Branchformer encoder does not OOM)
    question = ("用 ESPnet 微调 wav2vec2，一开训就 CUDA out of memory："
                "Tried to allocate 7.11 GiB (GPU 0; 23.69 GiB total capacity)。batch_size 降到 2 也一样；"
                "同样的数据换 Branchformer 编码器就不会 OOM。这是什么原因？")
    log = ["  File \"espnet2/asr/encoder/wav2vec2_encoder.py\", line 116, in forward",
           "  File \"espnet/nets/pytorch_backend/nets_utils.py\", line 168, in make_pad_mask",
           "RuntimeError: CUDA out of memory. Tried to allocate 7.11 GiB (GPU 0; 23.69 GiB total capacity)"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log, gpu="24G"), kb)
    assert "reduce-micro-batch" in flat["situation.no_effect"]
    assert not flat["situation.worked_with"]
    # one forward request of a quarter of the GPU that a smaller batch did not shrink is no model state
    assert diag.causes[0].id != "capacity-model-state"


def test_the_value_a_setting_was_changed_from_is_not_what_the_user_tried(kb):
    # baichuan-inc/Baichuan2#119 (set issue-24-s79): device_map="auto" changed to device_map="cuda:0", the load is
    # still killed - spreading the weights (convert-sharded) was left, not tried
    question = ('baichuan2-7b-base 执行 AutoModelForCausalLM.from_pretrained 加载模型时被 kill 掉，服务器内存 30g。'
                '把 device_map="auto" 改成 device_map="cuda:0" 之后也一样，'
                'Loading checkpoint shards 还是 0/2 就 Killed。')
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "convert-sharded" not in flat["situation.tried"]
    question = "把 micro_batch_size=4 改成 micro_batch_size=1 之后还是 OOM。"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "reduce-micro-batch" in flat["situation.tried"]


def test_the_eval_loops_concatenated_predictions_are_logits_not_fragmentation(kb):
    # huggingface/transformers#26702 (set issue-24-s89): trainer.evaluate() with compute_metrics dies in
    # torch_pad_and_concatenate with 7.4 GiB reserved but unallocated; the kept logits grow every evaluation step
    question = ("Mistral fine tune with SFTTrainer: trainer.evaluate() runs out of CUDA memory, but when "
                "compute_metrics is commented out I can evaluate. Why?")
    log = ["trainer_pt_utils.py in torch_pad_and_concatenate(tensor1, tensor2, padding_index)",
           "---> 88     result = tensor1.new_full(new_shape, padding_index)",
           "OutOfMemoryError: CUDA out of memory. Tried to allocate 12.94 GiB (GPU 0; 39.56 GiB total capacity; "
           "18.33 GiB already allocated; 12.29 GiB free; 25.71 GiB reserved in total by PyTorch)"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["situation.failed"] == "logits" and flat["situation.phase"] == "eval"
    assert diag.causes[0].id == "logits-loss-memory"
    assert "expandable-segments" in [a.id for a in diag.avoid]


def test_a_length_that_fails_beside_a_smaller_one_that_fits_is_the_input_size(kb):
    # NovaSky-AI/SkyThought#35 (set issue-24-s89): "context length = 16384 jiu OOM, gaicheng 8192 jiu bu hui OOM"
    question = "机器是 8*A100(80GB)，context length = 16384 就 OOM， 改成 8192 就不会 OOM。"
    facts, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "larger-input-fails" in facts.question.topics
    assert diag.causes[0].id != "capacity-model-state"  # what does not change with the input does not decide it


def test_worse_with_a_setting_than_without_says_the_setting_reached_the_run(kb):
    # NVIDIA/Megatron-LM#6338 (set issue-24-s89): "It's much worse with full recompute than without" - a setting that
    # changed the memory reached the run, so it is no setting that never applied
    question = ("In Megatron-Core with hyper connections, torch.cuda.memory_allocated() between iterations stays well "
                "above what it should; activations of the last micro-batch look alive after the iteration. It's much "
                "worse with full recompute than without.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.made_worse"]
    assert "setting-not-applied" not in [c.id for c in diag.causes]


def test_the_hosts_ram_and_its_copies_of_the_weights_need_no_gpu_named(kb):
    # hiyouga/LLaMA-Factory#668 (set issue-24-s89): "wo neicun you 300G" (my RAM is 300G), six ranks each loading
    # Baichuan-13B; no GPU type given - the host's sum does not depend on it
    question = ("deepspeed --include localhost:0,1,2,3,4,5 全量预训练 baichuan-13b，报错提示内存不够，"
                "但是我内存有300G 感觉是够的。")
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.host_ram_bytes"] == 300e9
    _, flat, _ = pipeline.run(pipeline.Inputs(question="GPU 内存有 24G，还是 OOM"), kb)
    assert flat.get("situation.host_ram_bytes") is None  # the GPU's memory, not the host's
    _, flat, _ = pipeline.run(pipeline.Inputs(question="6 卡 Llama 3 8B 全量微调，主机内存不够"), kb)
    assert flat["derived.host_load_bytes"] > 6 * 15e9  # a whole BF16 copy per process of the node


def test_a_4bit_base_under_zero3_is_whole_on_every_rank(kb):
    # OpenRLHF/OpenRLHF#607 (set issue-24-s89): Qwen2.5-72B DPO with --load_in_4bit, --zero_stage 3 and --adam_offload
    # on 8 x 80 GB; ZeRO-3 does not shard bitsandbytes' uint8 weights, so sharding is not yet in effect for them
    question = ("deepspeed dpo lora 训练 qwen2.5-72B-Instruct 时 OOM，显存 80G 左右 8 卡，"
                "调整了 batch_size、zero_stage、load_in_4bit 依旧存在问题")
    log = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 462.00 MiB."]
    stated = ["zero_stage=3", "load_in_4bit=true", "lora_rank=32", "adam_offload=true", "micro_train_batch_size=1"]
    _, _, diag = pipeline.run(pipeline.Inputs(question=question, log=log, overrides=stated), kb)
    assert diag.causes[0].id == "capacity-model-state" and diag.fixes[0].id == "megatron-fsdp"
    assert "add-gpus" in [a.id for a in diag.avoid]
    # with the 4-bit weights stored as bfloat16 ZeRO-3 shards them: the rule is silent
    stored = question + "，已设置 bnb_4bit_quant_storage=bfloat16"
    _, _, diag = pipeline.run(pipeline.Inputs(question=stored, log=log, overrides=stated), kb)
    assert "quantized-base-not-sharded" not in [r for c in diag.causes for r in c.rules]


def test_the_published_script_run_unchanged_is_no_earlier_run_and_its_flags_count(kb):
    # cooper#6 (set issue-24-s89): "jiaoben wo mei gai" (I did not change the script) - the repository's GRPO script
    # as published, whose launch line sets --gradient_checkpointing false
    question = ("我在用 scripts/train_reason_interleave_grpo.sh 里面的配置做 GRPO 训练，8 卡 A800，但是会报 OOM。"
                "请问你们训练的时候是直接用这个配置跑的吗？（脚本我没改，关键参数见下）")
    log = ["torchrun --nproc_per_node=8 train/grpo/interleave_grpo.py \\",
           "    --deepspeed ./scripts/zero3_offload.json \\",
           "    --per_device_train_batch_size 1 \\",
           "    --gradient_checkpointing false \\",
           "    --max_num_tokens 16384"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log, gpu="8 卡 A800"), kb)
    assert not flat["situation.worked_before"] and flat["situation.recompute_off"]
    assert diag.fixes[0].id == "full-recompute"
    # beside an upgrade the same words do say it ran before
    _, flat, _ = pipeline.run(pipeline.Inputs(question="升级 transformers 之后 OOM 了，脚本我没改。"), kb)
    assert flat["situation.worked_before"]


def test_a_token_budget_is_the_micro_batch_of_dynamic_batching(kb):
    # tinker-cloud#33 (set issue-24-s89): NeMo-RL train_micro_batch_size=1, dynamic batching with a 32k token budget;
    # the micro-batch to lower is the budget, whatever the sample count
    question = ("Training Qwen3-8B with NeMo RL, TP=2 on H200, was slow because every sample ran as its own "
                "micro-batch (train_micro_batch_size=1, no dynamic batching, padded to the global max), so we "
                "turned on NeMo RL dynamic batching and set the per-micro-batch token budget to max_seq_len. "
                "Now policy.train OOMs: memory goes up to about 136 GiB on the H200. We don't use activation "
                "checkpointing. Our max_seq_len is 32k. What should the budget be?")
    stated = ["policy.dynamic_batching.enabled=true", "policy.train_micro_batch_size=1", "max_seq_len=32768",
              "tensor_model_parallel_size=2"]
    _, _, diag = pipeline.run(pipeline.Inputs(question=question, overrides=stated, gpu="H200 (141 GB)"), kb)
    assert diag.fixes[0].id == "reduce-micro-batch"
    # ...unless the failure comes with the longest samples, each of which fills the budget alone
    long = ("PPO on a 4B model on 4x H200, CP 1, full recompute, max length 65536, dynamic batch size on, "
            "micro batch 1. It OOMs on long samples, and dynamic batching does not help.")
    _, _, diag = pipeline.run(pipeline.Inputs(question=long, gpu="H200"), kb)
    assert "reduce-micro-batch" not in [f.id for f in diag.fixes]


def test_cuda_in_cuda_oom_is_no_software_version(kb):
    # rllm-org/rllm#182 (set issue-24-s89): "so I moved to 64 A100 80GB GPUs, but I still get CUDA OOM" - more GPUs
    # tried, not a new stack ("CUDA" here names the failure, not the toolkit of "CUDA 12.4")
    question = ("On 8 A100 80GB I got CUDA OOM even with small micro-batch sizes, so I moved to 64 A100 80GB GPUs, "
                "but I still get CUDA OOM whenever max_turns is greater than 2.")
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "stack" not in flat["situation.changed"] and "add-gpus" in flat["situation.tried"]
    _, flat, _ = pipeline.run(pipeline.Inputs(question="After we moved to CUDA 12.4 the same run OOMs."), kb)
    assert "stack" in flat["situation.changed"]


def test_a_pasted_launch_command_is_the_runs_own_settings(kb):
    # OpenRLHF/OpenRLHF#275 (set issue-24-s89): the A100 script's batch sizes kept on 4 x 4090, with --adam_offload
    # and --gradient_checkpointing only in the pasted ray command; a stated --set wins over the launch line
    log = ["ray job submit --address=http://127.0.0.1:8265 -- python3 examples/train_ppo_ray.py \\",
           "    --actor_num_gpus_per_node 1 \\",
           "    --micro_train_batch_size 8 \\",
           "    --zero_stage 2 \\",
           "    --bf16 \\",
           "    --adam_offload \\",
           "    --gradient_checkpointing true \\",
           "    --flash_attn",
           "torch.cuda.OutOfMemoryError: CUDA out of memory."]
    facts, _, _ = pipeline.run(pipeline.Inputs(question="OpenRLHF PPO on 4 x RTX 4090 OOMs", log=log), kb)
    assert facts.config.optimizer_cpu_offload and facts.config.recompute_granularity == "full"
    assert facts.config.micro_batch_size == 8 and facts.config.use_distributed_optimizer
    facts, _, _ = pipeline.run(pipeline.Inputs(question="OpenRLHF PPO OOMs", log=log,
                                               overrides=["micro_train_batch_size=2"]), kb)
    assert facts.config.micro_batch_size == 2
    # a flag memtune cannot read is skipped without a warning of its own
    assert not any("flash_attn" in w for w in facts.config.warnings)


def test_an_engine_resuming_its_weights_and_kv_cache_is_no_checkpoint_resume(kb):
    # volcengine/verl#1911 (set issue-24-s89): "huanxing SGLang (weights he KV cache yiqi resume)" - the engine
    # woken from its memory saver, not a training run resumed from a checkpoint
    question = ("verl 里用 SGLang 做 rollout（colocate），8 张 H100 跑 32B。"
                "mem fraction 0.8 会在 update weight 那一步 OOM。现在的流程是训练完把 optimizer state "
                "offload 到 CPU，然后唤醒 SGLang（weights 和 KV cache 一起 resume）。")
    facts, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "resume" not in facts.question.topics
    assert "checkpoint-load" not in [c.id for c in diag.causes]


def test_saving_that_needs_more_than_training_is_the_save_not_a_new_version(kb):
    # huggingface/transformers#12587 (set issue-24-s89): ZeRO-3 fp16 training fits, "during the saving step I get
    # OOM ... why does saving need more GPU memory than training?" with the versions listed in another sentence
    question = ("Training Blenderbot-9B with DeepSpeed ZeRO-3 on 8 x 16GB GPUs, save_steps 10. Training and evaluation "
                "run fine at about 10GB per GPU. However during the saving step I get OOM. Deepspeed 0.4.3, torch "
                "1.8, transformers 4.9.0. Why does saving need more GPU memory than training?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.phase"] == "checkpoint-save" and "stack" not in flat["situation.changed"]
    assert diag.fixes[0].id == "checkpoint-save-memory"


def test_a_failure_beside_settings_the_user_names_checks_that_the_run_has_them(kb):
    # volcengine/verl#647 (set issue-24-s40): the same script runs with vLLM and OOMs in the actor update with
    # SGLang as the rollout engine; with nothing deciding between the generic causes, the check that separates a
    # setting that never applied (SGLang's memory release) from a layout that does not fit comes first
    question = ("I find the same verl PPO/GRPO script can run perfectly using vLLM (0.7.3) for rollout, however it "
                "fails with an OutOfMemoryError using SGLang (0.4.4.post1) as the rollout engine. The error is raised "
                "from the actor update (actor_output = self.actor_rollout_wg.update_actor(...)) after the first "
                "generation. What is different between the two engines here and what should I change?")
    log = ["ray.exceptions.RayTaskError(OutOfMemoryError): ray::main_task()",
           "    actor_output = self.actor_rollout_wg.update_actor(batch)"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log,
                                                 overrides=["actor_rollout_ref.rollout.name=sglang"]), kb)
    assert flat["situation.setting_stated"]
    assert diag.fixes[0].id == "confirm-setting-applied"


def test_of_a_setup_that_fit_the_setting_taken_out_is_the_lever(kb):
    # om-ai-lab/VLM-R1#36 (set issue-24-s90): "yong Zero3 + gradient_checkpointing=True neng zhengchang xunlian; ke
    # yidan ba gradient_checkpointing guandiao jiu OOM" - ZeRO-3 stayed on in the run that failed
    question = ("我们在 8 张 A800（每张 80GB）上跑 Qwen2.5VL-3B 的 GRPO，"
                "用 Zero3 + gradient_checkpointing=True 能正常训练；可一旦把 gradient_checkpointing 关掉就 OOM。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, overrides=["deepspeed=zero3"]), kb)
    assert flat["situation.removed"] == ["full-recompute"] and flat["situation.worked_with"] == ["full-recompute"]
    assert diag.fixes[0].id == "full-recompute" and "megatron-fsdp" not in [f.id for f in diag.fixes]
    # "the same as when it is turned off" names no setting beside the removal word (volcengine/verl#26)
    question = ("When turning on critic.model.enable_gradient_checkpointing, these values remain the same as when it "
                "is turned off.")
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert not flat["situation.removed"]


def test_a_failure_right_after_the_evaluation_phase_ended(kb):
    # hiyouga/LLaMA-Factory#836 (set issue-24-s90): "pinggu jieduan jieshu zhihou hui zhijie bao xiancun" (right after
    # the evaluation phase ends it runs out) - what the evaluation left behind is the suspect; more GPUs are not
    question = ("baichaun2-13B-Chat 微调在评估后会爆显存：两张4090，训练阶段 batchsize 为1大概13G，"
                "但是评估阶段结束之后会直接爆显存。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.after_phase"] == "eval"
    assert "memory-growth" in [c.id for c in diag.causes] and "add-gpus" not in [f.id for f in diag.fixes]


def test_memory_that_stays_where_an_enabled_setting_should_move_it_says_the_setting_did_not_apply(kb):
    # deepspeedai/DeepSpeed#1624 (set issue-24-s90): ZeRO-3 on 4 x 3090, "FP16 model weight and gradients take up
    # about 21GBs, and they seemed to stay on the GPU VRAM though I enabled parameter offloading"
    question = ("I run a GPT-2 like model with ZeRO-3 on 4 RTX 3090. FP16 model weight and gradients take up about "
                "21GBs, and they seemed to stay on the GPU VRAM though I enabled parameter offloading. I keep getting "
                "CUDA OOM on the 2nd iteration.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, gpu="4 RTX 3090 (24GiB VRAM)"), kb)
    assert flat["situation.not_applied_said"]
    assert diag.fixes[0].id == "confirm-setting-applied"


def test_one_copy_of_the_weights_against_the_machines_ram_is_the_load(kb):
    # tdrussell/diffusion-pipe#149 (set issue-24-s80): Wan2.1 14B LoRA under WSL, "WSL gei le 32GB neicun li de 24GB"
    # (32 GB of RAM, 24 GB of it given to WSL); the launcher reports its one process killed with -9
    question = ("我用 RTX 5070 Ti 16GB 在 WSL 里用 diffusion-pipe 训练 Wan2.1 14B T2V 的 LoRA，已经用了 "
                "transformer_dtype='float8'，WSL 给了 32GB 内存里的 24GB。是我漏了什么设置？")
    log = ["[INFO] [launch.py:319:sigkill_handler] Killing subprocess 1960",
           "[ERROR] [launch.py:325:sigkill_handler] ['python', '-u', 'train.py', '--local_rank=0', '--deepspeed'] "
           "exits with return code = -9"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log, gpu="RTX 5070 Ti 16GB"), kb)
    assert flat["situation.host_ram_bytes"] == 32e9 and flat["derived.model_weights_bytes"] > 0.7 * 32e9
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "convert-sharded"


def test_the_first_rank_alone_is_no_pipeline_stage(kb):
    # huggingface/nanotron#203 (set issue-24-s80): "I looked at the memory trace of the first rank" is rank 0
    assert "pipeline-imbalance" not in parse_question("I looked at the memory trace of the first rank.", kb).topics
    assert "pipeline-imbalance" in parse_question("The first stage runs out of memory, the others fit.", kb).topics
    assert "pipeline-imbalance" in parse_question("Only the last pipeline rank OOMs.", kb).topics


def test_a_critic_trained_beside_the_actor_doubles_the_trained_state(kb):
    # volcengine/verl#1141 (set issue-24-s80): PPO on Llama-3.2-3B over 4x A10 with critic.model.path set
    question = ("Training of llama3.2-3B (PPO with verl) on 4*A10 always raises CUDA out of mem regardless of how "
                "minimal a batch size I set; every micro batch size is 1.")
    log = ["python3 -m verl.trainer.main_ppo \\", "actor_rollout_ref.model.path=$llama3b_path \\",
           "critic.model.path=$llama3b_path \\", "critic.ppo_micro_batch_size_per_gpu=1 \\",
           "trainer.n_gpus_per_node=4"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log, gpu="A10"), kb)
    assert flat["situation.critic"] and diag.causes[0].id == "capacity-model-state"
    assert diag.fixes[0].id == "offload-trainer-states" and "reduce-micro-batch" not in [f.id for f in diag.fixes]
    # GRPO has no critic
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question.replace("PPO", "GRPO")), kb)
    assert not flat["situation.critic"]


def test_qlora_trains_lora_adapters(kb):
    # yangjianxin1/Firefly#33 (set issue-24-s80): "zai v100 shang yong qlora bao OOM" - QLoRA is LoRA over a 4-bit base:
    # the model state is the adapters', so no layout of more GPUs is what it needs
    question = "在v100上用qlora报OOM。跑的是baichuan-7b模型，尝试使用1卡和8卡V100，均报OOM。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, gpu="V100 32G"), kb)
    assert flat["config.peft"] == "lora" and "quantized-base" in flat["question.topics"]
    assert "add-gpus" not in [f.id for f in diag.fixes[:3]]


def test_a_launch_line_that_lost_its_backslash_cuts_the_settings_after_it(kb):
    # hiyouga/LLaMA-Factory#2867 (set issue-24-s81): "--fp16" has no trailing backslash, so "--deepspeed ..." on the
    # next line is a command of its own and ChatGLM3-6B trains as plain DDP
    from memtune.inputs.shell_lines import lost_backslash

    log = ["deepspeed --num_gpus=8 src/train_bash.py \\", "    --finetuning_type full \\",
           "    --per_device_train_batch_size 1 \\", "    --fp16", "    --deepspeed zero_stage3_offload_config.json"]
    assert lost_backslash(log) == ("(no trailing backslash) --fp16", "--deepspeed zero_stage3_offload_config.json")
    question = "ChatGLM3-6B 全参微调，8 张 A800 80G，用了 zero3 offload 还是显存溢出。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["log.cut_continuation"] == "(no trailing backslash) --fp16"
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"
    # an option that sets no memory (eager attention) lost the same way is no cut that explains an OOM; nor is the
    # "..." a paste puts for lines it left out
    eager = log[:3] + ["    --use_peft", "    --attn_implementation eager"]
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question, log=eager), kb)
    assert flat.get("log.cut_continuation") is None
    assert lost_backslash(["swift sft \\", "  --eval_steps 500 \\", "  ...", "  --save_steps 500 \\"]) is None


def test_the_task_that_failed_is_the_one_the_failing_clause_names(kb):
    # hiyouga/LLaMA-Factory#713 (set issue-24-s81): "finetuning_type shi lora keyi pao qilai, finetuning_type=full
    # quancanshu weitiao hui xiancun yichu" - LoRA runs, full fine-tuning runs out; the settings say full
    question = ("使用八卡A800对Baichuan13B模型进行sft微调，--finetuning_type是lora可以跑起来，"
                "--finetuning_type=full 全参数微调会显存溢出，即使batch_size=1的情况也会。")
    assert parse_question(question, kb).layout.get("task") == "sft"
    overrides = ["finetuning_type=full", "per_device_train_batch_size=1", "num_processes=8"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, overrides=overrides), kb)
    assert flat.get("config.peft") is None and diag.causes[0].id == "capacity-model-state"
    assert parse_question("LoRA SFT of Llama 3 8B runs out of memory.", kb).layout.get("task") == "lora"


def test_a_host_memory_report_near_full_before_a_kill_is_the_host(kb):
    # CVI-SZU/Linly#35 (set issue-24-s81): DeepSpeed's see_memory_usage shows the GPU all but empty and the machine's
    # RAM at 76.6 % before ZeRO-3's offloaded optimizer is initialised, then the launcher kills its process
    log = ["[INFO] [utils.py:785:see_memory_usage] Before initializing optimizer states",
           "[INFO] [utils.py:786:see_memory_usage] MA 0.0 GB    Max_MA 0.0 GB    CA 0.73 GB    Max_CA 1 GB",
           "[INFO] [utils.py:793:see_memory_usage] CPU Virtual Memory:  used = 63.96 GB, percent = 76.6%",
           "[2023-04-20 09:11:05,506] [INFO] [launch.py:428:sigkill_handler] Kill..."]
    question = "这个预训练最低需要多大的显存？80G内存，40G显存单张A100居然跑不了？"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["situation.process"] == "host" and diag.causes[0].id == "host-oom"
    # the same report at half the RAM is no host shortage
    low = [line.replace("percent = 76.6%", "percent = 41.0%") for line in log]
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question, log=low), kb)
    assert flat.get("situation.process") != "host"


def test_a_program_of_its_own_replicates_its_model_state_and_is_sharded_first(kb):
    # shibing624/MedicalGPT#338 (set issue-24-s82): "torchrun pretraining.py" on 8x 3090 fails at model.float(); the
    # traceback's first frame names a program of no Megatron stack, so no Bridge default (distributed optimizer) is
    # assumed: every rank holds the whole fp32 model, and sharding it over the 8 GPUs (ZeRO-3 / FSDP) comes first
    log = ["Traceback (most recent call last):", '  File "pretraining.py", line 780, in <module>', "    main()",
           '  File "pretraining.py", line 706, in main', "    model = model.float()",
           "torch.cuda.OutOfMemoryError: CUDA out of memory."]
    question = "单机8卡3090全量预训练 baichuan-7b，总是爆显存，8 张卡加起来显存是够的，为什么还没开始训练就 OOM 了？"
    facts, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log, gpu="8x RTX 3090"), kb)
    assert flat["situation.trainer"] == "own" and "use_distributed_optimizer" not in facts.config.assumed
    assert diag.fixes[0].id == "megatron-fsdp"
    # the same program said to run under PyTorch FSDP shards already (ROCm/TransformerEngine#79's train_fsdp_*.py)
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question + " (with FSDP)", log=log, gpu="8x RTX 3090"), kb)
    assert flat["situation.trainer"] == "fsdp"
    # Megatron-LM's own program is Megatron's: its distributed optimizer is the first shard, not ZeRO-3
    megatron = [line.replace("pretraining.py", "pretrain_gpt.py") for line in log]
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question, log=megatron, gpu="8x RTX 3090"), kb)
    assert flat.get("situation.trainer") is None


def test_an_nx_gpu_node_counts_the_gpus_of_one_node(kb):
    # epfLLM/Megatron-LLM#6 (set issue-24-s82): "a single 8x A100 80 GB node" is 8 GPUs, not 8 nodes of 8
    for text, gpus in [("So far it seems a single 8x A100 80 GB node is not enough", 8), ("one 8xH200 node", 8),
                       ("two 8x H100 nodes", 16), ("4 H100 nodes", 32), ("2 nodes of 8 H100", 16)]:
        assert parse_question(text, kb).num_gpus == gpus, text


def test_an_unstated_expert_tensor_size_breaks_no_layout_that_fits_at_one(kb):
    # radixark/miles#3089: TP2 / EP8 colocated on one 8xH200 node runs, so its launcher set ETP 1; Megatron's default
    # ETP = TP would need 16 GPUs, a breach resting on a setting nobody stated
    from memtune.derive import world_divisible_expert

    layout = TrainingConfig(world_size=8, tensor_model_parallel_size=2, expert_model_parallel_size=8)
    assert world_divisible_expert(layout) is None
    stated = TrainingConfig(world_size=8, tensor_model_parallel_size=2, expert_model_parallel_size=8,
                            expert_tensor_parallel_size=2)
    assert world_divisible_expert(stated) is False
    assert world_divisible_expert(TrainingConfig(world_size=12, tensor_model_parallel_size=2,
                                                 expert_model_parallel_size=8)) is False


def test_asking_how_many_gpus_a_model_needs_is_answered_with_the_count(kb):
    # epfLLM/Megatron-LLM#6: "What is the minimum number of 80 GB GPUs required to train ... Llama2-70B?" with TP 8 on
    # one 8x A100 node: the model state split over all 8 GPUs is more than a GPU, so the answer is the GPU count,
    # even though offloading the optimizer would make it fit
    question = ("What is the minimum number of 80 GB GPUs required to train Llama2-70B? So far a single 8x A100 80 GB "
                "node is not enough: with TP 8 it goes OOM when processing the first batch.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "gpu-count-asked" in flat["question.topics"] and diag.fixes[0].id == "add-gpus"
    _, _, diag = pipeline.run(pipeline.Inputs(question=question.replace("What is the minimum number of 80 GB GPUs "
                                                                        "required to train", "I train")), kb)
    assert diag.fixes[0].id != "add-gpus"


def test_consolidating_a_sharded_optimizer_is_the_save(kb):
    # huggingface/transformers#14542 (set issue-24-s82): "CUDA OOM at self.optimizer.consolidate_state_dict()" - the
    # gather of every rank's optimizer shard onto one rank that a save starts with
    question = ("CUDA OOM at self.optimizer.consolidate_state_dict() in Trainer when using sharded_ddp on 8 GPUs "
                "(fairscale 0.4.2). What is going on?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.phase"] == "checkpoint-save" and diag.causes[0].id == "checkpoint-save"


def test_a_request_larger_than_the_gpu_from_an_uncapped_vision_sample_is_its_pixels(kb):
    # modelscope/ms-swift#3426 (set issue-24-s82): "Tried to allocate 910GiB" in Qwen2.5-VL-7B GRPO on 2x A800, no
    # pixel cap said: the sample's vision tokens sized it, so the pixel cap leads, not a size bug
    question = "我用grpo训练Qwen2.5-VL-7B-Instruct，在2*a800上爆显存，显示Tried to allocate 910GiB。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.failed"] == "impossible"
    assert diag.causes[0].id == "capacity-activations" and diag.fixes[0].id == "cap-vision-tokens"
    # with the pixels capped, a request that size is no sample's: the size bug again
    _, _, diag = pipeline.run(pipeline.Inputs(question=question.replace("，显示", "，MAX_PIXELS=1003520，显示")), kb)
    assert diag.causes[0].id == "not-an-oom"


def test_an_error_after_a_change_the_user_made_is_the_changes(kb):
    # ByteDance-Seed/Bagel#139 (set issue-24-s82): the save ran out of memory; the user then changed both models to
    # SHARDED_STATE_DICT and ran into a RuntimeError - that error is the change's, the save's OOM is the run's
    question = ("保存ckpt的时候遇到OOM问题。我把 model 和 ema_model 都改成了 SHARDED_STATE_DICT，但随之又遇到了 "
                "RuntimeError: Attempted to access the data pointer on an invalid python storage. 该怎么改？")
    log = ["  with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT, ShardedStateDictConfig()):",
           "      save_file(model.state_dict(), model_shard_path)", "",
           "RuntimeError: Attempted to access the data pointer on an invalid python storage."]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["situation.error_from_a_try"] is True
    assert diag.causes[0].id == "checkpoint-save" and diag.fixes[0].id == "checkpoint-save-memory"
    # the same error with nothing said to be changed or tried before it is the run's own crash
    plain = "保存ckpt的时候遇到OOM问题，然后遇到了 RuntimeError，怎么办？"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=plain, log=log), kb)
    assert not flat.get("situation.error_from_a_try")


def test_a_training_step_with_recompute_set_off_turns_it_on_first(kb):
    # om-ai-lab/VLM-R1#77: GRPO of Qwen2.5-VL-3B on 8x H100 with gradient_checkpointing=false runs out of memory
    question = "Training with 8xH100: with the default num_generations=8 it runs out of memory. How do I make it fit?"
    settings = ["num_generations=8", "per_device_train_batch_size=1", "gradient_checkpointing=false"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, overrides=settings), kb)
    assert flat["situation.recompute_off"] is True and diag.fixes[0].id == "full-recompute"
    # a user who refuses it ("I don't want to turn on gradient checkpointing") is not told to turn it on first
    refused = question + " I don't want to turn on gradient checkpointing."
    _, flat, _ = pipeline.run(pipeline.Inputs(question=refused, overrides=settings), kb)
    assert not flat.get("situation.recompute_off")
    # refusing something else says nothing of recompute
    other = question + " I don't want to add more GPUs."
    _, flat, _ = pipeline.run(pipeline.Inputs(question=other, overrides=settings), kb)
    assert flat["situation.recompute_off"] is True


def test_a_launch_line_that_lost_its_backslash_before_the_adapter_setting_cuts_it(kb):
    # modelscope/ms-swift#3964 (set issue-24-s82): "--streaming true" has no backslash, so "--train_type lora" and
    # everything after it ran as a command of its own: swift sft fine-tuned every weight
    log = ["CUDA_VISIBLE_DEVICES=0,1,2 \\", "swift sft \\", "    --model deepseek-ai/deepseek-vl2-tiny \\",
           "    --streaming true", "    --train_type lora \\", "    --torch_dtype float16 \\",
           "    --num_train_epochs 5"]
    question = "用数据量较多的数据集就报错 out of memory，下面是我的命令，麻烦帮忙看看。"
    facts, _, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert facts.log.cut_continuation and diag.causes[0].id == "setting-not-applied"
    assert diag.fixes[0].id == "confirm-setting-applied"
    # options after the lost line that move no memory ("--num_train_epochs") cut nothing that matters
    harmless = log[:4] + ["    --num_train_epochs 5 \\", "    --logging_steps 5"]
    facts, _, _ = pipeline.run(pipeline.Inputs(question=question, log=harmless), kb)
    assert not facts.log.cut_continuation


def test_the_launch_command_says_how_many_processes_ran_and_a_server_is_no_host(kb):
    # shibing624/MedicalGPT#314 (set issue-24-s83): "8*80G fuwuqi" is a server of 80G cards, and the pasted
    # "torchrun --nproc_per_node 2" says two of them ran: Yi-34B's whole state on each of 2 GPUs
    from memtune.inputs.gpu import lookup_gpu

    gpu = lookup_gpu("8*80G \u670d\u52a1\u5668", kb)
    assert gpu.capacity_bytes and gpu.count == 8
    assert lookup_gpu("\u670d\u52a1\u5668\u5185\u5b58 512G", kb).capacity_bytes is None  # the server's RAM
    log = ["CUDA_VISIBLE_DEVICES=2,3 torchrun --nproc_per_node 2 pretraining.py \\",
           "    --model_name_or_path ../Yi-34B-Chat \\", "    --per_device_train_batch_size 2 \\",
           "    --gradient_checkpointing True"]
    question = "增量预训练 Yi-34B 全量训练，无论 --block_size 设置多少都报显存不足。"
    facts, _, diag = pipeline.run(pipeline.Inputs(question=question, log=log, gpu="8*80G \u670d\u52a1\u5668"), kb)
    assert facts.config.world_size == 2 and diag.causes[0].id == "capacity-model-state"


def test_the_setting_a_removal_word_names_is_what_was_taken_out(kb):
    # hiyouga/LLaMA-Factory#3919 (set issue-24-s83): "optimizer offload le, guandiao activation_checkpointing" - the
    # optimizer offload stays on; what was turned off is activation checkpointing (full recompute by its HF name)
    question = ("模型28g+梯度28g也就56g，optimizer offload了，"
                "关掉activation_checkpointing减少激活值的占用，但是仍然是OOM。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.removed"] == ["full-recompute"] and diag.fixes[0].id == "full-recompute"
    _, flat, _ = pipeline.run(pipeline.Inputs(question="I turned off gradient checkpointing and now it OOMs"), kb)
    assert flat["situation.removed"] == ["full-recompute"]


def test_pytorch_fsdp_named_shards_the_model_state(kb):
    # simplescaling/s1#13 (set issue-24-s83): Qwen2.5-32B with FSDP at 32K tokens on 16 GPUs - FULL_SHARD splits the
    # model state 16 ways, so the 32K-token activations, not the state, are what does not fit
    question = "Training Qwen2.5-32B with FSDP on 16x H100 at block_size 32768 runs out of memory."
    facts, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.trainer"] == "fsdp" and facts.config.use_torch_fsdp2 is True
    assert "use_torch_fsdp2" in facts.config.assumed
    # Megatron FSDP is Megatron's own: no torch FSDP assumed
    facts, flat, _ = pipeline.run(pipeline.Inputs(question=question.replace("FSDP", "Megatron FSDP")), kb)
    assert flat.get("situation.trainer") is None and not facts.config.use_torch_fsdp2


def test_a_variable_exported_in_lower_case_never_reaches_the_program(kb):
    # QwenLM/Qwen3-VL#913 (set issue-24-s83): "export ... max_pixels=1024*28*28" before ms-swift, which reads MAX_PIXELS
    log = ["export ASCEND_VISIBLE_DEVICES=0,1,2,3 max_pixels=1024*28*28; torchrun --nproc_per_node=4 swift/cli/sft.py "
           "--train_type lora --per_device_train_batch_size 1"]
    question = "请问多图的微调为什么特别容易爆显存？四张图微调就会爆显存，我使用的是 64G 的 NPU。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat["situation.env_case_mismatch"].startswith("max_pixels=")
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"
    # a lower-case shell variable that sets the real one is no mismatch (ms-swift#3871's launch script)
    script = ["nproc_per_node=8", "NPROC_PER_NODE=$nproc_per_node \\", "swift rlhf --rlhf_type grpo"]
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question, log=script), kb)
    assert flat.get("situation.env_case_mismatch") is None
    # ...nor a config key listed in prose (hiyouga/EasyR1#454, set issue-24-s103)
    prose = ("用 EasyR1 的默认配置：rollout_batch_size=512，rollout.n=5， max_pixels=4194304，8 卡，"
             "actor 算 log_prob 时 OOM。")
    _, flat, _ = pipeline.run(pipeline.Inputs(question=prose), kb)
    assert flat.get("situation.env_case_mismatch") is None


def test_a_count_from_zero_makes_iteration_one_the_second_step(kb):
    # Open-Reasoner-Zero#58 (set issue-24-s84): "It OOMs on iter1; iter 0 training is fine" - the first optimizer step
    # created Adam's moments (adam_offload=False), so the second iteration is the first to hold them
    question = "Training a 12B model with PPO it OOMs on iter1; iter 0 training is fine."
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.step"] == "second-step"
    assert diag.causes[0].id == "capacity-model-state"
    _, flat, _ = pipeline.run(pipeline.Inputs(question="Training a 12B model with PPO it OOMs on iter1."), kb)
    assert flat["situation.step"] == "first-step"


def test_a_gpu_already_occupied_by_another_job_is_another_process(kb):
    # hiyouga/LLaMA-Factory#24 (set issue-24-s84): one of two 4090s already holds 15G for another job
    question = "用两张4090微调13b出现oom，单卡则不会。但是我有一张卡已经被占用了15G显存，还剩8g左右。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.process"] == "other-process"
    assert diag.causes[0].id == "foreign-process" and diag.fixes[0].id == "kill-stale-processes"
    _, flat, _ = pipeline.run(pipeline.Inputs(question="GPU 1 is already occupied by another job with 15 GB."), kb)
    assert flat["situation.process"] == "other-process"


def test_a_machine_with_less_ram_than_one_gpu_is_the_limit(kb):
    # Jiayi-Pan/TinyZero#91 (set issue-24-s84): Ray's kill line says the node has 7.61GB in all, the GPU 16 GB
    log = ["ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
           "Memory on the node (IP: 172.24.24.131, ID: 4302) where the task (task ID: 9f44, name=main_task, pid=32705, "
           "memory used=1.48GB) was running was 7.58GB / 7.61GB (0.996), which exceeds the memory usage threshold "
           "of 0.99. Ray killed this worker (ID: 2a1c) because it was the most recently scheduled task."]
    question = "I have a RTX 3080 16GB. I tried reducing all batch sizes to 1 but still get the error below."
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log, gpu="RTX 3080 16GB"), kb)
    assert 7e9 < flat["situation.host_ram_bytes"] < 9e9
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "add-gpus"
    # the same node with 64 GB of RAM: nothing says the machine is the limit
    big = [line.replace("7.58GB / 7.61GB", "63.4GB / 64.0GB") for line in log]
    _, _, diag = pipeline.run(pipeline.Inputs(question=question, log=big, gpu="RTX 3080 16GB"), kb)
    assert diag.fixes[0].id != "add-gpus"


def test_some_vision_samples_failing_without_a_pixel_cap_lead_with_the_cap(kb):
    # modelscope/ms-swift#2228 (set issue-24-s84): Qwen2-VL full SFT on 128 H800 "still OOMs on some data even with
    # max length 1024" - the rest trains, so the state fits; the failing samples' images are what max_length misses
    question = ("我用 ms-swift 全量微调 qwen2-7b-vl 的时候发现，即使我的 max length 开得很低，"
                "仍然会在一定数据出现 OOM 的情况。我的机器是 16*8*80G H800。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, overrides=["sft_type=full", "max_length=1024"]), kb)
    assert flat["situation.trend"] == "spike" and flat["situation.some_samples_fail"]
    assert diag.causes[0].id == "capacity-activations" and diag.fixes[0].id == "cap-vision-tokens"
    assert "capacity-model-state" in diag.ruled_out
    _, flat, _ = pipeline.run(pipeline.Inputs(question="Qwen2-VL SFT only OOMs on some samples, the rest train."), kb)
    assert flat["situation.some_samples_fail"] and flat["situation.trend"] == "spike"
    # a pixel cap stated: the images are bounded, so the cap is no first step
    env = ["MAX_PIXELS=602112"]
    _, _, diag = pipeline.run(pipeline.Inputs(question=question, env=env, overrides=["max_length=1024"]), kb)
    assert diag.fixes[0].id != "cap-vision-tokens"


def test_a_resume_named_beside_no_failure_is_not_where_growing_memory_failed(kb):
    # SWivid/F5-TTS#223 (set issue-24-s84): memory climbs over tens of thousands of steps; "if I resume training,
    # this phenomenon repeats" says when it happens again, not that the load failed
    question = ("GPU mem usage keeps increasing during training. At start it is ~9GB, after some x10000 steps it "
                "increases to ~16GB, then it eventually leads to OOM. If I resume training, this phenomenon repeats.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat.get("situation.phase") is None and flat["situation.trend"] == "grows"
    assert diag.fixes[0].id == "track-memory-per-step"
    _, flat, _ = pipeline.run(pipeline.Inputs(question="When I resume training from the checkpoint it OOMs."), kb)
    assert flat["situation.phase"] == "checkpoint-load"


def test_zero3_with_cpu_offload_leaves_the_activations(kb):
    # microsoft/DeepSpeed#2797 (set issue-24-s84): FLAN-T5-XL, ZeRO-3 with the parameters and the optimizer on the CPU,
    # still out of memory on 4x V100 16GB - "CPU offload" here is ZeRO-Offload, not Megatron's layer offload, so
    # gradient checkpointing is no conflict and comes first
    question = ("I am trying to train FLAN-T5-XL using DeepSpeed ZeRO-3 and transformers, and ZeRO-3 with CPU offload "
                "seems to use quite a lot of GPU memory. I am running on 4x V100 16GB with batch size 1. Why does it "
                "still run out of GPU memory?")
    overrides = ["zero_optimization.stage=3", "zero_optimization.offload_param.device=cpu",
                 "zero_optimization.offload_optimizer.device=cpu", "per_device_train_batch_size=1"]
    facts, _, diag = pipeline.run(pipeline.Inputs(question=question, overrides=overrides, gpu="4x V100 16GB"), kb)
    assert not facts.config.cpu_offloading
    assert diag.causes[0].id == "capacity-activations" and diag.fixes[0].id == "full-recompute"
    assert "optimizer-cpu-offload" in {a.id for a in diag.avoid}


def test_a_weight_sync_that_gathers_a_model_larger_than_the_gpu(kb):
    # huggingface/trl#3133 (set issue-24-s84): GRPO + LoRA under ZeRO-3, 72B, vLLM on a second machine; the sync
    # gathers every parameter before merge_adapter - 145 GB of weights on each 80 GB rank
    question = ("GRPO with TRL + PEFT (LoRA) under DeepSpeed ZeRO-3, vLLM as the inference backend: 72B model, machine "
                "1 with 8 * A100 running training, machine 2 with 4 * A100 running vLLM. Generation is fine, but I get "
                "GPU memory OOM in `self._move_model_to_vllm`.")
    inputs = pipeline.Inputs(question=question, overrides=["zero_stage=3", "use_peft=true", "use_vllm=true"],
                             gpu="8 * A100")
    _, flat, diag = pipeline.run(inputs, kb)
    assert flat["situation.process"] == "separate-engine" and flat["situation.phase"] == "rl-weight-sync"
    assert diag.causes[0].id == "capacity-model-state" and diag.fixes[0].id == "convert-sharded"
    assert "shrink-colocated-engine" in {a.id for a in diag.avoid}


def test_an_update_on_a_config_that_asks_for_recompute_checks_that_it_still_applies(kb):
    # NVIDIA-NeMo/Automodel#1927 (set issue-24-s84): "After #1904 got merged, main is running into OOM ... fsdp +
    # activation checkpointing ... The same yaml ran before that merge and I did not touch the config" - the merge
    # silently turned activation checkpointing off for the model
    question = ("After #1904 got merged, main is running into OOM while running gemma4_31b.yaml, which uses just fsdp "
                "+ activation checkpointing. The same yaml ran before that merge and I did not touch the config.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.changed"] == ["stack"] and flat["situation.worked_before"]
    assert diag.fixes[0].id == "confirm-setting-applied"
    assert {"setting-not-applied", "version-regression"} <= {c.id for c in diag.causes}
    # the same update with no recompute in the config: the two versions side by side come first
    _, _, diag = pipeline.run(pipeline.Inputs(question=question.replace(" + activation checkpointing", "")), kb)
    assert diag.fixes[0].id == "track-memory-per-step"


def test_a_deepspeed_run_with_no_framework_named_gets_deepspeeds_own_offload_key(kb):
    # zai-org/ChatGLM-6B#843-like runs under DeepSpeed with no framework of ours named: the ds_config key, not Bridge's
    from memtune.report import _framework_lines

    fix = kb.get("fixes", "optimizer-cpu-offload")
    lines = _framework_lines(fix, {"situation.trainer": "deepspeed"})
    assert lines and "offload_optimizer" in lines[0]
    # a framework named wins over the trainer it runs (OpenRLHF trains with DeepSpeed)
    lines = _framework_lines(fix, {"situation.framework": "openrlhf", "situation.trainer": "deepspeed"})
    assert "--ds.adam_offload" in lines[0]
    assert _framework_lines(fix, {}) == []


def test_zero3_said_in_words_shards_the_weights_and_zero1_in_the_settings_does_not(kb):
    # hiyouga/LlamaFactory#9572 (set issue-24-s85): "4090 dan ka ... shiyong deepspeed zero3 weitiao qwen3-30b-a3b" -
    # ZeRO-3 on one GPU shards over one rank: the 61 GB of bf16 weights stay on the 24 GB card, more GPUs split them
    question = "4090单卡，使用deepspeed zero3微调qwen3-30b-a3b会爆显存。zero3 不是会把模型切开吗，为什么还是爆显存？"
    facts, _, diag = pipeline.run(pipeline.Inputs(question=question, overrides=["finetuning_type=lora"],
                                                  gpu="4090单卡（24G）"), kb)
    assert facts.config.use_torch_fsdp2 is True and facts.config.world_size == 1
    assert diag.causes[0].id == "capacity-model-state" and diag.fixes[0].id == "add-gpus"
    # the settings say stage 1 now: the ZeRO-3 of an earlier try in the words is not this run's (LlamaFactory#1931)
    question = "最开始用 Deepspeed ZERO3 会卡住，我换成 zero1 + offload_optimizer 到 cpu，还是返回显存溢出。"
    facts, _, _ = pipeline.run(pipeline.Inputs(question=question, overrides=["zero_optimization.stage=1"]), kb)
    assert facts.config.use_torch_fsdp2 is False and facts.config.use_distributed_optimizer


def test_a_gpu_that_looks_full_with_nothing_failed_is_the_allocators_cache(kb):
    # modelscope/ms-swift#1314 (set issue-24-s85): "xiancun dou zhan de hen man, ganjue suishi dou keneng bao xiancun"
    # (memory always full, it feels like it could OOM any time) - feared, not had; gpustat shows the reservation
    question = "微调时无论怎么设置参数，显存都占得很满，感觉随时都可能爆显存，请问这是怎么回事呢？8 张 V100 32G。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "memory-looks-full" in flat["question.topics"] and not flat.get("situation.oom_said")
    assert diag.causes[0].id == "not-an-oom" and diag.fixes[0].id == "track-memory-per-step"
    # an OOM said beside it: it did fail
    _, _, diag = pipeline.run(pipeline.Inputs(question="GPU memory is always full and then it OOMs at step 30."), kb)
    assert diag.causes[0].id != "not-an-oom"


def test_a_server_that_froze_while_preprocessing_ran_out_of_host_ram(kb):
    # dbiir/UER-py#282 (set issue-24-s85): 40 preprocessing processes over a 7.4G corpus, 128G of RAM, "the server
    # froze and rebooted" - the tool runs on the CPU, so host RAM is what ran out
    question = "preprocess处理占用太大内存：预处理文件 7.4G，服务器内存128G，开了40个进程处理后，服务器卡爆重启了。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.phase"] == "data-preprocess" and flat["situation.process"] == "host"
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "shard-preprocessing"
    froze = "While tokenizing the corpus the server froze and rebooted."
    _, flat, _ = pipeline.run(pipeline.Inputs(question=froze), kb)
    assert flat["situation.process"] == "host"


def test_a_spike_tied_to_an_entropy_over_the_vocabulary_is_computed_in_chunks(kb):
    # huggingface/trl#4013 (set issue-24-s85): entropy kept for logging, computed over a long-context batch at once
    question = ("用 TRL 做长上下文的 SFT 时，发现 entropy 的计算会带来一个巨大的显存尖峰，大约 80 GB。"
                "entropy 只是拿来记日志的，为什么会吃掉这么多显存？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "logits" in flat["situation.components"] and flat["situation.trend"] == "spike"
    assert diag.causes[0].id == "logits-loss-memory" and diag.fixes[0].id == "logits-chunking"


def test_an_ecc_error_before_the_oom_blames_the_gpu_not_the_run(kb):
    # bigscience tr1-13B chronicles (set issue-24-s86): an uncorrectable ECC error, then the next job's OOM in the
    # start-up barrier - the node is faulty, no memory setting is the fix
    question = ("One training crashed after many hours with an uncorrectable ECC error in the backward pass; the "
                "next job crashed right away with RuntimeError: CUDA error: out of memory inside the barrier.")
    _, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert diag.causes[0].id == "not-an-oom" and diag.fixes[0].id == "find-first-failing-rank"
    assert {"capacity-model-state", "fragmentation"} <= set(diag.ruled_out)


def test_a_save_said_as_doing_a_checkpoint_and_memory_no_process_lists(kb):
    # THUDM/ChatGLM-6B#1155 (set issue-24-s86): "pao dao 1000 ge step de shihou, zuo checkpoint" - a save
    question = "deepspeed 全量微调，跑到1000个step的时候，做checkpoint，写入文件失败，查询发现是内存不够。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.phase"] == "checkpoint-save" and diag.fixes[0].id == "checkpoint-save-memory"
    # memory held with no process in nvidia-smi's list (a CSDN post): another process, found with fuser
    question = ("nvidia-smi 显示显存被占用，但进程列表里找不到任何和这个显存匹配的 PID，"
                "新任务立刻报 CUDA out of memory。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.process"] == "other-process" and diag.fixes[0].id == "kill-stale-processes"


def test_more_gpus_the_user_cannot_add_are_avoided_and_both_pipeline_ends_are_a_stage(kb):
    # bigscience tr11 prequel (set issue-24-s86): "the first and last cards fill their memory, the rest use half ...
    # how to even it out without adding GPUs?" - a stage imbalance, and more GPUs are not an option
    question = ("Megatron-DeepSpeed，TP 4、PP 十几：第一张和最后一张卡把显存吃满了，其余的卡只用了一半。"
                "在不加卡的前提下怎么把显存摊平？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, gpu="A100 80GB"), kb)
    assert flat["situation.where"] == "first-stage" and flat["situation.refused"] == ["add-gpus"]
    assert diag.causes[0].id == "pipeline-stage-imbalance" and diag.fixes[0].id == "rebalance-pipeline-stages"
    assert "add-gpus" not in {f.id for f in diag.fixes}
    # a fix the user would rather not take is no refusal of what they can do
    _, flat, _ = pipeline.run(pipeline.Inputs(question="Resume OOMs; I don't want optimizer_cpu_offload, it is slow."),
                              kb)
    assert flat["situation.refused"] == []


@pytest.mark.parametrize("question", [
    # QwenLM/Qwen3-VL#938 (set issue-24-s87): no framework, the user's own training loop
    "lora微调Qwen2.5VL-7B在一张24G的A100上OOM。我因为有一些额外的处理要做，所以没有用框架，训练代码是自己写的。",
    "LoRA on Qwen2.5-VL-7B OOMs on a 24 GB A100. I wrote my own training loop in plain PyTorch, no framework.",
])
def test_a_training_loop_of_the_users_own_gets_no_megatron_only_fix(question, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.trainer"] == "own"
    offered = {f.id for f in diag.fixes}
    assert not offered & {"lora-input-regather", "rebalance-pipeline-stages", "increase-pp", "selective-recompute"}


def test_a_kernels_on_chip_shared_memory_is_neither_gpu_memory_nor_host_ram(kb):
    # state-spaces/mamba#438 (set issue-24-s87): Triton's OutOfResources on a GTX 1050 Ti
    log = ("triton.runtime.autotuner.OutOfResources: out of resource: shared memory, Required: 294912, "
           "Hardware limit: 49152. Reducing block sizes or `num_stages` may help.")
    question = ("Mamba2 fails, mamba1 works. Smaller model or input, the same shared memory required every time. "
                "16G RAM, GTX 1050ti (4G). Do I need a bigger GPU?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, log=log.splitlines()), kb)
    assert diag.causes[0].id == "not-an-oom" and "kernel-shared-memory-limit" in diag.causes[0].rules
    assert "host-oom" not in {c.id for c in diag.causes}
    assert not {f.id for f in diag.fixes} & {"reduce-micro-batch", "add-gpus", "reduce-dataloader-workers"}


@pytest.mark.parametrize("question", [
    # NVIDIA/Megatron-LM#307 (set issue-24-s87): nodes at 50-70 % with selective recompute, even with full
    "TP=2、PP=2 预训练 GPT-13B，用 selective 重计算时不同节点的显存占用差得很多，从 50% 到 70% 不等，"
    "换成 full 重计算就均衡了。这是 bug 还是预期行为？怎么才能把显存用满？",
    "GPT-13B with TP=2 PP=2: with selective recompute the memory usage differs a lot across nodes, 50% to 70%; "
    "with full recompute it is balanced. Bug or expected?",
])
def test_memory_that_differs_from_stage_to_stage_with_nothing_failed_is_the_schedule(question, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, overrides=["pipeline_model_parallel_size=2"]), kb)
    assert "pipeline-imbalance" in flat["question.topics"]
    assert "memory-looks-full" not in flat["question.topics"]  # "ba xiancun yong man": filling it is the goal
    assert diag.causes[0].id == "pipeline-stage-imbalance" and diag.fixes[0].id == "rebalance-pipeline-stages"


@pytest.mark.parametrize("question", [
    # volcengine/verl#2151 (set issue-24-s87): the same e2e run on two vLLM versions, the newer takes more
    "在两张 3090 上跑 verl 的 e2e 测试，遇到了 OOM。和 vllm 0.8.2 对比，vllm 0.9.1 大概多占 ~2GB 显存。",
    "verl's e2e test on two 3090s OOMs: vllm 0.9.1 takes about 2GB more memory than vllm 0.8.2.",
])
def test_more_memory_on_one_of_two_versions_named_is_the_stack_moving(question, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "stack" in flat["situation.changed"] and flat["situation.worked_before"]
    assert "version-regression" in {c.id for c in diag.causes}


@pytest.mark.parametrize("question", [
    # deepspeedai/DeepSpeed#1016 (set issue-24-s87): every failed try leaves its processes behind, holding memory
    "DeepSpeed 训练脚本最近频繁 CUDA out of memory。nvidia-smi 看大部分显存一直被占着；发现有一堆我的 deepspeed "
    "脚本实例还挂着，每次尝试运行都会留下一批。我只能一个个 kill -9，之后显存才释放。",
    "My DeepSpeed script keeps hitting CUDA out of memory. Instances of my earlier runs are still running; "
    "I kill -9 them one by one before the memory is freed.",
])
def test_earlier_runs_processes_still_alive_are_another_process_on_the_gpu(question, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.process"] == "other-process"
    assert diag.causes[0].id == "foreign-process" and diag.fixes[0].id == "kill-stale-processes"


def test_a_sharded_run_that_fails_placing_the_whole_model_never_sharded_it(kb):
    # deepspeedai/DeepSpeed#2497 (set issue-24-s87): stage 3 + offload, OOM at the engine's self.module.to(self.device)
    question = ("I want ZeRO stage 3 + offload to train a model larger than the GPU, but I get an OOM where deepspeed "
                "moves the model to the GPU: deepspeed/runtime/engine.py#L1056, self.module.to(self.device).")
    overrides = ["zero_optimization.stage=3", "zero_optimization.offload_param.device=cpu"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question, overrides=overrides), kb)
    assert flat["situation.phase"] == "model-build" and flat["situation.trainer"] == "deepspeed"
    assert diag.causes[0].id == "setting-not-applied"
    assert "sharded-run-builds-the-whole-model-first" in diag.causes[0].rules
    assert not {f.id for f in diag.fixes} & {"reduce-micro-batch", "full-recompute", "expandable-segments"}


@pytest.mark.parametrize("question", [
    # hiyouga/LlamaFactory#544 (set issue-24-s87): asking whether the OOM is normal says it happened
    "请问一下作者，Baichuan 13B全参数DPO在单机 A100 80G*8上OOM正常吗，accelerate 用Zero2和Zero3都不行",
    "Is it normal that Baichuan-13B full-parameter DPO OOMs on 8x A100 80G? ZeRO-2 and ZeRO-3 both still fail.",
])
def test_asking_whether_an_oom_is_normal_says_it_happened(question, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.oom_said"] and diag.causes[0].id != "not-an-oom"



def test_a_sample_step_inside_training_is_a_pass_with_no_backward(kb):
    # ostris/ai-toolkit#819 (set issue-24-s88): training fits, the first sample step's VAE decode runs out
    question = ("Training a Wan2.1-T2V-14B LoRA with ai-toolkit on a single 24GB GPU: training steps run, but it OOMs "
                "at the first sample step (832x480, 40 frames). Why does sampling OOM when training fits?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.phase"] == "eval"
    offered = {f.id for f in diag.fixes}
    assert not offered & {"full-recompute", "selective-recompute", "lora-input-regather"}


def test_a_zero_stage_is_no_pipeline_stage(kb):
    # deepspeedai/DeepSpeed#8029 (set issue-24-s88): "ZeRO stage 0" names how DeepSpeed shards, not a pipeline stage
    question = ("After upgrading DeepSpeed, my LoRA fine-tune with bf16 and ZeRO stage 0 hits CUDA OOM before training "
                "even starts.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat.get("situation.where") is None
    assert "pipeline-stage-imbalance" not in {c.id for c in diag.causes}
    _, flat, _ = pipeline.run(pipeline.Inputs(question="Only stage 0 runs out of memory with PP=4."), kb)
    assert flat["situation.where"] == "first-stage"


def test_a_host_kill_beside_an_offloaded_optimizer_is_its_state_and_more_nodes_split_it(kb):
    """OpenRLHF#198: a 70B actor with DeepSpeedCPUAdam killed for host memory. The offloaded state is 12 B per
    parameter (FP32 master + two Adam moments, ~840 GB for the model, the maintainer's sum), which more nodes split;
    "nothing says which process holds it" would be wrong, and offloading more adds to what ran out."""
    question = ("Running train_ppo_llama_ray_70b.sh, Ray says workers were killed due to memory pressure (OOM); "
                "the actor uses DeepSpeedCPUAdam (adam offload). Llama-2-70B.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["config.optimizer_cpu_offload"] is True
    assert 0.8e12 < flat["derived.offloaded_optimizer_bytes"] < 0.9e12
    assert diag.fixes[0].id == "add-gpus"
    assert "host-memory-unplaced" not in {r for c in diag.causes for r in c.rules}
    # the same kill without the offload has no such sum
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question.replace(" (adam offload)", "").replace(
        "uses DeepSpeedCPUAdam", "uses Adam")), kb)
    assert flat.get("derived.offloaded_optimizer_bytes") is None


def test_a_call_the_user_quotes_as_what_ran_out_names_the_request(kb):
    """modelscope/ms-swift#6966: "logits.float() xin shenqing de xiancun guo da daozhi oom ... logits.float() zhege
    49G" - the quoted call is the failing line (logits), the size written right after it its request. A call named
    beside a try ("tried torch.cuda.empty_cache(), still OOM") is no failing line."""
    question = ("\u8bad\u7ec3\u65f6\uff0clogits.float()\u65b0\u7533\u8bf7\u7684\u663e\u5b58\u6570\u8fc7\u5927"
                "\u5bfc\u81f4oom\u3002\u8bf7\u95eelogits.float()\u8fd9\u4e2a49G\u54ea\u6765\uff1f")
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert flat["situation.failed"] == "logits" and flat["situation.failed_source"] == "words"
    assert flat["situation.failed_bytes"] == 49e9
    _, flat, _ = pipeline.run(pipeline.Inputs(question="I tried torch.cuda.empty_cache(), still OOM at step 3."), kb)
    assert not flat.get("situation.call_path")


@pytest.mark.parametrize("text", [
    # PKU-YuanGroup/MoE-LLaVA#64: "zai chushihua optimizer zhuangtai shi hui bao cuda: out of memory"
    "\u6211\u4f7f\u7528\u4e86ZeRO-2\uff0cEP_SIZE=8\uff1b\u5728\u521d\u59cb\u5316optimizer\u72b6\u6001\u65f6\u4f1a"
    "\u62a5cuda: out of memory\u3002",
    "It runs out of memory while initializing optimizer states, before the first step.",
])
def test_initialising_the_optimizer_state_is_the_optimizer_phase(text, kb):
    assert _said(text, kb).phase.value == "optimizer-step"


def test_an_input_size_that_fits_and_a_larger_one_that_fails_and_more_gpus_tried_in_zh(kb):
    """Pyramid-Flow#159: "zhi neng pao NUM_FRAMES=8, she cheng 16 huo 32 jiu CUDA OOM ... gai cheng 8*5 zhang A100
    pao, 16 zhen haishi OOM": the larger input fails (activations), and more GPUs were tried."""
    text = ("8 \u5f20 A100 \u4e0a\u5c31\u7b97 SHARD_STRATEGY=zero3\uff0c\u4e5f\u53ea\u80fd\u8dd1 NUM_FRAMES=8\uff0c"
            "\u8bbe\u6210 16 \u6216 32 \u5c31 CUDA OOM\u3002\u6211\u628a\u4ee3\u7801\u6539\u6210 8*5 \u5f20 A100 "
            "\u8dd1\uff0c 16 \u5e27\u8fd8\u662f OOM\u3002")
    assert "larger-input-fails" in parse_question(text, kb).topics
    assert "add-gpus" in {r.value for r in _said(text, kb).tried}


@pytest.mark.parametrize("text, short", [
    # QwenLM/Qwen#1043: "model_max_length tiao cheng 8192 de hua jiu hui bao OOM, wo de xunlian yangben changdu bing
    # meiyou tai chang" - the samples are short: the maximum, not the data, sets the padded length
    ("model_max_length \u8c03\u6210 8192 \u7684\u8bdd\u5c31\u4f1a\u62a5 OOM\uff0c\u6211\u7684\u8bad\u7ec3\u6837\u672c"
     "\u957f\u5ea6\u5e76\u6ca1\u6709\u592a\u957f\u3002", True),
    ("It OOMs at max_length 8192 although my samples are not that long.", True),
    # ...the configured sequence length called "not long" is no statement about the samples (siiRL#46)
    ("max_model_len=10k \u65f6\u5c31 OOM \u4e86\u3002 10k \u7684\u5e8f\u5217\u957f\u5ea6\u5e76\u4e0d\u7b97"
     "\u7279\u522b\u957f\u3002", False),
])
def test_samples_said_to_be_short_where_the_maximum_fails_are_padded_to_it(text, short, kb):
    _, _, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    rules = {r for c in diag.causes for r in c.rules}
    assert ("short-samples-padded-to-the-maximum" in rules) is short
    if short:
        assert diag.fixes[0].id == "sequence-packing"


@pytest.mark.parametrize("text", [
    # NVIDIA-NeMo/RL PR 3592: a SIGKILLed vLLM shard's EngineCore kept 115 GiB; the replacement never fits
    "One vLLM generation shard got SIGKILLed; why is the memory still taken when the shard is dead?",
    "\u628a\u8fdb\u7a0b kill \u6389\u4ee5\u540e\u663e\u5b58\u8fd8\u5728\uff0c"
    "\u65b0\u7684 vLLM \u8d77\u4e0d\u6765\u3002",
])
def test_memory_held_after_its_process_died_is_a_leftover_process_even_beside_an_engine(text, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.owner_gone"]
    assert diag.causes[0].id == "foreign-process" and diag.fixes[0].id == "kill-stale-processes"
    assert "shrink-colocated-engine" in {a.id for a in diag.avoid}
    assert {"memory-growth", "non-pytorch-memory"} <= set(diag.ruled_out)


def test_memory_held_by_a_running_engine_is_not_a_dead_processes_leftover(kb):
    _, flat, _ = pipeline.run(pipeline.Inputs(question="After vLLM goes to sleep 20 GB is still held on each GPU."), kb)
    assert not flat["situation.owner_gone"]


def test_a_load_said_in_plain_words_is_the_checkpoint_load_and_a_zero3_run_there_is_checked(kb):
    """deepspeedai/DeepSpeed#8084: "Every GPU goes to ~170GB during the load ... under an active HfDeepSpeedConfig
    (ZeRO-3)": the load phase, and a ZeRO-3 run whole on every rank there is a partitioning that did not apply."""
    text = ("Loading the model with from_pretrained under an active HfDeepSpeedConfig (ZeRO-3): every GPU goes to "
            "~170GB during the load and I get CUDA OOM before training even starts.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text, overrides=["zero_optimization.stage=3"]), kb)
    assert flat["situation.phase"] == "checkpoint-load"
    assert "setting-not-applied" in {c.id for c in diag.causes}


def test_one_gpu_full_while_the_others_are_light_in_a_zero3_run_checks_what_that_rank_holds(kb):
    """QwenLM/Qwen#755: "zong shi mou zhang GPU shunjian bei dabao, ci shi qita 7 ka zhanyong bu duo" with ZeRO-3: an
    equal shard per rank cannot make one GPU full - what that rank holds beyond its shard is the question."""
    text = ("\u7528\u4ed3\u5e93\u7ed9\u5b9a\u7684 zero3 \u914d\u7f6e\u5168\u91cf\u5fae\u8c03\uff0cOOM\u3002"
            "\u603b\u662f\u67d0\u5f20 GPU \u77ac\u95f4\u88ab\u6253\u7206\uff0c\u6b64\u65f6\u5176\u4ed6 7 \u5361"
            "\u5360\u7528\u4e0d\u591a\u3002")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.where"] == "some-ranks"
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"


def test_reverting_a_named_package_back_to_a_version_says_it_worked_before(kb):
    # huggingface/trl#876: "reverting trl back to v0.7.1, I'm able to run the fine-tuning job"
    sit = _said("trl v0.7.2 hits a CUDA OOM regardless of batch size. Leaving all hyperparameters unchanged but "
                "reverting trl back to v0.7.1, I'm able to run the fine-tuning job without any errors.", kb)
    assert sit.worked_before and [r.value for r in sit.changed] == ["stack"]


def test_an_engine_pool_refusing_expandable_segments_is_a_config_conflict_not_a_host_kill(kb):
    """unslothai/unsloth-zoo#1030: Unsloth wraps vLLM's standby assertion as "MemoryError: Your GPU ran out of memory"
    on a B200 with 180 GB free; the assertion itself is the conflict with expandable_segments."""
    log = ("MemoryError: Your GPU ran out of memory\n"
           "Standby mode is not supported with expandable segments.\n")
    assert not parse_log(log.splitlines(), kb).host_oom
    _, _, diag = pipeline.run(pipeline.Inputs(
        question="Unsloth GRPO with a colocated vLLM engine in standby mode (UNSLOTH_VLLM_STANDBY=1) fails at load "
                 "with 'Your GPU ran out of memory' on a B200 with 180 GB free.",
        log=log.splitlines(), env=["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"]), kb)
    assert "config-incompatibility" in {c.id for c in diag.causes} and "host-oom" not in {c.id for c in diag.causes}
    assert "confirm-setting-applied" in [f.id for f in diag.fixes[:2]]
    assert "expandable-segments" in {a.id for a in diag.avoid}


def test_only_one_gpu_holding_memory_in_zh_is_some_ranks(kb):
    # InternLM/xtuner#846: "zhiyou yi kuai GPU shang you xiancun zhanyong, qiyu GPU de xiancun dou shi kong de"
    sit = _said("\u8bad\u7ec3\u8fc7\u7a0b\u4e2d\u53ea\u6709\u4e00\u5757GPU\u4e0a\u6709\u663e\u5b58\u5360\u7528"
                "\uff0c\u5176\u4f59GPU\u7684\u663e\u5b58\u90fd\u662f\u7a7a\u7684\u3002", kb)
    assert sit.where is not None and sit.where.value == "some-ranks"


def test_a_command_pasted_with_its_output_after_a_trailing_backslash_is_not_cut(kb):
    """hpcaitech/ColossalAI#4470: the launch command's last option kept its backslash, an empty line, then the OOM the
    program printed - that is output, not a command line that lost the settings above it."""
    from memtune.inputs.shell_lines import cut_by_comment

    assert cut_by_comment(["torchrun --standalone --nproc_per_node=1 train_reward_model.py \\", "--max_len 2048 \\",
                           "", "torch.cuda.OutOfMemoryError: CUDA out of memory."]) is None


def test_a_shorter_input_that_runs_is_a_larger_one_that_fails_and_gemini_cpu_placement_is_offload(kb):
    # hpcaitech/ColossalAI#4470: "If I lower max_len to 1000 it runs OK", GeminiStrategy(placement_policy='cpu')
    q = parse_question("max_len 2048 goes CUDA OOM. If I lower max_len to 1000 it runs OK.", kb)
    assert "larger-input-fails" in q.topics
    _, flat, _ = pipeline.run(pipeline.Inputs(question="OOM", overrides=["placement_policy=cpu"]), kb)
    assert flat["config.optimizer_cpu_offload"] is True


@pytest.mark.parametrize("name, size, moe", [
    ("moss-moon-003-base", 16, False), ("HunyuanVideo", 13, False), ("dbrx-instruct", 132, True),
    ("Kimi-K2", 1000, True), ("MiniMax-M2", 230, True), ("MiniMax-Text-01", 456, True),
    ("CogVLM2", 19, False), ("CogVLM", 17, False), ("MiniCPM-Llama3-V 2.5", 8.5, False), ("miniCPM-V2.5", 8.5, False),
    ("MiniCPM-V-2_6", 8.1, False), ("MiniCPM-o-2_6", 8.7, False), ("MiniCPM-V-2", 2.8, False),
])
def test_models_named_without_a_size_have_their_model_cards_total(name, size, moe, kb):
    q = parse_question(f"Full fine-tune of {name} OOMs on 8 GPUs.", kb)
    assert q.model_size_b == size and ("moe" in q.topics) is moe


def test_a_sizeless_moe_name_takes_an_moe_stand_in_and_its_state_needs_more_gpus(kb):
    # mosaicml/llm-foundry#1105: DBRX (132B MoE) full fine-tune on one node of 8 H100s; the recipe says ~64 x 80 GB
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="I'm trying to fine-tune dbrx-instruct on a single machine with 8 H100 GPUs and keep getting OOM.",
        gpu="8 H100 GPUs (8x80 GB)"), kb)
    assert flat["config.num_moe_experts"] and flat["derived.model_state_floor_ratio"] > 1
    assert diag.fixes[0].id == "add-gpus"


@pytest.mark.parametrize("text", [
    # NVIDIA/bionemo-framework (ESM-2 pretraining): the rise comes back with gc.collect(), so it is garbage kept alive
    "\u663e\u5b58\u5728\u8bad\u7ec3\u8fc7\u7a0b\u4e2d\u7f13\u6162\u4e0a\u6da8\uff0c\u6bcf\u9694\u5927\u7ea6 1000 "
    "\u6b65\u8c03\u7528\u4e00\u6b21 gc.collect(); torch.cuda.empty_cache() \u597d\u50cf\u80fd\u628a\u6da8\u4e0a\u53bb"
    "\u7684\u663e\u5b58\u6536\u56de\u6765\u3002micro batch size 48\uff0c\u8dd1\u5230\u7b2c 5800 \u6b65 OOM\u3002",
    "Memory creeps up over training with micro batch size 48 until it OOMs at step 5800; calling gc.collect() "
    "every 1000 steps frees it again.",
])
def test_memory_that_gc_collect_gives_back_is_a_leak_not_the_longest_batch(text, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.freed_by_collect"]
    assert "rising-reserve-follows-the-longest-batch" not in {r for c in diag.causes for r in c.rules}
    assert "memory-growth" in {c.id for c in diag.causes} and "track-memory-per-step" in {f.id for f in diag.fixes}


def test_ram_not_vram_names_the_host(kb):
    # TinyZero#62: "Ray errored out with OOM - RAM, not VRAM; I'm running on a machine with 32G RAM"
    sit = _said("I ran the 0.5B model for a few minutes before Ray errored out with OOM - RAM, not VRAM.", kb)
    assert sit.process is not None and sit.process.value == "host"


def test_the_trainer_starting_to_evaluate_is_the_eval_phase(kb):
    # huggingface/trl#893: "whenever the trainer starts evaluating, an OOM error occurs with my customized bleu metric"
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="Fine-tuning llama2 with SFTTrainer: whenever the trainer starts evaluating, an OOM error occurs with "
                 "my compute_metrics; without it everything is ok."), kb)
    assert flat["situation.phase"] == "eval" and diag.causes[0].id == "logits-loss-memory"


def test_an_oom_while_nccl_communicators_initialise_is_nccl_before_training_and_no_batch_fix(kb):
    # NVIDIA/JAX-Toolbox PR 383: "fail with an out-of-memory while the NCCL communicators are being initialized"
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="Our multi-GPU runs sometimes fail with an out-of-memory while the NCCL communicators are being "
                 "initialized."), kb)
    assert flat["situation.step"] == "before-training" and "nccl" in flat["situation.components"]
    assert diag.causes[0].id == "non-pytorch-memory"
    fixes = [f.id for f in diag.fixes]
    assert "reduce-micro-batch" not in fixes


def test_a_sharded_hf_run_that_fails_building_the_model_did_not_shard_it(kb):
    """oumi-ai/oumi#398: Llama-3.1-70B with Accelerate FSDP (FULL_SHARD, fsdp_cpu_ram_efficient_loading) on 8 x A100
    80GB OOMs 'on model instantiation'. The setting's name is no host memory, the optimizer state does not exist yet,
    and an eighth of the weights fits: the build did not shard them."""
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="Training Llama-3.1-70B with FSDP through accelerate (TRL SFT trainer) on one node of 8 A100-80GB "
                 "GPUs, fsdp_cpu_ram_efficient_loading true: the job OOMs on model instantiation, before any step.",
        overrides=["fsdp_sharding_strategy=FULL_SHARD"], gpu="8 A100-80GB"), kb)
    assert flat.get("situation.process") != "host"
    assert diag.causes[0].id == "setting-not-applied" and "capacity-model-state" in diag.ruled_out


def test_raising_the_per_device_batch_in_the_present_is_a_micro_batch_change(kb):
    # microsoft/DeepSpeedExamples#410: "When I increase per_device_train_batch_size to 32, it raises OOM"
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="per_device_train_batch_size is 16 in run_13b.sh. When I increase per_device_train_batch_size to "
                 "32, it raises OOM."), kb)
    assert flat["situation.changed"] == ["reduce-micro-batch"] and diag.fixes[0].id == "reduce-micro-batch"
    # the global batch named with a number is no micro-batch change (Code-LMs#21: "train_batch_size bian cheng 1")
    _, flat, _ = pipeline.run(pipeline.Inputs(question="I changed train_batch_size to 1 and it still OOMs."), kb)
    assert "reduce-micro-batch" not in (flat.get("situation.changed") or [])


def test_a_sharding_that_behaves_as_if_each_gpu_held_the_full_model_did_not_apply(kb):
    # huggingface/accelerate PR 3999: FSDP2 with TRANSFORMER_BASED_WRAP and no layer class wrapped nothing
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="FSDP2 doesn't seem to save memory here: each GPU behaves as if it holds the full model parameters "
                 "during forward, and the large model OOMs in the forward pass."), kb)
    assert flat["situation.not_applied_said"] and diag.fixes[0].id == "confirm-setting-applied"


def test_reserved_far_above_allocated_in_the_users_figures_is_the_allocators_cache(kb):
    # nvidia-cosmos/cosmos-rl PR 388: "fenpei le" (allocated, past) is memory in use, not a request
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="第 3 步之后真实 tensor 只分配了 60.93 GB，但 reserved 到了 126.97 GB，"
                 "卡基本被吃满了，怎么降下来？"), kb)
    assert flat.get("situation.failed_bytes") is None
    assert flat["situation.waste_source"] == "words" and flat["situation.waste_share"] > 0.5
    assert diag.causes[0].id == "fragmentation" and diag.fixes[0].id == "expandable-segments"


def test_one_dated_build_that_fits_and_the_next_that_fails_is_the_stack_moving(kb):
    # Lightning-AI/lightning-thunder#439: no 'upgrade' or 'regression' word, two nightly images
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="Llama-3-8B FSDP on 8 H100: it works with the pjnl-20240503 image and goes OOM with pjnl-20240504."),
        kb)
    assert flat["situation.worked_before"] and "stack" in flat["situation.changed"]
    assert diag.causes[0].id == "version-regression"
    # two versions, neither said to fit: no comparison
    _, flat, _ = pipeline.run(pipeline.Inputs(question="torch 2.4.0 and vllm 0.6.3 OOM on 8 H100."), kb)
    assert not flat.get("situation.worked_before")


def test_settings_called_small_in_the_clause_that_says_it_still_ooms_are_not_ruled_out(kb):
    # mosaicml/llm-foundry#468: "with these already very small settings it still OOMs"
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="我用下面这些已经很小的配置还是 OOM：global_train_batch_size = 1，"
                 "activation_checkpointing = true。"), kb)
    assert "oom" in flat["question.topics"] and flat["situation.oom_said"]
    assert diag.causes[0].id != "not-an-oom"


def test_a_conversion_pasted_before_the_training_command_is_a_finished_step(kb):
    # Lightning-AI/lit-gpt#781: download, convert, prepare, then the LoRA fine-tune ran out of memory
    ckpt = "--checkpoint_dir checkpoints/mistralai/Mistral-7B-Instruct-v0.1"
    log = ["python scripts/download.py --repo_id mistralai/Mistral-7B-Instruct-v0.1",
           f"python scripts/convert_hf_checkpoint.py {ckpt}", f"python finetune/lora.py {ckpt} --precision bf16-true"]
    question = ("I ran download, convert_hf_checkpoint and prepare_alpaca, then finetune/lora.py on one A100 40GB: "
                "CUDA out of memory.")
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question, log=log), kb)
    assert flat.get("situation.phase") != "conversion"
    # the converter pasted last is the program that failed
    _, flat, _ = pipeline.run(pipeline.Inputs(question="convert_hf_checkpoint runs out of memory", log=log[:2]), kb)
    assert flat.get("situation.phase") == "conversion"


@pytest.mark.parametrize("text", ["I am not using FSDP.",
                                  "Is there any code to train it using FSDP? It may require FSDP."])
def test_fsdp_said_off_or_asked_for_is_a_run_that_does_not_shard(text, kb):
    # haotian-liu/LLaVA#155, yifan123/flow_grpo#237: every GPU holds the whole 13-14B model state
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question=f"Training a 13B model on 8 A100 40 GB GPUs runs out of memory. {text}"), kb)
    assert flat["situation.trainer"] == "own" and not flat.get("config.use_torch_fsdp2")
    assert "megatron-fsdp" in flat["situation.absent"]
    assert "replicated-model-state-fills-the-gpu" in diag.causes[0].rules
    assert diag.fixes[0].id == "megatron-fsdp" and "add-gpus" not in [f.id for f in diag.fixes]
    _, flat, _ = pipeline.run(pipeline.Inputs(question="Training a 13B model with FSDP on 8 A100 40 GB OOMs."), kb)
    assert flat["situation.trainer"] == "fsdp"


def test_a_run_seen_using_far_less_than_the_counted_state_is_not_over_capacity_by_the_count(kb):
    # huggingface/trl#5700: a 9B model "uses 8.5 GB" on a 24 GB card - adapters or quantised weights
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="Training a 9B model on a single RTX 3090: in text mode it uses 8.5 GB, in vision mode it uses "
                 "20.3 GB and then OOMs."), kb)
    assert flat["derived.stated_usage_bytes"] < 0.5 * flat["derived.model_state_floor_bytes"]
    assert "no-layout-of-these-gpus-holds-the-model-state" not in [r for c in diag.causes for r in c.rules]


def test_a_training_batch_of_one_bounds_the_micro_batch(kb):
    # espnet/espnet#2831: "batch-size yijing she cheng 1" - lowering the batch is no lever left
    for text in ["train.yaml 里 batch-size 已经设成 1 了，还是 CUDA out of memory。",
                 "With batch_size=1 it still runs out of memory on one GPU."]:
        _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
        assert flat["config.micro_batch_size"] == 1
        assert "reduce-micro-batch" not in [f.id for f in diag.fixes]
    _, flat, _ = pipeline.run(pipeline.Inputs(question="eval batch size 1, training OOMs"), kb)
    assert flat.get("config.micro_batch_size") is None


def test_a_sharding_said_not_to_shard_did_not_apply(kb):
    # huggingface/alignment-handbook#58: ZeRO-3 set, every GPU holds the whole 70B (a device_map was passed)
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="Using the ZeRO-3 config for llama 2 70b on 8xA100 I get OOM. Why isn't ZeRO-3 sharding the model "
                 "here?"), kb)
    assert flat["situation.not_applied_said"] and diag.fixes[0].id == "confirm-setting-applied"


def test_dataparallel_code_in_the_traceback_is_one_process_on_every_gpu(kb):
    # zai-org/ChatGLM-6B#914: CUDA_VISIBLE_DEVICES=0,1,2,3 with a python launch - nn.DataParallel, GPU 0 fills
    log = ["Traceback (most recent call last):",
           '  File "main.py", line 370, in main',
           "    train_result = trainer.train(resume_from_checkpoint=checkpoint)",
           '  File "/x/site-packages/torch/nn/parallel/_functions.py", line 34, in backward',
           "    return (None,) + ReduceAddCoalesced.apply(ctx.input_device, ctx.num_inputs, *grad_outputs)",
           "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question="4*32g multi-GPU p-tuning OOMs", log=log), kb)
    assert "dataparallel-frames" in flat["log.signatures"]
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"
    # DistributedDataParallel's own file is no DataParallel
    ddp = [*log[:3], '  File "/x/site-packages/torch/nn/parallel/distributed.py", line 1, in forward', "  x", log[-1]]
    _, flat, _ = pipeline.run(pipeline.Inputs(question="OOM", log=ddp), kb)
    assert "dataparallel-frames" not in flat["log.signatures"]


def test_running_out_of_cuda_memory_is_an_oom(kb):
    # huggingface/transformers#39136: "The job runs out of CUDA memory before the first training step"
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="With bf16_full_eval=True the job runs out of CUDA memory before the first training step."), kb)
    assert "oom" in flat["question.topics"] and diag.causes[0].id != "not-an-oom"


def test_an_engine_sleep_that_frees_zero_bytes_did_not_take_effect(kb):
    # UniRL#481: SGLang started without its memory saver; sleep() returns HTTP 200 and frees nothing
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="The colocated SGLang rollout's sleep() returns HTTP 200 but frees zero bytes, so we keep "
                 "mem_fraction_static at 0.3. Why does sleep() not release anything?"), kb)
    assert flat["situation.not_applied_said"] and diag.causes[0].id == "setting-not-applied"
    assert diag.fixes[0].id == "confirm-setting-applied"


def test_a_version_said_broken_beside_one_said_working_is_the_stack_moving(kb):
    # pytorch/pytorch#174244: "Working correctly (Jan 29) version ... Broken (Feb 2) version", no word 'upgrade'
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="A run that was supposed to fit now goes OOM even at batch size 1. Working correctly (Jan 29) "
                 "version: torch 2.11.0.dev20260129+cu126. Broken (Feb 2) version: torch 2.11.0.dev20260202+cu126."),
        kb)
    assert "stack" in flat["situation.changed"] and diag.causes[0].id == "version-regression"
    zh = "torch 2.4.0 版本可以正常训练，torch 2.5.1 版本有问题，显存不足"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=zh), kb)
    assert "stack" in flat["situation.changed"]


def test_a_phase_said_to_have_finished_in_chinese_is_not_where_it_failed(kb):
    # zai-org/CogVLM#394: "moxing jiazai wancheng zhihou" (after the model finished loading) the barrier fails
    _, flat, _ = pipeline.run(pipeline.Inputs(question="在完成环境配置后，模型加载完成之后，报错信息如下"), kb)
    assert flat.get("situation.phase") is None and flat["situation.after_phase"] == "checkpoint-load"


def test_nccl_failing_to_create_its_shm_segment_is_the_containers_shared_memory(kb):
    # zai-org/CogVLM#394: NCCL's "unhandled system error" at the first barrier, its last error naming /dev/shm
    log = ["torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1691, unhandled system error",
           "Last error:", "Error while creating shared memory segment /dev/shm/nccl-ENPWQG (size 4194656)"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question="4x A6000 LoRA fails at the barrier", log=log), kb)
    assert "nccl-shm-segment" in flat["log.signatures"]
    assert diag.causes[0].id == "not-an-oom" and "container-shared-memory-limit" in diag.causes[0].rules


def test_the_last_program_a_pasted_launch_line_starts_names_the_phase(kb):
    # facebookresearch/metaseq#589: consolidating FSDP shards on the host under a SLURM memory limit
    log = ["python -m metaseq.scripts.consolidate_fsdp_shards ckpt/checkpoint_last --save-prefix ckpt/consolidated"]
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="The consolidation step runs out of memory with a SLURM limit of 500GB. How much RAM does it need?",
        log=log), kb)
    assert flat["situation.phase"] == "conversion" and "host-memory" in flat["question.topics"]
    assert diag.fixes[0].id == "convert-sharded"


def test_every_gpu_holding_one_process_per_rank_is_ranks_touching_every_device(kb):
    # hiyouga/LlamaFactory#5750: "each card shows as many processes as cards, from the checkpoint load on; when
    # training starts it OOMs" - the load finished, the ranks are not pinned to their GPU
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="单机多卡训练时一张卡上有多个进程，每张卡上进程的数量=用了多少卡。从刚开始加载ckpt的时候就出现很多个进程，"
                 "然后到开始训练的时候就会爆显存。"), kb)
    assert flat["situation.device_zero_crowded"] and flat.get("situation.phase") is None
    assert flat["situation.step"] == "first-step" and diag.causes[0].id == "foreign-process"
    # the failure's own clause tying the first step to the load keeps the load ("after resuming, the first round OOMs")
    _, flat, _ = pipeline.run(pipeline.Inputs(
        question="只要从保存的 checkpoint resume，恢复之后第一轮就 OOM。"), kb)
    assert flat["situation.phase"] == "checkpoint-load"


def test_memory_left_by_a_run_that_crashed_or_was_interrupted_is_its_leftover_processes(kb):
    # rllm-org/rllm#568: after a crash or Ctrl-C, the vLLM replicas and orphaned Ray actors keep their memory
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="When my run crashes, or when I Ctrl-C it, the vLLM rollout replicas stay awake on every GPU and keep "
                 "holding tens of GB each; I still see orphaned Ray actors after the driver is gone."), kb)
    assert flat["situation.owner_gone"] and diag.fixes[0].id == "kill-stale-processes"


def test_vllm_profiling_its_cuda_graphs_is_graph_capture_and_a_refused_fix_is_not_first(kb):
    # pytorch/torchtitan#3865: OOM inside vLLM's cudagraph memory profiling; DeepEP needs expandable_segments off
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="The vLLM generator OOMs during engine init, inside cudagraph memory profiling, before the KV cache "
                 "is allocated. DeepEP needs expandable_segments:False, so the usual expandable_segments fix is out.",
        env=["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False"]), kb)
    assert flat["situation.phase"] == "graph-capture" and "expandable-segments" in flat["situation.refused"]
    assert diag.causes[0].id == "cuda-graph-memory" and diag.fixes[0].id != "expandable-segments"


@pytest.mark.parametrize("said", [
    # pytorch/torchtitan#4145 (set issue-24-s99): the model's two KV heads cap TP; the engine has GPUs of its own
    "Muse Glimmer 30B on 8x H100: 6 trainer GPUs (FSDP=3 x TP=2) and 2 vLLM generator GPUs. The first step "
    "completes, the trainer OOMs at step 2. I can't raise TP because the model only has 2 KV heads.",
    "8 张 H100：6 张训练卡 FSDP=3 x TP=2，2 张 vLLM generator GPUs。第一步跑完，第二步 OOM。"
    "TP 不能再加，模型只有 2 个 KV head。",
])
def test_tp_said_to_be_capped_is_no_fix_and_the_engines_own_gpus_are_no_colocation(said, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=said), kb)
    assert "increase-tp" in flat["situation.refused"] and "increase-tp" not in [f.id for f in diag.fixes]
    assert flat["situation.process"] == "separate-engine"


def test_the_gpu_count_said_to_fail_is_the_runs_not_the_machines(kb):
    # facebookresearch/metaseq#131: a DGX-2 with 16 V100s; loading OPT-175B on 8 of them OOMs
    q = parse_question("我们有一台 DGX-2，16 张 V100 32GB，想跑 OPT 的 175B 模型。把模型加载到 8 张卡上会 OOM。", kb)
    assert q.num_gpus == 8
    # several counts said to fail: the first one named stays
    q = parse_question("GPU是8张H800。8GPU跑不了，7GPU也是OOM。", kb)
    assert q.num_gpus == 8


def test_a_stand_in_shape_counts_the_whole_model_at_the_size_the_user_named(kb):
    # OPT-175B has no preset: its stand-in is smaller, but 175B of FP16 weights are 350 GB, 43.75 GB per GPU on 8
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="Loading OPT 175B on 8 V100 32GB OOMs."), kb)
    assert flat["config.approximate_shape"]
    assert flat["derived.model_weights_bytes"] == pytest.approx(175e9 * 2, rel=0.02)
    assert flat["derived.weights_floor_ratio"] > 1 and diag.causes[0].id == "capacity-model-state"


def test_full_parameters_rather_than_lora_is_no_lora_run_and_moss_is_its_16b_model(kb):
    # deepseek-ai/DeepSeek-Coder#78: "full parameters rather than LoRA"; OpenMOSS/MOSS#189: "MOSS de weitiao daima"
    q = parse_question("How can I finetune deepseek-coder-33b-instruct with full parameters rather than LoRA?", kb)
    assert q.layout.get("task") == "sft"
    assert parse_question("在8张40g A100上运行 MOSS 的微调代码，bsz=1，报显存不够错误", kb).model_size_b == 16
    assert parse_question("moss grows on the rocks", kb).model_size_b is None


def test_other_ranks_holding_memory_on_gpu_0_and_each_rank_on_its_own_gpu(kb):
    # pytorch/pytorch#135279: non-0 ranks each put ~1 GB on GPU 0; "keep each rank on its own GPU" names no engine
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="In my torchrun job every non-0 rank is occupying ~1GB memory on GPU 0 - nvidia-smi shows one extra "
                 "process per rank on GPU 0. How do I keep each rank on its own GPU?"), kb)
    assert flat["situation.device_zero_crowded"] and flat.get("situation.process") is None
    assert diag.fixes[0].id == "confirm-setting-applied"


def test_lightning_model_checkpointing_is_the_checkpoint_save(kb):
    # Lightning-AI/pytorch-lightning#20312: FSDP's full state dict gathered at the save; disabling it removes the OOM
    _, flat, diag = pipeline.run(pipeline.Inputs(
        question="Using FSDP and model checkpointing in Lightning 2.3, training runs a full epoch fine, then I get "
                 "CUDA OOM. With model checkpointing disabled the memory error went away."), kb)
    assert flat["situation.phase"] == "checkpoint-save" and diag.fixes[0].id == "checkpoint-save-memory"


def test_pretrained_names_a_model_and_only_evaluation_is_forward_only(kb):
    # EleutherAI/lm-evaluation-harness#770: "pretrained=huggyllama/llama-13b ... It's only evaluation, no training"
    q = parse_question("accelerate launch main.py --model_args pretrained=huggyllama/llama-13b. It's only evaluation, "
                       "no training.", kb)
    assert q.layout.get("task") != "pretrain"
    _, flat, _ = pipeline.run(pipeline.Inputs(question="It's only evaluation, no training, and it OOMs."), kb)
    assert flat["situation.forward_only"]


def test_another_dataset_with_larger_samples_is_a_larger_input_and_no_growth(kb):
    # modelscope/ms-swift#5289: the same command, only the dataset differs; its images are much larger
    q = parse_question("命令都是同样的命令，只是数据集不一样，第二次运行几个step之后就爆显存了，"
                       "第二次运行的数据集图像size比第一次的大不少。", kb)
    assert "larger-input-fails" in q.topics
    zh = "第二次运行的数据集图像size比第一次的大不少，几个step之后爆显存"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=zh), kb)
    assert flat.get("situation.trend") != "grows"
    # code that accumulates into a buffer is no memory growth; memory that accumulates every step is
    _, flat, _ = pipeline.run(pipeline.Inputs(
        question="Automodel accumulates the expert outputs into an FP32 buffer and the MoE forward OOMs."), kb)
    assert flat.get("situation.trend") != "grows"
    _, flat, _ = pipeline.run(pipeline.Inputs(question="Memory looks like something accumulates every step, then OOM."),
                              kb)
    assert flat.get("situation.trend") == "grows"


def test_hugging_faces_loading_checkpoint_shards_is_a_pretrained_weights_load(kb):
    # ymcui/Chinese-LLaMA-Alpaca-2#547: the OOM at "Loading checkpoint shards 2/3" reads no optimizer state
    q = parse_question("6卡指令精调，Loading checkpoint shards 到 2/3 的时候就报 CUDA out of memory", kb)
    assert "pretrained-weights" in q.topics


def test_a_length_cap_written_with_a_space_is_the_sequence_length(kb):
    # hiyouga/LlamaFactory#8471: a pasted config "cutoff_len 20480" (no '=' or ':')
    q = parse_question("finetuning_type lora，cutoff_len 20480，per_device_train_batch_size 1，两张 A100 OOM", kb)
    assert q.layout.get("seq_length") == 20480


def test_a_gpu_model_number_is_no_gpus_per_node_and_a_rollout_tp_names_no_megatron(kb):
    # ToolRL#39: "6 x 3090 GPUs" is six RTX 3090s (not 18,540 GPUs); the verl actor is FSDP although the rollout's
    # own actor_rollout_ref.rollout.tensor_model_parallel_size=4 is set
    assert parse_question("training on 6 x 3090 GPUs (24GB each) OOMs", kb).num_gpus == 6
    assert parse_question("2 x 8 GPUs OOM", kb).num_gpus == 16
    assert parse_question("机器环境：3090显卡x2，训练 Qwen3 OOM", kb).num_gpus != 3090
    _, flat, _ = pipeline.run(pipeline.Inputs(
        question="verl GRPO OOMs", overrides=["actor_rollout_ref.rollout.tensor_model_parallel_size=4",
                                             "actor_rollout_ref.actor.ppo_micro_batch_size=1"]), kb)
    assert flat["situation.trainer"] == "fsdp"


def test_a_figures_integer_part_is_no_sequence_length(kb):
    # NVIDIA-NeMo/RL#3314: "peak memory grows linearly with sequence length: 4.06 GiB at 2048 tokens"
    q = parse_question("The loss step's peak grows linearly with sequence length: 4.06 GiB at 2048 tokens.", kb)
    assert q.layout.get("seq_length") != 4
    assert parse_question("sequence length 4096 OOMs", kb).layout.get("seq_length") == 4096


def test_numbers_written_with_thousands_separators(kb):
    # huggingface/accelerate#4188: "peak VRAM per GPU above baseline is 65,378 MiB" is 65378 MiB, not 378 MiB
    q = parse_question("Llama 3 8B, seq_length 32,768 on 8x H100 80GB, OOMs at 65,378 MiB", kb)
    assert [f["bytes"] for f in q.memory_figures if f["role"] == "oom"] == [65378 * 2**20]
    assert q.layout.get("seq_length") == 32768
    # lists stay lists: neither "4096,8192" nor "24GB,48GB" is one number
    q = parse_question("seq 4096,8192 on 24GB,48GB cards", kb)
    assert q.layout.get("seq_length") == 4096
    assert sorted(f["bytes"] for f in q.memory_figures) == [24e9, 48e9]
    # NVIDIA-NeMo/RL#3476: an amount and its bracketed other unit are one figure, and "but" ends what names it
    q = parse_question("PyTorch had 162,286 MiB (158.5 GiB) reserved but only 19,191 MiB (18.7 GiB) actually live.", kb)
    assert [f["role"] for f in q.memory_figures] == ["reserved", "reserved", "allocated", "allocated"]


def test_a_fully_sharded_state_with_room_to_spare_is_not_what_fills_the_gpu(kb):
    # xiaomi-research/recogdrive#87: InternVL3-8B, ZeRO-3 on 8 x A800 80GB, batch size 1 with gradient checkpointing:
    # each GPU holds under a quarter of its memory in state, so six images per sample fill it, and more GPUs would not
    q = ("我在用 InternVL3 8B 做微调，8 张 A800 80GB，即使 batch size=1 训练过程中还是会 CUDA OOM。"
         "一条数据包含 6 张图像。已经用了 ZeRO-3 和 gradient checkpointing，我理解 ZeRO-3 只降参数/梯度/优化器。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["config.use_torch_fsdp2"] and flat["derived.model_state_ratio"] < 0.5
    assert "capacity-model-state" in diag.ruled_out
    assert diag.causes[0].id == "capacity-activations" and diag.fixes[0].id == "cap-vision-tokens"
    assert "add-gpus" not in [f.id for f in diag.fixes]
    # an RL framework keeps several models where the count has one: the state is not ruled out there
    rl = "OpenRLHF PPO, 12B actor and critic with ZeRO-3 on 16 A100 80GB, OOM when training actor and critic"
    _, _, diag = pipeline.run(pipeline.Inputs(question=rl), kb)
    assert "capacity-model-state" not in diag.ruled_out


def test_zero2_shards_gradients_too_and_leaves_the_inputs_to_fill_the_gpu(kb):
    # modelscope/ms-swift#2743 (set issue-24-s99): Qwen2-VL-7B full SFT with "deepspeed zero2" on 8 x A100 80GB,
    # micro-batch 1 and gradient checkpointing, images and videos without a pixel cap. ZeRO-2 shards the optimizer
    # state and the gradients (the weights stay whole): about 4.5 bytes a parameter per GPU, not 16-18.
    q = ("单机 8 卡 A100 80GB，全量微调 Qwen2-VL-7B-Instruct 一直 OOM。已经是 per_device_train_batch_size 1，"
         "开了 gradient_checkpointing、deepspeed zero2，数据是自己的多模态 jsonl（图片和视频都有）。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["config.use_distributed_optimizer"] is True
    assert flat["config.data_parallel_sharding_strategy"] == "optim_grads"
    assert flat["derived.model_state_ratio"] < 0.5
    assert "capacity-model-state" in diag.ruled_out
    assert diag.causes[0].id == "capacity-activations" and diag.fixes[0].id == "cap-vision-tokens"
    # ZeRO-1 shards the optimizer state only; a ZeRO-2 said not to be used, or asked about, shards nothing
    assert parse_question("deepspeed zero1, 8 A100", kb).layout == {"use_distributed_optimizer": True}
    assert parse_question("we run ZeRO stage 2 on 8 GPUs", kb).layout == {
        "use_distributed_optimizer": True, "data_parallel_sharding_strategy": "optim_grads"}
    assert parse_question("没有开 zero2，8 卡 A100", kb).layout == {
        "use_distributed_optimizer": False, "data_parallel_sharding_strategy": None}
    assert parse_question("should I use zero2?", kb).layout == {}


@pytest.mark.parametrize("text", [
    # vllm-project/vllm#20860: the run is over, its workers are not
    "After the run completed, each GPU still shows about 73GB of VRAM in use at 0% utilization and 8 processes remain.",
    "训练结束后显存还被占着 70 多 G，nvidia-smi 里还有 8 个进程",
])
def test_memory_still_held_after_the_run_ended_is_a_leftover_process(text, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.owner_gone"] is True
    assert diag.fixes[0].id == "kill-stale-processes"


def test_preference_pairs_of_a_small_model_with_a_large_vocabulary_are_its_logits(kb):
    # huggingface/trl#3168: TRL's DPO quick start with Qwen2.5-0.5B-Instruct runs out of memory at step 0 on an A100
    # 80GB: chosen + rejected sequences and fp32 log-probs over a 151,936-entry vocabulary, not the 0.5B weights
    q = "I ran TRL's DPO quick start unchanged on Qwen2.5-0.5B-Instruct on one A100 80GB and it OOMs at step 0."
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert "preference-training" in flat["question.topics"]
    assert diag.causes[0].id == "logits-loss-memory" and diag.fixes[0].id == "logits-chunking"
    # the same words for a 70B model: its layers, not its vocabulary, hold what a token costs
    big = q.replace("Qwen2.5-0.5B-Instruct", "Qwen2.5-72B-Instruct")
    _, _, diag = pipeline.run(pipeline.Inputs(question=big), kb)
    assert "preference-pairs-over-a-large-vocabulary" not in {r for c in diag.causes for r in c.rules}


@pytest.mark.parametrize("text", [
    # meta-llama/llama-cookbook#785: more GPUs under FSDP do not raise the context length that fits
    "When I increase --context_length with --enable_fsdp, no matter how many GPUs are available it ends with "
    "OutOfMemoryError. Llama-3.2-1B on 8x A40 48GB.",
    "开了 FSDP 微调 Llama-3.2-1B，序列加长以后 OOM，加再多卡也没用，8 张 A40 48GB。",
])
def test_more_gpus_said_to_change_nothing_leave_each_gpus_micro_batch(text, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert "add-gpus" in flat["situation.no_effect"]
    assert diag.causes[0].id == "capacity-activations" and "setting-not-applied" not in {c.id for c in diag.causes[:1]}
    assert "add-gpus" in {a.id for a in diag.avoid}


def test_more_memory_after_an_upgrade_is_one_software_change_that_ran_before(kb):
    # vllm-project/vllm#15617: "after upgrading from vllm 0.7.3 to 0.8.2 the memory needed went up a lot"
    for q in ["8 张 RTX 4090 跑 vLLM 推理，从 vllm 0.7.3 升级到 0.8.2 之后需要的显存大幅增加，运行中还经常 OOM。",
              "After upgrading from vllm 0.7.3 to 0.8.2 the memory needed went up a lot and it often OOMs."]:
        _, flat, _ = pipeline.run(pipeline.Inputs(question=q), kb)
        assert flat["situation.worked_before"] is True and flat["situation.changed"] == ["stack"]
    # Ascend/MindSpeed !3329 (set issue-24-s99): a branch the run moved to, nothing but the version different
    q = ("We moved our Megatron training from the MindSpeed 0.12 branch to the core_r0.15.3 branch. Same layout, but "
         "peak memory is now higher, enough to push configs that used to fit into OOM. Nothing changed except the "
         "version.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.worked_before"] is True and flat["situation.changed"] == ["stack"]
    assert "version-regression" in [c.id for c in diag.causes]
    # huggingface/transformers#30010: an upgrade with spikes in SDPA's backward is the version's, not lost recompute
    q = ("QLoRA Llama-7B with the SDPA attention, when run with transformers 4.37.2 on a 24GB card, uses less memory "
         "than 4.38.2 and 4.39.3 with identical code (PyTorch 2.2.2, CUDA 12.1, max_sequence_length 1280 and "
         "batch_size 4). 4.39.3 uses almost a GB more memory at a sequence length of 1280 and errors out at 1536. The "
         "memory history shows consistently large memory spikes during the backward pass of the SDPA kernel, and "
         "when sharding Llama across two cards with FSDP and gradient checkpointing the spikes show up as ~10GB "
         "outliers. Nothing in my code changed - why does the newer version need more memory?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.trend"] == "spike" and "recompute" in flat["question.topics"]
    assert diag.causes[0].id == "version-regression"


def test_host_ram_rising_with_the_loaders_workers_leads_with_fewer_workers(kb):
    # hpcaitech/Open-Sora#526: 8 ranks x num_workers=8 of 51-frame video batches hold ~450 GB of host RAM
    q = ("Open-Sora 1.2 on 8 GPUs with num_workers=8 for the dataloader: the node's CPU memory usage goes up to about "
         "450 GB and looks like it keeps leaking. The problem is host RAM, not GPU memory.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["config.num_workers"] == 8 and flat["situation.phase"] == "data-loading"
    assert diag.fixes[0].id == "reduce-dataloader-workers"
    # the loader only asked about ("zero3_offload? dataloader?"): no workers are said to run
    q = ("GRPO colocate on 8 GPUs: system RAM (not GPU memory) rises linearly and never comes back down. Is it my "
         "config (zero3_offload? dataloader?) or the framework?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["config.num_workers"] is None
    assert "host-memory-grows-in-the-data-loader" not in {r for c in diag.causes for r in c.rules}


@pytest.mark.parametrize("text, changed", [
    # PaddlePaddle/PaddleNLP#5822: "kai le recompute" turns on recompute; the batch size after it is only stated
    ("两张卡做 ChatGLM-6B 的 LoRA 微调，开了 recompute， src_length 2048、per_device_train_batch_size 4、"
     "gradient_accumulation_steps 4。训练过程中显存一直在慢慢涨，直到 OOM。", False),
    # OpenRLHF#908: "zhiyao ba micro_train_batch_size shezhi wei 2 jiu hui oom" sets the batch size itself
    ("我只要把micro_train_batch_size设置为2就会oom。", True),
    ("When I increase per_device_train_batch_size to 32, it raises OOM.", True),
])
def test_a_setting_listed_with_its_value_is_stated_not_changed(text, changed, kb):
    _, flat, _ = pipeline.run(pipeline.Inputs(question=text), kb)
    assert ("reduce-micro-batch" in (flat["situation.changed"] or [])) is changed


def test_a_library_moves_the_stack_only_beside_a_version_number(kb):
    # unslothai/unsloth-zoo#549: "transformers from 4.57.x up to 5.2 ... memory clearly higher than before"
    q = ("我把 transformers 从 4.57.x 升到 5.2 之后，用 Unsloth 做 LoRA 微调，"
         "同一个脚本、同样的 batch 和序列长度，显存占用明显比以前高。")
    _, flat, _ = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.changed"] == ["stack"] and flat["situation.worked_before"] is True
    # InternLM/xtuner#521: switching to another DeepSpeed config is no software version
    q = "8 张 A100 40G 微调 Mixtral 8x7b 报 OOM。换成 deepspeed_zero2_offload 依然会 OOM，我的 batch size 已经是 1 了。"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=q), kb)
    assert "stack" not in (flat["situation.changed"] or [])


@pytest.mark.parametrize("text, gpus", [
    # verl-project/verl#5840: the whole run is both nodes' GPUs, not one node's
    ("2 机、每机 8 张 H20 跑 GRPO", 16),
    ("2 node, 8x H20 GPU per node", 16),
    ("2*8*h20训练7b模型", 16),  # OpenRLHF#908
    ("1 node, 8 GPUs", 8),
])
def test_nodes_times_gpus_per_node(text, gpus, kb):
    assert parse_question(text, kb).num_gpus == gpus


def test_accelerate_handing_the_model_to_deepspeed_is_the_build(kb):
    # QwenLM/Qwen-VL#205: full fine-tuning on one A100 80G fails inside deepspeed.initialize, building the optimizer
    log = """Traceback (most recent call last):
  File "/envs/qwen/lib/python3.8/site-packages/transformers/trainer.py", line 1687, in _inner_training_loop
    model, self.optimizer, self.lr_scheduler = self.accelerator.prepare(
  File "/envs/qwen/lib/python3.8/site-packages/accelerate/accelerator.py", line 1209, in prepare
    result = self._prepare_deepspeed(*args)
  File "/envs/qwen/lib/python3.8/site-packages/accelerate/accelerator.py", line 1582, in _prepare_deepspeed
    engine, optimizer, _, lr_scheduler = deepspeed.initialize(**kwargs)
  File "/envs/qwen/lib/python3.8/site-packages/deepspeed/runtime/engine.py", line 304, in __init__
    self._configure_optimizer(optimizer, model_parameters)
"""
    _, flat, _ = pipeline.run(pipeline.Inputs(question="全参数微调在单卡A100 80G上就会OOM", log=log.splitlines()), kb)
    assert flat["situation.phase"] == "model-build"


def test_a_full_card_bounds_the_gpu_and_sizeless_model_names_have_their_size(kb):
    # PaddlePaddle/PaddleNLP#8612: "chatglm2 dan ka sft" with Paddle's OOM line, which prints no total capacity
    q = ("求助，chatglm2 单卡sft内存溢出。报错如下：Out of memory error on GPU 0. Cannot allocate 428.000000MB "
         "memory on GPU 0, 79.153320GB memory has been allocated and available memory is only 175.562500MB. "
         "已经将batch改到最小")
    facts, flat, diag = pipeline.run(pipeline.Inputs(question=q, log=q.splitlines()), kb)
    assert flat["question.model_size_b"] == 6.2
    assert facts.gpu.capacity_bytes and "no total" in facts.gpu.assumption
    assert diag.causes[0].id == "capacity-model-state"
    assert parse_question("微调 Qwen-VL-Chat", kb).model_size_b == 9.6
    # a script named for a model is not that model ("the qwen-vl-finetune scripts" fine-tuning Qwen3-VL-30B-A3B)
    assert parse_question("I used your qwen-vl-finetune scripts to fine-tune Qwen3vl-30b-a3b", kb).model_size_b == 30


@pytest.mark.parametrize("text, no_save", [
    # marin-community/marin#6932: saving put off for the whole run to rule it out, host RAM still rising
    ("为了排除 checkpoint 的影响，我把 save_interval 设成了 10h，整个过程一次都不存盘，"
     "但 anon 内存还是线性上涨。", True),
    ("Host RAM keeps climbing although no checkpoint was saved during the whole run.", True),
    # ROLL#378: the steps without a save are fine - that compares steps and points at the save
    ("只要这一步刚好保存了 checkpoint，随后接手的 vLLM 就 OOM。不保存 checkpoint 的 step 就没事。", False),
])
def test_no_checkpoint_saved_rules_the_save_out(text, no_save, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.no_save"] is no_save
    if no_save:
        assert "checkpoint-save" in diag.ruled_out
        assert "checkpoint-save-memory" not in [f.id for f in diag.fixes]


@pytest.mark.parametrize("text", [
    # epfLLM/Megatron-LLM#52: a planned run asked about, no failure yet - the floor answers with a GPU count
    "我想用 Megatron-LLM 对 llama2 70B 做全参数微调，手上只有单机 8 张 A100 80G，这样够吗？",
    # nvidia-cosmos#163: "Why can't an 80GB GPU posttrain the 7B model?"
    "The 80GB GPU cannot handle 7B full post-training on a single GPU machine; 3B trains. Why?",
])
def test_whether_it_fits_asked_is_answered_by_the_model_state_floor(text, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert "fit-asked" in flat["question.topics"]
    assert diag.causes[0].id == "capacity-model-state" and diag.fixes[0].id == "add-gpus"


def test_a_host_side_setting_said_not_to_apply_survives_a_host_oom(kb):
    # modelscope/ms-swift#9980: cpu_ram_efficient_loading set, "only rank 0 should load the weights", yet every one of
    # 16 processes holds ~136 GB of host RAM until the kernel kills them: the rank-0 loading did not apply
    q = ("我用 ms-swift 的 --fsdp fsdp2 训练 Qwen3.5-35B-A3B，"
         "fsdp2.json 里已经写了 \"cpu_ram_efficient_loading\": true，按理说只有 rank0 会加载权重。"
         "但在加载阶段 worker 被内核 OOM kill，每个进程的 anon RSS 大概 136G。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.process"] == "host" and flat["situation.not_applied_said"]
    assert "setting-not-applied" not in diag.ruled_out
    assert diag.fixes[0].id == "confirm-setting-applied"


def test_a_nightly_that_moved_under_the_same_code_is_the_stack(kb):
    # pytorch/pytorch#161860: "ran without any issue until 28 August; since 30 August I get OOM with the same training
    # code ... the only difference is the PyTorch nightly"; the closing question names no setting that did nothing
    q = ("I'm fine-tuning an LLM with FSDP on a B200 machine. My training ran without any issue until 28 August; since "
         "30 August I get OOM with the same training code. The only difference is the PyTorch nightly from 30 August. "
         "Was there a change that makes FSDP use more memory, and what should I do?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.worked_before"] is True and "setting" not in (flat["situation.no_effect"] or [])
    assert diag.causes[0].id == "version-regression"


def test_paddlenlps_trainer_evaluating_keeps_its_outputs_as_hf_does(kb):
    # PaddlePaddle/PaddleNLP#4574: "PaddleNLP de Trainer ... zuo evaluation, pao le yi duan shijian zhihou OOM"
    q = ("我用 PaddleNLP 的 Trainer 对一个大规模数据集做 evaluation，跑了一段时间之后报 out of memory。"
         "我怀疑是 evaluation 过程中把一些中间量保存在了 GPU 上导致显存不足。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.phase"] == "eval" and flat["situation.trainer"] == "hf"
    assert diag.causes[0].id == "logits-loss-memory"
    assert "hf-trainer-eval-keeps-outputs" in diag.fired_rules


@pytest.mark.parametrize("text, resume", [
    # hpcaitech/Open-Sora#462: "cong OpenSora-STDiT-v3 jixu xun" continues from a released model - no resume
    ("两块 45G 的 L40s 训练 Open-Sora v1.2（stage3 配置，从 OpenSora-STDiT-v3 继续训），一直爆显存。", False),
    # hiyouga/LlamaFactory#4710: continuing from a checkpoint of one's own run is a resume
    ("同配置和环境下从检查点继续训练OOM。FSDP 在 4 x A100 40G 上全参数微调 Qwen2-7B。", True),
    ("用 finetune_vision.py 从之前保存的 checkpoint 继续训练，多卡跑，报错显存不足。", True),
])
def test_continuing_from_a_checkpoint_is_a_resume_from_a_model_is_not(text, resume, kb):
    _, flat, _ = pipeline.run(pipeline.Inputs(question=text), kb)
    assert ("resume" in flat["question.topics"]) is resume


@pytest.mark.parametrize("text, gpus", [
    # the BigScience tr11 logbook: "A100 80GB ji qun (mei jiedian 8 ka)" gives a node's GPUs, not the run's
    ("我们在 A100 80GB 集群（每节点 8 卡）上用 Megatron-DeepSpeed 预训练 ~200B 的模型", None),
    ("单机 8 张 A100 80G", 8),
    ("两台机器，每台 8 卡 A100", 16),
])
def test_gpus_per_node_alone_are_not_the_runs_gpu_count(text, gpus, kb):
    assert parse_question(text, kb).num_gpus == gpus


def test_a_change_that_ended_the_oom_but_broke_a_constraint_is_the_failure_now(kb):
    # NVIDIA-NeMo/Megatron-Bridge#3845: expandable_segments exported to end a fragmentation OOM; TE CUDA graphs then
    # stop with a functional error until NCCL_GRAPH_REGISTER=0 is exported too
    q = ("Megatron-Bridge qwen3_next_80b_a3b with Transformer Engine CUDA graphs was OOMing with what looked like "
         "fragmentation, so the perf plugin now exports PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True. Since that "
         "change the run no longer OOMs, but it now stops with a functional error in the CUDA-graph path.")
    overrides = ["cuda_graph_impl=transformer_engine", "cuda_graph_scope=[attn,moe_router]"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, overrides=overrides), kb)
    assert flat["config.cuda_graph_impl"] == "transformer_engine"
    assert diag.causes[0].id == "config-incompatibility" and diag.fixes[0].id == "nccl-graph-register-off"


def test_a_removal_word_inside_a_settings_name_removes_nothing(kb):
    # Visual-Agent/DeepEyes#17: "use_remove_padding True" in a pasted verl setting list was read as padding removal
    # taken out before the failure, and a lost setting led an actor-update OOM of 4 x 28k-token micro-batches
    q = ("verl GRPO with Qwen2.5-VL-7B OOMs during the update policy step. My settings: max_response_length 20480, "
         "use_remove_padding True, ppo_micro_batch_size_per_gpu 4, ulysses_sequence_parallel_size 1.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert "sequence-packing" not in (flat["situation.removed"] or [])
    assert diag.causes[0].id == "capacity-activations"
    _, flat, _ = pipeline.run(pipeline.Inputs(question="I removed gradient checkpointing and now it OOMs."), kb)
    assert flat["situation.removed"]


def test_memory_the_user_expected_an_engine_sleep_to_free_is_an_expected_release(kb):
    # vllm-project/vllm#32947: "Sleep mode freed 24.08 GiB memory, 33.62 GiB memory is still in use" - the weights,
    # allocated outside the sleep-mode pool, stayed; "I expected level 1 to offload the weights to CPU"
    q = ("I use vLLM with enable_sleep_mode=True so the GPU can be handed to the trainer, and I call sleep(level=1). "
         "The log says \"Sleep mode freed 24.08 GiB memory, 33.62 GiB memory is still in use.\" I expected level 1 to "
         "offload the weights to CPU and free almost everything.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.expected_release"] is True
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"


def test_evaluate_shi_with_compute_metric_is_the_hf_evaluation_keeping_its_outputs(kb):
    # THUDM/ChatGLM3 finetune_demo #15: "evaluate shi xiancun baozeng" after adding eval_dataset and compute_metric
    q = ("evaluate时显存暴增：在trainer中添加了eval_dataset，写了compute_metric函数来计算eval中的一些指标。"
         "本来训练时10+GB显存占用，到了eval时突然增到60GB+，最终增到OOM。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.phase"] == "eval" and flat["situation.trainer"] == "hf"
    assert diag.causes[0].id == "logits-loss-memory"


@pytest.mark.parametrize("text, moved", [
    # OpenBMB/MiniCPM-V#145: an environment listed names one version of each thing - nothing moved
    ("mini cpm V2.0 finetune 需要这么大显存么？使用官方脚本，其他都没改。环境：Python 3.9，Transformers 4.40，"
     "PyTorch 2.1，CUDA 11.8。", False),
    # vllm-project/vllm#15228: two versions of the same engine, the older one fine
    ("Out of Memory error for Qwen2.5 in 0.8.0 and 0.8.1. Worked fine in the previous versions: with version 0.7.2 "
     "the service starts up fine.", True),
])
def test_an_environment_listed_is_no_software_that_moved(text, moved, kb):
    _, flat, _ = pipeline.run(pipeline.Inputs(question=text), kb)
    assert ("stack" in (flat["situation.changed"] or [])) is moved


def test_a_worker_that_died_while_host_ram_climbed_died_for_memory(kb):
    # hkust-nlp/simpleRL-reason#80: a Ray actor dies every ~50 steps with no CUDA OOM while system memory climbs
    q = ("simpleRL-reason（底层是 verl）GRPO 每次跑到 50 步左右就挂，Ray 报 "
         "`ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task`，"
         "前面没有任何 CUDA OOM 的 traceback。我在 W&B 上看系统内存曲线，从开始就一直往上涨。")
    log = ["ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, log=log), kb)
    assert flat["situation.process"] == "host" and flat["situation.trend"] == "grows"
    assert "not-an-oom" in diag.ruled_out
    assert diag.fixes[0].id == "track-memory-per-step"


@pytest.mark.parametrize("text", [
    # deepspeedai/DeepSpeed#2977: ZeRO-2 CPU offload with pin_memory under WSL2, CUDA error: out of memory at start-up
    ("我在 WSL2 里用 DeepSpeed ZeRO stage 2 训练，offload_optimizer 放到 cpu、pin_memory 是 true，"
     "一初始化就报 CUDA error: out of memory。"),
    # InternLM/xtuner#319: a bitsandbytes paged optimizer under WSL fails in pythonInterface.c
    "wsl ubuntu 22.04: xtuner train: Error out of memory at line 380 in file bitsandbytes/csrc/pythonInterface.c",
])
def test_pinned_or_paged_host_memory_under_wsl_is_wsls_limit(text, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert {"wsl", "pinned-memory"} <= set(flat["question.topics"])
    assert "wsl-pinned-host-memory" in diag.fired_rules
    assert not {"reduce-micro-batch", "add-gpus"} & {f.id for f in diag.fixes}


def test_resuming_a_runs_own_optimizer_state_converts_nothing(kb):
    # PrimeIntellect-ai/prime-rl#2729: resuming from a DCP checkpoint with optim_cpu_offload, GPU memory spikes as if
    # the whole optimizer state were on the GPU - the reload's peak, not a conversion
    q = ("I train with the prime-rl FSDP trainer and model.optim_cpu_offload = true, so the Adam state lives on CPU. "
         "When I resume from a distributed (DCP) checkpoint, GPU memory spikes during the reload, as if the whole "
         "optimizer state were on the GPU.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert {"resume", "optimizer-state"} <= set(flat["question.topics"])
    assert diag.fixes[0].id == "memory-efficient-optimizer-load"
    assert "convert-sharded" not in [f.id for f in diag.fixes]


def test_a_kernel_fault_on_a_tensor_past_two_to_the_31_is_an_index_overflow(kb):
    # NVIDIA/TransformerEngine#2918: an illegal memory access in multi_tensor_apply with an embedding of shape
    # [19345706, 128] (numel 2,476,250,368, past 2**31): 32-bit indexing overflows, the GPU did not run out
    q = ("Megatron training with Transformer Engine crashes in calc_params_l2_norm with \"CUDA Error: an illegal "
         "memory access was encountered\". One of my parameters is a big embedding of shape [19345706, 128] "
         "(numel 2,476,250,368). Is this the GPU running out of memory?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["question.largest_numel"] == 2476250368
    assert "int32-index-overflow" in diag.fired_rules and diag.causes[0].id == "not-an-oom"
    shape = parse_question("grouped_mm input [525312, 4096] is fine below 16*4096*8*4096", kb)
    assert shape.largest_numel == 2151677952


def test_an_allocation_failure_in_a_frameworks_own_words_is_a_memory_failure(kb):
    # Ascend/MindSpeed !3035 (set issue-24-s99): MindSpore prints no allocator message, only "Allocate memory
    # failed", at the checkpoint save after an update: a memory failure of the save, not a crash with no memory signal
    q = ("用 MindSpeed（MindSpore 后端）在昇腾 NPU 上做 DeepSeekV3 finetune。训练本身正常，但一到保存断点权重"
         "（save checkpoint）就报 RuntimeError: Allocate memory failed. 挂掉。"
         "训练时显存明明够，为什么保存 ckpt 会爆显存？")
    _, flat, diag = pipeline.run(pipeline.Inputs(log=["RuntimeError: Allocate memory failed."], question=q), kb)
    assert flat["log.has_memory_failure"] and flat["log.memory_failure_weak"]
    assert diag.causes[0].id == "checkpoint-save" and diag.fixes[0].id == "checkpoint-save-memory"
    # torch_npu's own allocator message reads as PyTorch's, on an NPU
    facts = parse_log(["RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 3; 60.97 GiB total capacity; "
                       "57.10 GiB already allocated; 57.10 GiB current active; 1.05 GiB free; 58.00 GiB reserved in "
                       "total by PyTorch)"], kb)
    assert (facts.oom_kind, facts.requested_bytes, facts.capacity_bytes) == ("allocator", 2 * 2**30, 60.97 * 2**30)


@pytest.mark.parametrize("text", [
    # deepseek-ai/DeepSeek-V2#74 (set issue-24-s99): 32 GB of weight files, about 60 GB once loaded
    "我在 A800 上运行 DeepSeek-V2-Lite-Chat，竟然消耗 60G 的显存。权重文件一共 32G 左右，"
    "为啥实际加载模型后占用这么多？",
    "The checkpoint files total 32 GB, but after loading the model it uses 60 GB on an A800.",
])
def test_a_model_holding_twice_its_checkpoint_files_was_loaded_wider_than_saved(text, kb):
    q = parse_question(text, kb)
    assert [f["role"] for f in q.memory_figures if f["bytes"] == 32e9] == ["files"]
    assert q.memory_bytes != 32e9  # the files are no memory in use
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert 1.8 < flat["situation.load_over_files"] < 1.9
    assert diag.causes[0].id == "capacity-model-state" and diag.fixes[0].id == "confirm-setting-applied"
    assert "checkpoint-load" not in [c.id for c in diag.causes]
    assert {"add-gpus", "expandable-segments"} <= {a.id for a in diag.avoid}


@pytest.mark.parametrize("text", [
    # hiyouga/LlamaFactory#5091 (set issue-24-s99): padded to one length it fits more tokens than at its own lengths
    "用 LLaMA-Factory 做 SFT，数据加载是随机的，每次都在十多步的时候爆显存；不补齐的时候 batch size 1 也会爆，"
    "可直接按 768 补齐的话，batch size 4 显存还有剩余。",
    "SFT without packing: with dynamic padding it OOMs after about ten steps even at batch size 1, while padded to "
    "max_length (768) batch size 4 fits.",
])
def test_fixed_shapes_that_fit_more_tokens_point_at_the_split_cache(text, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.fixed_shapes_fit"] is True and flat["situation.phase"] is None  # "shuffled" is no phase
    assert diag.causes[0].id == "fragmentation" and diag.fixes[0].id == "expandable-segments"
    assert "add-gpus" not in [f.id for f in diag.fixes]



def test_padding_said_without_a_comparison_says_nothing_of_shapes(kb):
    _, flat, _ = pipeline.run(pipeline.Inputs(question="I train without padding and it OOMs at step 30."), kb)
    assert flat["situation.fixed_shapes_fit"] is False
    # a new image (a picture) is no new container
    q = "Qwen2-VL with ms-swift: every new image is resized, and after 200 steps ms-swift runs out of memory."
    _, flat, _ = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.changed"] == []


@pytest.mark.parametrize("text", [
    # Ascend/MindSpeed-LLM !1962 (set issue-24-s99): fixed batch and length, 15 steps fit, step 16 runs out
    "单机 8 卡预训练 llama2-7b，TP=1、PP=8，micro-batch-size 4，seq-length 2048。前面十几步都正常，跑到第 16 步左右"
    "就 OOM。batch 和序列长度每步都一样，为什么不是第 1 步就 OOM？",
    "Llama-2-7B pretraining with PP=8, micro batch 4, seq 2048: the first 15 steps are fine, then it OOMs around "
    "step 16, with the same batch shape and the same sequence length every step.",
])
def test_the_same_inputs_failing_after_several_steps_is_not_the_batch(text, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.steady_inputs"] is True and flat["situation.step"] == "later-step"
    assert flat["situation.trend"] is None  # the inputs, not the memory, are the same every step
    assert {"capacity-activations", "pipeline-stage-imbalance"} <= set(diag.ruled_out)
    assert diag.causes[0].id == "fragmentation" and diag.fixes[0].id == "expandable-segments"


def test_a_setting_no_better_than_itself_turned_off_did_nothing(kb):
    # huggingface/trl#5542 (set issue-24-s99): precompute_ref_log_probs=True measured against itself off
    q = ("Full-parameter DPO with TRL's DPOTrainer: I set precompute_ref_log_probs=True, but memory during training is "
         "no better than with precompute turned off and the bigger batch still runs out of memory.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.no_effect"] == ["setting"] and flat["situation.removed"] == []
    assert "setting-not-applied" in [c.id for c in diag.causes]


def test_a_bare_batch_size_is_each_gpus_where_memory_rises_with_the_longest_batch(kb):
    # ssbuild/chatglm_finetuning#6: "batch size 4", memory steps up every ~100 steps, then stops rising
    assert parse_question("3 个 epoch，batch size 4。", kb).batch_size == 4
    assert parse_question("global batch size 256, micro batch size 1", kb).batch_size is None
    assert parse_question("batch size 1, then batch size 2", kb).batch_size is None  # two sizes: neither
    q = ("用 chatglm_finetuning 微调 ChatGLM-6B，batch size 4。初始显存 30G，后面大概每过 100 来个 step 显存就多占 4G，"
         "然后就 cuda out of memory 了。我设置的 max_seq_length 是 1024。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["question.batch_size"] == 4 and diag.causes[0].id == "capacity-activations"
    # an RL framework's batch size counts prompts per rollout (inclusionAI/AReaL#382: "batch size 256")
    rl = ("GRPO on Qwen3-1.7B with AReaL, one node, 8 GPUs, batch size 256: the memory usage increases continuously "
          "until the OOM.")
    _, _, diag = pipeline.run(pipeline.Inputs(question=rl), kb)
    assert diag.causes[0].id != "capacity-activations"


def test_a_fixed_resolution_vision_model_has_no_pixel_cap_to_set(kb):
    # haotian-liu/LLaVA#934 (set issue-24-s99): LLaVA-1.5 resizes every image to 336 px, 576 tokens an image
    q = ("OOM when I fine-tune a 7B LLaVA-1.5 with scripts/v1_5/finetune.sh (DeepSpeed ZeRO-3) on 8x A100-40G: "
         "after around 100 steps it runs out of memory.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert "fixed-resolution-vision" in flat["question.topics"]
    assert "cap-vision-tokens" not in [f.id for f in diag.fixes]
    # a model that tiles by resolution (LLaVA-NeXT's anyres, Qwen2-VL) still has one
    assert "fixed-resolution-vision" not in parse_question("LLaVA-NeXT / Qwen2-VL-7B fine-tuning OOM", kb).topics


def test_uncapped_vision_samples_raise_the_reserve_one_sample_at_a_time(kb):
    # kohya-ss/musubi-tuner#138 (set issue-24-s97): target_frames up to 265 per video, memory climbing to the OOM - each
    # sample is its frames' tokens, so the reserve follows the largest one seen, one sample at a time
    q = ("用 musubi-tuner 缓存 HunyuanVideo 的 latent，3 个视频，target_frames 从 1 一直到 265，一开始能正常跑，"
         "显存一直涨，最后 OOM。是显存泄露吗？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.trend"] == "grows" and "capacity-activations" not in diag.ruled_out
    assert diag.causes[0].id == "capacity-activations" and diag.fixes[0].id == "cap-vision-tokens"
    # one resolution bucket (every sample the same size), or a container that moved while the data stayed: a leak
    for q in ["Wan 1.3B LoRA with musubi-tuner on a 4090, batch size 1, one 832x480 / 81-frame video bucket: memory "
              "increases every step until the OOM at step 242.",
              "Since we moved our Bagel multimodal pretraining to the new container with torch 2.12, memory increases "
              "every step until the OOM; the same recipe in the old container was flat."]:
        _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
        assert diag.causes[0].id != "capacity-activations", q


def test_long_sequences_in_a_fine_tuning_trainer_are_their_fp32_logits(kb):
    # huggingface/trl#4585: GRPO on Qwen3-0.6B (151,936-token vocabulary) at 20,480 tokens under ZeRO-3 on 24 GB A10s
    q = ("GRPO with trl GRPOTrainer, base model Qwen3-0.6B on 8 A10 24GB, sequence length 20480, batch size 1 per "
         "device, DeepSpeed ZeRO-3. Always getting OutOfMemory in the second backprop.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, overrides=["max_length=20480", "zero_stage=3"]), kb)
    assert "long-sequence-logits-in-a-fine-tuning-trainer" in {r for c in diag.causes for r in c.rules}
    assert diag.causes[0].id == "logits-loss-memory" and diag.fixes[0].id == "te-cross-entropy-fusion"
    # a stand-in's vocabulary is no model's own (a Mamba 2.8B sized like Qwen2.5-3B)
    q = "Mamba 2.8b with DeepSpeed ZeRO 3 fits up to 48k tokens and OOMs in the backward above 50k tokens."
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert "long-sequence-logits-in-a-fine-tuning-trainer" not in {r for c in diag.causes for r in c.rules}


@pytest.mark.parametrize("text", [
    # Ascend/MindSpeed-RL !893 (set issue-24-s99): the offload's timing, then an OOM at some random step
    "用 MindSpeed-RL 跑 DAPO，训推共卡，rollout 时 offload 训练的参数/梯度/优化器。"
    "训练能跑，但跑到随机的某一步就 OOM。",
    "DAPO with colocated training and inference; we offload the optimizer state during rollout. It trains, then OOMs "
    "at some random step.",
])
def test_a_phase_named_as_when_a_setting_acts_is_no_phase_it_failed_in(text, kb):
    sit = read_situation(Facts(question=parse_question(text, kb)), kb)
    assert sit.phase is None or sit.phase.value != "rl-rollout"


def test_a_kill_while_the_gpus_memory_is_low_is_the_hosts_memory(kb):
    # 2U1/Qwen-VL-Series-Finetune#79 (set issue-24-s100): the DeepSpeed launcher's SIGKILL, every GPU under 20 %
    q = ("Fine-tuning Qwen2.5-VL-7B with LoRA on 8 A800-80G. The process keeps being killed randomly during training "
         "without any error message. In nvitop the memory used on each GPU is only less than 20%.")
    log = ["[ERROR] [launch.py:325:sigkill_handler] exits with return code = -9"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, log=log), kb)
    assert flat["situation.process"] == "host" and diag.causes[0].id == "host-oom"
    assert diag.fixes[0].id == "track-memory-per-step"  # no rank printed a GPU OOM message to read
    # the same kill with nothing said of the GPUs stays unconfirmed: the first rank that died and dmesg say which
    _, flat, diag = pipeline.run(pipeline.Inputs(question="Training dies at random.", log=log), kb)
    assert flat["situation.process"] != "host" and diag.fixes[0].id == "find-first-failing-rank"


def test_a_growing_resident_set_is_host_memory(kb):
    # LLaVA-VL/LLaVA-NeXT#196 (set issue-24-s100)
    q = ("High memory usage in the DataLoader workers with a lazy-loading dataset leads to OOM errors during "
         "training; the MaxRSS steadily increases during training.")
    log = ["RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, log=log), kb)
    assert flat["situation.process"] == "host" and flat["situation.trend"] == "grows"
    assert diag.fixes[0].id in ("track-memory-per-step", "reduce-dataloader-workers")
    assert diag.causes[0].id in ("host-oom", "memory-growth")


def test_pip_building_flash_attention_is_a_package_build_on_the_host(kb):
    # Dao-AILab/flash-attention#317 (set issue-24-s100): the machine froze, then rebooted
    q = ("显卡是 4090，运行 `pip install flash-attn --no-build-isolation` 的时候整台机器直接卡死，等了 5 分钟之后机器"
         "自己重启了。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.phase"] == "package-build" and flat["situation.process"] == "host"
    assert diag.fixes[0].id == "limit-build-jobs"


def test_an_engine_that_resumed_is_no_checkpoint_resume(kb):
    # THUDM/slime#591 (set issue-24-s100): the trainer's wake-up after SGLang resumed its memory
    q = ("slime with the FSDP backend colocated with SGLang on the same 8 GPUs (--colocate). The first training steps "
         "work, but at a handoff the FSDP actor's wake_up fails with CUDA OOM after SGLang has resumed.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.phase"] == "rl-weight-sync" and "resume" not in flat["question.topics"]
    assert diag.causes[0].id != "checkpoint-load"


@pytest.mark.parametrize("text", [
    # axolotl-ai-cloud/axolotl#1828 (set issue-24-s100)
    "Fine-tuning Llama 3.1 405B with FSDP in axolotl: training runs, but when axolotl saves the final model, gathering "
    "the full state dict dies with a CPU OOM.",
    # PrimeIntellect-ai/prime-rl#140 (set issue-24-s100)
    "Training steps fit, but the job goes OOM in save_ckpt_for_rollout when it exports the weights.",
])
def test_a_final_or_export_save_is_a_checkpoint_save(text, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.phase"] == "checkpoint-save" and diag.fixes[0].id == "checkpoint-save-memory"


@pytest.mark.parametrize("text", [
    # huggingface/transformers#25580 (set issue-24-s100)
    "8 张 A100 用 Trainer + FSDP 训练。FSDP 明明开了，为什么每张卡的显存还是这么高？",
    "Trainer with FSDP on 8 A100s: FSDP is clearly on, so why is every GPU's memory still this high?",
])
def test_a_setting_said_on_with_memory_as_if_off_did_nothing(text, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.no_effect"] and diag.causes[0].id == "setting-not-applied"
    assert diag.fixes[0].id == "confirm-setting-applied"


def test_selective_recompute_is_advice_only_where_megatron_core_trains(kb):
    """Selective recompute of named modules is Megatron-Core's knob: where nothing says Megatron-Core trains (a TTS
    model's own fine-tuning script), whole-layer checkpointing is what the program offers."""
    q = "Fine-tuning F5-TTS with fine_tune_cli.py on a 24GB GPU runs out of CUDA memory in the first steps."
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.megatron"] is False and "selective-recompute" not in {f.id for f in diag.fixes}
    for said in ("Megatron-LM GPT pretraining on 8 H100 runs out of memory in the first step.",
                 "Llama3-70B SFT on 32 H100 with TP4 PP4 OOMs at step 1."):
        _, flat, _ = pipeline.run(pipeline.Inputs(question=said), kb)
        assert flat["situation.megatron"] is True, said


@pytest.mark.parametrize("text, field", [
    # huggingface/trl#4511: two micro-batch settings compared, no difference between them
    ("I'm training using eight 64GB NPUs with `num_generations=8`. I found that when I set A: "
     "`per_device_train_batch_size=8` and `gradient_accumulation_steps=1`, and B: `per_device_train_batch_size=4` and "
     "`gradient_accumulation_steps=2`, there wasn't a significant difference in memory usage.", "situation.no_effect"),
    # huggingface/trl#2904: whether sharing layers with the reference model saves anything at all
    ("create_reference_model shares the frozen layers with the reference model, but they still seem copied. Am I "
     "actually getting any memory saving from sharing layers with the ref model?", "situation.not_applied_asked"),
])
def test_a_setting_compared_or_asked_about_is_checked_in_the_run_first(text, field, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat[field] and diag.fixes[0].id == "confirm-setting-applied"


def test_a_batch_known_above_one_is_the_activations_own_test_run(kb):
    # SWivid/F5-TTS#663 (set issue-24-s100): too little said for one cause, but halving the batch separates the
    # activations from the rest and is the fix an expert names first
    q = ("fine_tune_cli.py says a 24GB GPU can handle a batch size of 3200 samples, but on my RTX 6000 24GB it crashes "
         "with a batch size of 3200. What could be the problem?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, overrides=["batch_size_per_gpu=3200"]), kb)
    assert diag.candidates and diag.candidates[0] == "capacity-activations"
    assert diag.fixes[0].id == "reduce-micro-batch"
    # the same batch with nothing failed (how much memory a run uses) is measured, not shrunk
    q = "With bs=48 on 4 GPUs the log shows 10G at most but nvidia-smi shows 20G. Why the difference?"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert not diag.fixes or diag.fixes[0].id != "reduce-micro-batch"


def test_model_max_length_is_the_sequence_length(kb):
    # QwenLM/Qwen3#794 (set issue-24-s100): Qwen's HF-Trainer fine-tuning script sizes samples by model_max_length
    q = "使用 24张A100，对7B sft，model_max_length超过2w时，OOM（我想设到 model_max_length=90000）。请问配置问题吗？"
    facts, flat, diag = pipeline.run(pipeline.Inputs(question=q, overrides=["model_max_length=90000"]), kb)
    assert facts.config.seq_length == 90000
    assert diag.causes[0].id == "capacity-activations" and diag.fixes[0].id == "increase-cp"


def test_a_fitting_text_estimate_says_nothing_of_uncapped_images(kb):
    # oumi-ai/oumi#908: Qwen2-VL-2B fits at 4,096 text tokens; another dataset's images are what ran out
    q = ("Qwen2-VL-2B-Instruct SFT on 4 A100 with per_device_train_batch_size=1 and gradient checkpointing, "
         "model_max_length 4096: vqav2-small trains, llava-instruct-mix-vsft gives CUDA OOM.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert "estimate-fits-but-oom" not in {r for c in diag.causes for r in c.rules}


def test_a_dataset_tokenized_by_many_workers_is_the_data_loading_phase(kb):
    # unslothai/unsloth#3442 (set issue-24-s101): resumed from a checkpoint (the setup), killed while tokenizing
    q = ("用 Unsloth 做 Qwen3-4B 的 LoRA 微调（从 outputs/checkpoint-744 恢复训练），机器内存占用涨到将近 60G，"
         "日志停在 \"Unsloth: Tokenizing [\"text\"] (num_proc=196)\" 31% 的地方直接 Killed。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.phase"] == "data-loading" and diag.causes[0].id == "host-oom"
    assert diag.fixes[0].id == "reduce-dataloader-workers"


def test_lora_input_regather_needs_megatrons_sequence_parallelism(kb):
    # ColossalAI#5826-like: LoRA of a 70B model with nothing said of Megatron; the seed question names SP and keeps it
    q = "LoRA fine-tuning of Llama2-70B on 8 A100 80GB runs out of memory before the first step."
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.megatron"] is False and "lora-input-regather" not in {f.id for f in diag.fixes}
    assert "lora-activation-retention" in diag.ruled_out
    _, flat, diag = pipeline.run(pipeline.Inputs(question="显存不足，LoRA + 序列并行怎么省显存？"), kb)
    assert flat["situation.megatron"] is True and diag.fixes[0].id == "lora-input-regather"


def test_no_experts_known_is_not_a_dense_model(kb):
    # NVIDIA-NeMo/RL#2619 (set issue-24-s101): 'ep16' of a model the presets lack (qwen3.5-35ba3b): expert
    # parallelism is refused only for a model known to be dense
    q = ("Nightly test grpo-qwen3.5-35ba3b-2n8g-megatron-ep16 fails after the vLLM bump with a CUDA OOM in the "
         "Megatron training / logprob path.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, overrides=["model.expert_model_parallel_size=16"]), kb)
    assert "expert-parallel-needs-moe" not in {v.id for v in diag.violations}
    assert diag.causes and diag.causes[0].id != "config-incompatibility"
    # a model whose shape is known (a config's or a preset's) and has no experts is dense: the breach stands
    from memtune.engine import _rests_on_the_unsaid
    known = {"config.source": "bridge-yaml", "config.hidden_size": 4096, "config.num_layers": 32,
             "config.expert_model_parallel_size": 2, "config.num_moe_experts": None}
    assert not _rests_on_the_unsaid("expert-parallel-needs-moe", known, kb)
    assert _rests_on_the_unsaid("expert-parallel-needs-moe", {**known, "config.approximate_shape": "qwen25-3b"}, kb)


@pytest.mark.parametrize("text, trainer", [
    # meta-pytorch/torchtune#2071 (set issue-24-s101): torchtune's distributed recipes shard with FSDP2
    ("LoRA of Llama 3.1 70B with torchtune lora_finetune_distributed on 8 x 4090 runs out of CUDA memory.", "fsdp"),
    ("Fine-tuning Llama-3.1-8B with Unsloth on a 4060 Ti 16G runs out of memory.", "hf"),
    ("axolotl QLoRA of Mixtral on 4 A10 GPUs OOMs at the first step.", "hf"),
])
def test_fine_tuning_libraries_name_their_trainer(text, trainer, kb):
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.trainer"] == trainer and not flat["situation.megatron"]
    assert not {"increase-tp", "distributed-optimizer", "selective-recompute"} & {f.id for f in diag.fixes}


def test_torch_compile_taking_long_to_compile_is_no_package_build(kb):
    # pytorch/pytorch#128424 (set issue-24-s101): "编译时间特别长" is torch.compile's compile time, and
    # reduce-overhead records CUDA graphs
    q = ("torch.compile 用 reduce-overhead 模式：编译时间特别长，而且 GPU 显存持续增长。"
         "每一步把 input_ids 的长度加 1。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat.get("situation.phase") != "package-build" and flat.get("situation.process") != "host"
    assert "cuda-graphs" in flat["question.topics"]


def test_dataloader_workers_that_run_out_of_memory_ran_out_of_host_memory(kb):
    # NVIDIA-NeMo/Automodel#2551 (set issue-24-s101)
    q = ("Fine-tuning with NeMo Automodel using sequence packing plus context parallelism: at 128k tokens per pack "
         "the dataloader workers run out of memory.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.process"] == "host" and diag.causes[0].id == "host-oom"


def test_asking_whether_a_setting_works_at_all_checks_it_in_the_process(kb):
    # QwenLM/Qwen3-VL#1264 (set issue-24-s101): "Is max_pixels really works?" - the processor argument the
    # training script never passed on
    q = ("Training reports CUDA out of memory because the sample images have a very high pixel count. Even if I set "
         "max_pixels I still get this error, so max_pixels may not really be working. Is max_pixels really works?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.not_applied_said"] or flat["situation.not_applied_asked"]
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"
    # hiyouga/LLaMA-Factory#1408 (set issue-24-s101): "shi bu shi flash attention mei qi zuoyong?" - Qwen's remote
    # code reads its own use_flash_attn, not the trainer's --flash_attn
    q = ("3张A100 40GB 用 LLaMA-Factory LoRA 微调 Qwen-14B-Chat，我已经加了 --flash_attn，"
         "per_device_train_batch_size 1，还是爆显存。是不是 flash attention 没起作用？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.not_applied_asked"]
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"


def test_asking_whether_selective_recompute_applied_under_flash_attention_is_answered_by_the_mechanism(kb):
    # NVIDIA/Megatron-LM#1225: "shi selective recompute mei shengxiao ma?" - it applied; fused / Flash attention
    # already keeps none of what it drops
    q = ("加了 --recompute-activations 之后，max memory allocated 只从 25.52GB 降到 24.94GB。"
         "是 selective recompute 没生效吗？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, overrides=["model.recompute_granularity=selective"]), kb)
    assert flat["situation.not_applied_asked"]
    assert diag.causes[0].id != "setting-not-applied"


def test_a_leak_asked_about_by_a_user_comparing_a_setting_on_and_off_is_no_growth(kb):
    # huggingface/transformers#25572 (set issue-24-s101): two runs side by side, not one run over time
    q = ("Does LoRA cause a memory leak? By simply switching the load_in_8bit flag on and off, the RAM on cuda jumps "
         "from 13GB to 51GBs.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.compared"] and flat["situation.suspected_trend"] == "grows"
    assert "memory-growth" in diag.ruled_out and diag.causes[0].id != "memory-growth"
    # the same suspicion without a comparison stays a growth to measure
    _, flat, diag = pipeline.run(pipeline.Inputs(question="Does LoRA cause a memory leak? The RAM on cuda jumps from "
                                                           "13GB to 51GBs."), kb)
    assert not flat["situation.compared"] and "memory-growth" not in diag.ruled_out


def test_doubt_words_ask_whether_a_setting_applied_only_inside_a_question(kb):
    # hiyouga/LLaMA-Factory#1408: "shi bu shi flash attention mei qi zuoyong?" asks whether it applied ...
    q = "加了 --flash_attn 还是爆显存。是不是 flash attention 没起作用？"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.not_applied_asked"] and not flat["situation.not_applied_said"]
    # ... said, the same words mean it did not help (MiniCPM-V#181); InternLM/xtuner#830 (set issue-24-s102): sequence
    # parallel applied, and what failed in the loss pass is the gathered logits, not the model state
    q = ("我在用 xtuner 做 DPO 训练长序列，开了序列并行 sequence_parallel_size=4。同样长度的 SFT 开序列并行是能跑的，"
         "但 DPO 一算 loss 就 CUDA OOM，看起来序列并行在 DPO 里根本没起作用。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert not flat["situation.not_applied_said"] and not flat["situation.not_applied_asked"]
    assert flat["situation.phase"] == "loss" and diag.causes[0].id == "logits-loss-memory"


def test_host_ram_that_shoots_up_in_the_data_pipeline_is_no_reason_to_add_gpus(kb):
    # FunAudioLLM/CosyVoice#645 (set issue-24-s102): "nei cun turan baozhang" beside a 96G host - each loader worker
    # read whole parquet shards; more GPUs on the node would add workers
    q = ("单卡 3090TI 24G、96G 内存，dataloader 的 num_workers 设的 2，每 5000 步做一次验证。"
         "到第 10000 步的时候内存突然暴涨，然后就爆掉了。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.process"] == "host" and flat["situation.phase"] == "data-loading"
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "reduce-dataloader-workers"
    assert "add-gpus" not in {f.id for f in diag.fixes}


def test_memory_that_climbs_with_every_micro_batch_grows(kb):
    # Ascend/MindSpeed 31aaf3d4 (set issue-24-s102): forward-only passes recorded a gradient graph each
    q = ("Whenever the forward-only evaluation passes run, NPU memory climbs with every evaluation micro-batch and the "
         "job eventually runs out of memory inside evaluation.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.trend"] == "grows"
    assert diag.causes[0].id == "memory-growth" and diag.fixes[0].id == "track-memory-per-step"


def test_an_attention_patch_under_an_upgraded_library_may_no_longer_apply(kb):
    # OpenGVLab/InternVL a8d205c (set issue-24-s102): LLaVA's replace_llama_attn_with_flash_attn written for
    # transformers 4.32 gets a 4D mask under 4.36.2; "zhiqian neng zhengchang xun" is the same run working before
    q = ("入口是 llava/train/train_mem.py（里面会调用 replace_llama_attn_with_flash_attn() 打 flash-attn 补丁），"
         "把 transformers 从 4.32.0 升到了 4.36.2。配置、数据、卡都没变，之前能正常训，"
         "升级后一开始训练就报 CUDA out of memory。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert "attention-patch" in flat["question.topics"] and flat["situation.worked_before"]
    assert {c.id for c in diag.causes[:2]} == {"setting-not-applied", "version-regression"}
    assert diag.fixes[0].id == "confirm-setting-applied"


def test_expecting_a_precision_change_to_save_memory_is_more_than_expected(kb):
    # huggingface/accelerate#2089 (set issue-24-s102): FP8 through Transformer Engine copied the weights beside the
    # BF16 originals
    q = ("With mixed_precision=\"bf16\" the model takes about 12.6 GB and trains fine; as soon as I switch to fp8 the "
         "job runs out of memory. I expected FP8 to use less memory, not more.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, overrides=["mixed_precision=fp8"]), kb)
    assert flat["situation.more_than_expected"] and diag.causes[0].id == "precision-buffers"


def test_a_bare_layer_count_is_the_runs_and_a_partial_shape_takes_no_stand_in(kb):
    # Ascend/MindSpeed-LLM e6db7630 (set issue-24-s102): DeepSeek-V3's 61 layers padded to 64 with noop_layers; the
    # preset's 61 over PP 4 was a false "layers must split evenly" verdict
    q = "We pretrain DeepSeek-V3-671B with MindSpeed-LLM, TP=2 PP=4 EP=128, and it runs out of NPU memory."
    sets = ["num_layers=64", "pipeline_model_parallel_size=4", "tensor_model_parallel_size=2"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, overrides=sets), kb)
    assert flat["config.num_layers"] == 64 and "pp-divides-layers" not in {v.id for v in diag.violations}
    # a layer count and width given for a model no preset has: the nearest preset by size (a 235B MoE) is another
    # model, so no stand-in completes the shape (bigscience tr11: 80 layers x 14400, a 250k vocabulary)
    q = "We pretrain a ~200B model with Megatron-DeepSpeed, TP=8 PP=10, and the first and last stages hold the most."
    _, flat, _ = pipeline.run(pipeline.Inputs(question=q, overrides=["num_layers=80", "seq_length=2048"]), kb)
    assert flat["config.num_layers"] == 80 and not flat.get("config.approximate_shape")


def test_a_fix_a_rule_names_as_its_way_out_is_not_dropped_for_breaking_it(kb):
    # bigscience tr11: account_for_embedding / loss add two to 80 layers over PP 10, but pp-divides-layers itself
    # names rebalance-pipeline-stages (uneven first / last stages) as the way to meet it
    q = ("Megatron-DeepSpeed, TP=8 PP=10 MBS=1 on A100 80GB: the first and last stages (the word embedding) always "
         "hold the most memory, 75GB, the middle stages far less.")
    _, _, diag = pipeline.run(pipeline.Inputs(question=q, overrides=[
        "tensor_model_parallel_size=8", "pipeline_model_parallel_size=10", "num_layers=80", "micro_batch_size=1"]), kb)
    assert "rebalance-pipeline-stages" not in {a.id for a in diag.avoid}
    assert diag.fixes[0].id == "rebalance-pipeline-stages"


def test_a_shape_without_a_vocabulary_reads_an_oom_message_without_refusing(kb):
    # deepspeedai/DeepSpeed#1624: hidden 6912, 12 layers, 12 heads, no vocabulary: the failed request is compared
    # with the parameter counts only where they can be counted
    log = ["RuntimeError: CUDA out of memory. Tried to allocate 274.00 MiB (GPU 1; 23.70 GiB total capacity; "
           "21.95 GiB already allocated; 95.56 MiB free; 22.18 GiB reserved in total by PyTorch)"]
    sets = ["model.hidden_size=6912", "model.num_layers=12", "model.num_attention_heads=12", "model.seq_length=1024"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question="ZeRO-3 on 4 RTX 3090 OOMs", log=log, overrides=sets), kb)
    assert flat["config.hidden_size"] == 6912 and diag.causes


def test_a_gpu_given_to_the_engine_is_a_separate_engine(kb):
    # huggingface/trl#2709 (set issue-24-s102): "8 ka H100, 7 ka xunlian + 1 ka gei vLLM zuo shengcheng"
    for q in ("用 TRL 的 GRPOTrainer 训练（8 卡 H100，7 卡训练 + 1 卡给 vLLM 做生成），训练阶段还是 OOM。",
              "GRPO with TRL on 8x H100, 7 for training and 1 for vLLM generation: the training step OOMs."):
        _, flat, _ = pipeline.run(pipeline.Inputs(question=q), kb)
        assert flat["situation.process"] == "separate-engine", q


def test_recompute_on_in_a_vision_language_run_leaves_the_vision_side_to_cap(kb):
    # modelscope/ms-swift#1710 (set issue-24-s102): MiniCPM-V on video, vpm trained, gradient checkpointing on,
    # batch 1: the checkpointed language layers do not bound the vision tower or the vision tokens
    q = ("我用 swift 在 4 张 A800 80G 上微调 MiniCPM-V-2_6（8B，视频数据），LoRA 只加在 LLM 上，"
         "--gradient_checkpointing true、--batch_size 1、--max_length 4096。"
         "一开始训练就 CUDA out of memory，80G 都不够。")
    _, _, diag = pipeline.run(pipeline.Inputs(question=q, gpu="4x A800 80GB", overrides=[
        "sft_type=lora", "gradient_checkpointing=true", "batch_size=1", "max_length=4096", "use_flash_attn=false",
        "deepspeed=default-zero2"]), kb)
    assert "full-recompute-already-on" not in {r for c in diag.causes for r in c.rules}
    assert diag.fixes[0].id == "cap-vision-tokens"


def test_a_failure_with_the_runs_settings_handed_over_checks_them_first(kb):
    # facebookresearch/metaseq#74 (set issue-24-s50s): OPT-125M on 2x 3090 OOMs with the settings the user gave;
    # with nothing pointing at one rank, whether the run has them separates a lost setting from a layout that
    # does not fit
    q = "OPT-125M 在 2 张 3090 上训练，一开始就 CUDA out of memory。"
    _, _, diag = pipeline.run(pipeline.Inputs(question=q, overrides=["batch_size=16", "max_tokens=2048"]), kb)
    assert diag.fixes[0].id == "confirm-setting-applied"
    _, _, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert diag.fixes[0].id != "confirm-setting-applied"


def test_a_stated_log_prob_batch_is_halved_with_the_log_prob_key(kb):
    # verl#2450 (set issue-24-s7x): log_prob_micro_batch_size_per_gpu=20 overfills the log-prob pass; the actor's
    # ppo_micro_batch_size_per_gpu is already 1, so its key is no fix
    from memtune.report import build

    sets = ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1", "data.max_prompt_length=1024",
            "data.max_response_length=2048", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=20"]
    _, flat, diag = pipeline.run(pipeline.Inputs(question="verl GRPO of Qwen2.5-VL-3B on 8x A100 80GB OOMs.",
                                                 overrides=sets, gpu="8x A100 80GB"), kb)
    assert diag.fixes[0].id == "reduce-micro-batch" and not flat.get("situation.phase")
    first = build(diag, flat, kb, "en")["fixes"][0]
    assert "log_prob_micro_batch_size_per_gpu" in first["apply"]["framework"][0]


def test_full_recompute_for_an_hf_or_deepspeed_trainer_names_its_switch(kb):
    # VLM-R1#77: GRPO through the HF Trainer on a DeepSpeed ZeRO-3 config with gradient_checkpointing=false
    from memtune.report import build

    q = "GRPO of Qwen2.5-VL-3B on 8xH100 with DeepSpeed ZeRO-3: num_generations=8 runs out of memory."
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, overrides=[
        "num_generations=8", "per_device_train_batch_size=1", "gradient_checkpointing=false"]), kb)
    fixes = {f["id"]: f for f in build(diag, flat, kb, "en")["fixes"]}
    assert "gradient_checkpointing" in fixes["full-recompute"]["apply"]["framework"][0]
    # ...and the sharding, the batch and the loader workers by the same trainers' keys
    from memtune.report import _framework_lines

    assert "stage" in _framework_lines(kb.get("fixes", "megatron-fsdp"), {"situation.trainer": "deepspeed"})[0]
    assert "per_device_train_batch_size" in _framework_lines(kb.get("fixes", "reduce-micro-batch"),
                                                             {"situation.trainer": "hf"})[0]
    assert "dataloader_num_workers" in _framework_lines(kb.get("fixes", "reduce-dataloader-workers"),
                                                        {"situation.trainer": "hf"})[0]


def test_an_allocator_setting_said_unset_by_any_of_its_names_is_the_first_lever(kb):
    # Ascend/MindSpeed-LLM ac92883e (set issue-24-s100): torch_npu reads PYTORCH_NPU_ALLOC_CONF
    for name in ("PYTORCH_NPU_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        q = f"脚本开头只有 export CUDA_DEVICE_MAX_CONNECTIONS=1，没有设置 {name}。现在一跑就报 OOM。"
        _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
        assert flat["situation.absent"] == ["expandable-segments"] and diag.fixes[0].id == "expandable-segments"


def test_an_oom_in_deepspeed_initialize_is_the_model_build(kb):
    # LianjiaTech/BELLE#311 (set issue-24-s7x): the engine builds the ZeRO optimizer and its partitions there
    q = "2张A100 80G 基于deepspeed的全参微调时，总是在deepspeed.initialize发生OOM的问题，zero_stage指定为3。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, overrides=["zero_stage=3"]), kb)
    assert flat["situation.phase"] == "model-build"
    assert "capacity-activations" not in [c.id for c in diag.causes[:2]]


def test_a_dataloader_bus_error_is_shared_memory_and_a_dead_map_worker_the_host(kb):
    # yerfor/GeneFace#192 (set issue-24-s103): "killed by signal: Bus error ... out of shared memory" is SIGBUS on
    # /dev/shm, no kill to confirm
    log = ["RuntimeError: DataLoader worker (pid 8187) is killed by signal: Bus error. It is possible that "
           "dataloader's workers are out of shared memory. Please try to raise your shared memory limit."]
    _, _, diag = pipeline.run(pipeline.Inputs(question="训练 PostNet 时爆显存了，可以修改哪个参数？", log=log), kb)
    assert diag.causes[0].id == "not-an-oom" and diag.fixes[0].id == "reduce-dataloader-workers"
    # hiyouga/LLaMA-Factory#5308 (set issue-24-s103): HF datasets' map() lost a worker while preprocessing images
    q = ("preprocessing_num_workers=256 都会停在 \"Running tokenizer on dataset\"，长时间等待后报 One of the "
         "subprocesses has abruptly died during map operation。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.process"] == "host" and diag.causes[0].id == "host-oom"
    assert diag.fixes[0].id == "reduce-dataloader-workers"


def test_memory_use_too_large_said_loosely_beside_a_gpu_oom_is_not_the_host(kb):
    # PaddlePaddle/PaddleNLP#7401 (set issue-24-s103): "FSDP stage3 nei cun zhanyong guo da" of a run that OOMs on
    # H100s while the model is built - nei cun said loosely of the GPU's memory
    q = ("PaddleNLP + FSDP stage3 跑 89B/175B 模型，减少 batch size 都会 OOM，只能用 TP+PP 才能跑起来。"
         "FSDP stage3 内存占用过大，这是否是已知问题？（128 张 H100 80GB）")
    _, flat, _ = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat.get("situation.process") != "host"


def test_a_prediction_run_has_no_optimizer_state_to_offload(kb):
    # hiyouga/LLaMA-Factory#5589 (set issue-24-s103): do_predict of Qwen2-VL-72B, the whole model on every rank
    q = ("用 LLaMA-Factory 对 Qwen2-VL-72B-Instruct 做推理（do_predict + predict_with_generate），机器是 8*A100，"
         "每一张卡都加载了一次完整模型，加载模型期间就出现 OOM。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, overrides=["do_predict=true"], gpu="8*A100"), kb)
    assert flat["situation.forward_only"]
    assert "optimizer-cpu-offload" not in {f.id for f in diag.fixes}


def test_restoring_from_the_runs_own_checkpoint_is_a_resume(kb):
    # NVIDIA/Megatron-LM fad83fc (set issue-24-s103): "cong ziji cun de checkpoint huifu ... zhijie CUDA OOM"
    q = "从 scratch 训练显存是够的，但从自己存的 checkpoint 恢复（dist_checkpointing load）的时候直接 CUDA OOM。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert "resume" in flat["question.topics"] and diag.fixes[0].id == "memory-efficient-optimizer-load"


def test_frozen_lora_weights_replicated_by_a_peft_script_are_sharded_not_piped(kb):
    # zai-org/CogVLM2#96 (set issue-24-s103): a 19B LoRA whole on each 48 GB card (data parallel only): a script that
    # wraps the model with PEFT's get_peft_model has no pipeline stages to add; ZeRO-3 / FSDP shard the frozen weights
    q = ("自己的脚本里用 get_peft_model 给 HF 版 cogvlm2-llama3-chat-19B 加 LoRA 做微调，"
         "4*48G 的卡都跑不起来，一直爆显存。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, gpu="4*48G"), kb)
    fixes = [f.id for f in diag.fixes]
    assert flat["situation.trainer"] == "own" and "megatron-fsdp" in fixes and "increase-pp" not in fixes


def test_settings_said_to_do_nothing_by_pointing_back_are_the_ones_set_before(kb):
    # modelscope/ms-swift#2785 (set issue-24-s104): "these two parameters have no effect at all" refers to the
    # max_pixels / SIZE_FACTOR the sentence before set; after the check they are set through ms-swift's own keys
    q = ("我用 ms-swift 跑 Qwen2-VL，在代码里加了 model.generation_config.max_pixels=602112 和 "
         "model.generation_config.SIZE_FACTOR=8。"
         "但这两个参数好像完全没有作用，遇到分辨率大一点的图还是报显存不足。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.no_effect"] == ["cap-vision-tokens"]
    assert [f.id for f in diag.fixes][:2] == ["confirm-setting-applied", "cap-vision-tokens"]
    # a pointer with nothing set before it names no setting
    _, flat, _ = pipeline.run(pipeline.Inputs(question="这两个参数好像完全没有作用，还是报显存不足。"), kb)
    assert "cap-vision-tokens" not in (flat["situation.no_effect"] or [])


@pytest.mark.parametrize("text, on", [
    ("Megatron-LM run with --cross-entropy-loss-fusion and micro-batch 16 OOMs computing the logits", True),
    ("Megatron-LM run without --cross-entropy-loss-fusion, micro-batch 16, OOMs computing the logits", False),
    ("Megatron-LM, micro-batch 16, OOMs computing the logits. Should I turn on cross entropy fusion?", None),
])
def test_the_fused_loss_said_on_is_in_place_not_a_fix(text, on, kb):
    # NVIDIA/Megatron-LM e994bb6 (set issue-24-s104): the user lists --cross-entropy-loss-fusion among the run's flags
    assert parse_question(text, kb).layout.get("cross_entropy_loss_fusion") is on
    _, _, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert ("te-cross-entropy-fusion" in diag.already_applied) is bool(on)


def test_trapped_memory_quoted_in_the_past_tense_is_read(kb):
    # NVIDIA/Megatron-LM e994bb6: "while 13.54 GiB was reserved by PyTorch but unallocated"
    q = ("It tried to allocate 12.28 GiB with only 5.24 GiB free, while 13.54 GiB was reserved by PyTorch but "
         "unallocated.")
    question = parse_question(q, kb)
    assert question.figure("reserved-unallocated") == pytest.approx(13.54 * 2**30, rel=1e-3)
    assert question.figure("request") == pytest.approx(12.28 * 2**30, rel=1e-3)


def test_memory_held_after_the_training_loop_in_the_same_process_is_no_dead_owner(kb):
    # deepspeedai/DeepSpeed#3025 (set issue-24-s104): ZeRO-3 leaves weights gathered after the training loop; the
    # script goes on in the same process, so no process left behind holds the memory
    q = ("用 DeepSpeed ZeRO-3 训练，训练结束后显存还一直没有释放：训练循环结束、回到我的脚本之后，"
         "我想在同一个进程里接着做评估，很容易就 OOM。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert not flat["situation.owner_gone"] and "kill-stale-processes" not in {f.id for f in diag.fixes}
    _, flat, _ = pipeline.run(pipeline.Inputs(question="训练结束后显存还一直占着，nvidia-smi 里看得到。"), kb)
    assert flat["situation.owner_gone"]


def test_packages_listed_with_their_versions_are_installed_not_running(kb):
    # hiyouga/LlamaFactory#4310 (set issue-24-s104): "TRL 0.8.6, vLLM 0.4.3" and "PEFT 0.11.1" in the environment a
    # user lists are packages, not an engine beside the trainer or a LoRA run
    q = ("升级之后显存一会儿 76G、一会儿 54G。环境：Transformers 4.41.2，PEFT 0.11.1，TRL 0.8.6，vLLM 0.4.3，"
         "GPU 是 A100 80GB。")
    _, flat, _ = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.process"] != "colocated-engine" and "lora" not in flat["question.topics"]
    q = "GRPO with vLLM colocated and PEFT LoRA runs out of memory."
    _, flat, _ = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.process"] == "colocated-engine" and "lora" in flat["question.topics"]


@pytest.mark.parametrize("text, asked", [
    ("升级之后显存来回跳。这样下去会不会 OOM，需要我把 batch 调小吗？", True),
    ("无论是不是开了重计算，都会 OOM。", False),
])
def test_a_question_form_inside_a_clause_asks(text, asked, kb):
    # LlamaFactory#4310: "zheyang xiaqu hui bu hui OOM" asks whether it will OOM; "wulun shi bu shi ..." says it does
    _, flat, _ = pipeline.run(pipeline.Inputs(question=text), kb)
    assert bool(flat["situation.oom_asked"]) is asked and bool(flat["situation.oom_said"]) is not asked


def test_a_flag_said_missing_in_chinese_is_off(kb):
    # Ascend/MindSpeed-LLM aec316b (set issue-24-s104): "jiaoben li meiyou jia renhe chongjisuan canshu, ye meiyou
    # --use-distributed-optimizer": neither is on, so both are the first levers
    q = "一拉起训练就报 NPU out of memory。脚本里没有加任何重计算参数，也没有 --use-distributed-optimizer。"
    assert parse_question(q, kb).layout["use_distributed_optimizer"] is False
    _, flat, _ = pipeline.run(pipeline.Inputs(question=q), kb)
    assert {"full-recompute", "distributed-optimizer"} <= set(flat["situation.absent"])
    assert parse_question("开了 --use-distributed-optimizer 还是 OOM", kb).layout["use_distributed_optimizer"] is True


def test_a_colocated_engine_kept_through_the_training_pass_is_its_share_not_a_leak(kb):
    # huggingface/trl#3968 (set issue-24-s104): vLLM colocated at vllm_gpu_memory_utilization 0.3 keeps its weights and
    # KV cache through the backward pass; TRL's own keys put it to sleep
    q = ("I'm training with TRL's GRPOTrainer with use_vllm=True and vllm_mode=\"colocate\". Generation works, but it "
         "runs out of memory in the backward pass: the memory vLLM grabbed for its weights and KV cache is still "
         "taken while the model trains.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.framework"] == "trl" and diag.causes[0].id == "foreign-process"
    assert diag.fixes[0].id == "shrink-colocated-engine" and "memory-growth" not in {c.id for c in diag.causes}
    rep = json.loads(_stdout(["diagnose", "--format", "json", "--question", q]))
    assert "vllm_enable_sleep_mode=True" in json.dumps(rep["fixes"][0])


def test_the_kv_cache_the_user_keeps_is_not_shrunk_first(kb):
    # sgl-project/sglang#7009 (set issue-24-s104): "a way to lower this peak without sacrificing the KV cache?"
    q = ("verl + SGLang colocate GRPO: the trainer weights stay on the GPU for the weight update; when SGLang wakes, "
         "its weights and KV cache come back together and it OOMs. Is there a way to lower this peak without "
         "sacrificing the KV cache?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert "shrink-colocated-engine" in flat["situation.refused"]
    assert diag.fixes and diag.fixes[0].id != "shrink-colocated-engine"


def test_a_full_checkpoint_loaded_into_a_sharded_model_is_saved_sharded_instead(kb):
    # Lightning-AI/pytorch-lightning#18190 (set issue-24-s104): a state_dict_type="full" checkpoint loaded back into the
    # FSDP model OOMs where training fits; a run that resumes from its SHARDED_STATE_DICT checkpoint is not this
    q = ("I train with Lightning Fabric and FSDPStrategy; training fits. I saved a full-state checkpoint "
         "(FSDPStrategy(state_dict_type=\"full\"), one consolidated file) and now loading it back with fabric.load "
         "into the FSDP-wrapped model dies with CUDA out of memory during the load, before the first step.")
    _, _, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert diag.causes[0].id == "checkpoint-load" and diag.fixes[0].id == "convert-sharded"
    q = ("axolotl + FSDP with fsdp_state_dict_type: SHARDED_STATE_DICT; I extract the model with FULL_STATE_DICT, but "
         "resuming from the SHARDED_STATE_DICT checkpoint gives a CUDA OOM.")
    _, flat, _ = pipeline.run(pipeline.Inputs(question=q), kb)
    assert "full-checkpoint" not in flat["question.topics"]


def test_a_host_kill_only_with_the_full_dataset_is_the_dataset_in_ram(kb):
    # zai-org/VisualGLM-6B#263 (set issue-24-s104): the sample data trains, 300k own samples exit with -9
    q = ("用仓库自带的样例数据能正常跑，但换成我自己的 30 万条数据微调就不行了，训练进程直接退出，返回值是 -9，"
         "没有 CUDA out of memory 的报错。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, log="exits with return code = -9\n"), kb)
    assert "large-dataset" in flat["question.topics"]
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "shard-preprocessing"


def test_prediction_that_generates_is_lowered_through_the_eval_batch_and_length(kb):
    # hiyouga/LlamaFactory#581 (set issue-24-s104): --do_predict --predict_with_generate OOMs on an A100 80G after
    # LoRA training ran: the eval batch's KV cache, lowered with LLaMA-Factory's own eval keys
    q = ("我用 LLaMA-Factory 微调完 LoRA 之后，用 --do_predict --predict_with_generate 在测试集上跑预测，"
         "结果很大概率会爆显存（CUDA out of memory）。训练的时候都没问题。")
    rep = json.loads(_stdout(["diagnose", "--format", "json", "--question", q, "--gpu", "A100 80G"]))
    assert rep["situation"]["fields"]["phase"]["value"] == "eval"
    assert rep["fixes"][0]["id"] == "reduce-micro-batch" and "full-recompute" in {a["id"] for a in rep["avoid"]}
    assert "per_device_eval_batch_size" in json.dumps(rep["fixes"][0])


def test_memory_said_never_to_be_released_in_the_passive_is_held(kb):
    # Ascend/MindSpeed d9395da (set issue-24-s104): "kan qilai xiang shi you yi kuai xiancun yizhi meiyou bei shifang"
    q = "一打开 fb-overlap 每张卡的显存占用就高出大约 20GB，看起来像是有一块显存一直没有被释放，就放不下了。"
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.trend"] == "held" and diag.fixes[0].id == "track-memory-per-step"


@pytest.mark.parametrize("text", [
    "LoRA 微调，单卡 3090，训练运行到 16% 的时候出现 CUDA out of memory，前面一直都正常。",
    "LoRA fine-tuning on one 3090 runs out of memory at 16% of the epoch.",
])
def test_progress_into_the_epoch_is_a_later_step(text, kb):
    # mymusise/ChatGLM-Tuning#72 (set issue-24-s105): steps ran before it failed, so the model state fit
    _, flat, diag = pipeline.run(pipeline.Inputs(question=text), kb)
    assert flat["situation.step"] == "later-step"
    assert "capacity-model-state" not in {c.id for c in diag.causes}


def test_every_rank_loading_the_checkpoint_into_ram_is_loaded_once_not_spread_over_more_gpus(kb):
    # bitsandbytes-foundation/bitsandbytes#1252 (set issue-24-s105): accelerate FSDP with
    # fsdp_cpu_ram_efficient_loading false on a 16 GB host: each of the 4 ranks loads the whole model into RAM
    q = ("FSDP + QLoRA of Llama-3-8B on 4x A40 with only 16 GB of system RAM; my accelerate FSDP config has "
         "fsdp_offload_params: true and fsdp_cpu_ram_efficient_loading: false. The job gets killed with SIGKILL.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, gpu="4x A40"), kb)
    assert "whole-weights-load" in flat["question.topics"] and diag.fixes[0].id == "convert-sharded"
    assert "add-gpus" not in {f.id for f in diag.fixes}


def test_no_other_memory_environment_variable_set_is_the_allocator_setting_off(kb):
    # Ascend/MindSpeed-LLM dd0cff9 (set issue-24-s105): "the script exports only CUDA_DEVICE_MAX_CONNECTIONS=1 and sets
    # no other memory-related environment variables": expandable segments are not on, a lever to offer
    q = ("脚本里只 export 了 CUDA_DEVICE_MAX_CONNECTIONS=1，没有设置别的内存相关环境变量。"
         "跑起来有时会报 NPU out of memory。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert "expandable-segments" in flat["situation.absent"] and "expandable-segments" in {f.id for f in diag.fixes}


def test_an_evaluation_run_of_its_own_holds_weights_not_training_state(kb):
    # THUDM/LongBench#17: a 7B HF model loaded for 20k-token evaluation on one 80 GB GPU; the weights are 14 GB
    zh = ("我在用 LongBench 做超长文本评测，length 设成 20k 的时候，单张 A100 80G 跑 llama-7b（直接用 HF 格式的模型"
          "加载推理）就会 OOM。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=zh, gpu="A100 80G"), kb)
    assert flat["situation.forward_only"] and flat.get("situation.phase") != "checkpoint-load"
    causes = [c.id for c in diag.causes]
    assert "capacity-model-state" not in causes and causes[0] == "capacity-activations"
    fixes = [f.id for f in diag.fixes]
    assert not {"full-recompute", "optimizer-cpu-offload", "distributed-optimizer"} & set(fixes)
    # the same words in an RL run: the update may be the pass that failed, so recompute stays open
    _, flat, _ = pipeline.run(pipeline.Inputs(question="verl GRPO: the reference model only runs forward, and the "
                                                       "actor OOMs."), kb)
    assert flat["situation.forward_only"] and flat.get("situation.framework") == "verl"


def test_memory_climbing_while_the_weights_load_is_the_load_not_growth_over_steps(kb):
    # PrimeIntellect-ai/prime-rl#1760: every rank read the whole snapshot into host RAM before step 0
    q = ("Before step 0, while the trainer loads the model weights, host RAM on the node climbs until the trainer "
         "processes get SIGKILLed by the OOM killer; GPU memory is nowhere near full.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.phase"] == "checkpoint-load" and flat.get("situation.trend") != "grows"
    assert diag.causes[0].id in {"host-oom", "checkpoint-load"}
    assert "memory-growth" not in [c.id for c in diag.causes]
    # growth after steps ran is growth over steps, whatever loaded first
    _, flat, _ = pipeline.run(pipeline.Inputs(question="After loading the model weights, host RAM climbs every step "
                                                       "until step 300, then the OOM killer fires."), kb)
    assert flat.get("situation.trend") == "grows"


def test_a_training_micro_batch_lowered_says_nothing_of_the_log_prob_pass(kb):
    # databricks/compose-rl#34: the log-prob pass ran the whole global batch; the training micro-batch fits
    q = ("Online RL with compose-rl: with long sequences I get CUDA OOM in the log-prob computation that runs after "
         "generation and before the policy update. The training forward/backward fits. Lowering "
         "device_train_microbatch_size did not help.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.phase"] == "rl-logprob" and "reduce-micro-batch" in flat["situation.no_effect"]
    assert diag.causes[0].id == "logits-loss-memory"
    assert "capacity-model-state" not in [c.id for c in diag.causes]


def test_the_gpus_of_a_device_map_split_used_unevenly_are_its_placement(kb):
    # modelscope/ms-swift#1376: swift deploy over 4 GPUs, the first two full, the last two nearly empty
    zh = ("用 ms-swift 在 4 张卡上部署 InternVL2-26B，nvidia-smi 看前两张卡显存基本跑满，后两张卡几乎没有占用，"
          "一发推理请求就报显存溢出。")
    q = parse_question(zh, kb)
    assert "pipeline-imbalance" in q.topics
    _, flat, diag = pipeline.run(pipeline.Inputs(question=zh), kb)
    assert flat["situation.trainer"] == "hf" and diag.causes[0].id == "pipeline-stage-imbalance"
    assert diag.fixes[0].id == "rebalance-pipeline-stages"
    en = ("The model is not evenly distributed across the GPUs: the first two GPUs are full and the last two GPUs are "
          "almost unused.")
    assert "pipeline-imbalance" in parse_question(en, kb).topics
    # the HF Trainer with nothing said to be uneven has no stages to rebalance
    _, _, diag = pipeline.run(pipeline.Inputs(question="HF Trainer LoRA of a 7B model OOMs on every GPU."), kb)
    assert "rebalance-pipeline-stages" not in [f.id for f in diag.fixes]


def test_any_software_upgraded_to_a_version_is_the_stack_moving(kb):
    # Lightning-AI/pytorch-lightning#21611: "Lightning" is on no list of packages; "upgrading X from 2.5.x to 2.6.0" is
    q = ("After upgrading Lightning from 2.5.x to 2.6.0 my mixed-precision training runs out of GPU memory, with the "
         "same model, data and batch size that trained fine on 2.5.x.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.changed"] == ["stack"] and flat["situation.worked_before"]
    assert diag.causes[0].id == "version-regression"
    # "after updating vLLM, it started running out": it ran before the update
    _, flat, _ = pipeline.run(pipeline.Inputs(question="After updating vLLM, my deployments started running out of "
                                                       "GPU memory after startup."), kb)
    assert flat["situation.changed"] == ["stack"] and flat["situation.worked_before"]
    # a size moved to is no version
    _, flat, _ = pipeline.run(pipeline.Inputs(question="I moved to 4.5 GB samples and it OOMs."), kb)
    assert "stack" not in (flat.get("situation.changed") or [])


def test_a_full_fine_tune_said_against_lora_with_its_command_in_the_question(kb):
    # modelscope/DiffSynth-Studio#563: Wan2.1-T2V-14B fully fine-tuned on 80 GB GPUs, "LoRA is not what I want"
    q = ("I'm trying to fully fine-tune Wan2.1-T2V-14B on 80 GB H100 GPUs and get an OOM. Command: python "
         "examples/wanvideo/train_wan_t2v.py --task train --train_architecture full. LoRA is not what I want.")
    assert parse_question(q, kb).layout.get("peft") is None
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q, gpu="H100 80GB"), kb)
    assert flat["situation.trainer"] == "own" and flat.get("config.peft") is None
    assert diag.causes[0].id == "capacity-model-state" and diag.fixes[0].id == "megatron-fsdp"
    assert "add-gpus" in [a.id for a in diag.avoid]
    # LoRA named as what the run uses is still LoRA
    assert parse_question("LoRA is what I use, rank 8, and it OOMs.", kb).layout.get("peft") == "lora"


def test_host_memory_that_runs_out_only_with_more_ranks_is_one_copy_per_rank(kb):
    # QwenLM/Qwen#428: LoRA on a 64 GB host starts on one or two GPUs and dies at start-up on three or more
    zh = ("用 torchrun 多进程启动做单机多卡 LoRA 微调。机器内存是 64G，单卡、双卡都能正常跑成功，"
          "但只要用 3 张卡及以上就会在启动阶段报错退出。显卡显存是够的，卡数越多反而越跑不起来。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=zh), kb)
    assert flat["situation.process"] == "host" and flat["situation.fewer_gpus_fit"]
    assert diag.causes[0].id == "host-oom" and diag.fixes[0].id == "convert-sharded"
    assert "add-gpus" in [a.id for a in diag.avoid]


def test_an_engine_said_not_to_be_there_shares_no_gpu(kb):
    # StarsfieldAI/R1-V#18: TRL's GRPOTrainer, full-parameter, "no vLLM"; 2B trains, 7B runs out of memory
    q = ("I'm running the R1-V GRPO script (TRL GRPOTrainer, full-parameter training, no vLLM) on Qwen2-VL. "
         "Qwen2-VL-2B trains fine, Qwen2-VL-7B with the same command dies with CUDA out of memory.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat.get("situation.process") != "colocated-engine" and flat["situation.trainer"] == "hf"
    assert diag.causes[0].id == "capacity-model-state" and diag.fixes[0].id == "megatron-fsdp"
    # the engine named as in use is still there
    _, flat, _ = pipeline.run(pipeline.Inputs(question="TRL GRPO with vLLM colocated runs out of GPU memory."), kb)
    assert flat.get("situation.process") == "colocated-engine"


def test_a_resume_that_fails_at_its_first_step_needs_no_more_gpus(kb):
    # NVIDIA/Megatron-LM 3008958: fresh runs fit; the first iteration after --load runs out of memory
    zh = ("Megatron-LM 开了 --use-distributed-optimizer，从头训练一直很稳定。任务中断后用 --load 从 checkpoint 续训，"
          "一进入续训后的第一个 iteration 就 CUDA out of memory。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=zh), kb)
    assert flat["situation.phase"] == "checkpoint-load" and diag.causes[0].id == "checkpoint-load"
    assert "add-gpus" not in [f.id for f in diag.fixes]


def test_the_last_stage_named_with_its_logits_is_the_logits(kb):
    # THUDM/slime#1524: entropy kept for backward on 30k-token samples fills only the last pipeline stage
    q = ("slime RL on 30k-token rollouts: the actor training step runs out of CUDA memory on the last pipeline stage. "
         "entropy_coef is 0.0, I only log the entropy. The other stages have headroom.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.where"] == "last-stage" and "logits" in flat["situation.components"]
    assert diag.causes[0].id == "logits-loss-memory"
    # the last stage named alone is still the stage
    _, _, diag = pipeline.run(pipeline.Inputs(question="Megatron PP=4: only the last pipeline stage runs out of "
                                                       "memory."), kb)
    assert diag.causes[0].id == "pipeline-stage-imbalance"


def test_a_setting_to_be_kept_as_it_is_was_not_tried(kb):
    # PixArt-alpha/PixArt-sigma PR 102: "how do I fix it without lowering the batch size?" tried nothing
    q = "Why does the first run need so much more memory, and how do I fix it without lowering the batch size?"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=q), kb)
    assert "reduce-micro-batch" not in (flat.get("situation.tried") or [])
    assert "reduce-micro-batch" not in (flat.get("situation.no_effect") or [])
    zh = "为什么第一次运行要多这么多显存，怎么在不降低 batch size 的情况下解决？"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=zh), kb)
    assert "reduce-micro-batch" not in (flat.get("situation.tried") or [])
    # lowered and said not to help is still a try
    _, flat, _ = pipeline.run(pipeline.Inputs(question="I lowered the batch size to 1 and it did not help."), kb)
    assert "reduce-micro-batch" in flat["situation.no_effect"]


def test_a_validation_pass_of_an_own_loop_is_checked_for_autograd_first(kb):
    # gentaiscool/end2end-asr-pytorch#29: a full epoch trains on 8 GB, validation then runs out of memory
    q = ("Training a Transformer ASR model on an 8 GB GPU: a full training epoch runs normally at batch size 4, but "
         "after the first epoch, when validation starts, it crashes with CUDA out of memory.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.phase"] == "eval"
    assert diag.fixes[0].id == "forward-only-without-training-buffers"
    # the HF Trainer evaluates without gradients itself: not its first check
    _, _, diag = pipeline.run(pipeline.Inputs(question="HF Trainer: training runs, then it OOMs when evaluation "
                                                       "starts."), kb)
    assert diag.fixes[0].id != "forward-only-without-training-buffers"


def test_memory_words_ending_in_the_character_of_save_save_nothing(kb):
    # Lightning-AI/pytorch-lightning PR 18379: "neicun mingming bi checkpoint wenjian da" compares RAM with the file
    zh = ("用 ckpt_path 恢复训练时，在加载 checkpoint 的阶段进程被系统 kill 掉了，看起来是主机内存不够。"
          "机器内存明明比 checkpoint 文件大得多，为什么加载会爆内存？")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=zh), kb)
    assert flat["situation.phase"] == "checkpoint-load" and diag.fixes[0].id == "convert-sharded"
    # a LoRA merge with the adapter named before the verb is a conversion (ymcui/Chinese-LLaMA-Alpaca#198)
    _, flat, _ = pipeline.run(pipeline.Inputs(question="把原版 LLaMA 和中文 LoRA 合并，跑到保存那一步报 "
                                                       "DefaultCPUAllocator: not enough memory。"), kb)
    assert flat["situation.phase"] in {"conversion", "checkpoint-save"}


def test_a_phase_or_loader_said_not_to_have_changed_is_not_where_it_failed(kb):
    # NVIDIA/Megatron-LM 02d880c: "there are no dataloader changes between the two runs"; FP8 init values held in RAM
    q = ("Megatron-Core pretraining with FP8 and --fp8-param-gather plus the distributed optimizer. "
         "GPU memory is fine, but host RAM per node is much higher than with the same model in BF16: "
         "each rank's RSS jumps while the model is built and never comes back down after the optimizer is created, "
         "so with 8 ranks the job gets close to the host OOM killer. "
         "There are no dataloader changes between the two runs. What is holding that CPU memory?")
    assert "dataloader" not in parse_question(q, kb).topics
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat.get("situation.phase") != "data-loading" and diag.fixes[0].id == "track-memory-per-step"
    # torchao / torchtitan say float8 (pytorch/ao PR 1629)
    assert "fp8" in parse_question("float8 with rowwise scaling peaks higher than bf16", kb).topics


def test_a_run_said_to_behave_as_before_right_after_a_setting_was_added(kb):
    # mosaicml/llm-foundry PR 1088: a key train.py never read; "the run behaves exactly as before"
    q = ("To reduce fragmentation I added `expandable_segments: true` to my training YAML. The run behaves exactly as "
         "before: reserved memory and the OOM headroom are unchanged.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert "expandable-segments" in flat["situation.no_effect"]
    assert diag.causes[0].id == "setting-not-applied" and diag.fixes[0].id == "confirm-setting-applied"
    # a sentence with its own subject is not about the setting before it
    _, flat, _ = pipeline.run(pipeline.Inputs(question="I added expandable_segments: true. The dataloader behaves "
                                                       "exactly as before."), kb)
    assert "expandable-segments" not in (flat.get("situation.no_effect") or [])


def test_an_evaluation_harness_and_a_load_said_to_fit_leave_the_images(kb):
    # EvolvingLMMs-Lab/lmms-eval#436: an evaluation harness runs forward only; the images' tokens are what grow
    _, flat, diag = pipeline.run(pipeline.Inputs(question="Evaluating Qwen2-VL with lmms-eval at batch size 1 runs "
                                                          "out of CUDA memory on some images."), kb)
    assert flat["situation.forward_only"] and diag.fixes[0].id == "cap-vision-tokens"
    # QwenLM/Qwen3-VL#280: "moxing jiazai ... meiyou bao xiancun bugou", then an image OOMs: not the load
    zh = ("我用 8 张 48G 的显卡跑 Qwen2-VL，模型加载启动的时候没有报显存不够，但是一推理图片就报 CUDA out of memory。")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=zh), kb)
    assert flat.get("situation.phase") != "checkpoint-load" and diag.fixes[0].id == "cap-vision-tokens"


def test_what_a_setting_turned_off_prevents_happening_anyway_is_the_setting_not_applied(kb):
    # deepspeedai/DeepSpeed PR 7689: pin_memory left off, offloaded partitions pinned anyway
    q = ("DeepSpeed ZeRO-2 with offload_optimizer to cpu; I leave pin_memory off because host RAM is tight. Even so, "
         "host memory ends up pinned. Why is memory being pinned when I didn't ask for it?")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=q), kb)
    assert flat["situation.not_applied_said"] and diag.fixes[0].id == "confirm-setting-applied"


def test_the_same_run_with_ten_times_the_data_is_a_large_dataset(kb):
    # zai-org/CogVideo#146: 200 videos train, 2,000 die before step 1 (every rank preloads every video into RAM)
    zh = "用 200 个视频训练一切正常；但把数据扩到 2000 个视频以后，进程在训练开始前就直接结束了。"
    assert "large-dataset" in parse_question(zh, kb).topics
    en = "It trains fine on 200 videos, but after scaling the dataset to 2000 videos the process dies before step 1."
    assert "large-dataset" in parse_question(en, kb).topics
    assert "large-dataset" not in parse_question("I scaled the learning rate to 2e-5 and it OOMs.", kb).topics


def test_evaluation_inside_a_training_run_is_not_a_forward_only_run(kb):
    # the zh evaluation-run words are narrow: "zuo SFT xunlian shi mei 500 bu pingce" trains, and evaluates on the way
    for zh in ("做 SFT 训练时每 500 步评测一次，训练到一半 OOM。", "跑 SFT 的时候顺便评测，结果 OOM。"):
        _, flat, _ = pipeline.run(pipeline.Inputs(question=zh), kb)
        assert not flat.get("situation.forward_only")
