"""Benchmark for privacy: how long forgetting takes, and what redaction catches.

Parts (``--part``; the code is in ``scripts/benches/``):

- ``forget`` (default): forgetting one actor's episodes in a large store, end to end
  (plan, tombstone, every store rewritten, recount, PLAYBOOK.md); goal: one actor's 1,000
  episodes in a 100k-episode store in <= 10 s. The fill uses the hash embedder (the
  model's speed is not what forget measures: it embeds nothing it erases).

    python scripts/bench_privacy.py                 # 100k episodes, 1,000 by the actor
    python scripts/bench_privacy.py --quick         # 10k episodes, 100 by the actor

- ``redact``: ``privacy.redact`` with every kind on: planted secrets removed (per kind) on a
  generated set, and the share of the simulator's texts it changed (false positives; goal
  <= 1 %).

    python scripts/bench_privacy.py --part redact

- ``faults``: each fault of issue 28 made for real (disk full mid-batch, kill -9 during
  backup / import / compaction / forget, a corrupted LanceDB fragment / SQLite page / LMDB
  file): acknowledged writes before it, writes lost after recovery (goal 0), time to
  recover.

    python scripts/bench_privacy.py --part faults

- ``scopes``: what a scope costs: opening one, the routing's cost per call, ``retrieve`` in
  a scope beside the default one, memory per open scope.

    python scripts/bench_privacy.py --part scopes

- ``redo``: what the second copy of each acknowledged write (``grimoire.stores.redo``)
  costs: ``episode.write`` p50, batched ingest, ``entry.add`` and ``kg.assert`` p50, the
  disk it takes; ``--baseline DIR`` (a checkout of the code before) runs both,
  alternating.

    python scripts/bench_privacy.py --part redo --baseline /tmp/before
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benches import dispatch

if __name__ == "__main__":
    raise SystemExit(dispatch("bench_privacy.py", {"forget": "benches.forget",
                                                  "redact": "benches.redact",
                                                  "faults": "benches.faults",
                                                  "scopes": "benches.scopes",
                                                  "redo": "benches.redo_cost"}))
