"""Config readers: Bridge YAML dumps and overrides, Megatron-LM launch scripts/args, HF config.json."""

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from conftest import SKILL, read_kb
from memtune.errors import UserError
from memtune.inputs import config as cfgmod
from memtune.inputs.config import apply_overrides, read_bridge_config, read_config
from memtune.inputs.hf_config import read_hf_config
from memtune.inputs.megatron_args import args_from_mapping, layout_stages, read_megatron_args
from memtune.knowledge import Knowledge

FIX = Path(__file__).parent / "fixtures" / "configs"
KB_DIR = SKILL / "knowledge"


@pytest.fixture(scope="module")
def vkb():
    """Only the tables these readers use (vocabulary, gpus), so the tests do not depend on the rest of the KB."""
    tables = {n: read_kb(n) for n in ("vocabulary", "gpus")}
    return Knowledge(root=KB_DIR, index={"tables": list(tables)}, tables=tables)


# --- Bridge YAML ---------------------------------------------------------------------------------


def test_bridge_dump_maps_sections_onto_fields(vkb):
    cfg = read_bridge_config(FIX / "bridge_lora_sft_dump.yaml", vkb)
    assert cfg.provided and cfg.source == "bridge-yaml"
    assert (cfg.tensor_model_parallel_size, cfg.pipeline_model_parallel_size,
            cfg.virtual_pipeline_model_parallel_size, cfg.context_parallel_size) == (4, 4, 5, 1)
    assert (cfg.micro_batch_size, cfg.global_batch_size) == (1, 32)
    assert (cfg.num_layers, cfg.hidden_size, cfg.ffn_hidden_size, cfg.num_query_groups) == (80, 8192, 28672, 8)
    assert cfg.sequence_parallel is True and cfg.use_distributed_optimizer is True
    assert cfg.use_nccl_ub is False and cfg.tp_comm_overlap is True
    assert cfg.ckpt_format == "torch_dist" and cfg.load_optim is False and cfg.num_workers == 2
    assert cfg.optimizer == "adam" and cfg.exp_avg_dtype == "fp32"


def test_bridge_dump_reads_dumped_python_objects(vkb):
    cfg = read_bridge_config(FIX / "bridge_lora_sft_dump.yaml", vkb)
    assert cfg.activation_func == "silu"  # {_call_: false, _target_: torch.nn.functional.silu}
    assert cfg.attention_backend == "auto"  # AttnBackend(5)
    assert cfg.cuda_graph_scope == []  # "full" is MCore's deprecated spelling of "whole layer"


def test_bridge_mixed_precision_section_wins_over_model(vkb):
    cfg = read_bridge_config(FIX / "bridge_lora_sft_dump.yaml", vkb)
    # model.fp8 is null, but Bridge applies mixed_precision onto the model config
    assert (cfg.fp8, cfg.fp8_recipe, cfg.fp8_param_gather, cfg.bf16) == ("hybrid", "tensorwise", True, True)


def test_bridge_peft_kind_task_and_env_vars(vkb):
    cfg = read_bridge_config(FIX / "bridge_lora_sft_dump.yaml", vkb)
    assert cfg.peft == "lora" and cfg.task == "lora"
    assert cfg.peft_dim == 16 and cfg.peft_target_modules == ["linear_qkv", "linear_proj"]
    assert cfg.sequence_parallel_input_regather is True
    assert cfg.env_vars == {"NCCL_GRAPH_REGISTER": "0", "TORCH_NCCL_AVOID_RECORD_STREAMS": "1"}


def test_bridge_warnings_name_key_and_line(vkb):
    cfg = read_bridge_config(FIX / "bridge_lora_sft_dump.yaml", vkb)
    text = "\n".join(cfg.warnings)
    assert "bridge_lora_sft_dump.yaml:71: model.tensor_model_paralel_size" in text
    assert "did you mean model.tensor_model_parallel_size" in text
    assert ":98: wandb_extra: not a Bridge ConfigContainer section" in text
    # the data loader's length wins and the disagreement is reported with both lines
    assert cfg.seq_length == 4096
    assert any(":21: dataset.seq_length" in w and "line 67: model.seq_length" in w for w in cfg.warnings)
    # sibling keys are not typos
    assert "fp4_recipe" not in text and "tp_comm_overlap_ag" not in text
    assert len(cfg.warnings) == 3


def test_bridge_recipe_and_peft_given_as_strings(vkb):
    cfg = read_bridge_config(FIX / "bridge_precision_recipe.yaml", vkb)
    assert (cfg.fp8, cfg.fp8_recipe, cfg.bf16) == ("hybrid", "tensorwise", True)
    assert cfg.peft == "lora" and cfg.task == "lora"
    assert cfg.cuda_graph_scope == ["attn", "moe_router"]
    assert cfg.warnings == []


