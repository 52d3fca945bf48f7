"""Tests for the streamed log reader (memtune.inputs.oom_log) and knowledge/signatures.yaml.

Every example text in signatures.yaml is fed through parse_log; the fixture logs under
tests/fixtures/logs and the bundled examples/ logs are checked against the facts they were
written to show.  Fixture texts and their sources are described in each file's header.
"""

from __future__ import annotations

import copy
import gzip
import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from conftest import read_kb, read_yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memtune.errors import UserError
from memtune.facts import Facts, LogFacts, OomEvent
from memtune.inputs import oom_log
from memtune.inputs.oom_log import compile_signatures, parse_log
from memtune.inputs.units import parse_size
from memtune.knowledge import KnowledgeError

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
FIXTURES = Path(__file__).parent / "fixtures" / "logs"
EXAMPLES = SKILL / "examples"
TABLE = read_kb("signatures")
GIB = 2**30
MIB = 2**20


def _kb_with(kb, **changes):
    """A copy of the KB whose signatures table (or constraints) is changed for one test."""
    tables = dict(kb.tables)
    sig = copy.deepcopy(kb.tables["signatures"])
    for key, value in changes.items():
        if key == "constraints":
            tables["constraints"] = {"schema_version": 1, "constraints": value}
        else:
            sig["parser"][key] = value
    tables["signatures"] = sig
    return replace(kb, tables=tables)


def _expected(field: str, value, sizes: bool = False):
    """What a fact must equal; sizes may be written as text ("2.09 GiB"), dicts and lists are compared item-wise."""
    if isinstance(value, dict):
        return {k: _expected(k, v, sizes=sizes or field.endswith("_bytes")) for k, v in value.items()}
    if isinstance(value, str) and (sizes or field.endswith("_bytes")):
        return pytest.approx(parse_size(value), rel=1e-3)
    if isinstance(value, float):
        return pytest.approx(value, rel=1e-3)
    return value


def _actual(facts, name: str, expect):
    """The fact named in an example; memory reports give only the fields the example states."""
    value = getattr(facts, name)
    if name == "memory_reports":
        return [{k: asdict(r)[k] for k in e} for r, e in zip(value, expect, strict=False)]
    return value


# --------------------------------------------------------------------------- signature table

SIDE_KINDS = ("memory-report", "memory-footprint", "env-export")
SIGNATURE_EXAMPLES = [
    pytest.param(sig["id"], i, ex, id=f"{sig['id']}-{i}")
    for sig in TABLE["signatures"]
    for i, ex in enumerate(sig.get("examples", []))
]


@pytest.mark.parametrize(("sig_id", "index", "example"), SIGNATURE_EXAMPLES)
def test_signature_example_parses_to_its_numbers(kb, sig_id, index, example):
    facts = parse_log(example["text"].split("\n"), kb)
    sig = kb.get("signatures", sig_id)
    events = [e for e in facts.events if e.signature == sig_id]
    if sig["kind"] not in SIDE_KINDS:
        assert events, f"{sig_id} example {index} gave {[e.signature for e in facts.events]}"
    if sig["kind"] in SIDE_KINDS:
        assert not events, f"{sig_id} example {index}: a {sig['kind']} line is not an event"
    for name, value in example["expect"].items():
        target = events[0] if events and name in OomEvent.__dataclass_fields__ else facts
        expected = [_expected("", e) for e in value] if name == "memory_reports" else _expected(name, value)
        assert _actual(target, name, value) == expected, f"{sig_id} example {index}: {name}"
        if name == "memory_reports":
            assert len(target.memory_reports) == len(value)


def test_signatures_table_matches_its_schema(kb):
    import jsonschema
    from referencing import Registry, Resource

    schema_dir = SKILL / "knowledge" / "schema"
    schemas = [json.loads((schema_dir / f"{n}.schema.json").read_text()) for n in ("common", "signatures")]
    registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas)
    validator = jsonschema.Draft202012Validator(schemas[1], registry=registry)
    assert [e.message for e in validator.iter_errors(kb.tables["signatures"])] == []


def test_every_memory_kind_has_an_example_and_ids_are_unique():
    ids = [s["id"] for s in TABLE["signatures"]]
    assert len(ids) == len(set(ids))
    memory_kinds = {k["id"] for k in TABLE["kinds"] if k["memory"]}
    with_examples = {s["kind"] for s in TABLE["signatures"] if s.get("examples")}
    assert memory_kinds <= with_examples


def test_allocator_formats_cover_every_pytorch_generation():
    formats = {s.get("format") for s in TABLE["signatures"] if s["kind"] == "allocator"}
    assert {"pt-1.4-cached", "pt-1.5-reserved", "pt-1.10-max-split", "pt-2.1-capacty", "pt-2.2-nvml",
            "pt-2.6-private-pools", "pt-generic-alloc-conf", "truncated"} <= formats


