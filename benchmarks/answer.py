"""Read an answer (our diagnose JSON, or any agent's Markdown) into the ids the scorer compares.

Markdown is parsed with markdown-it-py, not searched as flat text, because *where* a fix is
named decides what it means: under "Avoid" / "不要" headings, after a lead-in such as
"**Do not:**", in a negated clause or as the X of "replace X with Y" it is advice against;
under "Cause" / "Evidence" headings, in a condition the user does not meet ("Only if you move
to TP2 ...") or kept as it is ("已经打开，保持不动") it is neither; elsewhere it is a
recommendation.  The first fix is the first one in the strongest place: the block a "Fix:" /
"改法：" / "Change first" label or heading leads, then the first ordered plan, then a
recommendation section, then a code block, then prose — an expert does not read a fix named
while explaining the cause as the answer's advice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from markdown_it import MarkdownIt
from memtune.errors import UserError
from memtune.recognize import CueSet, Recognizer, phrase_regex

from . import yamlio

GRADING_FILE = Path(__file__).resolve().parent / "grading.yaml"
KINDS = ("avoid", "neutral", "recommend", "cause")  # heading classification order

# Clause ends: hard punctuation anywhere, '.' or ',' only before whitespace/end (not "cfg.model", "[a,b]").
# A colon ends a clause only for causes: "Avoid: X" negates X, but "not fragmentation: the logits" does not
# negate the logits.
_CLAUSE_END = re.compile(r"[;!?。；！？，\n]|[.,](?=\s|$)")
_AS_CAUSE_BEFORE = 24  # characters before a mention in which "caused by" still names it as the cause
_KEPT_AFTER = 24  # characters after a mention in which "already on" / "保持不动" still speaks of it
_MARKERS = " *_>#-\u2022\u00b7\U0001f449\u26a0\ufe0f"  # what opens a line before its words: bullets, emphasis, 👉 ⚠️
_CUE_OBJECT = 3  # characters between a sentence-end cue and the fix it is said of ("别动 micro-batch")
# a cue that closes its clause, or whose object points back ("别动它们")
_CUE_TAIL = re.compile(r"[\s了吧啊呢的*_`]{0,3}(?:[，。；：！？,.;:!?)\uff09\n]|$|它们|这些|那些|它)")
_CJK = re.compile(r"[\u4e00-\u9fff]")  # a Chinese character: a cue that opens on one is a verb with an object after it
_OPTION_QUESTION = 100  # characters of a question that is no more than the options it names ("Lowering the MBS?")
# "If you X -> outcome", not a value changed ("gpu_memory_utilization 0.6 → 0.5")
_ARROW = re.compile(r"(?<![\d.%])\s*(?:->|=>|\u2192|\u21d2|\u27f6)(?!\s*[\d.])")
_VERDICT_MARK = re.compile("[\u2713\u2714\u2705\u2717\u2718\u274c]")  # ✓ ✔ ✅ ✗ ✘ ❌ closing an option's line
_FAIL_MARK = re.compile("[\u2717\u2718\u274c]")
_WHAT_IF_OPENER = 12  # characters in which a what-if line names its "If you" / "如果"
_SENTENCE_END = re.compile(r"[!?。！？\n]|[.;；](?=\s|$)")
_FULL_STOP = re.compile(r"[!?。！？\n]|[.](?=\s|$)")
_CAUSE_CLAUSE_END = re.compile(r"[;!?。；！？，：\n]|[.,:](?=\s|$)")


@dataclass
class Answer:
    """What an answer recommends, flags as avoid, and names as cause, in its own order."""

    recommended: list[str] = field(default_factory=list)
    avoided: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)
    first_fix: str | None = None
    text: str = ""  # what literal `mentions` are searched in
    source: str = "markdown"  # markdown | json
    # Why each id was read as it was: id -> "<place>: «the text around it»" for its deciding mention, so a
    # reader can audit a verdict (first fix, a violation, an avoid, the cause).
    why: dict[str, str] = field(default_factory=dict)

    @property
    def top_cause(self) -> str | None:
        return self.causes[0] if self.causes else None


def _words(spec: Mapping[str, list[str]] | None) -> str:
    """One alternation of a cue list (both languages, longest first); an English phrase ends at a word end, so
    'first' is not 'firstly'."""
    phrases = sorted({p for p in [*((spec or {}).get("en") or []), *((spec or {}).get("zh") or [])] if p.strip()},
                     key=len, reverse=True)
    return "|".join(phrase_regex(p) + (r"(?![A-Za-z0-9])" if p[-1].isascii() and p[-1].isalnum() else "")
                    for p in phrases) or r"(?!)"


@dataclass(frozen=True)
class ReplyCues:
    """How the sentence after a question that names fixes answers it (grading.yaml `question_reply`)."""

    yes: re.Pattern[str]  # opens on a yes: the options are advised
    no: re.Pattern[str]  # a no anywhere in the reply: advice against them
    only_if: re.Pattern[str]  # a condition: offered for another situation, neither for nor against
    other_question: re.Pattern[str]  # a question opening on these asks something else ("Will it slow down?")

    @classmethod
    def build(cls, spec: Mapping[str, Any]) -> ReplyCues:
        def rx(key: str, anchored: bool = False) -> re.Pattern[str]:
            words = _words(spec.get(key))
            return re.compile(rf"[\s*_]*(?:{words})" if anchored else words, re.IGNORECASE)
        return cls(yes=rx("yes", anchored=True), no=rx("no"), only_if=rx("only_if"),
                   other_question=rx("other_question", anchored=True))


@dataclass(frozen=True)
class OrderCues:
    """grading.yaml `order`: the words that place a mention first or later in the plan, in the positions they are
    read (a heading, a label's start, inside a paragraph, right after or before the mention)."""

    do_first: re.Pattern[str]  # searched in a heading
    first_action: re.Pattern[str]  # matched at a label's start
    inline_first: re.Pattern[str]  # searched in a paragraph: what follows its end is the first thing to do
    later_after: re.Pattern[str]  # matched right after a mention
    later_before: re.Pattern[str]  # searched in the characters right before a mention, to the clause's end
    removed_before: re.Pattern[str]  # searched in the characters right before a mention, ending there

    @classmethod
    def build(cls, order: Mapping[str, Any]) -> OrderCues:
        def rx(pattern: str) -> re.Pattern[str]:
            return re.compile(pattern, re.IGNORECASE)

        return cls(
            do_first=rx(_words(order.get("do_first"))),
            first_action=rx(rf"^\s*[*_`]*\s*(?:{_words(order.get('first_action'))})"),
            # "..., but do first:" / "但先查：" after some text; or a Chinese sentence opening "先把 ..."
            inline_first=rx(rf"(?<=\S)\s*(?:\bbut\s+|\band\s+|但|不过)?(?:{_words(order.get('inline_first'))})\s*[:：]"
                            rf"|(?<=[。；！？])\s*(?:{_words(order.get('sentence_first'))})"),
            later_after=rx(rf"[`'\"”」]?\s*(?:{_words(order.get('later_after'))})"),
            later_before=rx(rf"(?:{_words(order.get('later_before'))})[^，。；;,\n]{{0,20}}$"),
            removed_before=rx(rf"(?:{_words(order.get('removed_before'))})\s*[`'\"]?$"),
        )


@dataclass(frozen=True)
class Grading:
    """The grader vocabulary from grading.yaml, compiled."""

    headings: dict[str, CueSet]
    negation_before: CueSet
    negation_after: CueSet
    negation_exceptions: CueSet
    cause_before: CueSet
    cause_after: CueSet
    cause_phrases: dict[str, dict[str, list[str]]]
    primary: CueSet = field(default_factory=lambda: CueSet([]))
    conditional: CueSet = field(default_factory=lambda: CueSet([]))
    sequenced: CueSet = field(default_factory=lambda: CueSet([]))
    fallback_lead: CueSet = field(default_factory=lambda: CueSet([]))
    rating: re.Pattern[str] = re.compile(r"(?!)")  # "推荐指数：★★★★", "priority: high": a score, not "recommended"
    later_option: re.Pattern[str] = re.compile(r"(?!)")  # "方案二", "Option 2": an option after the first
    replacement: tuple[re.Pattern[str], ...] = ()
    flag_aliases: dict[str, str] = field(default_factory=dict)
    negation_double: CueSet = field(default_factory=lambda: CueSet([]))
    negation_near: CueSet = field(default_factory=lambda: CueSet([]))
    kept_before: CueSet = field(default_factory=lambda: CueSet([]))
    kept_after: CueSet = field(default_factory=lambda: CueSet([]))
    as_cause: CueSet = field(default_factory=lambda: CueSet([]))
    against_in_sentence: CueSet = field(default_factory=lambda: CueSet([]))
    verdict_at_end: re.Pattern[str] = re.compile(r"(?!)")  # a sentence-final verdict against what it lists
    still: CueSet = field(default_factory=lambda: CueSet([]))  # "still OOMs" after a condition: the next step
    option_rejected: CueSet = field(default_factory=lambda: CueSet([]))  # "Option C - ... I would not do this"
    asks_if_it_helps: CueSet = field(default_factory=lambda: CueSet([]))  # "Would X help?", "X 有用吗？", "X 呢？"
    anaphora_strict: re.Pattern[str] = re.compile(r"(?!)")  # after ".": "None of them ...", "Neither ..."
    answered_no_rx: re.Pattern[str] = re.compile(r"(?!)")  # "Would X help? No." - the reply to a question
    reply: ReplyCues = field(default_factory=lambda: ReplyCues.build({}))  # the reply to "X? Irrelevant."
    anaphora: re.Pattern[str] = re.compile(r"(?!)")  # a clause after ";" that opens on these speaks of what came before
    addon: CueSet = field(default_factory=lambda: CueSet([]))
    chosen: CueSet = field(default_factory=lambda: CueSet([]))  # a table's status cell that picks its row
    kept_status: CueSet = field(default_factory=lambda: CueSet([]))  # a status cell that keeps its row as it is
    changed_status: CueSet = field(default_factory=lambda: CueSet([]))  # a status cell that changes its row
    default_plan: CueSet = field(default_factory=lambda: CueSet([]))  # "my default if you can't check"
    finding_head: re.Pattern[str] = re.compile(r"(?!)")  # a linter finding's first line: "E101 error [...]:"
    finding_drop: CueSet = field(default_factory=lambda: CueSet([]))  # a finding's "ignore:" / "无需处理" line
    finding_act: CueSet = field(default_factory=lambda: CueSet([]))  # a finding's "fix:" / "建议:" line
    discarded: CueSet = field(default_factory=lambda: CueSet([]))  # "so I ruled this out": the direction is dropped
    first_hypothesis: CueSet = field(default_factory=lambda: CueSet([]))  # "my first instinct was": weighed only
    what_if_opens: CueSet = field(default_factory=lambda: CueSet([]))  # "If you <change> -> <outcome>"
    earlier_advice: CueSet = field(default_factory=lambda: CueSet([]))  # "earlier I told you to ..."
    classified: dict[str, str] = field(default_factory=dict, compare=False, repr=False)  # classify()'s memory
    what_if_fails: CueSet = field(default_factory=lambda: CueSet([]))
    what_if_fits: CueSet = field(default_factory=lambda: CueSet([]))
    # whole labels that restate what was read ("情况：", "Situation:", "Read:"): what follows is the user's run
    restating: frozenset[str] = frozenset()
    # where a mention stands in the plan (grading.yaml `order`), compiled by _order_patterns
    order: OrderCues = field(default_factory=lambda: OrderCues.build({}))

    @classmethod
    def load(cls, path: Path = GRADING_FILE) -> Grading:
        try:
            data = yamlio.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise UserError(f"{path}: cannot read grading vocabulary ({exc})") from None
        try:
            neg, cneg = data["negation"], data["cause_negation"]
            return cls(
                headings={kind: CueSet.from_langs(data["headings"][kind]) for kind in KINDS},
                negation_before=CueSet.from_langs(neg["before"]),
                negation_after=CueSet.from_langs(neg["after"]),
                negation_exceptions=CueSet.from_langs(neg.get("exceptions")),
                cause_before=CueSet.from_langs(cneg["before"]),
                cause_after=CueSet.from_langs(cneg["after"]),
                cause_phrases=dict(data["causes"]),
                primary=CueSet.from_langs(data.get("primary")),
                conditional=CueSet.from_langs(data.get("conditional")),
                sequenced=CueSet.from_langs(data.get("sequenced")),
                fallback_lead=CueSet.from_langs(data.get("fallback_lead")),
                rating=re.compile("|".join(map(re.escape, (data.get("options") or {}).get("rating") or [])) or r"(?!)",
                                  re.IGNORECASE),
                later_option=re.compile("|".join((data.get("options") or {}).get("later") or []) or r"(?!)",
                                        re.IGNORECASE),
                replacement=tuple(_replacement_regex(r["head"], r["sep"]) for r in data.get("replacement") or []),
                flag_aliases=dict(data.get("flag_aliases") or {}),
                negation_double=CueSet.from_langs(neg.get("double")),
                negation_near=CueSet.from_langs(neg.get("near")),
                kept_before=CueSet.from_langs((data.get("kept") or {}).get("before")),
                kept_after=CueSet.from_langs((data.get("kept") or {}).get("after")),
                as_cause=CueSet.from_langs((data.get("as_cause") or {}).get("before")),
                against_in_sentence=CueSet.from_langs(data.get("against_in_sentence")),
                verdict_at_end=re.compile(rf"(?:{_words(data.get('verdict_at_sentence_end'))})$", re.IGNORECASE),
                still=CueSet.from_langs(data.get("still")),
                option_rejected=CueSet.from_langs(data.get("option_rejected")),
                asks_if_it_helps=CueSet.from_langs(data.get("asks_if_it_helps")),
                anaphora_strict=re.compile(rf"\s*(?:{_words(data.get('anaphora_strict'))})", re.IGNORECASE),
                answered_no_rx=re.compile(rf"[\s*_>]*(?:(?:A|Answer|答)\s*[:\uff1a][\s*_]*)?(?:{_words(data.get('answered_no'))})",
                                       re.IGNORECASE),
                anaphora=re.compile(rf"\s*(?:{_words(data.get('anaphora'))})", re.IGNORECASE),
                reply=ReplyCues.build(data.get("question_reply") or {}),
                addon=CueSet.from_langs(data.get("addon")),
                chosen=CueSet.from_langs(data.get("chosen")),
                kept_status=CueSet.from_langs(data.get("kept_status")),
                changed_status=CueSet.from_langs(data.get("changed_status")),
                default_plan=CueSet.from_langs(data.get("default_plan")),
                finding_head=re.compile((data.get("findings") or {}).get("head") or r"(?!)"),
                finding_drop=CueSet.from_langs((data.get("findings") or {}).get("drop")),
                finding_act=CueSet.from_langs((data.get("findings") or {}).get("act")),
                discarded=CueSet.from_langs(data.get("discarded")),
                first_hypothesis=CueSet.from_langs(data.get("first_hypothesis")),
                what_if_opens=CueSet.from_langs((data.get("what_if") or {}).get("opens")),
                earlier_advice=CueSet.from_langs(data.get("earlier_advice")),
                what_if_fails=CueSet.from_langs((data.get("what_if") or {}).get("fails")),
                what_if_fits=CueSet.from_langs((data.get("what_if") or {}).get("fits")),
                restating=frozenset(w.casefold() for words in (data.get("restating_labels") or {}).values()
                                    for w in words),
                order=OrderCues.build(data.get("order") or {}),
            )
        except (KeyError, TypeError) as exc:
            raise UserError(f"{path}: missing or malformed key {exc}") from None

    def is_primary(self, label: str) -> bool:
        """A recommend heading or label that says it is the first thing to do; a rating ("推荐指数：★★★★",
        "priority: medium") is no such word, and an option numbered after the first ("方案二", "Option 2") is not the
        first thing to do whatever it says of itself."""
        if self.later_option.search(label):
            return False
        return self.classify(label) == "recommend" and bool(self.primary.search(self.rating.sub("", label)))

    def is_addon(self, text: str) -> bool:
        """Opens as an add-on to the plan ("While you're at it, ...", "顺手把 ...")."""
        return self.addon.search(_LABEL.sub("", text, count=1).lstrip(" *_（(")[:_ADDON_HEAD])

    def is_conditional(self, text: str) -> bool:
        """Opens with a condition ("Only if you move to TP2...") that is not the plan's next step ("If still OOM")."""
        head = _LABEL.sub("", text, count=1).lstrip(" *_（(")[:80]
        opening = re.split(r"[,，:：;；]", head, maxsplit=1)[0]
        return bool(self.conditional.spans(head[:12])) and not self.sequenced.search(opening)

    def fallback_before(self, text: str, start: int) -> bool:
        """The mention's sentence opens, before it, on a condition that the first step did not do enough
        ("改完之后如果 entropy 那一步还是高，再对 logprob 分块计算",
        "If it still OOMs after that, turn on full recompute"): a fallback."""
        lo = _last_end(_SENTENCE_END, text, start)
        head = text[lo:start]
        cond = self.conditional.spans(head)
        # "还不够的话，把 X 再降一点", "仍不行: X": a clause that opens on "still not enough" needs no "if"
        return bool(cond) and bool(self.still.search(head[cond[0][1]:])) \
            or any(a == 0 for a, _ in self.still.spans(head.lstrip(_MARKERS)[:12]))

    def conditional_sentence(self, text: str, start: int) -> bool:
        """The mention's sentence opens, before it, on a condition that is not the plan's next step ("... with
        --adam_offload. If you can get more GPUs, ZeRO can shard the optimizer state instead"): an option for
        another situation."""
        lo = _last_end(_SENTENCE_END, text, start)
        if lo == 0:
            return False  # the paragraph's own opening is is_conditional's
        head = text[lo:start].lstrip(" *_")
        cond = self.conditional.spans(head[:12])
        return bool(cond) and cond[0][0] == 0 and not self.sequenced.search(head) and not self.still.search(head)

    def opens_on_fallback(self, text: str) -> bool:
        """The paragraph opens on a condition that the first step did not do enough ("**suggestion:** if the GPUs
        are clean and it still OOMs at 41, drop the rollout share a bit:"), not on a step of its own ("Start with
        TP4, then add recompute if it's still above 75 GB:")."""
        head = _LABEL.sub("", text, count=1).lstrip(" *_\uff08(")
        return bool(self.conditional.spans(head[:12])) and self.still.search(head)

    def leads_fallback(self, text: str) -> bool:
        """The last clause of a paragraph that introduces a code block says the block is the next step, not the
        first ("--micro_batch_size 减半，还不够就加：", "If that is still not enough, add:")."""
        last = re.split(r"[,，;；。.!?！？]\s*", text.rstrip(" :：\n"))[-1]
        return bool(self.fallback_lead.search(last))

    def kept(self, text: str, start: int, end: int) -> bool:
        """The clause around ``text[start:end]`` keeps the setting as it is.

        An `after` cue counts only right after the mention ("selective 已经打开"): further on in the clause it
        is about something else ("halve the MBS so the global batch stays the same").
        """
        lo = _last_end(_CLAUSE_END, text, start)
        # inside a parenthesised list, the clause that opens it speaks for every item ("you've already pulled every
        # lever (mbs 1, full recompute, capacity factor 1)")
        opened = text.rfind("(", 0, start)
        closed = text.find(")", opened)
        call = opened > 0 and (text[opened - 1].isalnum() or text[opened - 1] == "_")  # f(a, b): arguments, no list
        if (opened >= 0 and not call and not opened < closed < start
                and _LISTED.search(text, opened, closed if closed > opened else len(text))):
            lo = _last_end(_CLAUSE_END, text, opened)
        nxt = _CLAUSE_END.search(text, end, end + _KEPT_AFTER)
        after = text[end:nxt.start() if nxt else end + _KEPT_AFTER]  # "…的版本，其它配置不动" is another clause
        # "减半（global_batch_size 不变）": the aside in parentheses keeps another setting, not this one
        after = re.split(r"[(（]", after, maxsplit=1)[0]
        # "keep full recompute but go per-layer: recompute_num_layers=1": what follows "but" is the change
        head = _BUT.split(text[lo:start])[-1]
        # "↓1 (keep global) ✓ ② --gradient_checkpointing true": an aside closed before the mention speaks of itself
        head = _CLOSED_ASIDE.sub(" ", head)
        # "把 micro batch 调小 global batch 不变": a name between the mention and the cue is what the cue keeps
        # (its own value written after it, "expandable_segments:True is already set", is not another name)
        kept_after = self.kept_after.spans(after)
        value = _VALUE_AFTER.match(after)
        return bool(self.kept_before.search(head) or kept_after and not re.search(
            r"[A-Za-z]{2,}", after[value.end() if value else 0:kept_after[0][0]]))

    def named_as_cause(self, text: str, start: int) -> bool:
        """The mention follows "caused by" / "due to" in its clause, at most a few words before it."""
        lo = _last_end(_CLAUSE_END, text, start)
        return bool(self.as_cause.search(text[max(lo, start - _AS_CAUSE_BEFORE):start]))

    def entertained(self, text: str, start: int) -> bool:
        """The mention's sentence opens on a first hypothesis ("My first instinct was ...", "很多人第一反应是 ..."): an
        idea the answer weighs, neither advice for it nor against it."""
        lo = _last_end(_SENTENCE_END, text, start)
        return bool(self.first_hypothesis.search(text[lo:start]))

    def question_verdict(self, text: str, end: int) -> str | None:
        """How the sentence after a question that names the fix answers it ("Q: Would expandable_segments help? A: No",
        "Q：expandable_segments 呢？ A：不是碎片问题"): "no" (advice against), "open" (neither:
        "改成 abort 模式呢？ ...除非你本来就不需要保留 KV cache") or None (not such a question, or answered yes).

        A question is about the fix when it asks whether it helps ("Would X help?", "X 呢？") or is no more than the
        options themselves, as a "What about ...?" section lists them ("Lowering the micro batch or turning on
        recompute? Irrelevant.", "杀掉其他进程释放显存？ 一般不是原因"); one that opens on another question word ("Will
        recompute slow it down too much? No") asks something else."""
        nxt = _SENTENCE_END.search(text, end)
        if not (nxt and nxt.group() in "?\uff1f"):
            return None
        question = text[_last_end(_SENTENCE_END, text, end):nxt.end()]
        listed = len(question.strip()) <= _OPTION_QUESTION and not self.reply.other_question.match(
            question.lstrip(" *_>#-"))
        if not (self.asks_if_it_helps.search(question) or listed):
            return None
        if self.answered_no_rx.match(text, nxt.end()):
            return "no"
        reply_end = _FULL_STOP.search(text, nxt.end())  # past ";": "Avoids the bug, but ...; only if you have spare"
        reply = text[nxt.end():reply_end.start() if reply_end else len(text)]
        if self.reply.yes.match(reply):
            return None
        if self.reply.no.search(reply):
            return "no"
        return "open" if self.reply.only_if.search(reply) else None

    def recalled(self, text: str, start: int) -> bool:
        """The mention's sentence recalls the answer's own earlier advice ("Correction: earlier I told you to ...")."""
        return bool(self.earlier_advice.search(text[_last_end(_SENTENCE_END, text, start):start]))

    def opens_what_if(self, text: str) -> bool:
        """The line opens on "If you ..." / "如果……" (after list marks and emphasis)."""
        line = text.lstrip(" *_>#-+0123456789.)\uff09")
        return any(a == 0 for a, _ in self.what_if_opens.spans(line[:_WHAT_IF_OPENER]))

    def what_if(self, text: str, start: int) -> str | None:
        """A mention at ``start`` that is the change of a simulated option ("If you lower micro-batch -> already 1,
        no room."): "fails" where the outcome after the arrow says it fails, "weighed" where it does not; None for
        any other mention (no such line, or the mention is in the outcome)."""
        lo = text.rfind("\n", 0, start) + 1
        hi = text.find("\n", start)
        line = text[lo:hi if hi >= 0 else len(text)]
        arrow = _ARROW.search(line)
        if not arrow or arrow.start() < start - lo:
            return None
        outcome = line[arrow.end():]
        # "Add activation offload -> host goes up further. Harmful. ✗": a verdict mark makes the line an option
        # weighed whatever it opens on
        if not (self.opens_what_if(line) or _VERDICT_MARK.search(outcome)):
            return None
        return self.what_if_outcome(outcome)

    def comment_fails(self, text: str, start: int) -> bool:
        """The code line holding ``start`` ends on a comment saying it failed ("# same OOM", "# 还是 OOM")."""
        lo = text.rfind("\n", 0, start) + 1
        hi = text.find("\n", start)
        line = text[lo:hi if hi >= 0 else len(text)]
        hash_at = line.find(" #", start - lo)
        if hash_at < 0:
            return False
        return self.what_if_outcome(line[hash_at + 2:]) == "fails"

    def what_if_outcome(self, outcome: str) -> str:
        """"fails" where the outcome of a simulated option says it fails before it says it fits, else "weighed"."""
        if _FAIL_MARK.search(outcome):
            return "fails"
        fails = [a for a, _ in self.what_if_fails.spans(outcome)]
        fits = [a for a, _ in self.what_if_fits.spans(outcome)]
        return "fails" if fails and (not fits or min(fails) < min(fits)) else "weighed"

    def asks_about_options(self, text: str) -> bool:
        """A line that is one question about the options it names ("## 加 TP 能解决吗？", "**Would recompute
        help?**", "Lowering the micro-batch?"), not one that asks something else ("为什么是第 2 步？")."""
        question = text.strip(" *_#>`")
        if not question.endswith(("?", "\uff1f")) or _last_end(_SENTENCE_END, question, len(question) - 1) > 0:
            return False
        return not self.reply.other_question.match(question) and bool(
            self.asks_if_it_helps.search(question) or len(question) <= _OPTION_QUESTION)

    def reply_verdict(self, reply: str) -> str:
        """What the paragraph after such a question does with the options it named: "recommend" (it opens on yes),
        "avoid" (no), "conditional" (only if ...) or "neutral" ("能缓解，但只是把词表维切成 vocab/TP": weighed, not
        advised)."""
        reply = reply.lstrip(" *_>")
        if self.answered_no_rx.match(reply):
            return "avoid"
        stop = _FULL_STOP.search(reply)
        first = reply[:stop.start() if stop else len(reply)]
        if self.reply.yes.match(first):
            return "recommend"
        if self.reply.no.search(first):
            return "avoid"
        return "conditional" if self.reply.only_if.search(first) else "neutral"

    def against_later_in_sentence(self, text: str, end: int, others: Sequence[tuple[int, int]] = ()) -> bool:
        """A cue later in the mention's sentence argues against it ("X won't help"), or the sentence closes on a
        verdict ("降 micro batch、开重计算都是省激活的，对建模型阶段 OOM 没用。").  A cue that overlaps another fix's
        mention (``others``: "X 调低，不用加卡" - "不用加" is said of 加卡) speaks of that one."""
        nxt = _SENTENCE_END.search(text, end)
        # "X and Y are training-time knobs; they don't run during conversion" (or ". None of them touches host RSS"):
        # the clause or sentence after it that opens on "they" / "none of them" still speaks of what it listed
        while nxt and (nxt.group() in ";\uff1b" and self.anaphora.match(text, nxt.end())
                       or nxt.group() in ".\u3002" and self.anaphora_strict.match(text, nxt.end())):
            nxt = _SENTENCE_END.search(text, nxt.end())
        rest = text[end: nxt.start() if nxt else len(text)]
        cues = [(end + a, end + b) for a, b in self.against_in_sentence.spans(rest)
                # a Chinese verb cue with an object after it ("；别动 micro-batch 和重计算") is said of that object,
                # unless the cue or its object points back ("都不会让…", "先别动它们")
                if not _CJK.match(rest[a]) or rest[a] in "都也" or _CUE_TAIL.match(rest, b)]
        # a cue on, or right before, another fix's mention ("别动 micro-batch") is said of that one
        if any(not any(s < b + _CUE_OBJECT and a < e for s, e in others) for a, b in cues):
            return True
        return bool(self.verdict_at_end.search(rest.rstrip(" 了啊的*_`")))

    def replaced_spans(self, text: str) -> list[tuple[int, int]]:
        """Spans naming what a "replace X with Y" sentence replaces (X)."""
        return [m.span(1) for rx in self.replacement for m in rx.finditer(text)]

    def classify(self, heading: str) -> str:
        """avoid | neutral | recommend | cause | other, first cue family that matches wins (remembered per text: the
        same labels and cells recur across answers)."""
        kind = self.classified.get(heading)
        if kind is None:
            kind = next((k for k in KINDS if self.headings[k].search(heading)), "other")
            if len(self.classified) < _CLASSIFIED_KEPT:
                self.classified[heading] = kind
        return kind


def _replacement_regex(head: str, sep: str) -> re.Pattern[str]:
    """``head X sep``: X (at most 120 characters, one clause) is the replaced thing."""
    word = (lambda w: rf"\b{re.escape(w)}\b") if head.isascii() else re.escape
    return re.compile(rf"{word(head)}(.{{1,120}}?){word(sep)}", re.IGNORECASE)


# an option's own label at the start of a paragraph or item: "Option C –", "方案三：", "B —"
_OPTION = re.compile(r"[\s*_#>]*(?:(?i:option|alternative)\s+[A-F1-9]\b|方案\s*[一二三四五六七八九A-F1-9]"
                     r"|选项\s*[一二三四五六七八九A-F1-9]|[A-F]\s*[.)\uff09\u2013\u2014-])")
# the label of an answer's own call-out in a blockquote
_CALLOUT = re.compile(r"(?i)[\s*_]*(?:tl;?dr|tip|note|summary|recommendation|fix|do this|try this"
                      r"|结论|建议|提示|注意|小结|划重点)[\s*_]*[:\uff1a]")
# GitHub's alert blocks ("> [!TIP]"): what each files its content as - a tip is advice, a caution advice against, a
# note, warning or important block the answer's own prose
_ALERT = re.compile(r"\s*\[!(TIP|NOTE|IMPORTANT|WARNING|CAUTION)\]", re.IGNORECASE)
_ALERT_KINDS = {"TIP": ("recommend", False), "CAUTION": ("avoid", False), "NOTE": ("other", False),
                "IMPORTANT": ("other", False), "WARNING": ("other", False)}
_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.IGNORECASE | re.DOTALL)
_ASIDE_LEVEL = 7  # below every Markdown heading: an alert or a collapsed section ends with its own block
# a line that opens on a rejection mark (cross, ballot x, no-entry signs)
_REJECT_MARK = re.compile(r"[\s*_>]*(?:\u274c|\u2717|\u2718|\U0001f6ab|\u26d4)")
# a checklist item marked done ("✅ --workers 80 --partitions 4", "☑ 已做对照：..."): the run as it is, not advice
_DONE_MARK = re.compile(r"[\s*_>]*(?:\u2705|\u2611\ufe0f?|\u2714\ufe0f?)")
# a verdict cell that makes its row conditional: "only if ...", "采纳（模型大时）", "yes (if PP > 1)"
_ONLY_IF = re.compile(r"(?i)only\s+(?:if|when)\b|仅当|只有在|只有当|只在"
                      r"|[（(][^）)\n]{1,12}时[）)]|\((?:when|if)\b[^)\n]{0,30}\)")
