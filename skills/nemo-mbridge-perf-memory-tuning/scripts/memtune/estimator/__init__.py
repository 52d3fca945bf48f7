"""Per-GPU training memory for a layout: ``estimate`` (ours or Bridge 0.6.2 mode) and ``summarize``.

``estimate`` is pure and cheap (the caller passes the knowledge base it loaded once, and
the part of an estimate that only the layout shape decides is cached, see
static.py), so the planner can score many layouts per second.  ``summarize`` reduces an
estimate to the ``estimate.*`` facts declared in knowledge/facts.yaml.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..errors import UserError
from ..facts import EnvFacts, GpuFacts, TrainingConfig
from ..knowledge import Knowledge
from .constants import constants, english, text
from .memory import Estimate, StageEstimate, estimate_ours
from .models import fill_from_preset

MODES = ("ours", "bridge")

__all__ = ["MODES", "Estimate", "StageEstimate", "estimate", "summarize"]


def _expandable(env: EnvFacts | Mapping[str, Any] | None) -> bool | None:
    """expandable_segments from EnvFacts, or from raw environment variables (as the benchmark gives them)."""
    if env is None:
        return None
    if isinstance(env, EnvFacts):
        return env.expandable_segments
    conf = str(env.get("PYTORCH_CUDA_ALLOC_CONF") or env.get("PYTORCH_ALLOC_CONF") or "")
    return "expandable_segments:true" in conf.replace(" ", "").lower()


def _capture_reuse(env: EnvFacts | Mapping[str, Any] | None) -> bool:
    """graph_capture_record_stream_reuse:True in the allocator configuration (CUDA-graph capture may then reuse
    blocks recorded on other streams, see graph-capture-fragmentation)."""
    if env is None:
        return False
    if isinstance(env, EnvFacts):
        return (env.alloc_options or {}).get("graph_capture_record_stream_reuse") == "True"
    conf = str(env.get("PYTORCH_CUDA_ALLOC_CONF") or env.get("PYTORCH_ALLOC_CONF") or "")
    return "graph_capture_record_stream_reuse:true" in conf.replace(" ", "").lower()


def with_gpu_arch(cfg: TrainingConfig, gpu: GpuFacts | str | None, kb: Knowledge) -> TrainingConfig:
    """``cfg`` with the GPU's architecture when the config does not name one (what FP8 keeps of a weight
    depends on it, see fp8-weight-cache-bytes)."""
    if cfg.gpu_arch or gpu is None:
        return cfg
    if isinstance(gpu, str):
        from ..inputs.gpu import lookup_gpu

        try:
            gpu = lookup_gpu(gpu, kb)
        except UserError:
            return cfg
    return replace(cfg, gpu_arch=gpu.arch) if gpu.arch else cfg


def estimate(cfg: TrainingConfig, *, gpu: GpuFacts | str | None = None, mode: str = "ours",
             num_microbatches: int | None = None, kb: Knowledge,
             env: EnvFacts | Mapping[str, Any] | None = None) -> Estimate:
    """Memory per pipeline stage for ``cfg``; raises UserError when the layout is incomplete or invalid.

    ``gpu`` gives ``summarize`` its capacity and the estimate the GPU's architecture, where the config names
    none (Transformer Engine keeps a transposed FP8 weight only on GPUs whose FP8 GEMMs are TN-only).
    """
    c = constants(kb)
    cfg = fill_from_preset(with_gpu_arch(cfg, gpu, kb), kb)
    if mode == "ours":
        expandable = _expandable(env)
        return estimate_ours(cfg, c, english(kb), num_microbatches=num_microbatches,
                             expandable_segments=expandable, capture_reuse=_capture_reuse(env))
    if mode == "bridge":
        return _bridge(cfg, c, kb, num_microbatches)
    raise UserError(f"--mode {mode!r}: use one of {', '.join(MODES)}")


def _bridge(cfg: TrainingConfig, c: dict[str, Any], kb: Knowledge, num_microbatches: int | None) -> Estimate:
    """Bridge's one number, also laid out as a single stage so tables and summaries work unchanged."""
    from .bridge_compat import bridge_estimate  # only --mode bridge needs it

    b = bridge_estimate(cfg, c, num_microbatches)
    params = sum(x["parameter_count_per_gpu"] for x in b["components"])
    weights = params * c["bridge-bytes-per-parameter"]["weights"]
    grads = params * c["bridge-bytes-per-parameter"]["grads"]
    optimizer = b["weight_and_optimizer_bytes"] - weights - grads
    total = b["total_bytes"]
    stage = StageEstimate(
        pp_rank=0, layers=int(cfg.num_layers or 0), params=params, in_flight_microbatches=[],
        weights_bytes=weights, grads_bytes=grads, optimizer_bytes=optimizer, activations_bytes=b["activation_bytes"],
        logits_bytes=0.0, workspace_bytes=0.0, graph_pool_bytes=0.0, graph_pool_activations_bytes=0.0,
        other_bytes=0.0, total_bytes=total,
        allocated_peak_bytes=total, reserved_bytes=total, cuda_context_bytes=0.0, nccl_bytes=0.0,
        peak_with_overheads_bytes=total,
    )
    bridge = {k: b[k] for k in ("weight_and_optimizer_bytes", "activation_bytes", "total_bytes", "total_parameters")}
    bridge["components"] = b["components"]
    return Estimate(
        mode="bridge", stages=[stage], peak_stage=0, peak_bytes=total,
        breakdown={"pp_rank": 0, "weights_bytes": weights, "grads_bytes": grads, "optimizer_bytes": optimizer,
                   "activations_bytes": b["activation_bytes"]},
        assumptions=[text(kb, i) for i in b["assumption_ids"]], bridge=bridge,
        parameters={"total": b["total_parameters"]}, assumption_ids=list(b["assumption_ids"]),
    )


def summarize(est: Estimate, gpu: GpuFacts | None) -> dict[str, Any]:
    """The ``estimate.*`` facts (knowledge/facts.yaml) of an estimate, keyed without the prefix."""
    peak = next(s for s in est.stages if s.pp_rank == est.peak_stage)
    parts = {
        "model-state": peak.weights_bytes + peak.grads_bytes + peak.optimizer_bytes,
        "activations": peak.activations_bytes,
        "logits": peak.logits_bytes,
    }
    lowest = min(s.allocated_peak_bytes for s in est.stages)
    capacity = gpu.capacity_bytes if gpu is not None else None
    return {
        "peak_bytes": est.peak_bytes,
        "peak_stage": est.peak_stage,
        "peak_with_overheads_bytes": peak.peak_with_overheads_bytes,
        "capacity_ratio": peak.peak_with_overheads_bytes / capacity if capacity else None,
        "model_state_bytes": parts["model-state"],
        "activation_bytes": peak.activations_bytes,
        "logits_bytes": max((s.logits_bytes for s in est.stages), default=0.0),
        "dominant": max(parts, key=lambda k: parts[k]),
        "stage_imbalance_ratio": peak.allocated_peak_bytes / lowest if lowest else None,
    }
