"""The PLAYBOOK.md compiler: a pure function from entries to Markdown (SPEC §8 step 9).

Owns the layout of PLAYBOOK.md: YAML front matter, the owner's preamble, a
``## Global`` section and one ``## Strategy: <name>`` section per strategy,
warnings before heuristics before the insights and causal links behind them,
and the line cap. It must not read stores, the clock or the environment, and
it imports only ``grimoire.records`` (plus the error tree those records use):
the curator selects the entries and computes their decayed confidence.

Same input (in any order) → byte-identical output: every list is sorted on
values, floats are printed with fixed formats, time comes in as a number.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from grimoire.errors import ValidationError
from grimoire.records import Category, GrimoireEntry, Provenance
from playbook.glossary import words_used
from playbook.items import PlaybookItem, as_item
from playbook.render_text import clean_inline, entry_sentence, short_ids

__all__ = ["FORMAT_VERSION", "ConfidenceRule", "compile_listing", "compile_playbook", "iso_utc"]

FORMAT_VERSION = 1
_RULES = (Category.WARNING, Category.HEURISTIC)
_SUPPORT = (Category.INSIGHT, Category.CAUSAL_LINK)
_KIND_TITLES = {
    Category.WARNING: "Warnings: avoid these",
    Category.HEURISTIC: "Heuristics: do these",
    "support": "Behind these rules: insights and causal links",
    "alone": "Other findings: insights and causal links",
    "unconfirmed": "Told or inherited, not yet confirmed by outcomes",
}
# Knowledge Grimoire's learners found in this agent's own episodes. Anything else (told
# with entry.add, inherited, shared) is listed apart until an outcome confirms it (✓ ≥ 1).
_LEARNED = frozenset({Provenance.SELF_LEARNED, Provenance.REPLICANT})
_SOURCE = {
    Provenance.AGENT: "told by the agent", Provenance.OWNER: "told by you",
    Provenance.CLADE: "from the Clade", Provenance.PREDECESSOR: "inherited",
    Provenance.DEATH_REFLECTION: "a predecessor's last reflection",
    Provenance.LETHE: "from Lethe", Provenance.STYX_QUERY: "from Styx",
    Provenance.MARKETPLACE: "bought", Provenance.DREAM: "dreamt",
}
_COUNT_KEY = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_MAX_SUPPORT_REFS = 3


@dataclass(frozen=True, slots=True)
class ConfidenceRule:
    """The numbers of the confidence rule the preamble states (``decay.evidence_confidence``):
    ``k`` (``decay.prior_strength``), the prior of self-learned knowledge, and the clamp's
    top. The caller passes its configuration's; the defaults are the shipped ones."""

    prior_strength: float = 10.0
    learned_prior: float = 0.5
    top: float = 0.99

    def to_top(self) -> int:
        """Confirming episodes (none against) self-learned knowledge needs to reach the top."""
        gap = self.top - self.learned_prior
        return max(0, math.ceil(round(self.prior_strength * gap / (1.0 - self.top), 6)))

    def of(self, confirmed: int, contradicted: int) -> float:
        """The rule's value for self-learned knowledge just confirmed (no age)."""
        k = self.prior_strength
        return (confirmed + k * self.learned_prior) / (confirmed + contradicted + k)

    def sentence(self) -> list[str]:
        """The preamble's statement of the rule: one sentence."""
        k, p = f"{self.prior_strength:g}", f"{self.learned_prior:g}"
        return [
            "- `conf` is how sure the agent is today (0 to 1), by one rule for every line:",
            f"  (✓ + {k} × prior) / (✓ + ✗ + {k}), the prior {p} for what it learned itself"
            " (less for what it was told or inherited), halved for every half-life of its"
            " kind since it last held; so equal evidence gives equal confidence, and"
            f" {self.top:g} takes {self.to_top()} ✓ with no ✗.",
        ]


@dataclass(frozen=True, slots=True)
class _Row:
    item: PlaybookItem
    section: tuple[int, str]  # (0, "") = Global, (1, name) = a strategy; sorts Global first
    kind: Category | str  # Category.WARNING, Category.HEURISTIC or "support"

    @property
    def entry(self) -> GrimoireEntry:
        return self.item.entry

    @property
    def order(self) -> tuple[float, str]:
        return (-self.item.rank_score, self.entry.id)


# Said at the top of a PLAYBOOK.md compiled from simulated memory (FEED.json kind simulated).
SIMULATED_NOTE = [
    "**Simulated memory.** Everything below was learned from Grimoire's built-in market",
    "simulator (`grimoire run --feed sim`), not from an agent's real episodes, and its",
    "times are simulated time (the simulator's clock runs ahead of the wall clock).",
]