@pytest.mark.parametrize("prefix", TABLE["prefixes"], ids=lambda p: p["id"])
def test_launcher_prefixes_are_stripped_and_name_the_rank(kb, prefix):
    scanner = oom_log._Scanner(compile_signatures(kb))
    for example in prefix["examples"]:
        assert scanner._strip(example["text"]) == (example["rest"], example["rank"])


def test_broken_regex_in_the_table_is_a_knowledge_error(kb):
    broken = _kb_with(kb)
    broken.tables["signatures"]["signatures"][0]["regex"] = "Tried to allocate ("
    with pytest.raises(KnowledgeError, match="pytorch-oom-private-pools"):
        compile_signatures(broken, eager=True)
    # commands compile each regex on first use: the same one-line error, when a log line reaches it
    with pytest.raises(KnowledgeError, match="pytorch-oom-private-pools: invalid regex"):
        parse_log(["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"], broken)


# --------------------------------------------------------------------------- fixture logs

FIXTURE_FACTS = {
    "pt14-cached.log": dict(oom_kind="allocator", pytorch_format="pt-1.4-cached", phase="forward",
                            reserved_unallocated_bytes=179 * 1024, reserved_bytes=4 * GIB + 179 * 1024),
    "pt15-reserved.log": dict(pytorch_format="pt-1.5-reserved", phase="backward", requested_bytes=2.29 * GIB,
                              reserved_unallocated_bytes=(28.32 - 19.22) * GIB, fragmentation_ratio=9.10 / 28.32),
    "pt110-max-split.log": dict(pytorch_format="pt-1.10-max-split", phase="optimizer", rank=0, ranks_failed=[0]),
    "pt21-capacty-checkpoint-load.log": dict(pytorch_format="pt-2.1-capacty", phase="checkpoint-load", rank=1,
                                             other_process_bytes=256 * MIB, other_process_count=1,
                                             non_pytorch_bytes=(22.89 - 21.48 - 1.11) * GIB),
    "pt22-nvml-processes-init.log": dict(pytorch_format="pt-2.2-nvml", phase="init", rank=0,
                                         other_process_bytes=32.25 * GIB, other_process_count=2,
                                         non_pytorch_bytes=1.5 * GIB),
    "pt26-private-pools.log": dict(pytorch_format="pt-2.6-private-pools", rank=17, private_pool_bytes=3.87 * GIB,
                                   graph_pool_ratio=3.87 / 210.08,
                                   snapshot_path="/results/405b/memory_snapshot_oom_rank-17.pickle",
                                   signatures=["bridge-oom-snapshot", "pytorch-oom-private-pools"]),
    "generic-alloc-conf.log": dict(pytorch_format="pt-generic-alloc-conf", allocated_bytes=71.40 * GIB),
    "truncated-after-gpu.log": dict(truncated=True, rank=2, requested_bytes=20 * MIB, capacity_bytes=None,
                                    fragmentation_ratio=None),
    "wrapped-fixed-width.log": dict(pytorch_format="pt-2.2-nvml", requested_bytes=3.5 * GIB,
                                    reserved_unallocated_bytes=4.75 * GIB, process_bytes=77 * GIB),
    "wrapped-words.log": dict(pytorch_format="pt-2.6-private-pools", rank=40, ranks_failed=[40],
                              reserved_unallocated_bytes=59.51 * GIB, private_pool_bytes=3.87 * GIB),
    "nccl-oom.log": dict(oom_kind="nccl", rank=6, phase="backward", crash=False,
                         signatures=["nccl-cuda-oom", "nccl-calloc-failed"]),
    "cublas-cudnn-triton.log": dict(oom_kind="cublas", rank=3, ranks_failed=[3, 9, 52],
                                    kinds=["cublas", "cudnn", "triton"], memory_failure_weak=False),
    "weak-cudnn-only.log": dict(oom_kind="cudnn", memory_failure_weak=True, crash=False),
    "triton-smem-not-oom.log": dict(has_memory_failure=False, crash=True, oom_kind=None,
                                    first_error="triton.runtime.autotuner.OutOfResources: out of resource: shared "
                                                "memory, Required: 663808, Hardware limit: 101376"),
    "cuda-error-graph-capture.log": dict(oom_kind="cuda", ranks_failed=[0], crash=False),
    "host-sigkill-only.log": dict(oom_kind="host", host_oom=True, host_oom_confirmed=False, memory_failure_weak=True,
                                  ranks_failed=[10], crash=False),
    "host-kernel-cgroup.log": dict(oom_kind="host", host_oom_confirmed=True, process_bytes=None,
                                   signatures=["kernel-oom-killer", "cgroup-oom-killer", "k8s-oomkilled",
                                               "exit-code-137"]),
    "shm-bus-error.log": dict(oom_kind="host", host_oom_confirmed=False, ranks_failed=[1]),  # the shm limit
    "crash-then-timeouts-unprefixed.log": dict(has_memory_failure=False, crash=True, nccl_timeout=True,
                                               first_error="AssertionError: packed sequence longer than seq_length"),
    "checkpoint-save-progress.log": dict(phase="checkpoint-save", rank=1),
    "memory-report-megatron.log": dict(has_memory_failure=False, events=[],
                                       theoretical_bytes={"weight_and_optimizer": 10764.77 * MIB}),
    "duplicate-summary.log": dict(ranks_failed=[2, 3], rank=2, requested_bytes=GIB),
}


