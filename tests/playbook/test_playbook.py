"""PLAYBOOK.md compiler: determinism, layout, the line cap, safety, owner-facing text."""

from __future__ import annotations

import random
import re
from dataclasses import replace
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from grimoire.errors import ValidationError
from grimoire.records import Category, Claim, DecayClass, GrimoireEntry, Provenance, Regime
from playbook import ConfidenceRule, PlaybookItem, compile_playbook
from playbook.render_text import clean_inline, entry_sentence, short_ids

NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z
_seq = iter(range(10**9))


def make_entry(**overrides: Any) -> GrimoireEntry:
    """An active entry with a unique, time-ordered-looking id (8-char prefixes differ)."""
    n = next(_seq)
    values: dict[str, Any] = {
        "id": f"{n:08x}-0000-7000-8000-{n:012x}",
        "category": Category.HEURISTIC,
        "content": f"When gas is low, do swap {n} because it is cheap",
        "confidence": 0.8,
        "quality_score": 0.7,
        "decay_class": DecayClass.REGIME_CONDITIONAL,
        "provenance": Provenance.SELF_LEARNED,
        "created_at": NOW,
        "last_accessed_at": NOW,
    }
    values.update(overrides)
    return GrimoireEntry(**values)


def compile_(entries: list[Any], max_lines: int = 400, **kw: Any) -> str:
    args: dict[str, Any] = {"tick": 1234, "generated_at": NOW, "counts": {"entries_total": 9}}
    args.update(kw)
    return compile_playbook(entries, max_lines=max_lines, **args)


def front_matter(text: str) -> dict[str, Any]:
    assert text.startswith("---\n")
    head = text.split("\n---\n", 1)[0][4:]
    loaded = yaml.safe_load(head)
    assert isinstance(loaded, dict)
    return loaded


def item_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"- `[^`]+` · ", line)]


def mixed_entries() -> list[Any]:
    return [
        make_entry(category=Category.WARNING, content="Avoid swaps during CPI releases",
                   confidence=0.3),
        make_entry(content="When gas < 10 gwei, do swap because it is cheap", confidence=0.9),
        PlaybookItem(make_entry(content="When a, do b because c"), 0.55),
        make_entry(strategy="weth-usdc-lp", category=Category.WARNING,
                   content="Avoid LP during CPI", market_regime=Regime.HIGH_VOL),
        make_entry(strategy="eth-dca", content="When dip, do buy because mean reversion"),
        make_entry(strategy="eth-dca", category=Category.INSIGHT, content="Dips revert in 4h"),
        make_entry(strategy="eth-dca", category=Category.CAUSAL_LINK,
                   content="CPI surprise causes ETH sell pressure with 3h lag"),
        make_entry(category=Category.STRATEGY_FRAGMENT, content="RSI oversold maybe"),
    ]


def test_same_entries_in_any_order_give_identical_bytes() -> None:
    """Determinism: the compiler sorts on values, so input order never shows in the output."""
    entries = mixed_entries()
    first = compile_(entries)
    for seed in range(5):
        shuffled = entries[:]
        random.Random(seed).shuffle(shuffled)
        assert compile_(shuffled) == first
    assert first.endswith("\n") and not first.endswith("\n\n")


def test_front_matter_has_tick_time_and_counts_in_fixed_order() -> None:
    text = compile_(mixed_entries(), counts={"total_entries": 532, "active": 210})
    fm = front_matter(text)
    assert list(fm) == ["playbook_format", "tick", "generated_at", "included", "left_out",
                        "max_lines", "grimoire"]
    assert fm["tick"] == 1234
    assert fm["generated_at"] == "2026-01-01T00:00:00Z"
    assert fm["included"] == {"warnings": 2, "heuristics": 3, "insights": 1, "causal_links": 1,
                              "told_or_inherited": 0}
    assert fm["left_out"] == 0
    assert list(fm["grimoire"]) == ["active", "total_entries"]  # sorted, not caller order
    assert fm["grimoire"]["total_entries"] == 532


def test_sections_global_first_then_strategies_by_name_with_warnings_first() -> None:
    text = compile_(mixed_entries())
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings == [
        "# PLAYBOOK",
        "## Global",
        "### Warnings: avoid these (1)",
        "### Heuristics: do these (2)",
        "## Strategy: eth-dca",
        "### Heuristics: do these (1)",
        # no shown rule rests on them: they are not counted as "behind these rules" (issue 27)
        "### Other findings: insights and causal links (2)",
        "## Strategy: weth-usdc-lp",
        "### Warnings: avoid these (1)",
    ]
    # The strategy fragment is not listed, and the file says so.
    assert "RSI oversold" not in text
    assert "1 strategy fragment or journal entry is not listed here." in text


