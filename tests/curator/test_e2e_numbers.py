"""One source of numbers (issue 24): on a real curator run over the market simulator, every
view states the same ✓ / ✗, the same cited n and the same effect figures for every entry
PLAYBOOK.md lists: the file (``playbook.get``, the MCP ``playbook`` tool), ``entry.explain``
(data and text; the MCP ``explain`` tool), ``entry.get``, ``entry.list`` and the report's
data. They are the claim's latest judgement: ✓ / ✗ on the entry, effect / baseline / n in
its claim (a derived rule: its insight's), and the sentence every view shows is made from
them, so it never cites fewer episodes than ✓ counts.

The MCP tools call these same methods through the method table (``dispatch``), as the
socket and the read-only open do. ~40 s (the hash embedder keeps it fast).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.feeds import SimFeed, load_scenario
from grimoire.models.embedders import HashEmbedder
from grimoire.report.data import collect
from grimoire.service.api import dispatch
from playbook.render_text import clean_inline, fmt_number, fmt_percent

pytest.importorskip("curator.learn.hook",
                    reason="needs the learning core wiring (curator.learn.hook)")
pytestmark = pytest.mark.slow

TICK_MS = 180_000  # the scenarios' tick_seconds_hint
TICKS = 1500  # ~3 simulated days: hour-of-day rules, band and rate warnings, a causal link
SPEED = {"distiller.every_episodes": 50, "episodes.flush_ms": 3_600_000}
CHECK_EVERY = 5  # cycles

_LINE = re.compile(r"^- `(?P<short>[0-9a-f-]+)` · .*?✓(?P<v>\d+) ✗(?P<x>\d+) · [^—]*— "
                   r"(?P<text>.*)$")
_BEHIND = re.compile(r" \(behind `[^)]*\)$")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?%?")
_VOTES = re.compile(r"^Votes: ✓(\d+) ✗(\d+)\.", re.MULTILINE)
# the episodes a sentence cites: "(…; 140 episodes)" or "k of n times"
_CITED = re.compile(r"; (\d+) episodes\)|: (\d+) of (\d+) times")


def _listed(markdown: str) -> list[dict[str, Any]]:
    out = []
    for line in markdown.splitlines():
        found = _LINE.match(line)
        if found is not None:
            out.append({"short": found["short"], "v": int(found["v"]), "x": int(found["x"]),
                        "text": _BEHIND.sub("", found["text"])})
    return out


def _disagreements(g: Grimoire) -> tuple[list[str], set[str]]:
    """Every number a view states differently from PLAYBOOK.md or from the entry's fields,
    for each entry PLAYBOOK.md lists; and the kinds of entry compared."""
    ctx = g.context
    markdown = dispatch(g, "playbook.get", {})["markdown"]
    listed = {e["id"]: e for e in dispatch(g, "entry.list", {"limit": 1000})["entries"]}
    report = collect(ctx)
    last_cycle = max((c for c, _ in report.cycles), default=None)
    reported = {r.entry_id: r for r in report.rules}
    bad: list[str] = []
    kinds: set[str] = set()
    for row in _listed(markdown):
        explained = dispatch(g, "entry.explain", {"id": row["short"]})
        entry_id = explained["id"]
        got = dispatch(g, "entry.get", {"id": entry_id})
        counts = {
            "PLAYBOOK.md": (row["v"], row["x"]),
            "entry.get": (got["validated_count"], got["contradicted_count"]),
            "entry.list": ((listed[entry_id]["validated_count"],
                            listed[entry_id]["contradicted_count"])
                           if entry_id in listed else None),
            "explain votes": (explained["votes"]["validated_count"],
                              explained["votes"]["contradicted_count"]),
            "explain numbers": ((explained["numbers"]["validated_count"],
                                 explained["numbers"]["contradicted_count"])
                                if "numbers" in explained else None),
            "explain text": tuple(int(n) for n in _VOTES.findall(explained["text"])[0]),
        }
        rule = reported.get(entry_id)
        if rule is not None and rule.points[-1].cycle == last_cycle:
            counts["report"] = (rule.points[-1].validated, rule.points[-1].contradicted)
        texts = {
            "PLAYBOOK.md": row["text"],
            "entry.get": got["content"],
            "entry.list": listed[entry_id]["content"] if entry_id in listed else None,
            "explain data": explained["entry"]["content"],
            "explain text": explained["text"].splitlines()[1].strip(),
            "report": rule.content if rule is not None else row["text"],
        }
        for view, pair in counts.items():
            if pair != counts["PLAYBOOK.md"]:
                bad.append(f"{entry_id} ✓/✗: {view} {pair} vs PLAYBOOK.md {counts['PLAYBOOK.md']}")
        figures = _NUMBER.findall(row["text"])
        for view, text in texts.items():
            shown = None if text is None else _NUMBER.findall(clean_inline(text))
            if shown != figures:
                bad.append(f"{entry_id} sentence: {view} {shown} vs PLAYBOOK.md {figures}: "
                           f"{text!r}")
        bad.extend(_against_claim(g, got, row, explained))
        kinds.add(got["category"] if got["claim"] is not None or not got["parent_entry_ids"]
                  else "derived rule")
    return bad, kinds


def _against_claim(g: Grimoire, got: dict[str, Any], row: dict[str, Any],
                   explained: dict[str, Any]) -> list[str]:
    """The sentence's cited n and effect are its claim's (a derived rule's: its insight's),
    explain states the same n, and ✓ never exceeds the episodes the sentence cites."""
    claim, entry_id = got.get("claim"), got["id"]
    if claim is None and got["parent_entry_ids"]:
        claim = dispatch(g, "entry.get", {"id": got["parent_entry_ids"][0]}).get("claim")
    cited = _CITED.search(row["text"])
    if claim is None or cited is None:
        return []
    bad = []
    n = int(cited[1] or cited[3])
    if n != claim["support"]:
        bad.append(f"{entry_id} cited n {n} vs its claim's support {claim['support']}")
    numbers = explained.get("numbers") or {}
    if numbers.get("cited_n") != claim["support"]:
        bad.append(f"{entry_id} explain cites {numbers.get('cited_n')} vs {claim['support']}")
    if cited[2] is not None:  # a causal link: k of n times, k the followed occurrences
        k = int(cited[2])
        if k != round(claim["effect"] * claim["support"]):
            bad.append(f"{entry_id} followed {k} vs its claim's {claim['effect']} × {n}")
        if row["v"] > k:
            bad.append(f"{entry_id} ✓{row['v']} exceeds the {k} followed times it cites")
    else:
        effect = (fmt_percent(claim["effect"]) if claim["target"].startswith("outcome:")
                  else fmt_number(claim["effect"]))  # 83%, 4.31M, 20.8: as a person reads it
        if not re.search(rf"(?<![\w.,]){re.escape(effect)}(?![\w.])", row["text"]):
            bad.append(f"{entry_id} effect {effect} (its claim's) not in {row['text']!r}")
    if row["v"] > n:
        bad.append(f"{entry_id} ✓{row['v']} exceeds the {n} episodes it cites")
    return bad


def _unlisted_links(g: Grimoire, shown: set[str]) -> tuple[list[str], set[str]]:
    """The causal links PLAYBOOK.md does not list (a link followed less often than it
    fails stays a candidate): every other view still states one set of numbers for them."""
    bad: list[str] = []
    kinds: set[str] = set()
    for listed in dispatch(g, "entry.list", {"category": "causal_link", "limit": 1000})[
            "entries"]:
        entry_id = listed["id"]
        if entry_id in shown or listed.get("claim") is None:
            continue
        got = dispatch(g, "entry.get", {"id": entry_id})
        explained = dispatch(g, "entry.explain", {"id": entry_id})
        pair = (got["validated_count"], got["contradicted_count"])
        others = {
            "entry.list": (listed["validated_count"], listed["contradicted_count"]),
            "explain votes": (explained["votes"]["validated_count"],
                              explained["votes"]["contradicted_count"]),
            "explain text": tuple(int(n) for n in _VOTES.findall(explained["text"])[0]),
        }
        bad.extend(f"{entry_id} ✓/✗: {view} {other} vs entry.get {pair}"
                   for view, other in others.items() if other != pair)
        figures = _NUMBER.findall(clean_inline(got["content"]))
        for view, text in {"entry.list": listed["content"],
                           "explain data": explained["entry"]["content"],
                           "explain text": explained["text"].splitlines()[1].strip()}.items():
            if _NUMBER.findall(clean_inline(text)) != figures:
                bad.append(f"{entry_id} sentence: {view} {text!r} vs {got['content']!r}")
        row = {"text": clean_inline(got["content"]), "v": pair[0]}
        bad.extend(_against_claim(g, got, row, explained))
        kinds.add("causal_link")
    return bad, kinds


def test_every_view_states_the_same_numbers(tmp_path: Path) -> None:
    """Every few cycles of a real run, and at its end, each view agrees with PLAYBOOK.md and
    with the entry's own fields on every number, for every entry listed; over the run's checks
    an insight, a rule derived from one, a warning and a causal link are listed, so each kind
    of sentence is held."""
    clean = dataclasses.replace(load_scenario(None), label_noise=0.0)
    clock = FrozenClock()
    start = clock.now
    feed = SimFeed(clean, 7)
    checks = 0
    cycles = 0
    kinds: set[str] = set()
    with Grimoire.open(tmp_path / "data", config=Config().replace(**SPEED), clock=clock,
                       embedder=HashEmbedder(dim=384)) as g:
        for tick in range(1, TICKS + 1):
            now = start + tick * TICK_MS
            clock.set(now)
            summary = g.tick(now=now, feed_episodes=feed.poll(tick, now))
            if "curator" not in summary:
                continue
            cycles += 1
            if cycles % CHECK_EVERY and tick != TICKS:
                continue
            bad, compared = _disagreements(g)
            shown = {row["short"] for row in _listed(dispatch(g, "playbook.get", {})["markdown"])}
            shown_ids = {dispatch(g, "entry.explain", {"id": short})["id"] for short in shown}
            more, links = _unlisted_links(g, shown_ids)
            assert bad + more == [], (tick, bad + more)
            kinds |= compared | links
            checks += 1
    assert checks == 6 and cycles == 30
    assert {"insight", "derived rule", "causal_link", "warning"} <= kinds, kinds
