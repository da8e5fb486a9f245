"""Train the learned reranker (``retrieval.reranker``) reproducibly, from a seed.

    .venv/bin/pip install lightgbm          # training only; prediction is numpy
    .venv/bin/python scripts/train_reranker.py                       # writes the package's
    .venv/bin/python scripts/train_reranker.py --out /tmp/r.json     # elsewhere

Training data (never the check half of LoCoMo dev):

- the FIT half of ``../shared/benchmarks/locomo-dev/`` (conversations 1, 3, 5, as
  ``bench_recall.py --split fit``): one store per conversation, one episode per turn, each
  question retrieved through the real pipeline (reranker off); every pooled candidate is a
  row, labelled 1 when it is one of the question's evidence turns;
- data the project generates itself (``benches/simqa.py``): simulator episodes with
  questions built from their own fields (the answer is known), in a store of their own;
- "nothing here" groups, every label 0: each fit conversation's questions asked of the
  next fit conversation's store, and of the simulator store (the absolute features learn
  what an unanswerable question's pool looks like).

Model: LightGBM, binary objective (a probability per candidate, so one floor can say
"nothing relevant"), a fixed number of small trees; converted to the numpy form
(``grimoire.retrieval.learned.forest``) and written with its training record (command,
data and its SHA-256, date, seed, library version, size). The check it prints: R@10 of the
reranked pool per fit conversation, each with a model trained without that conversation
(leave one out), beside the pool's ceiling; and the calibrated floor: the highest best-
probability under which dropping the fit questions' answers costs at most ``--floor-loss``
of R@10 (out of fold), with the share of the "nothing here" groups it would answer empty.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import hashlib
import json
import shlex
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import structlog
from bench_recall import DATA, FILE, Conversation, load
from benches import json_settings, simqa

from grimoire import Grimoire
from grimoire.clock import FrozenClock
from grimoire.config import Config
from grimoire.retrieval.learned import FEATURES, Forest, Reranker
from grimoire.retrieval.learned.model import SHIPPED
from grimoire.retrieval.stages.learned import FEATURE_SINK

DEPTH = 25


@dataclass
class Group:
    """One query's pool: its rows, labels, and where it came from."""

    source: str  # "dev:<conv>", "sim", "none"
    x: np.ndarray
    y: np.ndarray
    evidence: int  # evidence items in all (found or not)
    category: int = 0


def _pools(g: Grimoire, asked: list[tuple[str, frozenset[str], int]], source: str
           ) -> list[Group]:
    sink: list[Any] = []
    g.context.extras[FEATURE_SINK] = sink
    out = []
    for text, evidence, category in asked:
        sink.clear()
        g.retrieve(query=text, k=DEPTH, kinds=["episode"], mode="browse", max_tokens=100_000)
        if not sink:
            continue
        _, _, refs, x = sink[-1]
        y = np.array([ref in evidence for ref in refs], dtype=np.float32)
        out.append(Group(source, x, y, len(evidence), category))
    g.context.extras.pop(FEATURE_SINK, None)
    return out


def _store(tmp: Path, name: str, turns: list[dict[str, Any]], config: Config) -> Grimoire:
    end = max(t["timestamp"] for t in turns)
    g = Grimoire.open(tmp / name, config=config, clock=FrozenClock(end + 86_400_000))
    for i in range(0, len(turns), 500):
        g.episode_write_batch(turns[i:i + 500])
    return g


def collect(convs: list[Conversation], config: Config, seed: int, sim_n: int,
            sim_questions: int) -> list[Group]:
    groups: list[Group] = []
    with tempfile.TemporaryDirectory(prefix="train-reranker-") as tmp:
        root = Path(tmp)
        start = min(t["timestamp"] for c in convs for t in c.turns)
        end = max(t["timestamp"] for c in convs for t in c.turns)
        sim = simqa.episodes(sim_n, seed, start, end)
        with _store(root, "sim", sim, config) as g:
            asked = [(q, frozenset([ref]), 0) for q, ref in
                     simqa.questions(sim, sim_questions, seed)]
            groups += _pools(g, asked, "sim")
            other = [(q.text, frozenset[str](), 0) for q in convs[0].questions]
            groups += _pools(g, other, "none")
            print(f"sim: {len(sim)} episodes, {len(asked)} questions", flush=True)
        for i, c in enumerate(convs):
            with _store(root, c.sample_id, c.turns, config) as g:
                asked = [(q.text, q.evidence, q.category) for q in c.questions]
                groups += _pools(g, asked, f"dev:{c.sample_id}")
                nxt = convs[(i + 1) % len(convs)]
                groups += _pools(g, [(q.text, frozenset(), 0) for q in nxt.questions
                                     if nxt is not c], "none")
            print(f"{c.sample_id}: {len(c.questions)} questions", flush=True)
    return groups