def iso_utc(ms: int) -> str:
    """Unix milliseconds → ``2026-01-01T00:00:00Z`` (integer arithmetic, no float rounding)."""
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def compile_playbook(
    entries: Sequence[PlaybookItem | GrimoireEntry],
    *,
    tick: int,
    generated_at: int,
    counts: Mapping[str, int],
    max_lines: int,
    rule: ConfidenceRule | None = None,
    simulated: bool = False,
) -> str:
    """PLAYBOOK.md's text (``compile_listing`` without the list of what it shows)."""
    return compile_listing(entries, tick=tick, generated_at=generated_at, counts=counts,
                           max_lines=max_lines, rule=rule, simulated=simulated)[0]


def compile_listing(
    entries: Sequence[PlaybookItem | GrimoireEntry],
    *,
    tick: int,
    generated_at: int,
    counts: Mapping[str, int],
    max_lines: int,
    rule: ConfidenceRule | None = None,
    simulated: bool = False,
) -> tuple[str, list[PlaybookItem]]:
    """Render PLAYBOOK.md, and say which of ``entries`` it shows (in the file's rank order).

    Render PLAYBOOK.md from the entries the curator chose, never longer than ``max_lines``.

    ``entries``: heuristics and warnings (the rules) plus insights and causal
    links (shown compactly after the rules, those that a shown rule was
    derived from first). Other categories are not shown. ``tick`` and
    ``generated_at`` (unix ms) are printed, never read from a clock.
    ``counts`` are store-level numbers for the front matter (e.g.
    ``{"entries_total": 532}``). When the rules do not fit, the entries with
    the lowest effective confidence × quality are left out, and the file says
    how many. ``rule``: the confidence rule's numbers the preamble states (default: the
    shipped configuration's). ``simulated``: the memory comes from the market simulator
    (its data directory's ``FEED.json``): the file says so at its top and in its front
    matter, and prints its time as simulated time, not as real UTC.
    """
    _check_int(tick, "tick")
    _check_int(generated_at, "generated_at")
    _check_int(max_lines, "max_lines")
    store_counts = _check_counts(counts)
    items = [as_item(e) for e in entries]
    seen: set[str] = set()
    for item in items:
        if item.entry.id in seen:
            raise ValidationError(f"entry {item.entry.id} given twice", field="entries")
        seen.add(item.entry.id)

    rules = sorted((_row(i) for i in items if i.entry.category in _RULES), key=lambda r: r.order)
    rule_parents = {p for r in rules for p in r.entry.parent_entry_ids}
    support = sorted(
        (_row(i) for i in items if i.entry.category in _SUPPORT),
        # Knowledge that a rule was derived from outranks knowledge that stands alone.
        key=lambda r: (r.entry.id not in rule_parents, *r.order),
    )
    skipped = len(items) - len(rules) - len(support)
    ranked = rules + support
    shorts = short_ids(i.entry.id for i in items)
    header = _Header(tick, generated_at, store_counts, max_lines, len(ranked), skipped,
                     rule or ConfidenceRule(), simulated)

    # Each entry's sentence is built once; renders below only lay lines out.
    texts = {row.entry.id: _entry_text(row.entry) for row in ranked}

    def render(keep: int) -> list[str]:
        return _render(ranked[:keep], header, shorts, texts)

    full = render(len(ranked))
    if len(full) <= max_lines:
        return "\n".join(full) + "\n", [row.item for row in ranked]
    if len(render(0)) > max_lines:
        raise ValidationError(
            f"is {max_lines}, but the header and owner notes alone need {len(render(0))} lines",
            field="max_lines",
        )
    # Line count grows with every kept row (each adds at least one line net), so
    # the longest prefix that fits is found by bisection over real renders.
    low, high = 0, len(ranked) - 1
    while low < high:
        mid = (low + high + 1) // 2
        if len(render(mid)) <= max_lines:
            low = mid
        else:
            high = mid - 1
    return "\n".join(render(low)) + "\n", [row.item for row in ranked[:low]]


@dataclass(frozen=True, slots=True)
class _Header:
    tick: int
    generated_at: int
    store_counts: tuple[tuple[str, int], ...]
    max_lines: int
    offered: int
    skipped: int
    rule: ConfidenceRule
    simulated: bool = False


def _row(item: PlaybookItem) -> _Row:
    entry = item.entry
    section = (0, "") if entry.strategy is None else (1, entry.strategy)
    kind: Category | str = entry.category if entry.category in _RULES else "support"
    if not is_learned(entry):
        kind = "unconfirmed"
    return _Row(item, section, kind)


