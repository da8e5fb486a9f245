"""The learned reranker (``retrieval.reranker``) and "nothing relevant", on real stores.

The models here are tiny trees written by hand (a tiny synthetic training set's worth):
what is tested is that the pipeline orders by the model's probability, keeps today's order
when the reranker is off, answers "nothing relevant" under the floor, and that the shipped
weights load with their training record.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from grimoire.clock import FrozenClock
from grimoire.errors import ValidationError
from grimoire.retrieval.learned import FEATURES, Forest, Reranker, load_reranker
from grimoire.retrieval.learned.features import QueryInfo, matrix
from grimoire.retrieval.learned.model import SHIPPED
from tests.retrieval.retrieve_support import open_grimoire

MINUTE = 60_000
START = 1_767_225_600_000


def _stump(feature: str, low: float, high: float, threshold: float = 0.5,
           *more: tuple[str, float, float, float]) -> Forest:
    """Stumps, one per split: ``x[feature] <= threshold`` scores ``low``, else ``high``."""
    splits = [(feature, low, high, threshold), *more]
    tree: dict[str, list[float]] = {"tree_info": []}  # type: ignore[dict-item]
    for name, lo, hi, at in splits:
        tree["tree_info"].append({"tree_structure": {  # type: ignore[arg-type]
            "split_feature": FEATURES.index(name), "threshold": at,
            "left_child": {"leaf_value": lo}, "right_child": {"leaf_value": hi}}})
    return Forest.from_lightgbm(tree)


def _write(path: Path, forest: Forest, floor: float = 0.0) -> Path:
    path.write_text(json.dumps(Reranker(forest, floor, {"command": "by hand"}).to_dict()))
    return path


def _store(g, texts: list[str]) -> list[str]:  # type: ignore[no-untyped-def]
    return [g.episode_write(text=t, timestamp=START + i * MINUTE)["id"]
            for i, t in enumerate(texts)]


TEXTS = ["Did the blue falcon land?",
         "The blue falcon landed near the river at dawn, tired after the storm.",
         "We painted the kitchen cupboards a pale green colour.",
         "The train to the coast left late on Sunday."]


def test_the_reranker_orders_by_its_probability_and_off_keeps_the_gated_order(
        tmp_path: Path) -> None:
    # The stump prefers statements to questions: the gated order puts the question the
    # query repeats first (tier 2); the reranker puts the statement that answers it first.
    model = _write(tmp_path / "m.json", _stump("text_is_question", 2.0, -2.0, 0.5,
                                               ("idf_coverage", 0.0, 1.0, 0.3)))
    clock = FrozenClock(START + len(TEXTS) * MINUTE)
    for setting in ("off", str(model)):
        with open_grimoire(tmp_path / setting.replace("/", "_"), clock,
                           **{"retrieval.reranker": setting}) as g:
            question, statement = _store(g, TEXTS)[:2]
            items = g.retrieve(query="Did the blue falcon land?", k=3, mode="browse")["items"]
            if setting == "off":
                assert items[0]["id"] == question
                assert all("reranker" not in i["factors"] for i in items)
                assert "nothing_relevant" not in g.retrieve(query="falcon", mode="browse")
            else:
                assert items[0]["id"] == statement
                p = items[0]["factors"]["reranker"]["value"]
                assert p == pytest.approx(1 / (1 + np.exp(-3)))
                assert items[0]["score"] > items[1]["score"]


def test_nothing_relevant_is_an_empty_flagged_answer_under_the_floor(tmp_path: Path) -> None:
    # The model's probability follows the query's IDF-weighted term coverage of the text.
    model = _write(tmp_path / "m.json", _stump("idf_coverage", -3.0, 3.0, 0.3), floor=0.5)
    clock = FrozenClock(START + len(TEXTS) * MINUTE)
    with open_grimoire(tmp_path / "g", clock, **{"retrieval.reranker": str(model),
                                                 "retrieval.nothing_relevant": True}) as g:
        _store(g, TEXTS)
        off = g.retrieve(query="quantum chromodynamics lattice spacing", mode="browse")
        assert off["nothing_relevant"] is True and off["items"] == []
        on = g.retrieve(query="when did the train to the coast leave", mode="browse")
        assert on["nothing_relevant"] is False
        assert on["items"][0]["content"].startswith("The train")
    # The same store without the option: the off-topic query gets its (poor) items.
    with open_grimoire(tmp_path / "g", clock, **{"retrieval.reranker": str(model)}) as g:
        off = g.retrieve(query="quantum chromodynamics lattice spacing", mode="browse")
        assert "nothing_relevant" not in off and off["items"]


def test_features_read_the_query_text_interactions() -> None:
    from grimoire.retrieval.candidates import Candidate
    v = np.zeros(8, dtype=np.float32)
    v[0] = 1.0
    cands = [Candidate("a", "episode", "Melanie paid 4217 dollars in May 2023", v, START,
                       provenance={"actor": "Melanie", "thread": "s1"}),
             Candidate("b", "episode", "nothing to see here", v, START + MINUTE,
                       provenance={"actor": "Caroline", "thread": "s1"})]
    q = QueryInfo("What did Melanie pay, 4217 dollars, in May 2023?", v,
                  {"melanie": 2.0, "pay": 1.0, "4217": 3.0, "dollar": 1.0, "may": 0.5,
                   "2023": 0.5}, window=(START - 1, START + 1))
    x = matrix(q, cands, {"a": {"bm25": 1}}, {"bm25.episode": {"a": 4.0}}, {})
    col = {name: i for i, name in enumerate(FEATURES)}
    a, b = x
    assert a[col["rank_bm25"]] == 1.0 and b[col["rank_bm25"]] == 0.0
    assert a[col["score_bm25"]] == 1.0
    assert a[col["number_match"]] == 1.0 and b[col["number_match"]] == 0.0
    assert a[col["actor_named"]] == 1.0 and b[col["actor_named"]] == 0.0
    assert a[col["in_window"]] == 1.0 and b[col["in_window"]] == 0.0
    assert a[col["date_match"]] == 1.0
    assert a[col["idf_coverage"]] > 0.7 and b[col["idf_coverage"]] == 0.0
    assert a[col["entity_overlap"]] == 1.0 and b[col["neighbour_cosine"]] == 1.0
    # "nothing to see here" matches no word, but sits beside the turn that does: it reads
    # that turn's coverage and fused relevance (an answer beside its question).
    assert b[col["neighbour_coverage"]] == a[col["idf_coverage"]]
    assert a[col["neighbour_coverage"]] == 0.0
    x = matrix(q, cands, {}, {}, {"a": {"rrf": {"value": 0.8}}})
    assert x[1][col["neighbour_fused"]] == np.float32(0.8) and x[0][col["neighbour_fused"]] == 0.0


def test_the_numpy_trees_follow_every_path() -> None:
    # Two trees: a depth-2 one and a stump; a row's raw score is the sum of its leaves.
    tree = {"tree_info": [
        {"tree_structure": {"split_feature": 0, "threshold": 1.0, "decision_type": "<=",
                            "left_child": {"leaf_value": -1.0},
                            "right_child": {"split_feature": 1, "threshold": 0.0,
                                            "decision_type": "<=",
                                            "left_child": {"leaf_value": 0.5},
                                            "right_child": {"leaf_value": 2.0}}}},
        {"tree_structure": {"leaf_value": 0.25}}]}
    forest = Forest.from_lightgbm(tree)
    rows = np.array([[0.0, 5.0], [1.0, 5.0], [2.0, -1.0], [2.0, 1.0]])
    assert forest.raw(rows).tolist() == [-0.75, -0.75, 0.75, 2.25]
    again = Forest.from_dict(json.loads(json.dumps(forest.to_dict())))
    assert again.raw(rows).tolist() == forest.raw(rows).tolist()
    with pytest.raises(ValidationError):
        forest.raw(np.zeros((2, 1)))


def test_a_model_trained_on_other_features_refuses_to_load(tmp_path: Path) -> None:
    data = Reranker(_stump("cosine", 0.0, 1.0), 0.1).to_dict()
    data["features"] = data["features"][:-1]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValidationError, match="other features"):
        load_reranker(path)


def test_the_shipped_weights_load_with_their_training_record() -> None:
    model = load_reranker(SHIPPED)
    for key in ("command", "date", "seed", "data", "library"):
        assert key in model.meta
    assert "check" not in json.dumps(model.meta["data"]).lower()
    assert 0.0 < model.floor < 1.0
    assert model.forest.n_trees > 10
    p = model.forest.predict(np.zeros((3, len(FEATURES))))
    assert p.shape == (3,) and np.all((p > 0.0) & (p < 1.0))


def test_nothing_relevant_without_the_reranker_reads_the_shipped_evidence_floors(
        tmp_path: Path) -> None:
    # The reranker off: the pool's best absolute term coverage and cosine margin against
    # the floors shipped with the weights (gate_floor).
    assert load_reranker(SHIPPED).gate_floor
    clock = FrozenClock(START + len(TEXTS) * MINUTE)
    with open_grimoire(tmp_path / "g", clock, **{"retrieval.nothing_relevant": True}) as g:
        _store(g, TEXTS)
        off = g.retrieve(query="Zuvexmir plinsnor thaxlum grikaqua?", mode="browse")
        assert off["nothing_relevant"] is True and off["items"] == []
        on = g.retrieve(query="The train to the coast left late on Sunday.", mode="browse")
        assert on["nothing_relevant"] is False
        assert on["items"][0]["content"].startswith("The train")
        assert all("reranker" not in i["factors"] for i in on["items"])


def test_with_the_reranker_diversity_does_not_drop_a_second_answer(tmp_path: Path) -> None:
    # Two statements answer the query and read alike; a third matches it less (the model
    # gives it a little less). At k = 2 the reranker's order keeps both answers; a
    # diversity penalty (rerank_mmr_lambda 0.7) swaps the second for the unlike one.
    model = _write(tmp_path / "m.json", _stump("text_is_question", 2.0, -2.0, 0.5,
                                               ("idf_coverage", 0.0, 0.3, 0.5)))
    texts = ["The blue falcon landed near the river at dawn, tired after the storm.",
             "The blue falcon landed near the river at dusk, tired after the flight.",
             "A blue falcon landed on the hills."]
    clock = FrozenClock(START + len(texts) * MINUTE)
    picked = {}
    for balance in (1.0, 0.7):
        with open_grimoire(tmp_path / str(balance), clock, **{
                "retrieval.reranker": str(model), "retrieval.rerank_mmr_lambda": balance,
                "retrieval.mmr_duplicate": 0.999}) as g:
            ids = _store(g, texts)
            out = g.retrieve(query="blue falcon landed near the river", k=2, mode="browse")
            picked[balance] = {ids.index(i["id"]) for i in out["items"]}
    assert picked[1.0] == {0, 1}
    assert 2 in picked[0.7] and len(picked[0.7] & {0, 1}) == 1
