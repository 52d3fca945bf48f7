"""The benchmark scorer: hand-written good, bad, negated, Chinese and structured answers.

Fix recognition comes from a small fixture table (tests/fixtures/benchmark/fixes.yaml) so
these tests exercise the scorer's logic, not whatever phrases knowledge/fixes.yaml has today.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
sys.path.insert(0, str(ROOT))

from conftest import sweep  # noqa: E402
from memtune.recognize import Recognizer, literal_regex, phrase_regex  # noqa: E402

from benchmarks import producers, run  # noqa: E402
from benchmarks.answer import Grading, negated  # noqa: E402
from benchmarks.scenario import Scenario  # noqa: E402
from benchmarks.score import Scorer, failed, metrics, score  # noqa: E402

FIXES = ROOT / "tests" / "fixtures" / "benchmark" / "fixes.yaml"


@pytest.fixture(scope="module")
def scorer() -> Scorer:
    grading = Grading.load()
    fixes = Recognizer.from_recognize(yaml.safe_load(FIXES.read_text())["fixes"], "fixture")
    return Scorer(fixes, Recognizer.from_phrases(grading.cause_phrases, "grading"), grading)


def scenario(expect: dict, ident: str = "s", category: str = "fragmentation") -> Scenario:
    return Scenario(ident, Path(f"{ident}.yaml"), category, "en", "q?", "src", "truth", {}, expect)


FRAG_EXPECT = {
    "cause": ["fragmentation"],
    "first_fix": ["expandable-segments"],
    "fixes_include": ["selective-recompute"],
    "avoid_include": ["change-vpp", "activation-cpu-offload"],
    "never_recommend": ["activation-cpu-offload"],
    "mentions": ["expandable_segments:True"],
}

GOOD = """\
## Most likely cause
Allocator fragmentation: 59.5 GiB is reserved but unallocated while the request was 1 GiB.

## What to do, in order
1. Export `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` before launching.
2. If it still fails, use selective recompute (`recompute_granularity=selective`).

## Avoid
- Changing VPP: it moves the bubble, not the peak.
- Activation CPU offload needs PP=1.
"""

BAD = """\
The OOM is caused by activation memory. Enable activation CPU offload (`cpu_offloading=True`)
and raise TP to 8. Expandable segments will not help here.
"""

CHINESE = """\
## 原因
这是显存碎片问题，不是容量不足。

## 建议
1. 设置 `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`。
2. 如果仍然 OOM，开启选择性重计算。

