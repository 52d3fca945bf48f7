"""Fuzz every input parser: each call returns its result type or raises UserError, never anything else.

Why: users hand memtune whatever their run left behind (truncated logs, hand-edited YAML, half-written
JSON, a pickle from another tool) and the CLI promises a one-line error and exit code 2, never a
traceback.  Seeds are the project's own fixtures; the mutations are the damage real files suffer
(flipped bytes, cut-off tails, duplicated or lost lines, stray unicode, absurd numbers, wrong YAML
types, broken JSON).  Each hypothesis test is kept small so the whole file runs in seconds.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import pickle
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memtune import knowledge
from memtune.errors import UserError
from memtune.facts import EnvFacts, LogFacts, QuestionFacts, TrainingConfig
from memtune.inputs.config import (
    BRIDGE_SECTIONS,
    FIELD_KINDS,
    SAME_NAME_SECTIONS,
    apply_overrides,
    load_yaml_tree,
    read_bridge_config,
    read_config,
)
from memtune.inputs.hf_config import read_hf_config
from memtune.inputs.launch_env import read_env
from memtune.inputs.megatron_args import read_megatron_args
from memtune.inputs.oom_log import parse_log
from memtune.inputs.question import parse_question
from memtune.inputs.snapshot import analyze_snapshot
from memtune.inputs.stats import read_memory_stats

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
FIX = ROOT / "tests" / "fixtures"
LOGS = sorted([*(FIX / "logs").glob("*.log"), *(SKILL / "examples").glob("*.log")])
CONFIGS = sorted((FIX / "configs").iterdir())
YAMLS = [p for p in CONFIGS if p.suffix == ".yaml" and "bad" not in p.name]
JSONS = [p for p in CONFIGS if p.suffix == ".json"]


def _snapshot_seeds() -> dict[str, Any]:
    """The fixture snapshots as data (the repository keeps their generator, not the pickles)."""
    sys.path.insert(0, str(FIX / "snapshots"))
    import make_snapshots

    return make_snapshots.snapshots()


SNAPSHOT_TREES = {Path(name): data for name, data in _snapshot_seeds().items()}
SNAPSHOTS = sorted(SNAPSHOT_TREES)
KB = knowledge.load()  # cached; a module global so hypothesis' falsifying examples do not print the whole KB
SEED_BYTES = {**{p: p.read_bytes() for p in [*LOGS, *CONFIGS]},
              **{p: pickle.dumps(data, protocol=4) for p, data in SNAPSHOT_TREES.items()}}

FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large, HealthCheck.large_base_example])

# Numbers no real config holds: past float range, past Python's 4300-digit int/str limit, negative, NaN.
HUGE = ["9" * 5000, "1" + "0" * 400, "1e999999", "-1e400", "18446744073709551617", "-9223372036854775809",
        "nan", "inf", "-0", "0x" + "f" * 40, "1_000", "1.5e308"]
# Built lazily (hypothesis may repr a sampled element, and repr of a 5000-digit int raises ValueError).
HUGE_INTS = st.sampled_from([(10, 5000), (10, 400), (2, 64), (-2, 63)]).map(lambda bp: bp[0] ** bp[1] + 1)
# A memory_stats() dump in its flat form, with figures in the range the stats tests use.
STATS_SEED = {"reserved_bytes.all.peak": 75161927680, "reserved_bytes.all.current": 68719476736,
              "allocated_bytes.all.peak": 60129542144, "allocated_bytes.all.current": 53687091200,
              "inactive_split_bytes.all.current": 9663676416, "num_alloc_retries": 12, "num_ooms": 1,
              "max_split_size": -1}
# Questions of the kind SKILL.md is asked, in both languages.
QUESTIONS = ["Llama3-70B SFT on 32xH100, TP4 PP4, OOMs at 58.8 GB",
             "DeepSeek-V3 pretraining on 256 H200, EP 64 PP 16, seq 4096, micro batch 1, CUDA OOM in backward",
             "Qwen3-30B-A3B LoRA 在 8 张 A100-80GB 上 OOM，TP2，序列长度 8192，怎么办？"]
ENV_SEED = ["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:512",
            "NCCL_GRAPH_REGISTER=0", "CUDA_DEVICE_MAX_CONNECTIONS=1"]


# --------------------------------------------------------------------------- the property


def holds(call: Callable[[], Any], result_type: type | tuple[type, ...], names: str | None = None) -> Any:
    """Run ``call``: it returns ``result_type`` or raises a one-line UserError (naming ``names`` if given)."""
    try:
        result = call()
    except UserError as exc:
        message = str(exc)
        assert message.strip(), "UserError with an empty message"
        assert "\n" not in message and "\r" not in message, f"multi-line error: {message!r}"
        if names is not None:
            assert names in message, f"error does not name {names!r}: {message!r}"
        return None
    assert isinstance(result, result_type), f"returned {type(result).__name__}, expected {result_type}"
    return result


# --------------------------------------------------------------------------- mutations


def _pos(draw: st.DrawFn, data: bytes) -> int:
    return draw(st.integers(0, len(data)))


def _flip(draw: st.DrawFn, data: bytes) -> bytes:
    if not data:
        return data
    i = draw(st.integers(0, len(data) - 1))
    return data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1:]


def _truncate(draw: st.DrawFn, data: bytes) -> bytes:
    return data[: _pos(draw, data)]


def _dup_line(draw: st.DrawFn, data: bytes) -> bytes:
    lines = data.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    return b"\n".join([*lines[: i + 1], *[lines[i]] * draw(st.integers(1, 3)), *lines[i + 1:]])


def _del_lines(draw: st.DrawFn, data: bytes) -> bytes:
    lines = data.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    return b"\n".join(lines[:i] + lines[i + draw(st.integers(1, 4)):])


def _unicode(draw: st.DrawFn, data: bytes) -> bytes:
    i = _pos(draw, data)
    text = draw(st.text(min_size=1, max_size=12))
    return data[:i] + text.encode("utf-8", "surrogatepass") + data[i:]


def _raw_bytes(draw: st.DrawFn, data: bytes) -> bytes:
    i = _pos(draw, data)
    return data[:i] + draw(st.binary(min_size=1, max_size=12)) + data[i:]


def _huge(draw: st.DrawFn, data: bytes) -> bytes:
    """Swap one number in the text for an absurd one (or insert one when there is none)."""
    numbers = [m.span() for m in re.finditer(rb"\d+(?:\.\d+)?", data)]
    big = draw(st.sampled_from(HUGE)).encode()
    if numbers:
        start, end = draw(st.sampled_from(numbers))
        return data[:start] + big + data[end:]
    i = _pos(draw, data)
    return data[:i] + big + data[i:]


MUTATIONS = (_flip, _truncate, _dup_line, _del_lines, _unicode, _raw_bytes, _huge)


@st.composite
def mutated(draw: st.DrawFn, seed: bytes) -> bytes:
    data = seed
    for _ in range(draw(st.integers(1, 4))):
        data = draw(st.sampled_from(MUTATIONS))(draw, data)
    return data


def mutants(paths: list[Path]) -> st.SearchStrategy[bytes]:
    return st.sampled_from(paths).flatmap(lambda p: mutated(SEED_BYTES[p]))


def argv_text(data: bytes) -> str:
    """Bytes as a command-line argument arrives in Python (undecodable bytes become surrogate escapes)."""
    return data.decode("utf-8", "surrogateescape")


# Values of the wrong kind for any slot in a config tree: YAML/JSON can hold every one of these.
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-(10**30), 10**30),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
                    st.sampled_from(HUGE), HUGE_INTS)
wrong_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                             st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                            max_leaves=8)


@st.composite
def retyped(draw: st.DrawFn, tree: Any) -> Any:
    """``tree`` with one to three slots (a section, a key in it, or the whole tree) replaced by a wrong value."""
    if not isinstance(tree, dict) or draw(st.integers(0, 9)) == 0:
        return draw(wrong_values)
    tree = copy.deepcopy(tree)
    for _ in range(draw(st.integers(1, 3))):
        node = tree
        keys = list(node)
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        if isinstance(node[key], dict) and node[key] and draw(st.booleans()):
            node, key = node[key], draw(st.sampled_from(list(node[key])))
        node[key] = draw(wrong_values)
    return tree


_BIG = "__huge_int__"


def _int_safe(value: Any) -> Any:
    """Neither dumper can write an int past Python's 4300-digit limit: mark it, then splice the digits in."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**4000:
        return _BIG
    if isinstance(value, dict):
        return {k: _int_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_int_safe(v) for v in value]
    return value