def test_a_line_shows_short_id_effective_confidence_votes_and_regime() -> None:
    entry = make_entry(category=Category.WARNING, content="Avoid LP during CPI",
                       confidence=0.9, validated_count=5, contradicted_count=2,
                       market_regime=Regime.HIGH_VOL)
    text = compile_([PlaybookItem(entry, 0.4567)])
    [line] = item_lines(text)
    assert line == (f"- `{entry.id[:8]}` · conf 0.46 · ✓5 ✗2 · high_vol — Avoid LP during CPI")
    other = make_entry()
    [line] = item_lines(compile_([other]))
    assert "conf 0.80" in line and "· any regime —" in line


def test_rules_within_a_subsection_are_ordered_by_confidence_times_quality() -> None:
    low = make_entry(content="When x, do low because y", confidence=0.9, quality_score=0.2)
    high = make_entry(content="When x, do high because y", confidence=0.6, quality_score=0.9)
    mid = make_entry(content="When x, do mid because y", confidence=0.7, quality_score=0.5)
    lines = item_lines(compile_([low, mid, high]))
    assert [re.search(r"do (\w+)", line).group(1) for line in lines] == [  # type: ignore[union-attr]
        "high", "mid", "low"]


def test_claim_renders_when_do_because_and_avoid_when() -> None:
    claim = Claim({"hour_window": [2, 4], "regime": "low_vol"}, "metric:gas_gwei", "lower",
                  effect=6.1, baseline=14.2, support=12)
    heuristic = make_entry(content="When gas is low, do large swaps because gas is cheap",
                           claim=claim)
    warn_claim = Claim({"action": "swap", "token_pair": "WETH/USDC"}, "outcome:negative_rate",
                       "higher", effect=0.6, baseline=0.2, support=9)
    warning = make_entry(category=Category.WARNING, content="bad swaps", claim=warn_claim)
    insight = make_entry(category=Category.INSIGHT, content="gas is low at night", claim=claim)
    text = compile_([heuristic, warning, insight])
    assert ("When the market regime is low_vol and the hour is 02:00–04:00 UTC, do large swaps"
            " because gas averages 6.1 gwei (vs 14.2 gwei otherwise: 57% lower; "
            "12 episodes).") in text
    assert ("Avoid swap when trading WETH/USDC because negative outcomes happen 60% of the time"
            " (vs 20% overall: 3 times as often; 9 episodes).") in text
    assert "When the market regime is low_vol and the hour is 02:00–04:00 UTC, gas averages" in text


def test_an_insight_names_the_action_its_condition_holds_for() -> None:
    """A rule states its action as its verb; an insight has none. Two weth-usdc-lp insights
    read "return averages -8.08 bps" and "return averages 8.49 bps" for the same "strategy
    is weth-usdc-lp" (bench_learning slippage_evening seed 3): one was rebalance's, the
    other add_liquidity's, and neither said so."""
    lower = Claim({"action": "rebalance"}, "metric:return_bps", "lower", effect=-8.08,
                  baseline=1.4, support=261, strategy="weth-usdc-lp")
    higher = Claim({"action": "add_liquidity"}, "metric:return_bps", "higher", effect=8.49,
                   baseline=1.65, support=192, strategy="weth-usdc-lp")
    assert entry_sentence(make_entry(category=Category.INSIGHT, content="x", claim=lower)
                          ).startswith("When the strategy is weth-usdc-lp and the action is "
                                       "rebalance, return averages -8.08 bps")
    assert entry_sentence(make_entry(category=Category.INSIGHT, content="x", claim=higher)
                          ).startswith("When the strategy is weth-usdc-lp and the action is "
                                       "add_liquidity, return averages 8.49 bps")
    several = Claim({"actions": ["swap", "bridge"], "regime": "high_vol"}, "metric:gas_gwei",
                    "higher", effect=30.0, baseline=24.0, support=40)
    assert entry_sentence(make_entry(category=Category.INSIGHT, content="x", claim=several)
                          ).startswith("When the action is swap or bridge and the market "
                                       "regime is high_vol, gas averages 30 gwei")
    # A rule keeps its action as the verb, not twice.
    warning = make_entry(category=Category.WARNING, content="x", claim=lower)
    assert entry_sentence(warning).startswith("Avoid rebalance when the strategy is "
                                              "weth-usdc-lp because return averages")