def is_learned(entry: GrimoireEntry) -> bool:
    """Learned from the agent's own episodes, or confirmed by an outcome since it was told."""
    return entry.provenance in _LEARNED or entry.validated_count > 0


def _render(kept: Sequence[_Row], header: _Header, shorts: Mapping[str, str],
            texts: Mapping[str, str]) -> list[str]:
    # Which shown rule was derived from which supporting entry (parent_entry_ids).
    supports: dict[str, list[str]] = {}
    for row in kept:
        if row.entry.category in _RULES:
            for parent in row.entry.parent_entry_ids:
                supports.setdefault(parent, []).append(row.entry.id)
    counts = {
        "warnings": sum(r.entry.category is Category.WARNING for r in kept),
        "heuristics": sum(r.entry.category is Category.HEURISTIC for r in kept),
        "insights": sum(r.entry.category is Category.INSIGHT for r in kept),
        "causal_links": sum(r.entry.category is Category.CAUSAL_LINK for r in kept),
        "told_or_inherited": sum(r.kind == "unconfirmed" for r in kept),
    }
    left_out = header.offered - len(kept)
    preamble = _preamble(header)
    blocks: list[list[str]] = [
        _front_matter(header, counts, left_out),
        ["# PLAYBOOK"],
        *([SIMULATED_NOTE] if header.simulated else []),
        *preamble,
        [_left_out_note(header, len(kept), left_out)],
    ]
    # where the header's explanations end
    head = 2 + (1 if header.simulated else 0) + len(preamble)
    sections: dict[tuple[int, str], dict[Category | str, list[_Row]]] = {(0, ""): {}}
    for row in kept:
        sections.setdefault(row.section, {}).setdefault(row.kind, []).append(row)
    for section in sorted(sections):
        by_kind = sections[section]
        blocks.append([_section_title(section)])
        if not by_kind:
            blocks.append(["_Nothing here yet: no cross-strategy rule has earned its place._"])
        for kind in (Category.WARNING, Category.HEURISTIC, "support", "unconfirmed"):
            # Supporting knowledge behind a shown rule comes before stand-alone knowledge.
            rows = sorted(by_kind.get(kind, []),
                          key=lambda r: (r.kind == "support" and r.entry.id not in supports,
                                         r.kind == "unconfirmed" and _RANK[r.entry.category],
                                         *r.order))
            # Each heading counts what is under it: the supporting knowledge a shown rule
            # rests on apart from the findings that stand alone.
            groups = ([("support", [r for r in rows if r.entry.id in supports]),
                       ("alone", [r for r in rows if r.entry.id not in supports])]
                      if kind == "support" else [(kind, rows)])
            for title, group in groups:
                if group:
                    blocks.append([f"### {_KIND_TITLES[title]} ({len(group)})"])
                    blocks.append([_line(r, shorts, supports, texts[r.entry.id])
                                   for r in group])
    # The domain's words that appear below, explained in the header (playbook.glossary).
    body = [line for block in blocks[head + 1:] for line in block]
    used = words_used(body)
    if used:
        blocks.insert(head, ["Words used below:",
                          *(f"- **{word}**: {meaning}." for word, meaning in used)])
    lines: list[str] = []
    for block in blocks:
        if lines:
            lines.append("")
        lines.extend(block)
    return lines


def _front_matter(header: _Header, counts: Mapping[str, int], left_out: int) -> list[str]:
    lines = [
        "---",
        f"playbook_format: {FORMAT_VERSION}",
        f"tick: {header.tick}",
        f'generated_at: "{iso_utc(header.generated_at)}"',
        *(["memory: simulated"] if header.simulated else []),
        "included:",
        *(f"  {key}: {counts[key]}" for key in ("warnings", "heuristics", "insights",
                                                   "causal_links", "told_or_inherited")),
        f"left_out: {left_out}",
        f"max_lines: {header.max_lines}",
    ]
    if header.store_counts:
        lines.append("grimoire:")
        lines.extend(f"  {key}: {value}" for key, value in header.store_counts)
    else:
        lines.append("grimoire: {}")
    lines.append("---")
    return lines


