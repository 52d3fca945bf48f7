"""The memory a plan keeps free: the estimator's measured error for the run's class of model.

A layout whose estimate fills the GPU to the last gigabyte fits only if the estimate is exact; the estimator's
mean absolute error on published runs of 10 GiB or more differs by class (knowledge/estimator.yaml
``estimate-error-band``, recomputed by benchmarks/accuracy.py and checked against it by the tests), so that is
what a plan leaves free unless the user says otherwise.
"""

from __future__ import annotations

from ..facts import TrainingConfig
from ..knowledge import Knowledge

CLASSES = ("dense", "moe", "lora")


def error_class(cfg: TrainingConfig) -> str:
    """``lora`` for a PEFT run, ``moe`` for a model with routed experts, else ``dense``."""
    if cfg.peft:
        return "lora"
    return "moe" if cfg.num_moe_experts else "dense"


def error_band(cfg: TrainingConfig, kb: Knowledge) -> tuple[float, str]:
    """(fraction of the capacity to keep free, the class it was measured on) for ``cfg``."""
    cls = error_class(cfg)
    return float(kb.get("estimator", "estimate-error-band")["value"][cls]), cls