# A task-list item ("- [x] TP4 already on", "- [ ] lower the micro-batch"): a ticked box is what the user already has
# or what is already right, an open one a thing to do
_TASK = re.compile(r"\[([ xX\u2713\u2714])\]\s+")
# A hypothesis label ("H2: activations (ruled out ...)", "假设一：...（可能）") states a possible cause, not advice
_HYPOTHESIS = re.compile(r"\s*[*_]*(?:H\d{1,2}|假设\s*[一二三四五六1-6])[*_]*\s*[:：(（]")
# A ranked option's score out of ten ("(9/10) ...", "①（9/10）…", "（不推荐，1/10）"): a low one ranks it as not worth
# doing
_SCORE = re.compile(r"[\s*_>#\d.\u2460-\u2469]*[(\uff08][^()\uff08\uff09]{0,10}?(\d{1,2})\s*/\s*10\s*[)\uff09]")
_LOW_SCORE = 3
_SPEAKER = re.compile(r"[\s*_>]*@[\w\u4e00-\u9fff .'-]{1,24}[*_]*\s*[:\uff1a]")  # "@alice:", "**@霄**："
_THREAD_TURNS = 2
# a comparison table's first two column heads: the user's run ("You", "你的做法") and the advice ("Me", "我的建议")
_YOURS = re.compile(r"[\s*_]*(?:you|yours|your\s+(?:run|config|setup|change)s?|what\s+you\s+did|current|"
                    r"\u4f60\u7684\u505a\u6cd5|\u4f60\u7684|\u4f60\u505a\u7684|\u5f53\u524d)[*_]*\s*$", re.IGNORECASE)
