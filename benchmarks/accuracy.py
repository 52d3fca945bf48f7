"""Estimator accuracy benchmark: published peak-memory measurements vs ``memtune.estimator``.

Every case in ``benchmarks/measured/*.yaml`` is a real run with its full layout and the peak its source
reported on one pipeline stage.  For each case this prints the measured peak, our estimate for the same
stage (``allocated_peak_bytes``), Megatron Bridge's single-number estimate (``--mode bridge``), their
signed errors, and the mean absolute percentage error (MAPE) per family and overall.

    python3 benchmarks/accuracy.py                       # Markdown tables
    python3 benchmarks/accuracy.py --format json --family mlm-ci
    python3 benchmarks/accuracy.py --fail-above 8        # exit 1 when our overall MAPE exceeds 8 %
    python3 benchmarks/accuracy.py --data-only           # list the cases, no estimator needed

Exit codes: 0 ok; 1 gate failed (MAPE above --fail-above, or a non-stretch case could not be estimated);
2 bad data or a missing estimator / Megatron-args reader (one line on stderr).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import inspect
import json
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
DATA_DIR = ROOT / "benchmarks" / "measured"
SCHEMA_PATH = DATA_DIR / "schema.json"
if str(SKILL / "scripts") not in sys.path:
    sys.path.insert(0, str(SKILL / "scripts"))

from memtune.errors import UserError  # noqa: E402
from memtune.facts import TrainingConfig  # noqa: E402

UNIT_BYTES = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
GIB = 2**30
LAYOUT_FIELDS = frozenset(f.name for f in dataclasses.fields(TrainingConfig)) - {"provided", "source", "warnings"}


# --------------------------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Case:
    """One measured run, with ``common`` already merged in and the peak converted to bytes."""

    id: str
    family: str
    title: str
    path: str
    line: int
    source: dict[str, Any]
    hardware: dict[str, Any]
    world_size: int
    data_parallel_size: int
    num_microbatches: int
    measured: dict[str, Any]
    measured_bytes: int
    layout: dict[str, Any] = field(default_factory=dict)
    megatron_args: dict[str, Any] | None = None
    env: dict[str, Any] = field(default_factory=dict)
    stretch: bool = False
    outcome: str | None = None
    assumed: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def stage(self) -> int | str:
        return self.measured["stage"]


def measured_bytes(value: float, unit: str) -> int:
    """Bytes for a value in ``unit`` (KB/MB/GB decimal, KiB/MiB/GiB binary), rounded to a whole byte."""
    if unit not in UNIT_BYTES:
        raise UserError(f"unknown memory unit {unit!r} (use one of {', '.join(UNIT_BYTES)})")
    return int(round(value * UNIT_BYTES[unit]))


def _merge(base: Any, over: Any) -> Any:
    """Recursive dict merge where ``over`` wins; lists and scalars are replaced, not merged."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, val in over.items():
            out[key] = _merge(base[key], val) if key in base else copy.deepcopy(val)
        return out
    return copy.deepcopy(over)


