"""Weights, main gradients and optimizer states per pipeline stage.

Each rank holds the parameters of its chunks (its layers, plus the embedding on
rank 0 and the output layer on the last rank), each with the dtype and the
sharding group the settings imply.  None of it depends on the micro-batch, so
static.py computes it once per layout shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .params import (
    Arch,
    Counts,
    embedding_params,
    final_norm_params,
    kind_params,
    lora_adapter_params,
    mtp_params,
    output_params,
)
from .setup import Setup
from .stages import Chunk


@dataclass(frozen=True)
class StageState:
    """Model-state bytes of one pipeline stage (per GPU) and the extras the optimizer step adds."""

    params: float
    weights: float
    grads: float
    optimizer: float
    layers: int
    fp8_cache: float  # FP8 weight copies Transformer Engine caches (a workspace, not a weight)
    step: float  # fp32 copy of 16-bit main grads made for the step
    linear: float  # weights FP8 keeps in 8 bits

    @property
    def model_state(self) -> float:
        """weights + grads + optimizer, summed in that order (the estimate adds activations after it)."""
        return self.weights + self.grads + self.optimizer


def chunk_params(a: Arch, ch: Chunk, kinds: dict[str, Counts]) -> tuple[Counts, float]:
    """Parameters of one chunk (dense counts before the TP split, experts before the EP split) and its
    embedding/output rows, which FP8 leaves in 16 bits."""
    total = Counts()
    for kind in set(ch.kinds):
        total = total + kinds[kind].scale(ch.kinds.count(kind))
    if ch.mtp:
        total = total + mtp_params(a).scale(ch.mtp)
    vocab_rows = 0.0
    if ch.embedding:
        total = total + embedding_params(a)
        vocab_rows += embedding_params(a).tp
    if ch.loss:
        total = total + final_norm_params(a)
        if not (a.tied and ch.embedding):  # untied: own weight; tied with PP>1: a copy of the embedding
            total = total + output_params(a)
            vocab_rows += output_params(a).tp
    return total, vocab_rows


def unique_chunk_params(a: Arch, unique: tuple[Chunk, ...], s: Setup) -> list[tuple[Counts, float, Counts]]:
    """(parameters, vocabulary rows, LoRA adapters) of every distinct chunk, before any sharding."""
    kinds = kind_params(a)
    out = []
    for ch in unique:
        counts, rows = chunk_params(a, ch, kinds)
        lora = Counts()
        if s.lora:
            for kind in set(ch.kinds):
                lora = lora + lora_adapter_params(a, kind, s.lora_rank, s.lora_targets).scale(ch.kinds.count(kind))
        out.append((counts, rows, lora))
    return out


def stage_state(a: Arch, chunk_ids: tuple[int, ...], per_chunk: list[tuple[Counts, float, Counts]], layers: int,
                s: Setup, c: dict[str, Any]) -> StageState:
    """Sum the stage's chunks, then apply TP/EP splits, dtypes, FP8 copies, FSDP and optimizer sharding."""
    dense_tp = dense_rep = expert = vocab_rows = 0.0
    adapters = Counts()
    for cid in chunk_ids:
        counts, rows, lora = per_chunk[cid]
        dense_tp += counts.tp
        dense_rep += counts.rep
        expert += counts.expert
        vocab_rows += rows
        if s.lora:
            adapters = adapters + lora
    dense = dense_tp / s.tp + dense_rep
    experts = expert / (s.ep * s.etp)
    linear = (dense_tp - vocab_rows) / s.tp + experts  # weights FP8 keeps in 8 bits
    params = dense + experts
    dtype = c["dtype-bytes"]
    weights = params * s.weight_bytes
    if s.lora:
        trainable_dense, trainable_expert = adapters.tp / s.tp, adapters.expert / (s.ep * s.etp)
        weights += (trainable_dense + trainable_expert) * s.weight_bytes
        params += trainable_dense + trainable_expert
    else:
        trainable_dense, trainable_expert = dense, experts
    workspace = 0.0
    if s.fp8 and s.fp8_params and not s.lora:
        weights += linear * (s.fp8_copy_bytes - s.weight_bytes)
    elif s.fp8:
        workspace = linear * s.fp8_copy_bytes
    grads = (trainable_dense + trainable_expert) * s.grad_bytes
    opt_per = s.master_bytes + s.moment_bytes
    optimizer = trainable_dense * opt_per / s.dense_shard + trainable_expert * opt_per / s.expert_shard
    if s.fsdp in {"optim_grads", "optim_grads_params"}:
        grads = trainable_dense * s.grad_bytes / s.dense_shard + trainable_expert * s.grad_bytes / s.expert_shard
    if s.fsdp == "optim_grads_params":
        # weights all-gathered for the running and the prefetched layer; one layer's unsharded gradient
        kinds = kind_params(a)
        per_layer = max((x.tp / s.tp + x.rep + x.expert / (s.ep * s.etp)) for x in kinds.values()) if kinds else 0.0
        weights = weights / s.dense_shard + c["fsdp-unsharded-layers"] * per_layer * s.weight_bytes
        grads += per_layer * s.grad_bytes
    optimizer *= 1.0 - s.offload_fraction
    # fp16/bf16 main grads are copied to fp32 for the step unless the optimizer is precision-aware
    step = 0.0
    if s.grad_bytes < dtype["fp32"] and s.master_bytes == dtype["fp32"]:
        step = (trainable_dense / s.dense_shard + trainable_expert / s.expert_shard) * dtype["fp32"]
    return StageState(params=params, weights=weights, grads=grads, optimizer=optimizer, layers=layers,
                      fp8_cache=workspace, step=step, linear=linear)
