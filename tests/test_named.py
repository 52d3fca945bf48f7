"""The names a user types (settings, flags, environment variables, classes, files): read as typed, in order, once
each, and matched to the fix that sets them, so the answer says which of them the helper knows."""

import contextlib
import io
import json

import pytest
from memtune import cli
from memtune.inputs.question import named_in, parse_question
from memtune.names import known_names


def _texts(text, kb):
    return [n["text"] for n in named_in(text, kb.tables["vocabulary"])]


@pytest.mark.parametrize("text, expected", [
    # flags with a number or switch, as typed (a space or "="), and the Chinese text around them
    ("所以将 --max_length 8192 --max_completion_length 2048 设置成这样",
     ["--max_length 8192", "--max_completion_length 2048"]),
    # a dotted config path and an environment variable with its value
    ("raising rollout.checkpoint_engine.update_weights_bucket_megabytes did not help; NCCL_CUMEM_ENABLE=0 is set",
     ["rollout.checkpoint_engine.update_weights_bucket_megabytes", "NCCL_CUMEM_ENABLE=0"]),
    # a setting written next to Chinese words, a class, a file
    ("offload_optimizer和offload_model都设置成了true, LazyInit 在 train.sh 里", ["offload_optimizer", "offload_model",
                                                                           "LazyInit", "train.sh"]),
    # a product name shaped like a class is not a name; a URL's path is not a setting
    ("DeepSpeed ZeRO-3 vs https://github.com/a/b_c", []),
])
def test_names_are_read_as_typed(text, expected, kb):
    assert _texts(text, kb) == expected


def test_a_name_is_listed_once_across_spellings_and_keeps_its_value(kb):
    text = "--max-tokens-per-gpu is high; I set max_tokens_per_gpu=9216 after that"
    named = named_in(text, kb.tables["vocabulary"])
    assert [n["key"] for n in named] == ["max_tokens_per_gpu"]
    assert named[0]["text"] == "max_tokens_per_gpu=9216"


def test_names_map_to_the_fix_that_sets_them_a_run_setting_or_nothing(kb):
    text = ("gpu_memory_utilization=0.6, --optimizer-cpu-offload, recompute_granularity=full, "
            "recompute_granularity=selective, vocab_size=248320, --max_completion_length 2048")
    known = {n["text"]: (n["fix"], n["setting"]) for n in known_names(named_in(text, kb.tables["vocabulary"]), kb)}
    assert known["gpu_memory_utilization=0.6"] == ("shrink-colocated-engine", False)  # a framework line's last part
    assert known["--optimizer-cpu-offload"] == ("optimizer-cpu-offload", False)  # its recognizer literal
    assert known["recompute_granularity=full"] == ("full-recompute", False)  # the fix that sets that value
    assert known["vocab_size=248320"] == (None, True)  # no fix sets it, but the helper reads it from a config
    assert known["--max_completion_length 2048"] == (None, False)  # unknown to the knowledge base
    assert "recompute_granularity=selective" not in known  # the same name again: listed once, as first written


def _answer(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["diagnose", *args]) == 0
    return out.getvalue()


@pytest.mark.parametrize("lang, known_label, unknown_label", [
    ("en", "names you use that it knows", "names it does not know"),
    ("zh", "知识库认识的名称", "知识库不认识的名称"),
])
def test_the_answer_lists_known_and_unknown_names(lang, known_label, unknown_label):
    md = _answer("--question", "GRPO colocate: offload_optimizer=true but waking the engine OOMs; "
                 "--max_completion_length 2048", "--lang", lang)
    known = next(line for line in md.splitlines() if known_label in line)
    unknown = next(line for line in md.splitlines() if unknown_label in line)
    assert "`offload_optimizer=true` (`offload-trainer-states`)" in known
    assert "`--max_completion_length 2048`" in unknown and "max_completion" not in known


def test_json_lists_each_name_with_its_fix():
    out = json.loads(_answer("--question", "nccl_ub=True and --optimizer-cpu-offload; OOM", "--format", "json"))
    named = {n["text"]: n for n in out["situation"]["named"]}
    assert named["--optimizer-cpu-offload"]["fix"] == "optimizer-cpu-offload"
    assert set(named) == {"nccl_ub=True", "--optimizer-cpu-offload"}


def test_the_question_facts_carry_the_names(kb):
    q = parse_question("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True and nccl_ub=True", kb)
    assert [n["text"] for n in q.named] == ["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "nccl_ub=True"]
    assert json.loads(json.dumps(q.named)) == q.named
