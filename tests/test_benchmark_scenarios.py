"""The committed benchmark scenarios: valid against the KB's ids, broad enough, and exported to evals.json."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
sys.path.insert(0, str(ROOT))

from benchmarks import export_evals  # noqa: E402
from benchmarks.producers import agent_prompt, diagnose_argv  # noqa: E402
from benchmarks.scenario import KnownIds, known_ids, load_scenarios, validate  # noqa: E402

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def ids() -> KnownIds:
    return known_ids()


@pytest.fixture(scope="module")
def scenarios(ids):
    return load_scenarios(None, ids)


def _doc(**expect) -> dict:
    return {
        "id": "x",
        "category": "c",
        "language": "en",
        "question": "Why does it OOM?",
        "source": "a test",
        "ground_truth": "an expert answer of some length",
        "expect": expect,
    }


def test_every_scenario_validates_and_is_named_after_its_id(scenarios):
    assert len(scenarios) >= 40
    assert all(s.path.stem == s.id for s in scenarios)


def test_unknown_ids_are_schema_errors(ids):
    assert validate(_doc(first_fix=["expandable-segments"]), ids, "t.yaml") == []
    problems = validate(_doc(first_fix=["make-it-fit"], cause=["gremlins"]), ids, "t.yaml")
    assert any("expect/first_fix/0" in p and "make-it-fit" in p for p in problems)
    assert any("expect/cause/0" in p and "gremlins" in p for p in problems)
    assert validate({**_doc(cause=["fragmentation"]), "expected": {}}, ids, "t.yaml")  # unknown key


def test_id_enum_comes_from_the_knowledge_base(tmp_path, ids):
    kb = tmp_path / "kb"
    kb.mkdir()
    index = {"kb_version": "t", "tables": ["fixes"], "required_ids": {"causes": ["fragmentation"], "fixes": []}}
    (kb / "index.yaml").write_text(yaml.safe_dump(index))
    (kb / "fixes.yaml").write_text(yaml.safe_dump({"schema_version": 1, "fixes": [{"id": "brand-new-fix"}]}))
    local = known_ids(kb)
    assert local.fixes == {"brand-new-fix"} and local.causes == {"fragmentation"}
    assert validate(_doc(first_fix=["brand-new-fix"]), local, "t.yaml") == []
    assert validate(_doc(first_fix=["brand-new-fix"]), ids, "t.yaml")  # the real KB has no such fix


def test_every_cause_id_is_the_expected_cause_somewhere(scenarios):
    required = yaml.safe_load((SKILL / "knowledge" / "index.yaml").read_text())["required_ids"]["causes"]
    covered = {c for s in scenarios for c in s.expect.get("cause", [])}
    assert set(required) <= covered, sorted(set(required) - covered)


def test_languages_are_declared_truthfully_and_chinese_is_well_represented(scenarios):
    for s in scenarios:
        assert bool(CJK.search(s.question)) == (s.language == "zh"), s.id
    assert Counter(s.language for s in scenarios)["zh"] >= 10


def test_every_scenario_cites_a_public_source(scenarios):
    for s in scenarios:
        assert s.source.strip() and s.url and s.url.startswith("https://"), s.id


def test_expectations_do_not_contradict_themselves(scenarios):
    for s in scenarios:
        e = s.expect
        never = set(e.get("never_recommend", []))
        assert not never & set(e.get("first_fix", [])), s.id
        assert not never & set(e.get("fixes_include", [])), s.id
        assert not set(e.get("avoid_include", [])) & set(e.get("first_fix", [])), s.id


def test_logs_cover_several_pytorch_message_formats_and_other_failure_texts(scenarios):
    logs = "\n".join(s.inputs.get("log", "") for s in scenarios)
    formats = {
        "<=2.0 (total capacity; already allocated)": r"\(GPU \d+; [\d.]+ GiB total capacity; [\d.]+ GiB already",
        "2.1 (capacty typo, max_split_size_mb hint)": r"has a total capacty of .*max_split_size_mb",
        "2.2-2.5 (expandable_segments hint)": r"has a total capacity of (?:(?!private pools).)*expandable_segments",
        "2.6+ (private pools)": r"allocated in private pools \(e\.g\., CUDA Graphs\)",
    }
    for name, pattern in formats.items():
        assert re.search(pattern, logs), name
    for other in (
        "NCCL WARN Cuda failure",
        "Triton Error [CUDA]: out of memory",
        "Signal 9 (SIGKILL)",
        "oom_kill event",
        "OutOfResources: out of resource: shared memory",
        "Signal 7 (SIGBUS)",
    ):
        assert other in logs, other


def test_configs_and_overrides_are_used(scenarios):
    """The development set exercises the config readers; later sets are real reports as their authors gave them,
    most with no config at all, so they do not count here."""
    dev = [s for s in scenarios if s.set == "dev"]
    with_config = [s for s in dev if s.inputs.get("config")]
    assert len(with_config) >= len(dev) // 2
    assert any(s.inputs.get("overrides") for s in scenarios)
    assert any(s.inputs.get("env") for s in scenarios)


def _model(s) -> dict:
    return (s.inputs.get("config") or {}).get("model") or {}


def test_required_negative_cases_exist(scenarios):
    crash = [
        s
        for s in scenarios
        if s.expect.get("cause") == ["not-an-oom"] and "find-first-failing-rank" in s.expect.get("first_fix", [])
    ]
    assert crash, "a non-OOM crash whose first step is finding the first failing rank"
    offload = [
        s
        for s in scenarios
        if "activation-cpu-offload" in s.expect.get("never_recommend", [])
        and (_model(s).get("pipeline_model_parallel_size") or 1) > 1
    ]
    assert offload, "a PP>1 case where activation CPU offload must not be recommended"
    lora = [
        s
        for s in scenarios
        if "lora-input-regather" in s.expect.get("never_recommend", [])
        and "peft" in s.inputs.get("config", {})
        and (not _model(s).get("sequence_parallel") or _model(s).get("tensor_model_parallel_size") == 1)
    ]
    assert lora, "LoRA without sequence parallel where input re-gather must not be recommended"


def test_diagnose_arguments_carry_every_input(tmp_path, scenarios):
    full = next(s for s in scenarios if s.inputs.get("overrides") and s.inputs.get("config"))
    argv = diagnose_argv(full, tmp_path, "json")
    assert argv[:3] == ["diagnose", "--format", "json"] and full.question in argv
    cfg = Path(argv[argv.index("--config") + 1])
    assert yaml.safe_load(cfg.read_text()) == full.inputs["config"]
    assert argv.count("--set") == len(full.inputs["overrides"])
    env = next(s for s in scenarios if s.inputs.get("env") and s.inputs.get("log"))
    argv = diagnose_argv(env, tmp_path, "markdown")
    assert Path(argv[argv.index("--log") + 1]).read_text() == env.inputs["log"]
    assert argv.count("--env") == len(env.inputs["env"]) and "--gpu" in argv


def test_agent_prompt_contains_question_and_inputs(scenarios):
    s = next(s for s in scenarios if s.inputs.get("log") and s.inputs.get("config"))
    prompt = agent_prompt(s)
    assert prompt.startswith(s.question.strip()) and s.inputs["log"].strip() in prompt
    assert yaml.safe_load(prompt.split("```yaml\n")[1].split("```")[0]) == s.inputs["config"]


def test_committed_evals_json_is_current_and_in_nvidia_format(scenarios):
    cases = export_evals.build(scenarios, export_evals.skill_name())
    committed = (ROOT / "evals" / "evals.json").read_text(encoding="utf-8")
    assert committed == export_evals.render(cases), "run: python3 benchmarks/export_evals.py"
    keys = {"id", "question", "expected_skill", "expected_script", "ground_truth", "expected_behavior"}
    data = json.loads(committed)
    assert all(set(c) == keys and c["expected_behavior"] for c in data)
    negatives = [c for c in data if c["expected_skill"] is None]
    assert len(negatives) >= 5 and all(c["expected_script"] is None for c in negatives)
    assert len(data) - len(negatives) == len(scenarios)


def test_a_directory_read_again_is_reread_only_where_a_file_changed(tmp_path, ids):
    """load_scenarios keeps what it read (the suite reads the whole set several times); an edited scenario is read
    again, never served stale."""
    source = sorted(Path(ROOT / "benchmarks" / "scenarios").glob("*.yaml"))[0]
    target = tmp_path / source.name
    target.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    first = load_scenarios(tmp_path, ids)
    assert load_scenarios(tmp_path, ids)[0] is first[0]  # unchanged: the same objects, not parsed again
    data = yaml.safe_load(target.read_text(encoding="utf-8"))
    data["question"] = data["question"] + " (edited)"
    target.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    assert load_scenarios(tmp_path, ids)[0].question.endswith("(edited)")
