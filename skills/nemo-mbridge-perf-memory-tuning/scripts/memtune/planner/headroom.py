"""What a plan cannot tell apart: the memory estimator's and the throughput model's measured errors, by class.

A layout whose estimate fills the GPU to the last gigabyte fits only if the estimate is exact; the estimator's
mean absolute error on published runs of 10 GiB or more differs by class (knowledge/estimator.yaml
``estimate-error-band``, recomputed by benchmarks/accuracy.py and checked against it by the tests), so that is
what a plan leaves free unless the user says otherwise.  Likewise the throughput model is off by a measured amount
on published runs (knowledge/costs.yaml ``throughput-error``, from benchmarks/throughput.py): layouts scoring within
it of the first are ones the model cannot rank apart, and the plan says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..facts import TrainingConfig
from ..knowledge import Knowledge


def error_class(cfg: TrainingConfig) -> str:
    """``lora`` for a PEFT run, ``moe`` for a model with routed experts, else ``dense``."""
    if cfg.peft:
        return "lora"
    return "moe" if cfg.num_moe_experts else "dense"


def error_band(cfg: TrainingConfig, kb: Knowledge) -> tuple[float, str]:
    """(fraction of the capacity to keep free, the class it was measured on) for ``cfg``."""
    cls = error_class(cfg)
    return float(kb.get("estimator", "estimate-error-band")["value"][cls]), cls


def throughput_band(cfg: TrainingConfig, costs: Mapping[str, Mapping[str, Any]]) -> tuple[str, float]:
    """(class, the throughput model's mean error on published runs of that class: costs.yaml ``throughput-error``).
    A LoRA run computes as its dense base model does, so it takes that class's error."""
    cls = "moe" if cfg.num_moe_experts else "dense"
    entry = costs.get("throughput-error")
    return cls, float(entry["params"][cls]) if entry else 0.0
