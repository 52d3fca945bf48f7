"""The memory ledger: the failing GPU's memory split into components, each with bytes, provenance and uncertainty.

It sits between the facts and the rules.  The allocator's message at the failure gives the frame (capacity,
free, request, allocated, reserved-but-unallocated, private pools, this process, other processes); the
estimator splits what PyTorch allocated into weights, gradients, optimizer state, activations, logits and
workspaces for the phase that failed; a question's figure fills in when nothing better exists.

The deficit is what was missing: ``request - free`` at the failure, else ``estimated peak - capacity``.
At the failure the deficit decomposes exactly into *waste* (memory live tensors did not need: other
processes, non-PyTorch memory above a normal process, cached-but-unallocated blocks, CUDA-graph pools) and a
*shortfall* that only shrinking what the step needs can close.  A cause's share of the deficit is what its
components account for (``share``); engine.py weighs it by the reliability of the evidence.  Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .facts import Facts
from .knowledge import Knowledge

NEED_FROM_ESTIMATE = {  # ledger component -> StageEstimate field(s)
    "weights": ("weights_bytes",),
    "gradients": ("grads_bytes",),
    "optimizer": ("optimizer_bytes",),
    "activations": ("activations_bytes",),
    "logits": ("logits_bytes",),
    "workspace": ("workspace_bytes", "graph_pool_bytes"),  # other_bytes sums logits + these: counted once
}


@dataclass
class Entry:
    """One component of the failing GPU's memory."""

    id: str
    kind: str  # waste | need
    bytes: float
    source: str  # oom-message | memory-stats | snapshot | estimate | assumed | question | gpu-table | log
    uncertainty: float  # relative (0.0 = exact)
    explained_bytes: float = 0.0  # the part of the deficit this component accounts for


