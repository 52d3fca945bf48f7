"""constraints.yaml, causes.yaml and derive(): every constraint's own examples, plus the derived facts.

The constraint examples live in the KB (tests.violated / tests.ok / tests.error_examples), so adding a
constraint needs no new Python.  The tables are read straight from the YAML (not through knowledge.load) so these
tests run even while other KB tables are still being written.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cache
from typing import Any

import pytest
from conftest import SKILL, read_kb, read_yaml
from memtune.conditions import evaluate, referenced_facts
from memtune.derive import derive
from memtune.facts import EnvFacts, Facts, TrainingConfig

KNOWLEDGE = SKILL / "knowledge"

# Ids other KB tables and helpers refer to; they must stay.
_INDEX = read_yaml(KNOWLEDGE / "index.yaml")
REQUIRED_CONSTRAINTS = set(_INDEX["required_ids"]["constraints"])


@cache  # read once per run: the tests only read the tables
def _table(name: str) -> list[dict[str, Any]]:
    return read_kb(name)[name]


CONSTRAINTS = _table("constraints")
IDS = [c["id"] for c in CONSTRAINTS]


@cache
def _known_facts() -> frozenset[str]:
    return frozenset(Facts().flatten()) | {f["name"] for f in _table("facts")}


def _cases(kind: str) -> list[Any]:
    return [
        pytest.param(con, example, id=f"{con['id']}-{i}")
        for con in CONSTRAINTS
        for i, example in enumerate(con.get("tests", {}).get(kind, []))
    ]


def test_required_ids_present_and_unique() -> None:
    assert len(IDS) == len(set(IDS))
    assert REQUIRED_CONSTRAINTS <= set(IDS)


@pytest.mark.parametrize("con", CONSTRAINTS, ids=IDS)
def test_constraint_is_testable(con: dict[str, Any]) -> None:
    tests = con.get("tests", {})
    if "violated_when" in con:
        assert tests.get("violated") and tests.get("ok"), "a condition needs both violated and ok examples"
    else:
        assert not tests.get("violated") and not tests.get("ok"), "examples without a condition test nothing"
    if "error_pattern" in con:
        assert tests.get("error_examples"), "a pattern needs log lines it must match"
        assert con.get("upstream_error"), "a pattern must stand for an upstream text"
    assert bool(con.get("blocks_fixes")) == ("blocks_when" in con)


@pytest.mark.parametrize("con", CONSTRAINTS, ids=IDS)
def test_conditions_and_examples_name_known_facts(con: dict[str, Any]) -> None:
    known = _known_facts()
    for key in ("violated_when", "blocks_when"):
        if key in con:
            assert set(referenced_facts(con[key])) <= known, key
    for kind in ("violated", "ok"):
        for example in con.get("tests", {}).get(kind, []):
            assert set(example) <= known, f"{kind} example names an unknown fact"


@pytest.mark.parametrize(("con", "example"), _cases("violated"))
def test_violated_examples_violate(con: dict[str, Any], example: dict[str, Any]) -> None:
    assert evaluate(con["violated_when"], example)


@pytest.mark.parametrize(("con", "example"), _cases("ok"))
def test_ok_examples_pass(con: dict[str, Any], example: dict[str, Any]) -> None:
    assert not evaluate(con["violated_when"], example)


@pytest.mark.parametrize(("con", "line"), _cases("error_examples"))
def test_error_examples_match_their_pattern_only(con: dict[str, Any], line: str) -> None:
    assert re.search(con["error_pattern"], line)
    others = [
        c["id"] for c in CONSTRAINTS if c is not con and "error_pattern" in c and re.search(c["error_pattern"], line)
    ]
    assert others == [], "one log line must map to one constraint"


# Real memory-failure lines (research/peers.md §3.1, research/megatron-bridge.md §3.1) must never be
# mistaken for a configuration error.
OOM_LINES = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.10 GiB of which 1.20 GiB is free. Including non-PyTorch memory, this process has 77.88 GiB memory in use. "
    "Of the allocated memory 70.01 GiB is allocated by PyTorch, and 6.52 GiB is reserved by PyTorch but "
    "unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
    "include/alloc.h:103 NCCL WARN Cuda failure 2 'out of memory'",
    "RuntimeError: Triton Error [CUDA]: out of memory",
]


@pytest.mark.parametrize("line", OOM_LINES)
def test_patterns_ignore_memory_failures(line: str) -> None:
    assert [c["id"] for c in CONSTRAINTS if "error_pattern" in c and re.search(c["error_pattern"], line)] == []


def test_blocks_when_holds_for_some_violation() -> None:
    """A constraint that blocks a fix must block it in at least one of its own violated situations."""
    for con in CONSTRAINTS:
        if "blocks_when" in con:
            assert any(evaluate(con["blocks_when"], ex) for ex in con["tests"]["violated"]), con["id"]


def test_causes_cover_required_ids_bilingually() -> None:
    causes = _table("causes")
    required = read_yaml(KNOWLEDGE / "index.yaml")["required_ids"]["causes"]
    ids = [c["id"] for c in causes]
    assert len(ids) == len(set(ids)) and set(required) <= set(ids)
    for cause in causes:
        assert len(cause["confirm"]["en"]) == len(cause["confirm"]["zh"]), cause["id"]
        assert all(isinstance(step, str) and step for lang in ("en", "zh") for step in cause["confirm"][lang])


# --- derive() -------------------------------------------------------------------------------------


def _flat(config: TrainingConfig, env: EnvFacts | None = None) -> dict[str, Any]:
    env = env or EnvFacts()
    derived = {f"derived.{k}": v for k, v in derive(config, env).items()}
    return {**Facts(config=config, env=env).flatten(), **derived}


def _violated(flat: dict[str, Any]) -> set[str]:
    return {c["id"] for c in CONSTRAINTS if "violated_when" in c and evaluate(c["violated_when"], flat)}


def test_derive_names_are_declared_in_facts_yaml() -> None:
    declared = {f["name"] for f in _table("facts")}
    assert {f"derived.{k}" for k in derive(TrainingConfig(), EnvFacts())} <= declared


def test_derive_unknown_inputs_give_none() -> None:
    out = derive(TrainingConfig(), EnvFacts())
    assert out["cp_divides_seq"] is True  # CP unset means 1, which always passes
    assert {k for k, v in out.items() if v is None} == set(out) - {"cp_divides_seq"}


@pytest.mark.parametrize(
    ("fields", "key", "expected"),
    [
        ({"num_attention_heads": 40, "tensor_model_parallel_size": 8}, "tp_divides_heads", True),
        ({"num_attention_heads": 40, "tensor_model_parallel_size": 16}, "tp_divides_heads", False),
        ({"num_attention_heads": 28}, "tp_divides_heads", True),
        # multiple OR divisor: 8 groups / TP 4, 4 groups / TP 8 pass; 3 groups / TP 8 fails
        ({"num_query_groups": 8, "tensor_model_parallel_size": 4}, "tp_query_groups_compatible", True),
        ({"num_query_groups": 4, "tensor_model_parallel_size": 8}, "tp_query_groups_compatible", True),
        ({"num_query_groups": 3, "tensor_model_parallel_size": 8}, "tp_query_groups_compatible", False),
        ({"num_attention_heads": 12, "tensor_model_parallel_size": 8}, "tp_query_groups_compatible", False),
        ({"num_layers": 80, "pipeline_model_parallel_size": 4}, "pp_divides_layers", True),
        ({"num_layers": 81, "pipeline_model_parallel_size": 4}, "pp_divides_layers", False),
        # account_for_* flags count one layer each: 78 + 2 = 80 splits over 4 stages
        (
            {
                "num_layers": 78,
                "pipeline_model_parallel_size": 4,
                "account_for_embedding_in_pipeline_split": True,
                "account_for_loss_in_pipeline_split": True,
            },
            "pp_divides_layers",
            True,
        ),
        (
            {"num_layers": 80, "pipeline_model_parallel_size": 4, "virtual_pipeline_model_parallel_size": 5},
            "vpp_divides_layers",
            True,
        ),
        (
            {"num_layers": 80, "pipeline_model_parallel_size": 4, "virtual_pipeline_model_parallel_size": 8},
            "vpp_divides_layers",
            False,
        ),
        ({"num_layers": 80, "pipeline_model_parallel_size": 4}, "vpp_divides_layers", None),
        ({"seq_length": 8192, "context_parallel_size": 4}, "cp_divides_seq", True),
        ({"seq_length": 4100, "context_parallel_size": 4}, "cp_divides_seq", False),
        ({"context_parallel_size": 2}, "cp_divides_seq", None),
        ({"num_moe_experts": 128, "expert_model_parallel_size": 8}, "ep_divides_experts", True),
        ({"num_moe_experts": 60, "expert_model_parallel_size": 8}, "ep_divides_experts", False),
        (
            {
                "world_size": 32,
                "tensor_model_parallel_size": 2,
                "pipeline_model_parallel_size": 4,
                "context_parallel_size": 2,
            },
            "world_divisible",
            True,
        ),
        ({"world_size": 12, "tensor_model_parallel_size": 8}, "world_divisible", False),
        # expert grid: ETP defaults to TP; 16 GPUs, TP 2, EP 8 -> 2*8 = 16 divides; EP 16 -> 32 does not
        (
            {"world_size": 16, "tensor_model_parallel_size": 2, "expert_model_parallel_size": 8},
            "world_divisible_expert",
            True,
        ),
        # ...unless ETP is unstated and 1 would fit: then the breach rests on a default nobody stated (miles#3089)
        (
            {"world_size": 16, "tensor_model_parallel_size": 2, "expert_model_parallel_size": 16},
            "world_divisible_expert",
            None,
        ),
        # a Megatron-LM argument list is complete: an absent --expert-tensor-parallel-size is the default TP
        (
            {"world_size": 16, "tensor_model_parallel_size": 2, "expert_model_parallel_size": 16,
             "source": "megatron-args"},
            "world_divisible_expert",
            False,
        ),
        (
            {
                "world_size": 16,
                "tensor_model_parallel_size": 2,
                "expert_tensor_parallel_size": 1,
                "expert_model_parallel_size": 16,
            },
            "world_divisible_expert",
            True,
        ),
    ],
)
def test_derive_config_checks(fields: dict[str, Any], key: str, expected: bool | None) -> None:
    assert derive(TrainingConfig(**fields), EnvFacts())[key] is expected


def test_derive_uneven_pipeline_stages() -> None:
    """Uneven first/last stages (MCore fields, read with getattr) split only the middle stages."""
    config = TrainingConfig(num_layers=30, pipeline_model_parallel_size=4, virtual_pipeline_model_parallel_size=2)
    config.num_layers_in_first_pipeline_stage = 6  # type: ignore[attr-defined]
    config.num_layers_in_last_pipeline_stage = 8  # type: ignore[attr-defined]
    out = derive(config, EnvFacts())
    assert out["pp_divides_layers"] is True  # 16 middle layers over 2 middle stages
    assert out["vpp_divides_layers"] is True  # 6, 8 and 8 per middle stage all split in 2
    config.num_layers_in_first_pipeline_stage = 5  # type: ignore[attr-defined]
    out = derive(config, EnvFacts())
    assert out["pp_divides_layers"] is False and out["vpp_divides_layers"] is False


def test_a_stand_in_shape_says_nothing_about_what_upstream_refuses() -> None:
    """A model the presets lack ("Qwen3.5-122B-A10B") is estimated on the nearest preset's shape; PP 10 not dividing
    that stand-in's 36 layers is no evidence that the user's run breaks a constraint. A layer count the user stated
    still is."""
    stand_in = TrainingConfig(num_layers=36, num_attention_heads=64, num_moe_experts=128,
                              pipeline_model_parallel_size=10, tensor_model_parallel_size=3,
                              expert_model_parallel_size=3, approximate_shape="gpt-oss-120b",
                              from_preset=["num_layers", "num_attention_heads", "num_moe_experts"])
    out = derive(stand_in, EnvFacts())
    assert (out["pp_divides_layers"], out["tp_divides_heads"], out["ep_divides_experts"]) == (None, None, None)
    stated = replace(stand_in, from_preset=["num_attention_heads", "num_moe_experts"])
    assert derive(stated, EnvFacts())["pp_divides_layers"] is False


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (EnvFacts(), None),
        (EnvFacts(provided=True), False),
        (EnvFacts(provided=True, nccl_graph_register="0"), True),
        (EnvFacts(provided=True, nccl_graph_register="1"), False),
        (EnvFacts(provided=True, variables={"NCCL_GRAPH_REGISTER": " 0 "}), True),
    ],
)
def test_derive_nccl_graph_register(env: EnvFacts, expected: bool | None) -> None:
    assert derive(TrainingConfig(), env)["nccl_graph_register_off"] is expected


def test_derived_facts_drive_constraints_end_to_end() -> None:
    """A Qwen2-7B-like layout (28 heads, 4 KV groups) on TP 8: heads fail, query groups pass."""
    config = TrainingConfig(
        provided=True,
        num_attention_heads=28,
        num_query_groups=4,
        tensor_model_parallel_size=8,
        num_layers=28,
        pipeline_model_parallel_size=1,
        world_size=8,
    )
    violated = _violated(_flat(config))
    assert "tp-divides-attention-heads" in violated
    assert not violated & {"tp-divides-query-groups", "pp-divides-layers", "world-size-divisible-by-model-parallel"}
    config.tensor_model_parallel_size = 4
    assert "tp-divides-attention-heads" not in _violated(_flat(config))


def test_graph_register_constraint_end_to_end() -> None:
    config = TrainingConfig(provided=True, cuda_graph_impl="transformer_engine")
    bare = EnvFacts(provided=True, expandable_segments=True)
    fixed = EnvFacts(provided=True, expandable_segments=True, nccl_graph_register="0")
    assert "cuda-graphs-need-nccl-graph-register-off" in _violated(_flat(config, bare))
    assert "cuda-graphs-need-nccl-graph-register-off" not in _violated(_flat(config, fixed))


def test_next_sizes_double_what_the_config_states():
    from memtune.derive import next_sizes

    cfg = TrainingConfig(tensor_model_parallel_size=4, pipeline_model_parallel_size=4)
    assert next_sizes(cfg) == {"next_tp": 8, "next_pp": 8, "next_cp": None, "next_ep": None, "next_world": None}
    assert next_sizes(TrainingConfig(world_size=32))["next_world"] == 64  # add-gpus: twice the user's GPUs