_MINE = re.compile(r"[\s*_]*(?:me|mine|i'd|what\s+i'd\s+do|my\s+(?:advice|suggestion|pick|change)s?|instead|"
                   r"\u6211\u7684\u5efa\u8bae|\u6211\u7684\u505a\u6cd5|\u5efa\u8bae)[*_]*\s*$", re.IGNORECASE)
# "So:", "所以：" after an account; "Pick:", "选：" (or a heading "选") after options weighed one by one
# ... and "Do:" / "要做的：" closing a list of what not to do
_SO = re.compile(r"[\s*_>#]*(?:so|(?:my\s+)?pick|do|verdict|\u6240\u4ee5|\u6211?\u9009(?:\u62e9)?|"
                 r"\u8981\u505a\u7684)[*_]*\s*(?:[:\uff1a]|$)", re.IGNORECASE)
# a review's closing summary ("Request changes: ...", "需要修改：..."): the change it asks for first, beside the
# comments above it, which stay advice
_REVIEW_SUMMARY = re.compile(r"[\s*_>#]*(?:request(?:ing)?\s+changes|\u9700\u8981\u4fee\u6539)[*_]*\s*"
                             r"[:\uff1a\u2013\u2014-]", re.IGNORECASE)
# "You are on: ..." / "你在这条分支：..." closing a decision tree: the branch the user is on, its leaf last
_YOU_ARE_ON = re.compile(r"[\s*_>#]*(?:you(?:'re|\s+are)\s+on(?:\s+(?:this|the|that)\s+branch)?|"
                         r"\u4f60\u5728\u8fd9\u6761\u5206\u652f)[*_]*\s*[:\uff1a]", re.IGNORECASE)
# a decision tree's branch ("├─ yes → ...", "│   └─ 否 → ..."), and how many make a block a tree
_TREE_BRANCH = re.compile(r"^[\s\u2502|]*[\u251c\u2514]\u2500", re.MULTILINE)
_TREE_BRANCHES = 2


def _is_tree(block: str) -> bool:
    """A decision tree of situations: branches drawn with box characters under a root that asks a question."""
    root = next((line.strip() for line in block.splitlines() if line.strip()), "")
    return root.endswith(("?", "\uff1f")) and len(_TREE_BRANCH.findall(block)) >= _TREE_BRANCHES


# "You are on: actor step → ZeRO-3 already → checkpointing on → lower the micro-batch": the path's last step is the
# leaf; the steps before it restate the user's situation
_PATH_STEP = re.compile(r"\s(?:\u2192|->|=>)\s")
# "User:", "用户：", "提问者：" opening a turn of a pasted exchange
# a user's turn that reports the advice carried out: "User: Done.", "User: Ran it - ...", "用户：跑了，结果…",
# "用户：看了，是 training_step 的 backward" (looked: the check was done)
_DONE_REPORT = re.compile(r"[\s*_>]*(?:user|human|\u7528\u6237|\u63d0\u95ee\u8005)[*_]*\s*[:\uff1a]\s*[*_]*(?:"
                          r"(?:done|did (?:it|that|so)|i did|ran it|i ran|(?:ok|okay),? (?:i )?(?:ran|did|tried)|"
                          r"checked|looked|confirmed|measured it|logged it|"
                          r"tried (?:it|that)|here(?:'s| is| are) the (?:result|output|number)s?|results?:)\b|"
                          r"\u597d\u4e86|\u505a\u4e86|\u8dd1\u4e86|\u8bd5\u4e86|\u52a0\u4e86|\u6253\u4e86|"
                          r"\u770b\u4e86|\u67e5\u4e86|\u8bb0\u4e86|\u786e\u8ba4\u4e86|\u6d4b\u4e86|"
                          r"\u7167\u505a|\u5df2\u7ecf(?:\u6309|\u7167|\u52a0|\u8dd1|\u8bd5|\u6253|\u6539)|"
                          r"\u7ed3\u679c)", re.IGNORECASE)
_USER_TURN = re.compile(r"[\s*_>]*(?:user|human|\u7528\u6237|\u63d0\u95ee\u8005)[*_]*\s*[:\uff1a]", re.IGNORECASE)
_STRUCK = re.compile(r"~~.+?~~", re.DOTALL)  # struck-through text (_inline_text keeps the markers)
_BUT = re.compile(r"(?i)\bbut\b|\bhowever\b|但是?|不过")  # a contrast: what follows it is not what preceded it
_NEAR = 24  # characters after an "instead of" in which a mention is what it argues against


_VALUE_AFTER = re.compile(r"[`'\"]*\s*[:=]\s*[\w.'\"`-]+")  # ":True", "=1", "='full'" right after a setting's name


def _last_end(rx: re.Pattern[str], text: str, pos: int) -> int:
    """Where the last ``rx`` match before ``pos`` ends (0: none).  Searched one character past ``pos`` so that a
    lookahead for a space or the end does not take the window's edge for the text's end ("megatron.param_offload"
    has no clause end before "param_offload")."""
    return max((m.end() for m in rx.finditer(text, 0, pos + 1) if m.end() <= pos), default=0)


def negated(
    text: str,
    start: int,
    end: int,
    before: CueSet,
    after: CueSet,
    exceptions: CueSet | None = None,
    clause_end: re.Pattern[str] = _CLAUSE_END,
    double: CueSet | None = None,
    near: CueSet | None = None,
) -> bool:
    """True when the clause around ``text[start:end]`` argues against it.  A ``near`` cue ("instead of", "rather
    than") argues only against what follows it closely: "size micro-batches by tokens instead of samples: `X` plus
    `Y` with `Z`" argues against samples, not against X, Y or Z."""
    lo = _last_end(clause_end, text, start)
    nxt = clause_end.search(text, end)
    hi = nxt.start() if nxt else len(text)
    head = text[lo:start]
    if exceptions:
        for a, b in exceptions.spans(head):
            head = head[:a] + " " * (b - a) + head[b:]
    if before.search(head):
        return True
    # "no memory knobs (expandable_segments, smaller micro-batch, more GPUs)": a list under a noun that "no" denies
    opened = max(text.rfind("(", 0, start), text.rfind("\uff08", 0, start))
    if opened >= 0 and not re.search(r"[)\uff09]", text[opened:start]) \
            and _NO_NOUN.search(text[_last_end(clause_end, text, opened):opened]):
        return True
    if near and any(len(head) - b <= _NEAR for _, b in near.spans(head)):
        return True
    if after.search(text[end:hi]) and not (double and double.search(head)):
        return True
    return _listed_under_negation(text, lo, hi, before, exceptions, clause_end)


_NO_NOUN = re.compile(r"(?i)\bno\s+[a-z][\w-]*(?:\s+[a-z][\w-]*)?\s*$")  # "no memory knobs " before a list
_LIST_OR = re.compile(r"\b(?:or|nor)\b|或者?|和|也不", re.IGNORECASE)
_LIST_TURN = re.compile(r"^\W*(?:but|instead|rather|then|so|use|do|try|而是|改|换|先|再|但|可以|应该)", re.IGNORECASE)


def _listed_under_negation(text: str, lo: int, hi: int, before: CueSet, exceptions: CueSet | None,
                           clause_end: re.Pattern[str]) -> bool:
    """"Don't lower the micro-batch, add full recompute or add GPUs": a clause that continues a sentence opened by
    a "don't" and closes its list with "or" is one more thing not to do.  Without the "or" ("don't lower it, add
    recompute") the later clause is the advice, so it stays a recommendation."""
    start = max((m.end() for m in _SENTENCE_END.finditer(text, 0, lo)), default=0)
    if start >= lo or _LIST_TURN.search(text[lo:hi]) or not _LIST_OR.search(text[lo:hi]):
        return False
    first_end = clause_end.search(text, start)
    head = text[start:first_end.start() if first_end else lo]
    if exceptions:
        for a, b in exceptions.spans(head):
            head = head[:a] + " " * (b - a) + head[b:]
    return bool(before.search(head))


@dataclass
class _Unit:
    text: str
    kind: str
    olist: int | None  # the outermost recommendation ordered list this unit sits in
    primary: bool = False  # under a "do this first" heading or label, or the block such a label leads
    code: bool = False  # a fenced or indented code block: settings as the user would paste them
    addon: bool = False  # an add-on to the plan ("while you're at it"), or the block such a paragraph leads
    leads_code: bool = False  # the short paragraph ending in ':' that introduces a code block ("TP 从 1 提到 2：")
    diff: bool = False  # a unified diff: its context lines restate the user's script
    filed: bool = False  # kind and primary set by the report's own structure (a linter finding), not by its label
    own: int | None = None  # a code block's own length: what follows is derived ("lower KEY", "a.b=1" lines)
    done: bool = False  # in a pasted chat, advice the user then reports having carried out: no longer first

    def on_context_line(self, pos: int) -> bool:
        """In a diff, the line holding ``pos`` is context (" --offload-train \\"): it restates, it does not change."""
        return self.diff and self.text[self.text.rfind("\n", 0, pos) + 1:][:1] == " "

    def on_removed_line(self, pos: int) -> bool:
        """In a diff, the line holding ``pos`` is taken out ('-    cfg.model.recompute_granularity = "selective"'
        above its '+' replacement): the patch drops what it names, it does not advise it."""
        line = self.text[self.text.rfind("\n", 0, pos) + 1:]
        return self.diff and line[:1] == "-" and not line.startswith("---")


# a line that opens on a short lower-case label and a colon ("fix: add --adam_offload", "ignore: ...", "修复: ...") is
# a field of its own, however long the line before it: a linter finding's or a form's lines are not wrapped prose
_FIELD_OPENING = re.compile(r"(?:[a-z][a-z ]{1,14}|[\u4e00-\u9fff]{2,4})[:\uff1a]\s")
_WRAPPED_LINE = 24  # a line longer than a label (_LINE_LABEL) that ends mid-sentence was wrapped, not ended


def _inline_text(token: Any) -> str:
    """A paragraph's text.  A soft break inside a sentence is a space: writers wrap long lines ("调小 micro batch
    或者开 / full recompute 都没用" is one clause); after a short line (a label) or a sentence's end it stays a line
    break, which ends a clause."""
    parts: list[str] = []
    children = token.children or []
    for index, child in enumerate(children):
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type == "softbreak":
            line = "".join(parts).rsplit("\n", 1)[-1].rstrip()
            after = children[index + 1].content if index + 1 < len(children) else ""
            # a line that opens on its own rank ("⑤（不推荐，1/10）…") starts a new item, however long the one before
            wrapped = len(line) > _WRAPPED_LINE and not _SENTENCE_END.match(line[-1:] or ".") \
                and not _SCORE.match(after) and not _FIELD_OPENING.match(after)
            parts.append(" " if wrapped else "\n")
        elif child.type == "hardbreak":
            parts.append("\n")
        elif child.type in ("s_open", "s_close"):
            parts.append("~~")  # struck-through text stays marked: the answer has withdrawn that advice
    return "".join(parts) if parts else token.content


_SPOKEN_MIN = 120  # characters of a Chinese paragraph without one punctuation mark that is speech, not a label
_PUNCTUATION = re.compile(r"[\uff0c\u3002\uff1b\uff01\uff1f\u3001\uff1a;!?]|[.,:](?=\s|$)")  # not "Qwen2.5"
_CJK_GAP = re.compile(r"(?<=[\u4e00-\u9fff])[ \t]+(?=[\u4e00-\u9fff])")


