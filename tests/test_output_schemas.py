"""Every command's ``--format json`` answer validates against its schema in knowledge/schema/.

Each command runs in-process through ``memtune.cli.main`` over several real inputs (bundled examples,
tests/fixtures, model presets); its stdout is validated with Draft 2020-12.  The last test lists the
registered subcommands, so a command that gains ``--format json`` cannot ship without a schema file.
"""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, SKILL

SCHEMA_DIR = SKILL / "knowledge" / "schema"
EXAMPLES = SKILL / "examples"
CONFIGS = ROOT / "tests" / "fixtures" / "configs"
# The command whose schema is named after what it prints rather than after the command.
SCHEMA_OF = {"diagnose": "diagnosis"}

LLAMA_70B = ["--model", "llama3-70b", "--world-size", "32", "--set", "seq_length=4096",
             "--set", "tensor_model_parallel_size=4", "--set", "pipeline_model_parallel_size=4",
             "--set", "virtual_pipeline_model_parallel_size=5", "--set", "sequence_parallel=true",
             "--global-batch-size", "32"]
QWEN_MOE = ["--model", "qwen3-30b-a3b", "--world-size", "16", "--set", "seq_length=4096",
            "--set", "expert_model_parallel_size=8", "--set", "pipeline_model_parallel_size=2"]
PLAN = ["--gpu", "H100", "--gpus", "32", "--seq-length", "4096", "--global-batch-size", "32", "--top", "3"]


def schema_path(command: str):
    return SCHEMA_DIR / f"{SCHEMA_OF.get(command, command)}.schema.json"


