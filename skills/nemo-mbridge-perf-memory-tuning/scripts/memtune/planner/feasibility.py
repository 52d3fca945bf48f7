"""Which layouts upstream would refuse: knowledge/constraints.yaml over each candidate's facts.

The planner never restates a rule.  For every candidate it builds the facts the constraints read
(``config.*`` from the candidate's fields over the base config, ``env.*`` from the user's
environment, ``derived.*`` from ``memtune.derive.derive``) and asks ``engine.check_constraints``.
Constraints the base config already violates whatever the layout are reported once as warnings and
then ignored, so one bad base setting does not silently empty the plan.  Results are cached on the
values the constraints actually read, which repeat across thousands of candidates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields as dc_fields
from dataclasses import replace
from typing import Any

from ..conditions import evaluate, referenced_facts
from ..derive import derive
from ..engine import check_constraints
from ..facts import EnvFacts, TrainingConfig
from ..knowledge import Knowledge

_UNSET = object()


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


class Feasibility:
    """Constraint checks for candidates that share one base config and environment."""

    def __init__(self, kb: Knowledge, base: TrainingConfig, env: EnvFacts, varied: frozenset[str]) -> None:
        self.kb = kb
        self.base = base
        self.environment = env
        names: set[str] = set()
        for con in kb.entries("constraints"):
            if con.get("violated_when"):
                names.update(referenced_facts(con["violated_when"]))
        config_names = sorted(n.split(".", 1)[1] for n in names if n.startswith("config."))
        self.varied_names = tuple(n for n in config_names if n in varied)
        self.derived_names = tuple(sorted(n.split(".", 1)[1] for n in names if n.startswith("derived.")))
        env_known = {f.name for f in dc_fields(EnvFacts)}
        self.fixed: dict[str, Any] = {f"env.{n.split('.', 1)[1]}": vars(env)[n.split(".", 1)[1]]
                                      for n in names if n.startswith("env.") and n.split(".", 1)[1] in env_known}
        self.fixed.update({f"config.{n}": vars(base).get(n) for n in config_names if n not in varied})
        self._derived: dict[tuple, dict[str, Any]] = {}
        self._verdicts: dict[tuple, tuple[str, ...]] = {}
        cleared = replace(base, **{f: None for f in varied})
        self.constant = tuple(v.id for v in check_constraints(self._flat({}, derive(cleared, env)), kb))
        # the constraints a layout can change the verdict of: those reading a varied or derived fact (the
        # others read the same facts for every candidate, so they are violated always, and in ``constant``,
        # or never)
        self.layout_constraints = tuple(
            con for con in kb.entries("constraints") if con.get("violated_when") and con["id"] not in self.constant
            and any(n.startswith("derived.") or (n.startswith("config.") and n.split(".", 1)[1] in varied)
                    for n in referenced_facts(con["violated_when"])))

    def _flat(self, fields: Mapping[str, Any], derived: Mapping[str, Any]) -> dict[str, Any]:
        flat = dict(self.fixed)
        for name in self.varied_names:
            flat[f"config.{name}"] = fields.get(name)
        for name in self.derived_names:
            flat[f"derived.{name}"] = derived.get(name)
        return flat

    def derived(self, shape_key: tuple, shape_fields: Mapping[str, Any]) -> dict[str, Any]:
        """``derive`` of the base config with a shape's sizes; the same for every option on that shape."""
        hit = self._derived.get(shape_key)
        if hit is None:
            hit = derive(replace(self.base, **shape_fields), self.environment)
            self._derived[shape_key] = hit
        return hit

    def projection(self, fields: Mapping[str, Any]) -> tuple:
        """The values of ``fields`` that constraints read (a cache key part for fields shared by candidates)."""
        return tuple(_hashable(fields.get(n, _UNSET)) for n in self.varied_names)

    def shape_projection(self, shape_key: tuple, fields: Mapping[str, Any]) -> tuple:
        """What constraints read of a shape: its derived facts and its own fields' values."""
        derived = self._derived[shape_key]
        return tuple(derived.get(n) for n in self.derived_names), self.projection(fields)

    def violations(self, key: tuple, shape_key: tuple, fields: Callable[[], Mapping[str, Any]]) -> tuple[str, ...]:
        """Ids of the constraints a candidate violates, beyond those the base config violates anyway.

        ``key`` must determine every value the constraints read (the caller builds it from
        ``shape_projection`` and ``projection``s, so candidates of different shapes share verdicts);
        ``fields()`` builds the candidate's fields, called only on a cache miss; ``shape_key`` names the
        ``derived`` entry computed for the candidate's sizes.
        """
        hit = self._verdicts.get(key)
        if hit is None:
            flat = self._flat(fields(), self._derived[shape_key])
            # check_constraints over the layout constraints only, in knowledge-base order
            hit = tuple(con["id"] for con in self.layout_constraints if evaluate(con["violated_when"], flat))
            self._verdicts[key] = hit
        return hit