def test_malformed_yaml_names_file_and_line(vkb):
    with pytest.raises(UserError, match=r"bridge_bad_yaml\.yaml:4: invalid YAML"):
        read_bridge_config(FIX / "bridge_bad_yaml.yaml", vkb)


def test_wrong_value_kind_names_file_line_and_key(vkb):
    expected = r"bridge_bad_value\.yaml:4: model\.tensor_model_parallel_size: expected an integer"
    with pytest.raises(UserError, match=expected):
        read_bridge_config(FIX / "bridge_bad_value.yaml", vkb)


def test_top_level_list_is_rejected(tmp_path, vkb):
    path = tmp_path / "list.yaml"
    path.write_text("- model\n- train\n", encoding="utf-8")
    with pytest.raises(UserError, match="list.yaml:1: expected a mapping"):
        read_bridge_config(path, vkb)


def test_missing_file_is_a_user_error(tmp_path, vkb):
    with pytest.raises(UserError, match="cannot read"):
        read_config(tmp_path / "nope.yaml", kb=vkb)


# --- overrides -----------------------------------------------------------------------------------


def test_overrides_set_types_lists_null_add_and_remove(vkb):
    base = read_bridge_config(FIX / "bridge_lora_sft_dump.yaml", vkb)
    cfg = apply_overrides(base, [
        "model.tensor_model_parallel_size=8",
        "'model.cuda_graph_scope=[attn,moe_router]'",
        "model.sequence_parallel=false",
        "+model.recompute_granularity=selective",
        "~model.virtual_pipeline_model_parallel_size",
        "peft.dim=None",
        "train.micro_batch_size=2",
        "optimizer.optimizer_offload_fraction=0.5",
    ], vkb)
    assert cfg.tensor_model_parallel_size == 8
    assert cfg.cuda_graph_scope == ["attn", "moe_router"]
    assert cfg.sequence_parallel is False
    assert cfg.recompute_granularity == "selective"
    assert cfg.virtual_pipeline_model_parallel_size is None
    assert cfg.peft_dim is None and cfg.micro_batch_size == 2 and cfg.optimizer_offload_fraction == 0.5
    assert base.tensor_model_parallel_size == 4  # the input is not mutated
    assert cfg.source == "bridge-yaml" and cfg.warnings == base.warnings


def test_override_recipe_peft_and_env_vars(vkb):
    cfg = apply_overrides(cfgmod.TrainingConfig(), [
        "mixed_precision=bf16_with_mxfp8_mixed", "peft=dora", "env_vars.NCCL_GRAPH_REGISTER=0"], vkb)
    assert (cfg.fp8, cfg.fp8_recipe) == ("e4m3", "mxfp8")
    assert cfg.peft == "dora" and cfg.task == "lora"
    assert cfg.env_vars == {"NCCL_GRAPH_REGISTER": "0"}
    assert cfg.source == "overrides"


@pytest.mark.parametrize("bad, message", [
    ("model.tensor_model_parallel_size", "missing '=value'"),
    ("=4", "expected section.key=value"),
    ("model.tensor_model_parallel_size=four", "expected an integer"),
    ("model.sequence_parallel=maybe", "expected true or false"),
    ("model.cuda_graph_scope=[attn,moe_router", "unbalanced brackets"),
])
def test_bad_override_names_the_override(bad, message, vkb):
    with pytest.raises(UserError, match=message) as err:
        apply_overrides(cfgmod.TrainingConfig(), [bad], vkb)
    assert repr(bad) in str(err.value)


def test_unknown_override_keys_warn_not_fail(vkb):
    cfg = apply_overrides(cfgmod.TrainingConfig(), ["modle.x=1", "model.tensor_model_paralel_size=2",
                                                    "model.some_future_flag=1"], vkb)
    assert any("'modle.x=1'" in w and "not a Bridge ConfigContainer section" in w for w in cfg.warnings)
    assert any("did you mean model.tensor_model_parallel_size" in w for w in cfg.warnings)
    assert len(cfg.warnings) == 2 and cfg.tensor_model_parallel_size is None


# --- Megatron-LM args ----------------------------------------------------------------------------


def test_launch_script_resolves_variables_arrays_and_arithmetic(vkb):
    cfg = read_megatron_args(FIX / "launch_llama3_8b.sh", kb=vkb)
    assert cfg.source == "megatron-args" and cfg.task == "pretrain"
    assert (cfg.tensor_model_parallel_size, cfg.pipeline_model_parallel_size, cfg.context_parallel_size) == (2, 2, 1)
    assert cfg.world_size == 16  # --nproc_per_node 8 x --nnodes ${SLURM_NNODES:-"2"}
    assert cfg.virtual_pipeline_model_parallel_size == 4  # (32 layers / PP 2) / 4 layers per virtual stage
    assert cfg.seq_length == 8192 and cfg.num_query_groups == 8 and cfg.vocab_size == 128256
    assert cfg.gated_linear_unit is True and cfg.activation_func == "silu"
    assert cfg.share_embeddings_and_output_weights is False
    assert cfg.sequence_parallel is True and cfg.use_distributed_optimizer is True and cfg.bf16 is True


