"""The ``key: value`` items of a memory report or footprint line, read into fields (bytes or counts).

Apart from the scanner because it is the inner loop of a report-dense log (360k report lines), with its own
per-signature memo and fast path for plain numbers.
"""

from __future__ import annotations

from ..units import MAX_FIGURE, OutOfRange, checked, parse_size, unit_factor
from .signatures import Signature, _PairHow


def report_pairs(sig: Signature, text: str | None) -> dict[str, float]:
    """``key: value`` items of a report or footprint line -> {field: bytes or count}; see signatures.yaml sec. 7.

    One ``findall`` per line and each key's field and unit resolved once per signature: a report-dense log
    has 360k such lines, and the per-item match objects and unit look-ups were a third of its scan."""
    values: dict[str, float] = {}
    if sig.pair_item is None or not text:
        return values
    key_at, value_at, unit_at = sig.pair_groups
    memo = sig.pair_memo
    for item in sig.pair_item.findall(text):
        printed = item[unit_at] if unit_at is not None else None
        ident = item[key_at] if unit_at is None else (item[key_at], printed)
        how = memo.get(ident)
        if how is None:
            how = _pair_how(sig, item[key_at], printed)
            if len(memo) < _PAIR_MEMO_KEPT:
                memo[ident] = how
        if not how:
            continue
        field_name, unit, factor = how
        raw = item[value_at]
        try:
            value = float(raw) * factor if factor else -1.0
        except ValueError:
            value = -1.0
        try:
            if not (0 <= value < MAX_FIGURE and "_" not in raw and raw.strip() == raw):  # else the usual case, inline
                value = _figure(raw, unit) if unit else checked(float(raw), raw)
        except OutOfRange:
            raise  # a corrupt figure: refused with its line (parse_log / read_memory_steps), never a wrong number
        except ValueError:
            continue
        values[field_name] = values.get(field_name, 0.0) + value
    return values


_PAIR_MEMO_KEPT = 256  # printed keys a signature remembers (a log could print any words as keys)


def _pair_how(sig: Signature, key: str, printed: str | None) -> _PairHow:
    """The field and unit of one printed key (and unit), or () when the table does not read it."""
    spec = sig.pair_keys.get(key.strip())
    if not spec:
        return ()
    unit = spec.get("unit") or (sig.pair_units.get(printed) if printed else None) or sig.number_unit
    if printed and unit is None:
        return ()  # a unit the table does not map: better no number than a wrong one
    return spec["field"], unit, unit_factor(unit) if unit else None


def _figure(raw: str, unit: str) -> float:
    """``parse_size(raw, unit)`` with a fast path for the plain numbers report lines print (360k a big log)."""
    try:
        number = float(raw)
    except ValueError:
        return parse_size(raw, unit)
    if number != number or "_" in raw or raw.strip() != raw:  # NaN, or what float() takes and a size may not
        return parse_size(raw, unit)
    return checked(number * unit_factor(unit), raw)
