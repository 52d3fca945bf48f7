"""Environment, question and GPU readers, and the two KB tables they read (vocabulary, gpus)."""

import json
import re

import pytest
from conftest import SKILL, read_kb
from memtune.errors import UserError
from memtune.facts import TrainingConfig
from memtune.inputs.gpu import find_gpus, gpu_from_capacity, lookup_gpu
from memtune.inputs.launch_env import env_from_config, parse_alloc_conf, read_env
from memtune.inputs.question import parse_question
from memtune.knowledge import Knowledge

KB_DIR = SKILL / "knowledge"
GIB = 2**30


@pytest.fixture(scope="module")
def vkb():
    """Only the tables these readers use (vocabulary, gpus), so the tests do not depend on the rest of the KB."""
    tables = {n: read_kb(n) for n in ("vocabulary", "gpus")}
    return Knowledge(root=KB_DIR, index={"tables": list(tables)}, tables=tables)


# --- KB tables -----------------------------------------------------------------------------------


def test_vocabulary_and_gpus_match_their_schemas(vkb):
    import jsonschema
    from referencing import Registry, Resource

    schemas = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in (KB_DIR / "schema").glob("*.schema.json")}
    registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas.values())
    for table in ("vocabulary", "gpus"):
        validator = jsonschema.Draft202012Validator(schemas[f"{table}.schema.json"], registry=registry)
        assert [e.message for e in validator.iter_errors(vkb.tables[table])] == []


def test_every_vocabulary_pattern_compiles(vkb):
    from memtune.inputs import question

    vocab = vkb.tables["vocabulary"]
    words = {**vocab["layout_words"], "gpu": question._any_gpu(vkb, vocab), "num": question._num_pattern(vocab),
             "figure": question._FIGURE_MARK}
    mem = vocab["memory"]
    patterns = [mem["figure"], mem["header"], mem["header_figure"], mem["continues"], *mem["cues"],
                *(lang["pattern"] for lang in vocab["languages"]), *vocab["model_size"], vocab["model_size_suffix"],
                *vocab["layout_ignore"], *vocab["gpu_count_ignore"], *vocab["not_stated"], *vocab["other_gpus"]]
    for section in ("models", "tasks", "layout", "claims", "gpu_count"):
        patterns += [p for entry in vocab[section] for p in entry["patterns"]]
    patterns += [p for r in mem["roles"] for key in ("before", "after", "around") for p in r.get(key) or []]
    patterns += [p for t in vocab["topics"] for lang in ("en", "zh") for p in t["keywords"][lang]]
    for pattern in patterns:
        expanded = question._expand(pattern, words)
        assert not re.search(r"\{[a-z_]+\}", expanded), f"unknown placeholder in {pattern!r}"
        re.compile(expanded, re.I | re.A)
    for role in mem["roles"]:  # an `around` pattern says where the figure is
        assert all("{figure}" in p for p in role.get("around") or []), role["role"]


def test_vocabulary_presets_are_the_model_presets(kb):
    """A vocabulary model is a preset exactly when knowledge/models.yaml has its architecture."""
    presets = {m["id"] for m in kb.tables["models"]["models"]}
    for model in kb.tables["vocabulary"]["models"]:
        assert model.get("preset", True) == (model["id"] in presets), model["id"]


def test_every_gpu_is_found_by_its_own_name(vkb):
    for entry in vkb.tables["gpus"]["gpus"]:
        assert lookup_gpu(entry["name"], vkb).name == entry["name"]
        assert lookup_gpu(entry["id"], vkb).name == entry["name"]


# --- env -----------------------------------------------------------------------------------------


def test_env_pairs_alloc_conf_later_option_wins(vkb):
    env = read_env(["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:512,expandable_segments:False",
                    "NCCL_GRAPH_REGISTER=0", "TORCH_NCCL_AVOID_RECORD_STREAMS=1"], kb=vkb)
    assert env.provided and env.alloc_conf_var == "PYTORCH_CUDA_ALLOC_CONF"
    assert env.alloc_options == {"expandable_segments": "False", "max_split_size_mb": "512"}
    assert env.expandable_segments is False and env.allocator_backend == "native"
    assert (env.nccl_graph_register, env.avoid_record_streams) == ("0", "1")


def test_env_pytorch_alloc_conf_takes_precedence(vkb):
    env = read_env(["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False",
                    "PYTORCH_ALLOC_CONF=expandable_segments:True,backend:cudaMallocAsync"], kb=vkb)
    assert env.alloc_conf_var == "PYTORCH_ALLOC_CONF" and env.expandable_segments is True
    assert env.alloc_conf_ignored == ["PYTORCH_CUDA_ALLOC_CONF"]
    assert env.allocator_backend == "cudaMallocAsync"


