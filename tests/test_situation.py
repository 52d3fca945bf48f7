"""The situation model: what failed, when, where, how memory moves, what changed - and what it does to the causes.

Every cause's situation examples (knowledge/causes.yaml) run through the whole engine here, as semgrep runs a
rule's examples; the unit tests below pin the readers one mechanism at a time.
"""

import contextlib
import io
import json
import subprocess
import sys

import pytest
from conftest import ROOT, SKILL
from memtune import cli, knowledge, pipeline
from memtune.facts import Facts, LogFacts, QuestionFacts, TrainingConfig
from memtune.inputs.oom_log import parse_log
from memtune.inputs.question import parse_question
from memtune.situation import Stated, read_situation

GIB = 2**30
LAUNCHER = [sys.executable, str(SKILL / "scripts" / "memtune.py")]


def _examples():
    kb = knowledge.load()
    return [(cause["id"], i, ex) for cause in kb.entries("causes")
            for i, ex in enumerate((cause.get("situation") or {}).get("examples") or [])]


@pytest.mark.parametrize("cause_id, index, example", _examples(), ids=lambda v: v if isinstance(v, str) else None)
def test_each_cause_example_runs_through_the_engine(cause_id, index, example, kb):
    inputs = pipeline.Inputs(question=example.get("question"), gpu=example.get("gpu"),
                             log=example["log"].splitlines() if example.get("log") else None)
    _, flat, diag = pipeline.run(inputs, kb)
    expect = example["expect"]
    if "top_cause" in expect:
        assert diag.causes and diag.causes[0].id == expect["top_cause"], [c.id for c in diag.causes]
    if "first_fix" in expect:
        assert diag.fixes and diag.fixes[0].id == expect["first_fix"], [f.id for f in diag.fixes]
    for ruled in expect.get("ruled_out", []):
        assert ruled in diag.ruled_out and ruled not in {c.id for c in diag.causes}
    assert set(expect.get("avoided", [])) <= {a.id for a in diag.avoid}
    for name in ("phase", "failed", "where", "trend", "process"):
        if name in expect:
            assert flat[f"situation.{name}"] == expect[name], name


def test_every_cause_says_how_to_tell_it_apart(kb):
    """The check an answer offers when the evidence is thin (causes.yaml situation.check), in both languages."""
    for cause in kb.entries("causes"):
        check = (cause.get("situation") or {}).get("check") or {}
        assert check.get("en") and check.get("zh"), cause["id"]


# --- what failed: the request against the shapes the config implies ------------------------------------------------


def _facts(log=None, config=None, question=None, gpu_bytes=None):
    facts = Facts(log=log or LogFacts(), config=config or TrainingConfig(), question=question or QuestionFacts())
    if gpu_bytes:
        facts.gpu.capacity_bytes = gpu_bytes
    return facts


def test_a_request_larger_than_the_gpu_is_impossible(kb):
    sit = read_situation(_facts(LogFacts(requested_bytes=2.27 * 1024 * GIB, capacity_bytes=79.11 * GIB)), kb)
    assert sit.failed.value == "impossible" and "2.27 TiB" in sit.failed.clues[0].text


def test_logits_only_for_token_counts_the_run_implies(kb):
    cfg = TrainingConfig(vocab_size=151936, seq_length=4096, micro_batch_size=4, tensor_model_parallel_size=1)
    logits = 4 * 4096 * 151936 * 4
    sit = read_situation(_facts(LogFacts(requested_bytes=logits, capacity_bytes=79.11 * GIB), cfg), kb)
    assert sit.failed.value == "logits" and "micro-batch 4 x sequence 4,096" in sit.failed.clues[0].text
    # a size that is some other number of tokens x the vocabulary is not read as logits (3 of the 4 sequences here)
    sit = read_situation(_facts(LogFacts(requested_bytes=logits * 0.75, capacity_bytes=79.11 * GIB), cfg), kb)
    assert sit.failed is None
    # the vocabulary of a stand-in preset proves nothing
    approx = TrainingConfig(vocab_size=151936, seq_length=4096, micro_batch_size=4, approximate_shape="qwen3-8b")
    log = LogFacts(requested_bytes=logits, capacity_bytes=79.11 * GIB)
    assert read_situation(_facts(log, approx), kb).failed is None


def test_a_batch_the_question_states_counts_toward_the_tokens(kb):
    cfg = TrainingConfig(vocab_size=151936, seq_length=4096, micro_batch_size=1)
    q = parse_question("NeMo-RL GRPO, logprob_batch_size 4, max_total_sequence_length 4096", kb)
    sit = read_situation(_facts(LogFacts(requested_bytes=9.27 * GIB, capacity_bytes=79.11 * GIB), cfg, q), kb)
    assert sit.failed.value == "logits" and "batch 4" in sit.failed.clues[0].text


