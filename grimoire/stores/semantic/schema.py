"""Schema of the semantic store: numbered migrations and the open-time checks.

Owns the DDL (tables, indexes, the triggers that keep FTS5 and the vec0
metadata columns in step with ``grimoire_entries``), ``PRAGMA user_version``
and the embedding model/dimension recorded in ``meta``. It must not read or
write records: that is ``semantic_entries`` and friends.

Migration ``n`` (1-based) is ``MIGRATIONS[n-1]``. Each runs in its own
``BEGIN IMMEDIATE`` transaction together with ``PRAGMA user_version = n``, so
a crash leaves the store at a whole version. Never edit a shipped migration:
append a new one.

Layout decisions:

- ``grimoire_entries`` has an integer ``rid`` (the rowid shared with the vec0
  and FTS5 tables) and the entry's UUID ``id`` as a unique key.
- Archived entries stay in ``grimoire_entries`` with ``status='archived'``:
  one table means ``get`` is one indexed lookup whatever the status, the
  claim key and causal edges that name the entry stay valid, and restoring
  is a status change. Queries exclude them by default through the status
  filter, which vec0 applies *during* its KNN scan (metadata column).
- Quarantined entries are stored the same way (``status='quarantined'``)
  plus a ``quarantined_entries`` row holding reason, conflict and resolution.
- FTS5 is an external-content index over ``content``, maintained by triggers;
  the vec0 table's metadata columns (category, status, strategy, regime) are
  copied by a trigger too, so no code path can leave them stale. The vector
  itself is written by the store (it is not a column of the entries table).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apsw

from grimoire.errors import EmbeddingMismatchError, SchemaVersionError, StoreError
from grimoire.logs import get_logger

__all__ = ["META_MODEL", "MIGRATIONS", "RESERVED_META", "SCHEMA_VERSION", "check_readable",
           "migrate"]

log = get_logger(__name__)

META_MODEL = "embedding"  # {"model_id": ..., "dim": ...}
RESERVED_META = frozenset({META_MODEL})

_V1 = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL CHECK (json_valid(value))
) STRICT;

CREATE TABLE grimoire_entries (
    rid                        INTEGER PRIMARY KEY,
    id                         TEXT NOT NULL UNIQUE,
    category                   TEXT NOT NULL,
    content                    TEXT NOT NULL,
    confidence                 REAL NOT NULL CHECK (confidence BETWEEN 0 AND 1),
    quality_score              REAL NOT NULL CHECK (quality_score BETWEEN 0 AND 1),
    decay_class                TEXT NOT NULL,
    provenance                 TEXT NOT NULL,
    created_at                 INTEGER NOT NULL,
    last_accessed_at           INTEGER NOT NULL,
    validated_count            INTEGER NOT NULL,
    contradicted_count         INTEGER NOT NULL,
    market_regime              TEXT,
    valid_from                 INTEGER,
    valid_until                INTEGER,
    parent_episode_ids         TEXT NOT NULL CHECK (json_valid(parent_episode_ids)),
    tags                       TEXT NOT NULL CHECK (json_valid(tags)),
    source                     TEXT NOT NULL CHECK (json_valid(source)),
    emotional_tag              TEXT CHECK (emotional_tag IS NULL OR json_valid(emotional_tag)),
    strength                   REAL NOT NULL,
    status                     TEXT NOT NULL,
    consecutive_low_confidence INTEGER NOT NULL,
    access_count               INTEGER NOT NULL,
    strategy                   TEXT,
    is_bloodstain              INTEGER NOT NULL,
    dream_validated            INTEGER NOT NULL,
    claim                      TEXT CHECK (claim IS NULL OR json_valid(claim)),
    claim_key                  TEXT,
    parent_entry_ids           TEXT NOT NULL CHECK (json_valid(parent_entry_ids)),
    updated_at                 INTEGER NOT NULL
) STRICT;
CREATE INDEX entries_status_confidence ON grimoire_entries (status, confidence DESC);
CREATE INDEX entries_category_status ON grimoire_entries (category, status, confidence DESC);
CREATE INDEX entries_strategy_status ON grimoire_entries (strategy, status);
CREATE INDEX entries_created_at ON grimoire_entries (created_at);
CREATE INDEX entries_claim_key ON grimoire_entries (claim_key) WHERE claim_key IS NOT NULL;

CREATE VIRTUAL TABLE entry_vectors USING vec0 (
    rid       INTEGER PRIMARY KEY,
    embedding float[{dim}] distance_metric=cosine,
    category  TEXT,
    status    TEXT,
    strategy  TEXT,
    regime    TEXT
);
-- vec0 metadata cannot be NULL: '' stands for global / regime-agnostic.
CREATE TRIGGER entry_vectors_meta AFTER UPDATE OF category, status, strategy, market_regime
ON grimoire_entries BEGIN
    UPDATE entry_vectors SET category = new.category, status = new.status,
        strategy = coalesce(new.strategy, ''), regime = coalesce(new.market_regime, '')
    WHERE rid = new.rid;
END;
CREATE TRIGGER entry_vectors_delete AFTER DELETE ON grimoire_entries BEGIN
    DELETE FROM entry_vectors WHERE rid = old.rid;
END;

CREATE VIRTUAL TABLE entries_fts USING fts5 (
    content, content='grimoire_entries', content_rowid='rid',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER entries_fts_insert AFTER INSERT ON grimoire_entries BEGIN
    INSERT INTO entries_fts (rowid, content) VALUES (new.rid, new.content);
END;
CREATE TRIGGER entries_fts_delete AFTER DELETE ON grimoire_entries BEGIN
    INSERT INTO entries_fts (entries_fts, rowid, content) VALUES ('delete', old.rid, old.content);
END;
CREATE TRIGGER entries_fts_update AFTER UPDATE OF content ON grimoire_entries BEGIN
    INSERT INTO entries_fts (entries_fts, rowid, content) VALUES ('delete', old.rid, old.content);
    INSERT INTO entries_fts (rowid, content) VALUES (new.rid, new.content);
END;

-- Nodes are episode or entry ids, so there is no foreign key.
CREATE TABLE causal_edges (
    id             INTEGER PRIMARY KEY,
    cause_id       TEXT NOT NULL,
    effect_id      TEXT NOT NULL,
    kind           TEXT NOT NULL,
    relationship   TEXT,
    weight         REAL NOT NULL CHECK (weight BETWEEN 0 AND 1),
    lag_ms         INTEGER CHECK (lag_ms IS NULL OR lag_ms >= 0),
    evidence_count INTEGER NOT NULL CHECK (evidence_count >= 1),
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    CHECK (cause_id <> effect_id),
    UNIQUE (cause_id, effect_id, kind)
) STRICT;
-- Covering indexes for the walks: a BFS level reads only the index, never the table.
CREATE INDEX causal_edges_effect ON causal_edges (effect_id, kind, cause_id, weight);
CREATE INDEX causal_edges_cause ON causal_edges (cause_id, kind, effect_id, weight);

CREATE TABLE quarantined_entries (
    entry_id       TEXT PRIMARY KEY REFERENCES grimoire_entries (id),
    reason         TEXT NOT NULL,
    conflicting_id TEXT,
    quarantined_at INTEGER NOT NULL,
    resolution     TEXT CHECK (resolution IS NULL OR resolution IN ('released', 'rejected')),
    resolved_at    INTEGER
) STRICT;
CREATE INDEX quarantine_pending ON quarantined_entries (quarantined_at)
    WHERE resolution IS NULL;

CREATE TABLE admission_log (
    id                 INTEGER PRIMARY KEY,
    decided_at         INTEGER NOT NULL,
    decision           TEXT NOT NULL,
    future_utility     REAL NOT NULL,
    factual_confidence REAL NOT NULL,
    semantic_novelty   REAL NOT NULL,
    temporal_recency   REAL NOT NULL,
    content_type_prior REAL NOT NULL,
    composite          REAL NOT NULL,
    candidate          TEXT NOT NULL,
    category           TEXT,
    entry_id           TEXT
) STRICT;
CREATE INDEX admission_log_time ON admission_log (decided_at);

CREATE TABLE retrieval_log (
    retrieval_id   TEXT PRIMARY KEY,
    created_at     INTEGER NOT NULL,
    query          TEXT NOT NULL,
    mode           TEXT NOT NULL,
    items          TEXT NOT NULL CHECK (json_valid(items)),
    outcome        TEXT,
    outcome_detail TEXT CHECK (outcome_detail IS NULL OR json_valid(outcome_detail)),
    outcome_at     INTEGER
) STRICT;
CREATE INDEX retrieval_log_time ON retrieval_log (created_at);

CREATE TABLE curator_deltas (
    id          INTEGER PRIMARY KEY,
    cycle       INTEGER NOT NULL,
    op          TEXT NOT NULL,
    entry_id    TEXT,
    before_json TEXT CHECK (before_json IS NULL OR json_valid(before_json)),
    after_json  TEXT CHECK (after_json IS NULL OR json_valid(after_json)),
    created_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX curator_deltas_entry ON curator_deltas (entry_id, id);
CREATE INDEX curator_deltas_cycle ON curator_deltas (cycle, id);

CREATE TABLE episode_state (
    episode_id       TEXT PRIMARY KEY,
    consolidated     INTEGER NOT NULL DEFAULT 0,
    access_count     INTEGER NOT NULL DEFAULT 0,
    last_accessed_at INTEGER,
    replayed_at      INTEGER
) STRICT, WITHOUT ROWID;
"""