## 不要做的事
- 调整 VPP 不会降低峰值。
- PP>1 时激活 CPU offload 不适用。
"""


def test_good_answer_passes_every_check(scorer):
    result = score(scenario(FRAG_EXPECT), scorer.read_markdown(GOOD))
    assert result.first_fix.got == "expandable-segments"
    assert result.cause.got == "fragmentation"
    assert result.avoid_include.missing == [] and result.fixes_include.missing == []
    assert result.violations == [] and result.mentions.missing == []
    assert result.passed


def test_bad_answer_fails_and_counts_the_violation(scorer):
    answer = scorer.read_markdown(BAD)
    result = score(scenario(FRAG_EXPECT), answer)
    assert answer.first_fix == "activation-cpu-offload"
    assert result.violations == ["activation-cpu-offload"]
    assert result.cause.got == "capacity-activations" and not result.cause.ok
    assert "expandable-segments" in answer.avoided and "expandable-segments" not in answer.recommended
    assert set(result.avoid_include.missing) == {"change-vpp", "activation-cpu-offload"}
    assert not result.passed


def test_chinese_answer_reads_like_the_english_one(scorer):
    answer = scorer.read_markdown(CHINESE)
    result = score(scenario(FRAG_EXPECT), answer)
    assert answer.first_fix == "expandable-segments"
    assert answer.top_cause == "fragmentation"
    assert {"change-vpp", "activation-cpu-offload"} <= set(answer.avoided)
    assert result.passed


@pytest.mark.parametrize(
    ("text", "avoided", "recommended"),
    [
        ("Don't raise TP, it costs 28% throughput.", {"increase-tp"}, set()),
        (
            "Instead of activation CPU offload, enable optimizer CPU offload.",
            {"activation-cpu-offload"},
            {"optimizer-cpu-offload"},
        ),
        ("If that doesn't help, try full recompute.", set(), {"full-recompute"}),
        (
            "Use expandable segments to avoid fragmentation and reduce MBS to 1.",
            set(),
            {"expandable-segments", "reduce-micro-batch"},
        ),
        (
            "Activation CPU offload is blocked because PP=4; raise PP instead.",
            {"activation-cpu-offload"},
            {"increase-pp"},
        ),
        ("Increase TP only as a last resort.", {"increase-tp"}, set()),
        ("不要提高 TP，而是开启选择性重计算。", {"increase-tp"}, {"selective-recompute"}),
        ("用选择性重计算而不是完全重计算。", {"full-recompute"}, {"selective-recompute"}),
    ],
)
def test_negated_sentences(scorer, text, avoided, recommended):
    answer = scorer.read_markdown(text)
    assert set(answer.avoided) == avoided
    assert set(answer.recommended) == recommended


def test_lead_in_paragraphs_set_the_meaning_of_the_list_below(scorer):
    answer = scorer.read_markdown(
        "Intro mentions nothing.\n\n**Avoid:**\n- raise TP\n- activation CPU offload\n\n"
        "Recommended, in order:\n1. selective recompute\n2. expandable segments\n"
    )
    assert set(answer.avoided) == {"increase-tp", "activation-cpu-offload"}
    assert answer.first_fix == "selective-recompute"
    assert answer.recommended == ["selective-recompute", "expandable-segments"]


def test_first_fix_comes_from_the_ordered_list_not_from_earlier_prose(scorer):
    answer = scorer.read_markdown(
        "You could also reduce MBS later.\n\n## Fix\n1. Set expandable segments.\n2. Raise PP to 8.\n"
    )
    assert answer.first_fix == "expandable-segments"


def test_table_rows_and_heading_style_answers(scorer):
    text = """\
