"""``memtune plan``: the layouts of a model on a cluster that fit in memory, best expected throughput first.

``plan(PlanRequest(...), kb) -> PlanResult``; see search.py for the order of work, costs.py for the
throughput model and knowledge/costs.yaml for every factor and its source.  The search is imported on first
use only: ``diagnose`` reads the options and costs tables of this package without it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PlanRequest", "PlanResult", "PlanStats", "PlannedLayout", "Scored", "StagePeak", "plan", "score"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import search

        return vars(search)[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
