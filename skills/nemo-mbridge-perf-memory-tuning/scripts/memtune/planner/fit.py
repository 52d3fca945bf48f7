"""Whether a candidate fits: inferred from neighbours that need more or less memory where memory order makes
it certain, else estimated (the static part once per shape and combination fields), and a layout filled with its
per-rank peaks (step 4 of search.py's order of work).

``FitMixin`` holds these methods of ``Planner``; the state they use is set up in ``Planner.__init__``
(search.py).
"""

from __future__ import annotations

from array import array

from ..errors import UserError
from ..estimator import estimate
from ..estimator.memory import act_rows, combine_ranks, stage_peaks, static_rows
from ..estimator.models import fill_from_preset
from ..estimator.rank_activations import context_part, rank_acts
from ..estimator.static import static_part
from ..facts import TrainingConfig
from .results import PlannedLayout


class FitMixin:
    """The ``Planner`` methods that decide fit and estimate peaks."""

    def fits(self, si: int, mbs: int, ci: int) -> bool:
        """Whether the candidate fits (call after ``candidates``); see ``_fits``."""
        return self._fits(self._id(si, mbs, ci))

    def _fits(self, t: int) -> bool:
        """Whether candidate ``t`` fits: inferred from decided neighbours when possible, else estimated.

        A larger micro-batch never needs less memory, nor does a combination's upper bound (see
        ``_bounds``); so a fitting upper bound or larger micro-batch means "fits", a non-fitting lower
        bound or smaller micro-batch means "does not fit".  A bound is estimated itself at most once.
        """
        verdict = self._known(t)
        if verdict is None and not self.exhaustive:
            first = t - t % self._nc  # the same shape and micro-batch size, combination 0
            # a bound is only estimated when it is a valid candidate itself (its estimate is never wasted)
            for b, is_upper in self.tries[t % self._nc]:
                known = self._known(first + b)
                if known is None and self._valid[first + b]:
                    known = self._decide(first + b)
                if known is is_upper:
                    verdict = is_upper
                    break
            if verdict is not None:
                self.stats.inferred += 1
                self._record(t, verdict)
        return self._decide(t) if verdict is None else verdict

    def _estimated_peaks(self, t: int) -> tuple | None:
        """Candidate ``t``'s peaks (``_peaks`` without per-rank values) when it fits, else None, for an ``--all``
        plan: it shows the peak of every layout that fits, so those are estimated anyway; only a "does not fit" is
        inferred, from verdicts already recorded (a smaller micro-batch, or a combination that never needs more
        memory, that did not fit), never from a new estimate of a bound.  The walk visits each candidate once, so
        ``_known`` and ``_record`` are inlined to what this needs (10^5 calls)."""
        verdicts = self._verdicts
        if not self.exhaustive:
            rest, ci = divmod(t, self._nc)
            sr, mr = divmod(rest, self._nm)
            pair, mbs = sr * self._nc + ci, self._mbs_at[mr]  # as _pair(t)
            failed = mbs >= self._fail_mbs.get(pair, mbs + 1)
            if not failed:
                first = t - ci
                for b in self._lower_at[ci]:
                    if verdicts[first + b] == 2:
                        failed = True
                        break
            if failed:
                self.stats.inferred += 1
                verdicts[t] = 2
                if mbs < self._fail_mbs.get(pair, mbs + 1):
                    self._fail_mbs[pair] = mbs
                return None
        peaks = self._peaks(t, False)
        verdict = not isinstance(peaks, str) and peaks[2] <= self.budget
        self._record(t, verdict)
        return peaks if verdict else None

    def _pair(self, t: int) -> int:
        """The (shape, combination) of a candidate, as one int (the key of the micro-batch bounds)."""
        return t // (self._nm * self._nc) * self._nc + t % self._nc

    def _known(self, t: int) -> bool | None:
        verdict = self._verdicts[t]
        if verdict:
            return verdict == 1
        if not self.exhaustive:
            pair, mbs = self._pair(t), self._mbs_at[t // self._nc % self._nm]
            if mbs >= self._fail_mbs.get(pair, mbs + 1):
                return False
            if mbs <= self._fit_mbs.get(pair, 0):
                return True
        return None

    def _decide(self, t: int) -> bool:
        """The verdict already known, else an estimate (no inference, so bounds never recurse)."""
        verdict = self._known(t)
        if verdict is None:
            peaks = self._peaks(t)
            verdict = not isinstance(peaks, str) and peaks[2] <= self.budget
            self._record(t, verdict)
        return verdict

    def _record(self, t: int, verdict: bool) -> None:
        self._verdicts[t] = 1 if verdict else 2
        pair, mbs = self._pair(t), self._mbs_at[t // self._nc % self._nm]
        if verdict:
            self._fit_mbs[pair] = max(mbs, self._fit_mbs.get(pair, 0))
        else:
            self._fail_mbs[pair] = min(mbs, self._fail_mbs.get(pair, mbs))

    def _always_filled(self) -> bool:
        """Whether ``fill_from_preset`` leaves every candidate's config as it is (then it need not run per
        candidate): true when it leaves the base with every field a layout sets cleared, since it only fills
        preset fields that are unset, and the layouts then set none of them."""
        names = set(self.varied) | {n for c in self.combos for n in c.fields} | {"micro_batch_size"}
        cleared = TrainingConfig.__new__(TrainingConfig)
        cleared.__dict__.update(self.base.__dict__)
        cleared.__dict__.update(dict.fromkeys(names))
        return fill_from_preset(cleared, self.kb) is cleared

    def _config(self, si: int, mbs: int, ci: int) -> TrainingConfig:
        """The candidate's config: a shallow copy of the base plus the layout's fields (replace() would re-run
        __init__ on 100+ fields), with the preset filled in as ``estimate`` does."""
        cfg = TrainingConfig.__new__(TrainingConfig)
        cfg.__dict__.update(self.base.__dict__)
        cfg.__dict__.update(self.shape_list[si].fields)
        cfg.__dict__["micro_batch_size"] = mbs
        cfg.__dict__.update(self.combos[ci].fields)
        return cfg if self._filled else fill_from_preset(cfg, self.kb)

    def _peaks(self, t: int, keep: bool = True) -> tuple[int, float, float, array | None] | str:
        """(peak rank, its allocated peak, its peak with overheads, per rank [rank, allocated, with overheads] as
        flat doubles), or the estimator's refusal.

        What ``estimate`` would answer, through ``stage_peaks``: the static part (model state, placement) is
        looked up once per shape and combination fields it reads, not by hashing the whole config per
        candidate, and no Estimate is built or kept (an ``--all`` plan would hold 10^5 of them).  Only the
        latest answer is kept, for measure() right after a fit; a candidate estimated again counts once.  ``keep``
        off: the per-rank values are left out (None), for the ``--all`` walk, which shows only the peak of most.
        """
        if self._last[0] == t and (self._last[1] or not keep):
            return self._last[2]
        rest, ci = divmod(t, self._nc)  # as _decode(t)
        sr, mr = divmod(rest, self._nm)
        si, mbs = self._shape_at[sr], self._mbs_at[mr]
        if not self._estimated[t]:
            self._estimated[t] = 1
            self.stats.memory_checked += 1
        key = (si, self.static_proj[ci])
        st = self._statics.get(key)
        if st is None:
            try:
                part = static_part(self._config(si, mbs, ci), self.constants)
                # the shape's ActShape is shared by its EP sizes, so their activation sides are too (_sides)
                st = (part, static_rows(part), id(part.shape.acts))  # alive while _statics holds part
            except UserError as exc:  # the estimator refuses a layout the constraints let through
                st = str(exc)
            self._statics[key] = st
        if st.__class__ is str:
            hit = st
        elif self._acts is not None:  # no config built: the combination's activation side at this MBS
            part, rows, acts_at = st
            side_key = (acts_at, self._act_proj[ci], mr)  # the micro-batch count follows: equal DP
            side = self._sides.get(side_key)
            if side is None:
                acts, (inputs, policy) = part.shape.acts, self._acts[ci]
                microbatches = self.req.global_batch_size // (mbs * self.shape_list[si].dp)
                ctx = context_part(acts, self.constants, inputs._replace(mbs=mbs))
                side = self._sides[side_key] = (
                    act_rows(rank_acts(acts, ctx, policy, microbatches, self.constants, self.capture_reuse)),
                    ctx.workspaces)
            hit = combine_ranks(rows, side[0], side[1], self._slack, self._context_bytes, part.nccl_bytes, keep)
        else:
            microbatches = self.req.global_batch_size // (mbs * self.shape_list[si].dp)
            peak_rank, peak_bytes, stages = stage_peaks(
                self._config(si, mbs, ci), self.constants, st[0], num_microbatches=microbatches,
                expandable_segments=self.req.expandable_segments, capture_reuse=self.capture_reuse)
            hit = (peak_rank, peak_bytes, next(w for rank, _, w in stages if rank == peak_rank),
                   array("d", [x for stage in stages for x in stage]))
        self._last = (t, keep or hit.__class__ is str or hit[3] is not None, hit)
        return hit

    def measure(self, si: int, mbs: int, ci: int) -> PlannedLayout:
        """The candidate as the answer shows it, with its estimated per-stage peaks."""
        return self._measure(self._id(si, mbs, ci))

    def _measure(self, t: int) -> PlannedLayout:
        hit = self._measured.get(t)
        if hit is None:
            hit = self._layout(t, *self._decode(t))
            peaks = self._peaks(t)
            if isinstance(peaks, str):
                hit.fits, hit.error = False, peaks
            else:
                self._fill(hit, peaks, t)
            self._measured[t] = hit
        return hit

    def _fill(self, lay: PlannedLayout, peaks: tuple, t: int) -> None:
        lay.peak_stage, lay.peak_bytes, with_overheads, values = peaks
        lay.capacity_ratio = with_overheads / self.capacity  # as summarize() defines it
        lay.peak_with_overheads_bytes = with_overheads
        lay.fits = with_overheads <= self.budget
        lay.stage_values = values
        if not self.assumptions:  # the notes of the first layout shown, from its full estimate
            si, mbs, ci = self._decode(t)
            est = estimate(self._config(si, mbs, ci), gpu=self.req.gpu, kb=self.kb, env=self.est_env,
                           num_microbatches=self.req.global_batch_size // (mbs * self.shape_list[si].dp))
            self.assumptions = list(est.assumptions)