# OOM diagnosis
## Most likely cause
### Fragmentation
## What to change, in this order
### 1. Expandable segments
Apply: `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`
### 2. Selective recompute
## Do not do this (or not first)
| Option | Why |
|---|---|
| Activation CPU offload | needs PP=1 |
## Already in place (no need to add again)
- distributed optimizer
"""
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "expandable-segments"
    assert answer.avoided == ["activation-cpu-offload"]
    assert "distributed-optimizer" not in answer.recommended + answer.avoided
    assert answer.top_cause == "fragmentation"


def test_table_verdict_cells_negate_their_row(scorer):
    answer = scorer.read_markdown(
        "| Option | Verdict |\n|---|---|\n| Activation CPU offload | ❌ blocked by PP=4 |\n"
        "| Expandable segments | ✅ do this first |\n"
    )
    assert answer.avoided == ["activation-cpu-offload"]
    assert answer.recommended == ["expandable-segments"]


def test_negated_cause_is_not_the_top_cause(scorer):
    answer = scorer.read_markdown("This is not fragmentation: the logits in FP32 are the peak.")
    assert answer.top_cause == "logits-loss-memory"


def test_longest_overlapping_match_wins():
    rec = Recognizer.from_recognize(
        [
            {"id": "short", "recognize": {"phrases": {"en": ["offload"]}}},
            {"id": "long", "recognize": {"phrases": {"en": ["optimizer CPU offload"]}}},
        ],
        "t",
    )
    assert [m.ident for m in rec.find("use optimizer-cpu offload, not offload")] == ["long", "short"]


def test_short_phrases_do_not_match_inside_longer_words():
    import re

    rx = re.compile(phrase_regex("raise TP"), re.IGNORECASE)
    assert rx.search("raise TP to 8") and rx.search("Raise tp")
    assert not rx.search("raise TPU quota")


@pytest.mark.parametrize("text, found", [
    ("Set Expandable-Segments and PYTORCH_CUDA_ALLOC_CONF", ["frag", "alloc"]),
    ("set expandable segments — 显存碎片", ["frag", "frag"]),  # text outside ASCII: the needle test still holds
    ("\u212aeep the e\u0445pandable segments off", []),  # Cyrillic 'х' is no 'x'
    ("turn on \u017felective recompute", ["sel"]),  # 'ſ' matches 's' case-insensitively: no needle may rule it out
    ("pytorch_cuda_\u0130lloc_conf? no: pytorch_cuda_alloc_conf", ["alloc"]),
    ("\u212aV cache, \u0131ncrease", ["kv", "more"]),  # the Kelvin sign is a 'k', dotless 'ı' an 'i'
])
def test_a_pattern_is_skipped_only_where_it_cannot_match(text, found):
    """Before a phrase or literal pattern runs, its longest word is looked for in the lower-cased text; that must
    never hide a match re.IGNORECASE finds (which also matches the Kelvin sign, 'ſ' and 'ı' to ASCII letters)."""
    import re

    rec = Recognizer.from_recognize([
        {"id": "frag", "recognize": {"phrases": {"en": ["expandable segments"], "zh": ["显存碎片"]}}},
        {"id": "alloc", "recognize": {"literals": ["PYTORCH_CUDA_ALLOC_CONF"]}},
        {"id": "kv", "recognize": {"phrases": {"en": ["KV cache"]}}},
        {"id": "more", "recognize": {"phrases": {"en": ["increase"]}}},
        {"id": "sel", "recognize": {"phrases": {"en": ["selective recompute"]}}},
    ], "t")
    assert [m.ident for m in rec.find(text)] == found  # and that is what the patterns alone find:
    sources = {"frag": [phrase_regex("expandable segments"), phrase_regex("显存碎片")],
               "alloc": [literal_regex("PYTORCH_CUDA_ALLOC_CONF")], "kv": [phrase_regex("KV cache")],
               "more": [phrase_regex("increase")], "sel": [phrase_regex("selective recompute")]}
    assert set(found) == {ident for ident, regexes in sources.items() for rx in regexes if re.search(rx, text, re.I)}


def test_bad_recognize_regex_is_a_user_error():
    from memtune.errors import UserError

    with pytest.raises(UserError, match="fixes.yaml: x: recognize pattern"):
        Recognizer.from_recognize([{"id": "x", "recognize": {"patterns": ["("]}}], "fixes.yaml")


def test_negation_is_scoped_to_the_clause():
    grading = Grading.load()
    text = "Do not change VPP; set expandable segments."
    before, after = grading.negation_before, grading.negation_after
    assert negated(text, text.index("VPP"), text.index("VPP") + 3, before, after)
    start = text.index("expandable")
    assert not negated(text, start, start + 19, before, after)


def test_json_answer_uses_rank_order_and_avoid_list():
    diagnosis = {
        "causes": [{"id": "fragmentation", "confidence": 0.9}, {"id": "capacity-activations", "confidence": 0.3}],
        "fixes": [{"id": "selective-recompute", "rank": 2}, {"id": "expandable-segments", "rank": 1}],
        "avoid": [{"id": "change-vpp", "reason": "..."}],
        "violations": [],
    }
    answer = Scorer.read_json(diagnosis, "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n")
    result = score(scenario({**FRAG_EXPECT, "avoid_include": ["change-vpp"]}), answer)
    assert answer.first_fix == "expandable-segments"
    assert answer.recommended == ["expandable-segments", "selective-recompute"]
    assert result.passed


def test_json_answer_recommending_a_blocked_fix_is_a_violation():
    answer = Scorer.read_json({"fixes": [{"id": "activation-cpu-offload", "rank": 1}]})
    result = score(scenario({"never_recommend": ["activation-cpu-offload", "increase-tp"]}), answer)
    assert result.violations == ["activation-cpu-offload"]


def test_metrics_aggregate_micro_recalls_and_categories(scorer):
    good = score(scenario(FRAG_EXPECT, "a"), scorer.read_markdown(GOOD))
    bad = score(scenario(FRAG_EXPECT, "b", "other"), scorer.read_markdown(BAD))
    broken = failed(scenario({"first_fix": ["find-first-failing-rank"]}, "c", "other"), "agent exited 1")
    result = metrics([good, bad, broken])
    assert result["scenarios"] == 3 and result["errors"] == 1 and result["passed"] == 1
    assert result["first_fix_accuracy"] == round(1 / 3, 4)
    assert result["cause_accuracy"] == 0.5
    assert result["avoid_recall"] == 0.5  # 2 of 4 expected avoids
    assert result["violations"] == 1
    assert result["per_category"]["fragmentation"]["first_fix_accuracy"] == 1.0
    assert result["per_category"]["other"]["cause_accuracy"] == 0.0
    assert result["per_scenario"][2]["error"] == "agent exited 1"
    assert set(result) >= {
        "scenarios",
        "first_fix_accuracy",
        "cause_accuracy",
        "include_recall",
        "avoid_recall",
        "violations",
        "mentions_recall",
        "per_category",
        "per_scenario",
    }


def test_metric_is_none_when_no_scenario_expects_it(scorer):
    result = metrics([score(scenario({"never_recommend": ["increase-tp"]}), scorer.read_markdown(GOOD))])
    assert result["first_fix_accuracy"] is None and result["mentions_recall"] is None


def _mini_kb(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    kb.mkdir()
    ids = [f["id"] for f in yaml.safe_load(FIXES.read_text())["fixes"]]
    index = {"kb_version": "t", "tables": ["fixes"], "required_ids": {"causes": ["fragmentation"], "fixes": ids}}
    (kb / "index.yaml").write_text(yaml.safe_dump(index))
    (kb / "fixes.yaml").write_text(FIXES.read_text())
    return kb


def test_runner_scores_answers_for_scenarios_outside_the_repo(tmp_path, capsys):
    kb = _mini_kb(tmp_path)
    scen, answers = tmp_path / "scen", tmp_path / "answers"
    scen.mkdir(), answers.mkdir()
    doc = {
        "id": "frag-one",
        "category": "fragmentation",
        "language": "en",
        "question": "Why does it OOM?",
        "expect": {"cause": ["fragmentation"], "first_fix": ["expandable-segments"]},
        "source": "test case",
        "ground_truth": "Fragmentation; set expandable segments first.",
    }
    (scen / "frag-one.yaml").write_text(yaml.safe_dump(doc))
    (answers / "frag-one.md").write_text(GOOD)
    rc = run.main(
        [
            "--scenarios",
            str(scen),
            "--answers",
            str(answers),
            "--knowledge",
            str(kb),
            "--format",
            "json",
            "--min-first-fix",
            "1.0",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["first_fix_accuracy"] == 1.0 and out["per_scenario"][0]["passed"]


def test_runner_errors_and_gates_exit_non_zero(tmp_path, capsys):
    kb = _mini_kb(tmp_path)
    scen, answers = tmp_path / "scen", tmp_path / "answers"
    scen.mkdir(), answers.mkdir()
    doc = {
        "id": "a",
        "category": "c",
        "language": "en",
        "question": "Why does it OOM?",
        "expect": {"first_fix": ["expandable-segments"]},
        "source": "test case",
        "ground_truth": "x" * 20,
    }
    (scen / "a.yaml").write_text(yaml.safe_dump(doc))
    base = ["--scenarios", str(scen), "--knowledge", str(kb)]
    assert run.main([*base, "--answers", str(answers)]) == 1  # missing answer file: runner error
    (answers / "a.md").write_text(BAD)
    assert run.main([*base, "--answers", str(answers)]) == 0  # a wrong answer is a score, not an error
    assert run.main([*base, "--answers", str(answers), "--min-first-fix", "0.5"]) == 1
    assert run.main([*base, "--agent-cmd", _agent("sys.stdin.read(); print('1. expandable segments')")]) == 0
    assert run.main([*base, "--agent-cmd", "no-such-agent-program-xyz"]) == 1  # cannot start: runner error
    assert run.main([*base, "--agent-cmd", "my-agent 'unclosed"]) == 2  # cannot be split: bad input
    doc["expect"] = {"first_fix": ["no-such-fix"]}
    (scen / "a.yaml").write_text(yaml.safe_dump(doc))
    assert run.main([*base, "--answers", str(answers)]) == 2
    assert "no-such-fix" in capsys.readouterr().err


def _agent(code: str) -> str:
    """An --agent-cmd line running ``code`` in this Python."""
    return shlex.join([sys.executable, "-c", "import os, sys; " + code])


def test_agent_command_runs_without_a_shell_and_with_a_minimal_environment(scorer, monkeypatch):
    monkeypatch.setenv("MEMTUNE_TEST_SECRET", "hunter2")
    seen = (
        "sys.stdin.read(); print('1. expandable segments'); "
        "print(os.environ.get('MEMTUNE_SCENARIO_ID'), os.environ.get('MEMTUNE_TEST_SECRET'), sys.argv[1:])"
    )
    produced = producers.from_agent(scenario({}, "a"), _agent(seen) + " $HOME ; echo injected", scorer, 30)
    assert produced.error is None and produced.answer.recommended == ["expandable-segments"]
    # the scenario id arrives, the unlisted variable does not, and shell syntax reaches the agent as plain words
    assert "a None ['$HOME', ';', 'echo', 'injected']" in produced.raw[".md"]
    names = set(producers.agent_env(scenario({}, "a")))
    assert names <= {*producers.AGENT_ENV_PASSED, "MEMTUNE_SCENARIO", "MEMTUNE_SCENARIO_ID"}
    # --agent-env opts a named variable in (an API key the agent needs), and only that one
    passed = producers.agent_env(scenario({}, "a"), ("MEMTUNE_TEST_SECRET",))
    assert passed["MEMTUNE_TEST_SECRET"] == "hunter2"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return True


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups")
def test_agent_timeout_kills_its_grandchildren_too(scorer, tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    spawn = (f"import subprocess; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
             f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time_ = __import__('time'); time_.sleep(300)")
    started = time.monotonic()
    produced = producers.from_agent(scenario({}, "a"), _agent(spawn), scorer, 1)
    assert "timed out after 1 s" in produced.error and time.monotonic() - started < 15
    grandchild = int(pidfile.read_text())
    for _ in range(50):
        if not _alive(grandchild):
            break
        time.sleep(0.1)
    assert not _alive(grandchild)


def test_agent_output_is_capped_and_the_agent_stopped(scorer):
    started = time.monotonic()
    flood = _agent("sys.stdin.read()\nwhile True: sys.stdout.write('y' * 65536)")
    produced = producers.from_agent(scenario({}, "a"), flood, scorer, 60)
    assert "passed 512 KiB" in produced.error and time.monotonic() - started < 20


def test_labelled_lines_are_refiled(scorer):
    answer = scorer.read_markdown(
        "## Fix\n1. Set expandable segments.\n   - Undo: drop expandable segments again\n"
        "   - Sources: PR #3107 compared VPP 5 and 10\n2. Avoid: raise TP\n"
    )
    assert answer.recommended == ["expandable-segments"]
    assert answer.avoided == ["increase-tp"]


def test_grading_cause_phrases_cover_exactly_the_kb_causes():
    required = yaml.safe_load((SKILL / "knowledge" / "index.yaml").read_text())["required_ids"]["causes"]
    phrases = Grading.load().cause_phrases
    assert set(phrases) == set(required)
    assert all(p.get("en") and p.get("zh") for p in phrases.values())


@functools.cache  # built once (0.14 s): the tests only read with it
def _real_scorer() -> Scorer:
    from benchmarks.scenario import kb_entries

    if not any(f.get("recognize") for f in kb_entries("fixes")):
        pytest.skip("knowledge/fixes.yaml has no recognize blocks yet")
    return Scorer.from_kb()


def test_each_kb_fix_recognises_its_own_literals_and_phrases():
    from benchmarks.scenario import kb_entries

    scorer = _real_scorer()
    for fix in kb_entries("fixes"):
        spec = fix.get("recognize") or {}
        samples = [*(spec.get("literals") or []), *((spec.get("phrases") or {}).get("en") or [])]
        samples += (spec.get("phrases") or {}).get("zh") or []
        for sample in samples:
            found = [m.ident for m in scorer.fixes.find(sample)]
            assert found[:1] == [fix["id"]], f"{fix['id']}: {sample!r} is read as {found}"


def test_our_markdown_answer_reads_like_our_json_answer(diagnosed):
    """The free-text scorer must agree with diagnose's JSON on diagnose's own Markdown."""
    from benchmarks.producers import from_diagnose_runs
    from benchmarks.scenario import load_scenarios

    scorer = _real_scorer()
    checked = 0
    for scen in sweep(load_scenarios(), 25, most=20):  # every scenario in CI's full-sweep step
        produced = from_diagnose_runs(*diagnosed(scen))
        if produced.answer is None or not produced.answer.first_fix:
            continue
        text = scorer.read_markdown(produced.raw[".md"])
        assert text.first_fix == produced.answer.first_fix, scen.id
        assert set(produced.answer.avoided) <= set(text.avoided), scen.id
        checked += 1
    if not checked:
        pytest.skip("diagnose answered no scenario with a fix")


def test_ids_written_verbatim_are_recognised(scorer):
    answer = scorer.read_markdown("**Most likely cause** (`capacity-activations`)\n\n## Fix\n1. `reduce-micro-batch`\n")
    assert answer.top_cause == "capacity-activations" and answer.first_fix == "reduce-micro-batch"


# --------------------------------------------------------------------------- reading an answer's structure


@pytest.mark.parametrize("text, first, not_recommended", [
    # a fix named while explaining the cause does not outrank the labelled recommendation
    ("PYTORCH_CUDA_ALLOC_CONF has expandable_segments:True, which needs NCCL_GRAPH_REGISTER=0.\n\n"
     "Fix:\n\n```bash\nexport NCCL_GRAPH_REGISTER=0\n```\n", "nccl-graph-register-off", []),
    ("原因是配置冲突。\n\n改法：在启动脚本里加一行：\n\n```bash\nexport NCCL_GRAPH_REGISTER=0\n```\n",
     "nccl-graph-register-off", []),
    # replace X with Y: X is advice against
    ("## Fix\nReplace full recompute with selective recompute:\n\n"
     "```\nmodel.recompute_granularity=selective\n```\n", "selective-recompute", ["full-recompute"]),
    ("把 full recompute 换成 selective recompute。", "selective-recompute", ["full-recompute"]),
    # a condition the user does not meet is an option, the plan's next step is a recommendation
    ("Set expandable segments.\n\nOnly if you move to TP2 + SP, enable sequence_parallel_input_regather.\n",
     "expandable-segments", ["lora-input-regather"]),
    # kept as it is: neither for nor against
    ("selective recompute 已经打开，保持不动即可。先做：export NCCL_GRAPH_REGISTER=0", "nccl-graph-register-off",
     ["selective-recompute"]),
    # a YAML snippet's nested keys are read as the Hydra overrides they are
    ("Do this:\n\n```yaml\nmodel:\n  context_parallel_size: 4\n```\n", "increase-cp", []),
])
def test_the_primary_recommendation_is_read_by_structure(text, first, not_recommended):
    answer = _real_scorer().read_markdown(text)
    assert answer.first_fix == first, answer
    assert not set(not_recommended) & set(answer.recommended), answer.recommended


def test_a_restated_setting_the_answer_argues_against_is_not_recommended():
    text = ("别提 TP：TP2→4 几乎不省显存。\n\n改法：把 EP 提到 8：\n\n"
            "```bash\n--tensor-model-parallel-size 2 --expert-model-parallel-size 8\n```\n")
    answer = _real_scorer().read_markdown(text)
    assert answer.first_fix == "increase-ep" and "increase-tp" in answer.avoided
    assert "increase-tp" not in answer.recommended


def test_a_scenario_directory_without_language_or_ground_truth_scores_as_it_is(tmp_path, capsys):
    """The format outside scenario sets are written in: no `language`, no `ground_truth`."""
    scen, answers = tmp_path / "scen", tmp_path / "answers"
    scen.mkdir(), answers.mkdir()
    docs = {"en-case": "Llama3-70B SFT on 32xH100 OOMs at 58.8 GB with 18 GiB reserved but unallocated",
            "zh-case": "Llama3-70B 在 32 张 H100 上 OOM，reserved but unallocated 有 18 GiB，怎么办？"}
    for ident, question in docs.items():
        (scen / f"{ident}.yaml").write_text(yaml.safe_dump(
            {"id": ident, "category": "fragmentation", "question": question, "source": "an outside set",
             "expect": {"first_fix": ["expandable-segments"]}}, allow_unicode=True), encoding="utf-8")
        (answers / f"{ident}.md").write_text("## Fix\n1. export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n")
    assert run.main(["--scenarios", str(scen), "--answers", str(answers), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["first_fix_accuracy"] == 1.0
    assert {s["id"]: s["language"] for s in out["per_scenario"]} == {"en-case": "en", "zh-case": "zh"}


def test_each_verdict_carries_the_text_behind_it():
    answer = _real_scorer().read_markdown(
        "Background: expandable_segments is already set.\n\n## Change first\n\n"
        "```bash\nexport NCCL_GRAPH_REGISTER=0\n```\n\n## Avoid\n- lowering the micro-batch\n")
    assert answer.first_fix == "nccl-graph-register-off"
    assert answer.why["nccl-graph-register-off"].startswith("recommended (primary): «export NCCL_GRAPH_REGISTER=0")
    assert answer.why["reduce-micro-batch"].startswith("against (avoid section)")
    result = score(scenario({"first_fix": ["nccl-graph-register-off"], "never_recommend": ["reduce-micro-batch"]},
                            "w"), answer)
    assert set(result.why) == {"nccl-graph-register-off"} and result.first_fix.ok and not result.violations


def test_judge_verdicts_are_reported_beside_ours_with_the_disagreements(tmp_path, capsys):
    scen, answers = tmp_path / "scen", tmp_path / "answers"
    scen.mkdir(), answers.mkdir()
    for ident in ("one", "two"):
        (scen / f"{ident}.yaml").write_text(yaml.safe_dump(
            {"id": ident, "category": "fragmentation", "source": "a judge test case",
             "question": "Llama3-70B OOMs with 18 GiB reserved but unallocated",
             "expect": {"first_fix": ["expandable-segments"], "never_recommend": ["increase-tp"]}}))
        (answers / f"{ident}.md").write_text("## Fix\n1. export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n")
    # the judge reads scenario "two" differently: it says the answer raises TP first
    judge_code = ("import json; req = json.load(sys.stdin); sid = req['scenario']['id']; "
                  "assert 'expandable-segments' in req['scenario']['fix_ids'] and req['answer'].startswith('## Fix'); "
                  "print(json.dumps({'first_fix': 'expandable-segments' if sid == 'one' else 'increase-tp'}))")
    assert run.main(["--scenarios", str(scen), "--answers", str(answers), "--format", "json",
                     "--judge-cmd", _agent(judge_code)]) == 0
    part = json.loads(capsys.readouterr().out)["judge"]
    assert part["judged"] == 2 and part["errors"] == {}
    assert part["rules"]["first_fix_accuracy"] == 1.0 and part["judge"]["first_fix_accuracy"] == 0.5
    found = {(d["scenario"], d["measure"]) for d in part["disagreements"]}
    assert found == {("two", "first_fix"), ("two", "violations")}
    nonsense = _agent("print('nonsense')")
    assert run.main(["--scenarios", str(scen), "--answers", str(answers), "--judge-cmd", nonsense]) == 0
    assert "judge verdict is not usable" in capsys.readouterr().out


@pytest.mark.parametrize("text, against, recommended", [
    # writing a fix's own setting with the opposite state turns it off: advice against
    ("改法：\n\n```\nmodel.cpu_offloading=false\nmodel.fine_grained_activation_offloading=true\n```\n",
     "activation-cpu-offload", "fine-grained-activation-offload"),
    ("## Fix\n```\nmodel.recompute_granularity=selective\nmodel.recompute_method=null\n```\n",
     "full-recompute", "selective-recompute"),
])
def test_a_setting_written_with_the_opposite_state_argues_against_its_fix(text, against, recommended):
    answer = _real_scorer().read_markdown(text)
    assert against in answer.avoided and against not in answer.recommended
    assert answer.first_fix == recommended


def test_switches_come_from_each_fix_s_own_apply_lines():
    switches = _real_scorer().switches
    assert switches["activation-cpu-offload"]["cpu_offloading"] is True
    assert "recompute_granularity" not in switches["activation-cpu-offload"]  # a companion it turns off
    assert switches["disable-nccl-nvls"]["nccl_nvls_enable"] is False


def test_a_command_line_repeating_the_run_s_own_settings_is_not_a_recommendation():
    text = ("## Fix\n\n```yaml\noptimizer:\n  use_distributed_optimizer: true\n"
            "  use_precision_aware_optimizer: true\n```\n")
    inputs = {"config": {"optimizer": {"use_distributed_optimizer": True}}}
    scorer = _real_scorer()
    assert scorer.read_markdown(text).first_fix == "distributed-optimizer"  # without the run, both read as advice
    answer = scorer.read_markdown(text, inputs)
    assert answer.first_fix == "precision-aware-optimizer" and "distributed-optimizer" not in answer.recommended
    flags = "Fix:\n\n```bash\n--use-distributed-optimizer \\\n--tensor-model-parallel-size 2\n```\n"
    assert scorer.read_markdown(flags, {"config": {"model": {"tensor_model_parallel_size": 2}}}).first_fix == \
        "distributed-optimizer"


def test_perf_script_short_flags_are_read_against_the_run_s_layout():
    text = ("Fix:\n\n```bash\npython scripts/performance/setup_experiment.py -tp 1 -ep 8 -mb 1 \\\n"
            "  --cuda_graph_impl transformer_engine --cuda_graph_scope attn,moe_router\n```\n")
    inputs = {"config": {"model": {"tensor_model_parallel_size": 1}, "train": {"micro_batch_size": 1}}}
    answer = _real_scorer().read_markdown(text, inputs)
    assert "reduce-micro-batch" not in answer.recommended  # -mb 1 at MBS 1 repeats the layout
    assert answer.first_fix == "narrow-cuda-graph-scope"


def test_the_benchmarks_markdown_is_what_diagnose_prints_as_markdown(diagnosed):
    """diagnose_runs renders the Markdown from the JSON run's report instead of diagnosing twice: it must be the text
    ``diagnose --format markdown`` prints for the same scenario (en and zh answers)."""
    import tempfile
    from pathlib import Path

    from benchmarks.producers import _run_memtune, diagnose_argv
    from benchmarks.scenario import load_scenarios

    scenarios = load_scenarios()
    picked = [s for s in scenarios if s.language == "zh"][:2] + [s for s in scenarios if s.language == "en"][:2]
    for scen in picked:
        with tempfile.TemporaryDirectory() as tmp:
            printed = _run_memtune(diagnose_argv(scen, Path(tmp), "markdown"))
        assert diagnosed(scen)[1][:2] == printed[:2], scen.id


def test_our_diagnose_in_parallel_scores_like_one_process(tmp_path):
    """--jobs spreads our diagnose over processes; the report is the same, scenario for scenario, in order."""
    only = ["--only", "fragmentation-cosmos-rl-388", "--only", "capacity-model-state-llava-155",
            "--only", "not-an-oom-cogvlm-394", "--only", "host-oom-metaseq-589"]
    reports = []
    for jobs in ("1", "2"):
        out = tmp_path / f"jobs{jobs}.json"
        assert run.main([*only, "--format", "json", "--jobs", jobs, "--output", str(out)]) == 0
        reports.append(json.loads(out.read_text()))
    assert reports[0] == reports[1] and reports[0]["scenarios"] == 4