def test_every_fixture_log_has_expectations():
    assert sorted(FIXTURE_FACTS) == sorted(p.name for p in FIXTURES.glob("*.log"))


@pytest.mark.parametrize("name", sorted(FIXTURE_FACTS))
def test_fixture_log_facts(kb, name):
    facts = parse_log(FIXTURES / name, kb)
    assert facts.provided and facts.lines == len((FIXTURES / name).read_text().splitlines())
    for field, value in FIXTURE_FACTS[name].items():
        assert getattr(facts, field) == _expected(field, value), field


def test_memory_reports_keep_the_latest_line_of_each_rank(kb):
    facts = parse_log(FIXTURES / "memory-report-megatron.log", kb)
    reports = {r.rank: r for r in facts.memory_reports}
    assert list(reports) == [2, 4, 6, None]  # two reports glued on one line are both read
    assert reports[6].max_allocated_bytes == pytest.approx(12701.25 * MIB)
    assert reports[2].max_reserved_bytes == pytest.approx(13236.0 * MIB)
    assert (reports[None].iteration, reports[None].max_reserved_bytes) == (10, None)
    later = parse_log(["[Rank 3] (after 1 iterations) memory (GB) | mem-max-reserved-gigabytes: 70.0",
                       "[rank3]: [Rank 3] (after 2 iterations) memory (GB) | mem-max-reserved-gigabytes: 60.5"], kb)
    assert [(r.rank, r.iteration, r.line, r.max_reserved_bytes) for r in later.memory_reports] == [(3, 2, 2, 60.5e9)]


def test_memory_reports_and_env_are_bounded(kb):
    small = _kb_with(kb, max_report_ranks=3, max_env_vars=2)
    lines = [f"[Rank {r}] (after 1 iterations) memory (MB) | allocated: 1.0 | max allocated: {r}.0" for r in range(6)]
    lines += ["[Rank 1] (after 2 iterations) memory (MB) | allocated: 1.0 | max allocated: 99.0"]
    lines += [f"+ export NCCL_VAR_{i}={i}" for i in range(5)]
    lines += ["+ export NCCL_VAR_0=again", "export NCCL_VAR_1=" + "y" * 5000]  # an over-long value is not kept
    facts = parse_log(lines, small)
    assert [(r.rank, r.max_allocated_bytes) for r in facts.memory_reports] == [(0, 0.0), (1, 99 * MIB), (2, 2 * MIB)]
    assert facts.env == {"NCCL_VAR_0": "again", "NCCL_VAR_1": "1"}
    flat = Facts(log=facts).flatten()
    assert "log.memory_reports" not in flat and flat["log.env"] == facts.env


def test_env_lines_need_their_own_shape_not_just_a_name(kb):
    lines = ["RuntimeError: CUDA out of memory. If reserved but unallocated memory is large try setting "
             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
             "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
             "+ export PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:512'",
             "+ export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True  # later export wins"]
    assert parse_log(lines, kb).env == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    no_vocab = replace(kb, tables={k: v for k, v in kb.tables.items() if k != "vocabulary"})
    assert parse_log(lines, no_vocab).env == {}


def test_side_signature_naming_an_unknown_field_is_a_knowledge_error(kb):
    sig = copy.deepcopy(kb.tables["signatures"])
    report = next(s for s in sig["signatures"] if s["id"] == "bridge-memory-report")
    report["pairs"]["keys"]["mem-allocated-gigabytes"]["field"] = "allocated_gigabytes"
    with pytest.raises(KnowledgeError, match="not a MemoryReport field"):
        compile_signatures(replace(kb, tables={**kb.tables, "signatures": sig}))


def test_capacity_example_reads_expandable_segments_from_the_log_without_env(kb):
    from memtune.pipeline import Inputs, run

    facts, flat, diag = run(Inputs(log=EXAMPLES / "capacity-expandable-set.log"), kb)
    assert facts.log.env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert facts.env.expandable_segments is True and flat["env.expandable_segments"] is True
    assert "expandable-segments" in diag.already_applied
    assert "expandable-segments" not in [f.id for f in diag.fixes]


