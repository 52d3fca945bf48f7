"""A candidate as the answer shows it: its throughput factors (parallel shape, options, traffic), each looked
up once per what it depends on, its env lines and its layout record.

``ScoringMixin`` holds these methods of ``Planner``; the state they use is set up in ``Planner.__init__``
(search.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from . import costs as cost_model
from . import traffic as traffic_model
from .candidates import _Combo, _Shape
from .request import CAPTURE_REUSE_ENV, LAYOUT_FIELD, SPLIT_FIELDS, _stated_reuse
from .results import PlannedLayout


class ScoringMixin:
    """The ``Planner`` methods that score candidates and build their layouts."""

    def layout(self, si: int, mbs: int, ci: int) -> PlannedLayout:
        """The candidate with its score, reasons and lines (no memory yet: see ``measure``)."""
        return self._layout(self._id(si, mbs, ci), si, mbs, ci)

    def _head(self, si: int, ci: int) -> tuple:
        """What every micro-batch size of a shape and combination shares (sizes, option ids, env, split, layout)."""
        pair = si * self._nc + ci
        head = self._heads.get(pair)
        if head is None:
            s, c, ids = self.shape_list[si], self.combos[ci], self.ids[ci]
            head = self._heads[pair] = (
                s.tp, s.pp, s.vpp, s.cp, s.ep, s.etp, s.dp, ids["recompute"], ids["model_state"],
                ids["activation_offload"], ids["peft"], self._env(c), bool(s.fields.get(SPLIT_FIELDS[1])),
                s.fields.get(LAYOUT_FIELD))
        return head

    def _layout(self, t: int, si: int, mbs: int, ci: int) -> PlannedLayout:
        pair = si * self._nc + ci
        tp, pp, vpp, cp, ep, etp, dp, recompute, model_state, offload, peft, env, split, pipeline_layout = \
            self._head(si, ci)
        m, shape, traffic = self._shape_parts(si, mbs)
        options, moved = self._option_parts(ci, traffic)
        factor = self._factors[t] if self._valid[t] else cost_model.product((*shape, *options, *moved))
        return PlannedLayout(
            tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep, etp=etp, dp=dp, micro_batch_size=mbs, num_microbatches=m,
            recompute=recompute, model_state=model_state, activation_offload=offload, peft=peft,
            relative_throughput=factor, shape_reasons=shape, option_reasons=options, traffic_reasons=moved,
            lines=self._lines, pair=pair, env=env, split_embedding_loss=split,
            pipeline_layout=pipeline_layout,
        )

    def _shape_parts(self, si: int, mbs: int) -> tuple[int, tuple[cost_model.Reason, ...], Any]:
        """(micro-batches, parallel factors, traffic) of a shape at a micro-batch size, looked up once."""
        key = si * self._nm + self._mrank[self._size_at[mbs]]
        hit = self._parts.get(key)
        if hit is None:
            hit = self._parts[key] = (self.req.global_batch_size // (mbs * self.shape_list[si].dp),
                                      self._shape_reasons(si, mbs), self._traffic(si, mbs))
        return hit

    def _shape_reasons(self, si: int, mbs: int) -> tuple[cost_model.Reason, ...]:
        """Parallel factors of a shape at a micro-batch size (``--all`` shows thousands of layouts per shape)."""
        key = ("shape", si, mbs)
        hit = self._reasons.get(key)
        if hit is None:
            s = self.shape_list[si]
            traffic = self._traffic(si, mbs)
            hit = self._reasons[key] = tuple(cost_model.parallel_reasons(
                self.costs, self.ctx, tp=s.tp, pp=s.pp, vpp=s.vpp, cp=s.cp,
                microbatches=self.req.global_batch_size // (mbs * s.dp), traffic=traffic,
                balance=self._balance(s, mbs, traffic)))
        return hit

    def _balance(self, s: _Shape, mbs: int, traffic: traffic_model.Traffic | None) -> float:
        """Mean over heaviest pipeline-stage time of a shape's pipeline split (traffic.stage_balance), a MoE layer
        weighing its compute plus the dispatch it waits for."""
        if s.pp <= 1:
            return 1.0
        stretch = cost_model.dispatch_stretch(self.costs, self.ctx, traffic)
        load = traffic_model.StageLoad(mbs * self.req.seq_length / s.cp, s.tp, s.ep * s.etp, self.workload["frozen"],
                                       self.workload["grad_bytes"])
        split = tuple(s.fields.get(n) for n in (*SPLIT_FIELDS, LAYOUT_FIELD))
        key = (s.pp, s.vpp, split, stretch, load)
        if key not in self._balances:
            cfg = replace(self.base, **{n: s.fields.get(n) for n in (*SPLIT_FIELDS, LAYOUT_FIELD)})
            self._balances[key] = 1.0 if self.arch is None else traffic_model.stage_balance(
                self.arch, cfg, s.pp, s.vpp, self.req.seq_length, moe_stretch=stretch, hw=self.hw, load=load)
        return self._balances[key]

    def _option_parts(self, ci: int,
                      traffic: traffic_model.Traffic | None) -> tuple[tuple[cost_model.Reason, ...], ...]:
        """Option factors of a combination at a layout's traffic (``_traffic``), as (constant, traffic): the first
        once per combination, the second (planner/traffic.py) once per set of traffic costs and layout sizes,
        so 10^5 fitting layouts share a few thousand tuples."""
        key = (ci, id(traffic))  # traffic objects live in self._traffics as long as the planner
        hit = self._options_at.get(key)
        if hit is None:
            c = self.combos[ci]
            const = self._reasons.get(("options", ci))
            if const is None:
                const = self._reasons[("options", ci)] = tuple(cost_model.option_reasons(
                    self.costs, [i for i in c.cost_ids if i not in c.scaled]))
            hit = self._options_at[key] = (const, self._moved(c.scaled, traffic)[0] if c.scaled else ())
        return hit

    def _moved(self, scaled: tuple[str, ...], traffic: traffic_model.Traffic | None) -> tuple[tuple, float]:
        """(factors, their product) of the traffic costs ``scaled`` at ``traffic``: the ranking multiplies the
        product into 10^5 scores, a layout shows the factors; one entry per set of costs and layout sizes."""
        key = (scaled, id(traffic))  # traffic objects live in self._traffics as long as the planner
        hit = self._moved_at.get(key)
        if hit is None:
            reasons = tuple(cost_model.option_reasons(self.costs, scaled, traffic))
            hit = self._moved_at[key] = (reasons, cost_model.product(reasons))
        return hit

    def _traffic(self, si: int, mbs: int) -> traffic_model.Traffic | None:
        """Compute seconds and traffic bytes of a shape at a micro-batch size; None without GPU speeds.

        One object per distinct set of sizes (VPP and the pipeline split move no bytes), so callers may key
        memos on it."""
        s = self.shape_list[si]
        key = (s.tp, s.pp, s.cp, s.ep, s.etp, s.dp, mbs)
        if key not in self._traffics:
            self._traffics[key] = None if self.hw is None or self.model_counts is None else traffic_model.traffic(
                self.model_counts, self.hw, tp=s.tp, pp=s.pp, cp=s.cp, ep=s.ep, etp=s.etp, dp=s.dp, mbs=mbs,
                seq=self.req.seq_length, microbatches=self.req.global_batch_size // (mbs * s.dp),
                gpus_per_domain=self.gpn, **self.workload)
        return self._traffics[key]

    def _env(self, combo: _Combo) -> tuple[str, ...]:
        hit = self._envs.get(combo.order)
        if hit is None:
            lines: list[str] = []
            if self.req.expandable_segments:
                lines += [CAPTURE_REUSE_ENV if self.capture_reuse and not _stated_reuse(self.req.env) else line
                          for line in self.kb.get("fixes", "expandable-segments")["apply"].get("env", [])]
            for opt in combo.options:
                if opt is not None and opt.group == "activation_offload":
                    lines += self.kb.get("fixes", opt.fix)["apply"].get("env", [])
            hit = self._envs[combo.order] = tuple(dict.fromkeys(lines))
        return hit