def _parse(text: str) -> tuple[Any, list[int]]:
    """The document, and the 1-based line of each item under ``cases:`` so errors can point into the file."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)  # one parse serves both
    try:
        node = loader.get_single_node()
        doc = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    for key, value in getattr(node, "value", []):
        if getattr(key, "value", None) == "cases" and isinstance(value, yaml.SequenceNode):
            return doc, [item.start_mark.line + 1 for item in value.value]
    return doc, []


def _validators() -> tuple[Any, Any]:
    import jsonschema  # heavy: only the loader needs it

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    resolved = {"$ref": "#/$defs/resolvedCase", "$defs": schema["$defs"]}
    cls = jsonschema.Draft202012Validator
    return cls(schema), cls(resolved)


def _first_error(validator: Any, doc: Any) -> str | None:
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    err = errors[0]
    where = ".".join(str(p) for p in err.absolute_path) or "(top)"
    return f"{where}: {err.message}"


def load_file(path: Path, validators: tuple[Any, Any] | None = None) -> list[Case]:
    """Read one family file, validate it and every merged case; raise UserError('file:line: ...')."""
    file_v, case_v = validators or _validators()
    rel = _rel(path)
    text = path.read_text(encoding="utf-8")
    try:
        doc, lines = _parse(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise UserError(f"{rel}:{mark.line + 1 if mark else 1}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    problem = _first_error(file_v, doc)
    if problem:
        raise UserError(f"{rel}:1: {problem}")
    family = doc["family"]
    common = doc.get("common", {})
    cases = []
    for idx, raw in enumerate(doc["cases"]):
        line = lines[idx] if idx < len(lines) else 1
        merged = _merge(common, raw)
        if merged.setdefault("family", family) != family:
            raise UserError(f"{rel}:{line}: case family {merged['family']!r} differs from the file's {family!r}")
        problem = _first_error(case_v, merged)
        if problem:
            raise UserError(f"{rel}:{line}: case {merged.get('id', idx)}: {problem}")
        cases.append(_to_case(merged, rel, line))
    return cases


def _to_case(d: dict[str, Any], rel: str, line: int) -> Case:
    unknown = sorted(set(d.get("layout", {})) - LAYOUT_FIELDS)
    if unknown:
        names = ", ".join(unknown)
        raise UserError(f"{rel}:{line}: case {d['id']}: layout keys are not TrainingConfig fields: {names}")
    m = d["measured"]
    notes = d.get("notes", ())
    return Case(
        id=d["id"],
        family=d["family"],
        title=d["title"],
        path=rel,
        line=line,
        source=d["source"],
        hardware=d["hardware"],
        world_size=d["world_size"],
        data_parallel_size=d["data_parallel_size"],
        num_microbatches=d["num_microbatches"],
        measured=m,
        measured_bytes=measured_bytes(m["value"], m["unit"]),
        layout=d.get("layout", {}),
        megatron_args=d.get("megatron_args"),
        env=d.get("env", {}),
        stretch=bool(d.get("stretch", False)),
        outcome=d.get("outcome"),
        assumed=d.get("assumed", {}),
        notes=(notes,) if isinstance(notes, str) else tuple(notes),
    )


def load_cases(data_dir: Path = DATA_DIR, family: str | None = None) -> list[Case]:
    """All cases of all family files (or one family), ids checked unique across files."""
    validators = _validators()
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for path in sorted(data_dir.glob("*.yaml")):
        for case in load_file(path, validators):
            if case.id in seen:
                raise UserError(f"{case.path}:{case.line}: duplicate case id {case.id!r} (also in {seen[case.id]})")
            seen[case.id] = case.path
            cases.append(case)
    if family is not None:
        cases = [c for c in cases if c.family == family]
        if not cases:
            raise UserError(f"--family {family}: no such family in {_rel(data_dir)}")
    return cases


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------------------------------- layout


def _megatron_reader() -> Callable[..., TrainingConfig]:
    """The Megatron-args reader bound to the knowledge base (its vocabulary decides which variables are kept)."""
    try:
        from memtune.inputs.megatron_args import read_megatron_args
    except ImportError:
        raise UserError(
            "memtune.inputs.megatron_args.read_megatron_args is not available yet; "
            "cases with megatron_args cannot be converted"
        ) from None
    from memtune import knowledge

    return functools.partial(read_megatron_args, kb=knowledge.load())


def to_training_config(case: Case, reader: Callable[..., TrainingConfig] | None = None) -> TrainingConfig:
    """The case's layout as a TrainingConfig; megatron_args go through the one Megatron-args reader."""
    if case.megatron_args is not None:
        cfg = (reader or _megatron_reader())(case.megatron_args)
        if not isinstance(cfg, TrainingConfig):
            raise UserError(f"{case.path}:{case.line}: read_megatron_args returned {type(cfg).__name__}")
    else:
        cfg = TrainingConfig(provided=True, source="benchmark")
    for key, value in case.layout.items():
        setattr(cfg, key, copy.deepcopy(value))
    for key in ("world_size", "data_parallel_size"):
        want, have = getattr(case, key), getattr(cfg, key)
        if have is not None and have != want:
            raise UserError(f"{case.path}:{case.line}: case {case.id}: {key} is {want} but the layout gives {have}")
        setattr(cfg, key, want)
    return cfg


