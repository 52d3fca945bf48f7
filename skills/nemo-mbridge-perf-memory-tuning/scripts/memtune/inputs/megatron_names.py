"""Megatron-LM flag spellings of TrainingConfig fields, apart from the reader so writing a flag stays cheap.

A flag maps onto the TrainingConfig field of the same name (dashes -> underscores) unless listed in RENAMED.
Sources: NVIDIA/Megatron-LM megatron/training/arguments.py and argument_utils.py @d98e8a64.
"""

from __future__ import annotations

RENAMED: dict[str, str] = {
    "num-experts": "num_moe_experts",
    "fp8-format": "fp8",
    "fp4-format": "fp4",
    "cuda-graph-modules": "cuda_graph_scope",
    "cuda-graph-scope": "cuda_graph_scope",
    "decoder-first-pipeline-num-layers": "num_layers_in_first_pipeline_stage",
    "decoder-last-pipeline-num-layers": "num_layers_in_last_pipeline_stage",
    "num-virtual-stages-per-pipeline-rank": "virtual_pipeline_model_parallel_size",
    # ModelParallelConfig argparse_meta names (megatron/core/model_parallel_config.py @d98e8a64).
    "microbatch-group-size-per-virtual-pipeline-stage": "microbatch_group_size_per_vp_stage",
}
# Fields no Megatron flag stands for, even when a flag of that name exists for something else.
NOT_FLAGS = {"task", "model_name", "env_vars", "peft", "peft_dim", "peft_target_modules",
             "sequence_parallel_input_regather", "provided", "source", "warnings"}