def test_duplicate_summary_counts_each_rank_once(kb):
    facts = parse_log(FIXTURES / "duplicate-summary.log", kb)
    assert [(e.signature, e.rank) for e in facts.events] == [("pytorch-oom-nvml", 2), ("pytorch-oom-nvml", 3)]


def test_nccl_oom_exception_is_not_a_second_crash(kb):
    facts = parse_log(FIXTURES / "nccl-oom.log", kb)
    assert [e.kind for e in facts.events] == ["nccl", "nccl"]
    assert facts.events[1].requested_bytes == 24


# --------------------------------------------------------------------------- bundled examples


def test_example_fragmentation_log_is_consistent_and_flagged(kb):
    path = EXAMPLES / "llama3-70b-fragmentation.log"
    header = path.read_text(encoding="utf-8").splitlines()[:8]
    assert any("ILLUSTRATIVE RECONSTRUCTION" in line for line in header)
    assert any("#3107" in line for line in header)
    f = parse_log(path, kb)
    assert (f.oom_kind, f.rank, f.phase, f.pytorch_format) == ("allocator", 0, "backward", "pt-2.2-nvml")
    assert f.capacity_bytes == pytest.approx(79.11 * GIB)
    assert f.free_bytes + f.process_bytes == pytest.approx(f.capacity_bytes, abs=0.01 * GIB)
    assert f.process_bytes >= f.allocated_bytes + f.reserved_unallocated_bytes
    assert f.allocated_bytes == pytest.approx(58.8e9, rel=0.01)  # "peak 58.8 GB on rank 0"
    assert 4 * GIB < f.reserved_unallocated_bytes and f.reserved_unallocated_bytes > 10 * f.requested_bytes
    assert f.fragmentation_ratio == pytest.approx(19.87 / (54.81 + 19.87), rel=1e-3)
    assert f.non_pytorch_bytes == pytest.approx(4.41 * GIB, abs=0.01 * GIB)
    assert [r.rank for r in f.memory_reports] == [0, 8, 16, 24]
    report = f.memory_reports[0]
    assert (report.max_allocated_bytes, report.alloc_retries) == (pytest.approx(58.803e9), 6)
    assert f.env == {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NVTE_FWD_LAYERNORM_SM_MARGIN": "16",
                     "NVTE_BWD_LAYERNORM_SM_MARGIN": "16", "NCCL_NVLS_ENABLE": "0"}
    assert f.nccl_timeout and not f.crash and f.ranks_failed == [0]


def test_example_capacity_log(kb):
    f = parse_log(EXAMPLES / "capacity-expandable-set.log", kb)
    assert (f.oom_kind, f.rank, f.phase) == ("allocator", 3, "forward")
    assert f.reserved_unallocated_bytes == pytest.approx(40 * MIB)
    assert f.requested_bytes == pytest.approx(896 * MIB) and f.requested_bytes > f.reserved_unallocated_bytes
    assert f.fragmentation_ratio < 0.01
    assert f.free_bytes + f.process_bytes == pytest.approx(f.capacity_bytes, abs=0.01 * GIB)


def test_example_not_an_oom_log(kb):
    f = parse_log(EXAMPLES / "not-an-oom.log", kb)
    assert (f.has_memory_failure, f.crash, f.nccl_timeout, f.host_oom) == (False, True, True, False)
    assert (f.first_error, f.first_error_rank) == ("KeyError: 'input_ids'", 0)
    assert f.oom_kind is None and f.requested_bytes is None


def test_example_host_oom_log(kb):
    f = parse_log(EXAMPLES / "host-oom-dataloader.log", kb)
    assert (f.oom_kind, f.host_oom, f.host_oom_confirmed, f.crash) == ("host", True, True, False)
    assert f.ranks_failed == [5] and f.capacity_bytes is None
    assert "dataloader-worker-killed" in f.signatures and "slurm-oom-kill" in f.signatures


# --------------------------------------------------------------------------- reading mechanics


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.log")))
def test_path_text_and_lines_give_the_same_facts(kb, name):
    path = FIXTURES / name
    text = path.read_text(encoding="utf-8")
    from_path = asdict(parse_log(path, kb))
    assert asdict(parse_log(text, kb)) == from_path
    assert asdict(parse_log(text.splitlines(keepends=True), kb)) == from_path