# Entity mentions (retrieval's graph backend): which episodes and entries name an
# entity ("token:WETH", "pool:WETH/USDC", "chain:base", "address:0x…"). Written by a
# post-write hook; read newest first per entity, so the index leads with the entity.
_V2 = """
CREATE TABLE entity_mentions (
    entity      TEXT NOT NULL,
    item_id     TEXT NOT NULL,
    item_kind   TEXT NOT NULL CHECK (item_kind IN ('episode', 'entry')),
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (entity, item_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX entity_mentions_recent ON entity_mentions (entity, recorded_at DESC);
"""

# The gate's off-topic flag and its reasons beside each decision (SPEC §5 flags a candidate
# unlike everything stored; the flag was returned to the caller and then lost). Rows from
# before the migration read as not flagged, with no reasons.
_V3 = """
ALTER TABLE admission_log ADD COLUMN off_topic INTEGER NOT NULL DEFAULT 0;
ALTER TABLE admission_log ADD COLUMN reasons TEXT NOT NULL DEFAULT '[]';
"""

# What PLAYBOOK.md showed, cycle by cycle (``grimoire report``): each listed entry with the
# confidence and the validated / contradicted counts printed beside it. The entry's text is
# read from grimoire_entries (kept, archived or not). And each retrieval's wall time, so
# that latency is history, not only a live counter.
_V4 = """
CREATE TABLE playbook_history (
    cycle        INTEGER NOT NULL,
    entry_id     TEXT NOT NULL,
    recorded_at  INTEGER NOT NULL,
    confidence   REAL NOT NULL,
    validated    INTEGER NOT NULL,
    contradicted INTEGER NOT NULL,
    PRIMARY KEY (cycle, entry_id)
) STRICT, WITHOUT ROWID;
CREATE TABLE playbook_cycles (
    cycle       INTEGER PRIMARY KEY,
    recorded_at INTEGER NOT NULL,
    listed      INTEGER NOT NULL
) STRICT;
ALTER TABLE retrieval_log ADD COLUMN latency_ms REAL;
"""

