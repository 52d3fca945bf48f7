"""apply / rollback: exact diffs, backups, byte-for-byte restore, and files that must be refused."""

from __future__ import annotations

import stat
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from conftest import read_kb
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from memtune import cli, knowledge
from memtune.actions import apply as actions
from memtune.actions import launch
from memtune.errors import UserError

pytestmark = pytest.mark.usefixtures("private_home")  # the backup journal lives in $HOME

PATTERNS = read_kb("validations")[
    "launch_script"]["command_patterns"]
ENV_FIX = {"id": "t-env", "apply": {"env": ["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"]}}
OVERRIDE_FIX = {"id": "t-yaml", "apply": {"bridge_override": ["model.recompute_granularity=selective",
                                                              "model.recompute_modules=[core_attn]"]}}

# Shaped like Megatron-LM's examples/llama/train_llama3_8b_h100_fp8.sh (lines 1-5, 187-190): exports at the
# top, a bash array of arguments, then a backslash-continued torchrun line.
LAUNCH = """#!/bin/bash
# Environment variables for performance tuning
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-1}
GPUS_PER_NODE=8
DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
)
python -c "import torch; print(torch.__version__)"
torchrun ${DISTRIBUTED_ARGS[@]} \\
    pretrain_gpt.py \\
    ${MODEL_ARGS[@]}

set +x
"""

# Shaped like a Bridge task-config dump (research fixture configs/bridge-llama32-1b-pretrain-task-config.yaml).
CONFIG = """_target_: megatron.bridge.training.config.ConfigContainer
comm_overlap: null
dataset:
  _target_: megatron.bridge.training.config.GPTDatasetConfig
  split_matrix:
  - - 0
    - 0.5
  sequence_length: 1024   # tokens per sample
model:
  _target_: megatron.bridge.models.llama.Llama32ModelProvider1B
  recompute_granularity: null
  recompute_modules:
  - core_attn
  tensor_model_parallel_size: 1
train:
  micro_batch_size: 1
"""


def _write(tmp_path: Path, name: str, text: str, mode: int = 0o644) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode())
    path.chmod(mode)
    return path


# --------------------------------------------------------------------------- shell scripts