@pytest.mark.parametrize("chunk", [7, 64, 333])
def test_chunk_boundaries_do_not_change_the_result(kb, monkeypatch, chunk):
    names = ["pt21-capacty-checkpoint-load.log", "nccl-oom.log", "wrapped-words.log", "host-sigkill-only.log"]
    expected = {n: asdict(parse_log(FIXTURES / n, kb)) for n in names}
    monkeypatch.setattr(oom_log, "_CHUNK_CHARS", chunk)
    for name in names:
        assert asdict(parse_log(FIXTURES / name, kb)) == expected[name], name


def test_gzip_log_is_read(kb, tmp_path):
    path = tmp_path / "train.log.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write((FIXTURES / "pt15-reserved.log").read_text(encoding="utf-8"))
    assert parse_log(path, kb).pytorch_format == "pt-1.5-reserved"


def test_crlf_ansi_and_progress_bar_lines(kb, tmp_path):
    oom = ("\x1b[31mRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity; "
           "77.13 GiB already allocated; 307.31 MiB free; 78.21 GiB reserved in total by PyTorch)\x1b[0m")
    path = tmp_path / "win.log"
    path.write_bytes(("step 1\r\n 40%|####      | 4/10\r 50%|#####     | 5/10\r" + oom + "\r\nend\r\n").encode())
    facts = parse_log(path, kb)
    assert facts.lines == 3
    assert [(e.signature, e.line) for e in facts.events] == [("pytorch-oom-reserved-in-total", 2)]
    assert facts.reserved_bytes == pytest.approx(78.21 * GIB)


def test_overlong_line_is_read_in_pieces_without_losing_line_numbers(kb, tmp_path):
    small = _kb_with(kb, max_line_chars=50)
    path = tmp_path / "long.log"
    oom = "[rank1]: RuntimeError: Triton Error [CUDA]: out of memory"
    path.write_text("x" * 5000 + "\n" + "y" * 120 + "\n" + oom + "\n", encoding="utf-8")
    facts = parse_log(path, small)
    assert facts.lines == 3
    assert [(e.signature, e.line, e.rank) for e in facts.events] == [("triton-cuda-oom", 3, 1)]


def test_a_traceback_that_never_ends_stops_holding_the_scanner(kb):
    short = _kb_with(kb, traceback_max_lines=5)
    lines = ["[rank1]: Traceback (most recent call last):", '[rank1]:   File "a.py", line 1, in f']
    lines += [f"ordinary line {i}" for i in range(10)]
    lines += ["[rank1]: RuntimeError: something unrelated", "[rank1]: RuntimeError: CUDA error: out of memory"]
    facts = parse_log(lines, short)
    assert not facts.crash  # the traceback had expired, so the first RuntimeError closes nothing
    assert [e.signature for e in facts.events] == ["cuda-error-oom"]
    scanner = oom_log._Scanner(compile_signatures(short))
    for line in lines[:8]:
        scanner.feed(line)
    assert scanner.idle  # no rank-1 line came, yet the cut traceback no longer forces line-by-line reading


def test_event_list_is_capped_but_ranks_are_all_counted(kb):
    capped = _kb_with(kb, max_events=2)
    lines = [f"[rank{r}]: RuntimeError: CUDA error: out of memory" for r in range(6)]
    facts = parse_log(lines, capped)
    assert len(facts.events) == 2
    assert facts.ranks_failed == list(range(6))


def test_missing_or_unreadable_log_is_a_user_error(kb, tmp_path):
    with pytest.raises(UserError, match="not found"):
        parse_log(tmp_path / "nope.log", kb)
    with pytest.raises(UserError, match="cannot read"):
        parse_log(tmp_path, kb)


def test_empty_source_is_provided_but_says_nothing(kb):
    facts = parse_log([], kb)
    assert facts == LogFacts(provided=True)


def test_checkpoint_progress_closes_when_the_save_finishes(kb):
    lines = [
        "saving checkpoint at iteration    2500 to /ckpt in torch_dist format",
        "  successfully saved checkpoint from iteration    2500 to /ckpt [ t 1/2, p 1/1 ]",
        "RuntimeError: CUDA error: out of memory",
    ]
    assert parse_log(lines, kb).phase is None
    assert parse_log(lines[:1] + lines[2:], kb).phase == "checkpoint-save"


def test_frames_beat_progress_lines_and_precedence_is_by_phase(kb):
    lines = [
        " loading distributed checkpoint from /ckpt at iteration 10",
        "Traceback (most recent call last):",
        '  File "/m/megatron/core/pipeline_parallel/schedules.py", line 579, in backward_step',
        "    custom_backward(output_tensor[0], output_tensor_grad[0])",
        '  File "/m/megatron/core/tensor_parallel/random.py", line 301, in backward',
        "    outputs = ctx.run_function(*detached_inputs)",
        '  File "/m/megatron/core/transformer/mlp.py", line 150, in forward',
        "    x = self.linear_fc1(x)",
        "RuntimeError: CUDA error: out of memory",
    ]
    # a recompute forward inside backward() is the backward pass
    assert parse_log(lines, kb).phase == "backward"


