"""The cached fast path of ``estimate`` (static.py, rank_activations.py) gives the bytes of an uncached estimate.

``estimate`` reuses a static part per layout shape and activation contexts per micro-batch, each built from a
copy of the config with the fields its cache key leaves out cleared.  The reference here is
``estimate_ours(..., cached=False)``, which builds everything afresh from the whole config for every call, so a
field wrongly listed as per-candidate or model-state, or a cache key missing an input, shows up as a
difference.  Candidates come from the planner's own enumeration (several per shape, differing in micro-batch,
recompute, offload or model state: the case the caches serve) plus presets with random settings, in shuffled
order.
"""

from __future__ import annotations

import copy
import random
from dataclasses import fields, replace

import pytest
from memtune.errors import UserError
from memtune.estimator import estimate, summarize
from memtune.estimator import static as static_cache
from memtune.estimator.constants import constants, english
from memtune.estimator.memory import estimate_ours
from memtune.estimator.models import names, preset
from memtune.facts import EnvFacts, TrainingConfig
from memtune.inputs.gpu import lookup_gpu
from memtune.planner.options import load
from memtune.planner.search import Planner, PlanRequest

ENV = EnvFacts(provided=True, expandable_segments=True)


def _planner_candidates(kb, model, gpus, seq, gbs, task, shapes, count, rng):
    """``count`` random candidates on ``shapes`` random parallel shapes of a plan, as the planner hands them to
    the estimator (several per shape, so cached parts are shared between them)."""
    request = PlanRequest(base=preset(model, kb), gpu=lookup_gpu("H100", kb), gpus=gpus, seq_length=seq,
                          global_batch_size=gbs, task=task, top=None)
    planner = Planner(request, kb)
    ranked = planner.candidates()
    picked = set(rng.sample(sorted({si for _, si, _, _ in ranked}), shapes))
    pool = [(si, mbs, ci) for _, si, mbs, ci in ranked if si in picked]
    out = []
    for si, mbs, ci in rng.sample(pool, min(count, len(pool))):
        shape = planner.shape_list[si]
        cfg = copy.copy(planner.base)
        cfg.__dict__.update({**shape.fields, "micro_batch_size": mbs, **planner.combos[ci].fields})
        out.append((cfg, gbs // (mbs * shape.dp)))
    return out


def _random_candidates(kb, count, rng):
    """Presets with random sizes and switches, including ones the estimator refuses."""
    out = []
    for _ in range(count):
        pick = rng.choice
        cfg = replace(
            preset(pick(names(kb)), kb), world_size=64, seq_length=pick([2048, 4096]),
            tensor_model_parallel_size=pick([1, 2, 4, 8]), pipeline_model_parallel_size=pick([1, 2, 4]),
            virtual_pipeline_model_parallel_size=pick([None, None, 2]), context_parallel_size=pick([1, 2]),
            micro_batch_size=pick([1, 2, 3]), global_batch_size=pick([None, 64]),
            sequence_parallel=pick([True, False, None]), use_distributed_optimizer=pick([True, False, None]),
            optimizer_cpu_offload=pick([None, True]), optimizer_offload_fraction=pick([None, 0.5]),
            bf16=pick([True, None]), fp8=pick([None, "hybrid"]), peft=pick([None, "lora"]),
            recompute_granularity=pick([None, "selective", "full"]), recompute_method=pick([None, "block"]),
            recompute_num_layers=pick([None, 1, 2]), recompute_modules=pick([None, ["mlp"], ["moe_act", "layernorm"]]),
            cpu_offloading=pick([None, True]), cpu_offloading_num_layers=pick([None, 1]),
            fine_grained_activation_offloading=pick([None, True]), offload_modules=pick([None, ["core_attn"]]),
            cuda_graph_impl=pick([None, "transformer_engine", "full_iteration"]),
            attention_backend=pick([None, "unfused"]), sequence_parallel_input_regather=pick([None, True]),
        )
        out.append((cfg, pick([None, 8])))
    return out


def _uncached(cfg, kb, num_microbatches):
    return estimate_ours(cfg, constants(kb), english(kb), num_microbatches=num_microbatches,
                         expandable_segments=True, cached=False)


def _answer(fn):
    try:
        est = fn()
    except UserError as exc:
        return "refused", str(exc)
    return repr(est.to_dict()), repr(summarize(est, None))


def test_cached_estimates_equal_uncached_ones_bit_for_bit(kb):
    rng = random.Random(20260130)
    cands = (_planner_candidates(kb, "llama3-8b", 8, 8192, 64, "lora", 4, 120, rng)
             + _planner_candidates(kb, "qwen3-30b-a3b", 16, 4096, 256, "pretrain", 6, 160, rng)
             + _random_candidates(kb, 120, rng))
    rng.shuffle(cands)
    static_cache.clear_caches()
    for cfg, m in cands:
        fast = _answer(lambda cfg=cfg, m=m: estimate(cfg, kb=kb, env=ENV, num_microbatches=m))
        slow = _answer(lambda cfg=cfg, m=m: _uncached(cfg, kb, m))
        assert fast == slow, cfg
    # the caches were really used: far fewer static parts than estimates, activation contexts reused
    assert len(static_cache._STATICS.data) < len(cands) / 2
    assert len(static_cache._SHAPES.data) < len(static_cache._STATICS.data)


def test_per_candidate_and_model_state_fields_share_parts(kb):
    c = constants(kb)
    base = replace(preset("llama3-8b", kb), tensor_model_parallel_size=2, pipeline_model_parallel_size=2,
                   world_size=8, seq_length=4096, micro_batch_size=1, use_distributed_optimizer=True)
    part = static_cache.static_part(base, c)
    other_batch = replace(base, micro_batch_size=4, recompute_granularity="full", cpu_offloading=True)
    assert static_cache.static_part(other_batch, c) is part
    fsdp = static_cache.static_part(replace(base, use_megatron_fsdp=True), c)
    assert fsdp is not part and fsdp.shape is part.shape
    wider = static_cache.static_part(replace(base, tensor_model_parallel_size=4), c)
    assert wider.shape is not part.shape


def test_a_changed_static_field_is_never_served_from_the_cache(kb):
    base = replace(preset("llama3-8b", kb), tensor_model_parallel_size=2, pipeline_model_parallel_size=2,
                   world_size=8, seq_length=4096, micro_batch_size=2)
    first = estimate(base, kb=kb, env=ENV)
    for change in ({"hidden_dropout": 0.1}, {"fp8": "hybrid"}, {"grad_reduce_in_fp32": False},
                   {"peft_target_modules": ["linear_qkv"], "peft": "lora"}, {"env_vars": {"A": "1"}}):
        cfg = replace(base, **change)
        assert estimate(cfg, kb=kb, env=ENV).to_dict() == _uncached(cfg, kb, None).to_dict()
    assert estimate(base, kb=kb, env=ENV).to_dict() == first.to_dict()


def test_cache_field_lists_name_real_fields_and_cover_the_planner_options(kb):
    known = {f.name for f in fields(TrainingConfig)}
    for group in (static_cache.PER_CANDIDATE_FIELDS, static_cache.MODEL_STATE_FIELDS,
                  set(static_cache.METADATA_FIELDS)):
        assert group <= known, group - known
    space = load(kb)
    varied = space.group_fields["recompute"] | space.group_fields["activation_offload"] | space.group_fields["peft"]
    # not a correctness matter (the keys stay complete), but a field missing here defeats the cache
    assert varied <= static_cache.PER_CANDIDATE_FIELDS, varied - static_cache.PER_CANDIDATE_FIELDS
    assert space.group_fields["model_state"] <= static_cache.MODEL_STATE_FIELDS


@pytest.mark.parametrize("value", [["T", "S"], {"k": ["v"]}])
def test_unhashable_values_in_scalar_fields_still_estimate(kb, value):
    cfg = replace(preset("llama3-8b", kb), seq_length=2048, world_size=8, moe_token_dispatcher_type=value)
    assert estimate(cfg, kb=kb, env=ENV).to_dict() == _uncached(cfg, kb, None).to_dict()