def test_a_rule_whose_numbers_now_run_against_it_says_so() -> None:
    """Issue 24 (reversal_pair): after the outcome reversed, a demoted heuristic read "do swap
    because positive outcomes happen 63% of the time (vs 75% overall: 17% less often)": its
    refreshed numbers given as the reason for the advice they contradict."""
    reversed_ = Claim({"action": "swap", "token_pair": "WETH/DAI"}, "outcome:positive_rate",
                      "higher", effect=0.63, baseline=0.75, support=278)
    heuristic = make_entry(content="do swap", claim=reversed_)
    assert entry_sentence(heuristic) == (
        "When trading WETH/DAI, do swap because it held before, but no longer: positive "
        "outcomes happen 63% of the time (vs 75% overall: 16% less often; 278 episodes).")
    cheaper = Claim({"action": "swap"}, "metric:gas_gwei", "lower", effect=30.0,
                    baseline=24.0, support=40)
    warning = make_entry(category=Category.WARNING, content="avoid swap", claim=cheaper)
    assert "because it held before, but no longer: gas averages 30 gwei" in entry_sentence(
        warning)
    # Numbers that still go the claim's way read as its reason; an insight only describes.
    held = replace(reversed_, effect=0.9)
    assert "do swap because positive outcomes happen 90%" in entry_sentence(
        make_entry(content="do swap", claim=held))
    insight = make_entry(category=Category.INSIGHT, content="x", claim=reversed_)
    assert "no longer" not in entry_sentence(insight)


def test_a_strategy_s_claim_names_its_strategy_wherever_it_is_shown() -> None:
    """Issue 24: "Avoid rebalance when the market regime is bear" was weth-usdc-lp's warning;
    shown alone (a retrieval, MCP, the entry list) it read as everyone's, and a question
    naming the strategy did not find it."""
    mine = Claim({"action": "rebalance", "regime": "bear"}, "outcome:negative_rate", "higher",
                 effect=0.83, baseline=0.62, support=40, strategy="weth-usdc-lp")
    assert entry_sentence(make_entry(category=Category.WARNING, content="x", claim=mine)) == (
        "Avoid rebalance when the strategy is weth-usdc-lp and the market regime is bear "
        "because negative outcomes happen 83% of the time (vs 62% overall: 34% more often; "
        "40 episodes).")
    only = replace(mine, condition={"action": "rebalance"})
    assert entry_sentence(make_entry(category=Category.HEURISTIC, content="x", claim=only)
                          ).startswith("When the strategy is weth-usdc-lp, do rebalance because")
    everyone = replace(mine, strategy=None)
    assert "strategy" not in entry_sentence(
        make_entry(category=Category.WARNING, content="x", claim=everyone))


def test_a_band_claim_states_its_cut_and_one_stored_without_it_keeps_its_words() -> None:
    """"metric band is gas_gwei, upper" said nothing: the line states the cut the claim
    holds; a band claim stored before the cut was kept shows its own sentence, which has it."""
    band = Claim({"action": "remove_liquidity", "metric_band": ["gas_gwei", "upper"]},
                 "outcome:negative_rate", "higher", effect=0.59, baseline=0.32, support=34,
                 band_cut=31.24)
    words = "Avoid remove_liquidity when gas is above 31.2 gwei: 20 of 34 were negative."
    new = make_entry(category=Category.WARNING, content=words, claim=band)
    old = make_entry(category=Category.WARNING, content=words,
                     claim=replace(band, band_cut=None, strategy="other"))
    text = compile_([new, old])
    assert ("Avoid remove_liquidity when gas is above 31.2 gwei because negative outcomes "
            "happen 59% of the time (vs 32% overall: 84% more often; 34 episodes).") in text
    assert f"— {words}" in text
    assert "metric band" not in text


def test_claim_without_an_action_falls_back_to_the_content() -> None:
    claim = Claim({"regime": "bear"}, "metric:pnl", "lower", -3.0, 1.0, 5)
    entry = make_entry(content="Sit tight in bear markets", claim=claim)
    [line] = item_lines(compile_([entry]))
    assert line.endswith("— Sit tight in bear markets")


