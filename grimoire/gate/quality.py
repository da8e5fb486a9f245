"""Rule-based quality score of an entry's text (SPEC §6, seed 004 "Artifact Quality Scoring").

Owns: the five dimensions (specificity, actionability, novelty, verifiability,
consistency), the five red flags, and their combination into one score in
[0, 1]. Everything is computed from the text with compiled regexes; novelty
(the nearest-neighbour similarity) and consistency (an LLM regeneration
check) are passed in by the caller.

Must not: touch a store, embed, call an LLM or log. It is pure and cheap
(0.1–0.3 ms for a one-sentence entry) so it can run on every candidate.

Scoring choices, each meant to be read by the owner when a score surprises:
- specificity counts concrete tokens (numbers, numbers with units, clock
  times, dates, addresses, hashes, block references, token symbols,
  thresholds) as points saturating ``1 − 2^(−points/1.25)`` (one quantity
  with a unit ≈ 0.56, two concrete items ≈ 0.8), then multiplies by 0.75 per
  hedging word (may, might, possibly, ...);
- actionability is 1.0 for a condition plus a directive ("When X, do Y",
  "Avoid Y when X", "During X, halve Y"), 0.6 for a directive alone, 0.4 for
  an if/when condition alone and 0.25 for an implicit trigger (a numeric
  threshold, a time window, a temporal preposition);
- verifiability sums evidence weights (tx hash 1.0, block 0.7, address 0.6,
  date or unix timestamp 0.5, UTC clock time 0.25, measured quantity 0.25
  each up to 0.5), capped at 1;
- each red-flag *kind* costs ``red_flag_penalty`` once (at most five).
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from grimoire.config import QualityConfig
from grimoire.errors import ConfigError, ValidationError

__all__ = [
    "DIMENSIONS",
    "RED_FLAGS",
    "QualityScore",
    "actionability_score",
    "find_red_flags",
    "hedge_count",
    "score_quality",
    "specificity_score",
    "text_dimensions",
    "verifiability_score",
]

DIMENSIONS = ("specificity", "actionability", "novelty", "verifiability", "consistency")
RED_FLAGS = ("empty_rhetoric", "weasel_words", "unverified_causal", "self_praise", "tautology")

# Patterns are written in lower case and run on an ASCII-lowered copy of the
# text: 3× faster than re.IGNORECASE, and str.translate keeps every index, so
# spans found in the copy are valid in the original (token symbols need case).
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


_NUM = r"[-+]?\$?\d+(?:[,_]\d{3})*(?:\.\d+)?"
_DASH = r"\s*(?:[-–—]|to)\s*"
_AMPM = r"[ap]\.?m\.?(?![a-z])"
_TZ = r"(?:\s*(?:utc|gmt|z)\b)?"

# Evidence patterns, most specific first: each match masks its span so that the
# digits of a hash or a time are not counted again as plain numbers.
# (name, pattern, specificity points, verifiability points)
_EVIDENCE: tuple[tuple[str, re.Pattern[str], float, float], ...] = (
    ("tx_hash", re.compile(r"\b0x[0-9a-f]{64}\b"), 2.0, 1.0),
    ("address", re.compile(r"\b0x[0-9a-f]{40}\b"), 1.5, 0.6),
    ("hex", re.compile(r"\b0x[0-9a-f]{4,}\b"), 0.5, 0.1),
    ("datetime", re.compile(r"\b\d{4}-\d{2}-\d{2}"
                            r"(?:[t ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?z?)?\b"), 1.5, 0.5),
    ("block", re.compile(r"\bblocks?\s*(?:#|no\.?|number|height)?\s*" + _NUM
                         + r"(?:" + _DASH + _NUM + r")?"), 1.5, 0.7),
    ("unix_time", re.compile(r"\b\d{10}(?:\d{3})?\b"), 1.0, 0.5),
    ("clock", re.compile(r"\b\d{1,2}(?::\d{2}){1,2}\s*(?:" + _AMPM + r")?(?:" + _DASH
                         + r"\d{1,2}(?::\d{2}){0,2}\s*(?:" + _AMPM + r")?)?" + _TZ), 1.0, 0.0),
    ("clock", re.compile(r"\b\d{1,2}(?:" + _DASH + r"\d{1,2})?\s*" + _AMPM + _TZ), 1.0, 0.0),
    ("weekday", re.compile(r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b"), 0.5, 0.0),
    ("quantity", re.compile(_NUM + r"\s*(?:%|percent\b|gwei\b|wei\b|bps\b|basis points\b|"
                            r"eth\b|usd[ct]?\b|dai\b|x\b|ms\b|s\b|secs?\b|seconds?\b|mins?\b|"
                            r"minutes?\b|h\b|hrs?\b|hours?\b|days?\b|blocks?\b|txs?\b|"
                            r"episodes?\b|swaps?\b|trades?\b)"), 1.5, 0.25),
    ("number", re.compile(r"(?<![\w.])" + _NUM + r"(?![\w])"), 1.0, 0.0),
)
_RANGE = re.compile(r"\d\s*(?:[-–—]|to)\s*\d")
_UTC = re.compile(r"\b(?:utc|gmt)\b|\d{2}z\b")
_THRESHOLD = re.compile(r"(?:\b(?:below|above|under|over|exceeds?|exceeding|at least|at most|"
                        r"more than|less than|greater than|fewer than|between)\b|[<>]=?|≥|≤)\s*"
                        r"\$?\d")
_SYMBOL = re.compile(r"\b[A-Z][A-Z0-9]{1,5}(?:/[A-Z][A-Z0-9]{1,5})?\b")
_CAPS_WORDS = _wordset(
    "IF THEN WHEN ELSE AND OR NOT DO DONT NO YES AM PM UTC GMT THE AN IT IS OK NB ALL AVOID "
    "NEVER ALWAYS PREFER NOTE TODO WARNING ALERT IMPORTANT I WE ME MY BUT SO TO OF IN ON AT "
    "BY FOR WITH UNLESS ONLY"
)
_HEDGE = re.compile(
    r"\b(?:may|might|maybe|possibly|perhaps|could|somewhat|generally|probably|likely|"
    r"seems?|seemingly|appears?|apparently|arguably|sometimes|occasionally|potentially|"
    r"presumably|supposedly|kind of|sort of|more or less|tends? to|in some cases|it depends)\b")

_CONDITION = re.compile(r"\b(?:if|when|whenever|once|unless|as soon as|in case)\b")
# Temporal prepositions read as a trigger only next to a directive ("During
# high_vol, halve size"); alone they describe ("deployed before the merge").
_WEAK_CONDITION = re.compile(r"\b(?:while|after|before|during)\b")
_IMPERATIVES = _wordset(
    "do avoid prefer use swap rebalance bridge buy sell wait delay defer exit enter reduce "
    "increase lower raise set hedge close open stop check skip hold route split batch schedule "
    "limit cap withdraw deposit add remove pause retry cancel move switch trade execute submit "
    "take keep watch monitor tighten widen lend borrow repay stake unstake harvest claim "
    "allocate rotate trim double halve"
)
# "never"/"always" are directives only at the head of a clause ("Never swap ...");
# mid-sentence they describe ("gas never drops below 5 gwei"), see _LEAD_IN.
_MODAL_DIRECTIVE = re.compile(r"\b(?:should|must|need to|ought to)(?:\s+not)?\s+[a-z]")
_CLAUSE_SPLIT = re.compile(r"[.;:!?,\n]|\bthen\b")
_LEAD_IN = _wordset("always never please first then just don t not")
# "Swap volume rose", "Stop losses are": the verb list doubles as nouns; a clause
# whose second word is a noun head or a finite verb is a description, not an order.
_NOT_IMPERATIVE_NEXT = _wordset(
    "volume volumes fee fees count counts rate rates size sizes price prices activity data "
    "history amount amounts ratio ratios path paths losses loss orders order is are was were "
    "has have had rose fell increased decreased dropped spiked jumped grew"
)

_RHETORIC = re.compile(
    r"\b(?:game[- ]?chang(?:er|ing)|to the moon|moon(?:ing|shot)|revolutionar(?:y|ize)|"
    r"paradigm shift|unprecedented|next[- ]level|mind[- ]blowing|insane(?:ly)?|"
    r"incredible|skyrocket(?:ing|s)?|guaranteed|can'?t lose|huge opportunity|massive gains?|"
    r"best ever|synerg(?:y|ies)|disruptive|once in a lifetime|life[- ]changing)\b")
_WEASEL = re.compile(
    r"\b(?:some (?:people )?(?:say|believe|think|argue)|many (?:people )?(?:believe|say|think|"
    r"feel)|it is (?:known|said|believed|thought|widely believed|often said|commonly accepted)|"
    r"it has been (?:said|suggested|claimed)|experts (?:say|believe|agree)|people say|"
    r"they say|everyone knows|studies (?:show|suggest)|research (?:shows|suggests)|"
    r"critics (?:say|argue)|it is widely|some would say|sources say)\b")
_CAUSAL = re.compile(
    r"\b(?:because|causes?|caused|causing|leads? to|led to|results? in|resulted in|due to|"
    r"drives?|driven by|triggers?|triggered|therefore|hence|which is why|that is why|"
    r"is why)\b")
_SELF_PRAISE = re.compile(
    r"\b(?:brilliant|genius|flawless(?:ly)?|impeccabl[ey]|masterful(?:ly)?|"
    r"(?:i|we)(?:\s+(?:am|are|was|were)|['’]m|['’]re)\s+(?:so\s+|very\s+|really\s+)?"
    r"(?:always\s+right|great|amazing|awesome|the best|smart|excellent|incredible|"
    r"unstoppable|perfect)|"
    r"(?:my|our)\s+(?:excellent|perfect|superb|amazing|great|superior|outstanding)\b|"
    r"(?:i|we)\s+(?:never|don't|do not)\s+(?:lose|fail|miss)|i\s+nailed)")
_TAUTOLOGY_PHRASES = re.compile(
    r"\b(?:it is what it is|what will be,? will be|what happens,? happens|"
    r"boys will be boys|it's what it is)\b")
_COPULAS = ("is", "are", "was", "were", "means", "equals")
_X_IS_X = re.compile(
    r"\b(\w+(?:\s+\w+){0,3})\s+(?:is|are|was|were|means|equals)\s+(?:just\s+|simply\s+|"
    r"always\s+|still\s+)?\1(?=\s*(?:[.,;:!?]|$|\b(?:and|but|because|so|when|if)\b))")
_TAUT_SPLIT = re.compile(
    r"[,.;:!?\n]|\b(?:because|since|so|therefore|thus|hence|when|whenever|if|then|and|"
    r"which means|means|implies)\b")
_WORD = re.compile(r"[a-z0-9_]+")
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True, slots=True)
class QualityScore:
    """The total in [0, 1], the five dimension values and the red flags raised."""

    total: float
    dimensions: Mapping[str, float] = field(default_factory=dict)
    red_flags: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "dimensions": dict(self.dimensions),
            "red_flags": list(self.red_flags),
        }


def _check_text(text: object) -> str:
    if not isinstance(text, str):
        raise ValidationError(f"must be a string, got {type(text).__name__}", field="text")
    if not text.strip():
        raise ValidationError("must not be empty", field="text")
    return text


@dataclass(frozen=True, slots=True)
class _Analysis:
    """One pass over the text, shared by the dimensions and the red flags."""

    low: str
    spec_points: float
    verif_points: float
    quantities: int
    hedges: int
    clock: bool
    threshold: bool


def _analyse(text: str) -> _Analysis:
    low = text.translate(_ASCII_LOWER)
    masked = low
    spec = verif = 0.0
    quantities = 0
    clock = False
    for name, pattern, spec_points, verif_points in _EVIDENCE:
        matches = list(pattern.finditer(masked))
        for match in matches:
            spec += spec_points
            if name == "quantity":
                quantities += 1  # verifiability credits quantities with a cap, below
            elif name == "clock":
                clock = True
                # A window names two instants; a time zone makes it checkable.
                spec += 0.5 * bool(_RANGE.search(match.group(0)))
                if _UTC.search(match.group(0)):
                    spec += 0.5
                    verif += 0.25
            else:
                verif += verif_points
        # Mask with spaces (not removal) so later patterns keep their word boundaries.
        for match in reversed(matches):
            masked = masked[: match.start()] + " " * len(match.group(0)) + masked[match.end():]
    symbols = sum(
        1
        for m in _SYMBOL.finditer(text)
        if m.group(0) not in _CAPS_WORDS and not masked[m.start():m.end()].isspace()
    )
    thresholds = len(_THRESHOLD.findall(low))
    spec += 0.5 * symbols + 0.5 * thresholds
    return _Analysis(low, spec, verif, quantities, len(_HEDGE.findall(low)), clock,
                     thresholds > 0)


def hedge_count(text: str) -> int:
    """Number of hedging words and phrases (may, might, possibly, tends to, ...)."""
    return len(_HEDGE.findall(_check_text(text).translate(_ASCII_LOWER)))


def _specificity(a: _Analysis) -> float:
    return float((1.0 - 2.0 ** (-a.spec_points / 1.25)) * 0.75 ** a.hedges)


def specificity_score(text: str) -> float:
    """Concrete claims vs vague generalities, in [0, 1]."""
    return _specificity(_analyse(_check_text(text)))


def _has_directive(low: str) -> bool:
    if _MODAL_DIRECTIVE.search(low):
        return True
    for clause in _CLAUSE_SPLIT.split(low):
        words = _WORD.findall(clause)
        while words and words[0] in _LEAD_IN:
            words = words[1:]
        if words and words[0] in _IMPERATIVES and (
            len(words) == 1 or words[1] not in _NOT_IMPERATIVE_NEXT
        ):
            return True
    return False


def _actionability(a: _Analysis) -> float:
    condition = _CONDITION.search(a.low) is not None
    weak = _WEAK_CONDITION.search(a.low) is not None
    if _has_directive(a.low):
        return 1.0 if condition or weak else 0.6
    if condition:
        return 0.4
    return 0.25 if weak or a.threshold or a.clock else 0.0


def actionability_score(text: str) -> float:
    """Does the text lead to a concrete action: IF–THEN / trigger + directive, in [0, 1]."""
    return _actionability(_analyse(_check_text(text)))


def _verifiability(a: _Analysis) -> float:
    # A measured quantity (10 gwei, 35 bps) can be checked against history, but a
    # list of them is not an on-chain reference: their share is capped at 0.5.
    return min(1.0, a.verif_points + min(0.5, 0.25 * a.quantities))


def verifiability_score(text: str) -> float:
    """References checkable against external data (hashes, blocks, addresses, times), in [0, 1]."""
    return _verifiability(_analyse(_check_text(text)))


def text_dimensions(text: str) -> dict[str, float]:
    """Specificity, actionability and verifiability of ``text`` from one analysis pass."""
    analysis = _analyse(_check_text(text))
    return {
        "specificity": _specificity(analysis),
        "actionability": _actionability(analysis),
        "verifiability": _verifiability(analysis),
    }


def _tautological(low: str) -> bool:
    # The backreference scan is the costliest pattern: run it only if a copula is there.
    copula = any(f" {verb} " in low for verb in _COPULAS)
    if _TAUTOLOGY_PHRASES.search(low) or (copula and _X_IS_X.search(low)):
        return True
    seen: set[tuple[str, ...]] = set()
    for clause in _TAUT_SPLIT.split(low):
        words = tuple(_WORD.findall(clause))
        if len(words) < 2:
            continue
        if words in seen:
            return True
        seen.add(words)
    return False


def _red_flags(a: _Analysis) -> tuple[str, ...]:
    flags: list[str] = []
    if _RHETORIC.search(a.low):
        flags.append("empty_rhetoric")
    if a.hedges >= 2 or _WEASEL.search(a.low):
        flags.append("weasel_words")
    if _CAUSAL.search(a.low) and not _DIGIT.search(a.low):
        flags.append("unverified_causal")
    if _SELF_PRAISE.search(a.low):
        flags.append("self_praise")
    if _tautological(a.low):
        flags.append("tautology")
    return tuple(flags)


def find_red_flags(text: str) -> tuple[str, ...]:
    """The red-flag kinds present, in ``RED_FLAGS`` order.

    Weasel words include stacked hedging (two or more hedges): "markets may
    possibly move" says nothing that could be checked. A causal claim is
    unverified when the text holds no number (hashes, blocks and addresses
    all carry digits).
    """
    return _red_flags(_analyse(_check_text(text)))


def _unit_or(value: float | None, default: float, field: str) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(f"must be a finite number, got {value!r}", field=field)
    return float(value)


def _weights(cfg: QualityConfig) -> dict[str, float]:
    weights = dict(cfg.weights)
    if set(weights) != set(DIMENSIONS):
        raise ConfigError(f"quality.weights must have exactly the keys {', '.join(DIMENSIONS)}")
    if any(not math.isfinite(w) or w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
        raise ConfigError("quality.weights must be non-negative with a positive sum")
    return weights


def score_quality(
    text: str,
    *,
    novelty_similarity: float | None,
    cfg: QualityConfig,
    consistency: float | None = None,
) -> QualityScore:
    """Score ``text`` on the five dimensions, subtract red flags, clamp to [0, 1].

    ``novelty_similarity`` is the maximum cosine to existing entries (None: the
    grimoire has nothing to compare with, so the text is fully novel);
    ``consistency`` comes from an LLM regeneration check, else the neutral
    ``cfg.neutral_consistency``. Weights are normalised by their sum so that
    a config whose weights do not add up to 1 still yields a score in [0, 1].
    """
    _check_text(text)
    similarity = _unit_or(novelty_similarity, 0.0, "novelty_similarity")
    if not -1.0 - 1e-6 <= similarity <= 1.0 + 1e-6:
        raise ValidationError(f"must be a cosine in [-1, 1], got {similarity}",
                              field="novelty_similarity")
    consistent = _unit_or(consistency, cfg.neutral_consistency, "consistency")
    if not 0.0 <= consistent <= 1.0:
        raise ValidationError(f"must be in [0, 1], got {consistent}", field="consistency")
    analysis = _analyse(text)
    dimensions = {
        "specificity": _specificity(analysis),
        "actionability": _actionability(analysis),
        "novelty": min(1.0, max(0.0, 1.0 - similarity)),
        "verifiability": _verifiability(analysis),
        "consistency": consistent,
    }
    weights = _weights(cfg)
    weighted = sum(weights[k] * dimensions[k] for k in DIMENSIONS) / sum(weights.values())
    flags = _red_flags(analysis)
    total = min(1.0, max(0.0, weighted - cfg.red_flag_penalty * len(flags)))
    return QualityScore(total=total, dimensions=dimensions, red_flags=flags)
