"""Relevance first: the gate between what the query matches and what only a boost lifts.

Every pooled item gets two pieces of evidence that it answers the query, each relative
to the query's own best, so no constant depends on the embedder or the corpus:

- *lexical*: the share of the query's content terms the item's text contains, each
  term weighted by its inverse document frequency (a rare name counts, "WETH" in a
  WETH agent's memory barely does), divided by the best share in the pool;
- *semantic*: the item's cosine to the query above the query's *background* (its mean
  cosine to the stored episodes: what an unrelated memory scores with this embedder),
  divided by the best item's margin over the same background.

``relevance = max(lexical, semantic)`` in [0, 1]. An item is *relevant* when its
relevance is at least ``retrieval.relevance_floor`` (0.5: at least half as well
matched as the query's best match, on either scale). An item whose whole text the
query repeats (its words, in order, inside the query's, and lexically relevant) is
*repeated*.

Tiers: 2 repeated, 1 relevant, 0 the rest. The rerank, replay, the causal stream and
every other boost order items *within* a tier; they never move one across. The
score that ranks (and is printed) is ``tier + s / (1 + s)`` with ``s`` the boosted
score (≥ 0), so it sorts by tier first and by ``s`` inside it. The one exception is a
chain walk, where the causal stream is what the caller asked for: a "why" question or
a retrieval anchored on an explicit ``event_id``. There an item the causal stream
boosted counts as relevant, and a why question's repetition of the event's own text
does not put that event first (the question asks for its causes).

Owns: the evidence, the tiers and the gated score. Must not read a store (the caller
passes the query's terms with their weights, the background and the candidates).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from grimoire.errors import ValidationError
from grimoire.retrieval.candidates import Candidate, Vector

__all__ = ["Evidence", "evidence", "gated", "idf", "repeats", "tiers"]

_TOKEN = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Evidence:
    """An item's match to the query, each part in [0, 1] relative to the query's best."""

    lexical: float
    semantic: float
    repeated: bool = False

    @property
    def relevance(self) -> float:
        return max(self.lexical, self.semantic)


def idf(share: float, sample: int) -> float:
    """BM25's inverse document frequency of a term in ``share`` of ``sample`` documents
    (``ln(1 + (N − df + 0.5) / (df + 0.5))``); 1.0 without a sample (every term alike)."""
    if sample <= 0:
        return 1.0
    df = max(0.0, min(1.0, share)) * sample
    return math.log(1.0 + (sample - df + 0.5) / (df + 0.5))


@functools.lru_cache(maxsize=8192)
def _tokens(text: str) -> tuple[str, ...]:
    """The text's words, lower-cased, in order; cached (the same items' texts are read call
    after call; a tuple, so the cached value cannot be changed by a caller)."""
    return tuple(t.lower() for t in _TOKEN.findall(text))


def repeats(query: str, text: str) -> bool:
    """Whether ``text``'s words occur, in order and contiguous, among ``query``'s (case and
    punctuation aside): the query repeats the item."""
    words, said = _tokens(text), _tokens(query)
    n = len(words)
    if n == 0 or n > len(said):
        return False
    return any(said[i:i + n] == words for i in range(len(said) - n + 1))


def evidence(query: str, query_vector: Vector, terms: Mapping[str, float],
             candidates: Sequence[Candidate], background: float | None,
             terms_of: Callable[[str], Collection[str]], floor: float,
             ) -> dict[str, Evidence]:
    """Each candidate's evidence (see the module doc).

    ``terms``: the query's content terms (as ``terms_of`` normalises them) with their
    weights (IDF); ``background``: the query's mean cosine to unrelated memories (None:
    the pool's own mean stands in).
    """
    _check_floor(floor)
    if not candidates:
        return {}
    total = sum(w for w in terms.values() if w > 0.0)
    lexical = []
    for c in candidates:
        if total <= 0.0:
            lexical.append(0.0)
            continue
        have = terms_of(c.content)
        lexical.append(sum(w for t, w in terms.items() if w > 0.0 and t in have) / total)
    cosines = np.array([c.vector for c in candidates], dtype=np.float32) @ query_vector
    base = float(np.mean(cosines)) if background is None else float(background)
    best_lex = max(lexical)
    margin = float(np.max(cosines)) - base
    out: dict[str, Evidence] = {}
    for row, c in enumerate(candidates):
        lex = lexical[row] / best_lex if best_lex > 0.0 else 0.0
        sem = (float(cosines[row]) - base) / margin if margin > 0.0 else 0.0
        lex, sem = min(1.0, max(0.0, lex)), min(1.0, max(0.0, sem))
        out[c.id] = Evidence(lex, sem, lex >= floor and repeats(query, c.content))
    return out


def tiers(found: Mapping[str, Evidence], floor: float, *, chain: Collection[str] = (),
          why: bool = False) -> dict[str, int]:
    """2 repeated (not for a why question), 1 relevant or on the walked ``chain``, 0 else."""
    _check_floor(floor)
    out: dict[str, int] = {}
    for item, ev in found.items():
        if ev.repeated and not why:
            out[item] = 2
        elif ev.relevance >= floor or item in chain:
            out[item] = 1
        else:
            out[item] = 0
    return out


def gated(scores: Mapping[str, float], tier: Mapping[str, int]) -> dict[str, float]:
    """``tier + s / (1 + s)`` per item: tier first, the boosted score ``s`` inside it."""
    out: dict[str, float] = {}
    for item, s in scores.items():
        if not math.isfinite(s) or s < 0.0:
            raise ValidationError(f"must be a finite score >= 0, got {s!r}",
                                  field=f"scores.{item}")
        out[item] = tier.get(item, 0) + s / (1.0 + s)
    return out


def _check_floor(floor: float) -> None:
    if not (isinstance(floor, int | float) and 0.0 < floor <= 1.0):
        raise ValidationError(f"must be in (0, 1], got {floor!r}",
                              field="retrieval.relevance_floor")
