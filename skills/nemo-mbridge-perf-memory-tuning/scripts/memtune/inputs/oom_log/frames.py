"""Tracebacks still open per rank: their frames, the phase those frames name, and both handed to nearby failures.

``FramesMixin`` holds the scanner's traceback methods; the state they use is set up in ``_Scanner.__init__``
(scanner.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _Traceback:
    start: int
    frames: list[list[str | None]] = field(default_factory=list)  # [function, path, code]
    expect_code: bool = False


def _entry(tb: _Traceback) -> str | None:
    """The file of the traceback's outermost frame when it is a program's top level ('<module>')."""
    if tb.frames and tb.frames[0][0] == "<module>":
        return tb.frames[0][1]
    return None


class FramesMixin:
    """The ``_Scanner`` methods that read and use open tracebacks."""

    def _expire_tracebacks(self) -> None:
        """Drop tracebacks that never ended (cut logs), so the scanner can go back to skipping lines."""
        limit = self.lineno - self.prm["traceback_max_lines"]
        self.tracebacks = {r: tb for r, tb in self.tracebacks.items() if tb.start >= limit}
        self._oldest_traceback = min((tb.start for tb in self.tracebacks.values()), default=self.lineno)

    def _traceback_line(self, tb: _Traceback, text: str) -> bool:
        """Consume frame / source / caret lines of an open traceback; False for anything else."""
        frame = self.p.tb_frame.match(text)
        if frame:
            if len(tb.frames) >= 128:
                del tb.frames[1:65]  # keep the outermost frame and the innermost ones
            named = frame.groupdict()  # the plain traceback's frame, or a Jupyter / IPython one
            tb.frames.append([named["function"] or named.get("ipython_function"),
                              named["path"] or named.get("ipython_path"), None])
            tb.expect_code = True
            return True
        if tb.expect_code and text[:1].isspace() and text.strip() and not self.p.tb_ignore.match(text):
            tb.frames[-1][2] = text.strip()
            tb.expect_code = False
            return True
        tb.expect_code = False
        return not text.strip() or bool(self.p.tb_ignore.match(text))

    # -- phase ---------------------------------------------------------------

    def _phase_for(self, rank: int | None) -> str | None:
        tb = self.tracebacks.get(rank)
        return (self._frames_phase(tb) if tb is not None else None) or self.log_phase

    def _frames_phase(self, tb: _Traceback) -> str | None:
        for phase in self.p.phases:
            for func_rx, path_rx, code_rx in phase.markers:
                for func, path, code in tb.frames:
                    if func_rx is not None and not func_rx.search(func or ""):
                        continue
                    if path_rx is not None and not path_rx.search(path or ""):
                        continue
                    if code_rx is not None and not (code and code_rx.search(code)):
                        continue
                    return phase.id
        return None

    def _backfill_phase(self, rank: int | None, phase: str) -> None:
        """NCCL / snapshot lines print before the traceback that tells where the rank was."""
        oldest = self.lineno - self.prm["phase_backfill_lines"]
        for ev in reversed(self.events):
            if ev.line < oldest:
                break
            if ev.phase is None and ev.kind in self.p.memory_kinds and (rank is None or ev.rank in (rank, None)):
                ev.phase = phase

    def _open_frames(self, rank: int | None) -> list[str]:
        tb = self.tracebacks.get(rank)
        return self._frame_texts(tb) if tb is not None else []

    def _open_entry(self, rank: int | None) -> str | None:
        tb = self.tracebacks.get(rank)
        return _entry(tb) if tb is not None else None

    def _frame_texts(self, tb: _Traceback) -> list[str]:
        return [f"{func or ''} {code or ''}".strip() for func, _, code in tb.frames][-self.prm["frames_kept"]:]

    def _attach_frames(self, rank: int | None, tb: _Traceback) -> None:
        """The traceback that printed a failure says where it failed (situation.py reads its frames)."""
        frames, entry = self._frame_texts(tb), _entry(tb)
        oldest = self.lineno - self.prm["phase_backfill_lines"]
        for ev in reversed(self.events):
            if ev.line < oldest:
                break
            if not ev.frames and (rank is None or ev.rank in (rank, None)):
                ev.frames, ev.entry = frames, entry
