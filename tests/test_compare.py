"""``memtune compare``: configs (attribution adds up), logs (per-step divergence, OOMs), snapshots (real pickles)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SKILL, read_yaml
from memtune.cli import main
from memtune.compare.configs import changed_fields, compare_configs
from memtune.compare.detect import detect_kind
from memtune.compare.logs import compare_logs
from memtune.compare.snapshots import compare_snapshots, live_sites, parse_at, site_gaps
from memtune.compare.tolerance import parse_tolerance
from memtune.errors import UserError
from memtune.inputs.memory_steps import read_memory_steps
from memtune.inputs.oom_log import parse_log
from memtune.inputs.snapshot import analyze_snapshot
from memtune.inputs.snapshot_trace import load_trace

PR3107 = ROOT / "benchmarks" / "measured" / "llama3-70b-pr3107.yaml"
EXAMPLES = SKILL / "examples"
LOGS = ROOT / "tests" / "fixtures" / "logs"
SCHEMA = SKILL / "knowledge" / "schema" / "compare.schema.json"
FORWARD, FULLSTEP = "cs336-a2-memory_ctx128_forward.pickle", "cs336-a2-memory_ctx128_fullstep.pickle"
GIB = 2**30

# Where a Bridge ConfigContainer keeps the layout keys the benchmark file lists (the rest sit under model:).
SECTION_OF = {"micro_batch_size": "train", "global_batch_size": "train", "use_distributed_optimizer": "ddp",
              "grad_reduce_in_fp32": "ddp", "use_precision_aware_optimizer": "optimizer",
              "tp_comm_overlap": "comm_overlap"}


# --------------------------------------------------------------------------- helpers


def pr3107_case(case_id: str) -> dict:
    """The full layout of one PR #3107 run: the common layout with the case's own keys on top."""
    doc = read_yaml(PR3107)
    case = next(c for c in doc["cases"] if c["id"] == case_id)
    return {**doc["common"]["layout"], **case.get("layout", {})}


def bridge_yaml(path: Path, layout: dict) -> Path:
    tree: dict = {}
    for key, value in layout.items():
        if key in ("model_name", "task"):
            continue
        tree.setdefault(SECTION_OF.get(key, "model"), {})[key] = value
    path.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    return path