def _preamble(header: _Header) -> list[list[str]]:
    when = iso_utc(header.generated_at).replace("T", " ").replace(
        "Z", " simulated time" if header.simulated else " UTC")
    return [
        [
            "This file is what your agent's memory holds, written by Grimoire's curator at",
            f"tick {header.tick} ({when}). Nobody writes it by hand: it is rebuilt from the",
            "knowledge store every curator cycle, so edits made here are overwritten.",
        ],
        [
            "How to read a line such as"
            f" `` - `0192ab3c` · conf {header.rule.of(8, 1):.2f} · ✓8 ✗1 · high_vol — When …,"
            " do … because … ``:",
            "- `0192ab3c` is the entry's short id; `grimoire explain 0192ab3c` shows where it",
            "  came from (the episodes behind it) and how its confidence changed.",
            "- `✓` / `✗` count the distinct episodes on which it held / failed (each once, so"
            " never more than the episodes its sentence cites).",
            *header.rule.sentence(),
            "- Then the market regime it applies to (`any regime` if it holds in all).",
            "- Warnings come first in each section and are listed at any confidence, because",
            "  missing a risk costs more than a false alarm. Heuristics follow, then the",
            "  insights and causal links they were derived from, then other findings no rule",
            "  rests on yet. Each heading counts the lines under it.",
            "- A finding its learners' significance test established is listed the cycle after"
            f" it is found, at ✓0 and conf {header.rule.of(0, 0):.2f}: only episodes after it"
            " count as ✓ / ✗.",
            "- `## Global` applies to every strategy; `## Strategy: <name>` to one strategy.",
            "- Rules are learned from the agent's own outcomes; what it was told or inherited"
            " stands apart (\"Told or inherited\") until an outcome confirms it.",
        ],
    ]


def _left_out_note(header: _Header, shown: int, left_out: int) -> str:
    skipped = ""
    if header.skipped:
        skipped = (f" {header.skipped} strategy fragment or journal "
                   f"entr{'y is' if header.skipped == 1 else 'ies are'} not listed here.")
    if left_out == 0 and shown == 0:
        return f"_The curator has not selected any entry yet._{skipped}"
    if left_out == 0:
        return f"_All {shown} entries the curator selected are shown._{skipped}"
    return (f"_{left_out} of {header.offered} selected entries were left out to keep this file"
            f" under {header.max_lines} lines (the lowest by confidence × quality); they stay in"
            f" the Grimoire and return when they rank higher._{skipped}")


def _section_title(section: tuple[int, str]) -> str:
    if section[0] == 0:
        return "## Global"
    return f"## Strategy: {clean_inline(section[1], 80) or '(unnamed)'}"


def _line(row: _Row, shorts: Mapping[str, str], supports: Mapping[str, list[str]],
          text: str) -> str:
    entry = row.entry
    regime = entry.market_regime.value if entry.market_regime else "any regime"
    meta = [f"`{shorts[entry.id]}`"]
    if row.kind == "unconfirmed":
        meta.append(_SOURCE.get(entry.provenance, entry.provenance.value))
        meta.append(entry.category.value.replace("_", " "))
    elif row.kind == "support":
        meta.append("insight" if entry.category is Category.INSIGHT else "causal link")
    if entry.is_bloodstain:
        meta.append("bloodstain")
    if entry.dream_validated:
        meta.append("dream-validated")
    meta += [
        f"conf {row.item.effective_confidence:.2f}",
        f"✓{entry.validated_count} ✗{entry.contradicted_count}",
        regime,
    ]
    derived = sorted(supports.get(entry.id, []), key=lambda i: shorts[i])
    if derived:
        refs = ", ".join(f"`{shorts[i]}`" for i in derived[:_MAX_SUPPORT_REFS])
        more = len(derived) - _MAX_SUPPORT_REFS
        text += f" (behind {refs}{f' and {more} more' if more > 0 else ''})"
    return f"- {' · '.join(meta)} — {text}"


_RANK = {Category.WARNING: 0, Category.HEURISTIC: 1, Category.INSIGHT: 2,
         Category.CAUSAL_LINK: 3}


def _entry_text(entry: GrimoireEntry) -> str:
    return clean_inline(entry_sentence(entry)) or "(no text)"


def _check_int(value: object, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"must be a non-negative integer, got {value!r}", field=field)


def _check_counts(counts: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    if not isinstance(counts, Mapping):
        raise ValidationError("must be a mapping of name to integer", field="counts")
    out = []
    for key, value in counts.items():
        if not isinstance(key, str) or not _COUNT_KEY.match(key):
            raise ValidationError(f"key {key!r} must be lower_snake_case", field="counts")
        _check_int(value, f"counts.{key}")
        out.append((key, value))
    return tuple(sorted(out))


def updated_line(selected: Mapping[str, object]) -> str:
    """``PLAYBOOK.md updated: 2 warnings, 1 causal link`` from a cycle's selected counts
    (the daemon's log line and ``grimoire curate`` say it the same way); the keys are
    categories (``warning``, ``causal_link``)."""
    shown = [f"{n} {k.replace('_', ' ')}{'s' if n != 1 else ''}"
             for k, n in selected.items() if isinstance(n, int) and not isinstance(n, bool) and n]
    return "PLAYBOOK.md updated: " + (", ".join(shown) if shown else "nothing selected yet")