def _spoken(text: str) -> str:
    """Speech-to-text Chinese ("嗯 不是权重也不是优化器 更不是泄漏 然后呢 第一步先把 ...") has no punctuation: the
    pause between two Chinese words is where a writer would end a sentence, so it bounds a negation and a verdict
    there.  Text with any punctuation mark, or too short to be speech, is left as it is."""
    if len(text) < _SPOKEN_MIN or not _CJK.search(text) or _PUNCTUATION.search(text):
        return text
    return _CJK_GAP.sub("\u3002", text)


def _is_lead(text: str, raw: str) -> bool:
    """A short paragraph that introduces the list right after it ("**Avoid:**", "Try, in order:")."""
    stripped = text.strip()
    return 0 < len(stripped) <= 100 and (stripped.endswith((":", "：")) or raw.strip().startswith(("**", "__")))


# A symbol-marked answer ("+ MBS 2 -> 1", "- expandable_segments (not frag)", "? which rank dies first", "~ CP2 only if
# seq grows", "= recompute already full", "! slower", "# the cause"): each line's sign files it.  Markdown would read
# "+" and "-" as the same bullet and "#" as a heading, so such an answer is read line by line.
_SIGN = re.compile(r"([+\-?~=!#])[ \t]+(?=\S)")
_SIGN_KINDS = {"+": "recommend", "?": "recommend", "-": "avoid", "~": "conditional", "=": "neutral", "!": "neutral",
               "#": "cause"}
_FENCE = re.compile(r"\s*(```|~~~)")


def _signed(markdown: str) -> bool:
    """An answer written in signs: a "+" line beside a line signed with one of = ~ ? ! (never Markdown's own)."""
    signs = {m.group(1) for line in markdown.splitlines() if (m := _SIGN.match(line))}
    return "+" in signs and bool(signs & {"=", "~", "?", "!"})


def _signed_units(markdown: str, grading: Grading) -> list[_Unit]:
    units: list[_Unit] = []
    kind, primary, fence, code = "other", False, None, []
    for line in markdown.splitlines():
        if fence is not None:
            if line.strip().startswith(fence):
                units.append(_Unit("\n".join(code) + "\n", kind, None, primary, code=True))
                fence, code = None, []
            else:
                code.append(line)
            continue
        opened = _FENCE.match(line)
        if opened:
            fence = opened.group(1)
            continue
        sign = _SIGN.match(line)
        if sign:
            text = line[sign.end():]
            kind = _SIGN_KINDS[sign.group(1)]
            primary = kind == "recommend" and bool(grading.order.first_action.match(text))
            units.append(_Unit(text, kind, None, primary))
        elif line.strip() and units and not units[-1].code:
            units[-1].text += " " + line.strip()  # a wrapped line goes on with the line it continues
        elif line.strip():
            units.append(_Unit(line.strip(), "other", None, False))
    return units


_MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])  # one parser, built once


def _units(markdown: str, grading: Grading) -> list[_Unit]:
    if _signed(markdown):
        return _signed_units(markdown, grading)
    tokens = _MARKDOWN.parse(markdown)
    units: list[_Unit] = []
    headings: list[tuple[int, str, bool]] = []  # (level, effective kind, primary)
    lists: list[tuple[str, int | None, bool, bool]] = []  # (kind, recommendation ordered-list id, primary, add-on)
    next_olist = 0
    row: list[str] | None = None
    header: list[str] | None = None  # the current table's first row
    last_para: tuple[int, str, str] | None = None  # (closing token index, text, raw)
    table_start = 0  # the index of the current table's first row among the units
    quoted: list[bool] = []  # open blockquotes: True where the quote is someone else's words, not this answer's advice
    alerts: list[bool] = []  # open blockquotes: True where it is a GitHub alert that filed a section

    def section() -> tuple[str, bool]:
        if lists:
            return lists[-1][0], lists[-1][2]
        return (headings[-1][1], headings[-1][2]) if headings else ("other", False)

    def olist() -> int | None:
        return lists[-1][1] if lists else None

    def lead() -> tuple[str, bool] | None:
        """The kind a paragraph ending in ':' just before this block gives it ("Fix:", "改法：", "Avoid:")."""
        if last_para and last_para[0] == i - 1 and _is_lead(last_para[1], last_para[2]):
            label = _LABEL.match(last_para[1])
            # no label: the opening clause speaks for the block ("打开融合的 CE，避免多份拷贝：" is advice for it;
            # "避免" there is a purpose clause)
            text = label.group(1) if label else _main_clause(last_para[1])
            # "与其关掉 X，不如补上 Y：" (rather than X, Y): the block is Y
            rather = _RATHER.search(last_para[1])
            if rather and not label:
                text = last_para[1][rather.end():]
            kind = grading.classify(text)
            # "先不要改配置，先搞清楚是哪个进程在涨：": the "not yet" is about another change; the clause that opens on
            # "first" and leads the block is what the block does
            last = re.split(r"[,，;；。]", last_para[1].rstrip(" :：\n"))[-1].strip(" *_")
            if not label and kind == "avoid" and last != text and grading.order.first_action.match(last):
                text, kind = last, "recommend"
            short = len(text.strip(" *_")) <= _MAX_ACTION_LABEL or not label
            return kind, kind == "recommend" and short and bool(grading.is_primary(text))
        return None

    def led_by_addon() -> bool:
        """The paragraph just before this block opens as an add-on ("While you're at it, I'd also run ...")."""
        return bool(last_para and last_para[0] == i - 1 and grading.is_addon(last_para[1]))

    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            level = int(tok.tag[1:])
            text = _inline_text(tokens[i + 1])
            while headings and headings[-1][0] >= level:
                headings.pop()
            # "### Do first - confirm what the ranks got": the label names the section, the rest is its first action
            label = _LABEL.match(text)
            head = label.group(1) if label else text
            kind = grading.classify(head)
            primary = bool(grading.is_primary(head))
            if grading.asks_about_options(head):
                # "## 加 TP 能解决吗？": a question the answer asks itself files nothing by its words ("解决"); the
                # paragraph under it answers it (`_answer_questions`)
                kind, primary = "other", False
            # "1. Confirm what the ranks see (do this first)"
            if kind == "neutral" and grading.order.do_first.search(head):
                kind, primary = "recommend", True
            if kind == "other" and headings:
                kind, primary = headings[-1][1], headings[-1][2]
            headings.append((level, kind, primary))
            units.append(_Unit(text, kind, None, primary))
        elif tok.type in ("bullet_list_open", "ordered_list_open"):
            kind, primary = section()
            addon = led_by_addon()
            led = lead()
            if led and led[0] != "other":
                kind, primary = led
            ident = olist()
            # a numbered list at the top of an answer that no heading or lead files elsewhere is its plan
            if tok.type == "ordered_list_open" and kind == "other" and not lists and not headings and not led:
                kind = "recommend"
            if ident is None and tok.type == "ordered_list_open" and kind == "recommend":
                ident, next_olist = next_olist, next_olist + 1
            lists.append((kind, ident, primary, addon or (lists[-1][3] if lists else False)))
        elif tok.type in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
        elif tok.type == "blockquote_open":
            # the answer's own call-out ("> **TL;DR:** lower the micro-batch") is advice; any other quote is someone
            # else's words: a comment, a log line, a helper's output
            first = next((t for t in tokens[i + 1:] if t.type == "inline"), None)
            alert = _ALERT.match(first.content) if first is not None else None
            quoted.append(not (first is not None and (alert or _CALLOUT.match(first.content))))
            # a GitHub alert ("> [!TIP]", "> [!CAUTION]") files its block as a heading files its section
            alerts.append(bool(alert))
            if alert:
                headings.append((_ASIDE_LEVEL, *_ALERT_KINDS[alert.group(1).upper()]))
        elif tok.type == "blockquote_close":
            quoted.pop()
            if alerts.pop() and headings and headings[-1][0] == _ASIDE_LEVEL:
                headings.pop()
        elif tok.type == "html_block" and _SUMMARY.search(tok.content):
            # "<details><summary>Why this happens</summary>": the collapsed section is filed by its summary
            summary = _SUMMARY.search(tok.content).group(1)
            headings.append((_ASIDE_LEVEL, grading.classify(summary), bool(grading.is_primary(summary))))
        elif tok.type == "html_block" and "</details>" in tok.content:
            if headings and headings[-1][0] == _ASIDE_LEVEL:
                headings.pop()
        elif tok.type == "table_open":
            header = None
            table_start = len(units)
        elif tok.type == "table_close":
            _point_here(units[table_start:], header or [], grading)
        elif tok.type == "tr_open":
            row = []
        elif tok.type == "tr_close" and row is not None:
            kind, ident, primary = section_olist(section(), olist())
            # a verdict column: "❌ 别这么做", "I wouldn't" last, or a short status cell after the option's own
            # ("Lower micro-batch | Rejected | no forward pass runs"): the row is advice against its option
            if header is None:
                header = row
            # "| You | Me | Why |" (你的做法 | 我的建议): the first column restates the user's run, the second advises
            comparison = len(header) >= 2 and bool(_YOURS.match(header[0]) and _MINE.match(header[1]))
            status = [cell for cell in row[1:] if len(cell.strip(" *_`")) <= _STATUS_CELL]
            # a keep / change cell may carry its new value or a note ("change → true (SkyRL with PR #1768)")
            heads = [head for head in (_STATUS_HEAD.split(cell, 1)[0] for cell in row[1:])
                     if len(head.strip(" *_`")) <= _STATUS_CELL]
            if len(row) > 1 and (grading.classify(row[-1]) == "avoid" or _VERDICT_NO.match(row[-1])
                                 or any(grading.classify(cell) == "avoid" for cell in status)):
                kind, primary = "avoid", False
            elif any(grading.kept_status.search(cell.strip(" *_`")) for cell in heads):
                kind, primary = "neutral", False  # "optimizer_cpu_offload | false | keep | it fit at step 1"
            elif any(_ONLY_IF.search(cell.strip(" *_`")) for cell in status):
                kind, primary = "conditional", False  # "raise rollout TP | ... | only if step 1 does not fit"
            elif kind in ("recommend", "other") and any(grading.chosen.search(cell) for cell in status):
                # "ppo_micro_batch_size_per_gpu=1 | Chosen": the options table says which comes first, before the
                # block that writes them all at once
                kind, primary = "recommend", True
            elif kind == "other" and any(grading.changed_status.search(cell.strip(" *_`")) for cell in heads):
                kind = "recommend"  # "micro batch size | 4 | 修改 → 1 | ...": the review changes this row
            elif kind == "other" and all(grading.classify(cell) == "other" for cell in [*header, *row]) \
                    and not comparison:
                # a table no heading files and whose columns name no advice ("what you think it saves | what it
                # does") compares or describes: it recommends nothing
                kind = "neutral"
            if grading.opens_what_if(header[0]):
                # "| 如果你…… | 峰值 | 能不能放下 | 代价 |": each row an option weighed, against where its outcome fails
                fails = row is not header and grading.what_if_outcome(" — ".join(row[1:])) == "fails"
                kind, primary = "avoid" if fails else "neutral", False
            cells = row
            if comparison:
                if row is header:
                    row = None
                    continue
                cells = row[1:]
                if kind == "other":
                    kind = "recommend"
            units.append(_Unit(" — ".join(cells), kind, ident, primary))
            row = None
        elif tok.type == "inline":
            prev = tokens[i - 1].type if i else ""
            if prev == "heading_open":
                continue
            text = _inline_text(tok)
            alert = _ALERT.match(text)
            if alert:
                text = text[alert.end():].lstrip()
            if row is not None:
                row.append(text)
            else:
                kind, ident, primary = section_olist(section(), olist())
                task = _TASK.match(text) if lists and prev == "paragraph_open" else None
                if task:
                    text = text[task.end():]
                    if task.group(1) != " ":
                        kind, primary = "neutral", False  # "[x] micro_batch_size: 1" is what the run already has
                    elif kind == "other":
                        kind = "recommend"
                if _HYPOTHESIS.match(text):
                    kind, primary = "cause", False
                if any(quoted):
                    kind, primary = "neutral", False
                text = _spoken(text)
                # a block of "Field: value" lines (a triage bot's "Suggested action: ..." / "Not recommended: ...")
                # is one unit per field, so each field's label files its own line
                for part in _field_lines(text):
                    units.append(_Unit(part, kind, ident, primary,
                                       addon=bool(lists and lists[-1][3]) or bool(grading.is_addon(part))))
                if prev == "paragraph_open":
                    last_para = (i + 1, text, tok.content)
        elif tok.type in ("fence", "code_block"):
            kind, primary = section()
            led = lead()
            if last_para and last_para[0] == i - 1 and units and units[-1].text == last_para[1]:
                units[-1].leads_code = True
            if led and led[0] != "other":
                kind, primary = led
            # a decision tree drawn in the block, rooted in a question ("OOM 出现在哪个阶段？" then "├─ ... → ...",
            # "└─ 否 → ..."), maps situations: the line that says which leaf applies advises, not its branches (a
            # block that opens on a command and branches on its outcome is a plan: it keeps its kind)
            if any(quoted):
                kind, primary = "neutral", False
            addon = led_by_addon() or bool(lists and lists[-1][3])
            if _is_tree(tok.content):
                # its root question is what to look at first ("Which rank died first, and with what?"); its branches
                # are situations, most of them not the user's
                root, _, branches = tok.content.strip().partition("\n")
                units.append(_Unit(root, kind, olist(), primary, addon=addon))
                units.append(_Unit(branches, "neutral", olist(), False, code=True))
                continue
            fields = _structured_fields(tok.content, grading)
            if fields:
                # an agent's machine-readable answer ({"actions": [...], "do_not": [...]}): each value under the key
                # that files it, read as prose under that label
                for label, value in fields:
                    units.append(_Unit(f"{label}: {value}", "neutral" if any(quoted) else kind, olist(), False,
                                       addon=addon))
                continue
            # a comment that labels the lines after it ("# not this - ...", "# cell 3 —— 不要：", "# step 1: ...")
            # files them as a heading files its section
            for label, part in _comment_sections(tok.content, grading):
                part_kind, part_primary = (kind, primary) if label is None else label
                if any(quoted):
                    part_kind, part_primary = "neutral", False
                units.append(_Unit(part + _lowered(part), part_kind, olist(), part_primary, code=True, own=len(part),
                                   diff=_is_diff(tok.info, tok.content), addon=addon))
    # a pasted chat thread ("@alice: try X", "@bob: no, Y first", ..., "Consensus: ..."): each speaker's turn is
    # discussion; what the thread tells the user is its consensus line
    # ("@你：do X" twice addresses the reader: a thread has several speakers)
    # an account told first, then "So: ..." / "所以：...": what came before is the story of the run (the settings it
    # has, what was tried), the advice starts at the "So:"
    conclusion = next((i for i, u in enumerate(units) if not u.code and _SO.match(u.text)), None)
    if conclusion:
        for unit in units[:conclusion]:
            if unit.kind == "other" and not unit.code:
                unit.kind = "neutral"
        if units[conclusion].kind == "other":
            units[conclusion].kind, units[conclusion].primary = "recommend", True
    summary = next((i for i, u in enumerate(units)
                    if not u.code and u.kind == "other" and _REVIEW_SUMMARY.match(u.text)), None)
    if summary is not None:
        units[summary].kind, units[summary].primary = "recommend", True
    # a decision tree's closing "You are on: A -> B -> do C": the steps before the last restate where the user is;
    # the last is the leaf, advice beside what the answer already said
    on = next((i for i, u in enumerate(units) if not u.code and u.kind == "other" and _YOU_ARE_ON.match(u.text)), None)
    if on is not None:
        path = units[on]
        steps = list(_PATH_STEP.finditer(path.text))
        leaf = path.text[steps[-1].end():] if steps else path.text
        units[on:on + 1] = [*([replace(path, text=path.text[:steps[-1].start()], kind="neutral")] if steps else []),
                            replace(path, text=leaf, kind="recommend")]
    # a pasted exchange with the user ("**User:** I already set expandable_segments", "用户：..."): the user's turns
    # restate the run or ask; only the agent's turns advise
    for unit in units:
        if not unit.code and _USER_TURN.match(unit.text):
            unit.kind, unit.primary = "neutral", False
    # "User: Done. Allocated is flat; reserved climbs.": what the agent advised before that turn has been carried
    # out, so the final advice - the first thing still to do - is what comes after it
    reported = [i for i, u in enumerate(units) if not u.code and _DONE_REPORT.match(u.text)]
    for unit in units[:reported[-1] if reported else 0]:
        unit.done = True
    turns = [u for u in units if not u.code and _SPEAKER.match(u.text)]
    if len({_SPEAKER.match(u.text).group().strip(" *_>:\uff1a") for u in turns}) >= _THREAD_TURNS:
        for unit in turns:
            unit.kind, unit.primary = "neutral", False
    for unit in units:
        derived = "" if unit.code else _arrow_lowered(unit.text)
        if derived:
            unit.own, unit.text = len(unit.text), unit.text + derived
    return units