def test_export_goes_just_before_the_first_training_command(tmp_path):
    path = _write(tmp_path, "launch.sh", LAUNCH)
    plan = actions.plan_apply(ENV_FIX, path, PATTERNS)
    assert plan.kind == "shell"
    new = plan.new_text.splitlines()
    at = new.index("torchrun ${DISTRIBUTED_ARGS[@]} \\")
    assert new[at - 2:at] == ["# added by memtune apply t-env",
                              "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"]
    assert [ln for ln in plan.diff().splitlines() if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---"))] \
        == ["+# added by memtune apply t-env", "+export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"]
    assert path.read_text() == LAUNCH  # planning writes nothing


def test_existing_option_list_is_merged_not_dropped(tmp_path):
    text = LAUNCH.replace("GPUS_PER_NODE=8", "export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512")
    plan = actions.plan_apply(ENV_FIX, _write(tmp_path, "run.sh", text), PATTERNS)
    assert "export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512,expandable_segments:True\n" in plan.new_text
    assert any("keeps its other options" in n for n in plan.notes)


def test_already_exported_means_no_change(tmp_path):
    text = LAUNCH.replace("GPUS_PER_NODE=8", "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    plan = actions.plan_apply(ENV_FIX, _write(tmp_path, "run.sh", text), PATTERNS)
    assert not plan.changed and plan.diff() == ""


def test_export_after_the_command_does_not_count(tmp_path):
    text = LAUNCH + "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
    plan = actions.plan_apply(ENV_FIX, _write(tmp_path, "run.sh", text), PATTERNS)
    assert plan.changed and plan.new_text.index("export PYTORCH") < plan.new_text.index("torchrun")


@pytest.mark.parametrize("prefix, expected", [
    ("PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 ",
     "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128,expandable_segments:True "),
    ("env PYTORCH_CUDA_ALLOC_CONF='garbage_collection_threshold:0.6' ",
     "env PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6,expandable_segments:True "),
    ("PYTORCH_CUDA_ALLOC_CONF= ", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "),
])
def test_an_assignment_on_the_command_line_is_edited_where_it_wins(tmp_path, prefix, expected):
    """``VAR=x torchrun ...`` beats any export above it: an export there would claim a fix the job never sees."""
    text = LAUNCH.replace("torchrun ${DISTRIBUTED_ARGS[@]}", prefix + "torchrun ${DISTRIBUTED_ARGS[@]}")
    path = _write(tmp_path, "run.sh", text)
    plan = actions.plan_apply(ENV_FIX, path, PATTERNS)
    assert expected + "torchrun" in plan.new_text and "export PYTORCH_CUDA_ALLOC_CONF" not in plan.new_text
    assert any("set on the training command itself" in n for n in plan.notes)
    facts = launch.launch_facts(plan.new_text, launch.compile_patterns(PATTERNS))
    assert "expandable_segments:True" in facts["exports"]["PYTORCH_CUDA_ALLOC_CONF"]
    again = actions.plan_apply(ENV_FIX, _write(tmp_path, "again.sh", plan.new_text), PATTERNS)
    assert not again.changed


def test_indentation_and_crlf_are_kept(tmp_path):
    text = "#!/bin/bash\r\nif true; then\r\n    srun python train.py\r\nfi\r\n"
    plan = actions.plan_apply(ENV_FIX, _write(tmp_path, "job.sbatch", text), PATTERNS)
    expected = "    export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\r\n    srun python train.py\r\n"
    assert expected in plan.new_text


def test_script_without_training_command_is_refused(tmp_path):
    path = _write(tmp_path, "setup.sh", "#!/bin/sh\necho hello\npython -c 'print(1)'\n")
    with pytest.raises(UserError, match="no training command"):
        actions.plan_apply(ENV_FIX, path, PATTERNS)


def test_env_fix_cannot_target_yaml_and_override_fix_cannot_target_shell(tmp_path):
    with pytest.raises(UserError, match="no Bridge config key"):
        actions.plan_apply(ENV_FIX, _write(tmp_path, "c.yaml", CONFIG), PATTERNS)
    with pytest.raises(UserError, match="sets no environment variable"):
        actions.plan_apply(OVERRIDE_FIX, _write(tmp_path, "l.sh", LAUNCH), PATTERNS)


@pytest.mark.parametrize("item", ["PYTORCH_CUDA_ALLOC_CONF=<your value>", "just words", "A=1 B=2"])
def test_env_items_that_are_not_one_plain_assignment_are_refused(item):
    with pytest.raises(UserError, match="t-env"):
        actions.env_settings({"id": "t-env", "apply": {"env": [item]}})


# --------------------------------------------------------------------------- YAML


def _changed_lines(old: str, new: str) -> list[str]:
    return [ln for ln in actions.unified_diff(old, new, "f").splitlines()
            if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---"))]


def test_yaml_edit_touches_only_the_target_lines(tmp_path):
    plan = actions.plan_apply(OVERRIDE_FIX, _write(tmp_path, "config.yaml", CONFIG), PATTERNS)
    assert _changed_lines(CONFIG, plan.new_text) == [
        "-  recompute_granularity: null", "+  recompute_granularity: selective",
    ]  # recompute_modules is already [core_attn]
    assert any("recompute_modules is already" in n for n in plan.notes)
    data = yaml.safe_load(plan.new_text)
    assert data["model"]["recompute_granularity"] == "selective"


@pytest.mark.parametrize("override,expected_lines,check", [
    ("dataset.sequence_length=4096", ["-  sequence_length: 1024   # tokens per sample",
                                      "+  sequence_length: 4096   # tokens per sample"],
     lambda d: d["dataset"]["sequence_length"] == 4096),
    ("train.global_batch_size=128", ["+  global_batch_size: 128"], lambda d: d["train"]["global_batch_size"] == 128),
    ("optimizer.optimizer_cpu_offload=true", ["+optimizer:", "+  optimizer_cpu_offload: true"],
     lambda d: d["optimizer"] == {"optimizer_cpu_offload": True}),
    ("model.recompute_modules=[core_attn,mlp]", ["-  recompute_modules:", "-  - core_attn",
                                                 "+  recompute_modules: [core_attn,mlp]"],
     lambda d: d["model"]["recompute_modules"] == ["core_attn", "mlp"]),
])
def test_yaml_edits(override, expected_lines, check):
    key, _, value = override.partition("=")
    new, _ = actions.edit_yaml(CONFIG, [(key.split("."), value)], "config.yaml")
    assert _changed_lines(CONFIG, new) == expected_lines
    assert check(yaml.safe_load(new))


def test_yaml_scalar_or_unset_section_is_not_turned_into_a_section():
    with pytest.raises(UserError, match=r"config\.yaml:\d+: 'tensor_model_parallel_size' holds '1'"):
        actions.edit_yaml(CONFIG, [(["model", "tensor_model_parallel_size", "x"], "1")], "config.yaml")
    with pytest.raises(UserError, match=r"config\.yaml:2: 'comm_overlap' holds 'null'"):
        actions.edit_yaml(CONFIG, [(["comm_overlap", "tp_comm_overlap"], "false")], "config.yaml")


def test_yaml_file_without_final_newline():
    new, _ = actions.edit_yaml("train:\n  micro_batch_size: 1", [(["model", "fp8"], "hybrid")], "c.yaml")
    assert new == "train:\n  micro_batch_size: 1\nmodel:\n  fp8: hybrid\n"


_keys = st.sampled_from(["model", "train", "ddp", "fp8", "seq_length", "a_b", "x"])
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.sampled_from(["selective", "full", "a b"]))
_trees = st.recursive(_scalars, lambda c: st.one_of(st.dictionaries(_keys, c, min_size=1, max_size=4),
                                                      st.lists(_scalars, max_size=3)), max_leaves=12)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.dictionaries(_keys, _trees, max_size=4), path=st.lists(_keys, min_size=2, max_size=3),
       value=st.sampled_from(["selective", "4", "true", "null", "[core_attn,mlp]", "1e-4"]), flow=st.booleans())
def test_yaml_edit_changes_exactly_the_target_or_refuses(data, path, value, flow):
    text = yaml.safe_dump(data, default_flow_style=flow, sort_keys=False)
    assume(isinstance(yaml.safe_load(text), dict) or not data)
    try:
        new, _ = actions.edit_yaml(text, [(path, value)], "c.yaml")
    except UserError:
        return
    expected = yaml.safe_load(text) or {}
    node = expected
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[path[-1]] = yaml.safe_load(value)
    assert (yaml.safe_load(new) or {}) == expected


# --------------------------------------------------------------------------- refused targets


@pytest.mark.parametrize("name,content,message", [
    ("model.bin", b"\x00\x01binary", "binary file"),
    ("latin.sh", "echo caf\xe9\n".encode("latin-1"), "not UTF-8"),
    ("train.py", b"print('hi')\n", "not a shell script"),
    ("notes.txt", b"torchrun train.py\n", "not a shell script"),
])
def test_unsupported_files_are_refused(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(UserError, match=message):
        actions.read_target(path)
    assert path.read_bytes() == content


def test_shebang_script_without_suffix_is_accepted(tmp_path):
    path = _write(tmp_path, "launch", "#!/usr/bin/env bash\ntorchrun train.py\n")
    assert actions.read_target(path)[0] == "shell"


def test_symlink_directory_missing_and_huge_are_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    real = _write(outside, "real.sh", LAUNCH)
    link = tmp_path / "launch.sh"
    link.symlink_to(real)
    with pytest.raises(UserError, match="symbolic link"):
        actions.read_target(link)
    with pytest.raises(UserError, match="not a regular file"):
        actions.read_target(outside)
    with pytest.raises(UserError, match="no such file"):
        actions.read_target(tmp_path / "absent.sh")
    big = tmp_path / "big.sh"
    big.write_bytes(b"#" * (actions.MAX_TARGET_BYTES + 1))
    with pytest.raises(UserError, match="too large"):
        actions.read_target(big)


# --------------------------------------------------------------------------- backup / rollback


def test_round_trip_restores_bytes_and_mode_and_touches_nothing_else(tmp_path):
    path = _write(tmp_path, "launch.sh", LAUNCH.replace("\n", "\r\n", 3), mode=0o754)
    original = path.read_bytes()
    plan = actions.plan_apply(ENV_FIX, path, PATTERNS)
    backup, notes = actions.write_with_backup(plan, now=datetime(2026, 11, 30, 8, 5, 9, tzinfo=timezone.utc))
    assert backup.name == "launch.sh.memtune-backup-20261130T080509" and notes == []
    assert backup.read_bytes() == original
    assert path.read_bytes() == plan.new_text.encode() != original
    assert stat.S_IMODE(path.stat().st_mode) == 0o754
    assert sorted(p.name for p in tmp_path.iterdir()) == ["launch.sh", backup.name]
    restored_from, notes = actions.rollback(path)
    assert restored_from == backup and notes == [] and path.read_bytes() == original
    assert stat.S_IMODE(path.stat().st_mode) == 0o754
    assert sorted(p.name for p in tmp_path.iterdir()) == ["launch.sh"]


def test_two_applies_roll_back_one_step_at_a_time(tmp_path):
    path = _write(tmp_path, "launch.sh", LAUNCH)
    second = {"id": "t2", "apply": {"env": ["NCCL_GRAPH_REGISTER=0"]}}
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    actions.write_with_backup(actions.plan_apply(ENV_FIX, path, PATTERNS), now=when)
    after_first = path.read_bytes()
    actions.write_with_backup(actions.plan_apply(second, path, PATTERNS), now=when)  # same second: "-1" suffix
    assert [b.name[-2:] for b in actions.backups(path)] == ["00", "-1"]
    actions.rollback(path)
    assert path.read_bytes() == after_first
    actions.rollback(path)
    assert path.read_bytes() == LAUNCH.encode()
    with pytest.raises(UserError, match="no memtune backup"):
        actions.plan_rollback(path)


def test_write_refuses_a_file_changed_after_planning(tmp_path):
    path = _write(tmp_path, "launch.sh", LAUNCH)
    plan = actions.plan_apply(ENV_FIX, path, PATTERNS)
    path.write_text(LAUNCH + "# edited meanwhile\n")
    with pytest.raises(UserError, match="changed since it was read"):
        actions.write_with_backup(plan)
    assert list(tmp_path.iterdir()) == [path]


# --------------------------------------------------------------------------- CLI with the real knowledge base


@pytest.fixture(scope="module")
def real_kb():
    try:
        return knowledge.load()
    except knowledge.KnowledgeError as exc:
        pytest.skip(f"knowledge base not loadable yet: {exc}")


def _fix_ids(kind: str) -> list[str]:
    try:
        kb = knowledge.load()
    except knowledge.KnowledgeError:
        return ["kb-not-loadable"]
    return [f["id"] for f in kb.entries("fixes") if kind in f.get("apply", {})] or ["no-such-fix"]


@pytest.mark.parametrize("fix_id", _fix_ids("env"))
def test_every_env_fix_applies_to_a_launch_script_and_rolls_back(real_kb, tmp_path, capsys, fix_id):
    if fix_id not in real_kb.by_id.get("fixes", {}):
        pytest.skip("no fix with apply.env in fixes.yaml")
    path = _write(tmp_path, "launch.sh", LAUNCH)
    try:
        pairs = actions.env_settings(real_kb.get("fixes", fix_id))
    except UserError:
        assert cli.main(["apply", fix_id, "--to", str(path)]) == 2
        return
    assert cli.main(["apply", fix_id, "--to", str(path)]) == 0
    out = capsys.readouterr().out
    assert "dry run" in out and path.read_text() == LAUNCH and list(tmp_path.iterdir()) == [path]
    assert cli.main(["apply", fix_id, "--to", str(path), "--yes"]) == 0
    text = path.read_text()
    for name, _ in pairs:
        assert f"export {name}=" in text and text.index(f"export {name}=") < text.index("torchrun")
    assert cli.main(["rollback", str(path)]) == 0 and path.read_text() == text  # dry run restores nothing
    assert cli.main(["rollback", str(path), "--yes"]) == 0
    assert path.read_bytes() == LAUNCH.encode() and list(tmp_path.iterdir()) == [path]


@pytest.mark.parametrize("fix_id", _fix_ids("bridge_override"))
def test_every_override_fix_applies_to_a_config_or_refuses_cleanly(real_kb, tmp_path, capsys, fix_id):
    if fix_id not in real_kb.by_id.get("fixes", {}):
        pytest.skip("no fix with apply.bridge_override in fixes.yaml")
    path = _write(tmp_path, "config.yaml", CONFIG)
    code = cli.main(["apply", fix_id, "--to", str(path), "--yes"])
    err = capsys.readouterr().err
    if code == 2:
        assert err.startswith("memtune: error: ") and len(err.strip().splitlines()) == 1
        assert path.read_text() == CONFIG and list(tmp_path.iterdir()) == [path]
        return
    assert code == 0
    data = yaml.safe_load(path.read_text())
    for keys, raw in actions.override_settings(real_kb.get("fixes", fix_id)):
        node = data
        for key in keys:
            node = node[key]
        assert node == yaml.safe_load(raw)
    if path.read_text() != CONFIG:
        assert cli.main(["rollback", str(path), "--yes"]) == 0
    assert path.read_bytes() == CONFIG.encode()
    assert not [p for p in tmp_path.iterdir() if p != path]


def test_cli_unknown_fix_and_refused_file(real_kb, tmp_path, capsys):
    path = _write(tmp_path, "launch.sh", LAUNCH)
    assert cli.main(["apply", "no-such-fix", "--to", str(path)]) == 2
    assert "unknown fix 'no-such-fix'" in capsys.readouterr().err
    binary = tmp_path / "weights.yaml"
    binary.write_bytes(b"\x00\x00")
    fix_id = _fix_ids("env")[0]
    assert cli.main(["apply", fix_id, "--to", str(binary), "--yes"]) == 2
    assert binary.read_bytes() == b"\x00\x00" and not any(".memtune-backup-" in p.name for p in tmp_path.iterdir())
