"""``memtune plan``: the layouts of a model on a cluster that fit in memory, best expected throughput first.

``plan(PlanRequest(...), kb) -> PlanResult``; see search.py for the order of work, costs.py for the
throughput model and knowledge/costs.yaml for every factor and its source.
"""

from __future__ import annotations

from .search import PlannedLayout, PlanRequest, PlanResult, PlanStats, StagePeak, plan

__all__ = ["PlanRequest", "PlanResult", "PlanStats", "PlannedLayout", "StagePeak", "plan"]