def test_env_values_pytorch_rejects_are_listed_not_guessed(vkb):
    conf = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:true, garbage_collection_threshold:high,foo:1"
    env = read_env([conf], kb=vkb)
    assert env.expandable_segments is None  # PyTorch accepts only True / False
    assert env.alloc_conf_invalid == ["expandable_segments:true", "garbage_collection_threshold:high"]
    assert env.alloc_conf_unknown == ["foo"]


def test_env_bracketed_option_stays_whole():
    assert parse_alloc_conf("roundup_power2_divisions:[256:1,512:2],expandable_segments:True") == {
        "roundup_power2_divisions": "[256:1,512:2]", "expandable_segments": "True"}


def test_env_provided_without_alloc_conf_means_default_allocator(vkb):
    env = read_env(["NCCL_NVLS_ENABLE=0"], kb=vkb)
    assert env.provided and env.alloc_conf is None and env.alloc_conf_var is None
    assert env.expandable_segments is False  # PyTorch's default when nothing sets it


def test_env_nothing_given_is_unknown(vkb):
    env = read_env([], kb=vkb)
    assert not env.provided and env.expandable_segments is None


def test_env_never_reads_the_process_environment(monkeypatch, vkb):
    """The helper runs beside the agent, not in the job: its own environment says nothing about the run."""
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.setenv("NCCL_GRAPH_REGISTER", "0")
    assert not read_env([], kb=vkb).provided
    env = read_env(["NCCL_DEBUG=INFO"], kb=vkb)
    assert env.expandable_segments is False and "PYTORCH_CUDA_ALLOC_CONF" not in env.variables