# a value changed in prose, as a changelog or a review writes it: "`micro_train_batch_size_per_gpu` `2` -> `1`",
# "policy.train_micro_batch_size: 4 → 2"
_VALUE_ARROW = re.compile(r"`?([A-Za-z_][\w.-]*\w)`?\s*[:\uff1a=]?\s*`?(\d+(?:\.\d+)?)`?\s*"
                          r"(?:->|=>|\u2192|\u21d2|\u27f6)\s*`?(\d+(?:\.\d+)?)(?![\w.])")


def _arrow_lowered(text: str) -> str:
    """A sentence that lowers a number with an arrow says so in words, as ``_lowered`` does for a block: "lower KEY"
    lines after the text, which ``_anchor`` places where KEY is written."""
    keys = [m.group(1) for m in _VALUE_ARROW.finditer(text) if float(m.group(3)) < float(m.group(2))]
    return "".join(f"\nlower {key}" for key in dict.fromkeys(keys))


# a verdict cell that opens on a bare no ("no - would not help", "**No** — nothing was allocated", "否：...")
_VERDICT_NO = re.compile(r"[\s*_`]*(?:no|nope|否)[*_`]*\s*(?:[-\u2013\u2014:;,(\uff1a\uff08]|$)", re.IGNORECASE)
_FINDING_COUNTS = re.compile(r"(?i)\d+\s*(?:errors?|warnings?|错误|警告)")  # "Summary: 1 error, 2 warnings"


def _file_findings(units: list[_Unit], grading: Grading, fixes: Recognizer) -> None:
    """A linter-style report (grading.yaml `findings`) files its lines by finding, in place: a finding's first line
    states a problem (a cause, not advice); its "fix:" lines advise, for its first line's setting too where they
    name none themselves ("W102 警告: vllm_gpu_memory_utilization=0.3 仍然偏大 / 建议: 降到 0.2"); an "ignore:" line
    argues against what the finding names; a finding opened "(only if ...)" offers its fix for that case only; and
    the summary's "apply E101's fix first" makes E101's fix the first thing to do.  Two findings make a report."""
    heads = [i for i, u in enumerate(units) if not u.code and grading.finding_head.match(u.text)]
    if len(heads) < 2:
        return
    codes = {grading.finding_head.match(units[i].text).group(1) for i in heads}
    ends = heads[1:] + [next((j for j in range(heads[-1] + 1, len(units))
                              if _FINDING_COUNTS.search(units[j].text)
                              or any(c in units[j].text for c in codes)), len(units))]
    first = None
    for unit in units[ends[-1]:] + units[:heads[0]]:
        cues = [a for a, _ in grading.primary.spans(unit.text)]
        named = [(m.start(), m.group()) for m in re.finditer(r"[A-Z]{1,3}\d{2,4}", unit.text) if m.group() in codes]
        if cues and named:
            first = min(named, key=lambda n: min(abs(n[0] - c) for c in cues))[1]
    for start, end in zip(heads, ends, strict=True):
        head = units[start]
        match = grading.finding_head.match(head.text)
        only_if = bool(_ONLY_IF.search(head.text[:match.end() + 40]))
        head.kind, head.primary, head.filed = "cause", False, True
        for unit in units[start + 1:end]:
            label = _LABEL.match(unit.text)
            name = label.group(1).strip(" *_`") if label else unit.text.strip(" *_`.。")
            unit.filed, unit.primary = True, False
            if grading.finding_drop.search(name):
                unit.kind = head.kind = "avoid"
            elif label and grading.finding_act.search(name):
                unit.kind = "conditional" if only_if else "recommend"
                unit.primary = not only_if and match.group(1) == first
                if head.kind == "cause" and not list(fixes.find(unit.text[label.end():])):
                    head.kind, head.primary = unit.kind, unit.primary
            else:
                unit.kind = "cause"


def _anchor(text: str, own: int, start: int, end: int) -> int:
    """Where a match stands in its block: its own place, or for a match on a derived "lower KEY" line after the
    block, the first place the block writes KEY."""
    line = text[text.rfind("\n", 0, start) + 1:end]
    if start < own or not line.startswith("lower "):
        return start  # a nested key spelled out ("model.x=8") restates the block: it keeps its place after it
    keys = re.findall(r"[A-Za-z_]\w{3,}", text[start:end])
    place = text.find(keys[-1], 0, own) if keys else -1
    return place if place >= 0 else start


# a transcript's command line that only reads ("$ nvidia-smi ...", "$ grep ... train.log"): a check that was run
_READ_ONLY_PROMPT = re.compile(r"[ \t]*\$ +(?:sudo +)?(?:nvidia-smi|grep|egrep|rg|cat|tail|head|less|dmesg|ps|free|ls|"
                               r"watch|awk|sed -n|journalctl|du|df|env|printenv|pip (?:show|list)|python3? -c)\b")
_CLOSED_ASIDE = re.compile(r"[(\uff08][^()\uff08\uff09]*[)\uff09]")
_CLASSIFIED_KEPT = 65536  # labels and cells whose kind a Grading remembers
def _trailing_label(text: str, end: int, grading: Grading) -> str | None:
    """The label a comment at the end of the mention's line gives that line ("x = 1  # KEEP", "# 保持", "# DO NOT
    lower this", "# CHECK: ..."): "keep" (restated or checked as it is), "avoid", or None (no such label)."""
    hi = text.find("\n", end)
    line = text[end:hi if hi >= 0 else len(text)]
    hash_at = line.find("#")
    if hash_at < 0 or (hash_at and not line[hash_at - 1].isspace()):
        return None
    body = line[hash_at + 1:].strip(" *_")
    lead = _COMMENT_LABEL.match(body)
    head = (lead.group(1) or lead.group(2)) if lead else body[:_TRAILING_HEAD]
    if _KEEP_LABEL.match(head) or _CHECK_LABEL.match(head):
        return "keep"  # "# KEEP", "# keep it", "# 保持（加节点时）" - not "# keep GBS", which keeps another setting
    return "avoid" if grading.classify(head) == "avoid" else None


_KEEP_LABEL = re.compile(r"(?i)\s*(?:keep(?:\s+(?:it|this|as\s+is))?|as\s+is|unchanged|no\s+change|"
                         r"\u4fdd\u6301|\u4fdd\u7559|\u4e0d\u53d8|\u4e0d\u6539)\s*(?:[(\uff08].*)?$")
_TRAILING_HEAD = 16  # characters of a trailing comment read as its label when it has no colon
_CHECK_LABEL = re.compile(r"(?i)\s*(?:check|verify|\u5148?\u786e\u8ba4|\u68c0\u67e5)\b")
_MARK_REACH = 24  # characters after a mention in which a cross strikes it ("TP↑8 ✗", "rollback to 3.10.3 ✗")


def _marked_off(text: str, end: int, found: Sequence[Any]) -> bool:
    """A cross (✗ ✘ ❌) follows the mention on its line, before any other option it names: the option is struck."""
    stop = min([text.find("\n", end) % (len(text) + 1), end + _MARK_REACH,
                *(o.start for o in found if o.start >= end)])
    return bool(_FAIL_MARK.search(text, end, stop))


# a multiple-choice option: "A. ...", "(B) ...", "C、..." at the start of a line (or "(B) " inside one)
_LETTER = r"[(\uff08]?([A-F])[)\uff09.\uff0e\u3001:\uff1a][ \t]+(?=\S)"
# an option named as one ("**Option A: keep defaults**", "Option B — full recompute", "方案 A：..."), as a comparison
# weighs them
_NAMED_OPTION = (r"(?:(?i:option|alternative)\s+|\u65b9\u6848\s*|\u9009\u9879\s*)([A-F])"
                 r"(?:[)\uff09.\uff0e\u3001:\uff1a]|\s*[\u2013\u2014-])")
_QUIZ_OPTION = re.compile(rf"(?:^|\n)[ \t*_>]*(?:{_LETTER}|{_NAMED_OPTION}[ \t*_]*(?=\S))"
                          r"|(?<=\s)\(([A-F])\)[ \t]+(?=\S)")
# its answer key: "Answer: B", "**答案：A、C**", "Correct answer - (C)"
# ...or a comparison's verdict: "**Verdict: B.**", "Verdict: A as the one-flag fix", "结论：先用 A"
_QUIZ_KEY = re.compile(r"(?i)[\s*_>#]*(?:correct\s+)?"
                       r"(?:answer|verdict|\u6b63\u786e\u7b54\u6848|\u7b54\u6848|\u7ed3\u8bba)[*_]*\s*"
                       r"[:\uff1a\u2013\u2014-]\s*[*_]*(?:(?:go\s+with|pick|choose|take|\u5148\u7528|\u9009|\u7528)\s*)?"
                       r"(?:(?:option|\u65b9\u6848)\s*)?[(\uff08]?"
                       r"([A-F](?:\s*(?:,|\uff0c|\u3001|and|\u548c|\+|&|/)\s*[A-F])*)(?![A-Za-z])")
_QUIZ_INLINE = re.compile(rf"(?:^|(?<=\s)){_LETTER}")
_ALL_ABOVE = re.compile(r"(?i)\ball\s+of\s+the\s+above\b|\u4ee5\u4e0a(?:\u90fd|\u5168\u90e8|\u5747)")
_QUIZ_WHY_NOT = re.compile(r"(?i)[\s*_>]*(?:why\s+not|not|\u4e3a\u4ec0\u4e48\u4e0d\u9009?|\u4e0d\u9009)\s*"
                           r"[(\uff08]?[A-F](?![A-Za-z])")


def _read_quiz(units: list[_Unit]) -> list[_Unit]:
    """A multiple-choice quiz the answer sets itself ("Which first? A. ... B. ... Answer: B"): the options are the
    choices, the answer key advises.  Each chosen option is advice (the first key's, the first thing to do), every
    other option is argued against, and the questions and the "Not B: ..." lines weigh them.
    Needs two options and a key; options written on one line or one paragraph are read one by one."""
    split: list[_Unit] = []
    for unit in units:
        starts = [] if unit.code else [m.start() for m in _QUIZ_OPTION.finditer(unit.text)]
        if starts[:1] == [0]:
            # a paragraph of options, its lines joined: "A. 减小 micro batch B. 先确认 memory saver 真的打开了"
            starts = [m.start() for m in _QUIZ_INLINE.finditer(unit.text)]
        if len(starts) < 2:
            split.append(unit)
            continue
        bounds = ([0] if starts[0] > 0 else []) + starts + [len(unit.text)]
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            if unit.text[lo:hi].strip():
                split.append(replace(unit, text=unit.text[lo:hi].strip()))
    option = [None if u.code else _QUIZ_OPTION.match(u.text.lstrip("\n")) for u in split]
    keys = [None if u.code else _QUIZ_KEY.match(u.text) for u in split]
    if sum(o is not None for o in option) < 2 or not any(keys):
        return units
    first = next(i for i, o in enumerate(option) if o)
    pending: list[tuple[_Unit, str]] = []
    first_key = True
    for i, unit in enumerate(split):
        if option[i]:
            pending.append((unit, next(g for g in option[i].groups() if g)))
        elif keys[i]:
            chosen = set(re.findall(r"[A-F]", keys[i].group(1)))
            # "D. 以上都可以" / "D. All of the above": the key that picks it picks every option before it
            if any(letter in chosen and _ALL_ABOVE.search(opt.text) for opt, letter in pending):
                chosen |= {letter for _, letter in pending}
            lead = first_key
            for opt, letter in pending:
                opt.kind, opt.primary = ("recommend", lead) if letter in chosen else ("avoid", False)
                lead = lead and letter not in chosen
            if unit.kind in ("other", "neutral"):
                unit.kind, unit.primary = "recommend", False
            pending, first_key = [], False
        elif i > first and not unit.code and unit.kind == "other" and (
                _QUIZ_WHY_NOT.match(unit.text) or unit.text.rstrip(" *_").endswith(("?", "\uff1f"))):
            unit.kind = "neutral"  # "Not B: ...", "Q2. Which change first?": the options weighed, not advice
    return split


# the row of a troubleshooting matrix the answer says the user is in: "<- you are here", "👉 你在这里"
_HERE = re.compile(r"(?i)(?:<-|\u2190|\U0001f448|\U0001f449)\s*(?:you\s+are\s+here|\u4f60\u5728\u8fd9\u91cc)|"
                   r"\byou\s+are\s+here\b|\u4f60\u5728\u8fd9\u91cc")