def _yaml_tree(path: Path) -> Any:
    return json.loads(json.dumps(load_yaml_tree(path.read_text(encoding="utf-8"), str(path))[0], default=str))


YAML_TREES = {p: _yaml_tree(p) for p in YAMLS}
JSON_TREES = {p: json.loads(p.read_text(encoding="utf-8")) for p in JSONS}


def _dump_yaml(tree: Any) -> bytes:
    import yaml

    text = yaml.safe_dump(_int_safe(tree), allow_unicode=True)
    return text.replace(_BIG, "9" * 5000).encode("utf-8", "surrogatepass")


def _dump_json(tree: Any) -> bytes:
    text = json.dumps(_int_safe(tree), ensure_ascii=False)
    return text.replace(f'"{_BIG}"', "9" * 5000).encode("utf-8", "surrogatepass")


# Inputs that break naive parsers: deep nesting, self-referencing anchors, numbers past every limit.
HOSTILE_YAML = ["model: &a [*a]\n", "model: " + "[" * 3000 + "]" * 3000 + "\n", "model:\n  num_layers: " + "9" * 5000,
                "model: !!python/object/apply:os.system ['true']\n", "model: !!binary AAAA\n",
                "? [a, b]\n: c\nmodel: {}\n", "model: null\ntrain: []\n", "- model\n- train\n",
                "model: {seq_length: .inf}\n", "model:\n  tensor_model_parallel_size: !!float nan\n",
                "model: {moe_layer_freq: '[1]*99999999999'}\n", "model: {moe_layer_freq: '([1]*9999)*9999*9999'}\n",
                "model: {pipeline_model_parallel_layout: '(t|)*99999999999'}\n", "model: \x7f\n"]
