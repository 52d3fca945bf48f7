"""Engine ranking on a tiny synthetic knowledge base, so these tests pin the mechanism, not the content."""

from pathlib import Path

from memtune.engine import diagnose
from memtune.knowledge import Knowledge


def _kb(rules, fixes=(), constraints=()):
    tables = {
        "rules": {"rules": list(rules)},
        "fixes": {"fixes": [{"id": f, **extra} for f, extra in fixes]},
        "constraints": {"constraints": list(constraints)},
    }
    by_id = {name: {row["id"]: row for row in rows[name]} for name, rows in tables.items()}
    return Knowledge(root=Path("."), index={"kb_version": "9.9.9"}, tables=tables, by_id=by_id)


def _rule(ident, cause, conf, when, fixes=(), avoid=()):
    return {"id": ident, "cause": cause, "confidence": conf, "when": when, "fixes": list(fixes),
            "avoid": [{"fix": f, "reason": {"en": f"no {f}", "zh": f"不要 {f}"}} for f in avoid]}


ALWAYS = {"fact": "x.on", "truthy": True}


def test_causes_ranked_by_confidence_then_file_order():
    kb = _kb([_rule("r1", "capacity", 0.5, ALWAYS, ["b"]), _rule("r2", "frag", 0.9, ALWAYS, ["a"]),
              _rule("r3", "graphs", 0.5, ALWAYS, ["c"])], fixes=[("a", {}), ("b", {}), ("c", {})])
    diag = diagnose({"x.on": True}, kb)
    assert [c.id for c in diag.causes] == ["frag", "capacity", "graphs"]
    assert [f.id for f in diag.fixes] == ["a", "b", "c"]
    assert [f.rank for f in diag.fixes] == [1, 2, 3]


def test_a_cause_keeps_its_highest_confidence_and_all_rules():
    kb = _kb([_rule("weak", "frag", 0.3, ALWAYS), _rule("strong", "frag", 0.8, ALWAYS)])
    diag = diagnose({"x.on": True}, kb)
    assert diag.causes[0].confidence == 0.8
    assert diag.causes[0].rules == ["weak", "strong"]


def test_avoided_fix_is_never_recommended_even_if_another_rule_suggests_it():
    kb = _kb([_rule("r1", "frag", 0.9, ALWAYS, ["a"], avoid=["tp"]), _rule("r2", "cap", 0.5, ALWAYS, ["tp", "b"])],
             fixes=[("a", {}), ("b", {}), ("tp", {})])
    diag = diagnose({"x.on": True}, kb)
    assert [f.id for f in diag.fixes] == ["a", "b"]
    assert [(a.id, a.source_kind) for a in diag.avoid] == [("tp", "rule")]


def test_constraint_blocks_fix_and_reports_violation():
    con = {"id": "offload-needs-pp1", "message": {"en": "PP must be 1", "zh": "PP 必须为 1"},
           "violated_when": {"all": [{"fact": "c.offload", "truthy": True}, {"fact": "c.pp", "gt": 1}]},
           "blocks_fixes": ["offload"], "blocks_when": {"fact": "c.pp", "gt": 1}}
    kb = _kb([_rule("r1", "cap", 0.7, ALWAYS, ["offload", "recompute"])],
             fixes=[("offload", {}), ("recompute", {})], constraints=[con])
    diag = diagnose({"x.on": True, "c.pp": 4, "c.offload": True}, kb)
    assert [f.id for f in diag.fixes] == ["recompute"]
    assert diag.avoid[0].source == "offload-needs-pp1"
    assert [v.id for v in diag.violations] == ["offload-needs-pp1"]
    diag = diagnose({"x.on": True, "c.pp": 1}, kb)
    assert [f.id for f in diag.fixes] == ["offload", "recompute"] and not diag.violations


def test_rules_see_violations_through_derived_fact():
    con = {"id": "bad", "message": {"en": "m", "zh": "m"}, "violated_when": ALWAYS}
    kb = _kb([_rule("r1", "config", 0.9, {"fact": "derived.violated_constraints", "contains": "bad"})],
             constraints=[con])
    assert [c.id for c in diagnose({"x.on": True}, kb).causes] == ["config"]
    assert diagnose({"x.on": False}, kb).causes == []


def test_already_applied_fix_is_dropped_from_recommendations():
    applied = {"already_applied_when": {"fact": "env.es", "truthy": True}}
    kb = _kb([_rule("r1", "frag", 0.9, ALWAYS, ["es", "b"])], fixes=[("es", applied), ("b", {})])
    diag = diagnose({"x.on": True, "env.es": True}, kb)
    assert [f.id for f in diag.fixes] == ["b"]
    assert diag.already_applied == ["es"]


def test_nothing_fires_on_no_evidence():
    kb = _kb([_rule("r1", "frag", 0.9, ALWAYS, ["a"])], fixes=[("a", {})])
    diag = diagnose({}, kb)
    assert diag.causes == [] and diag.fixes == [] and diag.kb_version == "9.9.9"


def test_fallback_rule_only_fires_alone():
    weak = {**_rule("generic", "cap", 0.3, ALWAYS, ["b"]), "fallback": True}
    strong = _rule("frag", "frag", 0.9, {"fact": "log.ru", "gt": 1}, ["a"])
    kb = _kb([strong, weak], fixes=[("a", {}), ("b", {})])
    assert [c.id for c in diagnose({"x.on": True, "log.ru": 5}, kb).causes] == ["frag"]
    assert [c.id for c in diagnose({"x.on": True, "log.ru": 0}, kb).causes] == ["cap"]


