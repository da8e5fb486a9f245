"""``forget``: erase an episode, an actor, a thread, an entity or a phrase from every store.

One operation, three steps, each its own module:

- ``plan``: what goes, decided once from the stores as they are: the episodes selected,
  the entries, KG triples, log and audit rows that hold them or quote the forgotten name,
  and the entries to recount or rebuild (``curator.api.forget_plan``);
- ``tombstones``: the tombstone, written (fsync'd) before anything is erased: what kind of
  thing was forgotten, how many, when, and the ids (never the text or the name) the
  apply step works through; a later line marks it done;
- ``apply``: erase by those ids from every store, recount, rewrite the files so no byte of
  what was erased remains (LanceDB versions, SQLite free pages and WAL, LMDB free pages),
  rebuild PLAYBOOK.md, and mark the tombstone done. Idempotent: a tombstone left
  pending by a crash is applied again at the next open, and a restore applies the
  tombstones written since its backup.

May import the stores, records, config, the curator's entry point (``curator.api``) and
the retrieval stages it drains; must not import the service, the CLI or the facade.
"""

from grimoire.forget.apply import apply_tombstones, forget, resume_pending

__all__ = ["apply_tombstones", "forget", "resume_pending"]