HOSTILE_JSON = ["[" * 100000, '{"a":' * 100000, '{"num_hidden_layers": ' + "9" * 5000 + "}", "NaN", "[]", '"x"',
                '{"num_hidden_layers": 1e999, "model_type": "llama"}', '{"model_type": ["llama"]}',
                '{"text_config": {"num_hidden_layers": -5, "hidden_size": 0}}', "\ufeff{}", '{"a": 1, "a": 2}']


# --------------------------------------------------------------------------- OOM log


@FUZZ
@given(data=mutants(LOGS), via=st.sampled_from(["path", "text", "lines"]))
def test_log_parser_survives_mutated_logs(data, via, tmp_path):
    path = tmp_path / "train.log"
    path.write_bytes(data)
    text = data.decode("utf-8", "replace")
    source = {"path": path, "text": text + "\n", "lines": text.split("\n")}[via]
    holds(lambda: parse_log(source, KB), LogFacts)


@FUZZ
@given(text=st.text(max_size=400))
def test_log_parser_survives_random_text(text):
    holds(lambda: parse_log(text + "\n", KB), LogFacts)
    holds(lambda: parse_log(text.splitlines(), KB), LogFacts)


@FUZZ
@given(data=mutants(LOGS[:4]), cut=st.integers(0, 200))
def test_log_parser_survives_corrupt_gzip(data, cut, tmp_path):
    path = tmp_path / "train.log.gz"
    packed = gzip.compress(data)
    path.write_bytes(packed[: max(len(packed) - cut, 0)] if cut % 2 else packed[:10] + bytes([cut]) + packed[11:])
    holds(lambda: parse_log(path, KB), LogFacts, names=path.name)


# --------------------------------------------------------------------------- config readers


@FUZZ
@given(data=mutants(YAMLS))
def test_bridge_yaml_survives_mutated_text(data, tmp_path):
    path = tmp_path / "run_config.yaml"
    path.write_bytes(data)
    holds(lambda: read_bridge_config(path, KB), TrainingConfig, names=path.name)
    holds(lambda: read_config(path, kb=KB), TrainingConfig, names=path.name)


@FUZZ
@given(tree=st.sampled_from(YAMLS).flatmap(lambda p: retyped(YAML_TREES[p])))
def test_bridge_yaml_survives_wrong_types(tree, tmp_path):
    path = tmp_path / "run_config.yaml"
    path.write_bytes(_dump_yaml(tree))
    holds(lambda: read_bridge_config(path, KB), TrainingConfig, names=path.name)
    holds(lambda: read_config(path, kb=KB), TrainingConfig, names=path.name)


@pytest.mark.parametrize("text", HOSTILE_YAML, ids=range(len(HOSTILE_YAML)))
def test_bridge_yaml_hostile_inputs(text, tmp_path):
    path = tmp_path / "hostile.yaml"
    path.write_text(text, encoding="utf-8")
    holds(lambda: read_bridge_config(path, KB), TrainingConfig, names=path.name)
    holds(lambda: read_config(path, kb=KB), TrainingConfig, names=path.name)