@dataclass
class Ledger:
    capacity_bytes: float | None = None
    capacity_source: str | None = None
    request_bytes: float | None = None
    free_bytes: float | None = None
    in_use_bytes: float | None = None  # what the failing process / GPU held when it failed
    deficit_bytes: float | None = None
    deficit_source: str | None = None  # oom-message | question | estimate | headroom (no failure) | None
    shortfall_bytes: float | None = None  # deficit left after every waste component is freed
    phase: str | None = None
    stage: int | None = None  # pipeline stage of the failing rank (estimator's peak stage when unknown)
    stage_source: str | None = None
    estimate_peak_bytes: float | None = None  # estimated peak with overheads of that stage
    over_probability: float = 0.0  # share of the estimate's error band above capacity (estimate-only deficits)
    calibration: float = 1.0  # observed / estimated PyTorch allocation; the need components are scaled by it
    failed: bool = True  # some evidence says GPU (or host) memory ran out
    peers_fit: bool = False  # other ranks of the same stage did not fail: what they hold alike explains nothing
    entries: list[Entry] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # collect.needs ids of evidence that would quantify it

    def get(self, ident: str) -> Entry | None:
        return next((e for e in self.entries if e.id == ident), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def policy(kb: Knowledge) -> Mapping[str, Any]:
    return kb.tables.get("ledger") or {}


def reliability(kb: Knowledge, source: str | None) -> float:
    for row in policy(kb).get("reliability") or []:
        if row["source"] == source:
            return float(row["value"])
    return float(next((r["value"] for r in policy(kb).get("reliability") or [] if r["source"] == "assumed"), 0.4))


def build(facts: Facts, kb: Knowledge, phase: str | None = None) -> Ledger:
    """The ledger of one diagnosis (every number from ``facts``; policies from knowledge/ledger.yaml).  ``phase``
    is the situation's reading of when it failed (its ledger phase), which already weighs the log's own phase
    against the traceback and the user's words."""
    pol = policy(kb)
    band = float(pol.get("estimate_error_band", 0.15))
    log = facts.log
    led = Ledger(phase=phase or log.phase or _question_phase(facts, pol))
    led.capacity_bytes, led.capacity_source = _capacity(facts)
    stage_table, led.stage, led.stage_source = failing_stage(facts)

    oom = log.oom_kind == "allocator" and log.requested_bytes is not None
    waste: list[Entry] = []
    if oom:
        led.request_bytes, led.free_bytes = log.requested_bytes, log.free_bytes
        unalloc = log.reserved_unallocated_bytes
        if unalloc is None and log.reserved_bytes is not None and log.allocated_bytes is not None:
            unalloc = max(0.0, log.reserved_bytes - log.allocated_bytes)
        if log.other_process_bytes:
            waste.append(Entry("other-processes", "waste", log.other_process_bytes, "oom-message", 0.0))
        if log.non_pytorch_bytes is not None:
            base = _non_pytorch_baseline(stage_table, pol)
            if log.non_pytorch_bytes > base:
                waste.append(Entry("non-pytorch", "waste", log.non_pytorch_bytes - base, "oom-message", 0.2))
        elif log.process_bytes is None and log.outside_cache_bytes is not None:
            # a message with no process list (PyTorch < 2.1): what its totals leave outside this process's cache,
            # beyond a normal process's own non-PyTorch memory, is another program's
            base = _non_pytorch_baseline(stage_table, pol)
            if log.outside_cache_bytes > base:
                waste.append(Entry("other-processes", "waste", log.outside_cache_bytes - base, "oom-message", 0.2))
        if unalloc is not None:
            waste.append(Entry("reserved-unallocated", "waste", unalloc, "oom-message", 0.0))
        if log.private_pool_bytes:
            waste.append(Entry("private-pools", "waste", log.private_pool_bytes, "oom-message", 0.0))
        if led.capacity_bytes and led.free_bytes is not None:
            led.in_use_bytes = led.capacity_bytes - led.free_bytes
        if led.free_bytes is not None:
            led.deficit_bytes, led.deficit_source = led.request_bytes - led.free_bytes, "oom-message"
    else:
        waste += _waste_from_stats(facts) or _question_waste(facts)
        _question_deficit(facts, led)
        figure = facts.question.memory_bytes
        if figure and led.capacity_bytes and figure < led.capacity_bytes:
            led.in_use_bytes = figure
            gap = led.capacity_bytes - figure
            if gap >= float(pol.get("question_gap_share_of_capacity", 0.1)) * led.capacity_bytes:
                waste.append(Entry("unaccounted", "waste", gap, "question", 0.1))
                led.deficit_source = led.deficit_source or "question"  # failed with this much outside live tensors

    led.calibration = _calibration(facts, stage_table, led.phase, pol)
    need = _need(stage_table, led.phase, pol, band, led.calibration,
                 "assumed" if facts.config.approximate_shape else "estimate")
    need = _with_stated_logprob_logits(need, facts, led.phase, pol)
    if stage_table is not None:
        led.estimate_peak_bytes = float(stage_table.get("peak_with_overheads_bytes") or 0.0) or None
    if led.deficit_source is None and led.estimate_peak_bytes and led.capacity_bytes and not oom:
        led.deficit_bytes, led.deficit_source = led.estimate_peak_bytes - led.capacity_bytes, "estimate"
    led.peers_fit = _peers_fit(facts, pol)
    led.failed = _ran_out(facts)
    if led.peers_fit:
        alike = set(pol.get("peer_identical") or [])
        need = [e for e in need if e.id not in alike]
    if led.deficit_source in (None, "estimate") and need and not led.failed and "headroom" in facts.question.topics:
        led.deficit_source, led.deficit_bytes = "headroom", None  # no failure: the user wants room to grow
    led.entries = waste + need
    _attribute(led, band)
    led.missing = _missing(facts, led)
    return led


def share(led: Ledger, components: Iterable[str]) -> tuple[float | None, str | None]:
    """(fraction of the deficit the components account for, their weakest provenance); None = not quantified.

    With the deficit from the OOM message the fraction is explained bytes / deficit.  With only an estimate, the
    needs share the probability that the stage does not fit (``over_probability``) in proportion to their bytes.
    """
    wanted = set(components)
    entries = [e for e in led.entries if e.id in wanted]
    if not entries:
        return None, None
    sources = sorted({e.source for e in entries}, key=_trust_order)
    if led.deficit_source in ("oom-message", "question") and led.deficit_bytes and led.deficit_bytes > 0:
        return min(1.0, sum(e.explained_bytes for e in entries) / led.deficit_bytes), sources[0]
    need = [e for e in entries if e.kind == "need"]
    transients = led.get("phase-transients")
    if (transients is not None and led.failed and led.deficit_source in ("estimate", None)
            and led.over_probability == 0.0):
        # memory ran out in a checkpoint phase whose steady state fits (or was never estimated): only its transients
        # can explain it (with nothing saying memory ran out, there is nothing for them to explain)
        if led.deficit_source == "estimate" or any(e is transients for e in entries):
            return (1.0 if any(e is transients for e in entries) else 0.0), "log"
    if led.deficit_source == "question" and led.deficit_bytes is None:  # failed with a gap outside live tensors
        return (0.0, "question") if not any(e.kind == "waste" for e in entries) else (1.0, "question")
    if led.deficit_source == "estimate" and need and led.over_probability == 0.0 and led.failed:
        return None, sources[0]  # it failed although the estimate fits: the estimate cannot rule this out
    if led.deficit_source in ("estimate", "headroom") and need:
        total = sum(e.bytes for e in led.entries if e.kind == "need")
        weight = 1.0 if led.deficit_source == "headroom" else led.over_probability  # headroom: what holds memory
        return (weight * sum(e.bytes for e in need) / total if total else 0.0), sources[0]
    return None, sources[0]


_TRUST = ("assumed", "estimate", "question", "log", "memory-stats", "snapshot", "oom-message")


def _trust_order(source: str) -> int:
    """Weakest first, so a share built on an estimate is labelled an estimate."""
    return _TRUST.index(source) if source in _TRUST else -1


def failing_stage(facts: Facts) -> tuple[Mapping[str, Any] | None, int | None, str | None]:
    """The estimator's table row of the failing rank's pipeline stage, and how that stage was found.

    Megatron's default rank order puts PP outermost (tp-cp-ep-dp-pp), so a global rank r of a world of W GPUs
    with PP p sits on stage r // (W / p).
    """
    table = (facts.estimate or {}).get("table") or {}
    stages = table.get("stages") or []
    if not stages:
        return None, None, None
    cfg = facts.config
    rank, world, pp = facts.log.rank, cfg.world_size, cfg.pipeline_model_parallel_size or 1
    by_rank = {s["pp_rank"]: s for s in stages}
    if rank is not None and world and pp > 1 and world % pp == 0 and rank < world:
        stage = rank // (world // pp)
        if stage in by_rank:
            return by_rank[stage], stage, "rank"
    peak = table.get("peak_stage", 0)
    return by_rank.get(peak, stages[0]), peak, "estimate-peak"


def _peers_fit(facts: Facts, pol: Mapping[str, Any]) -> bool:
    """Evidence that peers on the same pipeline stage held the same model without failing (PP 1: all are peers)."""
    ev = pol.get("peer_evidence") or {}
    said = bool(set(ev.get("topics") or []) & set(facts.question.topics))
    flat_stats = {f"stats.{k}": v for k, v in (facts.stats or {}).items()}
    measured = any(flat_stats.get(name) for name in ev.get("facts") or [])
    return (said or measured) and (facts.config.pipeline_model_parallel_size or 1) == 1


def _ran_out(facts: Facts) -> bool:
    """Some evidence says memory ran out or the run failed (as opposed to a question about making room)."""
    log = facts.log
    return (log.has_memory_failure or log.host_oom or log.crash
            or bool({"oom", "host-memory"} & set(facts.question.topics)))


def _question_phase(facts: Facts, pol: Mapping[str, Any]) -> str | None:
    topics = set(facts.question.topics)
    return next((row["phase"] for row in pol.get("question_phases") or [] if row["topic"] in topics), None)


def _capacity(facts: Facts) -> tuple[float | None, str | None]:
    if facts.log.capacity_bytes:
        return facts.log.capacity_bytes, "oom-message"
    if facts.gpu.capacity_bytes:
        return facts.gpu.capacity_bytes, "gpu-table"
    return None, None


def _non_pytorch_baseline(stage: Mapping[str, Any] | None, pol: Mapping[str, Any]) -> float:
    if stage is not None:
        est = float(stage.get("cuda_context_bytes") or 0.0) + float(stage.get("nccl_bytes") or 0.0)
        if est > 0:
            return est
    return float(pol.get("non_pytorch_baseline_bytes", 3 * 2**30))


def _waste_from_stats(facts: Facts) -> list[Entry]:
    """Cached-but-unallocated memory from memory_stats or a snapshot when no allocator message gave it."""
    snap, stats = facts.snapshot or {}, facts.stats or {}
    for source, data, key in (("snapshot", snap, "reserved_unallocated_bytes"),
                              ("memory-stats", stats, "reserved_unallocated_bytes")):
        value = data.get(key)
        if value:
            return [Entry("reserved-unallocated", "waste", float(value), source, 0.0)]
    return []


def _calibration(facts: Facts, stage: Mapping[str, Any] | None, phase: str | None, pol: Mapping[str, Any]) -> float:
    """Observed / estimated allocation of the failing stage, when the failure happened in a training step.

    A measurement of what PyTorch held (the OOM message's allocated figure, or the in-use figure a user quotes)
    outranks the estimate: the estimate's split is kept, its total scaled to the measurement.  Outside the
    forward/backward pass the allocation is not the step's peak, so nothing is scaled.
    """
    if stage is None or phase not in (None, "forward", "backward"):
        return 1.0
    estimated = float(stage.get("allocated_peak_bytes") or 0.0)
    log = facts.log
    observed = None
    if log.oom_kind == "allocator" and log.allocated_bytes:
        observed = log.allocated_bytes + (log.requested_bytes or 0.0)
    elif facts.question.memory_bytes:
        observed = facts.question.memory_bytes
    if not observed or estimated <= 0:
        return 1.0
    return observed / estimated


def _question_waste(facts: Facts) -> list[Entry]:
    unalloc = facts.question.figure("reserved-unallocated")
    return [Entry("reserved-unallocated", "waste", unalloc, "question", 0.1)] if unalloc else []


def _question_deficit(facts: Facts, led: Ledger) -> None:
    """A deficit the user quotes ("2.2 GiB short"), or request - free when both are quoted."""
    request, free = facts.question.figure("request"), facts.question.figure("free")
    deficit = facts.question.figure("deficit")
    if deficit is None and request is not None and free is not None and request > free:
        deficit = request - free
    if deficit is not None:
        led.deficit_bytes, led.deficit_source, led.request_bytes, led.free_bytes = deficit, "question", request, free


def _need(stage: Mapping[str, Any] | None, phase: str | None, pol: Mapping[str, Any], band: float,
          scale: float = 1.0, source: str = "estimate") -> list[Entry]:
    present = _present(phase, pol)
    if stage is None:  # nothing estimated; a checkpoint phase still has its transients to explain the failure
        return [Entry("phase-transients", "need", 0.0, "log", 1.0)] if "phase-transients" in present else []
    out = []
    for ident, keys in NEED_FROM_ESTIMATE.items():
        if ident not in present:
            continue
        value = scale * sum(float(stage.get(k) or 0.0) for k in keys)
        if value > 0:
            out.append(Entry(ident, "need", value, source, band))
    if "phase-transients" in present:
        out.append(Entry("phase-transients", "need", 0.0, "log", 1.0))
    return out


def _with_stated_logprob_logits(need: list[Entry], facts: Facts, phase: str | None,
                                pol: Mapping[str, Any]) -> list[Entry]:
    """The logits of the log-prob micro-batch the user's RL keys size (derived.logprob_logits_bytes), where they
    are larger than the training estimate's: the forward pass of the old / reference log-probs holds them at once."""
    stated = facts.derived.get("logprob_logits_bytes")
    if not stated or "logits" not in _present(phase, pol):
        return need
    current = next((e for e in need if e.id == "logits"), None)
    if current is not None and current.bytes >= stated:
        return need
    return [e for e in need if e.id != "logits"] + [Entry("logits", "need", float(stated), "question", 0.1)]


def present_components(phase: str | None, kb: Knowledge) -> set[str]:
    """The need components that exist in a phase (all of them when the phase is unknown)."""
    return _present(phase, policy(kb))


def _present(phase: str | None, pol: Mapping[str, Any]) -> set[str]:
    rows = {row["phase"]: row["present"] for row in pol.get("phases") or []}
    return set(rows.get(phase or "", rows.get("backward", list(NEED_FROM_ESTIMATE))))


def _attribute(led: Ledger, band: float) -> None:
    """Split the deficit: each waste component explains up to all of it; the shortfall goes to the needs.

    With a deficit from the OOM message, shortfall = deficit - all waste (>= 0) is shared by the need components
    present in the phase, in proportion to their estimated bytes; phase transients take it whole where the phase
    has them (checkpoint load/save, optimizer step), since the steady state already existed at the previous step.
    With only an estimate, ``over_probability`` is the part of the estimate's error band above capacity.
    """
    if led.deficit_source == "estimate":
        peak, cap = led.estimate_peak_bytes or 0.0, led.capacity_bytes or 0.0
        lo, hi = peak * (1 - band), peak * (1 + band)
        led.over_probability = 0.0 if hi <= cap else 1.0 if lo >= cap else (hi - cap) / (hi - lo)
        led.shortfall_bytes = max(0.0, led.deficit_bytes or 0.0)
        return
    d = led.deficit_bytes
    if d is None or d <= 0:
        return
    waste = [e for e in led.entries if e.kind == "waste"]  # (the OOM message's, or the question's figures)
    need = [e for e in led.entries if e.kind == "need"]
    for e in waste:
        e.explained_bytes = min(e.bytes, d)
    led.shortfall_bytes = max(0.0, d - sum(e.bytes for e in waste))
    transients = [e for e in need if e.id == "phase-transients"]
    if transients:
        transients[0].bytes = transients[0].explained_bytes = led.shortfall_bytes
        return
    total = sum(e.bytes for e in need)
    for e in need:
        e.explained_bytes = led.shortfall_bytes * e.bytes / total if total else 0.0


def _missing(facts: Facts, led: Ledger) -> list[str]:
    out = []
    if led.deficit_source != "oom-message":
        out.append("oom-message")
    if not any(e.kind == "need" for e in led.entries):
        out.append("config")
    if led.capacity_bytes is None:
        out.append("gpu")
    if led.deficit_source is None and not (facts.stats or facts.snapshot):
        out.append("memory-stats")
    return out