def resolve_stage(stage: int | str, cfg: TrainingConfig) -> int | None:
    """Pipeline rank to compare on; None means 'the largest stage' (the source gives one figure)."""
    if stage == "max":
        return None
    pp = cfg.pipeline_model_parallel_size or 1
    rank = pp - 1 if stage == "last" else int(stage)
    if not 0 <= rank < pp:
        raise UserError(f"measured stage {stage} is outside pipeline ranks 0..{pp - 1}")
    return rank


def bridge_applicability(cfg: TrainingConfig, case: Case | None = None) -> tuple[bool, list[str], list[str]]:
    """(applies, why not, caveats) for Bridge 0.6.2's estimate_training_memory on this layout.

    It does not apply when its model cannot represent the run at all; it applies with caveats when the run
    breaks one of its fixed assumptions (SP + selective recompute, fp32 main grads, bf16 weights).
    """
    why_not: list[str] = []
    if cfg.peft:
        why_not.append(f"{cfg.peft}: Bridge counts gradients and optimizer state for every (frozen) weight")
    if cfg.use_megatron_fsdp:
        why_not.append("Megatron FSDP shards weights and gradients; Bridge has no FSDP")
    if cfg.cpu_offloading or cfg.fine_grained_activation_offloading or cfg.optimizer_cpu_offload:
        why_not.append("CPU offload is not modelled by Bridge")
    args = (case.megatron_args or {}) if case else {}
    if cfg.num_layers is None or any(k in args for k in ("hybrid-layer-pattern", "hybrid-override-pattern")):
        why_not.append("hybrid Mamba layers (no plain transformer layer count)")
    caveats: list[str] = []
    if cfg.fp8:
        caveats.append("FP8 weights and param gather are not modelled")
    if cfg.grad_reduce_in_fp32 is False:
        caveats.append("bf16 main grads (Bridge assumes fp32)")
    if (cfg.tensor_model_parallel_size or 1) > 1 and not cfg.sequence_parallel:
        caveats.append("no sequence parallelism (Bridge assumes SP)")
    if cfg.recompute_granularity != "selective":
        caveats.append(f"recompute {cfg.recompute_granularity or 'none'} (Bridge assumes selective)")
    if cfg.use_precision_aware_optimizer:
        caveats.append("precision-aware optimizer dtypes are not modelled")
    if cfg.cuda_graph_impl not in (None, "none"):
        caveats.append("CUDA-graph buffers are not modelled")
    return not why_not, why_not, caveats


# --------------------------------------------------------------------------------------------------- run

Estimator = Callable[..., Any]


def _estimator() -> Estimator:
    try:
        from memtune.estimator import estimate
    except ImportError:
        raise UserError("memtune.estimator.estimate is not available yet (scripts/memtune/estimator/)") from None
    from memtune import knowledge

    try:
        kb = knowledge.load()  # a broken KB would fail every case the same way: say it once
    except knowledge.KnowledgeError as exc:
        raise UserError(f"the knowledge base does not load: {exc}") from None
    return functools.partial(estimate, kb=kb)


def _as_dict(result: Any) -> dict[str, Any]:
    return result.to_dict() if hasattr(result, "to_dict") else dict(result)


def _gpu_arg(case: Case) -> str | None:
    """The case's GPU id when the knowledge base knows it, else None (the allocated peak does not need it)."""
    try:
        from memtune import knowledge

        knowledge.load().get("gpus", case.hardware["gpu"])
        return case.hardware["gpu"]
    except Exception:  # noqa: BLE001 - no gpus table yet, or an unknown id: estimate without capacity
        return None


def _estimate_kwargs(case: Case, estimate: Estimator) -> dict[str, Any]:
    """gpu and micro-batches always; the run's environment (allocator settings) when the estimator takes it."""
    kwargs: dict[str, Any] = {"gpu": _gpu_arg(case), "num_microbatches": case.num_microbatches}
    if case.env and "env" in inspect.signature(estimate).parameters:
        from memtune.inputs.launch_env import env_from_config

        kwargs["env"] = env_from_config({k: str(v) for k, v in case.env.items()})
    return kwargs


