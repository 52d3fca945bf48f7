"""The accuracy-benchmark data (benchmarks/measured/*.yaml) and the runner's bookkeeping.

The data are transcribed measurements; these tests check that every file validates, ids are unique, every case
names its source, units convert to the right byte counts (hand-checked against the sources), the batch
arithmetic is consistent, and the runner's error / MAPE / gate logic is right with a stand-in estimator.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from conftest import read_yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "measured"


def _load_runner():
    spec = importlib.util.spec_from_file_location("accuracy_runner", ROOT / "benchmarks" / "accuracy.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while the class is built
    spec.loader.exec_module(module)
    return module


acc = _load_runner()


@pytest.fixture(scope="module")
def cases():
    return acc.load_cases()


@pytest.fixture(scope="module")
def by_id(cases):
    return {c.id: c for c in cases}


def test_every_file_validates_against_the_schema():
    import jsonschema

    schema = json.loads((DATA / "schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    files = sorted(DATA.glob("*.yaml"))
    assert {p.stem for p in files} >= {"llama3-70b-pr3107", "lora-regather", "mlm-ci", "open-sci-ref"}
    for path in files:
        doc = read_yaml(path)
        errors = [e.message for e in validator.iter_errors(doc)]
        assert not errors, f"{path.name}: {errors[:3]}"


def test_family_sizes(cases):
    # peers.md §2.1 M1-M7 and M8, the three re-gather pairs of PR #4581, the 46 public Megatron-LM CI records,
    # and the large runs of issue 9 (Bridge skills' tables, ms-swift examples, a Bridge functional test).
    counts = {}
    for c in cases:
        counts[c.family] = counts.get(c.family, 0) + 1
    assert counts == {"llama3-70b-pr3107": 7, "open-sci-ref": 1, "lora-regather": 6, "mlm-ci": 46,
                      "moonlight-recompute": 6, "nemotron3-nano-recompute": 4, "qwen3-30b-a3b-ep16": 2,
                      "ms-swift-megatron": 4, "bridge-dsv3-fsdp-gb200": 1}


def test_large_runs_come_from_enough_sources(cases):
    """Issue 9: at least 15 measured peaks of 10 GiB or more, from at least 5 documents, are scored."""
    large = [c for c in cases if acc.size_class(c.measured_bytes) == "≥ 10 GiB" and not c.stretch]
    assert len(large) >= 15
    assert len({acc._source_key(c) for c in large}) >= 5


def test_ids_are_unique(cases):
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids))


def test_duplicate_id_across_files_is_rejected(tmp_path):
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text((DATA / "open-sci-ref.yaml").read_text())
    with pytest.raises(acc.UserError, match=r"b\.yaml:\d+: duplicate case id 'open-sci-ref-1.7b-leonardo'"):
        acc.load_cases(tmp_path)


def test_every_case_has_a_source(cases):
    for c in cases:
        assert len(c.source["citation"]) >= 10, c.id
        assert c.source.get("url") or c.source.get("shared_path"), c.id
        assert c.hardware["gpu"], c.id


def test_unknown_layout_key_is_a_one_line_error_with_file_and_line(tmp_path):
    text = (DATA / "open-sci-ref.yaml").read_text().replace("    padded_vocab_size: 50304", "    padded_vocab: 50304")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(acc.UserError) as info:
        acc.load_file(bad)
    message = str(info.value)
    line = text.splitlines().index("- id: open-sci-ref-1.7b-leonardo") + 1
    assert message.startswith(f"{bad}:{line}: ") and "padded_vocab" in message and "\n" not in message


def test_schema_error_names_the_key(tmp_path):
    text = (DATA / "open-sci-ref.yaml").read_text().replace("    unit: MiB\n", "    unit: megabytes\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(acc.UserError, match=r"measured\.unit"):
        acc.load_file(bad)


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [(1, "GiB", 2**30), (1, "GB", 10**9), (1.5, "MiB", 1_572_864), (2, "KB", 2000), (7, "B", 7)],
)
def test_unit_table(value, unit, expected):
    assert acc.measured_bytes(value, unit) == expected


@pytest.mark.parametrize(
    ("case_id", "expected_bytes"),
    [
        # Megatron-LM prints "max allocated: 50277.15625" under "memory (MB)" but divides by 1024*1024.
        ("open-sci-ref-1.7b-leonardo", 52_719_419_392),
        # Bridge skills: "58.8" GB, decimal (report_memory divides by 1e9).
        ("llama3-70b-sft-m1-baseline", 58_800_000_000),
        ("lora-regather-qwen3-8b-tp2-baseline", 47_545_000_000),
        # mlm-ci records are already bytes (allocated_bytes.all.peak).
        ("mlm-ci-gpt3_7b_tp1_pp4_memory_speed", 60_720_852_992),
    ],
)
def test_hand_checked_conversions(by_id, case_id, expected_bytes):
    assert by_id[case_id].measured_bytes == expected_bytes


def test_megatron_mib_is_not_read_as_decimal(by_id):
    case = by_id["open-sci-ref-1.7b-leonardo"]
    assert case.measured["unit"] == "MiB" and case.measured["unit_as_printed"] == "MB"
    assert abs(case.measured_bytes / 2**30 - 49.1) < 0.01  # peers.md: "49.1 GiB max alloc"


def _args_layout(case):
    """TP/PP/CP and batch sizes straight from the raw Megatron args (no reader needed)."""
    a = case.megatron_args
    return {
        "tensor_model_parallel_size": a.get("tensor-model-parallel-size", 1),
        "pipeline_model_parallel_size": a.get("pipeline-model-parallel-size", 1),
        "context_parallel_size": a.get("context-parallel-size", 1),
        "micro_batch_size": a["micro-batch-size"],
        "global_batch_size": a["global-batch-size"],
    }


def test_batch_arithmetic_is_consistent(cases):
    for c in cases:
        lay = _args_layout(c) if c.megatron_args is not None else c.layout
        model = lay["tensor_model_parallel_size"] * lay["pipeline_model_parallel_size"]
        model *= lay.get("context_parallel_size") or 1
        assert c.world_size == c.data_parallel_size * model, c.id
        assert lay["global_batch_size"] == c.num_microbatches * lay["micro_batch_size"] * c.data_parallel_size, c.id
        if c.hardware.get("count"):
            assert c.hardware["count"] == c.world_size, c.id


def test_mlm_ci_is_measured_on_the_last_stage(cases):
    mlm = [c for c in cases if c.family == "mlm-ci"]
    assert {c.stage for c in mlm} == {"last"}
    assert {c.measured["which"] for c in mlm} == {"max_memory_allocated"}
    assert sum(c.stretch for c in mlm) == 2  # the hybrid (Mamba) records


def test_mlm_ci_transcription_matches_the_fixture(cases, shared_dir):
    records = {r["name"]: r for r in json.loads((shared_dir / "fixtures/mlm-ci/public.json").read_text())}
    mlm = {c.id.removeprefix("mlm-ci-"): c for c in cases if c.family == "mlm-ci"}
    assert set(mlm) == set(records)
    for name, c in mlm.items():
        rec = records[name]
        assert c.megatron_args == rec["args"], name
        assert c.measured_bytes == rec["benchmark_peak_bytes"], name
        assert c.world_size == rec["world_size"], name
        assert c.data_parallel_size == rec["flags"]["parallel_effective"]["dp"], name


def test_stage_resolution():
    cfg = acc.TrainingConfig(pipeline_model_parallel_size=4)
    assert acc.resolve_stage("last", cfg) == 3
    assert acc.resolve_stage(0, cfg) == 0
    assert acc.resolve_stage("max", cfg) is None
    with pytest.raises(acc.UserError):
        acc.resolve_stage(4, cfg)


def test_layout_case_converts_with_overrides(by_id):
    cfg = acc.to_training_config(by_id["llama3-70b-sft-m5-pp8"])
    assert cfg.pipeline_model_parallel_size == 8 and cfg.tensor_model_parallel_size == 4
    assert cfg.recompute_modules == ["core_attn"] and cfg.data_parallel_size == 1 and cfg.world_size == 32
    regather = acc.to_training_config(by_id["lora-regather-qwen3-8b-tp2-regather"])
    assert regather.sequence_parallel_input_regather is True and regather.peft == "lora"


def test_megatron_case_uses_the_reader_and_checks_dp(by_id):
    case = by_id["mlm-ci-gpt3_7b_tp1_pp4_memory_speed"]

    def reader(args):
        assert args is case.megatron_args
        return acc.TrainingConfig(provided=True, pipeline_model_parallel_size=4, data_parallel_size=2)

    assert acc.to_training_config(case, reader).world_size == 8

    def wrong_reader(args):
        return acc.TrainingConfig(provided=True, data_parallel_size=4)

    with pytest.raises(acc.UserError, match="data_parallel_size is 2 but the layout gives 4"):
        acc.to_training_config(case, wrong_reader)


def test_bridge_applicability(by_id):
    lora = acc.to_training_config(by_id["lora-regather-qwen3-8b-tp2-baseline"])
    applies, why_not, _ = acc.bridge_applicability(lora)
    assert not applies and "lora" in why_not[0]
    llama = acc.to_training_config(by_id["llama3-70b-sft-m1-baseline"])
    applies, why_not, caveats = acc.bridge_applicability(llama)
    assert applies and not why_not
    assert any("FP8" in c for c in caveats) and any("bf16 main grads" in c for c in caveats)


class FakeEstimate:
    """Stand-in for memtune.estimator.Estimate: stage peaks are a fixed multiple of the measurement."""

    def __init__(self, stages, bridge_total=None):
        self._d = {
            "stages": [{"pp_rank": i, "allocated_peak_bytes": b} for i, b in enumerate(stages)],
            "peak_bytes": max(stages),
        }
        if bridge_total is not None:
            self._d["bridge"] = {"total_bytes": bridge_total}

    def to_dict(self):
        return self._d


def _fake_estimator(factor, bridge_factor):
    def estimate(cfg, *, mode, gpu=None, num_microbatches=None, kb=None):
        pp = cfg.pipeline_model_parallel_size or 1
        stages = [1e9] * pp
        stages[-1] = measured[0] * factor  # the last stage carries the measured peak
        return FakeEstimate(stages, measured[0] * bridge_factor if mode == "bridge" else None)

    measured = [0]
    return estimate, measured


def test_errors_mape_and_gate_with_a_stand_in_estimator(by_id):
    case = by_id["mlm-ci-gpt3_7b_tp1_pp4_memory_speed"]
    estimate, measured = _fake_estimator(1.10, 0.80)
    measured[0] = case.measured_bytes

    def reader(args):
        return acc.TrainingConfig(provided=True, pipeline_model_parallel_size=4, num_layers=32)

    report = acc.run([case], estimate, reader)
    row = report["rows"][0]
    assert row["status"] == "ok" and row["stage"] == 3
    assert row["ours_err_pct"] == pytest.approx(10.0)
    assert row["bridge_applies"] and row["bridge_err_pct"] == pytest.approx(-20.0)
    overall = report["summary"]["overall"]
    assert overall["ours_mape"] == pytest.approx(10.0) and overall["bridge_mape"] == pytest.approx(20.0)
    assert acc.gate(report, 12.0) == []
    assert acc.gate(report, 8.0) == ["overall MAPE 10.00 % exceeds 8 %"]
    assert "| mlm-ci-gpt3_7b_tp1_pp4_memory_speed | 3 |" in acc.render_markdown(report)


def test_a_failing_case_is_a_status_and_fails_the_gate(by_id):
    case = by_id["llama3-70b-sft-m1-baseline"]

    def broken(cfg, **kwargs):
        raise acc.UserError("no preset for this model")

    report = acc.run([case], broken)
    assert report["rows"][0]["status"] == "UserError: no preset for this model"
    assert report["summary"]["overall"]["failed"] == 1
    assert acc.gate(report, None) == ["1 case(s) could not be estimated"]


def test_runner_without_estimator_fails_in_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "memtune.estimator", None)  # import now raises ImportError
    assert acc.main(["--family", "open-sci-ref"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("accuracy: memtune.estimator.estimate is not available yet") and err.count("\n") == 1


def test_data_only_needs_no_estimator(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "memtune.estimator", None)
    assert acc.main(["--data-only", "--format", "json", "--family", "lora-regather"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [c["measured_bytes"] for c in listed][:2] == [47_545_000_000, 42_814_000_000]


def test_every_case_converts_when_the_reader_exists(cases, kb):
    reader_mod = pytest.importorskip("memtune.inputs.megatron_args")
    for c in cases:
        cfg = acc.to_training_config(c, functools.partial(reader_mod.read_megatron_args, kb=kb))
        assert cfg.pipeline_model_parallel_size and cfg.micro_batch_size and cfg.seq_length, c.id
        if not c.stretch:  # the architecture is stated, or named by a knowledge/models.yaml preset
            assert cfg.model_name or (cfg.num_layers and cfg.hidden_size and cfg.num_attention_heads), c.id


def test_every_case_is_estimated_when_the_estimator_exists(cases, kb):
    """A smoke run of the real benchmark: no case may crash or be refused (accuracy itself is not asserted)."""
    estimator = pytest.importorskip("memtune.estimator")
    reader = pytest.importorskip("memtune.inputs.megatron_args").read_megatron_args
    report = acc.run(cases, functools.partial(estimator.estimate, kb=kb), functools.partial(reader, kb=kb))
    failed = [(r["id"], r["status"]) for r in report["rows"] if r["status"] != "ok" and not r["stretch"]]
    assert not failed
    for row in report["rows"]:
        if row["status"] == "ok":
            assert row["ours_bytes"] > 0 and (row["bridge_bytes"] is not None) == bool(row["bridge_applies"])


def test_every_fitted_constant_names_families_that_exist(cases):
    """A constant fitted on a family says so, and that family is in benchmarks/measured (reported as not held out)."""
    families = {c.family for c in cases}
    fitted = acc.fitted_constants()
    assert fitted and set(fitted) <= families
    assert "moe-token-imbalance" in fitted["mlm-ci"]


def test_the_plan_headroom_is_the_estimators_measured_error(kb, cases):
    """knowledge/estimator.yaml estimate-error-band is the mean absolute error of the estimator on the scored runs of
    10 GiB or more, per class of model, as this benchmark measures it today: a change to the estimator or the data
    that moves it must move the headroom plans keep free."""
    report = acc.run(cases, acc._estimator())
    bands = report["summary"]["error_bands"]
    stored = kb.get("estimator", "estimate-error-band")["value"]
    assert set(bands) == set(stored) == {"dense", "moe", "lora"}
    for cls, band in bands.items():
        assert band["cases"] >= 2 and stored[cls] == pytest.approx(band["mape"] / 100, abs=0.0005), cls


def test_a_plan_keeps_free_what_its_class_is_estimated_within(kb):
    """Without --headroom a plan keeps the band of its model's class free, and says so; with it, the user's."""
    from memtune.estimator.models import preset
    from memtune.inputs.gpu import lookup_gpu
    from memtune.planner.search import PlanRequest, plan

    stored = kb.get("estimator", "estimate-error-band")["value"]
    gpu = lookup_gpu("H100", kb)
    for model, task, cls in (("llama3-8b", "pretrain", "dense"), ("qwen3-30b-a3b", "pretrain", "moe"),
                             ("llama3-8b", "lora", "lora")):
        request = PlanRequest(base=preset(model, kb), gpu=gpu, gpus=8, seq_length=4096, global_batch_size=64,
                              task=task, top=1)
        result = plan(request, kb)
        assert (result.headroom, result.headroom_class) == (stored[cls], cls)
        assert result.budget_bytes == pytest.approx(result.capacity_bytes * (1 - stored[cls]))
    mine = plan(PlanRequest(base=preset("llama3-8b", kb), gpu=gpu, gpus=8, seq_length=4096, global_batch_size=64,
                            headroom=0.2, top=1), kb)
    assert (mine.headroom, mine.headroom_class) == (0.2, None)