def test_supporting_insight_names_the_rules_derived_from_it() -> None:
    insight = make_entry(category=Category.INSIGHT, content="Gas is cheap at night")
    loner = make_entry(category=Category.INSIGHT, content="Unrelated fact", confidence=0.99,
                       quality_score=0.99)
    rule = make_entry(content="When night, do swap because gas", parent_entry_ids=(insight.id,))
    text = compile_([insight, loner, rule])
    support = item_lines(text)[1:]
    # The insight behind a shown rule outranks a stronger stand-alone one.
    assert support[0].endswith(f"Gas is cheap at night (behind `{rule.id[:8]}`)")
    assert support[1].endswith("Unrelated fact")


def test_owner_facing_preamble_explains_how_to_read_the_file() -> None:
    text = compile_(mixed_entries())
    for phrase in ("what your agent's memory holds", "learned from the agent's own outcomes",
                   "told or inherited", "grimoire explain", "short id",
                   "Warnings come first", "any regime", "✓", "✗", "overwritten",
                   "## Strategy: <name>"):
        assert phrase in text, phrase


def test_empty_input_still_explains_itself() -> None:
    text = compile_([])
    assert "## Global" in text
    assert "_Nothing here yet" in text
    assert "_The curator has not selected any entry yet._" in text and "All 0" not in text
    assert front_matter(text)["included"] == {"warnings": 0, "heuristics": 0, "insights": 0,
                                              "causal_links": 0, "told_or_inherited": 0}


def test_cap_keeps_the_highest_ranked_and_says_how_many_were_left_out() -> None:
    entries = [make_entry(strategy=f"s{i % 7}", confidence=0.4 + (i % 50) / 100,
                          quality_score=0.3 + (i % 11) / 20,
                          category=Category.WARNING if i % 5 == 0 else Category.HEURISTIC)
               for i in range(300)]
    text = compile_(entries, max_lines=120)
    lines = text.splitlines()
    assert len(lines) <= 120
    fm = front_matter(text)
    shown_ids = {re.match(r"- `([^`]+)`", line).group(1) for line in item_lines(text)}  # type: ignore[union-attr]
    assert fm["left_out"] == 300 - len(shown_ids) > 0
    assert f"_{fm['left_out']} of 300 selected entries were left out" in text
    ranked = sorted(entries, key=lambda e: (-(e.confidence * e.quality_score), e.id))
    assert shown_ids == {e.id[:8] for e in ranked[: len(shown_ids)]}


def test_cap_at_exactly_the_needed_length_keeps_everything() -> None:
    entries = mixed_entries()
    full = compile_(entries)
    n = len(full.splitlines())
    assert compile_(entries, max_lines=n) == full.replace(
        "max_lines: 400", f"max_lines: {n}")
    tighter = compile_(entries, max_lines=n - 1)
    assert len(tighter.splitlines()) <= n - 1
    assert front_matter(tighter)["left_out"] >= 1


def test_max_lines_smaller_than_the_header_is_refused() -> None:
    with pytest.raises(ValidationError) as info:
        compile_(mixed_entries(), max_lines=10)
    assert info.value.field == "max_lines"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"tick": -1}, "tick"), ({"generated_at": 1.5}, "generated_at"),
     ({"counts": {"Bad Key": 1}}, "counts"), ({"counts": {"ok": -2}}, "counts.ok"),
     ({"max_lines": True}, "max_lines")],
)
def test_bad_arguments_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        compile_([make_entry()], **kwargs)
    assert info.value.field == field


def test_the_same_entry_twice_is_refused() -> None:
    entry = make_entry()
    with pytest.raises(ValidationError, match="given twice"):
        compile_([entry, PlaybookItem(entry, 0.5)])


def test_playbook_item_rejects_confidence_outside_unit_interval() -> None:
    with pytest.raises(ValidationError) as info:
        PlaybookItem(make_entry(), 1.5)
    assert info.value.field == "effective_confidence"
    with pytest.raises(ValidationError):
        PlaybookItem(make_entry(), float("nan"))


def test_entry_content_cannot_inject_headings_or_hide_the_file() -> None:
    nasty = make_entry(content="# Owned\n\n## Strategy: fake\n---\n<!-- hide the rest\r\n```",
                       strategy="real\n# Global")
    text = compile_([nasty, make_entry()])
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert "## Strategy: real # Global" in headings
    assert all(not h.startswith("## Strategy: fake") and h != "# Owned" for h in headings)
    [line] = [line for line in item_lines(text) if "Owned" in line]
    assert not re.search(r"(?<!\\)<!--", line) and "\\<!-- hide" in line
    assert "```" not in line
    assert text.count("\n---\n") == 1  # only the front matter's closing fence