# Evidence counted per entry (issue 11): which episodes were counted as confirming or
# contradicting an entry's claim. An episode is counted at most once per entry, so a
# re-discovery on an overlapping window, a merge or a restatement adds nothing; ✓ / ✗ are
# the distinct counts here. Entries from before the migration keep their stored counts.
_V5 = """
CREATE TABLE entry_evidence (
    entry_id    TEXT NOT NULL,
    episode_id  TEXT NOT NULL,
    verdict     TEXT NOT NULL CHECK (verdict IN ('confirm', 'contradict')),
    cycle       INTEGER NOT NULL,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (entry_id, episode_id)
) STRICT, WITHOUT ROWID;
"""

# Causal edges earn their place (issue 24): a retrieval that serves an edge (on the causal
# chain it returns) counts a use at its instant; inferred edges whose last use or
# confirmation is older than retrieval.causal_edge_ttl_hours are pruned by the curator.
# Edges from before the migration read as never used.
_V6 = """
ALTER TABLE causal_edges ADD COLUMN uses INTEGER NOT NULL DEFAULT 0;
ALTER TABLE causal_edges ADD COLUMN used_at INTEGER;
"""

# A counter that moves with every change to grimoire_entries but a retrieval's
# access_count bump, and with nothing else (``SemanticStore.entries_mark``): what is kept
# from the entries (the active rules ``rules.applicable`` and ``retrieve`` match a
# situation against) stays valid across the commits that do not touch them: the log of
# each retrieval (with the access counts of the entries it served, which no reader of the
# rules shows), its mentions, outcomes. Under PRAGMA data_version every retrieval's own
# log write made the next one decode the rules again. A column added to grimoire_entries
# later joins this trigger's list (a test compares it with ENTRY_COLUMNS).
_V7 = """
CREATE TABLE entries_version (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    n   INTEGER NOT NULL
) STRICT;
INSERT INTO entries_version (one, n) VALUES (1, 0);
CREATE TRIGGER entries_version_insert AFTER INSERT ON grimoire_entries BEGIN
    UPDATE entries_version SET n = n + 1;
END;
CREATE TRIGGER entries_version_update AFTER UPDATE OF
    id, category, content, confidence, quality_score, decay_class,
    provenance, created_at, last_accessed_at, validated_count, contradicted_count, market_regime,
    valid_from, valid_until, parent_episode_ids, tags, source, emotional_tag,
    strength, status, consecutive_low_confidence, strategy, is_bloodstain, dream_validated,
    claim, claim_key, parent_entry_ids, updated_at
    ON grimoire_entries BEGIN
    UPDATE entries_version SET n = n + 1;
END;
CREATE TRIGGER entries_version_delete AFTER DELETE ON grimoire_entries BEGIN
    UPDATE entries_version SET n = n + 1;
END;
"""