# --- when: frames of the failing traceback, pasted traces, the user's words -----------------------------------------


def test_phase_from_the_frames_of_the_failing_traceback(kb):
    log = parse_log("\n".join([
        "Traceback (most recent call last):",
        '  File "/opt/megatron/training/checkpointing.py", line 401, in save_checkpoint',
        "    state_dict = generate_state_dict(args, model, optimizer)",
        '  File "/opt/megatron/core/dist_checkpointing/serialization.py", line 390, in save',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.11 GiB of which 1.00 GiB is free. Including non-PyTorch memory, this process has 78.10 GiB memory in "
        "use. Of the allocated memory 74.00 GiB is allocated by PyTorch, and 1.50 GiB is reserved by PyTorch but "
        "unallocated.",
    ]), kb)
    sit = read_situation(_facts(log), kb)
    assert sit.phase.value == "checkpoint-save" and sit.phase.source == "log"


def test_names_in_code_lines_are_not_frames(kb):
    """'output_tensor, loss_func = forward_step_func(...)' names loss_func as a variable, not a frame."""
    log = parse_log("\n".join([
        "Traceback (most recent call last):",
        '  File "/opt/megatron/core/pipeline_parallel/schedules.py", line 465, in forward_step',
        "    output_tensor, loss_func = forward_step_func(data_iterator, model)",
        '  File "/opt/megatron/core/transformer/mlp.py", line 198, in forward',
        "    intermediate = self.activation_func(intermediate)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB.",
    ]), kb)
    assert read_situation(_facts(log), kb).phase.value == "forward"


def test_a_pasted_arrow_trace_is_read_for_its_frames(kb):
    text = "MegatronPolicyWorker.train\n  -> get_logprobs (model_utils.py:1383)\n  -> compute_log_probs (x.py:12)\n"
    sit = read_situation(_facts(LogFacts(provided=True)), kb, log_text=text)
    # the same function computes a training loss inside .train: not a log-prob pass
    assert sit.phase.value == "loss"
    sit = read_situation(_facts(LogFacts(provided=True)), kb, log_text="  -> compute_ref_log_prob (ref.py:3)\n")
    assert sit.phase.value == "rl-logprob"


@pytest.mark.parametrize("text, phase", [
    ("It trains fine but OOMs every time it saves a checkpoint.", "checkpoint-save"),
    ("保存 checkpoint 的时候爆显存了", "checkpoint-save"),
    ("用 hf2mcore 的脚本转成 mcore 格式时 OOM", "conversion"),
    ("Resuming from the checkpoint OOMs, but training from scratch fits.", "checkpoint-load"),
    ("The ref log prob pass runs out of memory.", "rl-logprob"),
    ("在建 DistributedOptimizer 的时候就 OOM 了", "model-build"),
])
def test_phase_from_the_users_words(text, phase, kb):
    assert read_situation(_facts(question=parse_question(text, kb)), kb).phase.value == phase


def test_the_phase_named_beside_the_failure_wins(kb):
    """'resume' is context here; the OOM is in the log-prob pass."""
    q = parse_question("We resumed from step 200. Now the old log prob pass OOMs.", kb)
    assert read_situation(_facts(question=q), kb).phase.value == "rl-logprob"


def test_host_memory_counts_only_where_the_user_says_it_ran_out(kb):
    q = parse_question("转换 7B 时在 24G 显存的 A10 上直接 OOM。能不能卸载到 CPU 内存转换？", kb)
    assert read_situation(_facts(question=q), kb).process is None
    q = parse_question("Saving the checkpoint, the host memory runs out and the job is killed.", kb)
    assert read_situation(_facts(question=q), kb).process.value == "host"


# --- where and how it moves: per-rank and per-iteration memory lines ------------------------------------------------


def test_memory_that_rises_every_report_grows(kb):
    log = LogFacts(provided=True, report_series=[(1, 40 * GIB), (10, 44 * GIB), (20, 46 * GIB), (30, 48 * GIB)])
    sit = read_situation(_facts(log), kb)
    assert sit.trend.value == "grows" and sit.trend.source == "log"
    flat = LogFacts(provided=True, report_series=[(1, 40 * GIB), (10, 44 * GIB), (20, 44.1 * GIB), (30, 44 * GIB)])
    assert read_situation(_facts(flat), kb).trend.value == "constant"


