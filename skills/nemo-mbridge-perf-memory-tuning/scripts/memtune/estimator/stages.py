"""Which decoder layers, embedding, loss and MTP blocks sit on each pipeline rank and VPP chunk.

Megatron-Core numbers virtual stages ``i = vp * PP + pp_rank`` and hands layers
out in that order, so with interleaving rank 0 holds chunks 0, PP, 2*PP, ...
The embedding lives in virtual stage 0 (rank 0, chunk 0); the final norm,
output layer, loss and MTP blocks in the last one (rank PP-1, last chunk).
Supported splits: even; ``num_layers_in_first/last_pipeline_stage``;
``account_for_embedding/loss_in_pipeline_split`` (embedding and loss each
count as one layer); an explicit ``pipeline_model_parallel_layout`` string
("E" embedding, "t" layer, "m" MTP, "L" loss, "|" next stage, "(..)*n"); and
"|" stage marks inside a hybrid layer pattern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..errors import UserError


@dataclass(frozen=True)
class Chunk:
    """One model chunk (a whole stage without VPP): the kinds of its layers and what else it holds."""

    pp_rank: int
    vp: int
    kinds: str  # one kind letter per decoder layer in this chunk
    embedding: bool = False
    loss: bool = False
    mtp: int = 0


@dataclass(frozen=True)
class Placement:
    """Chunks per rank plus indexes that let the estimator compute each distinct chunk and stage once."""

    stages: tuple[tuple[Chunk, ...], ...]  # stages[rank][vp]
    unique: tuple[Chunk, ...]  # one representative per distinct (layers, embedding, loss, MTP) chunk
    chunk_ids: tuple[tuple[int, ...], ...]  # chunk_ids[rank][vp] -> index into unique
    stage_ids: tuple[int, ...]  # first rank whose chunks are the same as this rank's

    @property
    def has_loss(self) -> tuple[bool, ...]:
        return tuple(any(ch.loss for ch in st) for st in self.stages)


@lru_cache(maxsize=512)
def place(pattern: str, pp: int, vp: int, first: int | None, last: int | None, embed_split: bool,
          loss_split: bool, layout: str | None, hybrid_marks: str | None, mtp: int) -> Placement:
    """Where every layer goes: ``place(...).stages[rank][vp]``."""
    if layout:
        counts, extras = _from_layout(layout, pp * vp)
    elif hybrid_marks and "|" in hybrid_marks:
        counts = [sum(1 for c in seg if c not in " /") for seg in hybrid_marks.split("|")]
        extras = None
    else:
        counts = _virtual_counts(len(pattern), pp, vp, first, last, embed_split, loss_split)
        extras = None
    if len(counts) != pp * vp:
        raise UserError(f"config: pipeline layout gives {len(counts)} stages, PP x VPP is {pp * vp}")
    if sum(counts) != len(pattern):
        raise UserError(f"config: pipeline layout places {sum(counts)} layers, the model has {len(pattern)}")
    stages: list[list[Chunk]] = [[] for _ in range(pp)]
    start = 0
    for i, n in enumerate(counts):
        rank, chunk = i % pp, i // pp
        if extras is None:
            emb, loss, m = i == 0, i == pp * vp - 1, mtp if i == pp * vp - 1 else 0
        else:
            emb, loss, m = extras[i]
        stages[rank].append(Chunk(rank, chunk, pattern[start:start + n], emb, loss, m))
        start += n
    keys: dict[tuple, int] = {}
    unique: list[Chunk] = []
    chunk_ids = []
    for st in stages:
        ids = []
        for ch in st:
            key = (ch.kinds, ch.embedding, ch.loss, ch.mtp)
            if key not in keys:
                keys[key] = len(unique)
                unique.append(ch)
            ids.append(keys[key])
        chunk_ids.append(tuple(ids))
    stage_ids = tuple(chunk_ids.index(ids) for ids in chunk_ids)
    return Placement(tuple(tuple(st) for st in stages), tuple(unique), tuple(chunk_ids), stage_ids)


def _virtual_counts(layers: int, pp: int, vp: int, first: int | None, last: int | None, embed_split: bool,
                    loss_split: bool) -> list[int]:
    """Decoder layers per virtual stage, in virtual-stage order."""
    if first is not None or last is not None:
        if pp < 2:
            raise UserError("config: num_layers_in_first/last_pipeline_stage need pipeline_model_parallel_size > 1")
        rest, left = layers - (first or 0) - (last or 0), pp - (first is not None) - (last is not None)
        if left and (rest < 0 or rest % left):
            raise UserError(f"config: {rest} remaining layers do not divide over {left} middle pipeline stages")
        if not left and rest:
            raise UserError("config: first/last pipeline stage layer counts do not cover all layers")
        per_rank = [rest // left if left else 0] * pp
        if first is not None:
            per_rank[0] = first
        if last is not None:
            per_rank[-1] = last
        if any(n % vp for n in per_rank):
            raise UserError(f"config: layers per pipeline stage {per_rank} must divide by VPP {vp}")
        return [per_rank[i % pp] // vp for i in range(pp * vp)]
    total = layers + int(embed_split) + int(loss_split)
    if total % (pp * vp):
        raise UserError(f"config: {total} layers do not divide evenly over PP {pp} x VPP {vp} model chunks")
    counts = [total // (pp * vp)] * (pp * vp)
    if embed_split:
        counts[0] -= 1
    if loss_split:
        counts[-1] -= 1
    if min(counts) < 0:
        raise UserError("config: too few layers for account_for_embedding/loss_in_pipeline_split")
    return counts


_GROUP = re.compile(r"\(([^()]*)\)\*(\d+)")


def _from_layout(layout: str, n_virtual: int) -> tuple[list[int], list[tuple[bool, bool, int]]]:
    text = layout.replace(" ", "").replace(",", "")
    while True:
        expanded = _GROUP.sub(lambda m: m.group(1) * int(m.group(2)), text)
        if expanded == text:
            break
        text = expanded
    text = re.sub(r"([EtmL])\*?(\d+)", lambda m: m.group(1) * int(m.group(2)), text)
    if set(text) - set("EtmL|"):
        raise UserError(f"config: pipeline_model_parallel_layout {layout!r} has symbols other than E t m L | ( ) *")
    parts = text.split("|")
    if parts and parts[-1] == "" and len(parts) == n_virtual + 1:
        parts = parts[:-1]
    return [p.count("t") for p in parts], [("E" in p, "L" in p, p.count("m")) for p in parts]
