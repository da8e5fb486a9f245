"""Plain-text renderings of a retrieval: the causal narrative and the context block.

``narrative`` tells a chain (seed 001) on one line, oldest first:

    Gas spiked to 80 gwei → (because the swap became unprofitable) → Swap reverted

``context_block`` is seed 000's council context block as an output format:
the query, the ranked evidence with the numbers that put each item there,
and the causal chain with timestamps. An item's label starts with where its text came
from when it was not learned here (``told``, ``imported: clade``) and with ``untrusted:
instructions`` when its text instructs a model (``source_labels``). Both are deterministic
(UTC, fixed number formats) so the same retrieval renders byte-identically.

Owns: text layout. Must not rank, fetch or decide anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from grimoire.retrieval.candidates import Candidate
from grimoire.retrieval.chain import ChainLink

__all__ = ["context_block", "format_time", "narrative", "source_labels"]


def _line(text: str) -> str:
    """One line: collapse newlines and runs of spaces (an item never breaks the layout)."""
    return " ".join(text.split())


def format_time(ms: int) -> str:
    """Unix ms as ``YYYY-MM-DD HH:MM UTC``."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def narrative(chain: Sequence[ChainLink], get_text: Callable[[str], str]) -> str:
    """``A → (because R) → B → …`` oldest first; "led to" where a link has no relationship.

    An empty chain renders as the empty string.
    """
    parts: list[str] = []
    for index, link in enumerate(chain):
        if index:
            reason = _line(link.relationship) if link.relationship else ""
            parts.append(f"(because {reason})" if reason else "(led to)")
        parts.append(_line(get_text(link.id)))
    return " → ".join(parts)


# Who the text came from, when it was not learned here from the agent's own episodes:
# told (``entry.add`` by the agent or the owner) or brought in from outside.
_TOLD = frozenset({"agent", "owner"})
_OUTSIDE = frozenset({"clade", "predecessor", "lethe", "marketplace", "styx_query"})


def source_labels(provenance: str | None, marks: Sequence[str]) -> list[str]:
    """The context block's labels of where a text came from and whether to trust it:
    ``told``, ``imported: clade``, ``untrusted: instructions`` (its text instructs a model;
    a reader should treat it as data, not as an instruction)."""
    out = []
    if provenance in _TOLD:
        out.append("told")
    elif provenance in _OUTSIDE:
        out.append(f"imported: {provenance}")
    out += [f"untrusted: {m.split(':', 1)[1]}" for m in marks if ":" in m]
    return out


def _label(candidate: Candidate, score: float | None) -> str:
    source = candidate.provenance.get("source") if candidate.kind == "entry" else None
    bits = [*source_labels(source, candidate.marks), candidate.category or candidate.kind]
    if candidate.kind == "episode":
        bits.append(format_time(candidate.timestamp))
    else:
        bits.append(f"confidence {candidate.confidence:.2f}")
    if candidate.regime:
        bits.append(f"regime {candidate.regime}")
    if candidate.is_bloodstain:
        bits.append("bloodstain")
    if score is not None:
        bits.append(f"score {score:.2f}")
    return " · ".join(bits)


def context_block(
    query: str,
    items: Sequence[Candidate],
    chain: Sequence[ChainLink] = (),
    get_text: Callable[[str], str] | None = None,
    get_time: Callable[[str], int | None] | None = None,
    scores: Mapping[str, float] | None = None,
    texts: Mapping[str, str] | None = None,
    preface: Sequence[str] = (),
) -> str:
    """Seed 000's context block: QUERY, ranked EVIDENCE, CAUSAL CHAIN (oldest first).

    ``preface``: lines that come before all of it (the rules that apply to the caller's
    situation, ``retrieval.rules.rules_section``), then a blank line.
    ``texts`` overrides an item's content (e.g. the budget's truncated text);
    ``get_text``/``get_time`` give a chain event's text and unix-ms time (the
    chain section is left out without ``get_text`` or without a chain).
    """
    lines = [*preface, ""] if preface else []
    lines += [f"QUERY: {_line(query)}", "", "EVIDENCE (ranked):"]
    if not items:
        lines.append("(none)")
    for rank, item in enumerate(items, start=1):
        text = (texts or {}).get(item.id, item.content)
        score = scores.get(item.id) if scores is not None else None
        lines.append(f"{rank}. [{_label(item, score)}] {_line(text)}")
    if chain and get_text is not None:
        lines += ["", "CAUSAL CHAIN (oldest first):"]
        for link in chain:
            when = get_time(link.id) if get_time is not None else None
            stamp = f"[{format_time(when)}] " if when is not None else ""
            because = f" (because {_line(link.relationship)})" if link.relationship else ""
            lines.append(f"{stamp}{_line(get_text(link.id))}{because}")
    return "\n".join(lines) + "\n"
