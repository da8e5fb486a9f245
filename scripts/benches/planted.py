"""A generated set of planted secrets: each kind privacy.redact removes, made with a seeded
generator and written into sentences the way an agent would, and ``left``, the pieces of a
secret a redaction missed.

Measurement data, not product code: ``scripts/bench_privacy.py --part redact`` measures on
it and ``tests/guard/test_redact.py`` checks on it (as ``scripts.benches.planted``)."""

from __future__ import annotations

import hashlib
import random
import re
import string

import phonenumbers
from mnemonic import Mnemonic
from schwifty import IBAN

__all__ = ["left", "planted"]

SECRET_PIECES = re.compile(r"[A-Za-z0-9+/_=-]{6,}")

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_REGIONS = ["US", "GB", "DE", "FR", "IN", "BR", "JP", "AU", "CA", "NL"]
# (country, bank code, digits of the account number): the account is drawn at random
_IBAN_BANKS = [("DE", "37040044", 10), ("GB", "NWBK", 8), ("FR", "30006", 11),
               ("NL", "ABNA", 10), ("ES", "2100", 10), ("BE", "539", 7)]
_TEMPLATES = [
    "note to self: {s} (do not share)",
    "the user wrote back with {s} and asked for the swap report",
    "{s}",
    "Contact/credential on file -> {s}; retry the bridge later.",
    "swap failed on WETH/USDC at 31 gwei, support said use {s} next time",
]


def _b58check(payload: bytes) -> str:
    raw = payload + hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4]
    number = int.from_bytes(raw, "big")
    out = ""
    while number:
        number, rem = divmod(number, 58)
        out = _B58[rem] + out
    return out


def _token(rng: random.Random, n: int, alphabet: str = string.ascii_letters + string.digits
           ) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _secret(kind: str, rng: random.Random) -> str:
    if kind == "email":
        user = _token(rng, rng.randint(3, 10), string.ascii_lowercase) + rng.choice(
            ["", ".", "_", "+tag"]) + _token(rng, 3, string.ascii_lowercase)
        tld = rng.choice(["com", "io", "co.uk", "de"])
        return f"{user}@{_token(rng, 6, string.ascii_lowercase)}.{tld}"
    if kind == "phone":
        region = rng.choice(_REGIONS)
        number = phonenumbers.example_number_for_type(
            region, rng.choice([phonenumbers.PhoneNumberType.MOBILE,
                                phonenumbers.PhoneNumberType.FIXED_LINE]))
        fmt = rng.choice([phonenumbers.PhoneNumberFormat.INTERNATIONAL,
                          phonenumbers.PhoneNumberFormat.E164])
        return phonenumbers.format_number(number, fmt)
    if kind == "api_key":
        return rng.choice([
            "AKIA" + _token(rng, 16, string.ascii_uppercase + string.digits),
            "ghp_" + _token(rng, 36),
            "xoxb-" + _token(rng, 12, string.digits) + "-" + _token(rng, 13, string.digits)
            + "-" + _token(rng, 24),
            "sk-proj-" + _token(rng, 48),
            "sk_live_" + _token(rng, 24),
            "api_key=" + _token(rng, 32),
        ])
    if kind == "private_key":
        key = bytes(rng.getrandbits(8) for _ in range(32))
        return rng.choice([
            "private key: 0x" + key.hex(),
            _b58check(b"\x80" + key + b"\x01"),
            "-----BEGIN EC PRIVATE KEY-----\n" + _token(rng, 64, string.ascii_letters
                                                        + string.digits + "+/")
            + "\n-----END EC PRIVATE KEY-----",
        ])
    if kind == "seed_phrase":
        return Mnemonic("english").to_mnemonic(bytes(rng.getrandbits(8)
                                                     for _ in range(rng.choice([16, 32]))))
    country, bank, digits = rng.choice(_IBAN_BANKS)
    iban = IBAN.generate(country, bank_code=bank,
                         account_code=_token(rng, digits, string.digits))
    return iban.formatted if rng.random() < 0.5 else str(iban)


def planted(n_per_kind: int = 50, seed: int = 28) -> list[tuple[str, str, str]]:
    """``(kind, secret, sentence)`` triples, ``n_per_kind`` for each kind."""
    rng = random.Random(seed)
    out = []
    for kind in ("email", "phone", "api_key", "private_key", "seed_phrase", "iban"):
        for _ in range(n_per_kind):
            secret = _secret(kind, rng)
            out.append((kind, secret, rng.choice(_TEMPLATES).format(s=secret)))
    return out


def left(secret: str, text: str) -> list[str]:
    """Pieces of the secret (6+ characters, or its digits for a phone) still in ``text``."""
    text = re.sub(r"\[redacted:[a-z_]+\]", " ", text)  # the labels are not the secret
    pieces = [p for p in SECRET_PIECES.findall(secret)
              if p.lower() not in {"private", "begin", "end", "api_key"}]
    digits = re.sub(r"\D", "", secret)
    found = [p for p in pieces if p in text]
    if len(digits) >= 7 and digits in re.sub(r"\D", "", text):
        found.append(digits)
    return found