def _point_here(rows: list[_Unit], header: list[str], grading: Grading) -> None:
    """A troubleshooting matrix ("Symptom | Cause | Check | Fix") that marks the user's row ("<- you are here"):
    that row's fix is the advice (its symptom and cause cells describe the run), every other row a situation the
    user is not in."""
    marked = [row for row in rows if _HERE.search(row.text)]
    if not marked:
        return
    fix_columns = [i for i, cell in enumerate(header) if grading.classify(cell) == "recommend"]
    for row in rows:
        if row not in marked:
            row.kind, row.primary = "neutral", False
            continue
        cells = row.text.split(" \u2014 ")
        if fix_columns and len(cells) == len(header):
            row.text = " \u2014 ".join(cells[i] for i in fix_columns)
        row.kind, row.primary = "recommend", row is marked[0]


def _answer_questions(units: list[_Unit], grading: Grading) -> None:
    """A question the answer asks itself on a line of its own ("## 加 TP 能解决吗？", "**Would recompute help?**")
    is answered by the paragraph after it: the options it names are advised where the reply opens on yes, argued
    against where it opens on no, offered for another case where it opens on a condition, and otherwise weighed
    ("能缓解，但只是把词表维切成 vocab/TP；序列维一点没少") - never advised by the question's own words."""
    for unit, reply in zip(units, units[1:], strict=False):
        if unit.code or unit.filed or reply.code or not grading.asks_about_options(unit.text):
            continue
        unit.kind, unit.primary = grading.reply_verdict(reply.text), False


_MIN_PROSE_WORDS = 4  # a structured answer's values are sentences; a config's are numbers and names


def _structured_fields(block: str, grading: Grading) -> list[tuple[str, str]]:
    """A JSON / YAML object that is an answer, not a config: (label, text) for each string in it, the label being the
    nearest key that says what its values are ("do_not", "不建议", "why", "checks"; an action's "change" stays under
    "actions").  A config ({"model": {"tensor_model_parallel_size": 8}}) has no such keys and gives nothing."""
    if len(block) > _MAX_SNIPPET:
        return []
    try:
        data = json.loads(block)
    except ValueError:
        try:
            data = yaml.safe_load(block)
        except yaml.YAMLError:
            return []
    if not isinstance(data, dict):
        return []
    if sum(grading.classify(str(key).replace("_", " ")) != "other" for key in data) < 2:
        return []
    fields: list[tuple[str, str]] = []

    def walk(node: Any, label: str, depth: int) -> None:
        if depth > 6 or len(fields) > 200:
            return
        if isinstance(node, dict):
            for key, value in node.items():
                name = str(key).replace("_", " ")
                kind = grading.classify(name)
                own = kind in ("avoid", "neutral", "cause") or kind == "recommend" and (
                    not label or grading.classify(label) != "recommend")
                walk(value, name if own or not label else label, depth + 1)
        elif isinstance(node, list):
            for item in node:
                walk(item, label, depth + 1)
        elif isinstance(node, str):
            fields.append((label or "note", node))

    walk(data, "", 0)
    if not any(len(text.split()) >= _MIN_PROSE_WORDS or len(_CJK.findall(text)) >= 8 for _, text in fields):
        return []
    return fields



def _comment_sections(block: str, grading: Grading) -> list[tuple[tuple[str, bool] | None, str]]:
    """A code block cut at its own comment labels: each part with the (kind, primary) its label gives it, or None
    before the first label.  A label is a whole-line comment that is not commented-out code and whose short lead
    ("not this", "cell 3 —— 不要", "step 1", "fix") classifies; a block without one stays whole."""
    parts: list[tuple[tuple[str, bool] | None, str]] = [(None, "")]
    for line in block.splitlines(keepends=True):
        m = _COMMENT_LINE.match(line)
        body = m.group(1).strip() if m else ""
        lead = _COMMENT_LABEL.match(body)
        head = (lead.group(1) or lead.group(2)) if lead else ""
        kind = grading.classify(head) if head and not _CODE_LIKE.match(body) else "other"
        if kind in ("avoid", "recommend"):
            parts.append(((kind, kind == "recommend" and grading.is_primary(head)), line))
        else:
            parts[-1] = (parts[-1][0], parts[-1][1] + line)
    return [(label, text) for label, text in parts if text.strip()]


def _field_lines(text: str) -> list[str]:
    """A paragraph whose lines are two or more "Label: value" fields, split into its lines, and one whose tags
    (【推荐】, 【不推荐】, [fallback]) each open a suggestion, split at them; any other paragraph whole."""
    tagged = [part for part in _TAG.split(text) if part.strip()]
    if len(tagged) > 1:
        return [line for part in tagged for line in _field_lines(part)]
    lines = [line for line in text.split("\n") if line.strip()]
    if any(_QA_LINE.match(line) for line in lines):
        return [text]  # "Q: Would X help?\nA: No": the answer reads its question, they stay together
    fields = [line for line in lines if _LABEL.match(line) and re.search(r"[:\uff1a]", line[:42])]
    # "①（7/10）升级 …\n⑤（不推荐，1/10）调小 micro batch": each ranked line is its own option
    scored = [line for line in lines if _SCORE.match(line)]
    return lines if len(lines) > 1 and (len(fields) >= 2 or len(scored) >= 2) else [text]


# a bracketed tag that files the suggestion after it: 【推荐】, 【不推荐】, 【备选】, [recommended], [don't]
_TAG = re.compile(r"\s+(?=\u3010[^\u3011\n]{1,8}\u3011|\[(?:recommended|fallback|optional|don't|do not|avoid)\])",
                  re.IGNORECASE)
_QA_LINE = re.compile(r"[\s*_]*(?:Q|A|问|答)[\s*_]*[:\uff1a]")


def _is_diff(info: str, content: str) -> bool:
    """A unified diff: a ``diff`` fence, or hunk / file headers in the block."""
    return info.strip().lower().startswith(("diff", "patch")) or bool(
        re.search(r"^(@@ |--- a/|\+\+\+ b/)", content, re.MULTILINE))


# a line of a diff or a command block that writes key=value / key: value / --flag value
_WRITE = re.compile(r"^\s*([-+])?\s*(?:export\s+)?([A-Za-z_][\w.-]*)\s*(?:=|:|\s)\s*['\"]?(\d+(?:\.\d+)?)['\"]?"
                    r"(?:\s*[,\\]?\s*(?:#|//)\s*(?:was|from|previously|before|default|原来|之前|原先|原本|默认)"
                    r"\s*[:：=]?\s*(\d+(?:\.\d+)?))?")


def _lowered(block: str) -> str:
    """A block that lowers a number says so in words, for the fixes' recognizers ("lower the micro-batch"): a diff
    that removes ``-ppo_micro_batch_size=64`` and adds ``+ppo_micro_batch_size_per_gpu=2``, or a line
    ``gpu_memory_utilization=0.4  # was 0.6``.  Appended after the block's own text ("lower KEY"), so a mention's
    place in the block is unchanged; a block that lowers nothing gets nothing."""
    removed: dict[str, float] = {}
    lowered: list[str] = []
    for line in block.splitlines():
        m = _WRITE.match(line)
        if not m:
            continue
        sign, key, value, old = m.group(1), m.group(2), float(m.group(3)), m.group(4)
        if old is not None and value < float(old):
            lowered.append(key)
        elif sign == "-":
            removed[_stem(key)] = value
        elif sign == "+" and _stem(key) in removed and value < removed[_stem(key)]:
            lowered.append(key)
    return "".join(f"\nlower {key}" for key in dict.fromkeys(lowered))


def _stem(key: str) -> str:
    """A key's last part without a per-GPU suffix (ppo_micro_batch_size -> ppo_micro_batch_size_per_gpu)."""
    return _key(key).removesuffix("_per_gpu")


_PRECONDITION = re.compile(r"(?i)^\s*(after|once)\b|(之后|以后|后)\s*$")


_RATHER = re.compile(r"与其[^。\n]{1,80}?[，,]\s*(?:还)?不如")  # "与其 X，不如 Y": Y is what the lead asks for


def _main_clause(text: str) -> str:
    """The opening clause of a lead, past a precondition ("确认 1873 是你自己之前残留的作业后，直接结束它：" speaks for
    the block as "直接结束它", not as the confirmation it waits for; "Once you've confirmed it's yours, kill it:")."""
    clauses = re.split(r"[,，;；。]", text)
    while len(clauses) > 1 and _PRECONDITION.search(clauses[0]):
        clauses.pop(0)
    return clauses[0]


def section_olist(section: tuple[str, bool], olist: int | None) -> tuple[str, int | None, bool]:
    return section[0], olist, section[1]


# a whole-line comment in a code block (a diff's "+"/"-" marker allowed), and what it says
_COMMENT_LINE = re.compile(r"^[ \t]*[+\- ]?[ \t]*(?:#|//)+[ \t]*(.*)$")
# its label: a short lead before a colon or a dash ("not this - ...", "cell 3 —— 不要：...", "step 1: ..."); a comment
# that is a sentence ("不要写 recompute_modules = []；保持不设，或显式：") labels nothing
_COMMENT_LABEL = re.compile(r"^(?:(.{1,24}?)\s*[:\uff1a]|(.{1,24}?)\s[-\u2013\u2014]{1,2}\s)")
# a comment that is commented-out code, not words: "# --micro-batch-size 1", "# export X=1", "# key: value"
_CODE_LIKE = re.compile(r"(?:--?[A-Za-z]|export\s|(?:pip|python3?|torchrun|bash)\s|[\w.\[\]\"']+\s*=\s*\S"
                        r"|[\w\[\]\"']*[_.][\w.\[\]\"']*\s*:\s*\S|\w+\()")
# a label is one phrase, not a sentence: "Fix:", "修法：", or "**Do first** - ..." (a dash after it)
_LABEL = re.compile(r"^\s*([^:：\n。！？!?，,\-–—]{1,40})(?:[:：]|\s+[-–—]\s)")
_LISTED = re.compile(r"[,\uff0c\u3001]")  # a parenthesis that lists items ("(mbs 1, full recompute, ...)")
_VALUE_VERDICT = re.compile(r"[*_]*([^:\uff1a,\uff0c.\u3002;\uff1b]{1,14}?)[*_]*\s*[:\uff1a;\uff1b]")  # "rejected: ..."
_SHORT_VERDICT = 8  # characters of a label's value that is only a verdict ("不做", "no", "skip")
_DEFAULT_HEAD = 40  # characters in which a paragraph names itself the default plan
_STATUS_HEAD = re.compile(r"\s*(?:\u2192|->|=>|[(\uff08:\uff1a])")
_STATUS_CELL = 32  # characters of a table cell that states a verdict ("Rejected", "❌ not now"), not a reason
_ADDON_HEAD = 24  # characters at the start of a paragraph in which an add-on cue speaks for all of it


# a label alone on the first line of its paragraph ("Do first" then the action on the next line)
_LINE_LABEL = re.compile(r"^\s*([^:：\n。！？!?，,]{1,24})\n")
_MAX_ACTION_LABEL = 24  # "Change first", "修法", "Step 1": short; a fix's title before a colon is not a label


def _label_kind(text: str, grading: Grading, section: str) -> tuple[str, bool] | None:
    """A leading label re-files one paragraph or list item: "Sources:" / "Avoid:", or "改法：" (primary).

    A recommend label only promotes prose (an item under "Avoid" that starts "Change X: ..." stays avoided).
    """
    m = _LABEL.match(text)
    if not m:  # "**Do first**" alone on the paragraph's first line
        m = _LINE_LABEL.match(text)
        if not m or grading.classify(m.group(1)) == "other":
            return None
    if m.group(1).strip(" *_`").casefold() in grading.restating:
        return "neutral", False
    kind = grading.classify(m.group(1))
    # "先确认 ... 生效：", "Confirm it first:": a verification the label puts first is the first thing to do
    label = m.group(1)
    if kind == "neutral" and (grading.order.first_action.match(label) or grading.order.do_first.search(label)):
        return "recommend", True
    if kind in ("avoid", "neutral", "cause"):
        return kind, False
    # "**Fix:** ..." after a "**Cause:** ..." paragraph is the answer's recommendation, not more of the cause
    short = len(m.group(1).strip(" *_")) <= _MAX_ACTION_LABEL
    if kind == "recommend" and section in ("recommend", "other", "cause") and short:
        return kind, bool(grading.is_primary(m.group(1)))
    return None


_MAX_SNIPPET = 20_000


def _flattened_yaml(code: str) -> str:
    """A YAML snippet's nested keys as ``section.key=value`` lines, the Hydra spelling recognisers know.

    ``model:\n  context_parallel_size: 4`` becomes ``model.context_parallel_size=4``; anything that is not
    a small plain YAML mapping adds nothing.
    """
    if len(code) > _MAX_SNIPPET or ":" not in code or "*" in code:
        return ""
    try:
        data = yaml.safe_load(code)
    except yaml.YAMLError:
        return ""
    if not isinstance(data, dict):
        return ""
    lines: list[str] = []

    def walk(node: Any, prefix: str, depth: int) -> None:
        if depth > 8 or len(lines) > 500:
            return
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if isinstance(value, dict):
                walk(value, dotted + ".", depth + 1)
            elif prefix:
                shown = json.dumps(value) if isinstance(value, (list, bool)) or value is None else str(value)
                lines.append(f"{dotted}={shown}")

    walk(data, "", 0)
    return "\n" + "\n".join(lines) if lines else ""


# How strongly a place in the answer says "do this": the first fix is the first one found in the
# strongest place. A fix named in explanatory prose is the weakest: experts read it as background.
_STRENGTH = {"primary": 0, "list": 1, "recommend": 2, "code": 3, "other": 4}


_OFF = {"false", "none", "null", "0", "off", "no", "", "[]"}  # an empty module list is off


def _state(value: str) -> bool:
    """On or off: false / none / null / 0 / off / an empty list are off, any other value (a mode) is on."""
    return _norm_value(value).replace(" ", "") not in ("false", "[]")