def run_cli(*args, capsys):
    code = main(["compare", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def schema_check(doc: dict) -> None:
    import jsonschema

    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8"))).validate(doc)


def assert_telescopes(result) -> None:
    """Every target: the steps' shares add up to the total, and the total is B - A exactly."""
    for target in ("peak", "first", "last"):
        assert sum(getattr(c.shares, target) for c in result.changes) == getattr(result.total, target)
    width = len(result.total.stages)
    for s in range(width):
        assert sum(c.shares.stages[s] for c in result.changes) == result.total.stages[s]
    a = {st.pp_rank: st.bytes for st in result.a.stages}
    b = {st.pp_rank: st.bytes for st in result.b.stages}
    assert result.total.peak == max(b.values()) - max(a.values())
    assert result.total.first == b[0] - a[0]
    assert [b.get(s, 0) - a.get(s, 0) for s in range(width)] == result.total.stages


@pytest.fixture
def m1_yaml(tmp_path):
    return bridge_yaml(tmp_path / "m1.yaml", pr3107_case("llama3-70b-sft-m1-baseline"))


# --------------------------------------------------------------------------- configs


def test_pr3107_recompute_arms_attribution_adds_up(tmp_path, m1_yaml, capsys):
    m4 = bridge_yaml(tmp_path / "m4.yaml", pr3107_case("llama3-70b-sft-m4-recompute-core-attn-layernorm"))
    code, out, err = run_cli(m1_yaml, m4, "--world-size", 32, "--gpu", "H100", "--format", "json", capsys=capsys)
    assert code == 0, err
    doc = json.loads(out)
    schema_check(doc)
    assert doc["kind"] == "configs"
    assert [c["fields"] for c in doc["changes"]] == [["recompute_modules"]]
    change = doc["changes"][0]
    assert change["a"] == {"recompute_modules": ["core_attn"]}
    assert change["b"] == {"recompute_modules": ["core_attn", "layernorm"]}
    assert change["shares"] == doc["total"]
    m2 = bridge_yaml(tmp_path / "m2.yaml", pr3107_case("llama3-70b-sft-m2-recompute-mlp"))
    code, out, _ = run_cli(m1_yaml, m2, "--world-size", 32, "--format", "json", capsys=capsys)
    doc = json.loads(out)
    assert [c["fields"] for c in doc["changes"]] == [["recompute_modules"]]
    # The arms capture the MLP in CUDA graphs (cuda_graph_scope [mlp]), whose saved activations sit in the graph
    # pool: recomputing the MLP instead of core attention never adds to the allocated peak and shrinks what the
    # process holds (measured 58.8 -> 55.6 GB).
    assert doc["total"]["first"] <= 0
    code, out, _ = run_cli(m1_yaml, m2, "--world-size", 32, "--metric", "with-overheads", "--format", "json",
                           capsys=capsys)
    assert json.loads(out)["total"]["first"] < 0


def test_pr3107_pp8_and_tp8_arms_name_every_changed_key(tmp_path, m1_yaml, kb):
    from memtune.inputs.config import read_config

    a = read_config(m1_yaml, kb=kb)
    a.world_size = 32
    for case, extra, expected in (
        ("llama3-70b-sft-m5-pp8", {"seq_length": 8192}, ["pipeline_model_parallel_size", "seq_length"]),
        ("llama3-70b-sft-m6-tp8", {}, ["tensor_model_parallel_size"]),
    ):
        b = read_config(bridge_yaml(tmp_path / f"{case}.yaml", {**pr3107_case(case), **extra}), kb=kb)
        b.world_size = 32
        result = compare_configs(a, b, kb)
        names = [f for c in result.changes for f in c.fields]
        assert names == changed_fields(a, b) == expected
        assert_telescopes(result)
        by_name = compare_configs(a, b, kb, order="name")
        assert [f for c in by_name.changes for f in c.fields] == sorted(names)
        assert_telescopes(by_name)
        assert by_name.total == result.total  # the order moves the shares, never the total
    assert len(result.b.stages) == len(result.a.stages) == 4


def test_pp_and_seq_length_changes_with_set(m1_yaml, capsys):
    code, out, err = run_cli(m1_yaml, "--set", "model.pipeline_model_parallel_size=2", "--set", "seq_length=8192",
                             "--world-size", 32, "--format", "json", capsys=capsys)
    assert code == 0, err
    doc = json.loads(out)
    schema_check(doc)
    steps = {c["fields"][0]: c for c in doc["changes"]}
    assert list(steps) == ["pipeline_model_parallel_size", "seq_length"]
    assert (steps["pipeline_model_parallel_size"]["a"], steps["pipeline_model_parallel_size"]["b"]) == (
        {"pipeline_model_parallel_size": 4}, {"pipeline_model_parallel_size": 2})
    assert steps["seq_length"]["given"] == {"seq_length": "seq_length=8192"}
    assert steps["pipeline_model_parallel_size"]["given"] == {
        "pipeline_model_parallel_size": "model.pipeline_model_parallel_size=2"}
    for target in ("peak", "first", "last"):
        assert sum(c["shares"][target] for c in doc["changes"]) == doc["total"][target]
        assert all(c["shares"]["first"] > 0 for c in doc["changes"])  # halving PP and doubling seq both add
    assert doc["total"]["stages"][2:] == [-s["bytes"] for s in doc["a"]["stages"][2:]]  # stages 2, 3 go away


def test_text_output_has_bars_and_names_the_order(m1_yaml, capsys):
    code, out, _ = run_cli(m1_yaml, "--set", "model.pipeline_model_parallel_size=2", "--set", "model.seq_length=8192",
                           "--world-size", 32, capsys=capsys)
    assert code == 0
    assert "TrainingConfig field order" in out and "B - A" in out
    assert "pipeline_model_parallel_size  4 -> 2" in out and "seq_length" in out and "4096 -> 8192" in out
    assert out.count("█") > 40 and "(no such stage)" in out
    code, zh, _ = run_cli(m1_yaml, "--set", "model.seq_length=8192", "--world-size", 32, "--lang", "zh",
                          capsys=capsys)
    assert code == 0 and "各 stage 总量" in zh


def test_a_setting_invalid_alone_is_grouped_with_the_next(m1_yaml, kb):
    from memtune.inputs.config import read_config

    a = read_config(m1_yaml, kb=kb)
    a.data_parallel_size = 2
    b = read_config(m1_yaml, ["model.pipeline_model_parallel_size=5", "model.virtual_pipeline_model_parallel_size=4"],
                    kb=kb)
    b.data_parallel_size = 2
    result = compare_configs(a, b, kb)  # PP 5 with VPP 5 does not split 80 layers; PP 5 with VPP 4 does
    assert [c.fields for c in result.changes] == [["pipeline_model_parallel_size",
                                                    "virtual_pipeline_model_parallel_size"]]
    assert result.changes[0].grouped_because
    assert_telescopes(result)


def test_identical_configs_have_no_changes(m1_yaml, kb):
    from memtune.inputs.config import read_config

    a = read_config(m1_yaml, kb=kb)
    a.world_size = 32
    result = compare_configs(a, a, kb)
    assert result.changes == [] and result.total.peak == 0 and set(result.total.stages) == {0}


# --------------------------------------------------------------------------- logs

REPORT = ("[Rank {rank}] (after {it} iterations) memory (MB) | allocated: {alloc:.2f} | max allocated: {peak:.2f} | "
          "reserved: {res:.1f} | max reserved: {res:.1f}")


def _oom_line() -> str:
    """The real PyTorch >= 2.2 allocator message of the bundled Llama3-70B example log."""
    text = (EXAMPLES / "llama3-70b-fragmentation.log").read_text(encoding="utf-8")
    return next(line for line in text.splitlines() if "OutOfMemoryError: CUDA out of memory" in line)


def write_log(path: Path, extra_mib: float, oom: bool) -> Path:
    lines = ["training ..."]
    for it in range(1, 6):
        for rank in (0, 1):
            grow = extra_mib if it >= 3 and rank == 1 else 0.0
            lines.append(REPORT.format(rank=rank, it=it, alloc=30000.0 + 10 * it + grow, peak=50000.0 + grow,
                                       res=52000.0 + grow))
    if oom:
        lines.append(_oom_line())
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_logs_diverge_at_the_first_step_past_the_tolerance(tmp_path, kb):
    a, b = write_log(tmp_path / "good.log", 0, False), write_log(tmp_path / "bad.log", 3000, True)
    runs = [(parse_log(p, kb), read_memory_steps(p, kb)) for p in (a, b)]
    result = compare_logs(*runs, parse_tolerance("2%"))
    assert len(result.points) == 10 and result.a.reports == result.b.reports == 10
    d = result.divergence
    assert (d.iteration, d.rank, d.metric) == (3, 1, "peak_allocated")
    assert d.b_bytes - d.a_bytes == pytest.approx(3000 * 2**20)
    assert result.a.oom is None and result.b.oom.numbers["requested_bytes"] == pytest.approx(224 * 2**20)
    assert result.ranks[1].b["peak_allocated"] == pytest.approx(53000 * 2**20)
    loose = compare_logs(*runs, parse_tolerance("10%"))
    assert loose.divergence is None
    assert compare_logs(*runs, parse_tolerance("1GiB")).divergence.iteration == 3


def test_every_report_is_kept_and_the_latest_matches_parse_log(kb):
    for path in (LOGS / "memory-report-megatron.log", EXAMPLES / "llama3-70b-fragmentation.log"):
        steps = read_memory_steps(path, kb)
        latest = sorted({r.rank: r for r in steps}.values(), key=lambda r: (r.rank is None, r.rank or 0))
        assert latest == parse_log(path, kb).memory_reports
    glued = read_memory_steps(LOGS / "memory-report-megatron.log", kb)
    assert [(r.rank, r.iteration) for r in glued] == [(4, 1), (2, 1), (6, 1), (None, 10)]


def test_two_example_logs_side_by_side(capsys):
    code, out, err = run_cli(EXAMPLES / "llama3-70b-fragmentation.log", EXAMPLES / "host-oom-dataloader.log",
                             "--format", "json", capsys=capsys)
    assert code == 0, err
    doc = json.loads(out)
    schema_check(doc)
    assert doc["kind"] == "logs" and [r["rank"] for r in doc["ranks"]] == [0]
    assert doc["only_in_a"] == [8, 16, 24]
    assert doc["ranks"][0]["a"]["peak_allocated"] == pytest.approx(58.803e9)
    assert doc["a"]["oom"]["kind"] == "allocator" and doc["b"]["oom"]["kind"] == "host"
    assert "CUDA out of memory" in doc["a"]["oom"]["first_error"]
    code, text, _ = run_cli(EXAMPLES / "llama3-70b-fragmentation.log", EXAMPLES / "host-oom-dataloader.log",
                            capsys=capsys)
    assert "requested" in text and "224.0 MiB" in text and "DataLoader worker" in text


# --------------------------------------------------------------------------- snapshots


@pytest.fixture
def real_snapshots(shared_dir):
    folder = shared_dir / "fixtures" / "snapshots"
    return folder / FORWARD, folder / FULLSTEP


def test_real_snapshots_peaks_divergence_and_sites(real_snapshots):
    fwd, full = (load_trace(p) for p in real_snapshots)
    result = compare_snapshots(fwd, full, parse_tolerance("2%"), at=parse_at("step:1"))
    for side, path in zip((result.a, result.b), real_snapshots, strict=True):
        assert side.peak.live_bytes == analyze_snapshot(path)["timeline_peak_bytes"]
    assert result.peak_gap_bytes == result.b.peak.live_bytes - result.a.peak.live_bytes > 30 * GIB
    assert sum(s.delta_bytes for s in result.peak_sites) == result.peak_gap_bytes
    assert "optimizers.py:step:82" in [s.site for s in result.peak_sites]  # Adam state: only the full step has it
    d = result.first_different_event
    assert d.a is None and d.b.action == "alloc" and d.position > 3000  # the forward pass is the full step's prefix
    assert result.at.a is None and result.at.a_note == "no-step"
    assert result.at.b.live_bytes == result.b.end_allocated_bytes  # step 1 ends with the snapshot


def test_site_groups_add_up_to_live_memory(real_snapshots):
    trace = load_trace(real_snapshots[1])
    for index in (0, len(trace.events) // 2, len(trace.events) - 1):
        live = trace.start_bytes + sum(e.size if e.action == "alloc" else -e.size for e in trace.events[: index + 1]
                                       if e.action in ("alloc", "free_completed"))
        assert sum(live_sites(trace, index).values()) == live
    gaps = site_gaps({"x": 5, "y": 1, "z": 2}, {"x": 1, "y": 9}, top=1)
    assert [g.site for g in gaps] == ["y", "<other-sites>"] and sum(g.delta_bytes for g in gaps) == 10 - 8


def test_at_time_replays_both_and_json_validates(real_snapshots, capsys):
    code, out, err = run_cli(*real_snapshots, "--at", "200000", "--top", 3, "--format", "json", capsys=capsys)
    assert code == 0, err
    doc = json.loads(out)
    schema_check(doc)
    assert doc["at"]["a"]["offset_us"] <= 200000 and doc["at"]["b"]["offset_us"] <= 200000
    assert len(doc["at"]["sites"]) <= 4
    code, text, _ = run_cli(*real_snapshots, "--at", "step:1", capsys=capsys)
    assert code == 0 and "timeline peak" in text and "optimizers.py:step:82" in text


def test_synthetic_snapshots(snapshot_files, capsys):
    same = compare_snapshots(*(load_trace(snapshot_files["dict_oom.pickle"]) for _ in range(2)), parse_tolerance("0"))
    assert same.first_different_event is None and same.first_gap_over_tolerance is None and same.peak_gap_bytes == 0
    assert same.a.oom_kind is not None
    legacy = compare_snapshots(load_trace(snapshot_files["list_legacy.pickle"]),
                               load_trace(snapshot_files["dict_oom.pickle"]), parse_tolerance("2%"), at=parse_at("5"))
    assert legacy.a.peak is None and legacy.peak_gap_bytes is None and legacy.at.a_note == "no-trace"
    code, out, _ = run_cli(snapshot_files["list_legacy.pickle"], snapshot_files["dict_oom.pickle"], "--format", "json",
                           capsys=capsys)
    assert code == 0
    schema_check(json.loads(out))


# --------------------------------------------------------------------------- detection and errors


@pytest.mark.parametrize("name, head, kind", [
    ("run.yaml", b"model:\n", "config"),
    ("launch.sh", b"torchrun ...", "config"),
    ("train.log", b"", "log"),
    ("x.pickle", b"", "snapshot"),
    ("dump", b"\x80\x04\x95", "snapshot"),
    ("stdout.txt", b"[Rank 0] (after 1 iterations) memory (MB) | allocated: 1.0", "log"),
    ("args.txt", b"--num-layers 80 --hidden-size 8192", "config"),
])
def test_detect_kind(name, head, kind):
    assert detect_kind(name, head, ("memory (MB)", "out of memory.")) == kind


def test_cli_errors_are_one_line_exit_2(tmp_path, m1_yaml, capsys):
    log = EXAMPLES / "llama3-70b-fragmentation.log"
    cases = [
        ((m1_yaml, log), "is a config but"),
        ((m1_yaml, tmp_path / "missing.yaml"), "no such file"),
        ((log,), "give two files"),
        ((log, log, "--set", "seq_length=1"), "--set applies to configs"),
        ((m1_yaml, m1_yaml, "--at", "step:1"), "--at applies to snapshots"),
        ((log, log, "--tolerance", "lots"), "--tolerance"),
    ]
    for args, words in cases:
        code, out, err = run_cli(*args, capsys=capsys)
        assert code == 2, (args, err)
        assert out == "" and err.count("\n") == 1 and words in err, err
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(b"\x80\x04not a pickle")
    code, _, err = run_cli(bad, bad, capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "snapshot" in err


def test_parse_at_and_tolerance():
    assert parse_at("step:3").step == 3 and parse_at("1500us").offset_us == 1500
    with pytest.raises(UserError):
        parse_at("soon")
    assert parse_tolerance("5%").exceeded(100, 106) and not parse_tolerance("5%").exceeded(100, 104)
    assert parse_tolerance("1KiB").exceeded(0, 1025)


def test_launcher_end_to_end():
    proc = subprocess.run([sys.executable, str(SKILL / "scripts" / "memtune.py"), "compare",
                           str(EXAMPLES / "llama3-70b-fragmentation.log"), str(SKILL / "knowledge" / "ui.yaml")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