# The estimate's quantity that matches each measured statistic: what torch's allocator counts as allocated, what
# it holds reserved, or what nvidia-smi shows for the process (reserved + CUDA context + NCCL buffers).  A peak
# whose statistic the source does not name is compared with allocated, the statistic Bridge's report_memory prints.
STAT_FIELD = {"max_memory_allocated": "allocated_peak_bytes", "peak reported by skill": "allocated_peak_bytes",
              "max_memory_reserved": "reserved_bytes", "nvidia-smi peak": "peak_with_overheads_bytes"}


def _ours_bytes(est: dict[str, Any], rank: int | None, which: str = "max_memory_allocated") -> float:
    key = STAT_FIELD[which]
    if rank is None:
        return float(max(stage[key] for stage in est["stages"]))
    for stage in est["stages"]:
        if stage["pp_rank"] == rank:
            return float(stage[key])
    raise UserError(f"estimate has no stage with pp_rank {rank}")


def _err_pct(estimate: float | None, measured: int) -> float | None:
    return None if estimate is None else (estimate - measured) / measured * 100.0


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def evaluate_case(case: Case, estimate: Estimator, reader: Callable[..., TrainingConfig] | None = None) -> dict:
    """One row: measured vs ours (same stage) vs Bridge; failures become a status, never a traceback."""
    row: dict[str, Any] = {
        "id": case.id,
        "family": case.family,
        "stretch": case.stretch,
        "stage": case.stage,
        "measured_bytes": case.measured_bytes,
        "measured_which": case.measured["which"],
        "source": _source_key(case),
        "ours_bytes": None,
        "ours_err_pct": None,
        "bridge_bytes": None,
        "bridge_err_pct": None,
        "bridge_applies": None,
        "bridge_why_not": [],
        "bridge_caveats": [],
        "status": "ok",
        "model_class": None,
    }
    try:
        cfg = to_training_config(case, reader)
        row["model_class"] = model_class(cfg)
        rank = resolve_stage(case.stage, cfg)
        row["stage"] = "max" if rank is None else rank
        kwargs = _estimate_kwargs(case, estimate)
        ours = _as_dict(estimate(cfg, mode="ours", **kwargs))
        row["ours_bytes"] = _ours_bytes(ours, rank, case.measured["which"])
        row["ours_err_pct"] = _err_pct(row["ours_bytes"], case.measured_bytes)
    except Exception as exc:  # noqa: BLE001 - one bad case must not hide the others
        row["status"] = _one_line(exc)
        return row
    applies, why_not, caveats = bridge_applicability(cfg, case)
    row.update(bridge_applies=applies, bridge_why_not=why_not, bridge_caveats=caveats)
    if applies:
        try:
            bridge = _as_dict(estimate(cfg, mode="bridge", **kwargs))["bridge"]
            row["bridge_bytes"] = float(bridge["total_bytes"])
            row["bridge_err_pct"] = _err_pct(row["bridge_bytes"], case.measured_bytes)
        except Exception as exc:  # noqa: BLE001
            row["bridge_why_not"] = [f"bridge mode failed: {_one_line(exc)}"]
            row["bridge_applies"] = False
    return row


LARGE_BYTES = 10 * 2**30  # issue 9: users OOM on large runs; small CI runs must not hide how those fare


def model_class(cfg: TrainingConfig) -> str:
    """The estimator-error class a run falls in (knowledge/estimator.yaml ``estimate-error-band``)."""
    from memtune import knowledge
    from memtune.estimator.models import fill_from_preset
    from memtune.planner.headroom import error_class

    return error_class(fill_from_preset(cfg, knowledge.load()))


