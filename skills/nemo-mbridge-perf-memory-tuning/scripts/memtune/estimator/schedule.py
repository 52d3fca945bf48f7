"""How many micro-batches' activations each pipeline rank holds at its peak.

Megatron-Core ``get_pp_rank_microbatches`` (schedules.py) runs ``W`` warm-up
forwards before its first backward and then alternates one forward with one
backward, so a rank holds ``W + 1`` forward passes' activations when its first
backward starts, capped by the number of forwards there are:

* 1F1B, no VPP: ``W = PP - rank - 1`` -> rank ``i`` holds ``min(PP - i, M)``
  micro-batches of its whole stage; rank 0 holds the most, the last rank one.
* interleaved (VPP ``v``, group size ``g`` = ``microbatch_group_size_per_vp_stage``,
  default PP): ``W = 2 (PP - rank - 1) + (v - 1) g``; each forward is one
  (micro-batch, chunk) pair taken in ``get_schedule_table`` order (g
  micro-batches through chunk 0, then chunk 1, ...).  Rank 0 therefore holds
  ``v PP + PP - 1`` chunk-passes: ``1 + (PP - 1)/(PP v)`` times the layers of the
  whole model, the "interleaving penalty" of Korthikanti et al. 2022.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=4096)
def in_flight(pp: int, vp: int, microbatches: int, rank: int, group: int | None = None) -> tuple[int, ...]:
    """Forward passes of each chunk of ``rank`` alive when its first backward starts."""
    m = max(1, microbatches)
    if pp <= 1:
        return (1,) * vp
    if vp <= 1:
        return (min(pp - rank, m),)
    g = group or pp
    warmup = 2 * (pp - rank - 1) + (vp - 1) * g
    remaining = min(warmup + 1, m * vp)
    counts = [0] * vp
    for first in range(0, m, g):
        size = m - first if first + g >= m else g
        for chunk in range(vp):
            take = min(size, remaining)
            counts[chunk] += take
            remaining -= take
            if remaining == 0:
                return tuple(counts)
        if first + g >= m:
            break
    return tuple(counts)