def test_a_fix_that_changes_the_training_comes_after_the_exact_ones(kb):
    """With nothing simulated, the rules' order stands, except that a fix changing what is trained (BF16 optimizer
    moments, dropped tokens: fixes.yaml changes_training) yields to the exact fixes the same rules name."""
    from memtune import pipeline

    question = "It runs out of GPU memory while building the optimizer, before the first step."
    _, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    ids = [f.id for f in diag.fixes]
    assert ids[-1] == "precision-aware-optimizer" and "megatron-fsdp" in ids and "optimizer-cpu-offload" in ids
    assert {f["id"] for f in kb.entries("fixes") if f.get("changes_training")} >= {"precision-aware-optimizer"}


def test_a_tried_fix_leads_to_the_next_step_up_its_ladder(kb):
    """A fix the user tried and still ran out with names what comes next (fixes.yaml next): selective recompute that
    did not help -> full recompute, then a smaller micro-batch. Its default module (core attention) has nothing to
    drop under fused / Flash attention, so "no effect" is what it does there (rule core-attention-recompute-under-
    flash), not a sign it never applied; it is not offered again."""
    from memtune import pipeline

    question = "I already turned on selective recompute, but it did not help: the same OOM."
    _, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    ids = [f.id for f in diag.fixes]
    assert ids[:2] == ["full-recompute", "reduce-micro-batch"]
    assert all(any(r.startswith("next-after:") for r in f.rules) for f in diag.fixes[:2])
    assert "selective-recompute" in [a.id for a in diag.avoid]


def test_the_check_the_top_cause_calls_for_leads(kb):
    """When the situation names a cause whose own fixes are checks (a setting that did not apply), that check leads
    even where capacity fixes simulate as fitting: their simulations assume the setting is in place."""
    from memtune import pipeline

    question = ("With --use-torch-fsdp2 I turn on activation recomputation, but it doesn't save any memory: the same "
                "maximum batch size fits as without it. Llama-2 7B, seq length 4096, A100 40GB.")
    _, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert diag.causes[0].id == "setting-not-applied"
    assert diag.fixes[0].id == "confirm-setting-applied"


def test_a_setting_that_did_nothing_comes_back_through_its_frameworks_keys(kb):
    """verl's Megatron backend ignored the FSDP recompute switch (verl PR #944): after the check that it applied,
    full recompute comes back with the keys that backend reads - a tried fix is otherwise never offered again."""
    from memtune import pipeline

    question = ("verl Megatron backend, the actor update OOMs. I added actor_rollout_ref.model."
                "enable_gradient_checkpointing=True but it did not help, still the same OOM.")
    _, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    ids = [f.id for f in diag.fixes]
    assert diag.causes[0].id == "setting-not-applied" and ids[0] == "confirm-setting-applied"
    assert "through-keys-of:verl" in next(f.rules for f in diag.fixes if f.id == "full-recompute")
    # without a framework that has its own keys for it, the tried fix stays out
    _, _, plain = pipeline.run(pipeline.Inputs(question="I turned on full recompute but it did not help, same OOM."),
                               kb)
    assert "full-recompute" not in [f.id for f in plain.fixes]


def test_what_the_user_says_is_already_on_is_not_offered_again(kb):
    """"The optimizer is already offloaded to CPU" and "the log-probs are already computed in chunks" are fixes
    tried; a setting written in the prose with no offload fraction is the fix applied (a config file's fraction
    still decides: Megatron-Core's default 0.0 offloads nothing)."""
    from memtune import pipeline

    question = ("GRPO on Qwen3-32B, 8x H100 80GB. The optimizer is already offloaded to CPU and the log-probs are "
                "already computed in chunks, but the log-prob pass still OOMs.")
    _, flat, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert {"optimizer-cpu-offload", "logits-chunking"} <= set(flat["situation.tried"])
    assert not {"optimizer-cpu-offload", "logits-chunking"} & {f.id for f in diag.fixes}
    stated = "Qwen3-32B SFT on 8x H100 80GB with optimizer_cpu_offload=True still OOMs at the optimizer step."
    _, flat, diag = pipeline.run(pipeline.Inputs(question=stated), kb)
    assert flat["config.optimizer_cpu_offload"] and flat["config.source"] == "question"
    assert "optimizer-cpu-offload" in diag.already_applied


def test_a_cause_the_situation_proposes_leads_with_the_fix_the_user_asks_about(kb):
    """Memory outside PyTorch's allocator, and the user asks about NCCL_NVLS_ENABLE=0: that fix comes first among
    the cause's own, and the allocator setting (which cannot reach NCCL's buffers) is not among them."""
    from memtune import pipeline

    question = ("Memory is tight in training. The NCCL NVLS buffers live outside PyTorch's allocator, right? Should I "
                "set NCCL_NVLS_ENABLE=0, and can expandable_segments recover that memory?")
    _, _, diag = pipeline.run(pipeline.Inputs(question=question), kb)
    assert diag.causes[0].id == "non-pytorch-memory"
    ids = [f.id for f in diag.fixes]
    assert ids[0] == "disable-nccl-nvls" and "expandable-segments" not in ids


def test_nccl_multicast_memory_is_out_of_the_allocators_reach(kb, tmp_path):
    """NVLS multicast memory is mapped by NCCL through the driver: NCCL_NVLS_ENABLE=0 first, and the PyTorch
    allocator setting is advised against, not offered (miles#935)."""
    from memtune import pipeline

    log = tmp_path / "nccl.log"
    log.write_text("NCCL error: Failed to bind NVLink SHARP (NVLS) Multicast memory ... CUDA error 2 'out of memory'\n")
    _, _, diag = pipeline.run(pipeline.Inputs(log=log), kb)
    assert diag.fixes[0].id == "disable-nccl-nvls"
    assert "expandable-segments" in {a.id for a in diag.avoid}
    assert "expandable-segments" not in {f.id for f in diag.fixes}
