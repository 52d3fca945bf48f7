"""The CLI as an agent calls it, and the three diagnoses the issue's "Done when" names.

Through the launcher, in a process of its own: exit codes, one-line errors, the Markdown answer on stdout, a
log on stdin, a missing dependency.  The diagnoses' content is read in-process through ``cli.main``, the code
the launcher hands over to after its dependency check (a process each cost ~0.2 s for nothing more).
"""

import contextlib
import io
import json
import subprocess
import sys

import pytest
from conftest import ROOT, SKILL
from memtune import cli

LAUNCHER = [sys.executable, str(SKILL / "scripts" / "memtune.py")]
EXAMPLES = SKILL / "examples"


def memtune(*args, stdin=None):
    return subprocess.run([*LAUNCHER, *args], capture_output=True, text=True, input=stdin, cwd=ROOT, timeout=120)


def in_process(*args) -> str:
    """stdout of ``memtune ARGS`` run through cli.main in this process; the exit code must be 0."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(list(args)) == 0
    return out.getvalue()


def diagnose_json(*args):
    return json.loads(in_process("diagnose", *args, "--format", "json"))


def test_llama3_70b_fragmentation_example():
    report = diagnose_json("--log", str(EXAMPLES / "llama3-70b-fragmentation.log"), "--gpu", "H100-80GB")
    assert report["causes"][0]["id"] == "fragmentation"
    assert report["fixes"][0]["id"] == "expandable-segments"
    avoided = {a["id"] for a in report["avoid"]}
    assert {"increase-tp", "change-vpp"} <= avoided
    assert "GiB" in report["causes"][0]["evidence"][0]
    for key in ("kb_version", "causes", "fixes", "avoid", "violations", "facts"):
        assert key in report
    fix = report["fixes"][0]
    assert {"id", "rank", "title", "apply", "memory_effect", "throughput_cost", "evidence"} <= set(fix)


def test_llama3_70b_markdown_says_why_with_numbers_and_sources():
    proc = memtune("diagnose", "--log", str(EXAMPLES / "llama3-70b-fragmentation.log"), "--gpu", "H100-80GB")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in text
    assert "-28.4 %" in text and "60.2 GB" in text and "PR #3107" in text


def test_expandable_segments_already_on_gives_a_capacity_cause():
    report = diagnose_json("--log", str(EXAMPLES / "capacity-expandable-set.log"),
                           "--env", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    assert report["causes"][0]["id"].startswith("capacity-")
    assert "expandable-segments" not in [f["id"] for f in report["fixes"]]
    assert "expandable-segments" in [a["id"] for a in report["already_applied"]]


def test_crash_with_nccl_timeouts_is_not_an_oom():
    report = diagnose_json("--log", str(EXAMPLES / "not-an-oom.log"))
    assert report["causes"][0]["id"] == "not-an-oom"
    assert report["fixes"][0]["id"] == "find-first-failing-rank"


def test_chinese_rendering():
    text = in_process("diagnose", "--log", str(EXAMPLES / "llama3-70b-fragmentation.log"), "--lang", "zh")
    assert "最可能的原因" in text and "碎片" in text


def test_question_language_picks_the_answer_language():
    report = diagnose_json("--question", "显存不足，LoRA + 序列并行怎么省显存？")
    assert report["lang"] == "zh"
    assert report["fixes"][0]["id"] == "lora-input-regather"


def test_log_from_stdin():
    text = (EXAMPLES / "llama3-70b-fragmentation.log").read_text(encoding="utf-8")
    proc = memtune("diagnose", "--log", "-", "--format", "json", stdin=text)
    assert json.loads(proc.stdout)["causes"][0]["id"] == "fragmentation"


@pytest.mark.parametrize("args,needle", [
    (["diagnose", "--log", "no/such.log"], "no/such.log"),
    (["diagnose", "--set", "model.tensor_model_parallel_size"], "model.tensor_model_parallel_size"),
    (["explain", "no-such-id"], "no-such-id"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    proc = memtune(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memtune: error:") and needle in lines[0]
    assert "Traceback" not in proc.stderr


def test_check_exits_1_on_violation_and_0_when_clean():
    bad = memtune("check", "--set", "model.tensor_model_parallel_size=1", "--set", "model.sequence_parallel=true")
    assert bad.returncode == 1 and "sp-requires-tp" in bad.stdout
    good = memtune("check", "--set", "model.tensor_model_parallel_size=2", "--set", "model.sequence_parallel=true")
    assert good.returncode == 0, good.stdout


def test_explain_and_kb_validate():
    proc = memtune("explain", "expandable-segments")
    assert proc.returncode == 0 and "PYTORCH_CUDA_ALLOC_CONF" in proc.stdout
    proc = memtune("kb", "validate")
    assert proc.returncode == 0 and "valid" in proc.stdout


def test_missing_dependency_is_one_clear_line(tmp_path):
    """Hide jinja2 from the launcher: it must name the package and the install command."""
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text("import importlib.util, sys\n"
                       "_orig = importlib.util.find_spec\n"
                       "importlib.util.find_spec = lambda n, *a: None if n == 'jinja2' else _orig(n, *a)\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([*LAUNCHER, "kb", "validate"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2
    assert "jinja2" in proc.stderr and "python3 -m pip install 'jinja2>=3.1.6,<4'" in proc.stderr


def test_runtime_requirements_are_named_alike_everywhere():
    """The launcher (the only list an installed skill has), requirements.txt and pyproject.toml agree."""
    import ast

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    tree = ast.parse((SKILL / "scripts" / "memtune.py").read_text(encoding="utf-8"))
    launcher = next(ast.literal_eval(n.value) for n in tree.body
                    if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "REQUIRED")
    lines = [ln.strip() for ln in (ROOT / "requirements.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert sorted(launcher.values()) == sorted(lines) == sorted(project)


def test_snapshot_evidence_is_cited_with_its_numbers(snapshot_files):
    report = diagnose_json("--snapshot", str(snapshot_files["dict_oom.pickle"]))
    cause = report["causes"][0]
    assert cause["id"] == "fragmentation"
    assert "dict_oom.pickle" in cause["evidence"][0] and "30.00 MiB" in cause["evidence"][0]  # the failed request
    assert report["fixes"][0]["id"] == "expandable-segments"


def test_memory_stats_evidence_is_cited_with_its_numbers(tmp_path):
    # A torch.cuda.memory_stats() dump after a fragmented step: 14 GiB inactive-split, 3 retries.
    gib = 2**30
    stats = {"reserved_bytes.all.peak": 78 * gib, "allocated_bytes.all.peak": 60 * gib,
             "reserved_bytes.all.current": 78 * gib, "allocated_bytes.all.current": 52 * gib,
             "inactive_split_bytes.all.current": 14 * gib, "num_alloc_retries": 3, "num_ooms": 1}
    path = tmp_path / "memory_stats.json"
    path.write_text(json.dumps(stats), encoding="utf-8")
    report = diagnose_json("--stats", str(path))
    assert report["causes"][0]["id"] == "fragmentation"
    evidence = " ".join(report["causes"][0]["evidence"])
    assert "14.00 GiB" in evidence and "3 cudaMalloc retries" in evidence


def test_user_says_expandable_is_set_but_the_oom_shows_a_fragmented_cache():
    """The claim fills an allocator setting the log only implied; the evidence then says it did not apply."""
    report = diagnose_json("--log", str(EXAMPLES / "llama3-70b-fragmentation.log"),
                           "--question", "I already set expandable_segments:True and it still OOMs")
    assert report["causes"][0]["id"] == "setting-not-applied"
    assert report["fixes"][0]["id"] == "confirm-setting-applied"


@pytest.mark.parametrize("args", [
    ["--log", str(EXAMPLES / "llama3-70b-fragmentation.log"), "--gpu", "H100-80GB"],
    ["--log", str(EXAMPLES / "not-an-oom.log"), "--lang", "zh"],
    ["--log", str(EXAMPLES / "host-oom-dataloader.log")],
    ["--question", "Llama3-70B SFT on 32xH100, TP4 PP4 VPP5, seq 4096, OOMs", "--set", "model.sequence_parallel=false"],
    ["--config", str(ROOT / "tests" / "fixtures" / "configs" / "bridge_lora_sft_dump.yaml"), "--gpu", "H100"],
])
def test_json_answer_follows_its_published_schema(args):
    """knowledge/schema/diagnosis.schema.json is the contract agents and the benchmark rely on."""
    import jsonschema

    schema = json.loads((SKILL / "knowledge" / "schema" / "diagnosis.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(diagnose_json(*args))


@pytest.mark.parametrize("exc, code, words", [
    (RecursionError("maximum recursion depth exceeded"), 2, "nested too deeply"),
    (MemoryError(), 2, "too large to hold in memory"),
    (PermissionError(13, "Permission denied", "/x/run.yaml"), 2, "/x/run.yaml: Permission denied"),
    (OSError(28, "No space left on device"), 2, "No space left on device"),
    (ValueError("bad\nvalue"), 3, "internal error: ValueError: bad value - this is a bug"),
    (KeyboardInterrupt(), 130, "interrupted"),
])
def test_every_escaping_exception_becomes_one_line(exc, code, words):
    from memtune.cli import error_line

    got_code, message = error_line(exc)
    assert got_code == code and words in message and "\n" not in message


def test_a_bug_in_a_command_exits_3_with_one_line(monkeypatch, capsys):
    from memtune.commands import explain

    def boom(args):
        raise TypeError("unexpected None")

    monkeypatch.setattr(explain, "run", boom, raising=False)
    real_register = explain.register

    def register(sub):
        real_register(sub)
        sub.choices["explain"].set_defaults(func=boom)

    monkeypatch.setattr(explain, "register", register)
    from memtune import cli

    assert cli.main(["explain", "expandable-segments"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: TypeError: unexpected None" in err