def _save(path: Path, groups: list[Group]) -> None:
    np.savez_compressed(path, names=np.array(FEATURES),
                        x=np.concatenate([g.x for g in groups]),
                        y=np.concatenate([g.y for g in groups]),
                        size=np.array([len(g.y) for g in groups]),
                        source=np.array([g.source for g in groups]),
                        evidence=np.array([g.evidence for g in groups]),
                        category=np.array([g.category for g in groups]))


def _load(path: Path) -> list[Group]:
    data = np.load(path)
    if list(data["names"]) != list(FEATURES):
        raise SystemExit(f"{path}: cached with other features; drop --features or delete it")
    bounds = np.concatenate([[0], np.cumsum(data["size"])])
    return [Group(str(data["source"][i]), data["x"][bounds[i]:bounds[i + 1]],
                  data["y"][bounds[i]:bounds[i + 1]], int(data["evidence"][i]),
                  int(data["category"][i])) for i in range(len(data["size"]))]


def fit(groups: list[Group], args: argparse.Namespace) -> Forest:
    import lightgbm as lgb
    x = np.concatenate([g.x for g in groups]).astype(np.float64)
    y = np.concatenate([g.y for g in groups])
    params = {"objective": "binary", "num_leaves": args.leaves, "learning_rate": args.lr,
              "min_data_in_leaf": 20, "feature_fraction": 0.8, "bagging_fraction": 0.8,
              "bagging_freq": 1, "lambda_l2": 1.0, "seed": args.seed, "deterministic": True,
              "force_row_wise": True, "num_threads": 1, "verbose": -1}
    booster = lgb.train(params, lgb.Dataset(x, y, feature_name=list(FEATURES)),
                        num_boost_round=args.trees)
    forest = Forest.from_lightgbm(booster.dump_model())
    diff = np.max(np.abs(forest.raw(x) - booster.predict(x, raw_score=True)))
    if diff > 1e-6:
        raise SystemExit(f"the numpy trees disagree with LightGBM by {diff}")
    return forest


def recall10(groups: list[Group], p: list[np.ndarray]) -> float:
    values = [float(g.y[np.argsort(-s, kind="stable")[:10]].sum()) / g.evidence
              for g, s in zip(groups, p, strict=True)]
    return float(np.mean(values)) if values else 0.0


def calibrate(groups: list[Group], p: list[np.ndarray], loss: float) -> float:
    """The highest floor on the best probability that costs at most ``loss`` of R@10."""
    best = np.array([float(s.max()) if len(s) else 0.0 for s in p])
    gained = np.array([float(g.y[np.argsort(-s, kind="stable")[:10]].sum()) / g.evidence
                       for g, s in zip(groups, p, strict=True)])
    floor = 0.0
    for candidate in np.unique(best):
        if gained[best < candidate].sum() / len(groups) <= loss:
            floor = float(candidate)
    return floor