def test_launch_script_quoted_flag_strings_lists_and_env(vkb):
    cfg = read_megatron_args(FIX / "launch_llama3_8b.sh", kb=vkb)
    assert cfg.fp8 == "hybrid" and cfg.fp8_param_gather is True  # "--fp8-format hybrid" inside an array
    assert cfg.recompute_granularity == "selective" and cfg.recompute_modules == ["core_attn", "mlp"]
    assert cfg.env_vars == {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}


def test_launch_script_warnings_for_unresolved_and_repeated_flags(vkb):
    cfg = read_megatron_args(FIX / "launch_llama3_8b.sh", kb=vkb)
    assert cfg.expert_model_parallel_size is None
    assert any(":61: --expert-model-parallel-size $EP_SIZE: unresolved" in w for w in cfg.warnings)
    assert cfg.micro_batch_size == 2
    assert any(":70: --micro-batch-size = 2 replaces 1 set by line 40" in w for w in cfg.warnings)
    assert len(cfg.warnings) == 2


def test_command_line_text_with_equals_and_store_true(vkb):
    text = ("torchrun --nproc-per-node=4 pretrain_gpt.py --tensor-model-parallel-size=2 --num-layers 8 "
            "--hidden-size 1024 --num-attention-heads 16 --num-query-groups 4 --use-megatron-fsdp "
            "--cpu-offloading --cpu-offloading-num-layers 2 --optimizer-cpu-offload --optimizer-offload-fraction 0.7 "
            "--cuda-graph-impl local --cuda-graph-scope attn mlp --recompute-activations --mtp-num-layers 1 "
            "--num-experts 16 --moe-router-topk 4 --expert-model-parallel-size 4 --no-load-optim "
            "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 1 model.seq_length=2048")
    cfg = read_megatron_args(text, kb=vkb)
    assert cfg.world_size == 4 and cfg.tensor_model_parallel_size == 2
    assert cfg.num_query_groups is None  # ignored without --group-query-attention, as Megatron does
    assert any("--num-query-groups without --group-query-attention" in w for w in cfg.warnings)
    assert cfg.use_megatron_fsdp and cfg.cpu_offloading and cfg.optimizer_cpu_offload
    assert cfg.cpu_offloading_num_layers == 2 and cfg.optimizer_offload_fraction == 0.7
    assert cfg.cuda_graph_impl == "local" and cfg.cuda_graph_scope == ["attn", "mlp"]
    assert cfg.recompute_granularity == "selective" and cfg.mtp_num_layers == 1
    assert (cfg.num_moe_experts, cfg.moe_router_topk, cfg.expert_model_parallel_size) == (16, 4, 4)
    assert cfg.load_optim is False
    assert cfg.virtual_pipeline_model_parallel_size is None  # one virtual stage per rank = no VPP
    assert cfg.seq_length == 2048  # a Bridge override word inside a launch line


def test_megatron_defaults_only_when_the_list_defines_the_model(vkb):
    arch = read_megatron_args("--num-layers 4 --hidden-size 256 --num-attention-heads 4", kb=vkb)
    assert arch.share_embeddings_and_output_weights is True and arch.gated_linear_unit is False
    assert arch.sequence_parallel is None  # no run arguments: nothing said about SP
    run = read_megatron_args("--micro-batch-size 1 --tensor-model-parallel-size 2", kb=vkb)
    assert run.sequence_parallel is False and run.share_embeddings_and_output_weights is None


def test_megatron_bias_norm_dropout_and_vpp_group_flags(vkb):
    # Flag spellings: Megatron-LM arguments.py and the argparse_meta names in transformer_config.py /
    # model_parallel_config.py @d98e8a64; values as examples/mixtral/train_mixtral_8x7b_distributed.sh passes them.
    text = ("--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --disable-bias-linear --add-qkv-bias "
            "--normalization RMSNorm --qk-layernorm --use-rotary-position-embeddings --hidden-dropout 0.0 "
            "--attention-dropout 0.0 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 "
            "--microbatch-group-size-per-virtual-pipeline-stage 5")
    cfg = read_megatron_args(text, kb=vkb)
    assert cfg.add_bias_linear is False and cfg.add_qkv_bias is True and cfg.qk_layernorm is True
    assert cfg.normalization == "RMSNorm" and cfg.position_embedding_type == "rope"
    assert (cfg.hidden_dropout, cfg.attention_dropout) == (0.0, 0.0)
    assert cfg.microbatch_group_size_per_vp_stage == 5 and cfg.virtual_pipeline_model_parallel_size == 2
    assert cfg.warnings == []
    plain = read_megatron_args("--num-layers 8 --hidden-size 1024 --num-attention-heads 16", kb=vkb)
    assert plain.add_bias_linear is None and plain.normalization is None  # Megatron's defaults, left to the estimator


