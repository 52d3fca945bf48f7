"""The user's free-text question -> QuestionFacts (language, model, topics, numbers, stated settings).

Every word it recognises is a pattern in knowledge/vocabulary.yaml (models, tasks, topics with
English and Chinese keywords, layout spellings and on/off settings, GPU counts, memory figures and
their roles, claims such as "expandable_segments already set") or an alias in knowledge/gpus.yaml;
this module only applies them.  Patterns are matched case-insensitively with ASCII word boundaries,
so "LoRA" is found in Chinese "fine-tune with LoRA" written without spaces as well as in "LoRA + SP".  A pattern
may name shared fragments as
{word}: {gpu} (any GPU name), {num} (a number in digits or words), {figure} (a memory figure's place)
and the layout words of vocabulary.yaml layout_words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import lru_cache
from typing import Any

from ..errors import UserError
from ..facts import QuestionFacts, TrainingConfig
from ..knowledge import Knowledge
from ..recognize import lowered, required_any
from .gpu import ALIAS_LEFT, find_gpus, gpu_pattern

FLAGS = re.I | re.A
_CONFIG_FIELDS = set(TrainingConfig.__dataclass_fields__)
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_FIGURE_MARK = "\x00"  # where the figure stands in the text an `around` role pattern sees
_SKIP = object()


@lru_cache(maxsize=2048)
def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, FLAGS)


@lru_cache(maxsize=1024)
def _needles(rx: re.Pattern[str]) -> tuple[str, ...] | None:
    """Lower-case texts one of which every match of ``rx`` holds (recognize.required_any), or None."""
    return required_any(rx.pattern)


def _may_match(rx: re.Pattern[str], low: str | None) -> bool:
    """False when ``low`` (the text in lower case, None where case folding could hide a match) holds none of the
    pattern's needles: a substring test instead of a scan with the pattern, which is what most patterns get."""
    needles = _needles(rx)
    return needles is None or low is None or any(n in low for n in needles)