# Append-only. {dim} is the embedding dimension (an int, formatted in).
MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7)
SCHEMA_VERSION = len(MIGRATIONS)


def _user_version(conn: apsw.Connection) -> int:
    return int(conn.pragma("user_version"))


def _check_embedding(conn: apsw.Connection, path: Path, model_id: str, dim: int) -> None:
    rows: list[Any] = conn.execute("SELECT value FROM meta WHERE key = ?",
                                   (META_MODEL,)).fetchall()
    if not rows:
        raise StoreError(f"semantic store {path} has no embedding model recorded; "
                         "it was not created by Grimoire or is damaged")
    stored = json.loads(rows[0][0])
    if stored.get("model_id") != model_id or stored.get("dim") != dim:
        raise EmbeddingMismatchError(
            f"semantic store {path} was built with embedding model "
            f"{stored.get('model_id')!r} (dim {stored.get('dim')}), but this Grimoire is "
            f"configured with {model_id!r} (dim {dim}). Configure embedding.model to the "
            "store's model, or use a new data directory and re-ingest."
        )


def migrate(conn: apsw.Connection, path: Path, *, model_id: str, dim: int) -> int:
    """Bring the store at ``conn`` to SCHEMA_VERSION; return the version it was at.

    Refuses a newer schema (SchemaVersionError) and a store built with another
    embedding model or dimension (EmbeddingMismatchError) before changing
    anything. A new store records ``model_id`` and ``dim`` in the same
    transaction as migration 1.
    """
    found = _user_version(conn)
    if found == SCHEMA_VERSION:  # the common case: no write lock needed
        _check_embedding(conn, path, model_id, dim)
        return found
    for target in range(1, SCHEMA_VERSION + 1):
        with conn:  # BEGIN IMMEDIATE: the version is re-read under the write lock
            current = _user_version(conn)
            if current > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"semantic store {path} has schema version {current}, newer than this "
                    f"Grimoire understands ({SCHEMA_VERSION}). Upgrade grimoire-memory, or "
                    "open a copy of the data directory made before the upgrade."
                )
            if current >= 1:
                _check_embedding(conn, path, model_id, dim)
            if current >= target:
                continue
            conn.execute(MIGRATIONS[target - 1].format(dim=int(dim)))
            if target == 1:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    (META_MODEL, json.dumps({"model_id": model_id, "dim": int(dim)})),
                )
            conn.pragma("user_version", target)
            log.info("semantic.migrate", path=str(path), version=target)
    return found


def check_readable(conn: apsw.Connection, path: Path, *, model_id: str, dim: int) -> int:
    """The read-only open's check: the store is at SCHEMA_VERSION and built with
    ``model_id``/``dim``; nothing is migrated or written. Returns the version."""
    found = _user_version(conn)
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"semantic store {path} has schema version {found}, newer than this Grimoire "
            f"understands ({SCHEMA_VERSION}). Upgrade grimoire-memory to read it."
        )
    if found == 0:
        raise StoreError(f"semantic store {path} is empty: no Grimoire has written it yet "
                         "(check --data DIR)")
    if found < SCHEMA_VERSION:
        raise StoreError(
            f"semantic store {path} is at schema version {found} and this Grimoire reads "
            f"version {SCHEMA_VERSION}; a read-only open does not migrate it: the daemon "
            "migrates it on its next start (grimoire run), then it can be read."
        )
    _check_embedding(conn, path, model_id, dim)
    return found