def test_megatron_bad_value_names_file_line_and_flag(tmp_path, vkb):
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/bash\nARGS=(\n  --num-layers 4\n  --seq-length long\n)\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"run\.sh:4: --seq-length: expected an integer, got 'long'"):
        read_megatron_args(path, kb=vkb)


def test_megatron_mapping_form_and_layout_vpp(vkb):
    cfg = read_config(FIX / "mlm_ci_scoped_cudagraph_model_config.yaml", kb=vkb)
    assert cfg.source == "megatron-args"
    assert cfg.pipeline_model_parallel_layout == "Et|(tt|)*6mL"
    assert cfg.virtual_pipeline_model_parallel_size == 4  # 8 layout stages / PP 2
    assert cfg.moe_layer_freq == [0] * 4 + [1] * 9
    assert cfg.cuda_graph_scope == ["attn", "mlp", "moe_router", "moe_preprocess"]
    assert cfg.recompute_modules == ["moe_act"] and cfg.fp8_recipe == "blockwise"
    assert cfg.env_vars == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    assert cfg.warnings == []  # ${TENSORBOARD_PATH} sits in a flag memtune does not read


def test_layout_given_as_stage_lists_becomes_the_string_form():
    stages = [["embedding", "decoder"], ["decoder", "loss"]]
    assert cfgmod.coerce("pipeline_model_parallel_layout", stages, "x") == "Et|tL"


@pytest.mark.parametrize("layout, stages", [("Et|(tt|)*6mL", 8), ("Ettt|(tt|)*29,m|L", 32), ("E|t*3|L", 3)])
def test_layout_stage_count(layout, stages):
    assert layout_stages(layout) == stages


def test_args_mapping_skips_false_and_reads_bracket_lists(vkb):
    cfg = args_from_mapping({"sequence-parallel": False, "recompute-modules": "[mlp, moe_act]",
                             "num-layers-per-virtual-pipeline-stage": 2, "num-layers": 8,
                             "pipeline-model-parallel-size": 2}, kb=vkb)
    assert cfg.sequence_parallel is False  # a run-level default, not the False flag value
    assert cfg.recompute_modules == ["mlp", "moe_act"]
    assert cfg.virtual_pipeline_model_parallel_size == 2


# --- HF config.json ------------------------------------------------------------------------------


def test_hf_deepseek_v3_architecture(vkb):
    cfg = read_hf_config(FIX / "hf_deepseek_v3_config.json", vkb)
    assert cfg.source == "hf-config"
    assert (cfg.num_layers, cfg.hidden_size, cfg.ffn_hidden_size, cfg.vocab_size) == (61, 7168, 18432, 129280)
    assert (cfg.num_moe_experts, cfg.moe_router_topk, cfg.moe_ffn_hidden_size) == (256, 8, 2048)
    assert cfg.moe_shared_expert_intermediate_size == 2048  # 1 shared expert x 2048
    assert cfg.moe_layer_freq == [0, 0, 0] + [1] * 58  # first_k_dense_replace = 3
    assert cfg.mtp_num_layers == 1 and cfg.multi_latent_attention is True
    assert (cfg.q_lora_rank, cfg.kv_lora_rank, cfg.qk_head_dim, cfg.qk_pos_emb_head_dim) == (1536, 512, 128, 64)
    assert cfg.share_embeddings_and_output_weights is False and cfg.gated_linear_unit is True


def test_hf_deepseek_v3_layer_kinds_follow_the_bridge(vkb):
    cfg = read_hf_config(FIX / "hf_deepseek_v3_config.json", vkb)
    # deepseek_v3_bridge.py pins RMSNorm, no linear bias, q/kv layernorms and hidden dropout 0; MLA keeps plain RoPE.
    assert cfg.normalization == "RMSNorm" and cfg.add_bias_linear is False and cfg.qk_layernorm is True
    assert cfg.hidden_dropout == 0.0 and cfg.activation_func == "silu" and cfg.position_embedding_type == "rope"


def _hf(tmp_path, vkb, **keys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                                "vocab_size": 1000, **keys}), encoding="utf-8")
    return read_hf_config(path, vkb)