def test_rank_attribution_prefers_prefix_then_message_then_summary(kb):
    lines = ["[rank4]:[E0101 00:00:00.000 PG.cpp:1] [Rank 9] Watchdog caught collective operation timeout"]
    assert parse_log(lines, kb).events[0].rank == 4
    assert parse_log([lines[0].removeprefix("[rank4]:")], kb).events[0].rank == 9


# --------------------------------------------------------------------------- constraint errors


def test_constraint_error_pattern_names_the_constraint(kb):
    with_constraint = _kb_with(kb, constraints=[{
        "id": "demo-pp-offload", "error_pattern": r"no support for Pipeline parallelism with CPU offloading"}])
    lines = [
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/m/megatron/core/transformer/transformer_config.py", line 912, in __post_init__',
        "[rank0]:     raise ValueError(",
        "[rank0]: ValueError: Currently there is no support for Pipeline parallelism with CPU offloading",
    ]
    facts = parse_log(lines, with_constraint)
    assert facts.constraint_errors == ["demo-pp-offload"]
    assert [(e.kind, e.constraint, e.rank) for e in facts.events if e.kind == "config-error"] == [
        ("config-error", "demo-pp-offload", 0)]
    assert facts.crash and not facts.has_memory_failure
    assert parse_log(lines, _kb_with(kb, constraints=[])).constraint_errors == []


def _constraint_examples() -> list:
    """error_examples of every constraint that has an error_pattern (none until constraints.yaml has some)."""
    path = SKILL / "knowledge" / "constraints.yaml"
    table = read_yaml(path) if path.is_file() else None
    return [
        pytest.param(c["id"], text, id=f"{c['id']}-{i}")
        for c in (table or {}).get("constraints", [])
        if c.get("error_pattern")
        for i, text in enumerate((c.get("tests") or {}).get("error_examples", []))
    ]


CONSTRAINT_EXAMPLES = _constraint_examples()


@pytest.mark.parametrize(("constraint_id", "text"), CONSTRAINT_EXAMPLES)
def test_constraint_error_examples_are_recognised_in_a_log(kb, constraint_id, text):
    lines = [" iteration 3 | lm loss: 2.1", text, "next line"]
    assert constraint_id in parse_log(lines, kb).constraint_errors


# --------------------------------------------------------------------------- property: any wrapping


def _format_size(n: int) -> str:
    """PyTorch's c10 format_size: bytes up to 1 KiB, then KiB/MiB/GiB with two decimals."""
    if n <= 1024:
        return f"{n} bytes"
    for unit, scale in (("KiB", 2**10), ("MiB", 2**20)):
        if n <= scale * 1024:
            return f"{n / scale:.2f} {unit}"
    return f"{n / GIB:.2f} GiB"


sizes = st.integers(min_value=512, max_value=300 * GIB)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(requested=sizes, allocated=sizes, unallocated=sizes, width=st.integers(60, 200),
       rank=st.one_of(st.none(), st.integers(0, 4095)))
def test_wrapped_message_keeps_its_numbers(kb, requested, allocated, unallocated, width, rank):
    process = allocated + unallocated + GIB
    msg = (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {_format_size(requested)}. GPU 0 has a "
           f"total capacity of {_format_size(process + GIB)} of which {_format_size(GIB)} is free. Including "
           f"non-PyTorch memory, this process has {_format_size(process)} memory in use. Of the allocated memory "
           f"{_format_size(allocated)} is allocated by PyTorch, and {_format_size(unallocated)} is reserved by "
           "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
    prefix = f"[rank{rank}]: " if rank is not None else ""
    lines = ["iteration 7"] + [prefix + msg[i:i + width] for i in range(0, len(msg), width)] + ["next record"]
    facts = parse_log(lines, kb)
    assert facts.pytorch_format == "pt-2.2-nvml" and facts.rank == rank
    for field, value in (("requested_bytes", requested), ("allocated_bytes", allocated),
                         ("reserved_unallocated_bytes", unallocated)):
        assert getattr(facts, field) == pytest.approx(parse_size(_format_size(value)), rel=1e-9)


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(("text", "unit", "expected"), [
    ("2.09 GiB", None, 2.09 * GIB), ("179.00 KiB", None, 179 * 1024), ("512 bytes", None, 512),
    ("58.803", "GB", 58.803e9), ("60211.5", "MiB", 60211.5 * MIB), ("501112344kB", None, 501112344 * 1024),
    ("1EB", None, 1e18), ("24 bytes", None, 24),
])
def test_sizes_follow_the_documented_unit_conventions(text, unit, expected):
    assert parse_size(text, unit) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "GiB", "12 parsecs", "1.2.3 MiB"])