def error_bands(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per model class, over the scored runs of 10 GiB or more: the mean absolute error (the band ``plan`` keeps free
    for layouts of that class) and the largest underestimate."""
    out: dict[str, dict[str, Any]] = {}
    large = [r for r in rows if r["status"] == "ok" and not r["stretch"] and r["measured_bytes"] >= LARGE_BYTES]
    for cls in sorted({r["model_class"] for r in large}):
        errs = [r["ours_err_pct"] for r in large if r["model_class"] == cls]
        out[cls] = {"cases": len(errs), "mape": _mape(errs), "worst_under": min(min(errs), 0.0),
                    "sources": len({r["source"] for r in large if r["model_class"] == cls})}
    return out


def size_class(measured_bytes: float) -> str:
    return "≥ 10 GiB" if measured_bytes >= LARGE_BYTES else "< 10 GiB"


def _source_key(case: Case) -> str:
    """One key per document: the URL without its anchor, else the citation (distinct sources are counted)."""
    url = (case.source.get("url") or "").split("#", 1)[0]
    return url or case.source["citation"]


def _mape(values: Iterable[float | None]) -> float | None:
    vals = [abs(v) for v in values if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """MAPE of ours and bridge per family and overall; stretch cases are listed but not averaged."""

    def block(group: list[dict[str, Any]]) -> dict[str, Any]:
        scored = [r for r in group if r["status"] == "ok" and not r["stretch"]]
        both = [r for r in scored if r["bridge_err_pct"] is not None]
        return {
            "cases": len(group),
            "scored": len(scored),
            "failed": sum(1 for r in group if r["status"] != "ok" and not r["stretch"]),
            "ours_mape": _mape(r["ours_err_pct"] for r in scored),
            "ours_max_abs_err_pct": max((abs(r["ours_err_pct"]) for r in scored), default=None),
            "bridge_cases": len(both),
            "bridge_mape": _mape(r["bridge_err_pct"] for r in both),
            "ours_mape_on_bridge_cases": _mape(r["ours_err_pct"] for r in both),
            "sources": len({r["source"] for r in scored}),
        }

    families = sorted({r["family"] for r in rows})
    sizes = [s for s in ("≥ 10 GiB", "< 10 GiB") if any(size_class(r["measured_bytes"]) == s for r in rows)]
    kinds = sorted({r["model_class"] for r in rows if r.get("model_class")})  # dense / moe / lora, across families
    return {
        "families": {fam: block([r for r in rows if r["family"] == fam]) for fam in families},
        "sizes": {s: block([r for r in rows if size_class(r["measured_bytes"]) == s]) for s in sizes},
        "kinds": {k: block([r for r in rows if r.get("model_class") == k]) for k in kinds},
        "overall": block(rows),
        "error_bands": error_bands(rows),
    }


def fitted_constants() -> dict[str, list[str]]:
    """Family -> the estimator constants fitted on it (knowledge/estimator.yaml ``fitted_on``): not held out."""
    from memtune import knowledge

    out: dict[str, list[str]] = {}
    for const in knowledge.load().entries("estimator"):
        for family in const.get("fitted_on") or ():
            out.setdefault(family, []).append(const["id"])
    return out


def run(cases: list[Case], estimate: Estimator, reader: Callable[..., TrainingConfig] | None = None) -> dict:
    rows = [evaluate_case(c, estimate, reader) for c in cases]
    return {"unit": "bytes", "rows": rows, "summary": summarise(rows), "fitted_on": fitted_constants()}


def gate(report: dict[str, Any], fail_above: float | None) -> list[str]:
    """Reasons the run fails: non-stretch cases not estimated, or our overall MAPE above the limit."""
    overall = report["summary"]["overall"]
    reasons = []
    if overall["failed"]:
        reasons.append(f"{overall['failed']} case(s) could not be estimated")
    if fail_above is not None:
        mape = overall["ours_mape"]
        if mape is None or mape > fail_above:
            shown = "n/a" if mape is None else f"{mape:.2f} %"
            reasons.append(f"overall MAPE {shown} exceeds {fail_above:g} %")
    return reasons


# --------------------------------------------------------------------------------------------------- render


def _gib(value: float | None) -> str:
    return "—" if value is None else f"{value / GIB:.2f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f}"


def _mape_s(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} %"


def _grouped_table(title: str, label: str, groups: dict[str, dict[str, Any]]) -> list[str]:
    """One summary table over groups of runs (measured-peak size, model kind) that cut across the families."""
    out = ["", f"## {title}", "",
           f"| {label} | scored | sources | ours | worst | bridge (cases) | ours on bridge cases |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for name, s in groups.items():
        worst = "—" if s["ours_max_abs_err_pct"] is None else f"{s['ours_max_abs_err_pct']:.1f} %"
        out.append(
            f"| {name} | {s['scored']}/{s['cases']} | {s['sources']} | {_mape_s(s['ours_mape'])} | {worst} | "
            f"{_mape_s(s['bridge_mape'])} ({s['bridge_cases']}) | {_mape_s(s['ours_mape_on_bridge_cases'])} |"
        )
    return out


def render_markdown(report: dict[str, Any]) -> str:
    out = ["# Estimator accuracy (memory in GiB, error = (estimate − measured) / measured)", ""]
    for fam in report["summary"]["families"]:
        out += [
            f"## {fam}",
            "",
            "| case | stage | measured | ours | err % | bridge | err % | note |",
            "|---|---|---:|---:|---:|---:|---:|---|",
        ]
        for r in (r for r in report["rows"] if r["family"] == fam):
            note = r["status"] if r["status"] != "ok" else "; ".join(r["bridge_why_not"]) or ""
            if r["stretch"]:
                note = f"stretch; {note}" if note else "stretch"
            out.append(
                f"| {r['id']} | {r['stage']} | {_gib(r['measured_bytes'])} | {_gib(r['ours_bytes'])} | "
                f"{_pct(r['ours_err_pct'])} | {_gib(r['bridge_bytes'])} | {_pct(r['bridge_err_pct'])} | {note} |"
            )
        out.append("")
    out += [
        "## MAPE",
        "",
        "| family | scored | ours | bridge (cases) | ours on bridge cases | failed | constants fitted on it |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    fitted = report.get("fitted_on") or {}
    items = list(report["summary"]["families"].items()) + [("**overall**", report["summary"]["overall"])]
    for fam, s in items:
        out.append(
            f"| {fam} | {s['scored']}/{s['cases']} | {_mape_s(s['ours_mape'])} | "
            f"{_mape_s(s['bridge_mape'])} ({s['bridge_cases']}) | {_mape_s(s['ours_mape_on_bridge_cases'])} | "
            f"{s['failed']} | {', '.join(fitted.get(fam, [])) or '—'} |"
        )
    out += _grouped_table("By measured peak (all families)", "peak", report["summary"].get("sizes", {}))
    out += _grouped_table("By model kind (all families)", "kind", report["summary"].get("kinds", {}))
    return "\n".join(out) + "\n"


def render_cases(cases: list[Case]) -> str:
    out = [
        "| case | family | stage | measured | unit | bytes | world | DP | micro-batches | source |",
        "|---|---|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for c in cases:
        out.append(
            f"| {c.id} | {c.family} | {c.stage} | {c.measured['value']} | {c.measured['unit']} | "
            f"{c.measured_bytes} | {c.world_size} | {c.data_parallel_size} | {c.num_microbatches} | "
            f"{c.source.get('url') or c.source['citation'][:60]} |"
        )
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    parser.add_argument("--family", help="only this family (file stem's `family:`)")
    parser.add_argument("--fail-above", type=float, metavar="PCT", help="exit 1 when our overall MAPE exceeds PCT")
    parser.add_argument("--data-only", action="store_true", help="load and list the cases; no estimator needed")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        cases = load_cases(args.data_dir, args.family)
        if args.data_only:
            if args.format == "json":
                print(json.dumps([dataclasses.asdict(c) for c in cases], indent=2))
            else:
                print(render_cases(cases), end="")
            return 0
        estimate = _estimator()
        reader = _megatron_reader() if any(c.megatron_args is not None for c in cases) else None
    except UserError as exc:
        print(f"accuracy: {exc}", file=sys.stderr)
        return 2
    report = run(cases, estimate, reader)
    statuses = {r["status"] for r in report["rows"] if not r["stretch"]}
    if len(statuses) == 1 and "ok" not in statuses and len(report["rows"]) > 1:
        print(f"accuracy: every case failed the same way: {statuses.pop()}", file=sys.stderr)
        return 2
    reasons = gate(report, args.fail_above)
    report["gate"] = {"fail_above_pct": args.fail_above, "failed": reasons}
    print(json.dumps(report, indent=2) if args.format == "json" else render_markdown(report), end="")
    if args.format == "json":
        print()
    if reasons:
        print(f"accuracy: FAIL: {'; '.join(reasons)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