def test_hf_gpt_oss_bias_activation_and_yarn(tmp_path, vkb):
    # Keys as in openai/gpt-oss-20b config.json (../shared/fixtures/hf-configs/gpt-oss-20b.json).
    cfg = _hf(tmp_path, vkb, model_type="gpt_oss", hidden_act="silu", attention_bias=True, rms_norm_eps=1e-05,
              rope_scaling={"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096})
    assert cfg.activation_func == "quick_gelu" and cfg.gated_linear_unit is True  # gpt_oss_bridge's clamped GLU
    assert cfg.add_bias_linear is True and cfg.add_qkv_bias is True and cfg.position_embedding_type == "yarn"
    assert cfg.warnings == []  # the bridge's own values replace config.json's silently


def test_hf_qwen2_has_qkv_bias_without_a_key(tmp_path, vkb):
    # Keys of Qwen/Qwen2-7B-Instruct config.json: no attention_bias key, yet q/k/v carry a bias.
    cfg = _hf(tmp_path, vkb, model_type="qwen2", hidden_act="silu", attention_dropout=0.0, rms_norm_eps=1e-06,
              rope_theta=1000000.0, tie_word_embeddings=False)
    assert cfg.add_qkv_bias is True and cfg.add_bias_linear is False and cfg.qk_layernorm is None
    assert (cfg.normalization, cfg.hidden_dropout, cfg.attention_dropout) == ("RMSNorm", 0.0, 0.0)


def test_hf_precedence_defaults_then_keys_then_bridge(tmp_path, vkb):
    llama = _hf(tmp_path, vkb, model_type="llama")
    assert (llama.add_qkv_bias, llama.add_bias_linear, llama.attention_dropout) == (False, False, 0.0)
    biased = _hf(tmp_path, vkb, model_type="llama", attention_bias=True, attention_dropout=0.1)
    assert biased.add_qkv_bias is True and biased.attention_dropout == 0.1  # config.json beats class defaults
    qwen3 = _hf(tmp_path, vkb, model_type="qwen3", attention_bias=True, hidden_dropout=0.1)
    assert qwen3.add_qkv_bias is False and qwen3.hidden_dropout == 0.0  # qwen3_bridge pins both


def test_hf_unknown_family_reads_keys_only(tmp_path, vkb):
    # openai-community/gpt2 config.json: LayerNorm epsilon, learned positions, dropout 0.1.
    cfg = _hf(tmp_path, vkb, model_type="gpt2", n_positions=1024, layer_norm_epsilon=1e-05, resid_pdrop=0.1,
              attn_pdrop=0.1, activation_function="gelu_new")
    assert cfg.normalization == "LayerNorm" and cfg.position_embedding_type is None
    assert (cfg.hidden_dropout, cfg.attention_dropout, cfg.max_position_embeddings) == (0.1, 0.1, 1024)
    assert cfg.add_bias_linear is None and cfg.gated_linear_unit is None


def test_hf_vocabulary_names_real_fields(vkb):
    families = vkb.tables["vocabulary"]["hf_config"]["model_types"]
    for model_type, family in families.items():
        for part in ("sets", "defaults"):
            for name, value in (family.get(part) or {}).items():
                assert cfgmod.coerce(name, value, f"{model_type}.{part}.{name}") == value


def test_hf_text_config_and_dense_layers(vkb):
    cfg = read_hf_config(FIX / "hf_qwen3_moe_vl_config.json", vkb)
    assert (cfg.num_layers, cfg.num_query_groups, cfg.kv_channels) == (4, 4, 128)
    assert cfg.moe_layer_freq == [0, 1, 1, 1]  # layer 0 listed in mlp_only_layers
    assert cfg.share_embeddings_and_output_weights is False


def test_hf_malformed_json_names_line(tmp_path, vkb):
    path = tmp_path / "config.json"
    path.write_text('{\n  "hidden_size": 4096,\n  "num_hidden_layers": ,\n}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"config\.json:3: invalid JSON"):
        read_hf_config(path, vkb)


# --- dispatch ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, source", [
    ("bridge_lora_sft_dump.yaml", "bridge-yaml"),
    ("launch_llama3_8b.sh", "megatron-args"),
    ("mlm_ci_scoped_cudagraph_model_config.yaml", "megatron-args"),
    ("hf_deepseek_v3_config.json", "hf-config"),
])
def test_read_config_dispatches_on_content(name, source, vkb):
    assert read_config(FIX / name, kb=vkb).source == source


def test_read_config_applies_overrides_last(vkb):
    cfg = read_config(FIX / "hf_deepseek_v3_config.json", ["model.tensor_model_parallel_size=8"], kb=vkb)
    assert cfg.source == "hf-config" and cfg.tensor_model_parallel_size == 8 and cfg.num_layers == 61


def test_read_config_finds_a_dump_inside_a_log(tmp_path, vkb):
    dump = (FIX / "bridge_precision_recipe.yaml").read_text(encoding="utf-8").split("\n", 2)[2]
    log = ("[INFO] starting\n------- Task Configuration -------\n"
           "_target_: megatron.bridge.training.config.ConfigContainer\n" + dump + "----------\nTraining ...\n")
    path = tmp_path / "train.log"
    path.write_text(log, encoding="utf-8")
    cfg = read_config(path, kb=vkb)
    assert cfg.tensor_model_parallel_size == 8 and cfg.fp8 == "hybrid"


def test_read_config_rejects_unknown_content(tmp_path, vkb):
    path = tmp_path / "notes.yaml"
    path.write_text("title: my notes\nbody: nothing here\n", encoding="utf-8")
    with pytest.raises(UserError, match="notes.yaml:1: not a Bridge config YAML"):
        read_config(path, kb=vkb)


# --- real files from ../shared (skipped when absent) ---------------------------------------------


def test_real_bridge_task_config_dump(shared_dir, vkb):
    cfg = read_config(shared_dir / "fixtures/configs/bridge-llama32-1b-pretrain-task-config.yaml", kb=vkb)
    assert (cfg.num_layers, cfg.hidden_size, cfg.num_query_groups, cfg.vocab_size) == (16, 2048, 8, 128256)
    assert (cfg.micro_batch_size, cfg.global_batch_size, cfg.seq_length) == (1, 512, 1024)
    assert cfg.use_distributed_optimizer is True and cfg.task == "pretrain" and cfg.main_grads_dtype == "fp32"
    assert len(cfg.warnings) == 1 and "model.seq_length" in cfg.warnings[0]  # 131072 vs 1024


@pytest.mark.parametrize("name", [
    "megatron-lm-02_train.sh", "megatron-lm-sbatch_mfsdp_deepseek_v3.sh", "megatron-lm-train_gpt3_175b_distributed.sh",
    "megatron-lm-train_llama3_8b_h100_fp8.sh", "megatron-lm-train_mixtral_8x7b_distributed.sh",
    "slime-model-args-deepseek-v3.sh", "slime-model-args-moonlight.sh", "slime-model-args-qwen3-235B-A22B.sh",
    "slime-model-args-qwen3-30B-A3B.sh", "slime-run-qwen3-30B-A3B.sh",
    "bridge-override-llama32_1b_pretrain.yaml", "bridge-override-qwen3_next_80b_a3b_finetune_override_example.yaml",
])
def test_real_launch_scripts_and_overrides_read(shared_dir, name, vkb):
    cfg = read_config(shared_dir / "fixtures/configs" / name, kb=vkb)
    assert cfg.provided
    # what the scripts leave unresolved, what they set twice, and --sequence-parallel at TP 1, which Megatron-LM
    # itself turns off (the Llama3-8B FP8 and Mixtral example scripts both pass it)
    assert all("unresolved" in w or "replaces" in w or "turns it off" in w for w in cfg.warnings), cfg.warnings


def test_real_launch_script_values(shared_dir, vkb):
    mixtral = read_config(shared_dir / "fixtures/configs/megatron-lm-train_mixtral_8x7b_distributed.sh", kb=vkb)
    assert mixtral.pipeline_model_parallel_size == 4
    assert (mixtral.expert_model_parallel_size, mixtral.num_moe_experts) == (8, 8)
    assert mixtral.world_size == 8 and mixtral.load_optim is False
    assert mixtral.add_bias_linear is False and mixtral.normalization == "RMSNorm"
    assert mixtral.position_embedding_type == "rope" and mixtral.hidden_dropout == 0.0
    dsv3 = read_config(shared_dir / "fixtures/configs/megatron-lm-sbatch_mfsdp_deepseek_v3.sh", kb=vkb)
    assert dsv3.use_megatron_fsdp is True and dsv3.data_parallel_sharding_strategy == "optim_grads_params"
    assert dsv3.recompute_modules == ["mlp", "moe", "mla_up_proj", "layernorm"]
    assert dsv3.moe_layer_freq == [0] * 3 + [1] * 58 and dsv3.env_vars.get("TORCH_NCCL_AVOID_RECORD_STREAMS") == "1"


def test_every_mlm_ci_record_converts(shared_dir, kb):
    records = json.loads((shared_dir / "fixtures/mlm-ci/public.json").read_text(encoding="utf-8"))
    assert len(records) == 46
    for rec in records:
        cfg = read_megatron_args(rec["args"], rec["name"], kb=kb)
        flags = rec["flags"]
        assert cfg.tensor_model_parallel_size == flags["tp"], rec["name"]
        assert cfg.pipeline_model_parallel_size == flags["pp"], rec["name"]
        assert (cfg.virtual_pipeline_model_parallel_size or 1) == flags["vpp_derived"], rec["name"]
        assert cfg.num_layers == flags["num_layers"] and cfg.hidden_size == flags["hidden_size"], rec["name"]
        assert cfg.num_moe_experts == flags["num_experts"], rec["name"]
        assert (cfg.add_bias_linear is False) == bool(rec["args"].get("disable-bias-linear")), rec["name"]
        group = rec["args"].get("microbatch-group-size-per-virtual-pipeline-stage")
        assert cfg.microbatch_group_size_per_vp_stage == (int(group) if group else None), rec["name"]
        assert cfg.warnings == [], (rec["name"], cfg.warnings)


@pytest.mark.parametrize("name", ["DeepSeek-V3.json", "Llama-3.1-8B.json", "Qwen3-14B.json", "Qwen3-30B-A3B.json",
                                  "Qwen3-32B.json", "Qwen3-8B.json", "gpt-oss-20b.json"])
def test_real_hf_configs(shared_dir, name, vkb):
    path = shared_dir / "fixtures/hf-configs" / name
    raw = json.loads(path.read_text(encoding="utf-8"))
    cfg = read_config(path, kb=vkb)
    assert cfg.num_layers == raw["num_hidden_layers"] and cfg.hidden_size == raw["hidden_size"]
    assert cfg.num_query_groups == raw["num_key_value_heads"] and cfg.vocab_size == raw["vocab_size"]
    experts = raw.get("num_experts") or raw.get("n_routed_experts") or raw.get("num_local_experts")
    assert cfg.num_moe_experts == experts
    assert asdict(cfg)["gated_linear_unit"] is True
    # Every one of these families is RMSNorm with rotary positions and no hidden dropout in Bridge.
    assert cfg.normalization == "RMSNorm" and cfg.hidden_dropout == 0.0
    assert cfg.attention_dropout == raw["attention_dropout"] and cfg.position_embedding_type in ("rope", "yarn")
    if raw["model_type"].startswith("qwen3"):
        assert cfg.qk_layernorm is True and cfg.add_qkv_bias is False


def test_hf_config_estimates_like_the_preset(shared_dir, kb):
    """An HF config.json and the models.yaml preset describe one model, so they must give one estimate."""
    from dataclasses import replace

    from memtune.estimator import estimate
    from memtune.estimator.models import preset

    layout = {"seq_length": 4096, "micro_batch_size": 1, "tensor_model_parallel_size": 2, "data_parallel_size": 4,
              "sequence_parallel": True, "bf16": True, "use_distributed_optimizer": True}
    hf = replace(read_hf_config(shared_dir / "fixtures/hf-configs/Qwen3-8B.json", kb), model_name=None, **layout)
    named = replace(preset("qwen3-8b", kb), **layout)
    assert estimate(hf, kb=kb).peak_bytes == pytest.approx(estimate(named, kb=kb).peak_bytes, rel=1e-6)


def test_set_items_take_bridge_keys_and_bare_fields_in_order(vkb):
    """``estimate`` and ``plan`` read ``--set`` alike: a bare field name is a TrainingConfig field, a dotted key a
    Bridge override, and a later item wins whichever form either has."""
    from memtune.facts import TrainingConfig
    from memtune.inputs.config import apply_sets

    cfg = apply_sets(TrainingConfig(), ["tensor_model_parallel_size=4", "model.tensor_model_parallel_size=8",
                                        "micro_batch_size=2", "mixed_precision=bf16_mixed"], vkb)
    assert cfg.tensor_model_parallel_size == 8 and cfg.micro_batch_size == 2 and cfg.bf16
    cfg = apply_sets(TrainingConfig(), ["model.pipeline_model_parallel_size=4", "pipeline_model_parallel_size=2"], vkb)
    assert cfg.pipeline_model_parallel_size == 2
    with pytest.raises(UserError, match="no_such_field"):
        apply_sets(TrainingConfig(), ["no_such_field=1"], vkb)


def test_megatrons_fp8_attributes_given_bare_reach_the_config(vkb):
    # NVIDIA/Megatron-LM#3461 (set issue-24-s63): the FP8 parameter settings named as Megatron's config takes them
    cfg = apply_overrides(cfgmod.TrainingConfig(), ["fp8_recipe=mxfp8", "fp8_param_gather=true",
                                                    "reuse_grad_buf_for_mxfp8_param_ag=true"], vkb)
    assert (cfg.fp8_recipe, cfg.fp8_param_gather, cfg.reuse_grad_buf_for_mxfp8_param_ag) == ("mxfp8", True, True)


def test_megatron_turns_sequence_parallel_off_at_tp_1(vkb):
    # megatron/training/arguments.py validate_args: "Disabling sequence parallelism because tensor model parallelism
    # is disabled" - the run starts, without it; an estimate follows it instead of refusing (issue 25)
    cfg = read_megatron_args("pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
                             "--tensor-model-parallel-size 1 --sequence-parallel", kb=vkb)
    assert cfg.sequence_parallel is False and any("turns it off" in w for w in cfg.warnings)
    cfg = read_megatron_args("pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
                             "--tensor-model-parallel-size 2 --sequence-parallel", kb=vkb)
    assert cfg.sequence_parallel is True


@pytest.mark.parametrize(("overrides", "expected"), [
    # the DeepSpeed config's own keys (EleutherAI/gpt-neox#1354, set issue-24-s73)
    (["zero_optimization.stage=3", "zero_optimization.offload_optimizer.device=cpu"],
     {"use_torch_fsdp2": True, "optimizer_cpu_offload": True, "optimizer_offload_fraction": 1.0}),
    # DeepSpeed-Chat / OpenRLHF flags (01-ai/Yi#125) and the ms-swift / LLaMA-Factory presets (ms-swift#3559)
    (["zero_stage=2", "offload=true"], {"use_distributed_optimizer": True, "optimizer_cpu_offload": True}),
    (["adam_offload=true"], {"optimizer_cpu_offload": True}),
    (["zero_optimization.offload=cpu"], {"optimizer_cpu_offload": True}),  # the device it names is the switch
    (["deepspeed=zero3_offload"], {"use_torch_fsdp2": True, "optimizer_cpu_offload": True}),
    (["deepspeed=zero2"], {"use_distributed_optimizer": True, "optimizer_cpu_offload": None,
                           "data_parallel_sharding_strategy": "optim_grads"}),
    (["zero_stage=1"], {"use_distributed_optimizer": True, "data_parallel_sharding_strategy": None}),
    (["zero_optimization.offload_optimizer.device=none"], {"optimizer_cpu_offload": None}),
    # Megatron-LM's own argument passed through a framework (radixark/miles#1482, set issue-24-s74): the whole
    # optimizer, as --optimizer-offload-fraction defaults to 1.0 there; a stated fraction is kept
    (["optimizer_cpu_offload=True"], {"optimizer_cpu_offload": True, "optimizer_offload_fraction": 1.0}),
    (["optimizer_offload_fraction=0.5", "optimizer_cpu_offload=True"], {"optimizer_offload_fraction": 0.5}),
])
def test_deepspeed_zero_keys_are_the_sharding_and_offload_they_stand_for(overrides, expected, vkb):
    cfg = apply_overrides(cfgmod.TrainingConfig(), overrides, kb=vkb)
    assert {k: getattr(cfg, k) for k in expected} == expected


@pytest.mark.parametrize(("overrides", "expected"), [
    # pytorch/torchtitan#620 (set issue-24-s65): TorchTitan's per-rank batch and its activation-checkpointing mode
    (["training.batch_size=1", "activation_checkpoint.mode=full"],
     {"micro_batch_size": 1, "recompute_granularity": "full", "recompute_method": "uniform",
      "recompute_num_layers": 1}),
    (["training.local_batch_size=4", "activation_checkpoint.mode=selective"],
     {"micro_batch_size": 4, "recompute_granularity": "selective", "recompute_method": None}),
    (["activation_checkpoint.mode=none"], {"recompute_granularity": None}),
    # the HF Trainer's gradient checkpointing reruns every decoder layer: full recompute, one layer at a time...
    (["gradient_checkpointing=true"], {"recompute_granularity": "full", "recompute_num_layers": 1}),
    (["gradient_checkpointing=false"], {"recompute_granularity": None}),
    # ...but a Megatron backend reads its own recompute keys (NovaSky-AI/SkyRL#700: the flag, true by default, ignored)
    (["trainer.strategy=megatron", "trainer.gradient_checkpointing=true"], {"recompute_granularity": None}),
    # a batch key of another section is no micro-batch
    (["data.batch_size=1"], {"micro_batch_size": None}),
])
def test_activation_checkpointing_keys_outside_megatron_are_the_recompute_they_run(overrides, expected, vkb):
    cfg = apply_overrides(cfgmod.TrainingConfig(), overrides, kb=vkb)
    assert {k: getattr(cfg, k) for k in expected} == expected


@pytest.mark.parametrize("short, recipe", [("ds", "delayed"), ("cs", "tensorwise"), ("mx", "mxfp8"),
                                           ("ss", "blockwise")])
def test_bridge_launcher_fp8_recipe_shorthand_is_read_not_refused(short, recipe, vkb):
    # Megatron-Bridge's performance launcher takes --fp8_recipe ds / cs / mx / ss (Megatron-Bridge#869 pasted
    # fp8_recipe=ds): diagnose exited 2 on a value the user's own launcher accepts
    cfg = apply_overrides(cfgmod.TrainingConfig(), [f"fp8_recipe={short}"], vkb)
    assert cfg.fp8_recipe == recipe
    with pytest.raises(UserError):
        apply_overrides(cfgmod.TrainingConfig(), ["fp8_recipe=bogus"], vkb)
