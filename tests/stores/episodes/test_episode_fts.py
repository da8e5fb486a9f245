"""LanceDB's FTS index past ``episodes.fts_threshold`` (``fts``, ``words``): built off the
write path, measured against our BM25 (overlap@10 in ``stats``), used for text search, and
an open past the threshold does not build the in-memory postings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grimoire.clock import FrozenClock
from grimoire.config import EpisodesConfig
from grimoire.models.embedders import HashEmbedder
from grimoire.records import Episode, EpisodeType
from grimoire.stores.episodes.fts import lance_where
from grimoire.stores.episodes.index import EpisodeFilter
from grimoire.stores.episodes.store import EpisodeStore

EMB = HashEmbedder(dim=32)
POOLS = ["uniswap", "curve", "balancer", "sushiswap", "pancake", "aerodrome", "velodrome"]


def episode(i: int) -> Episode:
    return Episode(id=f"f-{i}", text=f"swapped {POOLS[i % 7]} liquidity batch{i} at block "
                   f"{i * 13} for strategy s{i % 4}", type=EpisodeType.ACTION,
                   timestamp=10_000 + i, strategy=f"s{i % 4}")


def open_store(path: Path, **cfg: Any) -> EpisodeStore:
    config = EpisodesConfig(**{"fts_threshold": 200, "ann_threshold": 0,
                               "ann_recall_queries": 40, **cfg})
    return EpisodeStore.open(path, model_id=EMB.model_id, dim=EMB.dim, config=config,
                             clock=FrozenClock())


def fill(store: EpisodeStore, n: int) -> None:
    for lo in range(0, n, 100):
        eps = [episode(i) for i in range(lo, min(n, lo + 100))]
        store.append(eps, EMB.embed([e.text for e in eps]))
    store.flush()


def test_past_the_threshold_text_search_goes_through_lancedb_fts(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        fill(store, 150)
        assert not store.ann_due()  # below the threshold: our BM25 only
        fill_more = [episode(i) for i in range(150, 300)]
        store.append(fill_more, EMB.embed([e.text for e in fill_more]))
        store.flush()
        assert store.ann_due()
        ours = [e.id for e, _ in store.text_search("batch217", 3)]
        built = store.refresh_ann()
        assert built is not None and built["fts"]["rows"] == 300
        fts = store.stats()["fts"]
        assert fts["indexed_rows"] == 300 and fts["used"]
        assert 0.5 <= fts["overlap_at_10"] <= 1.0
        assert [e.id for e, _ in store.text_search("batch217", 3)] == ours == ["f-217"]
        assert store._words.text is not None  # the store's own postings (open below)
    with open_store(tmp_path) as store:
        assert store._words.text is None  # the open did not tokenize every text
        assert store.stats()["fts"]["used"]  # the last build's measure, kept
        assert not store.ann_due()  # nothing to rebuild after an open
        hits = store.text_search("balancer batch9", 5)
        assert hits[0][0].id == "f-9"
        flt = EpisodeFilter(strategy="s2", since_ms=10_100)
        found = store.text_search("balancer liquidity", 20, flt)
        assert found and all(e.strategy == "s2" and e.timestamp >= 10_100 for e, _ in found)
        assert store._words.text is None  # filters went to LanceDB too


def test_without_a_usable_index_the_postings_are_built_on_first_need(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        fill(store, 250)
    with open_store(tmp_path, fts_min_overlap=1.01) as store:  # never usable
        assert store._words.text is None
        assert store.text_search("batch42", 1)[0][0].id == "f-42"
        assert store._words.text is not None
        new = [episode(i) for i in range(250, 260)]
        store.append(new, EMB.embed([e.text for e in new]))  # buffered: our BM25 sees it
        assert store.text_search("batch255", 1)[0][0].id == "f-255"


def test_filters_become_lancedb_sql_with_quotes_escaped() -> None:
    assert lance_where(None) is None
    where = lance_where(EpisodeFilter(types=["action"], strategy="it's", until_ms=5))
    assert where == "type IN ('action') AND strategy = 'it''s' AND timestamp < 5"


def test_the_overlap_scores_lancedb_hits_with_our_bm25(tmp_path: Path) -> None:
    """Rows our BM25 ties on (same words, same length to our tokenizer) that LanceDB's
    tokenizer tells apart (it splits ``a_b``: the earlier rows are longer to it, so it ranks
    the later ones first). Our BM25 scores LanceDB's hits as high as its own 10th: they are
    as good an answer, and the overlap counts them whichever of the tied rows our own top
    k (or top 200) happens to hold."""
    texts = [f"rebalanced the curve pool {'a_b' if i < 300 else 'zz'}" for i in range(600)]
    with open_store(tmp_path, ann_recall_queries=60) as store:
        for lo in range(0, 600, 100):
            eps = [Episode(id=f"t-{i}", text=texts[i], type=EpisodeType.ACTION,
                           timestamp=1_000 + i) for i in range(lo, lo + 100)]
            store.append(eps, EMB.embed(texts[lo:lo + 100]))
        store.flush()
        ours = store.text_search("curve pool", 10)
        assert len({score for _, score in ours}) == 1  # 600 rows tie for our BM25
        assert store.refresh_ann() is not None
        fts = store.stats()["fts"]
        assert fts["overlap_at_10"] >= 0.95 and fts["used"]
        theirs = store.text_search("curve pool", 10)  # now through LanceDB's index
        assert all(int(e.id[2:]) >= 300 for e, _ in theirs)
