"""Expected throughput of a layout: the product of the factors in knowledge/costs.yaml that apply to it.

The arithmetic of each ``kind`` is written here once; every constant comes from the table.  The traffic
kinds compare bytes over a link with the compute that hides them (planner/traffic.py).  A cost that does
not apply (TP 1, PP 1, no option) is left out of the reasons; one that applies but is hidden (FSDP gathers
shorter than the compute) stays in at 1.0 with its numbers, so the answer shows why it costs nothing.
Parallel factors depend on the shape and the micro-batch size, option factors on the options and, for
traffic, the layout's sizes, so the search computes each part once and multiplies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..knowledge import KnowledgeError
from .traffic import BF16, Traffic, flop_share


@dataclass(frozen=True)
class Reason:
    """One factor that applied: the cost id, its multiplier, and the numbers it was computed from."""

    cost: str
    factor: float
    detail: str


@dataclass(frozen=True)
class ShapeContext:
    """What the parallel factors read besides the layout itself."""

    hidden_size: int
    num_layers: int
    seq_length: int
    gpus_per_node: int
    moe: bool
    ep_overlap: bool = False  # overlap_moe_expert_parallel_comm: the EP all-to-all hidden behind compute
    tp_overlap: bool = False  # tp_comm_overlap: TP collectives pipelined with the GEMMs (userbuffers)
    eager_share: float = 1.0  # share of a layer's host work not captured in CUDA graphs (traffic.eager_share)
    fp8: bool = False


def _by_kind(costs: Mapping[str, Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    return [c for c in costs.values() if c["kind"] == kind]


def parallel_reasons(costs: Mapping[str, Mapping[str, Any]], ctx: ShapeContext, *, tp: int, pp: int, vpp: int,
                     cp: int, microbatches: int, traffic: Traffic | None = None,
                     balance: float = 1.0) -> list[Reason]:
    """Factors of the parallel shape, the micro-batch and the schedule.

    The TP and host-bound factors need the layer's compute time (``traffic``); without it they are left out.
    ``balance`` is traffic.stage_balance of the layout's pipeline placement.
    """
    out: list[Reason] = []
    for c in _by_kind(costs, "memory-traffic"):
        if traffic is not None and traffic.mb_seconds > traffic.flop_seconds > 0:
            flops, extra = traffic.flop_seconds, traffic.mb_seconds - traffic.flop_seconds
            out.append(Reason(c["id"], flops / traffic.mb_seconds,
                              f"{extra * 1e3:.1f} ms of memory-bound kernels and BF16 attention per micro-batch vs "
                              f"{flops * 1e3:.1f} ms of GEMM FLOPs"))
    exposed = 0.0  # per layer: what the GPU waits on besides compute, which the host's launches overlap with
    for c in _by_kind(costs, "tp-traffic"):
        if tp > 1 and traffic is not None:
            t, comm = traffic.layer_seconds, c["value"] * traffic.tp_unit_seconds
            exposed = max(0.0, comm - t) if ctx.tp_overlap else comm
            out.append(Reason(c["id"], t / (t + exposed),
                              f"{comm * 1e3:.2f} ms of TP collectives per layer vs {t * 1e3:.2f} ms compute"
                              + (", overlapped" if ctx.tp_overlap else "")))
    dispatch = _dispatch_wait(costs, ctx, traffic)
    if dispatch is not None:
        (c, waits), t, stage = dispatch, traffic.layer_seconds, traffic.mb_seconds
        out.append(Reason(c["id"], stage / (stage + waits * traffic.moe_layers),
                          f"{traffic.dispatch_seconds * 1e3:.2f} ms of token dispatch and combine per MoE layer vs "
                          f"{t * 1e3:.2f} ms compute" + (", overlapped" if ctx.ep_overlap else "")))
        exposed += waits * traffic.moe_layers * t / stage
    for c in _by_kind(costs, "host-bound"):
        if traffic is not None and ctx.eager_share > 0:
            host = (c.get("params", {}).get("fp8", c["value"]) if ctx.fp8 else c["value"]) * ctx.eager_share
            busy = traffic.layer_seconds + exposed
            if host > busy:
                detail = f"{host * 1e3:.1f} ms of kernel launches per layer vs {busy * 1e3:.1f} ms on the GPU"
                out.append(Reason(c["id"], busy / host, detail))
    for c in _by_kind(costs, "tp-cross-node"):
        if tp > ctx.gpus_per_node:
            out.append(Reason(c["id"], c["value"], f"TP {tp} > {ctx.gpus_per_node} GPUs per NVLink domain"))
    for c in _by_kind(costs, "pipeline-bubble"):
        if pp > 1:
            f = 1.0 / (1.0 + (pp - 1) / (vpp * microbatches))
            out.append(Reason(c["id"], f, f"(PP-1)/(VPP*M) = {pp - 1}/({vpp}*{microbatches})"))
    for c in _by_kind(costs, "pipeline-imbalance"):
        if pp > 1 and balance < 1.0:
            out.append(Reason(c["id"], balance, f"heaviest stage {1 / balance:.3f}x the mean stage's work"))
    for c in _by_kind(costs, "cp-traffic"):
        if cp > 1 and traffic is not None:
            t, kv = traffic.layer_seconds, c["value"] * traffic.kv_seconds
            unhidden = max(0.0, kv - traffic.attention_seconds)
            out.append(Reason(c["id"], t / (t + unhidden), f"{kv * 1e3:.2f} ms of K/V exchange per layer vs "
                                                           f"{traffic.attention_seconds * 1e3:.2f} ms of attention"))
    return out


def _dispatch_wait(costs: Mapping[str, Mapping[str, Any]], ctx: ShapeContext,
                   traffic: Traffic | None) -> tuple[Mapping[str, Any], float] | None:
    """(the ``ep-traffic`` cost, seconds one MoE layer waits for its token dispatch and combine per micro-batch), or
    None when there is none to wait for.  The overlap hides a measured share of it behind another micro-batch's
    compute, and at most that compute."""
    if not ctx.moe or traffic is None or traffic.dispatch_seconds <= 0 or not traffic.moe_layers:
        return None
    entries = _by_kind(costs, "ep-traffic")
    if not entries:
        return None
    c, comm, t = entries[0], traffic.dispatch_seconds, traffic.layer_seconds
    return c, max(comm - t, (1.0 - c["value"]) * comm) if ctx.ep_overlap else comm


def dispatch_stretch(costs: Mapping[str, Mapping[str, Any]], ctx: ShapeContext, traffic: Traffic | None) -> float:
    """A MoE layer's time over its compute time: 1 plus the dispatch it waits for per layer of compute, rounded so
    that pipeline balances can be shared (traffic.stage_balance moe_stretch)."""
    dispatch = _dispatch_wait(costs, ctx, traffic)
    if dispatch is None or not traffic.layer_seconds:
        return 1.0
    return round(1.0 + dispatch[1] / traffic.layer_seconds, 3)


TRAFFIC_KINDS = frozenset({"fsdp-traffic", "dp-step-traffic", "host-offload-traffic"})


def option_reasons(costs: Mapping[str, Mapping[str, Any]], cost_ids: Iterable[str],
                   traffic: Traffic | None = None) -> list[Reason]:
    """Factors of the chosen options (each cost counted once even if two options list it).

    The traffic kinds need the layout's compute time and bytes (``traffic``, planner/traffic.py); without it
    only the constant ``option`` factors are returned, for the search to multiply in per layout.
    """
    out = []
    for cid in dict.fromkeys(cost_ids):
        c = costs[cid]
        if c["kind"] == "option":
            out.append(Reason(cid, c["value"], c.get("detail", c["basis"])))
        elif traffic is not None and c["kind"] in TRAFFIC_KINDS:
            out.append(_traffic_reason(cid, c, traffic))
    return out


def _traffic_reason(cid: str, c: Mapping[str, Any], t: Traffic) -> Reason:
    """A collective or host copy against the compute it overlaps with (formulas in knowledge/costs.yaml)."""
    ms = 1e3
    if c["kind"] in ("fsdp-traffic", "dp-step-traffic"):
        # value bf16 parameter all-gathers, then the gradients' reduce-scatter; a frozen base (LoRA) reduces no
        # gradients, and under the distributed optimizer, whose gather only publishes the update, moves nothing
        fsdp = c["kind"] == "fsdp-traffic"
        per_param = 0.0 if t.frozen and not fsdp else c["value"] * BF16 + t.grad_bytes
        comm = per_param * t.param_seconds
        if fsdp:
            f = t.mb_seconds / max(t.mb_seconds, comm)
            return Reason(cid, f, f"{comm * ms:.0f} ms of gathers per micro-batch vs {t.mb_seconds * ms:.0f} ms "
                                  "compute")
        step = t.microbatches * t.mb_seconds
        f = step / (step + max(0.0, comm - t.mb_seconds))
        return Reason(cid, f, f"{comm * ms:.0f} ms per step vs {t.mb_seconds * ms:.0f} ms of overlap")
    r, share_layers = t.layer_ratio, c["value"]
    f = 1.0 / (1.0 - share_layers + share_layers * (max(1 / 3, r) + max(2 / 3, r)))
    return Reason(cid, f, f"host copy {r:.2f}x the layer's compute")


def for_model(costs: Mapping[str, Mapping[str, Any]], arch: Any, seq: int,
              reference: Callable[[str], Any]) -> dict[str, Mapping[str, Any]]:
    """The cost table with each recompute factor carried to this model and sequence length.

    Selective recompute replays a module's forward, so its slowdown grows with the share of the step's FLOPs that
    module holds: a cost that ``replays`` a module keeps its measured slowdown (1 / value - 1) per unit of that
    share, taken where it was measured (``measured_on``, or that of the cost it is ``scaled_from``).  Recomputing
    the MLP is 78 % of Llama3-70B's FLOPs at 4K tokens but 3 % of DeepSeek-V3's (three dense layers of 61).
    ``reference`` gives the estimator ``Arch`` of a model preset."""
    out = dict(costs)
    for cid, c in costs.items():
        module = c.get("replays")
        if not module:
            continue
        source = costs.get(c["scaled_from"]) if c.get("scaled_from") else c
        if not source or not source.get("measured_on") or not source.get("replays"):
            raise KnowledgeError(f"costs.yaml: {cid}: scaled_from {c.get('scaled_from')!r} names no measured cost")
        on = source["measured_on"]
        try:
            ref = flop_share(reference(on["model"]), int(on["seq_length"]), source["replays"])
        except LookupError as exc:
            raise KnowledgeError(f"costs.yaml: {cid}: measured_on model {on['model']!r}: {exc}") from None
        if ref <= 0:
            raise KnowledgeError(f"costs.yaml: {cid}: {on['model']} has no {source['replays']} to measure")
        here = flop_share(arch, seq, module)
        slowdown = (1.0 / source["value"] - 1.0) * here / ref
        out[cid] = {**c, "value": 1.0 / (1.0 + slowdown),
                    "detail": f"{c['basis']}: {module} is {here:.1%} of this model's FLOPs, "
                              f"{ref:.1%} of {on['model']}'s at {on['seq_length']} tokens where measured"}
    return out


def scaled(costs: Mapping[str, Mapping[str, Any]], cost_ids: Iterable[str]) -> tuple[str, ...]:
    """The ids among ``cost_ids`` whose factor depends on the layout, not on the option alone."""
    return tuple(cid for cid in dict.fromkeys(cost_ids) if costs[cid]["kind"] in TRAFFIC_KINDS)


def product(reasons: Iterable[Reason]) -> float:
    total = 1.0
    for r in reasons:
        total *= r.factor
    return total


@dataclass(frozen=True)
class Difference:
    """One cost two layouts pay differently: ``ratio`` > 1 when the first pays less of it."""

    cost: str
    ratio: float
    first: str  # the first layout's detail ("" when it is not charged)
    other: str


def differences(first: Iterable[Reason], other: Iterable[Reason]) -> list[Difference]:
    """Why one layout scores above another, cost by cost, the largest difference first (ratios of 1 left out)."""
    a = {r.cost: r for r in first}
    b = {r.cost: r for r in other}
    out = []
    for cid in dict.fromkeys([*a, *b]):
        fa = a[cid].factor if cid in a else 1.0
        fb = b[cid].factor if cid in b else 1.0
        if abs(fa / fb - 1.0) > 1e-9:
            out.append(Difference(cid, fa / fb, a[cid].detail if cid in a else "", b[cid].detail if cid in b else ""))
    return sorted(out, key=lambda d: -abs(d.ratio - 1.0))
