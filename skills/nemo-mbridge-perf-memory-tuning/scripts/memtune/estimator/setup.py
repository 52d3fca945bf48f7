"""A layout's sizes and bytes per parameter with Megatron's defaults applied (``resolve``), and its batch.

``resolve`` reads only what stays fixed while the planner varies micro-batches, recompute and
activation offload (see static.py); ``Batch`` holds the per-candidate micro-batch size and count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from ..errors import UserError
from ..facts import TrainingConfig


@dataclass(frozen=True)
class Setup:
    """Resolved layout: every parallel size, dtype and sharding switch the formulas use, with defaults applied."""

    tp: int
    pp: int
    vp: int
    cp: int
    ep: int
    etp: int
    dp: int
    world: int
    sp: bool
    seq: int
    weight_bytes: float
    grad_bytes: float
    master_bytes: float
    moment_bytes: float
    dense_shard: int
    expert_shard: int
    fsdp: str | None
    fp8: bool
    fp8_params: bool
    fp8_copy_bytes: float  # bytes per linear weight of its FP8 copy (data, and a transpose where GEMMs need one)
    lora: bool
    lora_rank: int
    lora_targets: tuple[str, ...]
    offload_fraction: float


class Batch(NamedTuple):
    """Micro-batch size and micro-batches per step; ``guessed`` when neither the caller nor GBS gave the count."""

    mbs: int
    microbatches: int
    guessed: bool


def size(value: int | None) -> int:
    """A parallel size or micro-batch size as Megatron reads it: unset (or 0) is 1."""
    return int(value) if value else 1


def resolve(cfg: TrainingConfig, c: dict[str, Any], notes: list[str]) -> Setup:
    """Fill Megatron defaults and derive DP and bytes per parameter; appends ``dp-unknown`` / ``bf16-assumed``."""
    tp, pp, cp = size(cfg.tensor_model_parallel_size), size(cfg.pipeline_model_parallel_size), \
        size(cfg.context_parallel_size)
    vp = size(cfg.virtual_pipeline_model_parallel_size)
    if cfg.pipeline_model_parallel_layout and not cfg.virtual_pipeline_model_parallel_size:
        vp = max(1, _layout_stages(cfg.pipeline_model_parallel_layout) // pp)
    ep = size(cfg.expert_model_parallel_size)
    etp = int(cfg.expert_tensor_parallel_size) if cfg.expert_tensor_parallel_size else tp
    if cfg.data_parallel_size:
        dp = int(cfg.data_parallel_size)
    elif cfg.world_size:
        if cfg.world_size % (tp * pp * cp):
            raise UserError(f"config: world_size {cfg.world_size} is not divisible by TP*PP*CP = {tp * pp * cp}")
        dp = cfg.world_size // (tp * pp * cp)
    else:
        dp = 1
        notes.append("dp-unknown")
    world = dp * tp * pp * cp
    if not cfg.seq_length:
        raise UserError("config: seq_length is not set")
    dtype = c["dtype-bytes"]
    half = cfg.bf16 or cfg.fp16 or (cfg.bf16 is None and cfg.fp16 is None)
    if cfg.bf16 is None and cfg.fp16 is None:
        notes.append("bf16-assumed")
    weight = dtype["bf16"] if half else dtype["fp32"]
    pa = bool(cfg.use_precision_aware_optimizer)
    if pa and cfg.main_grads_dtype:
        grad = dtype[_dtype_name(cfg.main_grads_dtype)]
    elif cfg.grad_reduce_in_fp32 is False or (cfg.grad_reduce_in_fp32 is None and cfg.fp16):
        grad = weight
    else:
        grad = dtype["fp32"]
    table = c["optimizer-moments"]
    moments = table.get((cfg.optimizer or "adam").lower(), table["adam"])
    if pa:
        moment = dtype[_dtype_name(cfg.exp_avg_dtype or "fp32")] + dtype[_dtype_name(cfg.exp_avg_sq_dtype or "fp32")]
        moment *= moments / 2
        # Transformer Engine's Adam keeps the master weight (as a 16-bit remainder) unless the run computes in FP8
        # with a recipe other than delayed scaling: then Megatron-Core keeps the fp32 master itself, so FP8
        # primary weights can be cast from it (OptimizerConfig.use_precision_aware_optimizer_no_fp8_or_ds_fp8).
        mcore_master = bool(cfg.fp8) and (cfg.fp8_recipe or "delayed") != "delayed" and not cfg.optimizer_cpu_offload
        master = (dtype["fp32"] if mcore_master else c["master-remainder-bytes"]) if half else 0.0
    else:
        moment = moments * dtype["fp32"]
        master = dtype["fp32"] if half else 0.0
    fsdp = None
    if cfg.use_megatron_fsdp:
        fsdp = cfg.data_parallel_sharding_strategy or "optim_grads_params"
    elif cfg.use_torch_fsdp2:  # torch's fully_shard over the data-parallel group shards all three
        fsdp = "optim_grads_params"
    elif cfg.use_distributed_optimizer and cfg.data_parallel_sharding_strategy == "optim_grads":
        fsdp = "optim_grads"  # DeepSpeed ZeRO-2 (inputs/config.py): optimizer state and gradients, weights whole
    distributed = bool(cfg.use_distributed_optimizer) or fsdp is not None
    instances = size(cfg.num_distributed_optimizer_instances)
    dense_shard = max(1, dp * cp // instances) if distributed else 1
    expert_dp = max(1, (tp * cp * dp) // (ep * etp))
    expert_shard = max(1, expert_dp // instances) if distributed else 1
    lora = bool(cfg.peft) and cfg.peft.lower() not in {"none", "false"}
    offload = 0.0
    if cfg.optimizer_cpu_offload:
        offload = float(cfg.optimizer_offload_fraction if cfg.optimizer_offload_fraction is not None else 1.0)
    return Setup(
        tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, etp=etp, dp=dp, world=world, sp=bool(cfg.sequence_parallel) and tp > 1,
        seq=int(cfg.seq_length), weight_bytes=weight, grad_bytes=grad, master_bytes=master,
        moment_bytes=moment, dense_shard=dense_shard, expert_shard=expert_shard, fsdp=fsdp,
        fp8=bool(cfg.fp8) or bool(cfg.fp4), fp8_params=bool(cfg.fp8_param_gather) and bool(cfg.fp8),
        fp8_copy_bytes=fp8_copy_bytes(cfg, c),
        lora=lora, lora_rank=int(cfg.peft_dim or c["megatron-defaults"]["lora_dim"]),
        lora_targets=tuple(cfg.peft_target_modules or c["lora-default-targets"]), offload_fraction=offload,
    )


def fp8_copy_bytes(cfg: TrainingConfig, c: dict[str, Any]) -> float:
    """Bytes per linear weight of its FP8 form (fp8-weight-cache-bytes): Transformer Engine quantizes a per-tensor
    scaled weight (delayed or current scaling) once and adds a transposed copy for the backward GEMMs only where
    the GPU's FP8 GEMMs are TN-only; Blackwell's take any layout.  MXFP8 and blockwise keep both scaling directions
    on every GPU; an unknown GPU is taken as TN-only."""
    table = c["fp8-weight-cache-bytes"]
    per_tensor = (cfg.fp8_recipe or "delayed").lower() in ("delayed", "tensorwise") and not cfg.fp4
    any_layout = (cfg.gpu_arch or "").lower() == "blackwell"
    return float(table["any_layout"] if per_tensor and any_layout else table["tn_only"])


def batch(cfg: TrainingConfig, s: Setup, num_microbatches: int | None) -> Batch:
    """Micro-batch size and count: the caller's count, else GBS / (MBS x DP), else 2 x PP."""
    mbs = size(cfg.micro_batch_size)
    if num_microbatches:
        return Batch(mbs, int(num_microbatches), False)
    if cfg.global_batch_size:
        return Batch(mbs, max(1, int(cfg.global_batch_size) // (mbs * s.dp)), False)
    return Batch(mbs, 2 * s.pp, True)  # enough for every rank to reach its 1F1B steady state (see schedule.py)


def _dtype_name(value: str) -> str:
    v = str(value).lower().replace("torch.", "")
    return {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
            "uint8": "fp8", "float8": "fp8"}.get(v, v)


def _layout_stages(layout: str) -> int:
    from .stages import _from_layout

    return len(_from_layout(layout, -1)[0])


def local_impl(cfg: TrainingConfig) -> bool:
    """Megatron-LM's ``--transformer-impl local``: Megatron-Core modules without Transformer Engine."""
    return (cfg.transformer_impl or "").lower() == "local"
