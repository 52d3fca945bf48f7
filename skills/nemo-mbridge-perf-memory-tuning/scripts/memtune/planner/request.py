"""What a plan is asked: the request, the config fields a candidate layout sets, and what the request says
about graph capture reusing other streams' blocks.

Apart from the search so that every planner module can name these fields without importing it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..estimator.static import graph_kind
from ..facts import EnvFacts, GpuFacts, TrainingConfig

TASKS = ("pretrain", "sft", "lora")
SIZE_FIELDS = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
               "context_parallel_size", "expert_model_parallel_size")
# Every field a shape sets (Planner._shape_fields); the rest of a candidate's config is the base and its combination.
# The pipeline split a shape may choose besides even: embedding and loss counted as one layer each (what the
# Bridge recipes set for Llama3.1-405B and Qwen3-235B; it balances the output layer's work, costs.yaml
# pipeline-imbalance, and makes 126 or 94 layers divide).
SPLIT_FIELDS = ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")
# Where neither split divides (DeepSeek-V3: 61 layers and an MTP block), an explicit layout string with equal
# slots per chunk, as the DeepSeek-V3 recipes write it (traffic.balanced_layout).
LAYOUT_FIELD = "pipeline_model_parallel_layout"
# what a full-iteration graph is planned with (the env of Bridge's full-iteration recipes, Megatron-Bridge #4587)
CAPTURE_REUSE_ENV = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,graph_capture_record_stream_reuse:True"
SHAPE_FIELDS = frozenset({*SIZE_FIELDS, *SPLIT_FIELDS, LAYOUT_FIELD, "sequence_parallel", "world_size",
                          "seq_length", "global_batch_size", "data_parallel_size"})


@dataclass(frozen=True)
class PlanRequest:
    """What the user asks: a model (in ``base``), a cluster, a batch and a task."""

    base: TrainingConfig  # architecture plus fixed settings (precision, CUDA graphs, ...); may hold a layout
    gpu: GpuFacts
    gpus: int
    seq_length: int
    global_batch_size: int
    task: str = "pretrain"
    headroom: float | None = None  # fraction of capacity kept free; None: the estimator's error band (headroom.py)
    expandable_segments: bool = True
    gpus_per_node: int | None = None
    allow_cross_node_tp: bool = False
    env: EnvFacts = field(default_factory=EnvFacts)
    top: int | None = 5  # None: decide every candidate


def _stated_reuse(env: EnvFacts) -> str | None:
    """graph_capture_record_stream_reuse as the user's --env gives it ("False" when it sets an allocator
    configuration without it), else None."""
    if env.alloc_conf is None:
        return None
    return (env.alloc_options or {}).get("graph_capture_record_stream_reuse", "False")


def _capture_reuse(request: PlanRequest, base: TrainingConfig) -> bool:
    """Whether graph capture may reuse blocks recorded on other streams: as the user's environment says, else
    on when the plan assumes the allocator settings (--expandable-segments) and the run captures a
    full-iteration graph, as Bridge's full-iteration recipes set it."""
    stated = _stated_reuse(request.env)
    if stated is not None:
        return stated == "True"
    return request.expandable_segments and graph_kind(base) == "full_iteration"