def fix_switches(fixes: list[Mapping[str, Any]]) -> dict[str, dict[str, bool]]:
    """For each fix, the settings its own apply lines write and whether each turns something on or off.

    ``model.cpu_offloading=true`` -> {"cpu_offloading": True}; ``NCCL_NVLS_ENABLE=0`` -> {"nccl_nvls_enable":
    False}; a mode (``recompute_method=uniform``) counts as on.  An answer writing the opposite state
    (``model.cpu_offloading=false``, ``recompute_method=null``) turns the fix off: advice against it.
    A config number (``dataset.num_workers=1``) is a level, not a switch: 0 workers is fewer still, not the fix
    undone; only an environment variable's 0 / 1 is off / on.
    """
    out: dict[str, dict[str, bool]] = {}
    for fix in fixes:
        apply = fix.get("apply") or {}
        for items, numbers_switch in ((apply.get("bridge_override") or [], False), (apply.get("env") or [], True)):
            pairs = []
            for item in items:
                key, sep, value = str(item).split("#", 1)[0].strip().lstrip("+").partition("=")
                if sep and not numbers_switch and _number(value) is not None:
                    continue
                if sep and "," not in value and ":" not in value:
                    pairs.append((key.rsplit(".", 1)[-1].lower(), _state(value)))
                elif sep:  # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True switches its options
                    pairs.extend((k, _state(v)) for k, v in _options(value))
            # the settings in the same state as the fix's defining (first) one; the others are companions it
            # switches the other way (activation offload sets recompute_granularity=null), not the fix itself
            for key, state in pairs:
                if state == pairs[0][1]:
                    out.setdefault(fix["id"], {})[key] = state
    return out


UP = "+"  # fix_settings: the fix raises the setting (a parallel size), whatever its value now


