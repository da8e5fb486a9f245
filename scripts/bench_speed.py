"""Speed and footprint beside the floor and beside peers: retrieve, the stores side by side, RSS.

Three parts (``--part``), their code in ``scripts/benches/``:

- ``retrieval`` (the default): ``retrieve`` end to end beside its floor (query embedding +
  numpy dot), in process and over the socket, with the pipeline's stage times and CPU
  per call;
- ``compare``: Grimoire's episode store beside plain LanceDB and Chroma (extra ``[bench]``)
  with one embedder and the numpy floor; ``--all`` adds every row of issue 15's table
  (retrieve in process and over the socket, 8-client ingest, daemon RSS) in one run;
- ``memory``: the daemon's RSS (real model) idle and on a large store, split by mapping.

Every option but ``--part NAME`` is the part's own (``--part NAME --help``); every part
takes ``--quick`` (smaller stores, fewer calls). The machine has 2 shared cores: read the
ratios of one run.

    .venv/bin/python scripts/bench_speed.py --quick                  # retrieve at 10k, fewer calls
    .venv/bin/python scripts/bench_speed.py --part compare --all     # issue 15's table
    .venv/bin/python scripts/bench_speed.py --part memory --episodes 10000
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's grimoire

from benches import dispatch

PARTS = {"retrieval": "benches.retrieval", "compare": "benches.compare",
         "memory": "benches.memory"}

if __name__ == "__main__":
    sys.exit(dispatch("bench_speed.py", PARTS))
