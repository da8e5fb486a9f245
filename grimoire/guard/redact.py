"""``privacy.redact``: remove the chosen kinds of secret from text before it is embedded or
stored. Each finding is replaced by ``[redacted:KIND]``.

Kinds and what finds them (a well-kept library where one fits):

- ``email``: a pattern for ``local@domain.tld`` (RFC 5322's common form; no library finds
  addresses in prose, ``email-validator`` checks one address it is given);
- ``phone``: ``phonenumbers`` (Google's libphonenumber) ``PhoneNumberMatcher`` at its
  ``VALID`` leniency: a number must be a valid number of its region
  (``privacy.phone_region`` for numbers written without a country code), so prices,
  block numbers and gas figures are not numbers;
- ``api_key``: ``detect-secrets``' regex detectors (AWS, GitHub, GitLab, Slack, Stripe,
  OpenAI, JWT, npm, PyPI, Twilio, SendGrid, Telegram, Discord, …) plus its keyword
  detector (``api_key = …``, ``password: …``: the first word after the keyword), and the
  ``sk-…`` key shape current model APIs issue (detect-secrets knows only OpenAI's old
  one). Its entropy detectors are left out: on-chain hashes and addresses are
  high-entropy and not secrets;
- ``private_key``: PEM blocks (``-----BEGIN … PRIVATE KEY-----`` to its END line), 64 hex
  digits right after the words private key / secret key / privkey, and WIF keys (base58,
  checksum verified);
- ``seed_phrase``: 12 to 24 consecutive words of the BIP-39 English list (``mnemonic``);
- ``iban``: candidates checked by ``schwifty`` (country format and mod-97 checksum).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from grimoire.errors import ConfigError
from grimoire.records import Episode
from grimoire.records.graph import EntityRef, Fact, ObjectKind, ObjectValue

__all__ = ["KINDS", "Redactor", "redact_episode", "redact_fact", "redactor"]

KINDS = ("email", "phone", "api_key", "private_key", "seed_phrase", "iban")

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*"
                    r"\.[A-Za-z]{2,24}\b")
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
                  r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)", re.DOTALL)
_HEX_KEY = re.compile(r"(?i)\b(?:private|secret|priv)[ _-]?key\b\W{0,12}((?:0x)?[0-9a-f]{64})\b")
_WIF = re.compile(r"\b[5KL][1-9A-HJ-NP-Za-km-z]{50,51}\b")
_MODEL_KEY = re.compile(r"\bsk-(?:[a-z]+-)?[A-Za-z0-9_-]{20,}")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?\b")
_WORD = re.compile(r"[A-Za-z]+")
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
SEED_MIN, SEED_MAX = 12, 24


def _token_end(text: str, end: int) -> int:
    while end < len(text) and (text[end].isalnum() or text[end] in "_-"):
        end += 1
    return end


def _wif_ok(text: str) -> bool:
    number = 0
    for ch in text:
        number = number * 58 + _B58.index(ch)
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    body, check = raw[:-4], raw[-4:]
    return (len(body) in (33, 34) and body[0] == 0x80
            and hashlib.sha256(hashlib.sha256(body).digest()).digest()[:4] == check)


@cache
def _bip39() -> frozenset[str]:
    from mnemonic import Mnemonic

    return frozenset(Mnemonic("english").wordlist)


@cache
def _secret_patterns() -> tuple[tuple[re.Pattern[str], ...], tuple[Any, ...]]:
    """detect-secrets' regex denylists (every regex detector but the IP address and the
    private-key header, which ``private_key`` covers whole) and its keyword detector."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    skip = {"IPPublicDetector", "PrivateKeyDetector"}
    patterns: list[re.Pattern[str]] = []
    others: list[Any] = []
    classes: list[Any] = list(get_mapping_from_secret_type_to_class().values())
    for cls in classes:
        if cls.__name__ in skip or "HighEntropy" in cls.__name__:
            continue
        plugin = cls()
        if issubclass(cls, RegexBasedDetector):
            patterns.extend(plugin.denylist)
        else:
            others.append(plugin)
    return tuple(patterns), tuple(others)


Span = tuple[int, int, str]


