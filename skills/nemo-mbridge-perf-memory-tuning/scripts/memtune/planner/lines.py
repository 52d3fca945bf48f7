"""A plan's Bridge override lines, rendered when a layout's ``overrides`` are read.

An ``--all`` plan keeps 10^5 layouts but shows the lines of only the first ``--top``: rendering every
(shape, combination) pair up front was a tenth of its time.  One ``OverrideLines`` serves every layout of a
plan; it holds the shapes and combinations, not the planner, so layouts keep no planner (and its caches)
alive and form no reference cycle with it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..facts import TrainingConfig
from .overrides import format_value, parse, render_pairs, render_texts

_SLOT = object()  # where a rendered line takes the layout's micro-batch size


class Overrides(Sequence[str]):
    """A layout's override lines: the lines its shape and combination share, with its own micro-batch line put
    in on reading."""

    __slots__ = ("_lines", "_fill")

    def __init__(self, lines: tuple[str | None, ...], fill: tuple[tuple[int, str], ...]) -> None:
        self._lines, self._fill = lines, fill

    def _all(self) -> tuple[str, ...]:
        out = list(self._lines)
        for at, line in self._fill:
            out[at] = line
        return tuple(out)  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self._lines)

    def __getitem__(self, index):  # type: ignore[override]
        return self._all()[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        return tuple(self) == tuple(other) if isinstance(other, Sequence) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._all())


class OverrideLines:
    """Renders (and remembers) the lines of a plan's (shape, combination) pairs.

    ``shapes`` and ``combos`` are the planner's: each shape and combination has ``fields``, a combination
    ``options`` (each with ``overrides``).  ``layout_templates`` are the layout fixes' override templates,
    ``field_keys`` the override key of each field, ``resettable`` the fields whose base value a layout may have
    to turn back.
    """

    def __init__(self, shapes: Sequence[Any], combos: Sequence[Any], layout_templates: Sequence[str],
                 field_keys: Mapping[str, str], base: TrainingConfig, resettable: frozenset[str]) -> None:
        self.shapes, self.combos, self.nc = shapes, combos, len(combos)
        self.layout_templates, self.field_keys, self.base, self.resettable = (
            layout_templates, field_keys, base, resettable)
        self._rendered: dict[int, tuple[tuple[str | None, ...], tuple[tuple[int, str], ...]]] = {}
        self._lines: dict[Any, str] = {}  # one string object per distinct line, however many layouts print it
        self._fills: dict[tuple, tuple[tuple[int, str], ...]] = {}  # micro-batch lines per slot set and size
        self._templates: dict[int, tuple] = {}
        self._formatted: dict[tuple, dict[str, str]] = {}

    def of(self, pair: int, mbs: int) -> Sequence[str]:
        """The lines of shape ``pair // nc`` with combination ``pair % nc`` at micro-batch size ``mbs``.

        Unless the base config sets the micro-batch size (then it may need resetting), a shape and combination
        print the same lines at every micro-batch size but the micro-batch line itself: they are rendered
        once with a placeholder there, and each layout's lines fill the placeholder in.
        """
        si, ci = divmod(pair, self.nc)
        if "micro_batch_size" in self.resettable:
            return tuple(render_texts(*self._render_args(si, format_value(mbs), ci, mbs)))
        hit = self._rendered.get(pair)
        if hit is None:
            lines: list[str | None] = []
            slots: list[tuple[int, str]] = []
            for key, value in render_pairs(*self._render_args(si, _SLOT, ci, None)):
                if value is _SLOT:
                    slots.append((len(lines), key))
                    lines.append(None)
                else:
                    lines.append(self._line(key, value))
            hit = self._rendered[pair] = (tuple(lines), tuple(slots))
        lines, slots = hit
        if not slots:
            return lines  # type: ignore[return-value]
        fill = self._fills.get((slots, mbs))
        if fill is None:  # the same few micro-batch lines for every shape: shared, not copied per layout
            fill = self._fills[(slots, mbs)] = tuple((at, self._line(key, format_value(mbs))) for at, key in slots)
        return Overrides(lines, fill)

    def _line(self, key: str, value: str) -> str:
        hit = self._lines.get((key, value))
        if hit is None:
            hit = self._lines[(key, value)] = f"{key}={value}"
        return hit

    def _render_args(self, si: int, mbs_text: Any, ci: int, mbs: int | None) -> tuple:
        """(templates, value texts, resets) of a layout for ``render_texts``; templates are split once per
        combination and shape / option values formatted once per shape / combination."""
        s, combo = self.shapes[si], self.combos[ci]
        templates = self._templates.get(ci)
        if templates is None:
            texts = list(self.layout_templates)
            for opt in combo.options:
                if opt is not None:
                    texts += opt.overrides
            templates = self._templates[ci] = parse(texts)
        values = {**self._texts(("shape", si), s.fields), "micro_batch_size": mbs_text,
                  **self._texts(("combo", ci), combo.fields)}
        resets: dict[str, str] = {}
        if self.resettable:  # usually empty: a preset leaves every varied field unset
            fields = {**s.fields, "micro_batch_size": mbs, **combo.fields}
            resets = {name: self.field_keys[name] for name, value in fields.items()
                      if name in self.resettable and vars(self.base)[name] not in (None, value)}
        return templates, values, resets

    def _texts(self, key: tuple, fields: Mapping[str, Any]) -> dict[str, str]:
        """``format_value`` of each of a shape's or a combination's fields, formatted once."""
        hit = self._formatted.get(key)
        if hit is None:
            hit = self._formatted[key] = {name: format_value(value) for name, value in fields.items()}
        return hit