def fix_settings(fixes: list[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """For each fix, the setting its first apply line writes and the value it writes: ``increase-tp`` ->
    ("tensor_model_parallel_size", UP), ``reduce-micro-batch`` -> ("micro_batch_size", "1"), ``expandable-segments``
    -> ("expandable_segments", "true").  A fix is already applied when the run has that value, and a line that
    writes the setting is this fix only if it moves the run's value towards it."""
    out: dict[str, tuple[str, str]] = {}
    for fix in fixes:
        apply = fix.get("apply") or {}
        for item in [*(apply.get("bridge_override") or []), *(apply.get("env") or [])][:1]:
            key, sep, value = str(item).split("#", 1)[0].strip().lstrip("+").partition("=")
            if not sep:
                continue
            key = key.rsplit(".", 1)[-1].lower()
            if "{derived.next_" in value:
                out[fix["id"]] = (key, UP)
            elif _options(value):
                out[fix["id"]] = _options(value)[0][0], _norm_value(_options(value)[0][1])
            elif "{" not in value:
                out[fix["id"]] = (key, _norm_value(value))
    return out


def applied_fixes(settings: Mapping[str, tuple[str, str]], current: Mapping[str, str]) -> set[str]:
    """The fixes the run already has: their setting already holds the value the fix writes (an option of
    PYTORCH_CUDA_ALLOC_CONF counts as a setting)."""
    options = {k: _norm_value(v) for value in current.values() for k, v in _options(value)}
    return {ident for ident, (key, value) in settings.items()
            if value != UP and (current.get(key) == value or key not in current and options.get(key) == value)}


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _moves_away(text: str, start: int, end: int, setting: tuple[str, str], current: Mapping[str, str],
                aliases: Mapping[str, str]) -> bool:
    """The mention writes the fix's numeric setting with a value that does not move the run's value towards the
    fix's (``--tensor-model-parallel-size 4`` at TP 8 is no TP increase, ``micro_batch_size 2`` at MBS 2 no
    reduction)."""
    key, target = setting
    now = _number(current.get(key))
    for k, value in _settings_at(text, start, end):
        written = _number(_norm_value(value)) if aliases.get(k, k) == key else None
        if written is None:
            continue
        if target == UP and written <= 1:
            return True  # a parallel size of 1 raises nothing, whatever the run has ("pipeline_model_parallel_size=1")
        if now is None:
            continue
        goal = _number(target)
        toward = written > now if target == UP else goal is not None and abs(written - goal) < abs(now - goal)
        if not toward:
            return True
    return False


_ASSIGNMENT = re.compile(r"([A-Za-z_][\w.]*)=['\"]?([^\s'\"]+)")


def _line_restates(text: str, start: int, current: Mapping[str, str]) -> bool:
    """The line holding the mention assigns only values the run already has (``export
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` where that is the run's env; not the same variable with a
    GC threshold added)."""
    lo = text.rfind("\n", 0, start) + 1
    hi = text.find("\n", start)
    line = text[lo:hi if hi >= 0 else None]
    pairs = [(k.rsplit(".", 1)[-1].lower(), _norm_value(v)) for k, v in _ASSIGNMENT.findall(line)]
    return bool(pairs) and all(current.get(k) == v for k, v in pairs)


# a line that prints or logs what it names (print(...), echo, logger.info(...)) inspects a setting
_INSPECTING = re.compile(r"\b(?:print|echo|printf|logger\.\w+|logging\.\w+)\s*\(?")


def _inspects(text: str, start: int) -> bool:
    """The mention at ``start`` sits in a print / log / echo call (an echo on its line, a call whose parenthesis is
    still open where it spans lines): the block checks the setting."""
    lo = text.rfind("\n", 0, start) + 1
    if any(not m.group().endswith("(") for m in _INSPECTING.finditer(text, lo, start)):
        return True  # echo / printf without parentheses, on the mention's line
    opened = [m.end() for m in _INSPECTING.finditer(text, 0, start) if m.group().endswith("(")]
    return bool(opened) and text.count("(", opened[-1], start) + 1 > text.count(")", opened[-1], start)


def _called(text: str, end: int) -> bool:
    """The mention is a call ("torch.cuda.memory_allocated()" inside a print): the block measures with it, it reads
    no setting."""
    return text[:end].endswith(")") or text[end:end + 1] == "("


_COMMAND_BEFORE = re.compile(r"(?:\bexport|\bsetenv|\benv|-E|--env)\s+$")


def _names_only(text: str, start: int, end: int) -> bool:
    """The mention names a setting without writing a value ("the expandable segments"), and no verb before it in
    its clause asks for it (turn on, enable, set, add, use, 开, 加, 设)."""
    if re.search(r"[=:\d]", text[start:end + 1]):
        return False
    lo = _last_end(_CLAUSE_END, text, start)
    return not _ASKS_FOR.search(text[lo:start])


_ASKS_FOR = re.compile(r"(?i)\b(turn(ing)?\s+on|enabl\w*|set(ting)?|add(ing)?|us(e|ing)|switch\w*\s+(on|to)|try|"
                       r"export\w*|apply|go\s+with|start\s+with)\b|开|加|设|用|启")


def _describes_run(text: str, start: int, end: int, current: Mapping[str, str]) -> bool:
    """The mention names a setting ("expandable segments") or writes only values the run already has
    ("with `expandable_segments:True`"): it speaks of the run as it is, not of a change."""
    if not re.search(r"[=:\d]", text[start:end + 1]):
        return True
    m = _SETTING.match(text, start)
    if not m or _COMMAND_BEFORE.search(text, max(0, start - 12), start):
        return False  # "先 `export PYTORCH_CUDA_ALLOC_CONF=...` 再 torchrun": a command, exported where it takes effect
    value = m.group(2) if m.group(2) is not None else m.group(3)
    written = _options(value) or [(m.group(1).rsplit(".", 1)[-1].lower(), value)]
    options = {k: _norm_value(v) for v in current.values() for k, v in _options(v)}
    return all(current.get(k, options.get(k)) == _norm_value(v) for k, v in written)


def _key(name: str) -> str:
    """A setting's name as fixes compare it: the last dotted part, lower-case, '-' as '_' (--recompute-method)."""
    return name.lstrip("-").rsplit(".", 1)[-1].lower().replace("-", "_")


def _writes_otherwise(text: str, key: str, value: str) -> bool:
    """``text`` writes ``key`` only with values other than the fix's (a block that sets recompute_granularity:
    selective is not full recompute, whatever its activation_checkpointing switch says)."""
    code = re.sub(r"#[^\n]*", "", text)  # a comment names settings, it does not write them
    written = [_norm_value(m.group(2)) for m in _SETTING.finditer(code)  # key=value / key: value only
               if m.group(2) is not None and _key(m.group(1)) == key]
    return bool(written) and value != UP and _number(value) is None and value not in written


def _writes(text: str, key: str, value: str) -> bool:
    """``text`` writes ``key`` with the fix's ``value`` somewhere (any value that moves it, for a number)."""
    for m in _SETTING.finditer(text):
        if _key(m.group(1)) != key:
            continue
        written = _norm_value(m.group(2) if m.group(2) is not None else m.group(3))
        if written == value or (value == UP or _number(value) is not None) and _number(written):
            return True
    return False


# key=value / key: value / --flag value; a bare flag (--use-megatron-fsdp \\) has no value and is left alone.
# An option-list value (``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,garbage_collection_threshold:0.8``) is read
# whole and as its options.
_OPTIONS = r"[\w.-]*(?::[\w.-]+(?:,[\w.-]+:[\w.-]+)*)?"
_SETTING = re.compile(r"([A-Za-z_][\w.-]*)"
                      rf"(?:[ \t]*[=:][ \t]*['\"]?(\[[^\]\n]*\]|{_OPTIONS})|[ \t]+['\"]?(?!-)(\[[^\]\n]*\]|[\w.]+))")
_OPTION_LIST = re.compile(r"^[A-Za-z_]\w*:[\w.-]+(?:,[A-Za-z_]\w*:[\w.-]+)*$")


def _options(value: str) -> list[tuple[str, str]]:
    """``expandable_segments:True,x:1`` -> [("expandable_segments", "True"), ("x", "1")]; anything else -> []."""
    value = value.strip().strip("'\"")
    if not _OPTION_LIST.match(value):
        return []
    return [(k.lower(), v) for k, _, v in (opt.partition(":") for opt in value.split(","))]


def _settings_at(text: str, start: int, end: int, options: bool = True) -> Iterator[tuple[str, str]]:
    """``(key, value)`` of each setting the mention at ``text[start:end]`` writes (the key starts the mention),
    then each option of an option-list value (``expandable_segments``, "True").

    Keys are the last dotted part, lower-case, with '-' as '_' (``--recompute-method`` -> recompute_method).
    """
    for m in _SETTING.finditer(text, max(0, start - 2), min(len(text), end + 40)):
        if m.start() <= end and m.end() >= start:
            key = _key(m.group(1))
            value = m.group(2) if m.group(2) is not None else m.group(3)
            yield key, value
            if options:
                yield from _options(value)


def _turned_off(text: str, start: int, end: int, switches: Mapping[str, bool]) -> bool:
    """The mention at ``text[start:end]`` writes one of the fix's settings with the opposite on/off state."""
    return any(key in switches and _state(value) != switches[key] for key, value in _settings_at(text, start, end))


def current_settings(inputs: Mapping[str, Any]) -> dict[str, str]:
    """The run's settings as the scenario states them (config sections, overrides, env): key -> value.

    Keys are the last dotted part, lower-case; values normalised as _norm_value does.
    """
    out: dict[str, str] = {}

    def walk(node: Any) -> None:
        for key, value in node.items():
            if isinstance(value, Mapping):
                walk(value)
            elif not isinstance(value, list):
                out[str(key).lower()] = _norm_value(str(value))

    if isinstance(inputs.get("config"), Mapping):
        walk(inputs["config"])
    for item in inputs.get("overrides") or []:
        key, sep, value = str(item).lstrip("+").partition("=")
        if sep:
            out[key.rsplit(".", 1)[-1].lower()] = _norm_value(value)
    if isinstance(inputs.get("env"), Mapping):
        out.update({str(k).lower(): _norm_value(str(v)) for k, v in inputs["env"].items()})
    return out


def _norm_value(value: str) -> str:
    text = value.strip().strip("'\"").rstrip(".,;:").lower()
    if text in ("true", "yes", "on"):
        return "true"
    return "false" if text in _OFF else text


def _restated(text: str, start: int, end: int, current: Mapping[str, str],
              aliases: Mapping[str, str] | None = None) -> bool:
    """The mention writes a setting with the value the run already has ("--use-distributed-optimizer" when
    it is on, "tensor_model_parallel_size: 2" at TP 2): the layout restated, not a change.

    An allocator option list exported again is not restated: where it is exported decides whether it takes
    effect at all (set after CUDA initialised, bypassed by a launcher), so experts read it as advice."""
    for key, value in _settings_at(text, start, end, options=False):
        key = (aliases or {}).get(key, key)
        if not _options(value) and key in current and _norm_value(value) == current[key]:
            return True
    for m in _BARE_FLAG.finditer(text, max(0, start - 2), min(len(text), end + 2)):
        key = m.group(1).replace("-", "_").lower()
        if current.get(key) == "true" or current.get(key.removeprefix("use_")) == "true":
            return True
    return False


_BARE_FLAG = re.compile(r"--([a-z][a-z0-9-]*)(?=\s*(?:\\|$|\s--))", re.M)


def from_markdown(markdown: str, fixes: Recognizer, causes: Recognizer, grading: Grading,
                  switches: Mapping[str, Mapping[str, bool]] | None = None,
                  current: Mapping[str, str] | None = None,
                  settings: Mapping[str, tuple[str, str]] | None = None) -> Answer:
    """Score-ready view of a free-text answer; ``current``: the run's stated settings (current_settings);
    ``settings``: the setting each fix writes (fix_settings)."""
    switches = switches or {}
    current = current or {}
    settings = settings or {}
    applied = applied_fixes(settings, current)
    recommended: list[tuple[int, int, str, bool]] = []  # (strength, order, id, in a code block)
    avoided: list[str] = []
    spans: dict[tuple[str, int], str] = {}
    places: dict[int, str] = {}
    avoid_why: dict[str, str] = {}
    cause_why: dict[str, str] = {}
    argued_against: set[str] = set()  # named in a clause that argues against it (not merely under "Avoid")
    cause_hits: list[tuple[int, int, str]] = []  # (preference, order, id)
    order = 0
    cues = grading.order  # the words that place a mention first or later
    units = _units(markdown, grading)
    _file_findings(units, grading, fixes)
    _answer_questions(units, grading)
    units = _read_quiz(units)
    # what the answer says to keep as it is ("保留 expandable segments，启动前加一行：") and the run already has: a
    # command block that writes it again beside the new line keeps it too, it does not recommend it
    kept_ids = {m.ident for unit in units if applied and not unit.code and unit.kind != "avoid"
                for m in fixes.find(unit.text) if m.ident in applied and grading.kept(unit.text, m.start, m.end)}
    for index, unit in enumerate(units):
        # the paragraph just before a command block, naming a change the block makes, names it first
        # ("只给第一段减负：让第一个 stage 少放几层 decoder" before a block that restates PP and sets the first stage)
        in_block = {m.ident for m in fixes.find(units[index + 1].text)} - applied if unit.leads_code else set()
        # a command block its lead-in calls the fallback ("还不够就加：") is the next step, whatever it writes
        # ("还不够就加："), or that opens on a condition the first step did not meet ("if ... it still OOMs, drop ...:")
        fallback_block = unit.code and index > 0 and units[index - 1].leads_code \
            and (grading.leads_fallback(units[index - 1].text) or grading.opens_on_fallback(units[index - 1].text))
        # "方案二（推荐指数：★★★★）：把 MICRO_BATCH_SIZE 降到 1": an option numbered after the first is not first
        later_option = bool(grading.later_option.match(unit.text.lstrip(" *_#>")))
        if unit.code:
            unit.text += _flattened_yaml(unit.text)
        kind, primary = unit.kind, unit.primary
        relabel = None if unit.filed else _label_kind(unit.text, grading, unit.kind)
        # "先别急着加卡 🙂" alone on the first line is a sentence about the fix it names, not a label over the lines
        # after it ("colocated 模式下 vLLM 按 gpu_memory_utilization 先把份额占住" explains the cause)
        first_line = None if _LABEL.match(unit.text) else _LINE_LABEL.match(unit.text)
        if relabel and first_line and any(m.start < first_line.end(1) for m in fixes.find(first_line.group(1))):
            relabel = None
        if relabel:
            kind, primary = relabel[0], relabel[1] or (primary and relabel[0] == "recommend")
        if not unit.code and kind in ("recommend", "other", "conditional") and grading.default_plan.search(
                unit.text.lstrip(" *_>")[:_DEFAULT_HEAD]):
            kind, primary = "recommend", True  # "My default if you can't check: ...", "如果没法确认，我的默认做法：..."
        elif kind in ("recommend", "other") and grading.is_conditional(unit.text):
            kind = "conditional"
        # "加卡：不做", "More GPUs: no" - a label whose whole value is a short verdict against it
        verdict = None if unit.code else _LABEL.match(unit.text)
        value = unit.text[verdict.end():].strip(" *_`.。") if verdict else ""
        if verdict and len(value) <= _SHORT_VERDICT and (grading.classify(value) == "avoid"
                                                         or grading.reply.no.match(value)):
            kind, primary = "avoid", False
        opening = _VALUE_VERDICT.match(value) if verdict else None
        if opening and grading.classify(opening.group(1)) == "avoid":
            kind, primary = "avoid", False  # "More GPUs / higher TP — rejected: the same model fits on 0.13"
        if not unit.code and _OPTION.match(unit.text) and grading.option_rejected.search(unit.text):
            kind, primary = "avoid", False  # "Option C – make rank 0 smaller (...). I would not do this: ..."
        score = None if unit.code else _SCORE.match(unit.text)
        if score and int(score.group(1)) <= _LOW_SCORE:
            kind, primary = "avoid", False  # "(1/10) Memory knobs (expandable_segments, ...) — would not help"
        done = None if unit.code else _DONE_MARK.match(unit.text)
        if done and not grading.order.first_action.match(unit.text[done.end():].lstrip(" *_")):
            # "✅ expandable_segments already set": what the run has, not advice ("✅ 先按步记录..." still advises)
            kind, primary = "neutral", False
        if not unit.code and _REJECT_MARK.match(unit.text):
            kind, primary = "avoid", False  # "❌ micro-batch, selective/full recompute — nothing has run forward yet"
        replaced = grading.replaced_spans(unit.text)
        # a setting written out is an instruction in a command block or a recommendation; in prose
        # ("with use_distributed_optimizer: false, each GPU holds ...") it describes the run as it is
        instructs = unit.code or kind == "recommend" or primary
        # "The fix will most likely be chunking, but do first: confirm ..." - a label inside the paragraph
        inline_first = None if unit.code or primary else cues.inline_first.search(unit.text)
        against_until: dict[str, int] = {}  # a fix argued against -> the end of that sentence
        # "... 这个方向我放弃了": what the paragraph weighed before dropping it is argued against
        dropped = None if unit.code else next(iter(grading.discarded.spans(unit.text)), None)
        struck = [m.span() for m in _STRUCK.finditer(unit.text)]  # "~~Try num_workers=0~~ (outdated)"
        found = list(fixes.find(unit.text))
        if unit.own is not None:
            # a fix read from a derived line ("lower per_device_train_batch_size") stands where its key is written
            found.sort(key=lambda f: _anchor(unit.text, unit.own or 0, f.start, f.end))
        for m in found:
            order += 1
            spans.setdefault((m.ident, order), _span(unit.text, m.start, m.end))
            if kind == "conditional" or (not unit.code and grading.conditional_sentence(unit.text, m.start)):
                continue  # an option for a situation the user is not in: neither advice for nor against
            if unit.on_context_line(m.end - 1) or unit.on_removed_line(m.end - 1):
                continue  # a diff's unchanged or removed line names what the script had, it advises nothing
            if m.ident in settings and _moves_away(unit.text, m.start, m.end, settings[m.ident], current,
                                                               grading.flag_aliases):
                continue  # writes the setting, but not the change this fix makes (TP 8 -> 4 is no TP increase)
            said_not = negated(
                unit.text, m.start, m.end, grading.negation_before, grading.negation_after, grading.negation_exceptions,
                double=grading.negation_double, near=grading.negation_near,
            ) or (kind != "neutral" and _removed(cues.removed_before, unit.text, m.start))
            if said_not and m.ident in switches and _turned_off(unit.text, m.start, m.end, switches[m.ident]):
                continue  # "don't write recompute_modules = []": against turning it off, i.e. keep it
            what_if = None if unit.code else grading.what_if(unit.text, m.start)
            trailing = _trailing_label(unit.text, m.end, grading) if unit.code else None
            if trailing == "keep":
                continue  # "--tensor-model-parallel-size 4 \  # KEEP", "... \  # 保持": the run's own line restated
            if trailing == "avoid":
                avoided.append(m.ident)  # "recipe.data.micro_batch_size = 1  # DO NOT lower this"
                avoid_why.setdefault(m.ident, f"against (the line's own comment): «{spans[(m.ident, order)]}»")
                continue
            if unit.code and _READ_ONLY_PROMPT.match(unit.text, unit.text.rfind("\n", 0, m.start) + 1):
                continue  # "$ nvidia-smi --query-gpu=memory.used -l 2": a transcript's check the agent ran, no fix
            if what_if is None and not unit.code and grading.recalled(unit.text, m.start):
                what_if = "recalled"  # "更正：我之前建议你把 X 降到 0.4": the earlier advice, withdrawn
            if what_if is None and unit.code and grading.comment_fails(unit.text, m.start):
                what_if = "fails"  # "$ torchrun ... --micro-batch-size 2  # OOM again at iter 3": tried, it failed
            # "TP↑8 ✗ (不跨节点)": a cross right after an option strikes it
            struck_off = what_if is None and not unit.code and _marked_off(unit.text, m.end, found)
            if what_if == "weighed":
                continue  # "If you add full recompute -> fits, cost: ~30% slower": an option weighed, not advised
            verdict = grading.question_verdict(unit.text, m.end)
            if verdict == "open":
                continue  # "改成 abort 模式呢？ ...除非你本来就不需要": an option for another situation, not advice
            answered_no = verdict == "no" or struck_off
            if what_if in ("fails", "recalled"):
                # "If you set expandable segments without NCCL_GRAPH_REGISTER=0 -> ... fails": against that option as
                # weighed, which a later pick may still choose in another form
                avoided.append(m.ident)
                how = "a simulated option that fails" if what_if == "fails" else "earlier advice withdrawn"
                avoid_why.setdefault(m.ident, f"against ({how}): «{spans[(m.ident, order)]}»")
                continue
            if any(a <= m.start < b for a, b in struck):
                # "~~Lower it to 2~~ Lower it to 1": the struck text is withdrawn; the fix is advice against only
                # where the answer names it nowhere else in this paragraph
                if not any(o.ident == m.ident and not any(a <= o.start < b for a, b in struck)
                           for o in found):
                    avoided.append(m.ident)
                    avoid_why.setdefault(m.ident, f"against (struck through): «{spans[(m.ident, order)]}»")
                continue
            against = said_not or any(a <= m.start < b for a, b in replaced) \
                or (dropped is not None and m.end <= dropped[0]) \
                or grading.against_later_in_sentence(unit.text, m.end, [(o.start, o.end) for o in found
                                                                        if o.ident != m.ident]) or answered_no \
                or m.start < against_until.get(m.ident, -1) \
                or (instructs and m.ident in switches and _turned_off(unit.text, m.start, m.end, switches[m.ident])
                    # a companion written off beside the fix's own setting written on is part of the fix
                    # (moe_pad_expert_input_to_capacity: false next to moe_expert_capacity_factor: 1.25)
                    and not (m.ident in settings and _writes(unit.text, *settings[m.ident])))
            if not against and kind != "avoid" and (grading.kept(unit.text, m.start, m.end)
                                                    or grading.named_as_cause(unit.text, m.start)
                                                    or (not unit.code and grading.entertained(unit.text, m.start))):
                continue  # kept as it is, or named as what caused the OOM: neither advice for nor against
            if not against and unit.code and m.ident in settings and _writes_otherwise(unit.text, *settings[m.ident]):
                continue  # the block sets this fix's own key to another fix's value
            if unit.code and _inspects(unit.text, m.start) and not _called(unit.text, m.end):
                continue  # print("cpu_offloading =", cfg.model.cpu_offloading): reads the setting, does not write it
            if not against and unit.code and current and (
                    m.ident in kept_ids and _line_restates(unit.text, m.start, current)
                    or _restated(unit.text, m.start, m.end, current, grading.flag_aliases)):
                continue  # a command line repeating the run's own setting
            if against:
                argued_against.add(m.ident)
                # the same fix again in that sentence is still the one argued against ("不太建议加卡，加卡只是推迟")
                end = _SENTENCE_END.search(unit.text, m.end)
                # a question answered no: the answer after it still speaks of what the question named
                against_until[m.ident] = end.start() if end and not answered_no else len(unit.text)
            if kind == "avoid" or against:
                avoided.append(m.ident)
                avoid_why.setdefault(m.ident, f"against ({'avoid section' if kind == 'avoid' else 'clause'}): "
                                              f"«{spans[(m.ident, order)]}»")
            elif kind in ("recommend", "other"):
                first_here = inline_first is not None and m.start >= inline_first.end()
                place = ("other" if unit.addon else "primary" if primary or first_here else
                         "list" if unit.olist is not None else
                         "recommend" if kind == "recommend" else "code" if unit.code else "other")
                if place == "other" and m.ident in in_block and not unit.addon:
                    place = "code"
                if m.ident in applied and not unit.code and (
                        place == "other" and _describes_run(unit.text, m.start, m.end, current)
                        or place in ("primary", "recommend") and _names_only(unit.text, m.start, m.end)):
                    # prose about a setting the run already has ("expandable segments changed nothing"; "with
                    # NCCL_GRAPH_REGISTER=0 the expandable segments can actually be remapped")
                    continue
                # a mention said to be the next step ranks after every other recommendation
                later = len(_STRENGTH) if (unit.done or fallback_block or later_option
                                           or cues.later_after.match(unit.text, m.end)
                                           or cues.later_before.search(unit.text, max(0, m.start - 24), m.start)
                                           or grading.fallback_before(unit.text, m.start)) else 0
                recommended.append((_STRENGTH[place] + later, order, m.ident, unit.code))
                places[order] = place
        for m in causes.find(unit.text):
            order += 1
            if kind == "avoid" or negated(
                unit.text, m.start, m.end, grading.cause_before, grading.cause_after, clause_end=_CAUSE_CLAUSE_END
            ):
                continue
            cause_hits.append((0 if kind == "cause" else 1, order, m.ident))
            cause_why.setdefault(m.ident, f"cause ({kind}): «{_span(unit.text, m.start, m.end)}»")
    # A fix the answer argues against somewhere ("TP2→4 几乎不省显存", "replace full recompute with ...") is not
    # one it recommends where it is only restated (a command line repeating the current TP, prose); advice for
    # it in the answer's recommendation prose still counts (one misread negation must not erase it).
    recommended = [r for r in recommended
                   if r[2] not in argued_against or r[0] <= _STRENGTH["recommend"] and not r[3]]
    why = dict(avoid_why)
    for _, order, ident, _ in sorted(recommended):  # the strongest mention decides, as for the first fix
        why.setdefault(ident, f"recommended ({places[order]}): «{spans[(ident, order)]}»")
    for ident, text in cause_why.items():
        why.setdefault(f"cause:{ident}", text)
    return Answer(
        recommended=_unique(r[2] for r in sorted(recommended, key=lambda r: r[1])),
        avoided=_unique(avoided),
        causes=_unique(c[2] for c in sorted(cause_hits)),
        # strongest place, then earliest; an answer whose every fix is a fallback ("if it still OOMs, ...") told the
        # user to do something else first, which no fix id names
        first_fix=min(recommended)[2] if recommended and min(recommended)[0] < len(_STRENGTH) else None,
        text=markdown,
        source="markdown",
        why=why,
    )


def _removed(cue: re.Pattern[str], text: str, start: int) -> bool:
    """A verb right before the mention takes the setting out ("去掉 --recompute-activations"); an English one only
    before a flag ("drop --recompute-activations"), since "drop MBS to 1" lowers a value - as does a flag given a new
    value ("drop --micro_train_batch_size from 16 to 8")."""
    hit = cue.search(text, max(0, start - 12), start)
    if not hit:
        return False
    return bool(_CJK.match(hit.group())) or text.startswith("-", start) and not _NEW_VALUE.match(text, start)


_NEW_VALUE = re.compile(r"[\w.`-]+\s+(?:from\s+\d[\w.]*\s+)?to\s+\d")  # "--flag from 16 to 8", "--flag to 8"


def _span(text: str, start: int, end: int, context: int = 50) -> str:
    """The mention with some context either side, on one line."""
    lo, hi = max(0, start - context), min(len(text), end + context)
    snippet = " ".join(text[lo:hi].split())
    return ("…" if lo else "") + snippet + ("…" if hi < len(text) else "")


def from_json(diagnosis: Mapping[str, Any], markdown: str = "") -> Answer:
    """Our diagnose output: fixes ordered by rank, ``avoid`` ids, causes in the order given."""
    fixes = [f for f in diagnosis.get("fixes") or [] if isinstance(f, Mapping) and f.get("id")]
    ranked = sorted(enumerate(fixes), key=lambda p: (_rank(p[1].get("rank")), p[0]))
    recommended = _unique(f["id"] for _, f in ranked)
    return Answer(
        recommended=recommended,
        avoided=_unique(a["id"] for a in diagnosis.get("avoid") or [] if isinstance(a, Mapping) and a.get("id")),
        causes=_unique(c["id"] for c in diagnosis.get("causes") or [] if isinstance(c, Mapping) and c.get("id")),
        first_fix=recommended[0] if recommended else None,
        text=json.dumps(diagnosis, ensure_ascii=False) + "\n" + markdown,
        source="json",
    )


def _rank(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("inf")


def _unique(items: Any) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)
