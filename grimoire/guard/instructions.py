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

A match marks the text (``MARK`` in an entry's tags); it never changes or refuses it.
"""

from __future__ import annotations

import re

__all__ = ["MARK", "instructs"]

MARK = "untrusted:instructions"

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
