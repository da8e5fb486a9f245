"""``forget``: every trace of a name leaves every file; entries recounted; crash-safe; dry run.

Real stores in ``tmp_path`` (frozen clock, hash embedder). The byte scan reads every file
under the data directory in the encodings the stores write text in (UTF-8; UTF-16 both
ways for good measure), case-folded, so an FTS5 token (lower case) is found too.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.errors import NotAvailableError, ValidationError
from grimoire.forget import tombstones
from grimoire.forget.plan import make_plan, parse_selector
from grimoire.ids import new_id
from grimoire.models.embedders import HashEmbedder
from grimoire.records import Category, DecayClass, EntryStatus, GrimoireEntry, Provenance
from tests.curator.test_curator_support import curator_config


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()  # the commands configure logging for the process


NAME = "Zorblax"
T0 = 1_767_225_600_000


def _open(path: Path, clock: FrozenClock) -> Grimoire:
    return Grimoire.open(path, config=curator_config(), clock=clock,
                         embedder=HashEmbedder(dim=384))


def _fill(g: Grimoire) -> list[str]:
    """Episodes by two actors (one of them the name), a told entry quoting it, KG triples
    about it, a retrieval that returned its episodes, a curator cycle; returns its ids."""
    mine: list[str] = []
    for i in range(40):
        by_name = i % 4 == 0
        text = (f"{NAME} swapped 2 WETH/USDC at gas {20 + i} gwei" if by_name
                else f"bob swapped 1 WETH/USDC at gas {20 + i} gwei")
        got = g.episode_write(text=text, actor=NAME if by_name else "bob", type="action",
                              outcome="negative" if i % 2 else "positive",
                              timestamp=T0 + i * 60_000, thread="t-main")["id"]
        if by_name:
            mine.append(got)
    g.entry_add(category="warning", content=f"Avoid swaps when {NAME} says gas_gwei > 80 "
                "because fees eat the gain")
    g.kg_assert(subject={"kind": "address_cluster", "id": NAME}, predicate="custom:trades",
                object={"kind": "token", "id": "WETH"}, valid_from=1)
    g.kg_assert(subject={"kind": "token", "id": "WETH"}, predicate="custom:held_by",
                object=f"{NAME} wallet", valid_from=1)
    g.retrieve(query=f"what did {NAME} swap")
    g.curator_run()
    g.context.episodes.flush()
    return mine


def _scan(root: Path, name: str) -> list[tuple[str, str]]:
    hits = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink() or path.name == "grimoire.sock":
            continue
        data = path.read_bytes().lower()
        for enc in ("utf-8", "utf-16-le", "utf-16-be"):
            if name.lower().encode(enc) in data:
                hits.append((str(path.relative_to(root)), enc))
    return hits


@pytest.fixture
def g(tmp_path: Path, clock: FrozenClock) -> Iterator[Grimoire]:
    with _open(tmp_path / "data", clock) as opened:
        yield opened


@pytest.mark.parametrize("selector", [{"actor": NAME}, {"entity": NAME},
                                      {"matching": NAME.upper()}])
def test_after_forgetting_a_name_no_file_holds_it(g: Grimoire, tmp_path: Path,
                                                 selector: dict[str, str]) -> None:
    root = tmp_path / "data"
    mine = _fill(g)
    before = _scan(root, NAME)
    # The scan can fail: the name is on disk in several stores before the forget.
    assert {"PLAYBOOK.md", "graph.lmdb/data.mdb"} <= {p for p, _ in before} or len(before) >= 3
    old_files = set((root / "episodes" / "episodes.lance").rglob("*.lance"))
    result = g.forget(**selector)
    assert result["removed"]["episodes"] == len(mine) == 10
    # The two asserted about the name, and any fact the curator's graph phase drew from
    # the forgotten episodes alone.
    assert result["removed"]["triples"] >= 2 and result["removed"]["entries"] >= 1
    assert _scan(root, NAME) == []
    # Every LanceDB file of the versions that held the rows is gone, not just hidden.
    assert not old_files & set((root / "episodes" / "episodes.lance").rglob("*.lance"))
    ctx = g.context
    assert all(ctx.episodes.get(i) is None for i in mine) and ctx.episodes.count() == 30
    assert ctx.episodes.text_search(NAME, 10) == []
    assert not any(NAME.lower() in (i.get("content") or "").lower()
                   for i in g.retrieve(query="who swapped WETH at gas")["items"])
    assert ctx.graph.triples_about(needles=[NAME]) == []
    assert ctx.semantic.entries_quoting([NAME]) == []
    g.close()
    assert _scan(root, NAME) == []  # closing (flush, optimize) brings nothing back
    with _open(root, FrozenClock()) as again:  # and the reopened store has none of it
        assert again.context.episodes.count() == 30
        assert again.context.episodes.find_ids(quoting=[NAME]) == []


def test_dry_run_lists_what_would_go_and_changes_nothing(g: Grimoire, tmp_path: Path) -> None:
    mine = _fill(g)
    listed = g.forget(actor=NAME, dry_run=True)
    assert listed["dry_run"] is True and listed["would_remove"]["episodes"] == 10
    assert {e["id"] for e in listed["episodes"]} == set(mine)
    assert all(NAME in e["text"] for e in listed["episodes"])
    assert g.context.episodes.count() == 40
    assert not (tmp_path / "data" / tombstones.TOMBSTONES).exists()


def test_a_bad_selector_is_a_clear_error(g: Grimoire) -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        g.forget(actor="a-name", thread="t")
    with pytest.raises(ValidationError, match="shorter than 3"):
        g.forget(matching="ab")
    with pytest.raises(ValidationError, match="exactly one"):
        g.forget()


def _entry(g: Grimoire, parents: tuple[str, ...], **fields: Any) -> GrimoireEntry:
    ctx = g.context
    now = ctx.now()
    entry = GrimoireEntry(
        id=new_id(now), category=Category.INSIGHT, content="gas is lower at night",
        confidence=0.6, quality_score=0.5, decay_class=DecayClass.TACTICAL,
        provenance=Provenance.SELF_LEARNED, created_at=now, last_accessed_at=now,
        status=EntryStatus.ACTIVE, updated_at=now, parent_episode_ids=parents)
    entry = dataclasses.replace(entry, **fields)
    ctx.writer.call(lambda: ctx.semantic.insert_entry(entry, ctx.embedder.embed(["x"])[0]))
    return entry


def test_entries_that_cited_forgotten_episodes_are_recounted_or_removed(g: Grimoire) -> None:
    mine = _fill(g)
    ctx = g.context
    others = ctx.episodes.find_ids(actor="bob")[:6]
    mixed = _entry(g, (*mine[:4], *others[:2]), validated_count=6, contradicted_count=1)
    only_mine = _entry(g, tuple(mine[4:7]), validated_count=3)
    ctx.writer.call(lambda: ctx.semantic.record_evidence(
        mixed.id, [*mine[:4], *others[:2]], "confirm", cycle=1, now=ctx.now()))
    ctx.writer.call(lambda: ctx.semantic.record_evidence(
        mixed.id, [others[2]], "contradict", cycle=1, now=ctx.now()))
    ctx.writer.call(lambda: ctx.semantic.record_evidence(
        only_mine.id, list(mine[4:7]), "confirm", cycle=1, now=ctx.now()))
    g.forget(actor=NAME)
    after = ctx.semantic.get_entry(mixed.id)
    assert after is not None
    assert (after.validated_count, after.contradicted_count) == (2, 1)
    assert set(after.parent_episode_ids) == set(others[:2])
    assert ctx.semantic.count_evidence(mixed.id) == (2, 1)
    assert after.confidence < mixed.confidence
    assert ctx.semantic.get_entry(only_mine.id) is None  # left without support: removed


def test_a_forget_cut_short_is_finished_at_the_next_open(tmp_path: Path,
                                                        clock: FrozenClock) -> None:
    root = tmp_path / "data"
    with _open(root, clock) as g:
        mine = _fill(g)
        plan = make_plan(g.context, parse_selector({"actor": NAME}))
        # The intent is written, then the process dies before any store is touched.
        tombstones.append(root, {"tombstone": new_id(clock()), "state": "pending",
                                 "kind": "actor", "at": clock(), "written_at_ms": 0,
                                 "counts": plan.counts(), "ids": plan.ids(),
                                 "curator": plan.curator})
    assert tombstones.pending(root)
    with _open(root, clock) as g:
        assert all(g.context.episodes.get(i) is None for i in mine)
        assert tombstones.pending(root) == []
    assert _scan(root, NAME) == []


def test_the_tombstone_holds_kind_counts_and_ids_never_the_text(g: Grimoire,
                                                               tmp_path: Path) -> None:
    _fill(g)
    g.forget(matching=NAME)
    [record] = tombstones.read(tmp_path / "data")
    assert record["state"] == "done" and record["kind"] == "matching"
    assert record["counts"]["episodes"] == 10
    assert NAME.lower() not in json.dumps(record).lower()


def test_a_read_only_open_may_only_dry_run(g: Grimoire, tmp_path: Path) -> None:
    _fill(g)
    g.close()  # one LMDB environment per process: the reader opens once the writer closed
    with Grimoire.open(tmp_path / "data", embedder=HashEmbedder(dim=384),
                       read_only=True) as reader:
        assert reader.forget(actor=NAME, dry_run=True)["would_remove"]["episodes"] == 10
        with pytest.raises(NotAvailableError):
            reader.forget(actor=NAME)


def _config_file(tmp_path: Path) -> Path:
    path = tmp_path / "grimoire.yaml"
    path.write_text("embedding:\n  model: hash-384\ncurator:\n  every_ticks: 1000000\n")
    return path


def test_cli_forgets_without_a_daemon_and_a_restore_applies_later_tombstones(
        tmp_path: Path, clock: FrozenClock, capsys: pytest.CaptureFixture[str]) -> None:
    from grimoire.cli import main
    from grimoire.portable.backup import backup

    root = tmp_path / "data"
    config = _config_file(tmp_path)
    with Grimoire.open(root, config=curator_config(), clock=clock,
                       embedder=HashEmbedder(dim=384, model_id="hash-384")) as g:
        mine = _fill(g)
    backup(root, tmp_path / "before")  # taken before the forget: it holds the name
    args = ["--data", str(root), "--config", str(config), "--socket", str(tmp_path / "s")]
    assert main(["forget", "--actor", NAME, "--dry-run", *args]) == 0
    assert "would remove 10 episodes" in capsys.readouterr().out
    assert main(["forget", "--actor", NAME, *args]) == 0
    assert "removed 10 episodes" in capsys.readouterr().out
    assert _scan(root, NAME) == []
    assert _scan(tmp_path / "before", NAME)  # backups are not rewritten
    assert main(["restore", str(tmp_path / "before"), str(tmp_path / "restored"),
                 "--config", str(config), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["forgotten"]["applied"] == 1
    assert _scan(tmp_path / "restored", NAME) == []
    with Grimoire.open(tmp_path / "restored", config=curator_config(), clock=clock,
                       embedder=HashEmbedder(dim=384, model_id="hash-384")) as again:
        assert all(again.context.episodes.get(i) is None for i in mine)
        assert again.context.episodes.count() == 30


def test_forget_through_the_daemon_socket(clock: FrozenClock) -> None:
    from grimoire.service.client import Client
    from tests.service.daemon_support import ServerThread, short_dir

    with short_dir() as base, _open(base / "data", clock) as g:
        mine = _fill(g)
        served = ServerThread(g, base / "data" / "grimoire.sock", max_connections=4,
                              idle_timeout_s=30, max_request_bytes=64 * 1024,
                              data_dir=base / "data").start()
        try:
            with Client(served.path) as client:
                listed = client.call("forget", {"actor": NAME, "dry_run": True})
                assert listed["would_remove"]["episodes"] == 10
                done = client.call("forget", {"actor": NAME})
                assert done["removed"]["episodes"] == 10
        finally:
            served.stop()
        assert all(g.context.episodes.get(i) is None for i in mine)
        assert _scan(base / "data", NAME) == []
