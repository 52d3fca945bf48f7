"""GPU type -> GpuFacts, by name (``--gpu H100``, a question) or by the capacity an OOM message reports.

Names and capacities live in knowledge/gpus.yaml.  A capacity picks the GPU whose reported
capacity is nearest, within the table's tolerance; every GPU inside the tolerance is kept in
``candidates`` so a renderer can say "H100 80GB (or A100 80GB)" instead of guessing silently.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from ..errors import UserError
from ..facts import GpuFacts
from ..knowledge import Knowledge

GIB = 2**30


def _table(kb: Knowledge) -> Mapping[str, Any]:
    return kb.tables.get("gpus") or {}


def _entries(kb: Knowledge) -> list[Mapping[str, Any]]:
    return list(_table(kb).get("gpus") or [])


# Left of a GPU name: not a letter ("GB200" is not "B200"), except the "x" of a count ("8xH100"); a digit
# is fine ("4x8H200" = 4 nodes of 8 H200).
ALIAS_LEFT = r"(?:(?<![A-Za-z])|(?<=[0-9][xX]))"


@lru_cache(maxsize=256)
def alias_regex(alias: str) -> re.Pattern[str]:
    """An alias as it may appear in text: not glued to a letter before (but "8xH100" is fine), nor a digit after."""
    return re.compile(rf"{ALIAS_LEFT}(?:{alias})(?![0-9])", re.I | re.A)


def find_gpus(text: str, kb: Knowledge) -> Iterator[tuple[int, int, Mapping[str, Any]]]:
    """Every (start, end, gpus.yaml entry) mention in ``text``; overlapping mentions keep the longest."""
    hits = []
    for entry in _entries(kb):
        for alias in entry.get("aliases") or []:
            for m in alias_regex(alias).finditer(text):
                hits.append((m.start(), m.end(), entry))
    hits.sort(key=lambda h: (h[0], -(h[1] - h[0])))
    last_end = -1
    for start, end, entry in hits:
        if start >= last_end:
            last_end = end
            yield start, end, entry


def gpu_pattern(kb: Knowledge) -> str:
    """One alternation of every alias, for patterns that embed ``{gpu}``."""
    aliases = sorted((a for e in _entries(kb) for a in e.get("aliases") or []), key=len, reverse=True)
    return "(?:" + "|".join(f"(?:{a})" for a in aliases) + r")(?![0-9])"


def facts_for(entry: Mapping[str, Any], inferred_from: str, candidates: list[str] | None = None) -> GpuFacts:
    cap = entry.get("capacity_gib")
    return GpuFacts(
        name=entry["name"],
        capacity_bytes=cap * GIB if cap else None,
        nominal_gb=entry.get("nominal_gb"),
        arch=entry.get("arch"),
        nvlink_domain=entry.get("nvlink_domain"),
        hardware=entry.get("hardware"),
        inferred_from=inferred_from,
        candidates=candidates or [entry["id"]],
    )


def lookup_gpu(name_or_capacity: str | float | int, kb: Knowledge) -> GpuFacts:
    """A GPU as people type it, or by reported capacity in bytes (nearest GPU).

    "H100", "8x H800", "H100*8", "80GB", "GH200 96GB", "RTX 4090 24GB", "8 zhang A800" (8 A800 cards): a count is
    kept, a known name gives its gpus.yaml entry, a size gives the capacity. Nothing is refused: what the tool had to
    assume (a capacity from the size as typed, or none for a name it does not know) is stated in ``assumption``.
    """
    if isinstance(name_or_capacity, (int, float)) and not isinstance(name_or_capacity, bool):
        return gpu_from_capacity(float(name_or_capacity), kb)
    typed = " ".join(str(name_or_capacity).split())
    if not typed:
        raise UserError("--gpu: empty; give a GPU name such as H100-80GB, or a size such as 80GB")
    count, name = _split_count(_card_items(typed))
    by_id = {e["id"]: e for e in _entries(kb)}
    entry = by_id.get(name.lower()) or next(
        (e for start, end, e in find_gpus(name, kb) if start == 0 and end >= len(name.rstrip("s"))), None)
    if entry is None:  # a known name followed by words the alias does not spell ("H100 SXM5 80GB HBM3 node")
        entry = next((e for start, _, e in find_gpus(name, kb) if start == 0), None)
    if entry is None:  # a known name inside a description (Chinese "one machine 8 cards H20", "4 nodes x 8 cards H100")
        entry = next((e for _, _, e in find_gpus(typed, kb)), None)
        count = count or _count_within(typed)
    size = _typed_size_gib(name)
    if size and _TOTAL.search(name):  # "4x V100 (128G total)": the size of all the cards together
        if not count:
            return GpuFacts(name=name, inferred_from="unknown", typed=typed,
                            assumption=f"GPU {typed!r}: {size:g} GB is a total over cards whose number is not given, "
                                       "so one card's capacity is unknown (give it as e.g. '--gpu \"4x V100 32GB\"')")
        size = size / count
    total_note = f" ({size * count:g} GB typed as the total of {count} cards)" if size and _TOTAL.search(name) else ""
    if entry is not None and size and entry.get("nominal_gb") and abs(size - float(entry["nominal_gb"])) > 1 \
            and not _TOTAL.search(name):
        # "H100 (64GB)": a variant of the card with another memory size than the table's; the size typed is the card's
        return GpuFacts(name=typed if count is None else name, capacity_bytes=_usable_share(kb) * size * GIB,
                        inferred_from="typed-size", count=count, typed=typed,
                        assumption=_capacity_note(entry["name"], size, True, kb))
    if entry is not None:
        facts = facts_for(entry, "name")
        facts.count = count
        if facts.capacity_bytes is None and (size or entry.get("nominal_gb")):
            facts.capacity_bytes = _usable_share(kb) * (size or entry["nominal_gb"]) * GIB
            facts.assumption = (_capacity_note(entry["name"], size or entry["nominal_gb"], size is not None, kb)
                                + total_note)
        if typed != entry["name"] and (count or typed.lower() not in (entry["id"], entry["name"].lower())):
            facts.typed = typed
        return facts
    if size:
        return GpuFacts(name=name, capacity_bytes=_usable_share(kb) * size * GIB, inferred_from="typed-size",
                        count=count, typed=typed, assumption=_capacity_note(name, size, True, kb) + total_note)
    return GpuFacts(name=name, inferred_from="unknown", count=count, typed=typed,
                    assumption=f"GPU {name!r} is not in knowledge/gpus.yaml and no size was given: its capacity is "
                               f"unknown (give it as e.g. '--gpu \"{name} 48GB\"')")


# Chinese in the count patterns (ASCII source: scanners read non-ASCII files slowly): \u00d7 the times sign, the
# counters \u5f20 zhang, \u5757 kuai, \u5361 ka (card), \u8282\u70b9 jiedian (node), \u53f0 tai and \u673a ji (machine).
_COUNT_BEFORE = re.compile(r"^(?:(?P<nodes>\d{1,4})\s*[x\u00d7*]\s*)?(?P<n>\d{1,5})\s*"
                           r"(?:[x\u00d7*]|\u5f20|\u5757|\u5361|(?:gpus?|cards?)\b|(?<=\s)(?=[a-z])(?!(?:nodes?|machines?|servers?)\b))"
                           r"\s*(?:of\s+)?",
                           re.I)
_COUNT_AFTER = re.compile(r"\s*(?:(?<![a-z])[x\u00d7*]\s*(?P<n>\d{1,5})|(?P<m>\d{1,5})\s*(?:\u5f20|\u5757|\u5361))\s*$",
                          re.I)
_SIZE = re.compile(r"(?<![A-Za-z0-9_.])(?P<v>\d+(?:\.\d+)?)\s*(?P<u>gib|gb|g)(?![a-z])", re.I)  # "yigong128G"
# ...and any size an item of the description may give the host, terabytes included ("1TB RAM"): no card is sold so
_ANY_SIZE = re.compile(r"(?<![A-Za-z0-9_.])\d+(?:\.\d+)?\s*(?:tib|tb|t|gib|gb|g)(?![a-z])", re.I)
# a size that is all the cards together: "128G total", "in total", Chinese yigong / zonggong / heji (in all)
_TOTAL = re.compile(r"\btotal\b|\bin all\b|\baltogether\b|\u4e00\u5171|\u603b\u5171|\u5408\u8ba1|\u603b\u663e\u5b58",
                    re.I)


def _split_count(text: str) -> tuple[int | None, str]:
    """("8x H800" | "H800 x8" | "8 zhang A800") -> (8, "H800"); a count that is really a size ("80GB") is left alone;
    "4 nodes x 8 GPUs" is 32 (the nodes times the cards of each)."""
    m = _NODES_TIMES.match(text)
    if m:
        return int(m.group("nodes")) * int(m.group("n")) or None, text[m.end():].strip(" ,") or text
    m = _ONE.match(text)
    if m:
        return 1, text[m.end():].strip(" ,") or text
    m = _COUNT_BEFORE.match(text)
    if m and not _SIZE.match(text):
        return int(m.group("n")) * int(m.group("nodes") or 1) or None, text[m.end():].strip() or text
    m = _COUNT_AFTER.search(text)
    if m and m.start() > 0:
        return int(m.group("n") or m.group("m")) or None, text[:m.start()].strip()
    m = _ONE_WITHIN.search(text)
    if m:  # "4090 dan ka (24G)": one card, said after its name
        rest = (text[:m.start()] + " " + text[m.end():]).strip()
        return 1, rest if re.search(r"[A-Za-z0-9]", rest) else text
    return None, text


# one card said in words: "single A100", "one RTX 4090", Chinese dan ka / dan zhang / dan kuai (single card), yi zhang /
# yi kuai (one card)
_ONE = re.compile(r"^(?:an?\s+)?(?:single|one)\s+(?!(?:node|machine|server|host|box|dgx)\b)(?:gpu\s+|card\s+)?(?=[a-z])"
                  r"|^[\u5355\u4e00][\u5361\u5f20\u5757]\s*", re.I)
_ONE_WITHIN = re.compile(r"\u5355[\u5361\u5f20\u5757]")
_NODES_TIMES = re.compile(r"(?P<nodes>\d{1,4})\s*(?:\u8282\u70b9|\u53f0|nodes?|\u673a)[\s,:]*[x\u00d7*]?\s*"
                          r"(?P<n>\d{1,3})(?:\s*(?:\u5361|\u5f20|\u5757|gpus?|[x\u00d7*]\s*(?=[A-Za-z]))"
                          r"|\s+(?=[A-Za-z]))", re.I)  # "2 nodes x 8 GPUs", "1 node 8*H20", "1 node, 8 A100"
_COUNT_WORD = re.compile(r"(?<![\d.])(?P<n>\d{1,5})\s*(?:\u5361|\u5f20|\u5757|[x\u00d7*](?=\s*[A-Za-z]))", re.I)


# nodes named after a count of cards with no number of their own ("multiple 4xH100 (64GB) nodes", "several 8-GPU
# nodes", Chinese "ji tai 8 ka de jiqi"): the count is per node
_PER_NODE = re.compile(r"\bnodes\b|\bmachines\b|\u8282\u70b9|\u53f0\u673a\u5668", re.I)


def _count_within(text: str) -> int | None:
    """A GPU count written inside a description: Chinese "4 nodes x 8 cards" = 32, "one machine 8 cards" = 8."""
    m = _NODES_TIMES.search(text)
    if m:
        return int(m.group("nodes")) * int(m.group("n"))
    m = _COUNT_WORD.search(text)
    if m and _PER_NODE.search(text, m.end()):
        return None  # "multiple 4xH100 nodes": a count per node, and how many nodes is not said
    return int(m.group("n")) if m else None


# a size said to be the host's, not the card's: "host RAM 504GB", "1TB system memory", Chinese zhuji neicun (host
# memory), xitong neicun (system memory), fuwuqi (server), or neicun (RAM) not after xianka / ka (graphics card)
# ("fuwuqi" (server) alone is the GPU box: "8*80G fuwuqi" is a server of 80G cards; its RAM is "fuwuqi neicun")
_HOST = re.compile(r"\b(?:host|cpu|system|node|server)\s*(?:ram|memory|mem)\b|(?<![a-z])ram\b|\u4e3b\u673a|"
                   r"\u7cfb\u7edf|"
                   r"(?<!\u5361)(?<!\u5361\u7684)(?<![a-z]\s)(?<![a-z])\u5185\u5b58", re.I)
_HOST_BEFORE_CHARS, _HOST_AFTER_CHARS = 12, 8


# where one item of a description ends: "RTX A5000(24GB) * 5, neicun 210GB" labels only the second size the host's
_ITEM_BREAK = re.compile(r"[,;|\uff0c\uff1b\u3001]")


def _card_items(typed: str) -> str:
    """The description without its items that size the host ("RTX A5000(24GB) * 5, neicun 210GB" -> the first):
    the count and the card's name are read from what is left."""
    items = [i.strip() for i in _ITEM_BREAK.split(typed)]
    card = [i for i in items if i and not (_HOST.search(i) and _ANY_SIZE.search(i))]
    return " ".join(card) if card and len(card) < len(items) else typed


