"""Parameterizing an insight into a rule (SPEC §8 step 3, seed 004's Insight → Heuristic).

Owns: which insights can become a rule (a metric claim on a configured cost
or gain metric), whether the rule is a heuristic ("prefer") or a warning
("avoid"), which actions it names, and its sentence. Pure: an entry and the
distiller config in, a ``DerivedRule`` out; no store, no clock.

A cost metric (gas, slippage, fees) that is *lower* under a condition makes a
good window: "When <condition>, prefer <actions> because <metric> averages X
(vs Y overall)." Higher is a bad window: "Avoid <actions> when <condition>
because …". For a gain metric (P&L) the sides swap. The actions are the
claim's own action when its condition names one, else the actions the
config says the metric affects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from curator.cycle.transitions import DERIVED_TAG, is_derived, is_summary
from grimoire.config import DistillerConfig
from grimoire.records import Category, GrimoireEntry
from playbook.render_text import effect_words, fmt_number, metric_label

__all__ = ["ACTION_TAG", "DerivedRule", "condition_phrase", "derive_rule", "rule_actions"]

ACTION_TAG = "action:"  # a derived rule's tag per action it names ("action:swap")


@dataclass(frozen=True, slots=True)
class DerivedRule:
    category: Category  # HEURISTIC or WARNING
    content: str
    metric: str
    actions: tuple[str, ...]
    tags: tuple[str, ...]


def _hour(h: int) -> str:
    return f"{int(h) % 24:02d}:00"


def condition_phrase(condition: Mapping[str, Any]) -> str | None:
    """The condition as a clause after "when" (action terms excluded); None if unreadable."""
    parts: list[str] = []
    for key in sorted(condition, key=lambda k: (_ORDER.get(k, 99), k)):
        value = condition[key]
        if key == "action":
            continue
        if key == "regime":
            parts.append(f"the regime is {value}")
        elif key == "hour_window" and isinstance(value, list | tuple) and len(value) == 2:
            parts.append(f"the time is between {_hour(value[0])} and {_hour(value[1])} UTC")
        elif key == "token_pair":
            parts.append(f"trading {value}")
        elif key == "chain":
            parts.append(f"on {value}")
        elif key == "tool":
            parts.append(f"using {value}")
        elif key == "metric_band" and isinstance(value, list | tuple) and len(value) == 2:
            label, _ = metric_label(str(value[0]))
            parts.append(f"{label} is in its {'top' if value[1] == 'upper' else 'bottom'} third")
        else:
            return None
    return " and ".join(parts)


_ORDER = {"regime": 0, "hour_window": 1, "token_pair": 2, "chain": 3, "tool": 4,
          "metric_band": 5}


def _list(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} or {items[-1]}"


def derive_rule(insight: GrimoireEntry, cfg: DistillerConfig) -> DerivedRule | None:
    """The rule an insight parameterizes into, or None when it is not about a cost or gain
    metric, names no action the metric affects, or has a condition we cannot phrase."""
    claim = insight.claim
    if (claim is None or insight.category is not Category.INSIGHT or is_summary(insight)
            or is_derived(insight)):
        return None
    kind, _, metric = claim.target.partition(":")
    if kind != "metric" or not metric or claim.effect == claim.baseline:
        return None
    if metric in cfg.cost_metrics:
        good = claim.effect < claim.baseline
    elif metric in cfg.gain_metrics:
        good = claim.effect > claim.baseline
    else:
        return None
    action = claim.condition.get("action")
    actions = (action,) if isinstance(action, str) and action else tuple(
        cfg.metric_actions.get(metric, ()))
    when = condition_phrase(claim.condition)
    if not actions or when is None:
        return None
    label, unit = metric_label(metric)
    unit_text = f" {unit}" if unit else ""
    because = (f"{label} averages {fmt_number(claim.effect)}{unit_text} "
               f"(vs {fmt_number(claim.baseline)}{unit_text} otherwise: "
               f"{effect_words(claim.effect, claim.baseline)}; {claim.support} episodes)")
    doing = _list(list(actions))
    if good:
        content = (f"When {when}, prefer {doing} because {because}." if when
                   else f"Prefer {doing} because {because}.")
        category = Category.HEURISTIC
    else:
        content = (f"Avoid {doing} when {when} because {because}." if when
                   else f"Avoid {doing} because {because}.")
        category = Category.WARNING
    tags = (DERIVED_TAG, f"metric:{metric}", *(f"{ACTION_TAG}{a}" for a in actions))
    return DerivedRule(category, content, metric, tuple(actions), tags)


def rule_actions(rule: GrimoireEntry) -> tuple[str, ...]:
    """The actions a derived rule names (its ``action:`` tags, as ``derive_rule`` wrote
    them): the rule is about doing one of them under its insight's condition."""
    return tuple(t[len(ACTION_TAG):] for t in rule.tags
                 if t.startswith(ACTION_TAG) and len(t) > len(ACTION_TAG))