def test_env_source_precedence(vkb):
    config = {"NCCL_GRAPH_REGISTER": 0, "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    # Bridge env_vars are defaults: what the log shows the run saw wins over them; --env beats everything
    assert read_env([], log_text_env={"NCCL_GRAPH_REGISTER": "2"}, config_env=config, kb=vkb).nccl_graph_register == "2"
    env = read_env(["NCCL_GRAPH_REGISTER=3"], log_text_env={"NCCL_GRAPH_REGISTER": "2"}, config_env=config, kb=vkb)
    assert env.nccl_graph_register == "3" and env.expandable_segments is True


def test_env_from_bridge_config_env_vars(vkb):
    cfg = TrainingConfig(env_vars={"TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
                                   "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    config_env = env_from_config(cfg)
    assert config_env == cfg.env_vars
    assert env_from_config({"NCCL_GRAPH_REGISTER": 0}) == {"NCCL_GRAPH_REGISTER": "0"}  # str(value), as Bridge does
    env = read_env([], config_env=config_env, kb=vkb)
    assert env.provided and env.avoid_record_streams == "1" and env.expandable_segments is True
    assert env_from_config(TrainingConfig()) == {} and not read_env([], config_env={}, kb=vkb).provided


@pytest.mark.parametrize("bad", ["PYTORCH_CUDA_ALLOC_CONF", "=True", "BAD KEY=1"])
def test_env_malformed_pair_names_it(bad, vkb):
    with pytest.raises(UserError, match=re.escape(repr(bad))):
        read_env([bad], kb=vkb)


# --- question ------------------------------------------------------------------------------------


def test_question_english_llama_example(vkb):
    q = parse_question("my Llama3-70B SFT on 32×H100 with TP4 PP4 OOMs at 58.8 GB, what do I do first?", vkb)
    assert q.provided and q.lang == "en"
    assert q.model_name == "Llama 3 70B" and q.gpu_name == "H100 80GB" and q.num_gpus == 32
    assert q.memory_bytes == pytest.approx(58.8e9)  # GB as written (GiB would be 2**30)
    assert q.layout == {"tensor_model_parallel_size": 4, "pipeline_model_parallel_size": 4, "task": "sft"}
    assert "oom" in q.topics


def test_question_failure_figure_is_the_most_held_and_never_a_request_or_what_was_left(vkb):
    # yarn#23 (set issue-24-s84 era): "loaded up to 14g/80g ... went up to 77g/80g, and then it ran OOM" failed at 77g
    q = parse_question("Both GPUs loaded up to 14g/80g. After the first batch, the memory usage went up to 77g/80g, "
                       "and then it ran OOM when starting the second batch.", vkb)
    assert q.memory_bytes == pytest.approx(77e9)
    # NVIDIA-NeMo/Automodel#3483: what remained and what was requested are no memory in use at the failure
    q = parse_question("It runs out of memory on every GPU during the first backward pass: only 432 MiB remained "
                       "when PyTorch requested another 1.82 GiB.", vkb)
    assert [f["role"] for f in q.memory_figures] == ["free", "request"] and q.memory_bytes is None
    # huggingface/transformers#48131 (set issue-24-s87): "tries to allocate a single 48 GiB tensor" is the request
    q = parse_question("It OOMs instantly: it tries to allocate a single 48 GiB tensor.", vkb)
    assert [f["role"] for f in q.memory_figures] == ["request"] and q.memory_bytes is None


def test_question_chinese_lora_sp_example(vkb):
    q = parse_question("显存不足，LoRA + 序列并行怎么省显存？", vkb)
    assert q.lang == "zh"
    assert {"oom", "lora", "sequence-parallel"} <= set(q.topics)
    assert q.layout.get("task") == "lora"
    assert q.model_name is None and q.memory_bytes is None and q.num_gpus is None


def test_question_gpu_size_is_a_capacity_not_the_memory_figure(vkb):
    q = parse_question("Qwen3-30B-A3B on 4 nodes of 8 H100 80GB: EP8 TP2 PP2 VPP5 DP2 CP2 MBS 1 GBS 256 seq 4k, "
                       "no PYTORCH_CUDA_ALLOC_CONF, peak 70.2 GiB", vkb)
    assert q.model_name == "Qwen3-30B-A3B" and q.num_gpus == 32
    # the card's size is a capacity (and the nominal size the user states); a peak with no word of a failure is a
    # run's peak, not the size it failed at (the ledger needs the difference)
    assert [(f["bytes"], f["role"]) for f in q.memory_figures] == [(80e9, "capacity"),
                                                                    (pytest.approx(70.2 * GIB), "peak")]
    assert q.gpu_name == "H100 80GB" and q.gpu_nominal_gb == 80
    assert q.memory_bytes is None
    assert q.layout == {"expert_model_parallel_size": 8, "tensor_model_parallel_size": 2,
                        "pipeline_model_parallel_size": 2, "virtual_pipeline_model_parallel_size": 5,
                        "data_parallel_size": 2, "context_parallel_size": 2, "micro_batch_size": 1,
                        "global_batch_size": 256, "seq_length": 4096}
    assert q.env == {"expandable_segments": False}
    assert "moe" in q.topics


def test_question_token_counts_are_not_memory(vkb):
    assert parse_question("trained on 15T tokens with a 2M tokens batch", vkb).memory_bytes is None
    assert parse_question("2M tokens per batch, OOMs at peak 60 GB", vkb).memory_bytes == pytest.approx(60e9)
    assert [f["bytes"] for f in parse_question("2M tokens per batch, peak 60 GB", vkb).memory_figures] == [60e9]


def test_question_chinese_numbers_and_claims(vkb):
    q = parse_question("DeepSeek-V3 用LoRA微调，4机32卡 H800，显存 70G 就爆了，已经设置了 expandable_segments，"
                       "开了序列并行，内存碎片还是很多", vkb)
    assert q.lang == "zh" and q.model_name == "DeepSeek-V3" and q.gpu_name == "H800"
    assert q.num_gpus == 32 and q.memory_bytes == pytest.approx(70e9)
    assert q.env == {"expandable_segments": True}
    assert q.layout == {"task": "lora", "peft": "lora", "sequence_parallel": True}
    assert {"lora", "sequence-parallel", "fragmentation"} <= set(q.topics)


@pytest.mark.parametrize("text, model", [
    ("llama 3.1 70b", "Llama 3.1 70B"), ("Llama3-70B", "Llama 3 70B"), ("Llama-3.1-405B pretrain", "Llama 3.1 405B"),
    ("llama31_405b", "Llama 3.1 405B"), ("qwen3 30b a3b", "Qwen3-30B-A3B"), ("DeepSeek V3", "DeepSeek-V3"),
    ("DeepSeek v3 671B", "DeepSeek-V3"), ("mixtral 8x7b", "Mixtral 8x7B"), ("gpt-oss-120b", "gpt-oss-120b"),
    ("gpt-oss-20 OOMs", "gpt-oss-20b"), ("my own 7B model", None),
])
def test_question_model_aliases(text, model, vkb):
    assert parse_question(text, vkb).model_name == model


@pytest.mark.parametrize("text, count", [
    ("32 H100s", 32), ("8xH200", 8), ("4 nodes x 8 GPUs", 32), ("on 16 GPUs (8 GPUs per node)", 16),
    ("2 x 8 B200", 16), ("64 张 GB200", 64), ("我们用 16 卡", 16), ("a single GPU", 1),
    ("8x 80 GB GPUs", 8), ("32xH100", 32), ("4x8H200", 32), ("3 nodes of 8x H100-80GB", 24), ("16 GB300 nodes", 64),
    ("8 H100 nodes", 64), ("num_nodes=2, num_gpu_per_node=8", 16), ("eight A100 80GB gpus", 8), ("两台8卡H800", 16),
    ("单机八卡", 8), ("4台A100*8", 32), ("A100(40G)*8", 8), ("64*V100(32GB)", 64),
    ("rank 3 OOMs but the other 7 ranks are fine", None), ("其他 7 张卡都正常", None), ("单卡显存占用 71%", None),
    ("64台机器", None), ("GPU 3 has a total capacity of 79.11 GiB", None),
    ("finetuning with FSDP on multiple 4xH100 (64GB) nodes", None),  # cards per node, nodes not counted
])
def test_question_gpu_counts(text, count, vkb):
    assert parse_question(text, vkb).num_gpus == count


@pytest.mark.parametrize("text, field, value", [
    ("TP=4", "tensor_model_parallel_size", 4), ("tp 8", "tensor_model_parallel_size", 8),
    ("tensor parallel size of 2", "tensor_model_parallel_size", 2), ("ETP2", "expert_tensor_parallel_size", 2),
    ("micro batch size 4", "micro_batch_size", 4), ("sequence length 8192", "seq_length", 8192),
    ("128K context", "seq_length", 131072), ("张量并行 8，流水线并行 2", "pipeline_model_parallel_size", 2),
])
def test_question_layout_spellings(text, field, value, vkb):
    assert parse_question(text, vkb).layout[field] == value


def test_question_etp_is_not_tp_and_vpp_is_not_pp(vkb):
    layout = parse_question("ETP2 VPP5", vkb).layout
    assert layout == {"expert_tensor_parallel_size": 2, "virtual_pipeline_model_parallel_size": 5}


@pytest.mark.parametrize("text, value", [
    ("expandable_segments already set", True), ("I already set expandable_segments", True),
    ("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True is in my env", True),
    ("no PYTORCH_CUDA_ALLOC_CONF", False), ("we did not set expandable_segments", False),
    ("没有设置 PYTORCH_CUDA_ALLOC_CONF", False),
])
def test_question_allocator_claims(text, value, vkb):
    assert parse_question(text, vkb).env == {"expandable_segments": value}


def test_question_empty_is_not_provided(vkb):
    assert not parse_question("   ", vkb).provided and not parse_question(None, vkb).provided


@pytest.mark.parametrize("text, topic", [
    ("OOM while saving the checkpoint", "checkpoint"), ("断点续训时爆显存", "checkpoint"),
    ("activation checkpointing did not help", "recompute"), ("开了重计算还是不够", "recompute"),
    ("CUDA graphs use too much memory", "cuda-graphs"), ("fp8 mxfp8 training", "fp8"),
    ("process killed by the OOM killer, exit code 137", "host-memory"), ("optimizer cpu offload", "offload"),
    ("another process holds 20 GB", "foreign-process"), ("32K long context", "long-context"),
    # asking to lower a peak asks for room, as "save memory" does (verl: "Can that peak be lowered ...?")
    ("Can that peak be lowered without changing the batch?", "headroom"),
    ("how do I reduce the memory peak", "headroom"), ("唤醒时的显存峰值能不能降低一点", "headroom"),
])
def test_question_topics(text, topic, vkb):
    assert topic in parse_question(text, vkb).topics


def test_activation_checkpointing_is_not_a_checkpoint_question(vkb):
    assert "checkpoint" not in parse_question("activation checkpointing did not help", vkb).topics


@pytest.mark.parametrize("text, expected", [
    # negations beat the affirmative words inside them, in English and Chinese
    ("we train without --use-distributed-optimizer", {"use_distributed_optimizer": False}),
    ("the distributed optimizer is disabled", {"use_distributed_optimizer": False}),
    ("没有开启分布式优化器", {"use_distributed_optimizer": False}),
    ("--use-distributed-optimizer --overlap-grad-reduce", {"use_distributed_optimizer": True}),
    ("cfg.ddp.use_distributed_optimizer=True", {"use_distributed_optimizer": True}),
    ("SP off, TP 8", {"sequence_parallel": False, "tensor_model_parallel_size": 8}),
    ("sequence_parallel: false", {"sequence_parallel": False}),
    ("关闭了序列并行", {"sequence_parallel": False}),
    ("--sequence-parallel --tensor-model-parallel-size 2",
     {"sequence_parallel": True, "tensor_model_parallel_size": 2}),
    ("we enabled SP and the distributed optimizer", {"sequence_parallel": True, "use_distributed_optimizer": True}),
    ("no activation recompute", {"recompute_granularity": None}),
    ("recompute is disabled", {"recompute_granularity": None}),
    ("没开重计算", {"recompute_granularity": None}),
    ("already using selective recompute core_attn and mlp",
     {"recompute_granularity": "selective", "recompute_modules": ["core_attn", "mlp"]}),
    ("--recompute-granularity full --recompute-method uniform", {"recompute_granularity": "full"}),
    ("开了选择性重计算", {"recompute_granularity": "selective"}),
    ("--recompute-activations", {"recompute_granularity": "selective"}),
    ("we don't use CUDA graphs", {"cuda_graph_impl": "none"}),
    ("cuda_graph_impl: local", {"cuda_graph_impl": "local"}),
    ("CUDA graph 关了", {"cuda_graph_impl": "none"}),
    ("use_megatron_fsdp=True", {"use_megatron_fsdp": True}),
    ("--optimizer-cpu-offload", {"optimizer_cpu_offload": True}),
    # the offloaded optimizer by its own names (OpenRLHF#198, LLaMA-Factory#6755); asked about, it states nothing
    ("actor \u7528\u7684\u662f DeepSpeedCPUAdam\uff08adam offload\uff09", {"optimizer_cpu_offload": True}),
    ("\u4f7f\u7528\u4e86zero-3-offload\uff0cbatch_size\u4e3a1", {"optimizer_cpu_offload": True}),
    ("should I use adam offload here?", {"optimizer_cpu_offload": "<unset>"}),
    ("without adam offload it fits", {"optimizer_cpu_offload": False}),
    ("activation CPU offloading is on", {"cpu_offloading": True}),
    ("Tensor Parallelism (TP): 2, Expert Parallelism (EP): 8", {"tensor_model_parallel_size": 2,
                                                                "expert_model_parallel_size": 8}),
    ("上下文长度 16K", {"seq_length": 16384}),
])
def test_question_layout_settings_and_negations(text, expected, vkb):
    layout = parse_question(text, vkb).layout
    assert {k: layout.get(k, "<unset>") for k in expected} == expected


@pytest.mark.parametrize("text, unset", [
    ("would rather not turn on full recompute", "recompute_granularity"),  # says nothing of what is on
    ("should I enable SP?", "sequence_parallel"),  # a question, not a statement
    ("Should I turn on full activation recompute or lower the micro batch?", "recompute_granularity"),
    ("Should I use LoRA instead of full fine-tuning?", "peft"),
    ("要不要开分布式优化器", "use_distributed_optimizer"),
    ("if cudagraph is not used it fits", "cuda_graph_impl"),
    ("verl: actor_rollout_ref.rollout.tensor_model_parallel_size=4", "tensor_model_parallel_size"),  # vLLM's TP
])
def test_question_layout_reads_no_statement_into_questions_and_other_engines(text, unset, vkb):
    assert unset not in parse_question(text, vkb).layout


@pytest.mark.parametrize("text, figures, nominal", [
    ("8 x H200 141GB, OOMs at 130 GiB", [(141e9, "capacity"), (130 * GIB, "oom")], 141),
    ("96G 的 H20 四张", [(96e9, "capacity")], 96),
    ("2 nodes of 8 A6000 (48GB) each", [(48e9, "capacity")], 48),
    ("OOM on GPUs with 40GB each", [(40e9, "capacity")], 40),
    ("每卡显存 32GB", [(32e9, "capacity")], 32),
    ("GPU 0 has a total capacity of 79.11 GiB of which 1.5 GiB is free", [(79.11 * GIB, "capacity"),
                                                                          (1.5 * GIB, "free")], None),
    ("memory (GB) | allocated: 40.5 | max allocated: 61.2 | reserved: 70.0",
     [(40.5e9, "allocated"), (61.2e9, "peak"), (70e9, "reserved")], None),
    ("peak memory went from 60 GB to 71 GB", [(60e9, "peak"), (71e9, "peak")], None),
    ("显存从 60G 涨到 79G 然后 OOM", [(60e9, "peak"), (79e9, "peak")], None),
    ("the estimate says 55 GB but it OOMs", [(55e9, "peak")], None),
    ("a 7B model with 500M tokens", [], None),  # parameter and token counts are not memory
    # the failed request with a measure word between the verb and the size (ms-swift#9882): not in use at the OOM
    ("第一个训练 step 就 OOM，报错是申请一块 5.72 GiB 的显存失败", [(5.72 * GIB, "request")], None),
    # a container or machine given that much RAM (Qwen#245): the host's memory, not a request on the GPU
    ("启动容器分配了 1007G 内存", [(1007e9, "host-ram")], None),
    ("the container was allocated 512 GB of RAM", [(512e9, "host-ram")], None),
])
def test_question_memory_roles_and_card_sizes(text, figures, nominal, vkb):
    q = parse_question(text, vkb)
    assert [(f["bytes"], f["role"]) for f in q.memory_figures] == [(pytest.approx(b), r) for b, r in figures]
    assert q.gpu_nominal_gb == nominal


def test_question_failure_figure_ignores_the_card_size(vkb):
    q = parse_question("on an H100 80GB the run peaks at 75 GB and then OOMs", vkb)
    assert q.memory_bytes == pytest.approx(75e9)
    assert parse_question("H100 80GB OOMs at 78.5 GiB", vkb).memory_bytes == pytest.approx(78.5 * GIB)


@pytest.mark.parametrize("text, name", [
    ("8xA100-40GB", "A100 40GB"), ("16xH100", "H100 80GB"), ("2x8H800", "H800"), ("40GB A100s", "A100 40GB"),
    ("A100(40G)*4", "A100 40GB"), ("4*A100 ... in all 16 A100-40G cards", "A100 40GB"), ("GB200 NVL72", "GB200"),
    ("8 x V100 32GB", "V100 32GB"), ("RTX 4090", "RTX 4090"), ("2*8*h20", "H20"), ("4*4090", "RTX 4090"),
])
def test_question_gpu_names(text, name, vkb):
    assert parse_question(text, vkb).gpu_name == name


@pytest.mark.parametrize("text, model, size", [
    ("Llama-3.1-8B SFT", "Llama 3.1 8B", None), ("Moonlight 16B A3B LoRA", None, 16),  # no preset: only its size
    ("DeepSeek-V3-16B on 8 GPUs", None, 16),  # a different size after the name is another model
    ("Qwen2.5-14B-Instruct", None, 14), ("Yi34B", None, 34), ("a 350M model", None, 0.35),
    ("Qwen3-VL-8B", None, 8), ("active 3B of the 30B-A3B", None, 3), ("15T tokens, 8 B200", None, None),
    # the model that ran is named first; one offered later as an alternative is not it (pytorch/torchtitan#620)
    ("training Llama3-8B still OOMs. Or is there a config for a smaller model such as Llama-3.2-1B?", "Llama 3 8B",
     None),
    # ... unless the clause that says it failed names the other one
    ("Llama-3.1-8B trains fine, but Llama-3.1-70B OOMs at the first step", "Llama 3.1 70B", None),
    # a role word before an organisation prefix still names an auxiliary model (ms-swift#6413: the student trains)
    ("学生模型 Llama3.1-8B 全参，teacher 是 Meta-Llama-3.1-70B-Instruct", "Llama 3.1 8B", None),
])
def test_question_model_names_and_sizes(text, model, size, vkb):
    q = parse_question(text, vkb)
    assert (q.model_name, q.model_size_b) == (model, size)


# --- GPU -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, expected", [
    ("H100", "H100 80GB"), ("h100-80gb", "H100 80GB"), ("H100 SXM", "H100 80GB"), ("H100 NVL", "H100 NVL"),
    ("A100-40GB", "A100 40GB"), ("A100 80GB", "A100 80GB"), ("GB200", "GB200"), ("B200", "B200"),
    ("gb300", "GB300"), ("L40S", "L40S"), ("H20", "H20"), ("H200", "H200"),
])
def test_lookup_gpu_by_name(name, expected, vkb):
    gpu = lookup_gpu(name, vkb)
    assert gpu.name == expected and gpu.inferred_from == "name"


def test_lookup_gpu_facts(vkb):
    h100 = lookup_gpu("H100", vkb)
    assert h100.capacity_bytes == pytest.approx(79.11 * GIB) and h100.nominal_gb == 80
    assert h100.arch == "hopper" and h100.nvlink_domain == 8
    assert lookup_gpu("GB200", vkb).nvlink_domain == 72
    h20 = lookup_gpu("H20", vkb)  # no real message seen: the capacity is assumed from the nominal size, and said
    assert h20.capacity_bytes == pytest.approx(96 * 0.9894 * GIB, rel=0.01) and "nominal 96 GB" in h20.assumption
    assert h100.assumption is None


@pytest.mark.parametrize("typed, name, gib, count", [
    ("80GB", "80GB", 79.2, None),                 # a size alone: an unnamed card of that size
    ("GH200 96GB", "GH200 96GB", 95.0, None),     # a name the table lacks, with its size
    ("RTX 4090 24GB", "RTX 4090", 23.7, None),        # a consumer card by name, its size as typed
    ("4090 24G", "RTX 4090", 23.7, None),
    ("4*4090", "RTX 4090", 23.7, 4),                 # by name alone: the nominal 24 GB, said
    ("8x3090", "RTX 3090", 23.7, 8),
    ("8x H800", "H800", 79.2, 8),                 # a count prefix, a known name without a measured capacity
    ("H100 x8", "H100 80GB", 79.11, 8),
    ("2x8 H100", "H100 80GB", 79.11, 16),
    ("8张A800", "A800", 79.2, 8),
    ("H100 SXM5 80GB HBM3", "H100 80GB", 79.11, None),
    ("4x V100 (128G total)", "V100 32GB", 31.7, 4),  # a size typed as all the cards together agrees with the name
    ("4张 V100 一共128G", "V100 32GB", 31.7, 4),
    ("8卡V100 32G", "V100 32GB", 31.75, 8), ("Tesla V100-SXM2-16GB", "V100 16GB", 15.78, None),
    ("4x A10G", "A10G", 22.2, 4), ("L20 8卡", "L20", 44.53, 8), ("2x RTX A6000", "RTX A6000", 47.54, 2),
    ("2080ti", "RTX 2080 Ti", 10.76, None),
    ("L40S 48GB, 512GB RAM", "L40S", 44.4, None),  # the host's RAM beside the card's size is not the card's
    ("RTX 6000 48GB, host RAM 1TB", "RTX 6000 48GB", 47.5, None),
    # the host's RAM as an item of its own: the card's size and count are read from the rest (MOSS#262)
    ("RTX A5000(24GB) * 5\uff0c\u5185\u5b58 210GB", "RTX A5000(24GB)", 23.7, 5),
    # nodes times the cards of each, a comma between them or not (NVIDIA-NeMo/RL#279's "1 node, 8 GPUs")
    ("64 nodes x 8 GPUs, 140GB per GPU", "140GB per GPU", 138.5, 512),
    # a variant of a card with another memory size than the table's: the size typed is the card's, and the cards
    # of each of "multiple" nodes give no total (NVIDIA-NeMo/Megatron-Bridge#1552)
    ("multiple 4xH100 (64GB) nodes", "multiple 4xH100 (64GB) nodes", 63.3, None),
    # one card said in words, before or after its name (zai-org/ChatGLM-6B#843, hiyouga/LlamaFactory#9572)
    ("单卡 A100 80G", "A100 80GB", 79.15, 1), ("single A100 80GB", "A100 80GB", 79.15, 1),
    ("4090单卡（24G），内存320g", "RTX 4090", 23.7, 1),
    ("single node 8x H100", "H100 80GB", 79.11, 8),  # one node, not one card
    # one node is not one card: the count after it is the cards of that node (LUFFY#11's "1 node 8*H20")
    ("1 node 8*H20", "H20", 94.98, 8), ("2 nodes 8xH100", "H100 80GB", 79.11, 16),
    ("1 node, 8 A100", "A100 80GB", 79.15, 8),
    ("2 nodes H100", "H100 80GB", 79.11, None),
])
def test_lookup_gpu_as_people_type_it(typed, name, gib, count, vkb):
    gpu = lookup_gpu(typed, vkb)
    assert gpu.name == name and gpu.count == count
    assert gpu.capacity_bytes == pytest.approx(gib * GIB, abs=0.06 * GIB)
    if gpu.inferred_from != "name" or name in ("H800", "A800"):
        assert gpu.assumption and f"{gib:.1f} GiB" in gpu.assumption  # what was assumed is said


def test_a_size_labelled_as_host_memory_is_not_the_cards(vkb):
    """"none (CPU preprocessing, host RAM 504GB)" in Chinese: the only size is the host's, so no card size."""
    gpu = lookup_gpu("无（CPU 预处理，主机内存 504GB）", vkb)
    assert gpu.capacity_bytes is None and gpu.inferred_from == "unknown"


def test_a_total_size_without_a_count_gives_no_card_size(vkb):
    gpu = lookup_gpu("V100 128G total", vkb)
    assert gpu.capacity_bytes is None and "a total over cards" in gpu.assumption


def test_lookup_unknown_gpu_is_an_assumption_not_a_refusal(vkb):
    gpu = lookup_gpu("RTX 9090", vkb)
    assert gpu.name == "RTX 9090" and gpu.capacity_bytes is None and gpu.inferred_from == "unknown"
    assert "not in knowledge/gpus.yaml" in gpu.assumption and "RTX 9090 48GB" in gpu.assumption
    with pytest.raises(UserError, match="empty"):
        lookup_gpu("  ", vkb)


def test_gpu_from_capacity_picks_nearest_and_keeps_candidates(vkb):
    gpu = lookup_gpu(79.11 * GIB, vkb)
    assert gpu.name == "H100 80GB" and gpu.inferred_from == "capacity"
    assert gpu.candidates[0] == "h100-80gb" and "a100-80gb" in gpu.candidates
    assert gpu.capacity_bytes == pytest.approx(79.11 * GIB)
    assert gpu_from_capacity(139.81 * GIB, vkb).name == "H200"
    assert gpu_from_capacity(276.50 * GIB, vkb).name == "GB300"
    assert gpu_from_capacity(184.31 * GIB, vkb).candidates == ["gb200"]


def test_gpu_from_unknown_capacity_stays_unnamed(vkb):
    gpu = gpu_from_capacity(23.55 * GIB, vkb)
    assert gpu.name is None and gpu.capacity_bytes == pytest.approx(23.55 * GIB) and gpu.candidates == []


def test_find_gpus_prefers_longest_mention(vkb):
    text = "moved from A100-40GB to GB200 and B200"
    ids = [entry["id"] for _, _, entry in find_gpus(text, vkb)]
    assert ids == ["a100-40gb", "gb200", "b200"]


def test_readers_with_the_shipped_kb(kb):
    from memtune import knowledge

    assert {"vocabulary", "gpus"} <= set(kb.index["tables"])
    mine = [p for p in knowledge.validate(kb) if p.startswith(("vocabulary.yaml", "gpus.yaml"))]
    assert mine == []
    q = parse_question("OOM on 8 H200 with TP8", kb)
    assert (q.gpu_name, q.num_gpus, q.layout) == ("H200", 8, {"tensor_model_parallel_size": 8})


@pytest.mark.parametrize("text", ["MegaBlocks 不能用 DO（distributed optimizer）",
                                  "we cannot use the distributed optimizer", "无法使用分布式优化器",
                                  "unable to use the distributed optimizer with this MoE path"])
def test_question_cannot_use_is_a_negation(text, vkb):
    assert parse_question(text, vkb).layout.get("use_distributed_optimizer") is False


def test_question_moe_name_size_and_memory_hog_words(vkb):
    q = parse_question("训 8x7B 的时候发现特别占显存", vkb)
    assert q.model_size_b == 56.0 and "oom" in q.topics
    assert parse_question("DO NOT enable SP", vkb).layout == {"sequence_parallel": False}
    assert "use_distributed_optimizer" not in parse_question("What do I do first?", vkb).layout


@pytest.mark.parametrize("text, expected", [
    # OpenRLHF flags written with spaces (a Chinese list), the log-prob batch beside the training one
    ("prompt_max_len 4096、generate_max_len 8192；micro_train_batch_size 1、micro_rollout_batch_size 32、"
     "rollout_batch_size 128", {"logprob_micro_batch": 32, "prompt_length": 4096, "response_length": 8192}),
    # verl dotted overrides
    ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 data.max_prompt_length=2048 "
     "data.max_response_length=20480", {"logprob_micro_batch": 16, "prompt_length": 2048, "response_length": 20480}),
    # slime flags, a token budget written as 12k
    ("--rollout-max-response-len 16384 --log-probs-max-tokens-per-gpu 12k",
     {"logprob_tokens": 12 * 1024, "response_length": 16384}),
    # a rollout batch is not a log-prob micro-batch
    ("rollout_batch_size 128, n_samples_per_prompt 8", {}),
])
def test_rl_keys_size_the_log_prob_pass(text, expected, kb):
    from memtune.inputs.question import parse_question

    assert parse_question(text, kb).rl_batch == expected


