"""privacy.redact: every planted secret is removed before embedding and storage; off by
default; an unknown kind is a configuration error."""

from __future__ import annotations

from pathlib import Path

import pytest

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.errors import ConfigError
from grimoire.guard.redact import KINDS, redactor
from grimoire.models.embedders import HashEmbedder
from grimoire.retrieval.stages import writes
from scripts.benches.planted import left, planted


def test_every_planted_secret_is_removed() -> None:
    found = redactor(["all"])
    assert found is not None
    missed = [(kind, secret, out) for kind, secret, sentence in planted(40)
              if left(secret, out := found.redact(sentence))]
    assert missed == []


def test_each_kind_only_when_chosen() -> None:
    found = redactor(["email"])
    assert found is not None
    text = "mail jane@example.com or call +44 20 7946 0958"
    assert found.redact(text) == "mail [redacted:email] or call +44 20 7946 0958"
    with pytest.raises(ConfigError, match="unknown kind"):
        redactor(["emails"])
    assert redactor([]) is None and set(KINDS) == {"email", "phone", "api_key", "private_key",
                                                   "seed_phrase", "iban"}


def test_market_text_is_left_alone() -> None:
    found = redactor(["all"])
    assert found is not None
    text = ("swap 2 WETH on WETH/USDC at 31.5 gwei, block 19000000, price 3120.55, tx "
            "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318 from "
            "0x742d35cc6634c0532925a3b844bc454e4438f44e")
    assert found.redact(text) == text


@pytest.mark.parametrize("kinds", [["all"], []])
def test_the_write_path_stores_and_embeds_the_redacted_text(tmp_path: Path,
                                                           kinds: list[str]) -> None:
    config = Config().replace(**{"privacy.redact": kinds})
    email, key = "jane.doe@example.com", "AKIAIOSFODNN7EXAMPL2"
    with Grimoire.open(tmp_path / "data", config=config, clock=FrozenClock(),
                       embedder=HashEmbedder(dim=384)) as g:
        got = g.episode_write(text=f"user {email} pasted {key} by mistake", actor=email)
        entry = g.entry_add(category="warning", content=f"Avoid swaps {email} asks for when "
                            "gas_gwei > 80 because fees eat the gain")
        episode = g.episode_get(got["id"])
        content = g.entry_get(entry["id"])["content"] if entry["id"] else ""
        g.context.episodes.flush()
    stored = b"".join(p.read_bytes() for p in (tmp_path / "data").rglob("*") if p.is_file())
    if kinds:  # on: nothing of it anywhere, in the record or on disk
        assert email not in episode["text"] and key not in episode["text"]
        assert episode["actor"] == "[redacted:email]" and email not in content
        assert email.encode() not in stored and key.encode() not in stored
    else:  # off by default: stored as written (so the test above can fail)
        assert email in episode["text"] and email.encode() in stored


@pytest.mark.parametrize("kinds", [["all"], []])
def test_queries_kg_assertions_and_metric_keys_are_redacted_too(tmp_path: Path,
                                                                 kinds: list[str]) -> None:
    """The other places text is kept: the retrieval log's query, a KG triple's subject and
    object, an episode's metric and prediction names."""
    config = Config().replace(**{"privacy.redact": kinds})
    email, phone = "treasury.ops@example.org", "+44 20 7946 0958"
    with Grimoire.open(tmp_path / "data", config=config, clock=FrozenClock(),
                       embedder=HashEmbedder(dim=384)) as g:
        got = g.episode_write(text="swap settled", metrics={f"fee paid by {email}": 1.5},
                              prediction={f"refund to {phone}": 2.0})
        rid = g.retrieve(query=f"what did {email} swap last week")["retrieval_id"]
        g.kg_assert(subject={"kind": "vault", "id": f"vault of {email}"},
                    predicate="custom:owned_by", object=f"call {phone}", valid_from=1)
        episode = g.episode_get(got["id"])
        triples = g.kg_at({"kind": "vault", "id": "vault of [redacted:email]"}, 5)["triples"]
        writes.wait(g.context, rid)  # the retrieval log is written after the answer
        logged = g.context.semantic.get_retrieval(rid)
        g.context.episodes.flush()
    stored = b"".join(p.read_bytes() for p in (tmp_path / "data").rglob("*") if p.is_file())
    if kinds:
        assert list(episode["metrics"]) == ["fee paid by [redacted:email]"]
        assert list(episode["prediction"]) == ["refund to [redacted:phone]"]
        assert [t["object"]["value"] for t in triples] == ["call [redacted:phone]"]
        assert logged is not None and logged.query == "what did [redacted:email] swap last week"
        assert email.encode() not in stored and b"7946 0958" not in stored
    else:
        assert logged is not None and email in logged.query and not triples
        assert email.encode() in stored and b"7946 0958" in stored
