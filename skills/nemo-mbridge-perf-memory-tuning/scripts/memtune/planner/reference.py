"""The layout the user's config already sets: found among the candidates, or scored alone by the cost model
(``memtune.planner.search.score``).

``ReferenceMixin`` holds these methods of ``Planner``; the state they use is set up in ``Planner.__init__``
(search.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import costs as cost_model
from . import traffic as traffic_model
from .candidates import _Shape
from .options import GROUPS
from .request import LAYOUT_FIELD, SIZE_FIELDS, SPLIT_FIELDS
from .results import Scored


class ReferenceMixin:
    """The ``Planner`` methods that read and score the user's own layout."""

    # --- the reference layout (what the user's config already sets) --------------------------------

    def _reference_fields(self) -> dict[str, Any]:
        given = self.req.base
        if given.tensor_model_parallel_size is None and given.pipeline_model_parallel_size is None:
            return {}
        names = [*SIZE_FIELDS, "micro_batch_size", "recompute_granularity", "recompute_modules",
                 *sorted(self.space.group_fields["model_state"] | self.space.group_fields["activation_offload"])]
        out = {n: _norm(n, vars(given)[n]) for n in dict.fromkeys(names) if vars(given)[n] is not None}
        out.update({n: None for n in SIZE_FIELDS if n not in out})  # an unset size is 1 (no VPP, no CP, ...)
        if given.recompute_granularity != "selective":
            out.pop("recompute_modules", None)  # Megatron reads the modules only for selective recompute
        return out

    def _matches(self, ref: Mapping[str, Any], si: int, mbs: int, ci: int) -> bool:
        fields = {**self.shape_list[si].fields, "micro_batch_size": mbs, **self.combos[ci].fields}
        return all(_norm(n, fields.get(n)) == v for n, v in ref.items())

    def score_own(self) -> Scored | None:
        """The base config's own layout and options scored by the cost model, without the search or a memory
        check: what the planner's throughput model predicts for the run the user describes.  None when the
        config sets no layout, its sizes do not divide the GPUs or the batch, or its options (recompute, model
        state, offload) are none the planner knows."""
        ref = self._reference_fields()
        if not ref:
            return None
        given, b = self.req.base, self.base
        tp, pp, cp = (int(x or 1) for x in (b.tensor_model_parallel_size, b.pipeline_model_parallel_size,
                                             b.context_parallel_size))
        vpp = int(b.virtual_pipeline_model_parallel_size or 1)
        ep = int(b.expert_model_parallel_size or 1) if self.ctx.moe else 1
        mbs, world = int(b.micro_batch_size or 1), self.req.gpus
        if world % (tp * pp * cp) or self.req.global_batch_size % (mbs * world // (tp * pp * cp)):
            return None
        dp = world // (tp * pp * cp)
        matching = [c for c in self.combos
                    if all(_norm(n, c.fields.get(n)) == v for n, v in ref.items() if n in c.fields)]
        if not matching:
            return None
        # of the combinations the stated fields allow, the one closest to the rest of the config
        combo = max(matching, key=lambda c: sum(_norm(n, v) == _norm(n, vars(given)[n]) for n, v in c.fields.items()))
        fields = {**self._shape_fields(tp, pp, vpp, cp, ep),
                  **{n: vars(given)[n] for n in (*SPLIT_FIELDS, LAYOUT_FIELD)}}
        shape = _Shape(tp, pp, vpp, cp, ep, int(b.expert_tensor_parallel_size or tp), dp, fields, ("own",))
        microbatches = self.req.global_batch_size // (mbs * dp)
        traffic = None if self.hw is None or self.model_counts is None else traffic_model.traffic(
            self.model_counts, self.hw, tp=tp, pp=pp, cp=cp, ep=ep, etp=shape.etp, dp=dp, mbs=mbs,
            seq=self.req.seq_length, microbatches=microbatches, gpus_per_domain=self.gpn, **self.workload)
        reasons = (*cost_model.parallel_reasons(self.costs, self.ctx, tp=tp, pp=pp, vpp=vpp, cp=cp,
                                                microbatches=microbatches, traffic=traffic,
                                                balance=self._balance(shape, mbs, traffic)),
                   *cost_model.option_reasons(self.costs, combo.cost_ids, traffic))
        factor = cost_model.product(reasons)
        # a micro-batch's tokens pass the TP x PP x CP ranks of one model replica in the time of its FLOPs at the GEMM
        # rate, slowed by the factors (the memory-bound kernels among them)
        tokens = mbs * self.req.seq_length / (tp * pp * cp) * factor / traffic.flop_seconds if traffic else None
        options = {g: (o.id if o else None) for g, o in zip(GROUPS, combo.options, strict=True)}
        return Scored(factor, tuple(reasons), options, tokens)


def _norm(name: str, value: Any) -> Any:
    """Compare layout settings the way Megatron reads them: unset sizes are 1, unset switches are off."""
    if isinstance(value, list):
        return tuple(value)
    if value is None or value is False:
        return None
    if name in SIZE_FIELDS and value == 1:
        return None
    return value