def test_moving_the_optimizer_state_to_the_cpu_names_optimizer_offload(kb):
    """zh "ba youhuaqi zhuangtai fang dao CPU shang" (put the optimizer state on the CPU) is optimizer CPU offload."""
    from memtune import pipeline

    question = "Adam 的优化器状态占了不少显存，想把一部分优化器状态放到 CPU 上。"
    _, flat, _ = pipeline.run(pipeline.Inputs(question=question), kb)
    assert "optimizer-cpu-offload" in flat["question.mentioned_fixes"]


@pytest.mark.parametrize("text, peft, lora", [
    # NVIDIA/NeMo-Aligner#225: what a task supports is no setting of the run, which is full-parameter
    ("SFT 支持 LoRA，但 reward model 训练不支持 LoRA，能不能也支持一下？"
     "我用 Llama-2-7B 全参训练，结果直接 OOM。", None, False),
    ("LoRA with TP is not supported in this version, so I run full fine-tuning", None, False),
    ("we use LoRA since Megatron supports it, and it OOMs", "lora", True),  # the user is in the clause
])
def test_a_capability_named_is_not_what_the_run_uses(text, peft, lora, kb):
    q = parse_question(text, kb)  # the clause words live in situation.yaml
    assert q.layout.get("peft") == peft and ("lora" in q.topics) == lora