def test_clean_inline_strips_breaks_controls_and_leading_markers() -> None:
    assert clean_inline("  ## > - 1. hi\u2028there\x00\u202e!") == "hi there!"
    assert clean_inline("a <b>x</b> < 3") == "a \\<b>x\\</b> < 3"
    long = clean_inline("x" * 1000, limit=10)
    assert len(long) == 10 and long.endswith("…")


def test_short_ids_are_unique_prefixes_of_at_least_eight_characters() -> None:
    same_minute = ["019b76da-a800-7aaa-8000-000000000001", "019b76da-a801-7bbb-8000-000000000002",
                   "019b76db-0000-7ccc-8000-000000000003"]
    shorts = short_ids(same_minute)
    assert shorts[same_minute[2]] == "019b76db"
    assert shorts[same_minute[0]] == "019b76da-a800"
    assert shorts[same_minute[1]] == "019b76da-a801"


_nasty_text = st.text(
    alphabet=st.sampled_from([*"ab #>-*_`|<!\n\r\t=~0123456789.)", "\u2028", "\x85", "é"]),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(
    contents=st.lists(_nasty_text, min_size=0, max_size=25),
    strategies=st.lists(st.sampled_from([None, "a", "b", "c\n# x"]), min_size=25, max_size=25),
    confs=st.lists(st.floats(0, 1), min_size=25, max_size=25),
    max_lines=st.integers(42, 90),
    seed=st.integers(0, 1000),
)
def test_property_layout_is_safe_capped_and_order_independent(
    contents: list[str], strategies: list[str | None], confs: list[float], max_lines: int,
    seed: int,
) -> None:
    """Any content: no injected heading or fence, never over max_lines, input order irrelevant."""
    cats = [Category.HEURISTIC, Category.WARNING, Category.INSIGHT, Category.CAUSAL_LINK]
    entries = [PlaybookItem(make_entry(content=c, strategy=strategies[i], category=cats[i % 4]),
                            confs[i]) for i, c in enumerate(contents)]
    text = compile_(entries, max_lines=max_lines)
    shuffled = entries[:]
    random.Random(seed).shuffle(shuffled)
    assert compile_(shuffled, max_lines=max_lines) == text
    lines = text.splitlines()
    assert len(lines) <= max_lines
    assert lines.count("---") == 2
    allowed_heading = re.compile(r"^(# PLAYBOOK|## Global|## Strategy: .+|### .+ \(\d+\))$")
    assert all(allowed_heading.match(line) for line in lines if line.startswith("#"))
    kept = len(item_lines(text))
    assert front_matter(text)["left_out"] == len(entries) - kept
    assert kept == len(entries) or "were left out" in text


def test_replace_keeps_records_frozen() -> None:
    """PlaybookItem is a frozen value: changing it yields a new item."""
    item = PlaybookItem(make_entry(), 0.5)
    assert replace(item, effective_confidence=0.6).effective_confidence == 0.6
    with pytest.raises(AttributeError):
        item.effective_confidence = 0.9  # type: ignore[misc]


def test_told_and_inherited_entries_stand_apart_until_an_outcome_confirms_them() -> None:
    """A warning typed by the owner is not shown as learned: it is listed under its own part,
    saying who told it, and moves among the learned rules once an outcome confirms it."""
    learned = make_entry(category=Category.WARNING, content="Avoid LP during CPI prints")
    told = make_entry(category=Category.WARNING, content="Avoid bridging on Fridays",
                      provenance=Provenance.OWNER)
    agent = make_entry(category=Category.HEURISTIC, content="When idle, do rebalance because",
                       provenance=Provenance.AGENT)
    inherited = make_entry(category=Category.INSIGHT, content="Gas is cheap on Sundays",
                           provenance=Provenance.PREDECESSOR)
    text = compile_([learned, told, agent, inherited])
    headings = [line for line in text.splitlines() if line.startswith("###")]
    assert headings == ["### Warnings: avoid these (1)",
                        "### Told or inherited, not yet confirmed by outcomes (3)"]
    lines = item_lines(text)
    assert "Avoid LP during CPI prints" in lines[0] and "told" not in lines[0]
    assert "· told by you · warning ·" in lines[1] and "Avoid bridging" in lines[1]
    assert "· told by the agent · heuristic ·" in lines[2]
    assert "· inherited · insight ·" in lines[3]
    assert front_matter(text)["included"]["told_or_inherited"] == 3
    confirmed = replace(told, validated_count=1)
    text = compile_([learned, confirmed])
    assert [line for line in text.splitlines() if line.startswith("###")] == [
        "### Warnings: avoid these (2)"]


def test_the_header_explains_the_domain_words_the_file_uses_and_only_those() -> None:
    """Issue 13: no word of jargon reaches the owner unexplained. A bloodstain warning and
    an entry from the Clade bring their words into the header; a file without them has no
    such block."""
    plain = compile_([make_entry(category=Category.WARNING, content="Avoid LP during CPI")])
    assert "Words used below" not in plain
    stain = replace(
        make_entry(category=Category.WARNING, content="Never bridge during an outage"),
        is_bloodstain=True)
    shared = make_entry(category=Category.HEURISTIC, content="Prefer limit orders on size",
                        provenance=Provenance.CLADE)
    text = compile_([stain, shared])
    _, _, body = text.partition("Words used below:")
    assert body, text
    words = [line for line in body.splitlines() if line.startswith("- **")]
    assert [w.split("**")[1] for w in words] == ["bloodstain", "clade"]
    assert "· bloodstain ·" in next(x for x in text.splitlines() if "Never bridge" in x)
    assert text.index("Words used below:") < text.index("\n## Global\n")


def test_the_updated_line_names_categories_in_words() -> None:
    from playbook import updated_line

    assert updated_line({"warning": 2, "heuristic": 1, "causal_link": 1, "insight": 0}) == (
        "PLAYBOOK.md updated: 2 warnings, 1 heuristic, 1 causal link")
    assert updated_line({}) == "PLAYBOOK.md updated: nothing selected yet"


def test_the_preamble_states_the_confidence_rule_with_the_configured_numbers() -> None:
    """One sentence says how every line's `conf` follows from its ✓ / ✗, prior and age
    (SPEC §13), with the numbers of the configuration it was compiled under; its example
    line obeys it."""
    text = compile_([make_entry()])
    rule = next(line for line in text.splitlines() if line.startswith("- `conf` is"))
    assert "by one rule for every line" in rule
    assert ("(✓ + 10 × prior) / (✓ + ✗ + 10), the prior 0.5 for what it learned itself"
            in text)
    assert "half-life" in text and "0.99 takes 490 ✓ with no ✗." in text
    assert "`` - `0192ab3c` · conf 0.68 · ✓8 ✗1 ·" in text  # (8 + 5) / (8 + 1 + 10)
    other = compile_([make_entry()], rule=ConfidenceRule(prior_strength=4.0,
                                                         learned_prior=0.6))
    assert "(✓ + 4 × prior) / (✓ + ✗ + 4), the prior 0.6 for" in other
    assert "0.99 takes 156 ✓ with no ✗." in other
    assert "· conf 0.80 · ✓8 ✗1 ·" in other  # (8 + 2.4) / (8 + 1 + 4)


def test_figures_read_as_a_person_reads_them_and_the_header_claims_nothing_for_the_agent(
) -> None:
    """Issue 27: no raw volumes ("2528932") or four-digit percents ("82.94%"); each finding
    says how large its effect is in words; a heading counts only what is under it; the
    header does not say what the agent does with the file (that is the agent's business)."""
    from playbook.render_text import effect_words, fmt_number, fmt_percent

    assert [fmt_number(x) for x in (2528932, 3530802, 12840, 999960, 3441.7, 20.79, 6.564)] == [
        "2.53M", "3.53M", "12.8k", "1M", "3,442", "20.8", "6.56"]
    assert [fmt_percent(x) for x in (0.8294, 0.04617, 0.0)] == ["83%", "4.6%", "0%"]
    assert effect_words(20.79, 15.54) == "34% higher"
    assert effect_words(0.9, 0.3, rate=True) == "3 times as often"
    assert effect_words(-5.0, 3.0) == "8 lower"
    claim = Claim({"regime": "high_vol", "action": "swap"}, "outcome:negative_rate", "higher",
                  effect=0.8294,
                  baseline=0.4967, support=72)
    text = compile_([make_entry(category=Category.WARNING, content="bad", claim=claim)])
    assert "negative outcomes happen 83% of the time (vs 50% overall: 67% more often;" in text
    assert "reads it before" not in text
