"""Candidate generation and constraint pruning: the option combinations and their memory-order bounds, the
parallel shapes built from the divisors of the world size, and every valid candidate numbered and ranked by
its cost-model score (steps 1 to 3 of search.py's order of work).

``CandidatesMixin`` holds these methods of ``Planner``; the state they use is set up in ``Planner.__init__``
(search.py).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import product
from typing import Any

from . import costs as cost_model
from . import traffic as traffic_model
from .lines import OverrideLines
from .options import GROUPS, Option
from .request import LAYOUT_FIELD, SPLIT_FIELDS


@dataclass(frozen=True)
class _Shape:
    tp: int
    pp: int
    vpp: int
    cp: int
    ep: int
    etp: int
    dp: int
    fields: Mapping[str, Any]
    key: tuple  # names the constraint facts derived for these sizes


@dataclass(frozen=True)
class _Combo:
    options: tuple[Option | None, ...]  # one per GROUPS entry (None: that group's "off")
    fields: Mapping[str, Any]
    factor: float  # product of the constant option factors
    cost_ids: tuple[str, ...]
    scaled: tuple[str, ...]  # cost ids that also depend on the layout (FSDP traffic per token)
    order: int

    @property
    def ids(self) -> dict[str, str | None]:
        """Option id per group (None: off)."""
        return {g: o.id if o else None for g, o in zip(GROUPS, self.options, strict=True)}


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


class CandidatesMixin:
    """The ``Planner`` methods that enumerate, prune and rank candidates."""

    def _option_fields(self, group: str, opt: Option | None) -> dict[str, Any]:
        """Every field of ``group``: the option's values, the others back to a neutral value.

        A base value that one of the group's options would set (the user's FSDP, recompute, offload) is
        cleared, so a layout without that option really runs without it; other base values (a checkpoint
        format) are kept.
        """
        out: dict[str, Any] = {}
        on_values: dict[str, list[Any]] = {}
        for o in self.space.options[group]:
            for name, value in o.fields.items():
                on_values.setdefault(name, []).append(value)
        for name in self.space.group_fields[group]:
            value = vars(self.base)[name]
            if value is not None and value in on_values[name]:
                value = False if isinstance(value, bool) else None
            out[name] = value
        if opt is not None:
            out.update(opt.fields)
            if opt.layers_fraction is not None:
                layers = int(self.base.num_layers)
                out["cpu_offloading_num_layers"] = max(1, min(layers - 1, round(opt.layers_fraction * layers)))
        return out

    def _combos(self) -> list[_Combo]:
        choices = []
        for g in GROUPS:
            opts: list[Option | None] = list(self.groups[g])
            if g in ("activation_offload", "peft"):
                opts.insert(0, None)
            choices.append(opts)
        combos = []
        for i, picked in enumerate(product(*choices)):
            fields: dict[str, Any] = {}
            ids: list[str] = []
            for g, opt in zip(GROUPS, picked, strict=True):
                fields.update(self._option_fields(g, opt))
                ids += list(opt.costs) if opt else []
            reasons = cost_model.option_reasons(self.costs, ids)
            combos.append(_Combo(picked, fields, cost_model.product(reasons), tuple(dict.fromkeys(ids)),
                                 cost_model.scaled(self.costs, ids), i))
        return combos

    def _bounds(self) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
        """Per combination, others that never need less memory (upper) and never need more (lower).

        Upper: every group moved to the top of its memory chain (offload and re-gather off, no recompute
        instead of selective, the distributed optimizer instead of an offload), then each group alone.
        Lower: the same towards the bottom of each chain.  Fallback options are never chosen as a bound.
        """
        index = {tuple(o.id if o else None for o in c.options): c.order for c in self.combos}

        def pick(g: str, o: Option | None, top: bool) -> Option | None:
            """The most (top) or least memory-hungry choice strictly beyond ``o`` in its chain, else ``o``."""
            offable = g in ("activation_offload", "peft")
            if top and offable:
                return None  # "off" is above every chain of the group
            if o is None and not offable:
                return o
            pool = [x for x in self.groups[g] if not x.fallback and x.chain is not None]
            if o is None:  # off: every chain member lies below it
                beyond = pool
            elif o.chain is None:
                return o
            else:
                beyond = [x for x in pool if x.chain == o.chain and (x.rank > o.rank if top else x.rank < o.rank)]
            if not beyond:
                return o
            return (max if top else min)(beyond, key=lambda x: x.rank)

        upper: list[tuple[int, ...]] = []
        lower: list[tuple[int, ...]] = []
        for c in self.combos:
            for top, out in ((True, upper), (False, lower)):
                moved = [pick(g, o, top) for g, o in zip(GROUPS, c.options, strict=True)]
                tries = [moved] + [[m if j == i else o for j, (o, m) in enumerate(zip(c.options, moved, strict=True))]
                                   for i in range(len(GROUPS))]
                found = (index.get(tuple(getattr(x, "id", None) for x in t)) for t in tries)
                out.append(tuple(dict.fromkeys(f for f in found if f is not None and f != c.order)))
        return upper, lower

    # --- enumeration ------------------------------------------------------------------------------

    def _shape_fields(self, tp: int, pp: int | None = None, vpp: int | None = None, cp: int | None = None,
                      ep: int | None = None, split: bool = False, layout: str | None = None) -> dict[str, Any]:
        world = self.req.gpus
        out: dict[str, Any] = {
            "tensor_model_parallel_size": tp, "sequence_parallel": tp > 1, "world_size": world,
            "seq_length": self.req.seq_length, "global_batch_size": self.req.global_batch_size,
            "pipeline_model_parallel_size": pp,
            "virtual_pipeline_model_parallel_size": vpp if vpp and vpp > 1 else None,
            "context_parallel_size": cp,
        }
        for name in SPLIT_FIELDS:  # unset unless chosen; turned off where the base config sets it
            out[name] = True if split else (False if vars(self.base)[name] else None)
        out[LAYOUT_FIELD] = layout
        if self.ctx.moe:
            out["expert_model_parallel_size"] = ep
        if pp and cp:
            out["data_parallel_size"] = world // (tp * pp * cp)
        return out

    def _shape_ok(self, key: tuple, fields: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Constraints on the sizes alone: every option left unset, so only the shape can violate one."""
        derived = self.feas.derived(key, fields)
        merged = {**self.neutral, **fields}
        return not self.feas.violations(("shape", key), key, lambda: merged), derived

    def shapes(self) -> Iterator[_Shape]:
        world = self.req.gpus
        experts = int(self.base.num_moe_experts or 0)
        max_vpp = int(self.base.num_layers)
        for tp in _divisors(world):
            if tp > self.gpn and not self.req.allow_cross_node_tp:
                continue
            if not self._shape_ok((tp,), self._shape_fields(tp))[0]:
                continue
            for pp in _divisors(world // tp):
                divides = self._shape_ok((tp, pp), self._shape_fields(tp, pp))[0]
                # the embedding/loss split where the layers do not divide over the stages (as the recipes use it
                # for 126 and 94 layers), or where the base config sets it: elsewhere it would add shapes for a
                # one-layer move the imbalance cost already prices
                try_split = pp > 1 and (not divides or self._base_split) and self._shape_ok(
                    (tp, pp, 0, 1), self._shape_fields(tp, pp, split=True))[0]
                try_layout = pp > 1 and not divides and not try_split
                if not divides and not try_split and not try_layout:
                    continue
                vpps = [1] + (list(range(2, max_vpp // pp + 2)) if pp > 1 else [])
                for vpp in vpps:
                    even = divides and self._shape_ok((tp, pp, vpp), self._shape_fields(tp, pp, vpp))[0]
                    split = try_split and (not even or self._base_split) and self._shape_ok(
                        (tp, pp, vpp, 1), self._shape_fields(tp, pp, vpp, split=True))[0]
                    layout = traffic_model.balanced_layout(self.layers, self.mtp, pp * vpp) if (
                        try_layout and not even and not split) else None
                    if layout:
                        fields = self._shape_fields(tp, pp, vpp, layout=layout)
                        layout = layout if self._shape_ok((tp, pp, vpp, 2), fields)[0] else None
                    if not even and not split and not layout:
                        continue
                    mark = (1,) if split else (2,) if layout else ()
                    for cp in _divisors(world // (tp * pp)):
                        dp = world // (tp * pp * cp)
                        for ep in (_divisors(experts) if experts else [1]):
                            fields = self._shape_fields(tp, pp, vpp, cp, ep, split, layout)
                            key = (tp, pp, vpp, cp, ep, *mark)
                            ok, derived = self._shape_ok(key, fields)
                            if ok:
                                etp = int(self.base.expert_tensor_parallel_size or tp)
                                yield _Shape(tp, pp, vpp, cp, ep, etp, dp, fields, key)

    def _index(self) -> None:
        """Number the candidates so that their ids sort as the ranking breaks ties.

        Id = ((shape rank x micro-batch rank) x combinations) + combination, where shapes rank by (TP, PP, CP,
        EP, VPP) (unique per shape) and micro-batch sizes largest first: ordering (-score, id) is ordering
        (-score, TP, PP, CP, EP, VPP, -MBS, combination).  Verdicts then live in flat byte arrays instead of
        dicts of tuples (an ``--all`` plan decides 10^5 candidates).
        """
        shapes, sizes = self.shape_list, self.space.micro_batch_sizes
        self._shape_at = sorted(range(len(shapes)), key=lambda i: (shapes[i].tp, shapes[i].pp, shapes[i].cp,
                                                                   shapes[i].ep, shapes[i].vpp))
        self._srank = [0] * len(shapes)
        for r, si in enumerate(self._shape_at):
            self._srank[si] = r
        mbs_order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
        self._mbs_at = [sizes[i] for i in mbs_order]
        self._mrank = [0] * len(sizes)
        for r, mi in enumerate(mbs_order):
            self._mrank[mi] = r
        self._nc, self._nm = len(self.combos), len(sizes)
        count = len(shapes) * self._nm * self._nc
        self._verdicts, self._valid, self._estimated = bytearray(count), bytearray(count), bytearray(count)
        self._factors = array("d", bytes(8 * count))  # each valid candidate's score, as _rank sorts by it
        self._size_at = {size: i for i, size in enumerate(sizes)}

    def _decode(self, t: int) -> tuple[int, int, int]:
        """(shape index, micro-batch size, combination) of a candidate id."""
        rest, ci = divmod(t, self._nc)
        sr, mr = divmod(rest, self._nm)
        return self._shape_at[sr], self._mbs_at[mr], ci

    def _id(self, si: int, mbs: int, ci: int) -> int:
        return (self._srank[si] * self._nm + self._mrank[self._size_at[mbs]]) * self._nc + ci

    def candidates(self) -> list[tuple]:
        """Every valid ((-score, id), shape, micro-batch, combination), best score first (see ``_index``)."""
        return [((0.0, t), *self._decode(t)) for t in self._rank()]

    def _rank(self) -> list[int]:
        """Ids of every valid candidate, best score first.

        Which combinations a (shape, micro-batch) admits depends only on the constraint facts of the two
        (``shape_projection`` and the micro-batch size when a constraint reads it), so that list is built once
        per distinct pair of facts and reused by every shape that shares them.
        """
        gbs = self.req.global_batch_size
        fallback = [c for c in self.combos if any(o is not None and o.fallback for o in c.options)]
        regular = [c for c in self.combos if c not in fallback]
        self.shape_list = list(self.shapes())
        self._lines = OverrideLines(self.shape_list, self.combos, self.space.layout_overrides, self.space.field_keys,
                                    self.base, self._resettable)
        self._index()
        admitted: dict[tuple, tuple[int, tuple[int, ...]]] = {}
        keys: list[tuple[float, int]] = []
        valid, factors = self._valid, self._factors
        combo_factor, combo_scaled = [c.factor for c in self.combos], [c.scaled for c in self.combos]
        for si, s in enumerate(self.shape_list):
            for mi, mbs in enumerate(self.space.micro_batch_sizes):
                if gbs % (mbs * s.dp):
                    continue
                shape_factor = cost_model.product(self._shape_reasons(si, mbs))
                sproj = self._intern(self.feas.shape_projection(s.key, s.fields))
                mbs_key = mbs if "micro_batch_size" in self.feas.varied_names else None
                hit = admitted.get((sproj, mbs_key))
                if hit is None:
                    hit = admitted[(sproj, mbs_key)] = self._admitted(s, mbs, sproj, mbs_key, regular, fallback)
                enumerated, cis = hit
                first = (self._srank[si] * self._nm + self._mrank[mi]) * self._nc
                traffic = self._traffic(si, mbs)  # shapes that differ only in VPP or the split move the same bytes
                for ci in cis:
                    factor = shape_factor * combo_factor[ci]
                    if combo_scaled[ci]:
                        factor *= self._moved(combo_scaled[ci], traffic)[1]
                    t = first + ci
                    valid[t] = 1
                    factors[t] = factor
                    keys.append((-factor, t))
                self.stats.enumerated += enumerated
                self.stats.valid += len(cis)
        keys.sort()
        return [t for _, t in keys]

    def _admitted(self, s: _Shape, mbs: int, sproj: int, mbs_key: int | None, regular: list[_Combo],
                  fallback: list[_Combo]) -> tuple[int, tuple[int, ...]]:
        """(combinations tried, the valid ones) on a shape at a micro-batch size.

        A fallback combination (an optimizer offload, say) is only tried when every model-state choice of
        the same other options is refused.
        """
        mfields = {**s.fields, "micro_batch_size": mbs}
        blocked: dict[tuple, bool] = {}
        enumerated, out = 0, []
        for combos in (regular, fallback):
            for c in combos:
                rest = self.rest[c.order]
                if combos is fallback and not blocked.get(rest, True):
                    continue  # another model-state choice works for these options
                enumerated += 1
                if self.feas.violations((sproj, mbs_key, self.proj[c.order]), s.key,
                                        lambda c=c, mf=mfields: {**mf, **c.fields}):
                    blocked.setdefault(rest, True)
                    continue
                blocked[rest] = False
                out.append(c.order)
        return enumerated, tuple(out)
