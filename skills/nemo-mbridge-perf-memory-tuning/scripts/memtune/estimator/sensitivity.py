"""How much an estimate rests on what the run left unsaid.

A layout given without every setting is estimated on assumptions: the Bridge recipe defaults ``fill_unstated``
filled in (``TrainingConfig.assumed``) and the settings it leaves off because nothing names them
(knowledge/estimator.yaml ``sensitivity-unstated``: FP8 parameter gather, the fused cross entropy).  Each is
estimated the other way; those that move the peak by more than ``sensitivity-share`` of it are reported with the
peak they give ("Assumed use_distributed_optimizer on; off, the peak would be 102.06 (+25.38)").  The other way is
only a probe: a value the layout cannot take (the estimator refuses it) is left out, not reported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..errors import UserError
from ..facts import TrainingConfig
from ..knowledge import Knowledge


@dataclass(frozen=True)
class Sensitivity:
    """One setting the estimate assumed, and the peak with the other value."""

    setting: str
    assumed: Any  # the value the estimate used; None: not stated, read as off
    other: Any
    peak_bytes: float  # the estimate's peak (max over stages) with ``other``
    delta_bytes: float  # that peak minus the estimate's own


def probes(cfg: TrainingConfig, kb: Knowledge) -> list[tuple[str, Any, Any]]:
    """(setting, assumed, other) for every assumed boolean and every unstated setting the knowledge base names."""
    out = [(name, vars(cfg)[name], not vars(cfg)[name]) for name in cfg.assumed
           if isinstance(vars(cfg).get(name), bool)]
    unstated = kb.get("estimator", "sensitivity-unstated")["value"]
    out += [(name, None, bool(on)) for name, on in unstated.items() if vars(cfg).get(name) is None]
    return out


def sensitivity(cfg: TrainingConfig, peak: float, peak_of: Callable[[TrainingConfig], float],
                kb: Knowledge) -> list[Sensitivity]:
    """The assumptions that move ``peak`` by more than the knowledge base's share of it, largest move first.

    ``peak_of`` estimates a config the way the estimate being explained was made (same GPU, environment, schedule).
    """
    share = float(kb.get("estimator", "sensitivity-share")["value"])
    found = []
    for name, assumed, other in probes(cfg, kb):
        try:
            moved = peak_of(replace(cfg, **{name: other}))
        except UserError:  # the layout cannot run that way: nothing to compare
            continue
        if abs(moved - peak) > share * peak:
            found.append(Sensitivity(name, assumed, other, moved, moved - peak))
    return sorted(found, key=lambda s: -abs(s.delta_bytes))
