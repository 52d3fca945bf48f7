"""What a run leaves unsaid, filled one way for ``diagnose``, ``estimate`` and ``plan``.

A Bridge run (a Bridge config or overrides, a question, a model preset with ``--set``) takes the
recipes' settings for what it does not say: Bridge recipes turn the distributed optimizer on and, with
TP above 1, sequence parallelism (knowledge/estimator.yaml ``question-layout-defaults``).  A Megatron-LM
argument list is complete - an absent store_true flag really is off - so it keeps Megatron-Core's
defaults.  Every field filled here is listed in ``TrainingConfig.assumed``, which each command prints.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .errors import UserError
from .facts import EnvFacts, Facts, TrainingConfig
from .knowledge import Knowledge


def fill_unstated(config: TrainingConfig, kb: Knowledge, bridge: bool = True,
                  trainer: str | None = None, recompute: str | None = None) -> TrainingConfig:
    """``config`` with the Bridge recipe defaults in the fields it leaves ``None``; unchanged for Megatron-LM args
    and for a run described as launched the Megatron-LM way (``bridge=False``), whose defaults are off.  A run the
    user says trains with PyTorch FSDP (``trainer`` "fsdp") shards weights, gradients and optimizer state unless told
    otherwise: FullyShardedDataParallel's default strategy is FULL_SHARD.  ``recompute``: the activation recompute the
    run's framework turns on by default (situation.yaml frameworks ``recompute_default``: LLaMA-Factory's and ms-swift's
    gradient checkpointing), filled where the run neither sets recompute nor says it is off."""
    if not config.provided:
        return config
    if recompute == "full" and config.recompute_granularity is None:
        filled = ("recompute_granularity", "recompute_method", "recompute_num_layers")
        config = replace(config, recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1,
                         assumed=[*config.assumed, *(k for k in filled if k not in config.assumed)])
    if trainer == "fsdp" and config.use_torch_fsdp2 is None and not config.use_megatron_fsdp:
        return replace(config, use_torch_fsdp2=True, assumed=[*config.assumed, "use_torch_fsdp2"])
    if config.source == "megatron-args" or not bridge:
        return config
    defaults = kb.get("estimator", "question-layout-defaults")["value"]
    gaps: dict[str, Any] = {}
    if config.use_distributed_optimizer is None and defaults.get("use_distributed_optimizer"):
        gaps["use_distributed_optimizer"] = True
    tp = config.tensor_model_parallel_size or 1
    if config.sequence_parallel is None and tp > 1 and defaults.get("sequence_parallel_when_tp_above_1"):
        gaps["sequence_parallel"] = True
    moe = (config.num_moe_experts or 0) > 1
    if config.moe_grouped_gemm is None and moe and defaults.get("moe_grouped_gemm_for_moe"):
        gaps["moe_grouped_gemm"] = True
    if not gaps:
        return config
    return replace(config, **gaps, assumed=[*config.assumed, *(k for k in gaps if k not in config.assumed)])


def refuse_invalid(config: TrainingConfig, env: EnvFacts, kb: Knowledge) -> list[str]:
    """UserError quoting Megatron's own message when the layout as stated breaks a constraint Megatron raises on;
    the same breach resting on a setting the run did not state (left unset or filled by an assumed default) is
    returned as a warning instead, and the estimate goes on.

    Megatron would stop such a run before allocating anything (e.g. an MoE model with TP > 1 and sequence
    parallelism stated off), so a memory figure for it would answer a question nobody can run; but a breach
    that only an unstated value makes is a question about what the run really sets, not a reason to refuse.
    """
    from .conditions import referenced_facts
    from .derive import derive
    from .engine import check_constraints

    facts = Facts(config=config, env=env)
    facts.derived = derive(config, env)
    warnings: list[str] = []
    for violation in check_constraints(facts.flatten(), kb):
        con = kb.by_id["constraints"][violation.id]
        if not con.get("upstream_error"):
            continue
        message = (f"this layout is refused upstream ({violation.id}): \"{con['upstream_error']}\" "
                   f"({con['raised_at'].split(' ', 1)[0]}); {con['title']['en'].lower()}")
        read = {f.split(".", 1)[1] for f in referenced_facts(con["violated_when"]) if f.startswith("config.")}
        unstated = sorted(_unstated(config, read))
        if not unstated:
            raise UserError(message)
        warnings.append(f"{message[0].upper()}{message[1:]} - it rests on {', '.join(unstated)}, which the run "
                        "does not state; estimated as given, so check what the run really sets")
    return warnings


def _unstated(config: TrainingConfig, names: set[str]) -> set[str]:
    """Of ``names``, the fields the run leaves unset or that a default filled (a Megatron-LM argument list leaves
    nothing unset: an absent flag is off)."""
    complete = config.source == "megatron-args"
    return {n for n in names if n in config.assumed or (not complete and vars(config).get(n) is None)}