def test_bad_sizes_are_rejected(text):
    with pytest.raises(ValueError):
        parse_size(text)


@pytest.mark.parametrize(("pattern", "literals"), [
    ("plain text here", {"plain text here"}),
    (r"colou?r is (red|blue) today, said the forecast", {"today, said the forecast"}),
    (r"num_layers=\d+ should be divisible|Number of layers must match", {"should be divisible",
                                                                          "Number of layers must match"}),
    (r"(?i)case insensitive", None),
    (r"ab|cdefgh", None),  # a branch too short to be worth searching for
    (r"world[ _]size \(\d+\) is not divisible by", {") is not divisible by"}),
])
def test_required_literals_are_sound(pattern, literals):
    found = oom_log._required_literals(pattern)
    assert (set(found) if found is not None else None) == literals


def test_nvml_garbage_process_size_is_not_trusted(kb):
    line = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
            "8.00 GiB of which 0 bytes is free. Including non-PyTorch memory, this process has 17179869184.00 GiB "
            "memory in use. Of the allocated memory 7.10 GiB is allocated by PyTorch, and 150.00 MiB is reserved by "
            "PyTorch but unallocated.")
    facts = parse_log([line], kb)
    assert facts.events[0].process_bytes == pytest.approx(17179869184 * GIB)
    assert facts.process_bytes is None and facts.non_pytorch_bytes is None
    assert facts.fragmentation_ratio == pytest.approx(150 / (7.10 * 1024 + 150))


def test_pasted_traceback_excerpt_without_header_still_gives_the_phase(kb):
    """Users paste the last frames only (no 'Traceback' header, sometimes no line numbers)."""
    excerpt = (
        '[rank0]:   File "megatron/core/transformer/module.py", in forward\n'
        "[rank0]:     outputs = float16_to_fp32(outputs)\n"
        '[rank0]:   File "megatron/core/transformer/module.py", line 96, in float16_to_fp32\n'
        "[rank0]:     return conversion_helper(val, float_conversion)\n"
    )
    facts = parse_log(excerpt, kb)
    assert facts.phase == "loss" and not facts.crash and not facts.has_memory_failure


def test_a_run_of_report_lines_reads_as_line_by_line(kb):
    """Plain report lines are read a run at a time (report_run); line numbers, reports, the series and what
    follows the run must be what reading each line alone gives: the same log, once with every report line
    prefixed (the slow path) and once plain."""
    def report(rank, it, mib):
        return (f"[Rank {rank}] (after {it} iterations) memory (MB) | allocated: {mib} | max allocated: {mib + 10} | "
                f"reserved: {mib + 20} | max reserved: {mib + 30}")

    plain, prefixed = [], []
    for it in (1, 2, 3):
        plain.append(f" iteration {it}/ 10 | lm loss: 2.0 |")
        prefixed.append(plain[-1])
        for rank in range(4):
            plain.append(report(rank, it, 1000 * it + rank))
            prefixed.append(f"[default{rank}]:" + report(rank, it, 1000 * it + rank))
    tail = ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.11 GiB of which 1.00 GiB is free."]
    fast = parse_log("\n".join(plain + tail) + "\n", kb)
    slow = parse_log("\n".join(prefixed + tail) + "\n", kb)
    assert [(r.rank, r.line, r.iteration, r.allocated_bytes) for r in fast.memory_reports] == \
        [(r.rank, r.line, r.iteration, r.allocated_bytes) for r in slow.memory_reports]
    assert fast.report_series == slow.report_series and len(fast.report_series) == 3
    assert [e.line for e in fast.events] == [e.line for e in slow.events] == [len(plain) + 3]
    assert fast.requested_bytes == slow.requested_bytes == 2 * 2**30


def test_a_last_error_that_is_not_out_of_memory_makes_the_nccl_failure_a_crash(kb):
    """ncclUnhandledCudaError is read as a full GPU only when NCCL's "Last error" does not say otherwise: CUDA
    error 999 ('unknown error') is a driver or hardware fault, error 2 ('out of memory') is memory."""
    head = ["torch.distributed.DistBackendError: NCCL error in: NCCLUtils.cpp:77, unhandled cuda error",
            "ncclUnhandledCudaError: Call to CUDA function failed.", "Last error:"]
    crash = parse_log([*head, "Cuda failure 999 'unknown error'"], kb)
    assert not crash.has_memory_failure and crash.crash
    oom = parse_log([*head, "Cuda failure 2 'out of memory'"], kb)
    assert oom.has_memory_failure and oom.oom_kind == "nccl"


