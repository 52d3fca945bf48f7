"""memtune verify: the validations table, condition checks, and command steps it prints but never starts."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import sys
from pathlib import Path

import pytest
from conftest import read_kb
from memtune import cli, conditions, knowledge
from memtune.actions import launch, verify
from memtune.errors import UserError
from memtune.facts import Facts
from memtune.render import verify as view

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
TABLE = read_kb("validations")
STEPS = {s["id"]: s for s in TABLE["validations"]}
PATTERNS = launch.compile_patterns(TABLE["launch_script"]["command_patterns"])


# --------------------------------------------------------------------------- the table itself


def test_table_matches_its_schema():
    import jsonschema
    from referencing import Registry, Resource

    schemas = [json.loads(p.read_text()) for p in (SKILL / "knowledge" / "schema").glob("*.schema.json")]
    registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas)
    schema = next(s for s in schemas if s["$id"].endswith("/validations.schema.json"))
    errors = list(jsonschema.Draft202012Validator(schema, registry=registry).iter_errors(TABLE))
    assert not errors, [e.message for e in errors]


def test_table_references_resolve(kb):
    declared = set(Facts().flatten()) | {f["name"] for f in kb.entries("facts")}
    fixes = set(kb.by_id.get("fixes", {}))
    assert len(STEPS) == len(TABLE["validations"]), "duplicate validation id"
    for step in STEPS.values():
        named = list(step.get("needs", []))
        for key in ("applies_when", "pass_when"):
            if key in step:
                named += list(conditions.referenced_facts(step[key]))
        assert set(named) <= declared, (step["id"], set(named) - declared)
        assert set(step.get("fixes", [])) <= fixes, step["id"]
    assert "validations" in kb.index["tables"]


def test_commands_are_fixed_argument_lists():
    for step in STEPS.values():
        if step["kind"] != "command":
            continue
        for item in step["argv"]:
            assert item == "{bridge_repo}" or not set(item) & set("{}$`;|&<>\n"), (step["id"], item)


# --------------------------------------------------------------------------- launch scripts


def test_launch_facts_split_exports_at_the_training_command():
    text = ("#!/bin/bash\nexport NCCL_GRAPH_REGISTER=0 OTHER=\"a b\"\n# torchrun in a comment\n"
            "python -c 'import torch'\nsrun --mpi=pmix \\\n  python train.py --tp 2\n"
            "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\nexport NCCL_GRAPH_REGISTER=1\n")
    facts = launch.launch_facts(text, PATTERNS)
    assert facts["command"] == "srun --mpi=pmix python train.py --tp 2" and facts["command_line"] == 5
    assert facts["exports"] == {"NCCL_GRAPH_REGISTER": "0", "OTHER": "a b"}
    assert facts["exports_after_command"] == ["PYTORCH_CUDA_ALLOC_CONF"]


@pytest.mark.parametrize("line,found", [
    ("torchrun --nproc-per-node=8 scripts/training/run_recipe.py --recipe llama3_8b", True),
    ("CUDA_VISIBLE_DEVICES=0,1 python3 -u pretrain_gpt.py --tensor-model-parallel-size 2", True),
    ("uv run python -m torch.distributed.run --nproc_per_node=2 train.py", True),
    ("exec /usr/bin/python3.12 scripts/performance/setup_experiment.py -m llama3", True),
    ("python -m pytest tests/", False),
    ("pip install -e .", False),
])
def test_training_command_patterns(line, found):
    assert (launch.find_training_command([line + "\n"], PATTERNS) is not None) is found


# --------------------------------------------------------------------------- env / config checks


def _check(step_id: str, flat: dict, kb) -> verify.StepResult:
    return verify.evaluate_check(STEPS[step_id], flat, kb)


def test_alloc_conf_must_come_before_the_command(kb):
    assert _check("alloc-conf-before-command", {}, kb).status == "skipped"
    ok = {"launch.provided": True, "launch.exports_after_command": []}
    late = {"launch.provided": True, "launch.exports_after_command": ["PYTORCH_CUDA_ALLOC_CONF"]}
    assert _check("alloc-conf-before-command", ok, kb).status == "pass"
    result = _check("alloc-conf-before-command", late, kb)
    assert result.status == "fail" and "after the training command" in result.detail


def test_perf_launcher_bypass(kb):
    perf = {"launch.provided": True, "launch.command": "torchrun scripts/performance/run_script.py -m qwen3"}
    assert _check("alloc-conf-reaches-perf-launcher", perf, kb).status == "fail"
    assert _check("alloc-conf-reaches-perf-launcher", {**perf, "env.alloc_conf": "expandable_segments:True"},
                  kb).status == "pass"
    recipe = {**perf, "launch.command": "torchrun scripts/training/run_recipe.py"}
    assert _check("alloc-conf-reaches-perf-launcher", recipe, kb).status == "n/a"


def test_nccl_graph_register_with_cuda_graphs(kb):
    base = {"env.provided": True, "config.provided": True, "env.expandable_segments": True}
    assert _check("nccl-graph-register-with-cuda-graphs", {**base, "config.cuda_graph_impl": "none"}, kb).status \
        == "n/a"
    graphs = {**base, "config.cuda_graph_impl": "transformer_engine"}
    assert _check("nccl-graph-register-with-cuda-graphs", graphs, kb).status == "fail"
    assert _check("nccl-graph-register-with-cuda-graphs", {**graphs, "env.nccl_graph_register": "0"}, kb).status \
        == "pass"


def test_config_check_runs_the_constraints(kb):
    synthetic = knowledge.Knowledge(root=kb.root, index=kb.index, tables={
        "constraints": {"constraints": [{"id": "tp-divides-heads", "violated_when": {"fact": "config.x", "eq": 1}}]},
    })
    assert _check("config-constraints", {}, synthetic).status == "skipped"
    assert _check("config-constraints", {"config.provided": True, "config.x": 2}, synthetic).status == "pass"
    bad = _check("config-constraints", {"config.provided": True, "config.x": 1}, synthetic)
    assert bad.status == "fail" and "tp-divides-heads" in bad.detail


# --------------------------------------------------------------------------- command steps


def test_placeholder_fills_one_whole_argument(tmp_path):
    odd = str(tmp_path / "repo; touch pwned")
    argv, cwd = verify.command_argv({"id": "t", "argv": ["ls", "{bridge_repo}"], "cwd": "{bridge_repo}"},
                                    {"bridge_repo": odd})
    assert argv == ["ls", odd] and cwd == odd
    with pytest.raises(UserError, match="needs --bridge-repo"):
        verify.command_argv(STEPS["lora-regather-unit-tests"], {"bridge_repo": ""})
    with pytest.raises(UserError, match="mixes a placeholder"):
        verify.command_argv({"id": "t", "argv": ["cat", "{bridge_repo}/x"]}, {"bridge_repo": odd})


def test_command_line_is_quoted_and_carries_its_time_limit(tmp_path):
    odd = tmp_path / "my repo; rm -rf x"
    step = STEPS["lora-regather-unit-tests"]
    for rel in step.get("requires_files", []):
        (odd / rel).parent.mkdir(parents=True, exist_ok=True)
        (odd / rel).write_text("")
    result = verify.plan_command({**step, "argv": [sys.executable, *step["argv"][1:]]}, {"bridge_repo": str(odd)})
    assert result.status == "to-run"
    words = shlex.split(result.detail)  # a shell reads it back as the same words: nothing is injected
    assert words[:3] == ["cd", str(odd), "&&"]
    assert words[3:5] == ["timeout", str(step["timeout_s"])] and words[5] == sys.executable


def test_preflight_names_what_is_missing(tmp_path, kb):
    result = verify.plan_command(STEPS["lora-regather-unit-tests"], {"bridge_repo": str(tmp_path)})
    assert result.status == "skipped" and "tests/unit_tests/peft/test_utils.py" in view.detail(result, kb, "en")
    assert "tests/unit_tests/peft/test_utils.py" in view.detail(result, kb, "zh")


def test_the_helper_cannot_start_processes():
    """verify prints command lines; no module of the helper imports a way to start a process."""
    banned = re.compile(r"^\s*(?:import|from)\s+(?:subprocess|multiprocessing|pty)\b"
                        r"|os\.(?:system|popen|exec|spawn|fork)", re.M)
    offenders = [p.name for p in (SKILL / "scripts").rglob("*.py") if banned.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


# --------------------------------------------------------------------------- CLI


@pytest.fixture
def fake_bridge(tmp_path, monkeypatch):
    """A checkout with the expected test files and a `uv` on PATH that records its argv instead of testing."""
    repo = tmp_path / "Megatron-Bridge"
    for step in STEPS.values():
        for rel in step.get("requires_files", []):
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text("")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    record = tmp_path / "uv-calls.jsonl"
    uv = bindir / "uv"
    uv.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                  f"open({str(record)!r}, 'a').write(json.dumps([os.getcwd(), sys.argv[1:]]) + '\\n')\n"
                  "print('fake uv ran')\n")
    uv.chmod(uv.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.chdir(tmp_path)
    return repo, record


def test_list_shows_every_step_and_its_command(kb, capsys):
    assert cli.main(["verify", "--list", "--bridge-repo", "/opt/bridge"]) == 0
    out = capsys.readouterr().out
    for step_id in STEPS:
        assert step_id in out
    limit = STEPS["lora-regather-two-rank"]["timeout_s"]
    assert f"cd /opt/bridge && timeout {limit} uv run python -m torch.distributed.run --nproc_per_node=2" in out


def test_verify_starts_nothing(kb, fake_bridge, capsys):
    repo, record = fake_bridge
    assert cli.main(["verify", "--bridge-repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "to-run" in out and "nothing was started" in out
    args = ["verify", "--only", "lora-regather-unit-tests", "--bridge-repo", str(repo), "--format", "json"]
    assert cli.main(args) == 0
    rows = json.loads(capsys.readouterr().out)["results"]
    assert [r["status"] for r in rows] == ["to-run"] and "uv run python -m pytest" in rows[0]["detail"]
    assert not record.exists()


def test_unknown_check_and_removed_run_flags(kb, capsys):
    assert cli.main(["verify", "--only", "no-such-check"]) == 2
    for flag in ("--yes", "--env-from-process"):
        with pytest.raises(SystemExit) as exc:
            cli.main(["verify", flag])
        assert exc.value.code == 2


def test_launch_script_feeds_env_checks(kb, tmp_path, capsys):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\ntorchrun scripts/performance/run_script.py -m qwen3\n"
                      "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n")
    code = cli.main(["verify", "--launch", str(script), "--format", "json"])
    rows = {r["id"]: r["status"] for r in json.loads(capsys.readouterr().out)["results"]}
    assert code == 1
    assert rows["alloc-conf-before-command"] == "fail"
    assert rows["alloc-conf-reaches-perf-launcher"] == "fail"
    assert rows["lora-regather-unit-tests"] == "skipped"
    script.write_text("#!/bin/bash\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
                      "torchrun scripts/performance/run_script.py -m qwen3\n")
    cli.main(["verify", "--launch", str(script), "--format", "json"])
    rows = {r["id"]: r["status"] for r in json.loads(capsys.readouterr().out)["results"]}
    assert rows["alloc-conf-before-command"] == rows["alloc-conf-reaches-perf-launcher"] == "pass"
    assert rows["expandable-segments-active"] == "pass"