def calibrate_gate(dev: list[Group], none: list[Group], loss: float) -> dict[str, float]:
    """Without the reranker: "nothing relevant" when no pooled item covers at least
    ``idf_coverage`` of the query's IDF mass and none is ``cosine_margin`` above the
    query's background; the pair that empties most "nothing here" groups at <= ``loss``."""
    cov, margin = FEATURES.index("idf_coverage"), FEATURES.index("cosine_margin")

    def best(groups: list[Group]) -> tuple[np.ndarray, np.ndarray]:
        return (np.array([g.x[:, cov].max() for g in groups]),
                np.array([g.x[:, margin].max() for g in groups]))

    dev_cov, dev_margin = best(dev)
    none_cov, none_margin = best(none)
    gained = np.array([g.y.sum() / g.evidence for g in dev])  # at most what the pool holds
    chosen, emptied = {"idf_coverage": 0.0, "cosine_margin": 0.0}, -1.0
    for a in np.quantile(dev_cov, np.linspace(0, 0.2, 21)):
        for b in np.quantile(dev_margin, np.linspace(0, 0.2, 21)):
            lost = gained[(dev_cov < a) & (dev_margin < b)].sum() / len(dev)
            share = float(np.mean((none_cov < a) & (none_margin < b)))
            if lost <= loss and share > emptied:
                chosen, emptied = {"idf_coverage": float(a), "cosine_margin": float(b)}, share
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=SHIPPED)
    parser.add_argument("--features", type=Path, default=None,
                        help="cache the collected pools here (.npz); reused when present")
    parser.add_argument("--sim-episodes", type=int, default=1500)
    parser.add_argument("--sim-questions", type=int, default=200)
    parser.add_argument("--trees", type=int, default=150)
    parser.add_argument("--leaves", type=int, default=7)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                        help="a dotted config override for the pipeline the pools come from")
    parser.add_argument("--floor-loss", type=float, default=0.005,
                        help="R@10 the 'nothing relevant' floor may cost on the fit half")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    path = args.data / FILE
    if not path.is_file():
        print(f"train_reranker: the LoCoMo development half is absent: {path}",
              file=sys.stderr)
        return 2
    convs = load(path)[0::2]  # the fit half only (bench_recall --split fit)
    overrides = json_settings(args.set)
    config = Config().replace(**{**overrides, "retrieval.reranker": "off"})
    if args.features is not None and args.features.is_file():
        groups = _load(args.features)
    else:
        groups = collect(convs, config, args.seed, args.sim_episodes, args.sim_questions)
        if args.features is not None:
            _save(args.features, groups)
    dev = [g for g in groups if g.source.startswith("dev:")]
    # Leave one fit conversation out: the honest R@10 of the reranked pool, and the
    # out-of-fold probabilities the floor is calibrated on.
    oof: dict[int, np.ndarray] = {}
    for c in convs:
        held = f"dev:{c.sample_id}"
        model = fit([g for g in groups if g.source != held], args)
        rows = [i for i, g in enumerate(groups) if g.source == held]
        for i in rows:
            oof[i] = model.predict(groups[i].x)
        mine = [groups[i] for i in rows]
        ceiling = float(np.mean([g.y.sum() / g.evidence for g in mine]))
        print(f"{c.sample_id} held out: R@10 {recall10(mine, [oof[i] for i in rows]):.3f} "
              f"(pool ceiling {ceiling:.3f}, {len(mine)} questions)", flush=True)
    dev_idx = [i for i, g in enumerate(groups) if g.source.startswith("dev:")]
    floor = calibrate(dev, [oof[i] for i in dev_idx], args.floor_loss)
    forest = fit(groups, args)
    none = [g for g in groups if g.source == "none"]
    empty = float(np.mean([forest.predict(g.x).max() < floor for g in none])) if none else 0.0
    print(f"floor {floor:.4f}: costs <= {args.floor_loss} R@10 out of fold; answers "
          f"{empty:.2f} of the 'nothing here' groups empty (in sample)")
    gate_floor = calibrate_gate(dev, none, args.floor_loss)
    print(f"without the reranker: {gate_floor}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    import lightgbm as lgb
    meta = {
        "command": "python scripts/train_reranker.py " + shlex.join(
            sys.argv[1:] if argv is None else argv),
        "date": datetime.now(UTC).date().isoformat(), "seed": args.seed,
        "library": f"lightgbm {lgb.__version__} (objective binary), predicted in numpy",
        "data": {"locomo_dev": f"{FILE} sha256 {digest}, fit half only: "
                 + ", ".join(c.sample_id for c in convs)
                 + f" ({sum(len(c.questions) for c in convs)} questions)",
                 "simulator": f"default scenario, seed {args.seed}, {args.sim_episodes} "
                 f"episodes, {args.sim_questions} generated questions",
                 "nothing_here": f"{len(none)} questions asked of another store",
                 "rows": int(sum(len(g.y) for g in groups)),
                 "positives": int(sum(g.y.sum() for g in groups))},
        "size": {"trees": forest.n_trees, "nodes": len(forest.feature),
                 "leaves_per_tree": args.leaves, "learning_rate": args.lr,
                 "features": len(FEATURES)},
        "floor": f"best probability under {floor:.4f}: nothing relevant (costs <= "
                 f"{args.floor_loss} R@10 on the fit half, out of fold)",
    }
    args.out.write_text(json.dumps(Reranker(forest, floor, meta, gate_floor).to_dict(),
                                   separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KiB, {forest.n_trees} "
          f"trees, {len(forest.feature)} nodes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