_override_keys = st.one_of(
    st.tuples(st.sampled_from(SAME_NAME_SECTIONS), st.sampled_from(sorted(FIELD_KINDS))).map(".".join),
    st.tuples(st.sampled_from(BRIDGE_SECTIONS), st.text(max_size=10)).map(".".join),
    st.sampled_from(["mixed_precision", "peft", "env_vars.PYTORCH_CUDA_ALLOC_CONF", "model", "a.b.c.d"]),
)
_override_values = st.one_of(st.sampled_from(HUGE), st.text(max_size=20),
                             st.lists(st.sampled_from(["1", "[", "]", "'x'", "", "a b", "9" * 5000]), max_size=4)
                             .map(lambda xs: "[" + ",".join(xs) + "]"))
overrides = st.one_of(
    st.tuples(st.sampled_from(["", "+", "++", "~"]), _override_keys, st.sampled_from(["=", "", "=="]),
              _override_values).map("".join),
    st.text(max_size=30),
    st.sampled_from(["model.tensor_model_parallel_size=4", "train.micro_batch_size=2"]).flatmap(
        lambda s: mutated(s.encode()).map(argv_text)),
)


@FUZZ
@given(items=st.lists(overrides, max_size=4))
def test_overrides_survive_random_items(items):
    holds(lambda: apply_overrides(TrainingConfig(), items, KB), TrainingConfig)


# --------------------------------------------------------------------------- Megatron-LM args

_flags = st.sampled_from(sorted(FIELD_KINDS)).map(lambda f: "--" + f.replace("_", "-"))
_arg_lines = st.lists(st.tuples(_flags, st.one_of(st.just(""), _override_values.map(lambda v: " " + v))).map("".join),
                      max_size=6).map(" \\\n  ".join)
MLM_SEEDS = [p for p in CONFIGS if p.suffix == ".sh"] + [p for p in YAMLS if p.name.startswith("mlm")]


@FUZZ
@given(text=st.one_of(mutants(MLM_SEEDS).map(argv_text), _arg_lines, st.text(max_size=200)))
def test_megatron_args_survive_random_and_mutated_text(text):
    holds(lambda: read_megatron_args(text, "<args>", kb=KB), TrainingConfig)


@FUZZ
@given(data=mutants(MLM_SEEDS))
def test_launch_script_survives_mutation_via_read_config(data, tmp_path):
    path = tmp_path / "launch.sh"
    path.write_bytes(data)
    holds(lambda: read_config(path, kb=KB), TrainingConfig, names=path.name)


# Arguments past every limit: 5000-digit values, shell arithmetic, layouts and list expressions that explode.
HOSTILE_ARGS = ["--num-layers " + "9" * 5000, "--moe-layer-freq " + "9" * 5000, "--hidden-size 1e999 --num-layers -1",
                "--seq-length $((1<<999))", "X=$((9**9**9)) --num-layers $X", "--num-layers ${X:-",
                '--moe-layer-freq "([0]*3+[1]*99999999999)"', "python3 -c '\n", "\\\n" * 50,
                "--pipeline-model-parallel-layout '" + "E" * 10000 + "'",
                "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout '(((t|)*1000)*1000)*1000'",
                "--pipeline-model-parallel-layout \u00b2", "--first-k-dense-replace \u0663"]


@pytest.mark.parametrize("text", HOSTILE_ARGS, ids=range(len(HOSTILE_ARGS)))
def test_megatron_args_hostile_inputs(text):
    holds(lambda: read_megatron_args(text, "<args>", kb=KB), TrainingConfig)


# --------------------------------------------------------------------------- HF config.json


