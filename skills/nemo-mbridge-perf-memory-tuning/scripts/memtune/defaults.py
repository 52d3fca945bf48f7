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


def fill_unstated(config: TrainingConfig, kb: Knowledge, bridge: bool = True) -> TrainingConfig:
    """``config`` with the Bridge recipe defaults in the fields it leaves ``None``; unchanged for Megatron-LM args
    and for a run described as launched the Megatron-LM way (``bridge=False``), whose defaults are off."""
    if not config.provided or config.source == "megatron-args" or not bridge:
        return config
    defaults = kb.get("estimator", "question-layout-defaults")["value"]
    gaps: dict[str, Any] = {}
    if config.use_distributed_optimizer is None and defaults.get("use_distributed_optimizer"):
        gaps["use_distributed_optimizer"] = True
    tp = config.tensor_model_parallel_size or 1
    if config.sequence_parallel is None and tp > 1 and defaults.get("sequence_parallel_when_tp_above_1"):
        gaps["sequence_parallel"] = True
    if not gaps:
        return config
    return replace(config, **gaps, assumed=[*config.assumed, *(k for k in gaps if k not in config.assumed)])


def refuse_invalid(config: TrainingConfig, env: EnvFacts, kb: Knowledge) -> None:
    """UserError quoting Megatron's own message when the layout breaks a constraint Megatron raises on.

    Megatron would stop such a run before allocating anything (e.g. an MoE model with TP > 1 and
    sequence parallelism off), so a memory figure for it would answer a question nobody can run.
    """
    from .derive import derive
    from .engine import check_constraints

    facts = Facts(config=config, env=env)
    facts.derived = derive(config, env)
    for violation in check_constraints(facts.flatten(), kb):
        con = kb.by_id["constraints"][violation.id]
        if con.get("upstream_error"):
            raise UserError(f"this layout is refused upstream ({violation.id}): \"{con['upstream_error']}\" "
                            f"({con['raised_at'].split(' ', 1)[0]}); {con['title']['en'].lower()}")
