"""Text that instructs a model: a pattern detector computed from the text alone.

Stored memory is read back into an agent's prompt, so text that tries to steer the reader
("ignore previous instructions", a role prompt, tool-call syntax) is poisoning when it
comes back as a rule. ``instructs(text)`` names which of three families of patterns the
text holds; they describe the shape of an instruction to a model, not any dataset:

- ``override``: a verb of setting aside (ignore, disregard, forget, override, bypass) aimed
  at earlier instructions, prompts, rules or context;
- ``role``: a role marker or role prompt: ``system:`` / ``assistant:`` at a line start,
  chat-template tokens (``<|im_start|>``, ``[INST]``, ``<<SYS>>``), "you are now …",
  "act as …", "new instructions:";
- ``tool_call``: tool-call syntax: ``<tool_call>`` / ``<function_call>`` tags,
  ``{"name": …, "arguments": …}`` objects, ``<function=…>``, fenced ``tool_code``.

A match marks the text (``MARK`` in an entry's tags, in an episode's ``marks``); it never
changes or refuses it. ``mark_episode`` reads every free-text field an episode has (text,
ref, actor, thread, strategy, actions): any of them may be quoted back later.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from grimoire.records import Episode

__all__ = ["MARK", "UNTRUSTED", "instructs", "is_marked", "mark_episode"]

UNTRUSTED = "untrusted:"  # the prefix of every mark that says "do not follow this text"
MARK = UNTRUSTED + "instructions"

_PATTERNS: dict[str, re.Pattern[str]] = {
    "override": re.compile(
        r"\b(?:ignore|disregard|forget|override|bypass|skip)\b[\w\s,'-]{0,40}?\b"
        r"(?:previous|prior|above|earlier|all|any|your|the|system)\b[\w\s'-]{0,20}?\b"
        r"(?:instructions?|prompts?|rules?|directives?|guidelines?|context)\b", re.I),
    "role": re.compile(
        r"(?:^|\n)\s*(?:system|assistant|developer)\s*:|<\|im_start\|>|<\|system\|>|\[INST\]|"
        r"<<SYS>>|\byou are now\b|\bact as (?:an?|the)\b|\bnew instructions\s*:|"
        r"\bfrom now on,? you\b", re.I),
    "tool_call": re.compile(
        r"</?(?:tool_call|function_call|tool_use|invoke)\b|<function=|```tool_code|"
        r"\{\s*\"(?:name|tool)\"\s*:\s*\"[^\"]+\"\s*,\s*\"(?:arguments|parameters|input)\"",
        re.I),
}


def instructs(text: str) -> list[str]:
    """The families of instruction patterns ``text`` holds (empty: none)."""
    return [name for name, pattern in _PATTERNS.items() if pattern.search(text)]


def is_marked(marks: Iterable[str]) -> bool:
    """Whether ``marks`` (an entry's tags, an episode's marks) hold an untrusted mark."""
    return any(m.startswith(UNTRUSTED) for m in marks)


def mark_episode(episode: Episode) -> Episode:
    """The episode with ``MARK`` added to its marks when any of its text fields instructs a
    model (as is otherwise)."""
    if MARK in episode.marks:
        return episode
    fields = (episode.text, episode.ref, episode.actor, episode.thread, episode.strategy,
              *episode.actions)
    if not any(instructs(value) for value in fields if value):
        return episode
    return dataclasses.replace(episode, marks=(*episode.marks, MARK))