@dataclass(frozen=True)
class Redactor:
    """Finds and removes the configured kinds; ``redact(text)`` is the one call."""

    kinds: tuple[str, ...]
    phone_region: str | None = "US"

    def spans(self, text: str) -> list[Span]:
        """Every finding as (start, end, kind), overlaps not yet merged."""
        found: list[Span] = []
        for kind in self.kinds:
            found.extend(getattr(self, f"_{kind}")(text))
        return found

    def redact(self, text: str) -> str:
        spans = sorted(self.spans(text))
        if not spans:
            return text
        merged: list[list[Any]] = []
        for start, end, kind in spans:
            if merged and start < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end, kind])
        out, pos = [], 0
        for start, end, kind in merged:
            out += [text[pos:start], f"[redacted:{kind}]"]
            pos = end
        return "".join([*out, text[pos:]])

    # -- the kinds --------------------------------------------------------------------------

    def _email(self, text: str) -> list[Span]:
        return [(m.start(), m.end(), "email") for m in _EMAIL.finditer(text)]

    def _phone(self, text: str) -> list[Span]:
        import phonenumbers

        matcher = phonenumbers.PhoneNumberMatcher(text, self.phone_region,
                                                  leniency=phonenumbers.Leniency.VALID)
        return [(m.start, m.end, "phone") for m in matcher]

    def _api_key(self, text: str) -> list[Span]:
        patterns, plugins = _secret_patterns()
        # A match ends where the token does (a pattern may pin a shorter length than a
        # real token has): extended over the token characters that follow it.
        found = [(m.start(), _token_end(text, m.end()), "api_key")
                 for p in (*patterns, _MODEL_KEY) for m in p.finditer(text)]
        for plugin in plugins:
            for line_no, line in enumerate(text.split("\n"), 1):
                # As a YAML line: ``key: value`` and ``key=value`` both count (the .txt
                # rules want quotes); the value is the first word after the keyword.
                for secret in plugin.analyze_line(filename="episode.yaml", line=line,
                                                  line_number=line_no):
                    words = (secret.secret_value or "").split()
                    value = words[0].strip("\"'`,;") if words else ""
                    if len(value) >= 4:
                        found += [(m.start(), m.end(), "api_key")
                                  for m in re.finditer(re.escape(value), text)]
        return found

    def _private_key(self, text: str) -> list[Span]:
        found = [(m.start(), m.end(), "private_key") for m in _PEM.finditer(text)]
        found += [(m.start(1), m.end(1), "private_key") for m in _HEX_KEY.finditer(text)]
        found += [(m.start(), m.end(), "private_key") for m in _WIF.finditer(text)
                  if _wif_ok(m.group())]
        return found

    def _seed_phrase(self, text: str) -> list[Span]:
        words = _bip39()
        found: list[Span] = []
        run: list[re.Match[str]] = []
        for m in [*_WORD.finditer(text), None]:
            # A run of list words separated only by white space (or commas) continues.
            if (m is not None and m.group().lower() in words
                    and (not run or not text[run[-1].end():m.start()].strip(" ,\n\t"))):
                run.append(m)
                continue
            if len(run) >= SEED_MIN:
                found.append((run[0].start(), run[-1].end(), "seed_phrase"))
            run = [m] if m is not None and m.group().lower() in words else []
        return found

    def _iban(self, text: str) -> list[Span]:
        from schwifty import IBAN
        from schwifty.exceptions import SchwiftyException

        found: list[Span] = []
        for m in _IBAN.finditer(text):
            try:
                IBAN(m.group())
            except (SchwiftyException, ValueError):
                continue
            found.append((m.start(), m.end(), "iban"))
        return found


def redactor(kinds: Sequence[str], phone_region: str | None = "US") -> Redactor | None:
    """The redactor for ``privacy.redact`` (None when it names no kind); ``all`` = every
    kind. An unknown kind is a ConfigError naming the known ones."""
    return _redactor(tuple(kinds), phone_region)


def redact_episode(episode: Episode, found: Redactor | None) -> Episode:
    """The episode with its text, ref, actor and thread and the keys of its metrics and
    prediction redacted (as is without a redactor)."""
    if found is None:
        return episode
    def clean(value: str | None) -> str | None:
        return None if value is None else found.redact(value)

    return dataclasses.replace(episode, text=found.redact(episode.text), ref=clean(episode.ref),
                               actor=clean(episode.actor), thread=clean(episode.thread),
                               metrics=_keys(episode.metrics, found),
                               prediction=_keys(episode.prediction, found))


def _keys(numbers: Mapping[str, float], found: Redactor) -> dict[str, float]:
    """``numbers`` with each key redacted; two keys that redact alike keep the first value."""
    out: dict[str, float] = {}
    for key, value in numbers.items():
        out.setdefault(found.redact(key), value)
    return out


def redact_fact(fact: Fact, found: Redactor | None) -> Fact:
    """A KG assertion with its subject's id and its object (a string, or an entity's id)
    redacted (as is without a redactor); the predicate is a fixed vocabulary."""
    if found is None:
        return fact
    obj = fact.object
    if obj.kind is ObjectKind.STRING and isinstance(obj.value, str):
        obj = ObjectValue.string(found.redact(obj.value))
    elif (ref := obj.as_entity) is not None:
        obj = ObjectValue.entity(EntityRef(ref.kind, found.redact(ref.id)))
    subject = EntityRef(fact.subject.kind, found.redact(fact.subject.id))
    return dataclasses.replace(fact, subject=subject, object=obj)


@cache
def _redactor(kinds: tuple[str, ...], phone_region: str | None) -> Redactor | None:
    chosen = tuple(KINDS) if "all" in kinds else tuple(dict.fromkeys(kinds))
    unknown = [k for k in chosen if k not in KINDS]
    if unknown:
        raise ConfigError(f"privacy.redact: unknown kind(s) {', '.join(unknown)}; known: "
                          f"{', '.join(KINDS)} (or all)")
    return Redactor(chosen, phone_region or None) if chosen else None
