"""Cross-field facts that the condition language cannot compute itself.

Conditions compare one fact with a literal or a scaled fact; they cannot say
"TP divides the number of heads".  Upstream refuses such layouts at start-up
(see knowledge/constraints.yaml), so the checks are computed here once and
exposed as ``derived.<name>`` facts (the names are declared in
knowledge/facts.yaml).  ``Facts.flatten()`` prefixes the keys returned here
with ``derived.``.

Each value is True (the layout passes the upstream check), False (upstream
would refuse it) or None (an input the check needs is unknown).  A parallel
size left unset takes Megatron's default of 1; that can only make a check
pass, so an unset size never produces a violation nobody configured.
"""

from __future__ import annotations

from typing import Any

from .facts import EnvFacts, TrainingConfig

# The model-shape fields each upstream check reads.  A model the presets lack takes a stand-in's shape to be
# estimated (pipeline._approximate_shape); that shape says nothing about what upstream would refuse.
_SHAPE_CHECKS = {"tp_divides_heads": ("num_attention_heads",),
                 "tp_query_groups_compatible": ("num_attention_heads", "num_query_groups"),
                 "pp_divides_layers": ("num_layers",), "vpp_divides_layers": ("num_layers",),
                 "ep_divides_experts": ("num_moe_experts",)}


def derive(config: TrainingConfig, env: EnvFacts) -> dict[str, Any]:
    """Divisibility and environment checks, keyed by bare name (no ``derived.`` prefix)."""
    checks = _checks(config, env)
    if config.approximate_shape:
        for name, reads in _SHAPE_CHECKS.items():
            if any(f in config.from_preset for f in reads):
                checks[name] = None
    return checks


def _checks(config: TrainingConfig, env: EnvFacts) -> dict[str, Any]:
    return {
        "tp_divides_heads": tp_divides_heads(config),
        "tp_query_groups_compatible": tp_query_groups_compatible(config),
        "pp_divides_layers": pp_divides_layers(config),
        "vpp_divides_layers": vpp_divides_layers(config),
        "cp_divides_seq": cp_divides_seq(config),
        "ep_divides_experts": ep_divides_experts(config),
        "world_divisible": world_divisible(config),
        "world_divisible_expert": world_divisible_expert(config),
        "nccl_graph_register_off": nccl_graph_register_off(env),
        "experts_per_ep_rank": experts_per_ep_rank(config),
        **next_sizes(config),
    }


def _size(value: int | None) -> int:
    """A parallel size; unset means Megatron's default of 1."""
    return value if value else 1


def tp_divides_heads(config: TrainingConfig) -> bool | None:
    """MCore TransformerConfig: num_attention_heads must be a multiple of TP."""
    heads = config.num_attention_heads
    if heads is None:
        return None
    return heads % _size(config.tensor_model_parallel_size) == 0


def tp_query_groups_compatible(config: TrainingConfig) -> bool | None:
    """MCore TransformerConfig: num_query_groups must be a multiple OR a divisor of TP.

    Unset query groups mean multi-head attention (MCore sets them to the head count).
    """
    groups = config.num_query_groups or config.num_attention_heads
    if groups is None:
        return None
    tp = _size(config.tensor_model_parallel_size)
    return groups % tp == 0 or tp % groups == 0


def _uneven_stages(config: TrainingConfig) -> tuple[int | None, int | None]:
    # Not every TrainingConfig carries these Megatron fields; absent means an even split.
    return (
        getattr(config, "num_layers_in_first_pipeline_stage", None),
        getattr(config, "num_layers_in_last_pipeline_stage", None),
    )


def _has_layout(config: TrainingConfig) -> bool:
    """An explicit pipeline_model_parallel_layout is validated by its own upstream code, not here."""
    return getattr(config, "pipeline_model_parallel_layout", None) is not None


def _total_layers(config: TrainingConfig) -> int | None:
    """Layers that PP splits: the account_for_* flags each count as one extra layer upstream."""
    if config.num_layers is None:
        return None
    return (
        config.num_layers
        + int(bool(config.account_for_embedding_in_pipeline_split))
        + int(bool(config.account_for_loss_in_pipeline_split))
    )


