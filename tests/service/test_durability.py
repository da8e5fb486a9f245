"""An acknowledged write survives ``kill -9`` right after the ack, round after round.

A daemon subprocess (simulated feed at high speed, so LanceDB flushes and
compactions are in flight too) serves four concurrent writer threads over
the socket; it is SIGKILLed at a random moment, restarted, and every id
acknowledged so far must be there (episodes, knowledge-graph triples,
entries). Some rounds kill it while it is still starting (journal replay,
store open). At the end, every store opens cleanly in-process.
"""

from __future__ import annotations

import random
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest

from grimoire.errors import GrimoireError, ProtocolError
from grimoire.grimoire import Grimoire
from grimoire.models.embedders import HashEmbedder
from grimoire.service.client import Client
from tests.service.daemon_support import daemon_env, short_dir, start_daemon, wait_ready

pytestmark = pytest.mark.slow

ROUNDS = 20
WRITERS = 4


class Acked:
    """What the daemon acknowledged, shared by the writer threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.episodes: dict[str, str] = {}  # id -> text
        self.triples: dict[str, str] = {}  # id -> subject id
        self.entries: list[str] = []


def writer(sock: Path, k: int, stop: threading.Event, acked: Acked, rng: random.Random) -> None:
    """Write until told to stop or the daemon dies; record only what was acknowledged."""
    try:
        client = Client(sock, timeout=30)
        client.connect()
    except ProtocolError:
        return
    with client:
        n = 0
        while not stop.is_set():
            n += 1
            tag = f"w{k}-{n}-{uuid.uuid4().hex[:8]}"
            choice = rng.random()
            try:
                if k == 3 and choice < 0.5:
                    subject = f"0x{uuid.uuid4().hex}"
                    tid = client.call("kg.assert", {
                        "subject": {"kind": "pool", "id": subject}, "predicate": "deployed_by",
                        "object": {"kind": "address_cluster", "id": tag}, "valid_from": n})["id"]
                    with acked.lock:
                        acked.triples[tid] = subject
                elif k == 3:
                    result = client.call("entry.add", {
                        "category": "insight", "content": f"Observation {tag}: pool {n} "
                        f"{uuid.uuid4().hex} {uuid.uuid4().hex}"})
                    if result["decision"] == "admitted":
                        with acked.lock:
                            acked.entries.append(result["id"])
                elif choice < 0.3:
                    texts = [f"batch {tag} item {i}" for i in range(5)]
                    ids = client.call("episode.write_batch",
                                      {"episodes": [{"text": t, "strategy": f"s{k}"}
                                                    for t in texts]})["ids"]
                    with acked.lock:
                        acked.episodes.update(zip(ids, texts, strict=True))
                else:
                    text = f"episode {tag}"
                    eid = client.call("episode.write", {"text": text, "type": "action",
                                                        "outcome": "positive"})["id"]
                    with acked.lock:
                        acked.episodes[eid] = text
            except ProtocolError:
                return  # killed: whatever was in flight was never acknowledged
            except GrimoireError as exc:
                if "shutting down" in str(exc):
                    return
                raise


def verify(sock: Path, acked: Acked) -> None:
    with acked.lock:
        episodes = dict(acked.episodes)
        triples = dict(acked.triples)
        entries = list(acked.entries)
    with Client(sock, timeout=120) as client:
        got = client.call_many("episode.get", [{"id": i} for i in episodes])
        missing = [i for i, g in zip(episodes, got, strict=True)
                   if not isinstance(g, dict) or g["text"] != episodes[i]]
        assert not missing, f"{len(missing)} acknowledged episodes lost, e.g. {missing[:3]}"
        known = client.call_many("kg.known_at", [
            {"subject": {"kind": "pool", "id": s}, "time": 2**42} for s in triples.values()])
        for tid, answer in zip(triples, known, strict=True):
            assert isinstance(answer, dict), answer
            assert tid in {t["id"] for t in answer["triples"]}, f"triple {tid} lost"
        for eid, answer in zip(entries, client.call_many("entry.get",
                                                         [{"id": e} for e in entries]),
                               strict=True):
            assert isinstance(answer, dict), f"entry {eid} lost: {answer}"


def test_acknowledged_writes_survive_kill_9_at_random_moments() -> None:
    rng = random.Random(20_240_601)
    acked = Acked()
    env = daemon_env(GRIMOIRE_EPISODES__FLUSH_ROWS="32", GRIMOIRE_EPISODES__FLUSH_MS="500",
                     GRIMOIRE_EPISODES__COMPACT_EVERY_APPENDS="3",
                     GRIMOIRE_EPISODES__CLEANUP_OLDER_THAN_S="0")
    with short_dir() as root:
        data = root / "data"
        sock = data / "grimoire.sock"
        log_path = root / "daemon.log"
        kills_in_startup = 0
        for round_no in range(ROUNDS):
            with log_path.open("ab") as log:
                proc = start_daemon(data, "--feed", "sim", "--speed", "3000", env=env,
                                    stdout=log)
                if round_no % 5 == 4:  # kill while it opens / replays the journal
                    time.sleep(rng.uniform(0.0, 1.5))
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGKILL)
                        kills_in_startup += 1
                    proc.wait(30)
                    continue
                wait_ready(proc, sock)
                verify(sock, acked)
                stop = threading.Event()
                threads = [threading.Thread(target=writer, args=(
                    sock, k, stop, acked, random.Random(rng.random()))) for k in range(WRITERS)]
                for t in threads:
                    t.start()
                time.sleep(rng.uniform(0.05, 0.8))
                proc.send_signal(signal.SIGKILL)
                proc.wait(30)
                stop.set()
                for t in threads:
                    t.join(30)
                    assert not t.is_alive()
        assert kills_in_startup >= 1
        assert len(acked.episodes) > 100 and acked.triples and acked.entries
        with log_path.open("ab") as log:
            proc = start_daemon(data, "--feed", "sim", "--tick-seconds", "3600", env=env,
                                stdout=log)
            wait_ready(proc, sock)
            verify(sock, acked)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0
        # Every store opens cleanly in-process too, and holds what was acknowledged.
        with Grimoire.open(data, embedder=HashEmbedder()) as g:
            assert g.context.episodes.count() >= len(acked.episodes)
            ids = [e.id for e in g.context.episodes.scan()]
            assert len(ids) == len(set(ids))
            assert set(acked.episodes) <= set(ids)
            assert g.context.graph.stats()["triples"] >= len(acked.triples)
            assert g.context.semantic.counts().total >= len(acked.entries)
            assert g.health()["tick"] > 0