def test_the_prefilter_finds_the_first_hit_a_full_search_finds(kb):
    """The pre-filter searches each trigger a growing window at a time: hits on either side of a window's end,
    a trigger cut by it, and needles absent from a whole chunk are found (or not) as by one full search."""
    import random

    patterns = compile_signatures(kb)
    finder = oom_log._Finder(patterns)
    window = oom_log._FINDER_WINDOW
    rnd = random.Random(7)
    needles = list(finder.literals[:12])
    for _ in range(6):
        buf = list("." * (3 * window + 5000))
        for needle in rnd.sample(needles, 4):
            at = rnd.choice([window - len(needle) // 2, window - len(needle), window, 2 * window - 3,
                             rnd.randrange(len(buf) - 40)])
            buf[at:at + len(needle)] = needle
        text, pos, end = "".join(buf), 0, len(buf)
        finder.reset()
        while True:
            starts = [text.find(lit, pos, end) for lit in finder.literals]
            starts += [m.start() for m in (rx.search(text, pos, end) for rx in finder.regexes) if m]
            expected = min((s for s in starts if s >= 0), default=-1)
            assert finder.first(text, pos, end) == expected, pos
            if expected < 0:
                break
            pos = expected + rnd.randint(1, 3 * window // 2)


def test_a_long_line_holds_the_triggers_a_plain_search_finds(kb):
    """A line too long for a shape is searched for the shortest triggers, and for a longer one only where all the
    shortest it contains are there: the same set as testing every trigger."""
    import random

    patterns = compile_signatures(kb)
    scanner = oom_log._Scanner(patterns)
    rnd = random.Random(5)
    triggers = list(patterns.triggers)
    assert oom_log._longer_triggers(patterns.triggers)  # some triggers contain others
    for _ in range(300):
        parts = [rnd.choice(triggers) if rnd.random() < 0.3 else rnd.choice(["x", " ", "9", ":"]) for _ in range(40)]
        text = "".join(parts) * 20
        assert scanner._triggers_in(text) == frozenset(t for t in triggers if t in text)


# --------------------------------------------------------------------------- NVML process lines

_NVML_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity of "
             "95.62 GiB of which 773.41 MiB is free. {processes}Of the allocated memory 76.80 GiB is allocated by "
             "PyTorch, with 10.17 GiB allocated in private pools (e.g., CUDA Graphs), and 189.91 MiB is reserved by "
             "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.\n")


@pytest.mark.parametrize("processes, own, others, count", [
    # in a container NVML names this process by its host PID, and may list it twice (verl #3104's message)
    ("Process 895189 has 95.61 GiB memory in use. Process 895189 has 95.61 GiB memory in use. ", 95.61, 0.0, 0),
    ("Process 895189 has 92.61 GiB memory in use. Process 17 has 3.00 GiB memory in use. ", 92.61, 3.00, 1),
    ("Process 17 has 3.00 GiB memory in use. Process 17 has 3.00 GiB memory in use. "
     "Including non-PyTorch memory, this process has 92.61 GiB memory in use. ", 92.61, 3.00, 1),
])
def test_each_nvml_process_counts_once_and_this_process_is_not_another(kb, processes, own, others, count):
    facts = parse_log([_NVML_OOM.format(processes=processes)], kb)
    assert facts.process_bytes == pytest.approx(own * GIB)
    assert facts.other_process_bytes == pytest.approx(others * GIB) and facts.other_process_count == count


def test_the_answer_quotes_the_message_figures_as_pytorch_printed_them(kb):
    from memtune.report import message_figures

    log = parse_log([_NVML_OOM.format(processes="Process 895189 has 95.61 GiB memory in use. ")], kb)
    shown = {m["name"]: m["text"] for m in message_figures({f"log.{k}": v for k, v in asdict(log).items()})}
    assert shown["requested"] == "2.00 MiB" and shown["reserved_unallocated"] == "189.91 MiB"
    assert shown["private_pool"] == "10.17 GiB" and shown["process"] == "95.61 GiB"
    assert "other_process" not in shown  # the only process listed is this one


def test_this_process_is_the_smallest_nvml_line_that_holds_its_reservation(kb):
    # Alibaba-NLP/ZeroSearch#11 (set issue-24-s58): a 30.51 GiB server on GPU 0 beside the trainer's 1022 MiB
    line = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 148.00 MiB. GPU 0 has a total capacity of "
            "31.60 GiB of which 87.44 MiB is free. Process 441650 has 30.51 GiB memory in use. Process 449657 has "
            "1022.00 MiB memory in use. Of the allocated memory 594.01 MiB is allocated by PyTorch, and 5.99 MiB is "
            "reserved by PyTorch but unallocated.")
    facts = parse_log([line], kb)
    assert facts.process_bytes == pytest.approx(1022 * MIB)
    assert facts.other_process_bytes == pytest.approx(30.51 * GIB, rel=1e-3)