def pp_divides_layers(config: TrainingConfig) -> bool | None:
    """MCore get_num_layers_to_build / TransformerConfig: layers split evenly over PP stages.

    With uneven first/last stages the remaining layers must split evenly over the middle stages,
    and middle stages without layers (or layers without middle stages) are refused.
    """
    total = _total_layers(config)
    if total is None or _has_layout(config):
        return None
    pp = _size(config.pipeline_model_parallel_size)
    first, last = _uneven_stages(config)
    if first is None and last is None:
        return total % pp == 0
    rest_layers = config.num_layers - (first or 0) - (last or 0)
    rest_stages = pp - (first is not None) - (last is not None)
    if rest_stages <= 0:
        return rest_layers == 0
    return rest_layers > 0 and rest_layers % rest_stages == 0


def vpp_divides_layers(config: TrainingConfig) -> bool | None:
    """Bridge GPTModelProvider.provide / MCore: each PP stage's layers split evenly into VPP chunks."""
    vpp = config.virtual_pipeline_model_parallel_size
    total = _total_layers(config)
    if vpp is None or total is None or _has_layout(config):
        return None
    pp = _size(config.pipeline_model_parallel_size)
    first, last = _uneven_stages(config)
    if first is None and last is None:
        return (total // pp) % vpp == 0
    if any(n is not None and n % vpp for n in (first, last)):
        return False
    rest_layers = config.num_layers - (first or 0) - (last or 0)
    rest_stages = pp - (first is not None) - (last is not None)
    return rest_stages <= 0 or (rest_layers // rest_stages) % vpp == 0


def cp_divides_seq(config: TrainingConfig) -> bool | None:
    """Bridge ConfigContainer.validate: with CP > 1, seq_length must be a multiple of 2 * CP."""
    cp = _size(config.context_parallel_size)
    if cp <= 1:
        return True
    if config.seq_length is None:
        return None
    return config.seq_length % (2 * cp) == 0


def ep_divides_experts(config: TrainingConfig) -> bool | None:
    """MCore BaseMoELayer: every EP rank holds the same number of experts."""
    if config.num_moe_experts is None:
        return None
    return config.num_moe_experts % _size(config.expert_model_parallel_size) == 0


def world_divisible(config: TrainingConfig) -> bool | None:
    """Bridge / MCore: world size must be a multiple of TP * PP * CP (the rest is DP)."""
    if config.world_size is None:
        return None
    model = (
        _size(config.tensor_model_parallel_size)
        * _size(config.pipeline_model_parallel_size)
        * _size(config.context_parallel_size)
    )
    return config.world_size % model == 0


def world_divisible_expert(config: TrainingConfig) -> bool | None:
    """MCore initialize_model_parallel: world size must be a multiple of ETP * EP * PP (ETP unset = TP).  With ETP
    unstated and the layout valid at ETP 1 (which Megatron-based RL launchers set: "TP2 / EP8 on one 8-GPU node"),
    the breach rests on a default nobody stated: unknown, not broken - except in a Megatron-LM argument list, which is
    complete (an absent --expert-tensor-parallel-size is the default)."""
    if config.world_size is None:
        return None
    rest = _size(config.expert_model_parallel_size) * _size(config.pipeline_model_parallel_size)
    etp = _size(config.expert_tensor_parallel_size or config.tensor_model_parallel_size)
    if config.world_size % (etp * rest) == 0:
        return True
    unstated = config.expert_tensor_parallel_size is None and config.source != "megatron-args"
    return None if unstated and config.world_size % rest == 0 else False


def nccl_graph_register_off(env: EnvFacts) -> bool | None:
    """NCCL_GRAPH_REGISTER is exactly "0" (what MCore's CUDA-graph assert tests).

    Unknown when no environment was given; False when one was given without the variable.
    """
    value = env.nccl_graph_register
    if value is None:
        value = env.variables.get("NCCL_GRAPH_REGISTER")
    if value is None:
        return False if env.provided else None
    return str(value).strip() == "0"


def experts_per_ep_rank(config: TrainingConfig) -> float | None:
    """Routed experts each expert-parallel rank stores (their weights, grads and optimizer states)."""
    if not config.num_moe_experts or config.expert_model_parallel_size is None:
        return None  # EP not stated: do not pretend it is 1
    return config.num_moe_experts / config.expert_model_parallel_size


def next_sizes(config: TrainingConfig) -> dict[str, int | None]:
    """The next size up (x2) of each parallel dimension and of the GPU count the config states, for apply lines."""
    sizes = {"next_tp": config.tensor_model_parallel_size, "next_pp": config.pipeline_model_parallel_size,
             "next_cp": config.context_parallel_size, "next_ep": config.expert_model_parallel_size,
             "next_world": config.world_size}
    return {name: 2 * size if size else None for name, size in sizes.items()}
