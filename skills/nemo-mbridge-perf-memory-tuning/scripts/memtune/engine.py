"""The rule engine: facts + ledger + knowledge base -> Diagnosis.  Pure; names no fix, cause or model.

Ranking, in words: every rule whose condition holds (a ``fallback`` rule only when
no other does) says its cause is possible and contributes its ordered fixes.  A cause's
score is the share of the deficit its ledger components account for (ledger.py; a cause
that explains no component is a verdict on the whole failure) times the reliability of
the weakest evidence the rule read (knowledge/ledger.yaml); causes are ranked by score,
then by rule order in rules.yaml.  Fixes are taken from the fired rules in that order and
re-ranked by ``rank_fixes`` once each has been simulated (simulate.py).  A fix is then moved out of the
recommendations when (a) some fired rule says to avoid it, (b) a constraint
blocks it in this situation, or (c) its ``already_applied_when`` holds.  A fix's
``companions`` follow it when their condition holds; a rule's ``fixes_from``
adds the ``alternatives`` of the constraints named by those facts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .conditions import evaluate, referenced_facts
from .knowledge import Knowledge


@dataclass
class CauseFinding:
    id: str
    confidence: float  # share x reliability
    rules: list[str] = field(default_factory=list)  # ids of the rules that concluded it
    share: float | None = None  # of the deficit its components account for; None = not quantified
    reliability: float = 0.0  # of the weakest evidence behind it
    evidence_source: str | None = None
    support: float = 0.0  # reliability of the situation evidence that supports it on its own (0 = none)


@dataclass
class FixAdvice:
    id: str
    rank: int
    rules: list[str] = field(default_factory=list)  # rules that recommended it


@dataclass
class AvoidAdvice:
    id: str
    source: str  # rule or constraint id
    source_kind: str  # "rule" | "constraint" | "applied" | "simulation" | "situation" | "tried"
    reason: dict[str, str]  # {en, zh}


@dataclass(frozen=True)
class RuledOut:
    """Why the situation contradicts one cause: the facts that did it and the reason of each thing that held (the
    engine's own rule-out, each rules_out branch whose condition is true) - only those, since a branch that did
    not hold says nothing true of this run."""
    facts: str
    why: tuple[Mapping[str, str], ...]


@dataclass
class Violation:
    id: str  # constraints.yaml id


@dataclass
class Diagnosis:
    kb_version: str
    causes: list[CauseFinding]
    fixes: list[FixAdvice]
    avoid: list[AvoidAdvice]
    already_applied: list[str]
    violations: list[Violation]
    fired_rules: list[str]
    facts: dict[str, Any] = field(default_factory=dict)  # the facts the rules saw, derived ones included
    ruled_out: dict[str, RuledOut] = field(default_factory=dict)  # cause id -> the facts that contradict it, and why
    tried: list[str] = field(default_factory=list)  # fixes the user says they already tried
    candidates: list[str] = field(default_factory=list)  # causes that remain when the evidence is thin
    generic_only: bool = False  # no rule but the generic fallback matched the evidence
    ledger: Any = None  # ledger.Ledger of the failing GPU
    simulations: dict[str, Any] = field(default_factory=dict)  # fix id -> simulate.Simulation
    situation: Any = None  # situation.Situation the diagnosis was read against


def check_constraints(flat: Mapping[str, Any], kb: Knowledge) -> list[Violation]:
    """Constraints the given config/env already violates."""
    return [
        Violation(con["id"])
        for con in kb.entries("constraints")
        if con.get("violated_when") and evaluate(con["violated_when"], flat)
    ]


def _rests_on_the_unsaid(constraint_id: str, flat: Mapping[str, Any], kb: Knowledge) -> bool:
    """The constraint breaks only through what the user did not say: a model-shape field of a model whose shape is
    unknown or a stand-in's (no experts known is not "dense"), or - for a layout read from the question's words - a
    config field left unset or filled with an assumed default."""
    con = kb.by_id.get("constraints", {}).get(constraint_id) or {}
    read = referenced_facts(con.get("violated_when") or {})
    fields = [f.removeprefix("config.") for f in read if f.startswith("config.")]
    shape_unknown = flat.get("config.hidden_size") is None or bool(flat.get("config.approximate_shape"))
    if shape_unknown and any(f in _SHAPE_FIELDS for f in fields):
        return True
    if flat.get("config.source") != "question":
        return False
    unsaid = set(flat.get("config.assumed") or [])
    return any(flat.get(f"config.{f}") is None or f in unsaid for f in fields)


# the model's own shape (a preset's or a config's model section), as opposed to the run's layout
_SHAPE_FIELDS = frozenset({"num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "ffn_hidden_size",
                           "vocab_size", "num_moe_experts", "moe_router_topk", "kv_channels"})


def _named_fixes(rule: Mapping[str, Any], flat: Mapping[str, Any], kb: Knowledge) -> list[str]:
    """Fix ids the situation itself names for the rule (``fixes_named_by``: a setting the user took out)."""
    known = kb.by_id.get("fixes", {})
    return [f for fact in rule.get("fixes_named_by", []) for f in flat.get(fact) or [] if f in known]


def _constraint_alternatives(rule: Mapping[str, Any], flat: Mapping[str, Any], kb: Knowledge) -> list[str]:
    """Fixes a constraint offers instead of the setting it forbids, for the constraints the rule points at."""
    out: list[str] = []
    for fact in rule.get("fixes_from", []):
        for con_id in flat.get(fact) or []:
            out += kb.by_id.get("constraints", {}).get(con_id, {}).get("alternatives", [])
    return out


# Where each fact comes from, for the reliability of a rule that reads it (knowledge/ledger.yaml sources).
_SOURCE_OF_PREFIX = (("stats.", "memory-stats"), ("snapshot.", "snapshot"), ("estimate.", "estimate"),
                     ("question.", "question"), ("config.", "config"), ("derived.", "config"), ("env.", "env"),
                     ("gpu.", "gpu-table"), ("log.", "log"))
_OOM_MESSAGE_FACTS = frozenset({
    "log.requested_bytes", "log.capacity_bytes", "log.free_bytes", "log.allocated_bytes", "log.reserved_bytes",
    "log.reserved_unallocated_bytes", "log.private_pool_bytes", "log.process_bytes", "log.other_process_bytes",
    "log.other_process_count", "log.fragmentation_ratio", "log.non_pytorch_bytes", "log.graph_pool_ratio",
    "log.outside_cache_bytes"})


def fact_source(name: str, flat: Mapping[str, Any]) -> str:
    """The kind of evidence a fact comes from; a config field the tool filled with a recipe default is 'assumed'."""
    if name in _OOM_MESSAGE_FACTS:
        return "oom-message"
    if name.startswith(("config.", "derived.")) and flat.get("config.source") == "question":
        return "question"  # settings read from the user's prose are as good as the prose
    if name.startswith("config."):
        field = name.removeprefix("config.")
        stand_in = flat.get("config.from_preset") if flat.get("config.approximate_shape") else None
        if field in (flat.get("config.assumed") or []) or field in (stand_in or []):
            return "assumed"
    if name.startswith("estimate.") and flat.get("config.approximate_shape"):
        return "assumed"  # an estimate of a stand-in shape is only as good as that assumption
    if name.startswith("estimate.") and flat.get("config.world_size") is None and flat.get("gpu.count") is None \
            and (flat.get("config.use_megatron_fsdp") or flat.get("config.use_distributed_optimizer")):
        return "assumed"  # state sharded over a data-parallel size nobody gave: the per-GPU figure is an upper bound
    if name.startswith("situation."):  # as good as the reading it belongs to (its _source fact)
        field = name.removeprefix("situation.")
        kind = flat.get(f"situation.{_SOURCE_FIELD.get(field, field)}_source") or "words"
        return _SITUATION_SOURCES.get(kind, "question")
    return next((src for prefix, src in _SOURCE_OF_PREFIX if name.startswith(prefix)), "log")


def _rule_evidence(rule: Mapping[str, Any], flat: Mapping[str, Any], kb: Knowledge) -> tuple[float, str | None]:
    """(reliability, source) of the weakest evidence a rule's condition reads (a ledger-made rule names its own)."""
    from .ledger import reliability

    if rule.get("evidence_source"):
        return reliability(kb, rule["evidence_source"]), rule["evidence_source"]
    sources = {fact_source(name, flat) for name in _positive_facts(rule["when"])}
    if not sources:
        return reliability(kb, "assumed"), None
    weakest = min(sources, key=lambda src: reliability(kb, src))
    return reliability(kb, weakest), weakest


def _got_past_startup(flat: Mapping[str, Any]) -> bool:
    """GPU memory ran out in a training step, or the user says the run OOMs (so it was running)."""
    if flat.get("log.has_memory_failure") and not flat.get("log.host_oom"):
        return flat.get("log.phase") != "init"
    return "oom" in (flat.get("question.topics") or []) and not flat.get("log.provided")


def _positive_facts(cond: Mapping[str, Any]) -> list[str]:
    """Facts a condition relies on, leaving out ``not`` guards ("unless the engine is colocated"): a guard that
    holds because nothing says otherwise must not make the evidence behind the rule look weaker."""
    if "not" in cond:
        return []
    if "all" in cond or "any" in cond:
        return [name for sub in cond.get("all", cond.get("any", [])) for name in _positive_facts(sub)]
    return list(referenced_facts(cond))


def _score(rule: Mapping[str, Any], flat: Mapping[str, Any], kb: Knowledge, led: Any) -> CauseFinding:
    from . import ledger as ledger_mod

    cause = kb.by_id.get("causes", {}).get(rule["cause"], {})
    rel, source = _rule_evidence(rule, flat, kb)
    pol = ledger_mod.policy(kb)
    unquantified = float(pol.get("unquantified_share", 0.5))
    components = cause.get("explains") or []
    if not components:  # a verdict on the whole failure
        ran_out = (bool(flat.get("log.has_memory_failure")) and not flat.get("log.host_oom")) or (
            not flat.get("log.provided") and "oom" in (flat.get("question.topics") or []))
        # "it stopped at a config check / crashed" explains nothing of a run whose GPU memory did run out - unless
        # the rule says the failure now is another one (the OOM said is the one a change already ended)
        ran_out = ran_out and not rule.get("failure_now")
        share: float | None = 0.0 if ran_out and cause.get("stops_before_oom") else 1.0
        comp_source = None
    else:
        share, comp_source = ledger_mod.share(led, components) if led is not None else (None, None)
    if comp_source is not None and ledger_mod.reliability(kb, comp_source) < rel:
        rel, source = ledger_mod.reliability(kb, comp_source), comp_source
    # Not quantified: the evidence says the cause is possible, not how much it explains; the rule's stated
    # strength of that evidence orders such causes among themselves, below any cause the ledger quantifies.
    value = share * rel if share is not None else unquantified * rel * float(rule.get("confidence", 1.0))
    return CauseFinding(rule["cause"], value, [rule["id"]], share, rel, source)


def _ledger_rules(fired: list[tuple[int, Mapping[str, Any]]], rules: list[Mapping[str, Any]], led: Any,
                  kb: Knowledge) -> list[tuple[int, Mapping[str, Any]]]:
    """When no rule matched, the generic causes of the ledger components that own the deficit, as rules.

    This replaces a fixed fallback answer: a component holding at least ``owner_share`` of a quantified deficit
    names its generic cause (ledger.yaml `owner`; a checkpoint phase's transients name that phase's cause); the
    fixes are the ones the rules give for that cause, in file order, and the simulation drops those that cannot
    help this layout.
    """
    from . import ledger as ledger_mod

    if any(not rule.get("fallback") for _, rule in fired):
        return []
    pol = ledger_mod.policy(kb)
    owner_share = float(pol.get("owner_share", 0.5))
    owners = {c["id"]: c.get("owner") for c in pol.get("components") or []}
    owners["phase-transients"] = next((p.get("transients_owner") for p in pol.get("phases") or []
                                       if p["phase"] == led.phase), None)
    # a component too small to be what fills the GPU names nothing, however much of a small gap it covers
    floor = float(pol.get("owner_min_share_of_capacity", 0.0)) * (led.capacity_bytes or 0.0)
    found: dict[str, str] = {}
    for comp, cause in owners.items():
        share, source = ledger_mod.share(led, [comp])
        held = sum(e.bytes for e in led.entries if e.id == comp)
        if cause and share is not None and share >= owner_share and cause not in found and held >= floor:
            found[cause] = source or "estimate"
    out = []
    for cause, source in found.items():
        fixes = list(dict.fromkeys(f for r in rules if r["cause"] == cause for f in r.get("fixes", [])))
        out.append((len(rules), {"id": f"ledger-{cause}", "cause": cause, "confidence": 0.0, "fixes": fixes,
                                 "when": {"all": []}, "evidence_source": source}))
    return out


def ranking_mode(kb: Knowledge, override: str | None = None) -> str:
    """'ledger' (scores from the deficit shares) or 'rules' (each rule's stated confidence), knowledge/ledger.yaml."""
    from .ledger import policy

    return override or str(policy(kb).get("ranking", "rules"))


def diagnose(flat: Mapping[str, Any], kb: Knowledge, led: Any = None, ranking: str = "rules") -> Diagnosis:
    violations = check_constraints(flat, kb)
    if _got_past_startup(flat):  # Megatron's start-up checks passed: a preset's numbers, not the layout, are off
        preset_only = set(flat.get("derived.preset_only_violations") or [])
        dropped = sorted(v.id for v in violations if v.id in preset_only)
        violations = [v for v in violations if v.id not in preset_only]
        flat = {**flat, "derived.preset_conflicts": dropped}
    # a breach a layout read from the user's words makes only with what they did not say (EP 16 of a model the tool
    # does not know is MoE: no experts known is not "dense") is a question about the run, not its verdict
    violations = [v for v in violations if not _rests_on_the_unsaid(v.id, flat, kb)]
    # Rules may reason over the violations themselves (cause config-incompatibility).
    flat = {**flat, "derived.violated_constraints": [v.id for v in violations]}
    rules = kb.entries("rules")
    ruled_out = ruled_out_causes(flat, kb)
    fired = [(pos, rule) for pos, rule in enumerate(rules)
             if rule["cause"] not in ruled_out and evaluate(rule["when"], flat)]
    if ranking == "ledger" and led is not None:
        fired += [(pos, r) for pos, r in _ledger_rules(fired, rules, led, kb) if r["cause"] not in ruled_out]
    fired += _situation_rules(fired, rules, flat, kb, ruled_out)
    generic_only = bool(fired) and all(rule.get("fallback") for _, rule in fired)
    if not generic_only:
        fired = [(pos, rule) for pos, rule in fired if not rule.get("fallback")]

    causes: dict[str, CauseFinding] = {}
    first_pos: dict[str, int] = {}
    rule_score: dict[str, float] = {}
    for pos, rule in fired:
        scored = _score(rule, flat, kb, led)
        if ranking == "rules":  # the rule's stated confidence decides; the share is still reported
            scored.confidence = float(rule["confidence"])
        rule_score[rule["id"]] = scored.confidence  # the rule's own evidence orders it among its cause's rules
        if ranking != "rules":  # what the situation says of a cause counts as much as the deficit share it explains
            scored.support = support_of(kb.by_id.get("causes", {}).get(rule["cause"], {}), flat, kb)[0]
            scored.confidence = max(scored.confidence, scored.support)
        finding = causes.get(rule["cause"])
        if finding is None or scored.confidence > finding.confidence:
            scored.rules = [*(finding.rules if finding else []), rule["id"]]
            causes[rule["cause"]] = scored
        else:
            finding.rules.append(rule["id"])
        first_pos.setdefault(rule["cause"], pos)
    # ties: the cause whose best-supported rule read more facts (the more specific evidence) first
    specific = {rule["id"]: len(set(referenced_facts(rule["when"]))) for _, rule in fired}
    depth = {c.id: max(specific[r] for r in c.rules) if ranking == "ledger" else 0 for c in causes.values()}
    # ...then the cause the user's own words name: it explains what they say holds the memory ("the grad buffer is
    # back on the GPU"), or its causes.yaml situation.said_by holds ("the setting is ignored")
    says = {c.id: _said_by_user(kb.by_id.get("causes", {}).get(c.id, {}), flat) for c in causes.values()}
    ranked_causes = sorted(causes.values(), key=lambda c: (-round(c.confidence, 6), -round(c.support, 6),
                                                            not says[c.id], -depth[c.id], first_pos[c.id]))

    cause_rank = {c.id: i for i, c in enumerate(ranked_causes)}
    # within a cause: the better-supported rule first, then the more specific one (it read more facts)
    ordered_rules = sorted(fired, key=lambda pr: (cause_rank[pr[1]["cause"]], -round(rule_score[pr[1]["id"]], 6),
                                                  -specific[pr[1]["id"]] if ranking == "ledger" else 0, pr[0]))

    applied = [
        fix["id"]
        for fix in kb.entries("fixes")
        if fix.get("already_applied_when") and evaluate(fix["already_applied_when"], flat)
    ]
    tried = [f for f in flat.get("situation.tried") or [] if f not in applied and f in kb.by_id.get("fixes", {})]
    # what the user says made it fit is the answer to confirm, although the layout they quote already has it
    worked = set(flat.get("situation.worked_with") or [])
    applied = [f for f in applied if f not in worked]
    tried = [f for f in tried if f not in worked]
    rule_fixes = {rule["id"]: [*_named_fixes(rule, flat, kb), *rule.get("fixes", []),
                               *_constraint_alternatives(rule, flat, kb)]
                  for _, rule in fired}

    avoid: dict[str, AvoidAdvice] = {}
    for _, rule in ordered_rules:
        for item in rule.get("avoid", []):
            avoid.setdefault(item["fix"], AvoidAdvice(item["fix"], rule["id"], "rule", item["reason"]))
    # A constraint's blocked fix is worth a warning only if something put it on the table: a fired
    # rule, the user's question, or the config itself (then it has to be turned off).
    proposed = {f for ids in rule_fixes.values() for f in ids}
    proposed |= {*(flat.get("question.mentioned_fixes") or []), *applied}
    for con in kb.entries("constraints"):
        if con.get("blocks_when") and evaluate(con["blocks_when"], flat):
            for fix_id in con.get("blocks_fixes", []):
                if fix_id in proposed:
                    avoid.setdefault(fix_id, AvoidAdvice(fix_id, con["id"], "constraint", con["message"]))
    joiner = ((kb.tables.get("situation") or {}).get("wording") or {}).get("sentences_join") or {"en": " "}
    for fix in kb.entries("fixes"):  # a fix the situation says cannot help here (fixes.yaml situation.rules_out)
        whys = fix_ruled_out_whys(fix, flat) if fix["id"] in proposed else ()
        if whys:
            avoid.setdefault(fix["id"], AvoidAdvice(fix["id"], fix["id"], "situation", join_reasons(whys, joiner)))
    refused = ((kb.tables.get("situation") or {}).get("wording") or {}).get("refused")
    for fix_id in flat.get("situation.refused") or []:  # what the user said is not an option for them
        if fix_id in proposed and refused:
            avoid.setdefault(fix_id, AvoidAdvice(fix_id, "refused", "situation", refused))

    fixes: dict[str, FixAdvice] = {}

    def recommend(fix_id: str, because: str) -> None:
        if fix_id in avoid or fix_id in applied or fix_id in tried:
            return
        fixes.setdefault(fix_id, FixAdvice(fix_id, len(fixes) + 1)).rules.append(because)
        for companion in kb.get("fixes", fix_id).get("companions", []):
            if companion["fix"] not in fixes and evaluate(companion["when"], flat):
                recommend(companion["fix"], fix_id)

    for _, rule in ordered_rules:
        for fix_id in rule_fixes[rule["id"]]:
            recommend(fix_id, rule["id"])
    # a setting that did nothing in a framework with its own keys for it: after the check that it applied, the same
    # fix through the keys that framework reads, when the leading cause says so (causes.yaml)
    top_cause = kb.by_id.get("causes", {}).get(ranked_causes[0].id, {}) if ranked_causes else {}
    if (top_cause.get("situation") or {}).get("retry_through_framework_keys"):
        framework = flat.get("situation.framework")
        for fix_id in flat.get("situation.no_effect") or []:
            fix = kb.by_id.get("fixes", {}).get(fix_id) or {}
            if fix_id in tried and any(f.get("framework") == framework for f in fix.get("frameworks") or []):
                tried.remove(fix_id)
                recommend(fix_id, f"{AGAIN}{framework}")
    # what the user already tried and still ran out with: the next steps up its ladder (fixes.yaml next), unless the
    # leading cause is one no bigger dose helps (causes.yaml tried_did_not_help): then what did nothing is advised
    # against, and nothing up its ladder is proposed
    tried_and_failed = list(dict.fromkeys([*(flat.get("situation.tried") or []),
                                           *(flat.get("situation.no_effect") or [])]))
    futile = (top_cause.get("situation") or {}).get("tried_did_not_help")
    if futile:
        for fix_id in flat.get("situation.no_effect") or []:
            if fix_id in kb.by_id.get("fixes", {}):
                avoid.setdefault(fix_id, AvoidAdvice(fix_id, top_cause["id"], "tried", futile))
    for fix_id in [] if futile else tried_and_failed:
        for step in (kb.by_id.get("fixes", {}).get(fix_id) or {}).get("next", []):
            recommend(step, f"{LADDER}{fix_id}")

    return Diagnosis(
        kb_version=kb.version,
        causes=ranked_causes,
        fixes=list(fixes.values()),
        avoid=list(avoid.values()),
        already_applied=applied,
        violations=violations,
        fired_rules=[rule["id"] for _, rule in fired],
        facts=flat,
        ruled_out=ruled_out,
        tried=tried,
        generic_only=generic_only,
    )


GPU_FAILURE_KINDS = frozenset({"allocator", "nccl", "cuda", "cublas", "cudnn"})  # signatures.yaml kinds
HOST_SIDE_COMPONENTS = frozenset({"phase-transients"})  # what a load or save holds can be host RAM as well


def host_memory_only(flat: Mapping[str, Any]) -> str | None:
    """The facts that say host RAM ran out while no GPU allocation failed (None when they do not)."""
    if set(flat.get("log.kinds") or []) & GPU_FAILURE_KINDS:
        return None
    if flat.get("log.host_oom"):
        return "log.host_oom=True, no GPU memory failure in the log"
    if flat.get("situation.process") == "host":
        return "situation.process=host, no GPU memory failure in the log"
    return None


def fired_branches(branches: Sequence[Mapping[str, Any]] | None, flat: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The rules_out branches (causes.yaml / fixes.yaml situation.rules_out) whose condition holds: the entry is
    ruled out when any does, and only their reasons are true of this situation."""
    return [branch for branch in branches or () if evaluate(branch["when"], flat)]


def stated_facts(conds: Sequence[Mapping[str, Any]], flat: Mapping[str, Any]) -> str:
    """The facts the conditions read that the evidence gave, as name=value: what the answer cites."""
    names = dict.fromkeys(name for cond in conds for name in referenced_facts(cond))
    return ", ".join(f"{name}={flat.get(name)}" for name in names if flat.get(name) not in (None, [], ""))


def join_reasons(whys: Sequence[Mapping[str, str]], joiner: Mapping[str, str]) -> dict[str, str]:
    """Several reasons as one text per language (``joiner``: situation.yaml wording), each said once: two
    branches that held may give the same reason."""
    return {lang: sep.join(dict.fromkeys(w[lang] for w in whys if lang in w)) for lang, sep in joiner.items()}


def _no_gpu_shortage(cause: Mapping[str, Any], flat: Mapping[str, Any], fault_topics: frozenset[str] = frozenset(),
                     hardware_topics: frozenset[str] = frozenset()) -> tuple[str, str] | None:
    """(facts, ledger.yaml ruled_out_explain key) when the evidence says no GPU memory ran out for this cause to
    explain: a crash with no memory signal on any rank (and not one the user says a workaround raised after an
    OOM) rules out every cause that explains memory (a ledger component), and so does a fault the user names
    (``fault_topics``: an illegal access, a transport error) with no out-of-memory said anywhere; host RAM that ran
    out, with no GPU memory failure anywhere, every cause that explains GPU memory (a load's or save's transients
    stay: they live in host RAM too).  A faulty GPU the user names (``hardware_topics``: an uncorrectable ECC error)
    rules them all out even where an OOM is said: the OOM on it measures the hardware."""
    explains = set(cause.get("explains") or [])
    topics = set(flat.get("question.topics") or [])
    faulty = sorted(topics & hardware_topics)
    if explains and faulty:
        return f"question.topics={','.join(faulty)}", "hardware"
    quiet = not flat.get("log.has_memory_failure") and not flat.get("log.host_oom")
    # ...unless the user says it ran out of memory and names the crash as what a workaround raised afterwards
    crash = flat.get("log.crash") and not flat.get("situation.error_from_a_try")
    if explains and crash and quiet:
        return "log.crash=True, log.has_memory_failure=False", "crash"
    named = sorted(topics & fault_topics)
    # (pipeline.run takes "oom" out of the topics where it is only asked about: situation.oom_said)
    if explains and named and quiet and "oom" not in topics and not flat.get("situation.gpu_memory_failed"):
        return f"question.topics={','.join(named)}, no out-of-memory said", "fault"
    host_only = host_memory_only(flat)
    # ...unless the user's own words name this cause: a setting said not to have applied may be a host-side one
    # (rank-0 loading, a sharded init: ms-swift#9980, every rank holding the whole model in host RAM)
    if host_only and explains - HOST_SIDE_COMPONENTS and not _said_by(cause, flat):
        return host_only, "host"
    return None


def ruled_out_causes(flat: Mapping[str, Any], kb: Knowledge) -> dict[str, RuledOut]:
    """Causes the situation contradicts, each with the facts that do it and the reason of each thing that held:
    the engine's own rule-out (_no_gpu_shortage) first, then every causes.yaml situation.rules_out branch whose
    condition is true - never the reason of a branch that did not hold."""
    ledger = kb.tables.get("ledger") or {}
    explain = ledger.get("ruled_out_explain") or {}
    faults = frozenset(ledger.get("fault_topics") or ())
    hardware = frozenset(ledger.get("hardware_fault_topics") or ())
    out = {}
    for cause in kb.entries("causes"):
        fired = fired_branches((cause.get("situation") or {}).get("rules_out"), flat)
        engine = _no_gpu_shortage(cause, flat, faults, hardware)
        if engine is not None and engine[1] == "fault" and fired:
            engine = None  # the cause's own reason names the fault more exactly ("the save crashed with a segfault")
        if not fired and engine is None:
            continue
        facts = [engine[0]] if engine else []
        branch_facts = stated_facts([b["when"] for b in fired], flat)
        facts += [branch_facts] if branch_facts else []
        whys = ([explain[engine[1]]] if engine else []) + [b["why"] for b in fired]
        out[cause["id"]] = RuledOut(", ".join(facts), tuple(whys))
    return out


# How each kind of situation evidence maps to a ledger.yaml reliability source.
_SITUATION_SOURCES = {"agent": "agent", "log": "log", "number": "oom-message", "config": "config", "words": "question"}


def support_of(cause: Mapping[str, Any], flat: Mapping[str, Any], kb: Knowledge) -> tuple[float, str | None]:
    """(reliability, source) of the strongest situation evidence that supports ``cause`` on its own (0, None when
    the situation does not): an ``any`` takes its best true branch, an ``all`` its weakest part."""
    cond = (cause.get("situation") or {}).get("supports")
    if not cond or not evaluate(cond, flat):
        return 0.0, None
    return _strength(cond, flat, kb)


def _strength(cond: Mapping[str, Any], flat: Mapping[str, Any], kb: Knowledge,
              inside_all: bool = False) -> tuple[float, str | None]:
    from .ledger import reliability

    if "any" in cond:
        return max((_strength(c, flat, kb) for c in cond["any"] if evaluate(c, flat)), key=lambda p: p[0],
                   default=(0.0, None))
    if "all" in cond:
        parts = [_strength(c, flat, kb, inside_all=True) for c in cond["all"]]
        return min(parts, key=lambda p: p[0], default=(0.0, None))
    if "not" in cond or (inside_all and not _identifies(cond)):
        return 1.0, None  # a guard ("unless ...", "larger than ..."): it says nothing for the cause on its own
    name = next(iter(referenced_facts(cond)))
    source = fact_source(name, flat)
    return reliability(kb, source), source


# Situation facts whose source is another field's (a size is as good as the reading it belongs to).
_SOURCE_FIELD = {"failed_bytes": "failed", "failed_batch": "failed", "waste_bytes": "waste", "waste_share": "waste",
                 "capacity_bytes": "waste", "headroom_bytes": "waste"}


def _identifies(leaf: Mapping[str, Any]) -> bool:
    """A leaf that names what the situation is (eq / in / contains, or a fact that is present), not a comparison."""
    if any(op in leaf for op in ("eq", "in", "contains", "matches")):
        return True
    return bool(leaf.get("exists") is True or leaf.get("truthy") is True)


def _said_by_user(cause: Mapping[str, Any], flat: Mapping[str, Any]) -> bool:
    """The user's words name this cause: it explains a component they say holds the memory, or its said_by holds."""
    named = set(flat.get("situation.components") or [])
    return bool(named & set(cause.get("explains") or [])) or _said_by(cause, flat)


def _said_by(cause: Mapping[str, Any], flat: Mapping[str, Any]) -> bool:
    """The cause's own said_by condition (causes.yaml situation.said_by) holds: the user's words name it."""
    said_by = (cause.get("situation") or {}).get("said_by")
    return bool(said_by and evaluate(said_by, flat))


def _situation_rules(fired: list[tuple[int, Mapping[str, Any]]], rules: list[Mapping[str, Any]],
                     flat: Mapping[str, Any], kb: Knowledge, ruled_out: Mapping[str, RuledOut]
                     ) -> list[tuple[int, Mapping[str, Any]]]:
    """Causes the situation supports that no rule concluded, as rules: the situation is evidence of its own (a
    failure in save_checkpoint frames is a save-time failure whatever the numbers say)."""
    concluded = {rule["cause"] for _, rule in fired if not rule.get("fallback")}
    # "did it run out of memory?" with nothing that says it did: the phase alone does not make a memory cause the
    # answer (the failure may be any error); the check that reads the failing rank's error line comes first
    unsure = flat.get("situation.oom_asked")
    out = []
    for cause in kb.entries("causes"):
        if cause["id"] in concluded or cause["id"] in ruled_out or (unsure and cause.get("explains")):
            continue
        strength, source = support_of(cause, flat, kb)
        if not strength:
            continue
        own = cause_fixes(cause["id"], kb)
        named = [f for f in flat.get("question.mentioned_fixes") or [] if f in own]  # what the user asks about
        # a cause the user only suspects ("is SGLang leaking?") leads to its check; the check has not spoken, so
        # the fixes the cause would make useless are not ruled out yet
        seen = evaluate(cause["situation"]["supports"], {**flat, "situation.suspected_trend": None})
        out.append((len(rules), {"id": f"situation-{cause['id']}", "cause": cause["id"], "confidence": strength,
                                 "fixes": list(dict.fromkeys([*named, *own])),
                                 "avoid": cause["situation"].get("avoid", []) if seen else [],
                                 "when": {"all": []}, "evidence_source": source}))
    return out


LADDER = "next-after:"  # a FixAdvice reason: the next step up the ladder of a fix the user already tried
AGAIN = "through-keys-of:"  # a FixAdvice reason: a setting that did nothing, set through its framework's own keys


def rank_fixes(diag: Diagnosis, sims: Mapping[str, Any], led: Any, kb: Knowledge,
               ranking: str = "ledger") -> Diagnosis:
    """Order the recommendations by what their simulations predict; drop what cannot help.

    1. free fixes (fixes.yaml ``free``) of the causes that own the deficit (share >= ledger owner_share, or the
       top cause when nothing is quantified), in cause order;
    2. config fixes predicted to fit, cheapest first (relative throughput, costs.yaml), then by saving;
    3. config fixes that help but do not fit alone: the owning causes' first, then largest saving;
    4. everything else in rule order.
    With ``ranking='rules'`` the rule order is kept and only the dropping applies.
    A simulated fix that breaks a constraint on this layout moves to ``avoid`` with that constraint's message; one
    that saves nothing here (activations already gone in this phase, a setting already in place) is dropped.
    """
    from .ledger import policy

    owner_share = float(policy(kb).get("owner_share", 0.5))
    owners = {c.id for c in diag.causes if c.share is not None and c.share >= owner_share}
    if diag.causes and diag.causes[0].support > 0:  # the situation named what failed: the causes ranked below it
        top = round(diag.causes[0].confidence, 6)  # do not own the failure, whatever their share of the deficit
        owners = {c.id for c in diag.causes if c.id in owners and round(c.confidence, 6) >= top}
    if not owners and diag.causes:
        owners = {diag.causes[0].id}
    owner_rules = {r for c in diag.causes if c.id in owners for r in c.rules}
    causes = kb.by_id.get("causes", {})
    # a top cause the situation named whose own fixes are all checks (a setting that did not apply, memory that
    # grows, a software update): that check leads, whatever the simulations of the capacity fixes predict
    top_fixes = cause_fixes(diag.causes[0].id, kb) if diag.causes and diag.causes[0].support > 0 else []
    lead_checks = set(top_fixes) if all(kb.get("fixes", f).get("category") == "diagnosis" for f in top_fixes) else set()
    owned = {comp for c in diag.causes if c.id in owners for comp in causes.get(c.id, {}).get("explains") or []}
    from .ledger import present_components

    present = present_components(led.phase if led is not None else None, kb)
    optimizer_step = led is not None and led.phase == "optimizer"
    # when no simulated fix fits alone, the savings do not decide: the top cause's most confident rule says what the
    # evidence calls for first (a bound such as "no layout of these GPUs holds the model state" outranks re-layouts)
    named_rule = _lead_rule(diag, kb)
    lead_rule = named_rule if not any(s.fits for s in sims.values() if s is not None) else None
    lead_order = {f: i for i, f in enumerate(kb.get("rules", lead_rule).get("fixes") or [])} if lead_rule else {}
    # the rule that named the top cause's mechanism puts a free fix first (TORCH_NCCL_AVOID_RECORD_STREAMS for cache
    # held by collectives): free, it leads before the other owning causes' free fixes
    named_first = (kb.get("rules", named_rule).get("fixes") or [None])[0] if named_rule else None
    avoid = list(diag.avoid)
    avoided = {a.id for a in avoid}
    # a crash with no memory signal anywhere: a rule offers a fix to take the crashing path away (graphs off for an
    # error raised by graph code), not for what it would shrink in the failing phase or save on an assumed layout
    facts = diag.facts
    crash_only = bool(facts.get("log.crash")) and not (facts.get("log.has_memory_failure") or facts.get("log.host_oom"))
    kept: list[tuple[tuple, FixAdvice]] = []
    worked = set(facts.get("situation.worked_with") or [])  # set in the layout quoted because it worked
    for pos, advice in enumerate(diag.fixes):
        sim = None if crash_only else sims.get(advice.id)  # a crash: no memory to simulate a saving of
        if sim is not None and sim.dropped == "already-set" and advice.id in worked:
            sim = None
        if sim is not None and sim.dropped:
            constraint = kb.by_id.get("constraints", {}).get(sim.dropped)
            # a rule this fix's simulated form breaks, which itself names the fix as the way out (the layers must
            # split evenly over PP: set the first / last stages' layer counts): another form of the fix meets it
            if constraint is not None and advice.id in (constraint.get("alternatives") or ()):
                sim = None
        if sim is not None and sim.dropped:
            if constraint is not None and advice.id not in avoided:
                avoid.append(AvoidAdvice(advice.id, constraint["id"], "simulation", constraint["message"]))
                avoided.add(advice.id)
            continue
        fix = kb.get("fixes", advice.id)
        if fix.get("reduces") and not set(fix["reduces"]) & present and not crash_only:
            continue  # what it shrinks does not exist in the failing phase (activations at checkpoint load)
        free = bool(fix.get("free"))
        simulated = sim is not None and sim.predicted_saving_bytes is not None and sim.basis in ("estimate", "request")
        if ranking == "rules":
            key = (pos,)
        elif all(r.startswith(LADDER) for r in advice.rules):  # what comes after the user's own attempt, once
            key = (4, pos)  # the rules' fixes and checks have had their say
        elif sim is not None and sim.plan_step is not None and not (free and _owned(fix, owned)):
            key = (0.5, sim.plan_step)  # the cheapest combination that fits, in its order
        elif free and advice.id == named_first and named_rule in advice.rules:
            key = (0, -1)
        elif free and _owned(fix, owned) and (set(advice.rules) & owner_rules
                                              or _follows_owner(advice, diag, owner_rules)):
            key: tuple = (0, pos)
        elif advice.id in lead_checks:
            key = (0, pos)  # the check the top cause itself calls for: the other fixes' simulations assume it
        elif optimizer_step and set(fix.get("reduces") or ()) == {"optimizer"} and (
                not simulated or (sim.predicted_saving_bytes or 0.0) > 0):
            # the optimizer state's own allocation failed (Adam's moments at the first step): what shrinks that
            # state comes before re-layouts that shrink everything; those that fit first, then by saving
            key = (0.8, not (simulated and sim.fits), -(sim.predicted_saving_bytes or 0.0) if simulated else 0.0, pos)
        elif advice.id in lead_order and lead_rule in advice.rules:
            key = (1.5, lead_order[advice.id])
        elif simulated and sim.fits and sim.basis == "request":  # shrinks the very allocation that failed, on the
            key = (0.75, pos)  # OOM message's own numbers, and changes no layout: before any re-layout that fits
        elif simulated and sim.fits:  # exact fixes before those that change the training, then cheapest first;
            known = sim.relative_throughput is not None  # a fix with no measured cost after those with one
            key = (1, bool(fix.get("changes_training")), not known, -(sim.relative_throughput or 0.0),
                   -(sim.predicted_saving_bytes or 0.0), pos)
        elif simulated:  # helps, but not enough alone: what the owning causes call for first, then by saving
            owner = bool(set(advice.rules) & owner_rules)
            key = (2, not owner, -(sim.predicted_saving_bytes or 0.0), pos)
        else:  # nothing simulated: the rules' order, exact fixes before those that change the training
            key = (3, bool(fix.get("changes_training")), pos)
        kept.append((key, advice))
    kept.sort(key=lambda pair: pair[0])
    fixes = [FixAdvice(a.id, i + 1, a.rules) for i, (_, a) in enumerate(kept)]
    ranked = replace(diag, fixes=fixes, avoid=avoid, ledger=led, simulations=dict(sims))
    ranked.candidates = thin_evidence_candidates(ranked, kb)
    nothing = not ranked.causes  # no rule matched anything given: an answer still says what to check first
    if (ranked.generic_only or nothing) and not diag.facts.get("log.requested_bytes"):
        ranked = _check_first(ranked, kb)
    elif not ranked.fixes:  # causes with nothing to do about them (a broken constraint alone): the check leads
        ranked = _lead_with_check(ranked, kb)
    return ranked


def _lead_rule(diag: Diagnosis, kb: Knowledge) -> str | None:
    """The most confident rule that concluded the top cause (None when the top cause came from no rule)."""
    if not diag.causes:
        return None
    rules = kb.by_id.get("rules", {})
    named = [r for r in diag.causes[0].rules if r in rules]
    return max(named, key=lambda r: float(rules[r].get("confidence", 0)), default=None)


def _usable_check(candidates: Mapping[str, Any], flat: Mapping[str, Any], kb: Knowledge) -> str | None:
    """The check _check_fix picks, unless the situation rules it out (one GPU has no other rank to compare): then
    the per-step measurement, which every run has."""
    check = _check_fix(candidates, flat)
    if check and fix_ruled_out(kb.get("fixes", check), flat):
        quiet = candidates.get("check_fix_no_failure")
        return None if quiet == check or (quiet and fix_ruled_out(kb.get("fixes", quiet), flat)) else quiet
    return check


def _check_fix(candidates: Mapping[str, Any], flat: Mapping[str, Any]) -> str | None:
    """The check that gets the missing evidence: the first failing rank's traceback and full OOM message (also the
    per-rank comparison a question about which rank or stage holds more needs), or - where nothing says anything
    failed and no rank is in question (how much memory something uses) - the per-step measurement."""
    if flat.get("situation.not_applied_asked") and candidates.get("check_fix_applied_asked"):
        return candidates["check_fix_applied_asked"]  # "does it reach the run at all?": print it in the process
    host = flat.get("situation.process") == "host" or flat.get("log.oom_kind") == "host"
    if host and candidates.get("check_fix_host"):
        return candidates["check_fix_host"]  # no rank printed a GPU OOM message to read
    topics = flat.get("question.topics") or []
    failed = (flat.get("log.has_memory_failure") or flat.get("log.crash")
              # "how much room is left before an OOM" (headroom) names the OOM without reporting one
              or ((flat.get("situation.failure_said") or "oom" in topics) and "headroom" not in topics))
    ranks = flat.get("situation.where") or {"pipeline-imbalance", "single-rank", "pipeline-parallel"} & set(topics)
    quiet = candidates.get("check_fix_no_failure")
    # a failure in a pass that runs between training steps that fit (validation): what separates the causes is the
    # memory before and during that pass, not which rank failed first
    between = candidates.get("check_fix_between_steps")
    one_rank = flat.get("situation.where") or {"pipeline-imbalance", "single-rank"} & set(topics)  # PP alone is no rank
    if between and failed and not one_rank and flat.get("situation.phase") in (candidates.get("between_steps") or ()):
        return between
    moving = candidates.get("check_fix_moving")
    if moving and not ranks and (flat.get("situation.trend") in (candidates.get("moving_trends") or ())
                                 or flat.get("situation.step") in (candidates.get("moving_steps") or ())):
        return moving
    stated = candidates.get("check_fix_setting_stated")
    # memory ran out (not a crash or a kernel fault, whose first failing rank's error is the evidence)
    ran_out = ((flat.get("log.has_memory_failure") or flat.get("situation.oom_said")
                or flat.get("situation.gpu_memory_failed"))
               and not flat.get("log.crash") and "kernel-fault" not in topics)
    # the settings the user names, or hands over as the run's own lines (--set): does the run have them?
    given = flat.get("situation.setting_stated") or flat.get("config.source") == "overrides"
    if stated and ran_out and not ranks and given:
        return stated
    return quiet if quiet and not failed and not ranks else candidates.get("check_fix")


def _lead_with_check(diag: Diagnosis, kb: Knowledge) -> Diagnosis:
    from .ledger import policy

    check = _usable_check(policy(kb).get("candidates") or {}, diag.facts, kb)
    if not check or check in {a.id for a in diag.avoid}:
        return diag
    return replace(diag, fixes=[FixAdvice(check, 1, ["thin-evidence"])])


def cause_fixes(cause_id: str, kb: Knowledge) -> list[str]:
    """A cause's own fixes, in the order of its causes.yaml situation.fixes (stated per cause, so where a new rule
    stands in rules.yaml cannot reorder them; a rule may still conclude a fix for its own situation only)."""
    cause = kb.by_id.get("causes", {}).get(cause_id, {})
    return list((cause.get("situation") or {}).get("fixes") or [])


def fix_ruled_out_whys(fix: Mapping[str, Any], flat: Mapping[str, Any]) -> tuple[Mapping[str, str], ...]:
    """Why the situation says this fix cannot help here: the reason of each fixes.yaml situation.rules_out branch
    that holds (none when nothing rules it out)."""
    return tuple(b["why"] for b in fired_branches((fix.get("situation") or {}).get("rules_out"), flat))


def fix_ruled_out(fix: Mapping[str, Any], flat: Mapping[str, Any]) -> bool:
    return bool(fix_ruled_out_whys(fix, flat))


def candidate_fix(cause_id: str, kb: Knowledge, flat: Mapping[str, Any]) -> str | None:
    """What to do once the check points at this cause: the first of its own fixes that was not tried and that the
    situation does not rule out."""
    tried = set(flat.get("situation.tried") or [])
    usable = (f for f in cause_fixes(cause_id, kb) if f not in tried and not fix_ruled_out(kb.get("fixes", f), flat))
    return next(usable, None)


def _check_first(diag: Diagnosis, kb: Knowledge) -> Diagnosis:
    """Only the generic rule matched and no OOM message says what failed: the first thing to do is the check that
    gets that evidence (ledger.yaml candidates.check_fix), and the answer names the causes that remain."""
    from .ledger import policy

    pol = policy(kb).get("candidates") or {}
    check = _usable_check(pol, diag.facts, kb)
    avoided = {a.id for a in diag.avoid}
    if not check or check in avoided:
        return diag
    generic = [g["cause"] for g in pol.get("generic", []) if not g.get("when") or evaluate(g["when"], diag.facts)]
    remaining = [c for c in generic if c not in diag.ruled_out]
    candidates = list(dict.fromkeys(remaining))[: int(pol.get("max", 3))]
    check = _cause_check(candidates[:1], pol, diag, kb) or check
    # the generic rule's fixes are guesses: what follows the check is each candidate's own fix, said beside it;
    # the causes are the candidates, in the same order, none more certain than the evidence makes it
    found = {c.id: c for c in diag.causes}
    causes = [found.get(c) or CauseFinding(c, 0.0, ["thin-evidence"]) for c in candidates]
    return replace(diag, causes=causes, fixes=[FixAdvice(check, 1, ["thin-evidence"])], candidates=candidates)


def _cause_check(first: list[str], pol: Mapping[str, Any], diag: Diagnosis, kb: Knowledge) -> str | None:
    """The first candidate's own separating test run, where it is a fix that fits the run (ledger.yaml candidates
    cause_checks) and nothing rules it out or advises against it; else None."""
    avoided = {a.id for a in diag.avoid}
    for entry in pol.get("cause_checks") or []:
        fix = entry["fix"]
        if (first == [entry["cause"]] and evaluate(entry["when"], diag.facts) and fix not in avoided
                and fix not in set(diag.facts.get("situation.tried") or [])
                and not fix_ruled_out(kb.get("fixes", fix), diag.facts)):
            return fix
    return None


def thin_evidence_candidates(diag: Diagnosis, kb: Knowledge) -> list[str]:
    """When the leading cause rests only on the user's words or on assumed defaults, the causes still close to it
    (ledger.yaml candidates): the answer names them with the check that tells each apart instead of one guess."""
    from .ledger import policy, reliability

    pol = policy(kb).get("candidates") or {}
    if not diag.causes:
        return []
    top = diag.causes[0]
    weak = set(pol.get("weak_sources") or [])
    if top.evidence_source not in weak or top.support > reliability(kb, "question"):
        return []
    close = [c.id for c in diag.causes if c.confidence >= float(pol.get("close_ratio", 0.6)) * top.confidence]
    close = close[: int(pol.get("max", 3))]
    return close if len(close) > 1 else []


def _owned(fix: Mapping[str, Any], owned: set[str]) -> bool:
    """A free fix comes first when it frees what an owning cause explains (expandable segments: cached blocks)."""
    return bool(set(fix.get("releases") or []) & owned)


def _follows_owner(advice: FixAdvice, diag: Diagnosis, owner_rules: set[str]) -> bool:
    """A companion (recommended because of another fix) follows that fix's standing."""
    parents = {f.id: f for f in diag.fixes}
    return any(r in parents and set(parents[r].rules) & owner_rules for r in advice.rules)