def _expand(pattern: str, words: Mapping[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: words.get(m.group(1), m.group(0)), pattern)


_GROUP_NAME = re.compile(r"\(\?P<\w+>")


def _layout_rx(pattern: str, words: Mapping[str, str]) -> re.Pattern[str]:
    """A layout pattern.  One that opens with ``{if}`` (some twenty lookbehinds: "if", "should I", ...) first
    looks ahead for the rest, so the lookbehinds run only where the statement can start, not at every position
    of the text: the same matches, in a quarter of the time."""
    if not pattern.startswith("{if}"):
        return _rx(_expand(pattern, words))
    rest = _expand(pattern[len("{if}"):], words)
    return _rx(f"(?={_GROUP_NAME.sub('(?:', rest)}){_expand('{if}', words)}{rest}")


def _vocab(kb: Any) -> Mapping[str, Any]:
    return kb.tables.get("vocabulary") or {}


_ABSURD_DIGITS = re.compile(r"\d{100,}")  # no figure in a question is this long: read it as no number


# What people type, with an OOM message or a config excerpt pasted in, is a few KB.  The parser runs
# some thirty patterns over the text, so its time grows with the length (~1 s at 16 KB crafted).
MAX_QUESTION_CHARS = 16 * 1024


def parse_question(text: str | None, kb: Knowledge) -> QuestionFacts:
    """Read what a question states; anything it does not state stays unknown."""
    if not text or not text.strip():
        return QuestionFacts()
    if len(text) > MAX_QUESTION_CHARS:
        raise UserError(f"question: {len(text)} characters is more than the {MAX_QUESTION_CHARS} a question needs; "
                        "pass a pasted log with --log FILE (or --log - for stdin) and a config with --config")
    vocab = _vocab(kb)
    q = QuestionFacts(provided=True, text=text, lang=_language(text, vocab))
    text = _ABSURD_DIGITS.sub(lambda m: "#" * len(m.group()), text)  # int() refuses > 4300 digits
    words = {"gpu": _any_gpu(kb, vocab), "num": _num_pattern(vocab), "figure": _FIGURE_MARK}
    gpus = list(find_gpus(text, kb))
    q.gpu_name = _gpu_name(text, gpus, vocab)
    model = _model(text, vocab)
    if model is not None and model.get("preset", True):
        q.model_name = model["name"]
    else:
        q.model_size_b = (model or {}).get("size_b") or _model_size(text, vocab)
    q.model_vocab = next((int(f["vocab"]) for f in vocab.get("family_vocab") or []
                          if any(_rx(p).search(text) for p in f["patterns"])), None)
    q.topics = _topics(without_small(text, kb), vocab)
    q.largest_numel = _largest_numel(text)
    q.batch_size = _bare_batch_size(text, vocab)
    q.memory_figures = _memory_figures(text, vocab, words)
    q.memory_bytes = _failure_figure(q.memory_figures, text, vocab)
    q.gpu_nominal_gb = next((f["nominal_gb"] for f in q.memory_figures if f.get("nominal_gb")), None)
    q.num_gpus = _gpu_count(text, vocab, kb, words)
    own = _blank(without_small(text, kb), [vocab["auxiliary_settings"]] if vocab.get("auxiliary_settings") else [])
    q.layout = _layout(_mask(own, [(s, e) for s, e, _ in gpus]), vocab)
    # not the ref's ("Is DPO + LoRA supported?" runs no LoRA), nor an adapter only asked about ("must I use LoRA?")
    task = _task(_blank_asked(own, vocab, "peft"), vocab)
    if task:
        q.layout["task"] = task
    q.env, claimed = _claims(_blank(own, vocab.get("not_stated") or []), vocab)
    for key, value in claimed.items():
        q.layout.setdefault(key, value)
    q.named = named_in(text, vocab)
    q.rl_batch = rl_batch_in(text, vocab)
    return q


def rl_batch_in(text: str, vocab: Mapping[str, Any]) -> dict[str, int]:
    """What RL framework keys the text sets say of the log-prob pass (vocabulary.yaml rl_batch): each role's first
    value. A key counts as the last part of a dotted path or a flag, '-' and '_' alike, its value after '=', ':' or
    a space; "12k" is 12 x 1024 (how sequence lengths are written)."""
    found: dict[str, int] = {}
    for entry in vocab.get("rl_batch") or []:
        m = _rl_key_rx(tuple(entry["keys"])).search(text)
        if m and entry["role"] not in found:
            value = int(m.group("v")) * (1024 if m.group("k") else 1)
            if value > 0:
                found[entry["role"]] = value
    return found


@lru_cache(maxsize=64)
def _rl_key_rx(keys: tuple[str, ...]) -> re.Pattern[str]:
    longest_first = sorted(keys, key=len, reverse=True)
    spelled = "|".join(re.escape(k).replace("_", "[_-]").replace(r"\.", r"[.]") for k in longest_first)
    return re.compile(rf"(?<![\w-])(?:--)?(?:[\w-]+\.)*(?:{spelled})\s*[=:\uff1a]?\s*"
                      rf"(?P<v>\d{{1,7}})(?P<k>[kK])?(?!\w|\.\d)")  # a full stop may end the sentence


MAX_NAMED = 16  # a pasted config names dozens; the answer lists the first few the user wrote


def name_key(name: str) -> str:
    """A name as compared across spellings: ``--max-tokens-per-gpu`` ~ ``max_tokens_per_gpu``."""
    return name.lstrip("-").replace("-", "_").lower()


def named_in(text: str, vocab: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The settings, flags, environment variables, classes and files ``text`` names (vocabulary.yaml ``named``),
    in the order written, each once, with the value written beside it where one is: what the user points at in
    their own words, which the answer lists so the agent sees which of them the helper knows."""
    table = vocab.get("named") or {}
    ignore = {name_key(w) for w in table.get("ignore") or []}
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, str, str | None]] = []
    for pattern in table.get("patterns") or []:
        for m in _rx(pattern).finditer(text):
            start, end = m.span("name")
            if any(start < e and s < end for s, e in taken):
                continue
            taken.append((start, end))
            groups = m.groupdict()
            value = next((g for g in ("value", "value2") if groups.get(g) is not None), None)
            found.append((start, m.group("name"), text[start:m.end(value)] if value else None))
    out: dict[str, dict[str, Any]] = {}
    for _, name, typed in sorted(found):
        key = name_key(name)
        if key in ignore:
            continue
        if key not in out or (typed is not None and out[key]["text"] == out[key]["name"]):
            out[key] = {"text": typed or name, "name": name, "key": key}  # text: with its value, as typed
    return list(out.values())[:MAX_NAMED]


def _language(text: str, vocab: Mapping[str, Any]) -> str:
    for lang in vocab.get("languages") or []:
        if re.search(lang["pattern"], text):
            return lang["id"]
    return "en"


def _blank(text: str, patterns: Iterable[str]) -> str:
    """``text`` with every match of ``patterns`` overwritten (same length, so positions still line up)."""
    for pattern in patterns:
        text = _rx(pattern).sub(lambda m: " " * len(m.group()), text)
    return text


_SIZE_BEFORE = re.compile(r"\d+(?:\.\d+)?\s*G(?:i?B)?[\s\-_]*$", FLAGS)


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    """Blank GPU mentions (and the size written next to them) so "H100 80GB" is not read as a layout number."""
    chars = list(text)
    # \uff08 is the full-width "(" a Chinese question writes after a GPU name
    size = _rx(r"[\s\-_(\uff08]*\d+(?:\.\d+)?\s*G(?:i?B)?\b")
    for start, end in spans:
        m = size.match(text, end)
        if m:
            end = m.end()
        head = max(0, start - 24)  # a size written just before the name ("80G H200"); bounded, so it stays linear
        before = _SIZE_BEFORE.search(text, head, start)
        if before:
            start = before.start()
        for i in range(start, end):
            chars[i] = "#"
    return "".join(chars)


# --- GPUs ----------------------------------------------------------------------------------------


def _gpu_name(text: str, gpus: list[tuple[int, int, Mapping[str, Any]]], vocab: Mapping[str, Any]) -> str | None:
    """The first GPU named, or a later mention that spells the same name out further ("8*A100 ... 24 A100-40G").

    None when the first GPU named is one gpus.yaml lacks ("OOM on the 24G A10; would an A100 80G do?")."""
    if not gpus:
        return None
    start, end, entry = gpus[0]
    unknown = [_rx(rf"{ALIAS_LEFT}(?:{p})") for p in vocab.get("other_gpus") or []]
    if any(r.search(text, 0, start) for r in unknown):
        return None
    head = text[start:end].lower()
    for s, e, later in gpus[1:]:
        if e - s > end - start and text[s:e].lower().startswith(head):
            return later["name"]
    return entry["name"]


def _any_gpu(kb: Any, vocab: Mapping[str, Any]) -> str:
    """{gpu}: a gpus.yaml alias or one of vocabulary.yaml other_gpus."""
    others = "|".join(f"(?:{p})" for p in vocab.get("other_gpus") or [])
    known = gpu_pattern(kb)
    return f"(?:{known}|{others})" if others else known


def _num_pattern(vocab: Mapping[str, Any]) -> str:
    """{num}: digits, an English number word, or up to three Chinese numerals."""
    words = [str(w) for w in (vocab.get("numbers") or {})]
    latin = sorted((w for w in words if w.isascii()), key=len, reverse=True)
    cjk = "".join(sorted({w for w in words if not w.isascii() and len(w) == 1}))
    parts = [r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?![\d.])"]  # "1,024" with its thousands separator
    if latin:
        parts.append(r"\b(?:" + "|".join(re.escape(w) for w in latin) + r")\b")
    if cjk:
        parts.append(f"[{re.escape(cjk)}]{{1,3}}")
    return "(?:" + "|".join(parts) + ")"


def _int(text: str | None, vocab: Mapping[str, Any]) -> int | None:
    """A count written in digits or words ("8", "eight", liang "two", shiliu "sixteen"); None when it is not one."""
    if not text:
        return None
    t = text.strip().lower()
    if t.isascii() and t.replace(",", "").isdigit():  # "1,024"
        t = t.replace(",", "")
        return int(t)
    words = {str(k).lower(): int(v) for k, v in (vocab.get("numbers") or {}).items()}
    if t in words:
        return words[t]
    ten = next((w for w, v in words.items() if v == 10 and not w.isascii()), None)
    if ten and ten in t:  # Chinese: [tens] shi (ten) [ones]
        tens, _, ones = t.partition(ten)
        hi = words.get(tens, 0) if tens else 1
        lo = words.get(ones, 0) if ones else 0
        if (tens and not 1 <= hi <= 9) or (ones and not 1 <= lo <= 9):
            return None
        return hi * 10 + lo
    return None


def _gpu_count(text: str, vocab: Mapping[str, Any], kb: Any, words: Mapping[str, str]) -> int | None:
    """The run's GPU count: the strongest pattern's first count - unless another count stands in the clause that says
    something failed and this one does not ("a DGX-2 with 16 V100s ... loading it on 8 of them OOMs": the failing
    run had 8, metaseq#131)."""
    found = list(_counts(text, vocab, kb, words, at=True))
    if len({count for _, count in found}) > 1:
        failed = _failing_clause(text, vocab)
        # one count of several GPUs said to fail, and not the first one named ("the last card OOMs", "one 24G card
        # cannot hold it" name a card, not the run's count)
        failing = {count for start, count in found if failed(start) and count > 1}
        if len(failing) == 1 and not failed(found[0][0]):
            return failing.pop()
    return found[0][1] if found else None


def _counts(text: str, vocab: Mapping[str, Any], kb: Any, words: Mapping[str, str], at: bool = False) -> Iterator[Any]:
    """Each GPU count the vocabulary's gpu_count patterns read, the strongest pattern group first (with ``at``:
    as (position, count))."""
    text = _blank(text, (_expand(p, words) for p in vocab.get("gpu_count_ignore") or []))
    low = lowered(text)
    for group in vocab.get("gpu_count") or []:
        for pattern in group.get("patterns") or []:
            rx = _rx(_expand(pattern, words))
            if not _may_match(rx, low):
                continue
            for m in rx.finditer(text):
                count = _count_of(m.groupdict(), vocab, kb)
                if count:
                    yield (m.start(), count) if at else count


def gpu_counts_in(text: str, kb: Knowledge) -> list[int]:
    """Every GPU count one clause names ("works with n_gpus_per_node=2", "OOMs on 8 cards"), read as the question's
    own GPU count is."""
    vocab = _vocab(kb)
    words = {"gpu": _any_gpu(kb, vocab), "num": _num_pattern(vocab), "figure": _FIGURE_MARK}
    return list(_counts(text, vocab, kb, words))


_MAX_GPUS_PER_NODE = 72  # an NVL72 rack is the largest GPU domain sold as one system


def _count_of(parts: Mapping[str, str | None], vocab: Mapping[str, Any], kb: Any) -> int | None:
    nodes = _int(parts.get("nodes"), vocab)
    if nodes and parts.get("per_node"):
        per_node = _int(parts["per_node"], vocab)
        # a node holds a few GPUs, never thousands: "6 x 3090 GPUs" is six RTX 3090s, not 6 nodes of 3090
        return nodes * per_node if per_node and per_node <= _MAX_GPUS_PER_NODE else None
    if nodes and parts.get("node_gpu"):
        entry = next((e for s, _, e in find_gpus(parts["node_gpu"], kb) if s == 0), None)
        per_node = (entry or {}).get("gpus_per_node")
        return nodes * int(per_node) if per_node else None
    n = _int(parts.get("n"), vocab)
    if n is not None and n > _MAX_GPUS_PER_NODE and any(s == 0 for s, _, _ in find_gpus(str(n), kb)):
        return None  # a GPU's model number, not a count ("3090 xianka x2": RTX 3090 cards)
    return n + 1 if n is not None and parts.get("more") else n  # "n_gpus_per_node > 2": more than two


# --- model ---------------------------------------------------------------------------------------


def model_in_settings(settings: list[str], kb: Knowledge, launch: str = "") -> tuple[str | None, float | None]:
    """The model a run's settings name by its checkpoint path ("pretrain=meta-llama/Meta-Llama-3-8B",
    "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", or a pasted launch command's
    "--model_name_or_path /cache/MODELS/internvl2-4B"): (preset name, None), or (None, size in billions).  A size
    with no preset is read only from a path setting's value (vocabulary.yaml model_path_setting), not from every
    setting's."""
    vocab = _vocab(kb)
    text = "\n".join(s.split("=", 1)[1] for s in settings if "=" in s)[:MAX_QUESTION_CHARS]
    model = _model(text, vocab) if text else None
    if model is not None and model.get("preset", True):
        return model["name"], None
    if model is not None:
        return None, model.get("size_b")
    path = _rx(vocab.get("model_path_setting", r"$^"))
    paths = "\n".join(m.group("v") for line in [*settings, launch[:MAX_QUESTION_CHARS]]
                      for m in path.finditer(line))
    model = _model(paths, vocab) if paths else None
    if model is not None and model.get("preset", True):
        return model["name"], None
    return None, (model or {}).get("size_b") or (_model_size(paths, vocab) if paths else None)


def _model(text: str, vocab: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The vocabulary model the user trains: of its mentions, one in a clause that says it failed, else the first
    (the longest mention where several start together: "Llama 3" inside "Llama 3 8B").  A model named later as an
    alternative ("or a smaller model such as Llama-3.2-1B?") is not the one that ran; a mention followed by another
    size is not it.  A model named in an auxiliary role ("the reward model is Llama-3-8B", or the same in Chinese)
    is the trained one only if no other model or size is named (then the other one, read by ``_model_size``, is)."""
    suffix = vocab.get("model_size_suffix")
    found: dict[bool, list[tuple[int, int, Mapping[str, Any]]]] = {}  # auxiliary role? -> (start, -length, model)
    spans: list[tuple[int, int]] = []  # where the auxiliary models are named
    for model in vocab.get("models") or []:
        matches = [m for pattern in model.get("patterns") or [] for m in _rx(pattern).finditer(text)]
        if suffix and model.get("size_b") is not None and any(
                _other_size(_rx(suffix).match(text[m.end():m.end() + 24]), model["size_b"]) for m in matches):
            continue  # the family named with another size ("DeepSeek-V3-16B"): none of its mentions is this preset
        for m in matches:
            role = _auxiliary(text, m.start(), vocab)
            if role:
                spans.append((m.start(), m.end()))
            found.setdefault(role, []).append((m.start(), m.start() - m.end(), model))
    if False in found:
        mentions = sorted(found[False], key=lambda f: (f[0], f[1]))
        says_failed = _failing_clause(text, vocab)
        failing = [f for f in mentions if says_failed(f[0])]
        return (failing or mentions)[0][2]
    if True in found and _model_size(text, vocab, trained_only=True, besides=spans) is None:
        return min(found[True], key=lambda f: (f[0], f[1]))[2]
    return None


def _other_size(stated: re.Match | None, size_b: float) -> bool:
    """A size written right after a model's name that is not the preset's ("DeepSeek-V3-16B")."""
    return stated is not None and float(stated.group("b")) != float(size_b)


_ROLE_WINDOW = 24  # characters before a model's name in which a role word names its role


def _auxiliary(text: str, start: int, vocab: Mapping[str, Any]) -> bool:
    """A role word (reward / reference / teacher / critic model) right before ``start``: not the trained model."""
    roles = vocab.get("auxiliary_roles")
    return bool(roles) and bool(_rx(roles).search(text[max(0, start - _ROLE_WINDOW):start]))


def _model_size(text: str, vocab: Mapping[str, Any], trained_only: bool = False,
                besides: list[tuple[int, int]] | None = None) -> float | None:
    """Total parameters (billions) written in a model name that no preset matches: "GPT-30B", "gpt2 large(774M)".
    Of several sizes, the one in a clause that says it failed ("0.5B runs fine; with 7B it fails" is the 7B); a size
    named in an auxiliary role ("the reward model is 8B") only when no other is named (never, with ``trained_only``,
    nor one inside the ``besides`` spans: the sizes in the auxiliary models' own names)."""
    found = _sizes(text, vocab)
    trained = [f for f in found if not _auxiliary(text, f[0], vocab)
               and not any(lo <= f[0] < hi for lo, hi in besides or ())]
    if trained_only or trained:
        found = trained
    if len(found) > 1:
        says_failed = _failing_clause(text, vocab)
        for start, size in found:
            if says_failed(start):
                return size
    return found[0][1] if found else None


def _failing_clause(text: str, vocab: Mapping[str, Any]) -> Callable[[int], bool]:
    """Whether the sentence (or clause) of ``text`` around a position says something failed (an OOM word or a
    failure word): the clause bounds and the words are found once per text, then asked for each mention."""
    clause = _rx((vocab.get("memory") or {}).get("clause_break", r"$^"))
    bounds = sorted({0, len(text), *(b.end() for b in (*_SENTENCE_END.finditer(text), *clause.finditer(text)))})
    failing = _rx("|".join([*(w for t in vocab.get("topics") or [] if t["id"] == "oom"
                              for lang in ("en", "zh") for w in (t.get("keywords") or {}).get(lang) or []),
                            vocab.get("failure_words") or r"$^"]))

    def says_failed(start: int) -> bool:
        lo = max(b for b in bounds if b <= start)
        hi = min((b for b in bounds if b > start), default=len(text))
        return bool(failing.search(text, lo, hi))

    return says_failed


def _sizes(text: str, vocab: Mapping[str, Any]) -> list[tuple[int, float]]:
    """(position, billions) of each model size written in ``text``, by the first model_size pattern that matches."""
    found: list[tuple[int, float]] = []
    for pattern in vocab.get("model_size") or []:
        for m in _rx(pattern).finditer(text):
            parts = m.groupdict()
            if parts.get("b"):
                found.append((m.start(), float(parts["b"]) * (int(parts["n"]) if parts.get("n") else 1)))
            elif parts.get("m"):
                found.append((m.start(), float(parts["m"]) / 1000))
        if found:  # the patterns are in order of preference: the first that matches names the sizes
            break
    return found


def model_sizes_in(text: str, kb: Knowledge) -> set[float]:
    """The model sizes (billions of parameters) one clause names: "0.5B", "7B", "8x7B"."""
    return {size for _, size in _sizes(text, _vocab(kb))}


def names_topic(text: str, kb: Knowledge, topic_id: str) -> bool:
    """Whether ``text`` (a clause of a question, read on its own) names one vocabulary topic."""
    return any(_names(text, topic) for topic in _vocab(kb).get("topics") or [] if topic["id"] == topic_id)


# a clause: up to a sentence or clause mark (ASCII or CJK: \u3002 \uff0c \uff1b \uff01 \uff1f) or a line end
_CLAUSE = re.compile(r"[^.,;!?\n\u3002\uff0c\uff1b\uff01\uff1f]+")


def without_small(text: str, kb: Any) -> str:
    """The question without its clauses that say what they name is small ("so weights and optimizer state are
    small", knowledge/situation.yaml small_words): a topic named only to be ruled out is not the question's; nor
    is one named in a question asking whether it is supported ("Is DPO + LoRA supported?": support_asked_words), in
    a clause saying what something supports with the user not in it ("reward model training does not support LoRA":
    capability_words, first_person_words), or in a clause saying the user is considering it ("we're thinking about
    switching to LoRA": considered_words)."""
    table = kb.tables.get("situation") or {}

    def words(key: str) -> list[str]:
        return [w.lower() for lang in (table.get(key) or {}).values() for w in lang or []]

    small, support, considered = words("small_words"), words("support_asked_words"), words("considered_words")
    capability, person = words("capability_words"), words("first_person_words")
    low = text.lower()
    if not any(w in low for w in (*small, *considered, *support, *capability)):
        return text

    # ...but a clause that also says it ran out of memory describes the failure ("with these already very small
    # settings it still OOMs", mosaicml/llm-foundry#468): its small words are the settings, not a component ruled out
    oom = next((tp for tp in (kb.tables.get("vocabulary") or {}).get("topics") or [] if tp.get("id") == "oom"), None)

    def dropped(m: re.Match[str]) -> bool:
        clause = m.group().lower()
        asked = text[m.end():m.end() + 1] in ("?", "\uff1f")
        said_small = any(w in clause for w in small) and not (oom and _names(m.group(), oom))
        return (said_small or any(w in clause for w in considered)
                or asked and any(_word_in(w, clause) for w in support)
                or any(_word_in(w, clause) for w in capability) and not any(_word_in(w, clause) for w in person))

    return _CLAUSE.sub(lambda m: " " * len(m.group()) if dropped(m) else m.group(), text)  # offsets kept


def _word_in(word: str, clause: str) -> bool:
    """``word`` in ``clause`` as a word of its own (Chinese has no word edges: any occurrence)."""
    return bool(re.search(rf"(?<![a-z]){re.escape(word)}(?![a-z])", clause)) if word.isascii() else word in clause


def _topics(text: str, vocab: Mapping[str, Any]) -> list[str]:
    return [topic["id"] for topic in vocab.get("topics") or [] if _names(text, topic)]


def _names(text: str, topic: Mapping[str, Any]) -> bool:
    words = [w for lang in ("en", "zh") for w in (topic.get("keywords") or {}).get(lang) or []]
    return any(_rx(w).search(text) for w in words)


def _task(text: str, vocab: Mapping[str, Any]) -> str | None:
    """The task the run that failed does: of the tasks named, those in a clause that says it failed ("LoRA runs;
    finetuning_type=full quanzcanshu weitiao runs out of memory" is full fine-tuning), else all; the first in the
    vocabulary's order."""
    entries = vocab.get("tasks") or []
    found = [(m.start(), e["id"]) for e in entries for p in e.get("patterns") or [] for m in _rx(p).finditer(text)]
    if len({t for _, t in found}) > 1:
        says_failed = _failing_clause(text, vocab)
        failing = {t for start, t in found if says_failed(start)}
        found = [(start, t) for start, t in found if t in failing] or found
    named = {t for _, t in found}
    return next((e["id"] for e in entries if e["id"] in named), None)


# --- tensor sizes ----------------------------------------------------------------------------------

_SHAPE = re.compile(r"[\[(]\s*(\d{1,12}(?:\s*,\s*\d{1,12}){1,5})\s*,?\s*[\])]")  # [19345706, 128]
_NUMEL = re.compile(r"\bnumel\s*(?:=|:|of|is)?\s*(\d{1,3}(?:,\d{3})+|\d+)\b", re.I)  # numel 2,476,250,368
_PRODUCT = re.compile(r"(?<![\w.])\d{1,7}(?:\s*[*\u00d7]\s*\d{1,7}){2,5}(?![\w.])")  # 16*4096*8*4096


def _largest_numel(text: str) -> int | None:
    """The most elements of one tensor the text writes out (a shape, a numel, a product of sizes), else None."""
    sizes = [math.prod(int(d) for d in re.split(r"\s*,\s*", m.group(1))) for m in _SHAPE.finditer(text)]
    sizes += [int(m.group(1).replace(",", "")) for m in _NUMEL.finditer(text)]
    sizes += [math.prod(int(d) for d in re.split(r"\s*[*\u00d7]\s*", m.group(0))) for m in _PRODUCT.finditer(text)]
    return max(sizes, default=None)


def _bare_batch_size(text: str, vocab: Mapping[str, Any]) -> int | None:
    """The one bare batch size the text writes (vocabulary.yaml bare_batch_size); None where there is none, or
    several that differ."""
    found = {int(m.group("v")) for m in _rx(vocab.get("bare_batch_size", r"$^")).finditer(text)}
    return found.pop() if len(found) == 1 else None


# --- memory figures ------------------------------------------------------------------------------

# \u3002 \uff1b \uff01 \uff1f: the Chinese full stop and the full-width ";", "!", "?"
_SENTENCE_END = re.compile(r"[.;!?\u3002\uff1b\uff01\uff1f\n](?=\s|$)|[\u3002\uff1b\uff01\uff1f\n]")


def _raw_figures(text: str, mem: Mapping[str, Any], units: Mapping[str, float]) -> list[tuple[int, int, float, str]]:
    """(start, end, value, unit) of every figure: a number with its unit, or a bare number under a unit header."""
    out = [(m.start(), m.end(), float(m.group("v").replace(",", "")), m.group("u").lower())
           for m in _rx(mem.get("figure", r"$^")).finditer(text) if m.group("u").lower() in units]
    header, bare = mem.get("header"), mem.get("header_figure")
    if header and bare:
        scope_chars = int(mem.get("header_scope_chars") or 0)
        for h in _rx(header).finditer(text):
            unit = h.group("u").lower()
            if unit not in units:
                continue
            line_end = text.find("\n", h.end())
            scope = text[h.end():min(len(text) if line_end < 0 else line_end, h.end() + scope_chars)]
            for f in _rx(bare).finditer(scope):
                start, end = h.end() + f.start("v"), h.end() + f.end("v")
                if not any(start < e and s < end for s, e, _, _ in out):
                    out.append((start, end, float(f.group("v")), unit))
    return sorted(f for f in out if math.isfinite(f[2]))  # like an absurd digit run: no figure, not Infinity


_SAME_FIGURE = re.compile(r"\s*[(\uff08]\s*(?:~|\u2248|about\s+)?")  # between a figure and its bracketed other unit
_SAME_FIGURE_END = re.compile(r"\s*[)\uff09]")
_CONTRAST = re.compile(r"\b(?:but|whereas|while)\b|\u4f46|\u800c")  # but, whereas, while; dan, er


def _memory_figures(text: str, vocab: Mapping[str, Any], words: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every memory figure with its role (vocabulary.yaml memory.roles): request, free, headroom, peak, oom, ...

    ``before`` patterns see the sentence up to the figure, ``after`` patterns the text right after it, so
    "the last stage peaks at 50 GB" is a peak, "10 GB headroom" a headroom, "OOMs at 58.8 GB" the failure and
    "H100 80GB" a card's capacity (``nominal_gb`` 80: the size the user states for the card).
    """
    mem = vocab.get("memory") or {}
    units = {k.lower(): v for k, v in (vocab.get("units") or {}).items()}
    reach = int(mem.get("before_chars") or 240)
    roles = [(r, [_rx(_expand(p, words)) for p in r.get("before") or []],
              [_rx(_expand(p, words)) for p in r.get("after") or []],
              [_rx(_expand(p, words)) for p in r.get("around") or []],
              [_rx(_expand(p, words)) for p in r.get("unless_after") or []]) for r in mem.get("roles") or []]
    continues = _rx(mem["continues"]) if mem.get("continues") else None
    out: list[dict[str, Any]] = []
    last_end = None
    raw = _raw_figures(text, mem, units)
    for i, (start, end, value, unit) in enumerate(raw):
        if i and out and _SAME_FIGURE.fullmatch(text, raw[i - 1][1], start):  # "19,191 MiB (18.7 GiB)": the same
            out.append({**out[-1], "bytes": value * units[unit], "at": start})  # amount again in another unit
            out[-1].pop("nominal_gb", None)
            last_end = end
            continue
        closing = _SAME_FIGURE_END.match(text, raw[i + 1][1]) if i + 1 < len(raw) else None
        if closing and _SAME_FIGURE.fullmatch(text, end, raw[i + 1][0]):
            end = closing.end()  # what follows the bracket says what the amount is ("... (18.7 GiB) actually live")
        first = max((b.end() for b in _SENTENCE_END.finditer(text, max(0, start - reach), start)),
                    default=max(0, start - reach))
        # "158.5 GiB reserved but only 18.7 GiB live": the words before a contrast name the figure before it
        first = max([first, *(b.end() for b in _CONTRAST.finditer(text, first, start))])
        before, after = text[first:start], text[end:end + 40]
        around = before + _FIGURE_MARK + after
        role = next((r for r, bef, aft, aro, unless in roles
                     if (any(p.search(after) for p in aft) or any(p.search(before) for p in bef)
                         or any(p.search(around) for p in aro)) and not any(p.search(after) for p in unless)), None)
        name = role["role"] if role else None
        if name is None and out and continues and continues.search(text[last_end:start]):
            name = out[-1]["role"]
        fig: dict[str, Any] = {"bytes": value * units[unit], "role": name, "at": start}
        if role and role.get("nominal"):
            base = units.get("gib" if unit.endswith("ib") else "gb") or 1e9
            fig["nominal_gb"] = value * units[unit] / base
        out.append(fig)
        last_end = end
    return out


def _failure_figure(figures: list[dict[str, Any]], text: str, vocab: Mapping[str, Any]) -> float | None:
    """The in-use figure at the failure: the largest figure in the `oom` role; else the one peak, in a sentence
    that says it ran out of memory; else a lone unlabelled figure next to a cue.  A card's capacity is not a usage
    figure."""
    failing = [fig["bytes"] for fig in figures if fig["role"] == "oom"]
    if failing:  # "loaded up to 14g/80g ... went up to 77g/80g, then it ran OOM": the most it held is where it failed
        return max(failing)
    # a card's size, the machine's RAM or the checkpoint's size on disk
    usage = [f for f in figures if f["role"] not in ("capacity", "host-ram", "files")]
    peaks = [f for f in usage if f["role"] == "peak"]
    oom_words = [p for r in (vocab.get("memory") or {}).get("roles") or [] if r["role"] == "oom"
                 for p in r.get("before") or []]
    if len(peaks) == 1 and len(usage) == 1:
        # the peak's own clause says it failed ("peaks at 79 GB right before it OOMs"); "rank 0 OOMs, while the
        # last stage peaks at 50 GB" is another rank's peak
        at = peaks[0]["at"]
        clause = _rx((vocab.get("memory") or {}).get("clause_break", r"$^"))
        bounds = [m for m in (*_SENTENCE_END.finditer(text), *clause.finditer(text))]
        first = max((b.end() for b in bounds if b.end() <= at), default=0)
        end = min((b.start() for b in bounds if b.start() >= at), default=len(text))
        if any(_rx(p.rstrip("$")).search(text, first, end) for p in oom_words):
            return peaks[0]["bytes"]
    unlabelled = [f for f in usage if f["role"] is None]
    if len(unlabelled) != 1 or len(usage) != 1:
        return None
    mem = vocab.get("memory") or {}
    window = int(mem.get("cue_window_chars") or 0)
    at = unlabelled[0]["at"]
    # the cue stands in the figure's own sentence: "... it OOMs. The bf16 params are only 14 GiB" sizes the weights
    start = max([at - window, *(b.end() for b in _SENTENCE_END.finditer(text, 0, at))])
    if any(_rx(c).search(text[max(0, start):at]) for c in mem.get("cues") or []):
        return unlabelled[0]["bytes"]
    return None


# --- layout and claims ---------------------------------------------------------------------------


def _number(text: str) -> int:
    t = text.replace(" ", "").replace(",", "").lower()  # "32,768": a thousands separator
    return int(t[:-1]) * 1024 if t.endswith("k") else int(t)


def _layout_value(entry: Mapping[str, Any], m: re.Match[str], words: Mapping[str, str]) -> Any:
    if "value" in entry:
        return entry["value"]
    raw = m.group("v")
    kind = entry.get("kind") or "int"
    if kind == "word":
        return raw.strip().lower()
    if kind == "list":
        item = _rx(_expand(entry.get("item") or r"[a-z_]\w*", words))
        return [w.group().lower() for w in item.finditer(raw)] or _SKIP
    return _number(raw)


def _vetoed(text: str, vocab: Mapping[str, Any]) -> dict[str, list[tuple[int, int]]]:
    """Field -> the spans of ``text`` that ask about it or would rather not use it (vocabulary.yaml layout ``veto``
    patterns: "should I switch to LoRA", "would rather not turn on full recompute"): no statement inside them."""
    words = vocab.get("layout_words") or {}
    low = lowered(text)
    vetoed: dict[str, list[tuple[int, int]]] = {}
    for entry in vocab.get("layout") or []:
        if entry.get("kind") == "veto":
            spans = vetoed.setdefault(entry["field"], [])
            for pattern in entry.get("patterns") or []:
                rx = _layout_rx(pattern, words)
                if _may_match(rx, low):
                    spans.extend(m.span() for m in rx.finditer(text))
    return vetoed


def _blank_asked(text: str, vocab: Mapping[str, Any], field: str) -> str:
    """``text`` with the clauses that ask about ``field`` blanked ("zhineng zuo LoRA?" - can I only do LoRA?): a
    method asked about is not the one the run uses."""
    chars = list(text)
    for start, end in _vetoed(text, vocab).get(field, ()):
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def _layout(text: str, vocab: Mapping[str, Any]) -> dict[str, Any]:
    """TrainingConfig field -> the value the question states (vocabulary.yaml layout, in its precedence order)."""
    words = vocab.get("layout_words") or {}
    text = _blank(text, vocab.get("layout_ignore") or [])
    entries = vocab.get("layout") or []
    low = lowered(text)
    vetoed = _vetoed(text, vocab)
    found: dict[str, list[tuple[int, int, int, Any]]] = {}
    for rank, entry in enumerate(entries):
        if entry.get("kind") == "veto":
            continue
        spans = vetoed.get(entry["field"], ())
        hit = None
        for pattern in entry.get("patterns") or []:
            rx = _layout_rx(pattern, words)
            if not _may_match(rx, low):
                continue
            for m in rx.finditer(text):
                if any(s <= m.start() and m.end() <= e for s, e in spans):
                    continue
                value = _layout_value(entry, m, words)
                if value is not _SKIP:
                    hit = (rank, m.start(), m.end(), value)
                break
            if hit:
                found.setdefault(entry["field"], []).append(hit)
                break
    layout: dict[str, Any] = {}
    for name, hits in found.items():
        # "--use-distributed-optimizer" inside "without --use-distributed-optimizer" is not a statement of its own
        kept = [h for h in hits if not any(o[3] != h[3] and o[1] <= h[1] and h[2] <= o[2] and o[2] - o[1] > h[2] - h[1]
                                           for o in hits)]
        layout[name] = min(kept or hits, key=lambda h: (h[0], h[1]))[3]
    return layout


def _claims(text: str, vocab: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(EnvFacts field -> value, TrainingConfig field -> value) the question states."""
    env: dict[str, Any] = {}
    config: dict[str, Any] = {}
    for claim in vocab.get("claims") or []:
        if not any(_rx(p).search(text) for p in claim.get("patterns") or []):
            continue
        for key, value in (claim.get("sets") or {}).items():
            scope, _, name = key.partition(".")
            if scope == "env":
                env[name] = value
            elif scope == "config" and name in _CONFIG_FIELDS:
                config[name] = value
    return env, config