@FUZZ
@given(data=st.one_of(mutants(JSONS), st.sampled_from(JSONS).flatmap(lambda p: retyped(JSON_TREES[p]).map(_dump_json))))
def test_hf_config_survives_mutation(data, tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(data)
    holds(lambda: read_hf_config(path, KB), TrainingConfig, names=path.name)
    holds(lambda: read_config(path, kb=KB), TrainingConfig, names=path.name)


@pytest.mark.parametrize("text", HOSTILE_JSON, ids=range(len(HOSTILE_JSON)))
def test_hf_config_hostile_inputs(text, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    holds(lambda: read_hf_config(path, KB), TrainingConfig, names=path.name)
    holds(lambda: read_config(path, kb=KB), TrainingConfig, names=path.name)


# --------------------------------------------------------------------------- memory_stats JSON

_stats_seed = json.dumps(STATS_SEED, indent=1).encode()
_nested_seed = json.dumps({"reserved_bytes": {"all": {"peak": 1 << 36}}, "num_ooms": 1}).encode()


@FUZZ
@given(data=st.one_of(mutated(_stats_seed), mutated(_nested_seed), retyped(STATS_SEED).map(_dump_json),
                      st.binary(max_size=64)))
def test_memory_stats_survive_mutation(data, tmp_path):
    path = tmp_path / "memory_stats.json"
    path.write_bytes(data)
    holds(lambda: read_memory_stats(path), dict, names=path.name)


HOSTILE_STATS = [*HOSTILE_JSON, '{"num_ooms": ' + "9" * 5000 + "}", '{"num_ooms": Infinity}',
                 '{"reserved_bytes.all.peak": -1, "allocated_bytes.all.peak": 1e308}']


@pytest.mark.parametrize("text", HOSTILE_STATS, ids=range(len(HOSTILE_STATS)))
def test_memory_stats_hostile_inputs(text, tmp_path):
    path = tmp_path / "memory_stats.json"
    path.write_text(text, encoding="utf-8")
    holds(lambda: read_memory_stats(path), dict, names=path.name)


# --------------------------------------------------------------------------- snapshot pickle


@st.composite
def retyped_snapshot(draw: st.DrawFn) -> bytes:
    """A fixture snapshot with one nested slot (segment, block, trace entry or field) given a wrong value."""
    tree = pickle.loads(pickle.dumps(SNAPSHOT_TREES[draw(st.sampled_from(SNAPSHOTS))]))
    node = tree
    for _ in range(draw(st.integers(0, 4))):
        if isinstance(node, dict) and node:
            key = draw(st.sampled_from(list(node)))
        elif isinstance(node, list) and node:
            key = draw(st.integers(0, len(node) - 1))
        else:
            break
        if not isinstance(node[key], (dict, list)) or draw(st.integers(0, 3)) == 0:
            node[key] = draw(wrong_values)
            break
        node = node[key]
    else:
        tree = draw(wrong_values) if draw(st.integers(0, 5)) == 0 else tree
    return pickle.dumps(tree, protocol=draw(st.integers(2, pickle.HIGHEST_PROTOCOL)))


@FUZZ
@given(data=st.one_of(mutants(SNAPSHOTS), retyped_snapshot()))
def test_snapshot_survives_mutation(data, tmp_path):
    path = tmp_path / "snapshot.pickle"
    path.write_bytes(data)
    holds(lambda: analyze_snapshot(path), dict, names=path.name)


def _key(name: str) -> bytes:
    return b"X" + len(name).to_bytes(4, "little") + name.encode()  # BINUNICODE


def _deep_list(depth: int) -> bytes:
    return b"]" * depth + b"a" * (depth - 1)  # EMPTY_LIST x depth, then APPEND each into the one below


@pytest.mark.parametrize("build", [
    lambda: b"\x80\x04" + b"]" * 200000 + b".",  # deep-nesting opcodes without a single close
    lambda: pickle.dumps({"segments": [{"blocks": [{"size": 10**5000, "state": "active_allocated"}],
                                        "total_size": 10**5000, "segment_type": 10**5000}]}),
    lambda: pickle.dumps({"segments": "not a list", "device_traces": [[{"action": "oom", "size": -1}]]}),
    lambda: pickle.dumps({"segments": [{"total_size": float("nan"), "blocks": None, "device": "x"}]}),
    lambda: b"\x80\x05\x95" + (2**63).to_bytes(8, "little") + b"N.",  # FRAME claiming 8 EB
    lambda: b"\x8e" + (2**62).to_bytes(8, "little"),  # BINBYTES8 claiming 4 EB
    lambda: b"\x80\x02" + b"(" * 50000 + b"l" * 50000 + b".",
], ids=["unclosed", "huge-int", "wrong-sections", "nan-size", "frame", "binbytes8", "mark-nesting"])
def test_snapshot_hostile_inputs(build, tmp_path):
    path = tmp_path / "snapshot.pickle"
    try:
        data = build()
    except (RecursionError, ValueError):
        pytest.skip("this Python cannot write that pickle")
    path.write_bytes(data)
    holds(lambda: analyze_snapshot(path), dict, names=path.name)


def test_snapshot_deeply_nested_segments(tmp_path):
    # {"segments": [{"blocks": [[[...]]]}], "device_traces": [[[[...]]]]}, nested deeper than Python's stack
    deep = _deep_list(50000)
    data = (b"\x80\x02}" + _key("segments") + b"]}" + _key("blocks") + deep + b"sas"
            + _key("device_traces") + b"]" + deep + b"as.")
    path = tmp_path / "snapshot.pickle"
    path.write_bytes(data)
    holds(lambda: analyze_snapshot(path), dict, names=path.name)


# --------------------------------------------------------------------------- question text and env pairs


@FUZZ
@given(text=st.one_of(st.text(max_size=200), st.sampled_from(QUESTIONS).flatmap(lambda q: mutated(q.encode()))
                      .map(argv_text)))
def test_question_survives_random_and_mutated_text(text):
    holds(lambda: parse_question(text, KB), QuestionFacts)


_env_pairs = st.one_of(
    st.text(max_size=30),
    st.tuples(st.sampled_from(["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "NCCL_GRAPH_REGISTER", "export X"]),
              st.sampled_from(["=", "", "=="]),
              st.one_of(st.text(max_size=30), st.sampled_from(HUGE).map(lambda h: f"max_split_size_mb:{h}"),
                        st.sampled_from(["expandable_segments:maybe", "garbage_collection_threshold:2",
                                         "backend:cudaMallocAsync,expandable_segments:True", ":,:,", "'", '"']))
              ).map("".join),
    st.sampled_from(ENV_SEED).flatmap(lambda e: mutated(e.encode())).map(argv_text),
)


@FUZZ
@given(pairs=st.lists(_env_pairs, max_size=4))
def test_env_pairs_survive_random_and_mutated_items(pairs):
    holds(lambda: read_env(pairs, kb=KB), EnvFacts)


# --------------------------------------------------------------------------- the CLI end to end


def _cli_cases(tmp: Path) -> list[list[str]]:
    """A handful of damaged inputs, one per reader the CLI exposes."""
    config = tmp / "run_config.yaml"
    config.write_text("model: [1, 2]\ntrain: null\n", encoding="utf-8")
    deep = tmp / "config.json"
    deep.write_text("[" * 100000, encoding="utf-8")
    stats = tmp / "memory_stats.json"
    stats.write_text('{"num_ooms": ' + "9" * 5000 + "}", encoding="utf-8")
    snap = tmp / "snapshot.pickle"
    snap.write_bytes(SEED_BYTES[SNAPSHOTS[0]][: len(SEED_BYTES[SNAPSHOTS[0]]) // 2])
    log = tmp / "train.log.gz"
    log.write_bytes(gzip.compress(SEED_BYTES[LOGS[0]])[:40])
    yaml_alias = tmp / "alias.yaml"
    yaml_alias.write_text("model: &a [*a]\n", encoding="utf-8")
    layout = tmp / "layout.yaml"  # a layout that expands to 2e9 symbols: the estimator must never see it
    layout.write_text("model:\n  pipeline_model_parallel_size: 2\n"
                      "  pipeline_model_parallel_layout: '(((t|)*1000)*1000)*1000'\n"
                      "  num_layers: 4\n  hidden_size: 1024\n  num_attention_heads: 8\n  vocab_size: 32000\n"
                      "  seq_length: 2048\ntrain:\n  micro_batch_size: 1\n  global_batch_size: 8\n", encoding="utf-8")
    return [["--config", str(config)], ["--config", str(deep)], ["--stats", str(stats)], ["--snapshot", str(snap)],
            ["--log", str(log)], ["--config", str(yaml_alias)], ["--config", str(layout), "--gpu", "H100"],
            ["--set", "model.num_layers=[[1]", "--env", "=x"], ["--question", "TP" + "9" * 5000 + " on 1e999 H100"]]


def test_cli_turns_damaged_inputs_into_exit_2_without_traceback(tmp_path):
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    cases = _cli_cases(tmp_path)
    procs = [subprocess.Popen([sys.executable, str(SKILL / "scripts" / "memtune.py"), "diagnose", *case],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
             for case in cases]
    for case, proc in zip(cases, procs, strict=True):
        out, err = proc.communicate(timeout=60)
        assert proc.returncode in (0, 2), f"{case}: exit {proc.returncode}\n{err}"
        assert "Traceback" not in err and "Traceback" not in out, f"{case}:\n{err}"
        if proc.returncode == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("memtune: error:"), f"{case}: {err!r}"