def _typed_size_gib(text: str) -> float | None:
    """The card's memory as typed ("24GB", "96 GiB", "80G"), in GiB: cards are sold by their GiB of HBM/GDDR.
    A size labelled as the host's ("host RAM 504GB", "504GB neicun") is not the card's; the label is looked for in
    the size's own item of the description (up to a comma), so "A5000(24GB) * 5, neicun 210GB" keeps the 24GB."""
    for m in _SIZE.finditer(text):
        start = max([m.start() - _HOST_BEFORE_CHARS, 0, *(b.end() for b in _ITEM_BREAK.finditer(text, 0, m.start()))])
        stop = next((b.start() for b in _ITEM_BREAK.finditer(text, m.end())), len(text))
        around = text[start:min(stop, m.end() + _HOST_AFTER_CHARS)]
        if _HOST.search(around):
            continue
        value = float(m.group("v"))
        return value if 1 <= value <= 4096 else None
    return None


def _usable_share(kb: Any) -> float:
    """Median usable/nominal capacity of the HBM GPUs gpus.yaml has both figures for (cudaMemGetInfo sits below the
    card's size: the driver keeps some). GDDR cards with ECC on keep far more (L20: 44.53 of 48), so they would drag
    the share an unlisted "80GB" or "96GB" card, almost always an HBM one here, is given."""
    shares = sorted(e["capacity_gib"] / e["nominal_gb"] for e in _entries(kb)
                    if e.get("capacity_gib") and e.get("nominal_gb") and e.get("memory", "hbm") == "hbm")
    return shares[len(shares) // 2] if shares else 1.0


def _capacity_note(name: str, size_gb: float, typed: bool, kb: Any) -> str:
    share = _usable_share(kb)
    said = f"the size as typed, {size_gb:g} GB" if typed else f"its nominal {size_gb:g} GB (no OOM message " \
        "with its capacity is on record)"
    return (f"GPU {name}: about {size_gb * share:.1f} GiB usable, from {said} x{share:.3f} "
            "(the median usable share of the HBM GPUs in knowledge/gpus.yaml)")


def gpu_from_capacity(capacity_bytes: float, kb: Knowledge) -> GpuFacts:
    """The GPU whose usable capacity is nearest ``capacity_bytes``; unnamed if none is close enough."""
    table = _table(kb)
    tol = float(table.get("capacity_match_tolerance_gib") or 0) * GIB
    scored = []
    for entry in _entries(kb):
        seen = [entry.get("capacity_gib"), *(entry.get("capacity_gib_observed") or [])]
        dists = [abs(c * GIB - capacity_bytes) for c in seen if c]
        if dists and min(dists) <= tol:
            scored.append((min(dists), entry))
    if not scored:
        return GpuFacts(capacity_bytes=capacity_bytes, inferred_from="capacity")
    scored.sort(key=lambda s: s[0])
    facts = facts_for(scored[0][1], "capacity", [e["id"] for _, e in scored])
    facts.capacity_bytes = capacity_bytes
    return facts