def validator(command: str):
    import jsonschema

    schema = json.loads(schema_path(command).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def run_json(command: str, args: list, capsys, codes=(0,)):
    from memtune.cli import main

    code = main([command, *map(str, args), "--format", "json"])
    out, err = capsys.readouterr()
    assert code in codes, err
    return json.loads(out)


def assert_valid(command: str, doc) -> None:
    errors = sorted(validator(command).iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                                 for e in errors[:10])


@pytest.mark.parametrize("args", [
    [*LLAMA_70B, "--gpu", "H100"],
    [*LLAMA_70B, "--gpu", "H100", "--mode", "bridge"],
    QWEN_MOE,
    [*QWEN_MOE, "--mode", "bridge"],
    ["--config", EXAMPLES / "llama3-70b-sft-config.yaml", "--gpu", "H200"],
    ["--config", EXAMPLES / "llama3-70b-sft-config.yaml", "--mode", "bridge"],
    ["--config", CONFIGS / "bridge_lora_sft_dump.yaml", "--gpu", "H100", "--env",
     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"],
    ["--config", CONFIGS / "launch_llama3_8b.sh", "--num-microbatches", "4"],
    ["--hf-config", CONFIGS / "hf_deepseek_v3_config.json", "--set", "seq_length=4096", "--world-size", "256",
     "--set", "expert_model_parallel_size=32", "--set", "recompute_granularity=full"],
    ["--hf-config", CONFIGS / "hf_deepseek_v3_config.json", "--set", "seq_length=4096", "--world-size", "256",
     "--mode", "bridge"],
    ["--hf-config", CONFIGS / "hf_qwen3_moe_vl_config.json", "--set", "seq_length=4096", "--world-size", "16"],
])
def test_estimate_json_follows_its_schema(args, capsys):
    doc = run_json("estimate", args, capsys)
    assert_valid("estimate", doc)
    assert doc["mode"] == ("bridge" if "bridge" in args else "ours")


def test_estimate_schema_tells_the_two_modes_apart(capsys):
    """A bridge answer is not an 'ours' one with the mode renamed: the closed variants reject the swap."""
    ours = run_json("estimate", LLAMA_70B, capsys)
    bridge = run_json("estimate", [*LLAMA_70B, "--mode", "bridge"], capsys)
    check = validator("estimate")
    assert not check.is_valid({**ours, "mode": "bridge"})
    assert not check.is_valid({**bridge, "mode": "ours"})
    assert not check.is_valid({**ours, "extra": 1})


@pytest.mark.parametrize("args", [
    ["--model", "llama3-70b", *PLAN],
    ["--model", "qwen3-30b-a3b", *PLAN, "--lang", "zh"],
    ["--model", "llama3-70b", *PLAN, "--task", "lora", "--no-expandable-segments"],
    ["--config", EXAMPLES / "llama3-70b-sft-config.yaml", "--gpu", "H100", "--gpus", "32", "--top", "3"],
    ["--config", CONFIGS / "bridge_lora_sft_dump.yaml", "--gpu", "H100", "--gpus", "8", "--top", "2"],
    ["--model", "llama3-8b", "--gpu", "H100", "--gpus", "2", "--seq-length", "4096", "--global-batch-size", "8",
     "--all"],
    ["--model", "llama3-405b", "--gpu", "H100", "--gpus", "8", "--seq-length", "8192", "--global-batch-size",
     "8", "--top", "2"],
])
def test_plan_json_follows_its_schema(args, capsys):
    doc = run_json("plan", args, capsys)
    assert_valid("plan", doc)
    if "--all" in args:  # every fitting layout one row, the first --top (5) of them also in detail
        rows = doc["all"]["rows"]
        assert doc["request"]["all"] and doc["stats"]["fitting"] == len(rows) > len(doc["layouts"]) == 5
        rank = doc["all"]["columns"].index("rank")
        assert [r[rank] for r in rows] == list(range(1, len(rows) + 1))
        assert [lay["rank"] for lay in doc["layouts"]] == [r[rank] for r in rows[:5]]
    else:
        assert doc["all"] is None and not doc["request"]["all"]


@pytest.mark.parametrize("name", ["dict_oom.pickle", "list_legacy.pickle"])
@pytest.mark.parametrize("top", [[], ["--top", "1"]])
def test_snapshot_json_follows_its_schema(name, top, snapshot_files, capsys):
    doc = run_json("snapshot", [snapshot_files[name], *top], capsys)
    assert_valid("snapshot", doc)


def test_snapshot_schema_ties_the_oom_keys_to_oom(snapshot_files, capsys):
    doc = run_json("snapshot", [snapshot_files["dict_oom.pickle"]], capsys)
    assert doc["oom"] is True
    check = validator("snapshot")
    assert not check.is_valid({**doc, "oom": False})
    assert not check.is_valid({k: v for k, v in doc.items() if k != "oom_kind"})


def test_snapshot_time_us_that_is_not_a_time_reads_as_unknown(snapshot_files):
    """The pickle's time_us is copied into timeline_peak_time_us only as a non-negative int (else null)."""
    import make_snapshots  # importable once the snapshot_files fixture has run
    from memtune.inputs.snapshot import summarize

    data = make_snapshots.dict_snapshot()
    for trace in data["device_traces"]:
        for event in trace:
            event["time_us"] = "soon"
    summary = summarize(data, "odd.pickle")
    assert summary["timeline_peak_time_us"] is None
    assert_valid("snapshot", json.loads(json.dumps(summary)))


@pytest.mark.parametrize("args, codes", [
    (["--config", EXAMPLES / "llama3-70b-sft-config.yaml"], (0, 1)),
    (["--config", CONFIGS / "bridge_lora_sft_dump.yaml", "--lang", "zh"], (0, 1)),
    (["--config", EXAMPLES / "llama3-70b-sft-config.yaml", "--set", "model.sequence_parallel=false",
      "--set", "model.tensor_model_parallel_size=1", "--set", "model.tensor_model_parallel_size=3"], (0, 1)),
    (["--question", "Llama3-70B SFT on 32xH100, TP4 PP4 VPP5, seq 4096, OOMs", "--env", "NCCL_NVLS_ENABLE=1"], (0, 1)),
    (["--log", EXAMPLES / "llama3-70b-fragmentation.log"], (0, 1)),
])
def test_check_json_follows_its_schema(args, codes, capsys):
    doc = run_json("check", args, capsys, codes)
    assert_valid("check", doc)


def test_check_json_with_a_violation(capsys):
    """A layout Megatron refuses: the violation rows, not just an empty list, follow the schema."""
    doc = run_json("check", ["--config", EXAMPLES / "llama3-70b-sft-config.yaml",
                             "--set", "model.virtual_pipeline_model_parallel_size=3",
                             "--set", "model.pipeline_model_parallel_size=1"], capsys, (1,))
    assert doc["violations"]
    assert_valid("check", doc)


@pytest.mark.parametrize("args, codes", [
    ([], (0, 1)),
    (["--config", EXAMPLES / "llama3-70b-sft-config.yaml"], (0, 1)),
    (["--config", CONFIGS / "bridge_lora_sft_dump.yaml", "--env", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
      "--lang", "zh"], (0, 1)),
    (["--launch", CONFIGS / "launch_llama3_8b.sh"], (0, 1)),
    (["--env", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "--bridge-repo", ROOT], (0, 1)),
    (["--list"], (0,)),
    (["--list", "--bridge-repo", ROOT, "--lang", "zh"], (0,)),
])
def test_verify_json_follows_its_schema(args, codes, capsys):
    doc = run_json("verify", args, capsys, codes)
    assert doc
    assert_valid("verify", doc)


def _json_commands() -> dict[str, object]:
    """Subcommand name -> its parser, for every registered one whose --format accepts json."""
    from memtune.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    out = {}
    for name, command in sub.choices.items():
        fmt = [a for a in command._actions if "--format" in a.option_strings]
        if fmt and "json" in (fmt[0].choices or ()):
            out[name] = command
    return out


def test_every_command_with_json_output_has_a_schema():
    commands = _json_commands()
    # The commands this file knows to print JSON; a new one must be added here with its inputs.
    assert {"diagnose", "check", "snapshot", "verify", "estimate", "plan", "compare"} <= set(commands)
    missing = [f"{name}: {schema_path(name).name}" for name in commands if not schema_path(name).is_file()]
    assert not missing, f"commands with --format json but no schema in {SCHEMA_DIR}: {missing}"
    for name in commands:
        schema = json.loads(schema_path(name).read_text(encoding="utf-8"))
        validator(name)
        assert schema["$id"] == f"https://memtune.invalid/schema/{schema_path(name).name}"
        assert schema["title"] == f"memtune {name} --format json"


def test_every_json_command_is_exercised_here():
    """The commands above are validated by a test of this file (compare and diagnose by their own files)."""
    covered = {"estimate", "plan", "snapshot", "check", "verify", "compare", "diagnose"}
    assert set(_json_commands()) <= covered, f"add schema tests for {sorted(set(_json_commands()) - covered)}"