def test_trend_is_read_from_megatron_memory_lines(kb):
    lines = [f"[Rank 0] (after {i} iterations) memory (MB) | allocated: {30000 + 400 * i} | max allocated: "
             f"{40000 + 400 * i} | reserved: 60000 | max reserved: 60000" for i in (10, 20, 30, 40, 50)]
    sit = read_situation(_facts(parse_log("\n".join(lines), kb)), kb)
    assert sit.trend.value == "grows"


def test_the_first_stage_at_the_limit_is_read_from_per_rank_lines(kb):
    facts = _facts(LogFacts(provided=True))
    facts.stats = {"peak_rank_allocated_ratio": 1.3, "ranks_reported": [0, 8, 16, 24], "peak_rank": 0}
    assert read_situation(facts, kb).where.value == "first-stage"


# --- what changed, what was tried -------------------------------------------------------------------------------


def test_changes_and_tries_from_the_users_clauses(kb):
    q = parse_question("After upgrading the container it OOMs at iteration 3. Same config, it passes with the old "
                       "one. I tried expandable_segments:True, no effect.", kb)
    sit = read_situation(_facts(question=q), kb)
    assert [r.value for r in sit.changed] == ["stack"] and sit.worked_before
    assert "expandable-segments" in [r.value for r in sit.tried]
    assert "expandable-segments" in [r.value for r in sit.no_effect]


# --- what the agent states outranks the words ----------------------------------------------------------------------


def test_what_the_agent_states_wins(kb):
    q = parse_question("It OOMs while saving a checkpoint.", kb)
    sit = read_situation(_facts(question=q), kb, Stated(phase="rl-weight-sync", trend="grows"))
    assert (sit.phase.value, sit.phase.source) == ("rl-weight-sync", "agent")
    assert sit.trend.value == "grows"


def test_cli_flags_are_validated_and_listed_in_help():
    proc = subprocess.run([*LAUNCHER, "diagnose", "--question", "OOM", "--phase", "lunch"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "--phase 'lunch': not a known name" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    helptext = subprocess.run([*LAUNCHER, "diagnose", "--help"], capture_output=True, text=True, cwd=ROOT,
                              timeout=120).stdout
    assert "--phase {" in helptext and "rl-logprob" in helptext and "--trend {" in helptext


def _stdout(argv: list[str]) -> str:
    """memtune's answer, run in-process (the launcher's own checks are the test above's)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(argv) == 0
    return out.getvalue()


def test_the_answer_starts_with_the_situation_as_read():
    args = ["diagnose", "--question", "NeMo-RL GRPO: the ref log prob pass OOMs at the first step",
            "--phase", "rl-logprob", "--framework", "nemo-rl"]
    md = _stdout(args)
    first = [line for line in md.splitlines()[1:] if line.strip()][0]
    assert first.startswith("**Situation as read:**") and "log-prob" in first
    data = json.loads(_stdout([*args, "--format", "json"]))
    assert data["situation"]["fields"]["phase"]["source"] == "agent"
    assert "capacity-activations" in {c["id"] for c in data["situation"]["ruled_out"]}
    assert "capacity-activations" not in {c["id"] for c in data["causes"]}


def test_a_contradicted_cause_is_never_proposed(kb):
    """A checkpoint save has no activations: no activation fix leads, whatever else the words suggest."""
    inputs = pipeline.Inputs(question="Llama3-8B 32K sequence, micro batch 4: it OOMs while saving the checkpoint",
                             stated=Stated(phase="checkpoint-save"))
    _, _, diag = pipeline.run(inputs, kb)
    assert "capacity-activations" in diag.ruled_out
    assert diag.causes[0].id == "checkpoint-save"
    assert diag.fixes[0].id not in {"selective-recompute", "full-recompute", "reduce-micro-batch"}


def test_thin_evidence_names_candidates_with_their_checks(kb):
    from memtune import report

    _, flat, diag = pipeline.run(pipeline.Inputs(question="My Megatron job OOMs sometimes. What should I change?"), kb)
    rep = report.build(diag, flat, kb, "en")
    candidates = rep["situation"]["candidates"]
    if candidates:  # a confident answer needs evidence; when there is none, each remaining cause comes with its check
        assert len(candidates) >= 2 and all(c["check"] for c in candidates)


def test_memory_growth_mentions_no_grad_among_its_mechanisms(kb):
    check = kb.get("causes", "memory-growth")["situation"]["check"]["en"]
    assert "torch.no_grad()" in check and "memtune compare" in check
