"""``grimoire check`` / ``grimoire repair``: find damaged store files and bring them back.

``check(DIR)`` reads every store of a data directory the way an open would, and more:

- ``semantic`` (``semantic.sqlite``) and ``journal`` (``episodes/episodes_journal.sqlite``):
  SQLite's ``PRAGMA integrity_check`` (every page, every index);
- ``episodes`` (``episodes/episodes.lance``): every row and vector of the latest version
  read, and every data file's Lance footer (its magic) looked at, so a damaged file is
  named;
- ``graph`` (``graph.lmdb``): every record of every LMDB database walked.

Each store is read in a child process (``python -m grimoire.portable.check STORE DIR``):
a damaged LMDB page or Lance file can crash its reader rather than raise, and then the
check reports the crash as that store's damage instead of dying with it. Nothing is
written; it runs beside a daemon too (every engine here allows a second reader).

``repair(DIR, BACKUP, INTO)`` builds a repaired copy in a new directory ``INTO``: the
verified backup restored, then every store the check found intact taken from ``DIR``
(newer than the backup), for a damaged episode table the rows of the newest version of
it that can still be read (LanceDB keeps older versions until compaction cleans them up)
added to the backup's, and then every write acknowledged since the backup replayed from
the damaged store's second copy (``portable.replay``, ``stores.redo``). ``BACKUP`` None:
no backup yet, the damaged store rebuilt from its second copy alone. ``DIR`` is never
changed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from grimoire.errors import ValidationError

__all__ = ["STORES", "check", "repair"]

STORES: dict[str, str] = {
    "semantic": "semantic.sqlite",
    "journal": "episodes/episodes_journal.sqlite",
    "episodes": "episodes/episodes.lance",
    "graph": "graph.lmdb",
}
_LANCE_MAGIC = b"LANC"
_PROBE_TIMEOUT_S = 600
_REPAIR_HINT = {
    "semantic": "grimoire repair --backup B --into NEW: this file from the newest backup, "
                "then redo/semantic.log replayed over it; every intact store from here",
    "journal": "restore from a backup (grimoire repair): the rows it held that were "
               "already flushed are in the episode table",
    "episodes": "grimoire repair --backup B --into NEW: the backup's rows, those of the "
                "newest version of this table that still reads, and the journal's copy of "
                "every row since the backup",
    "graph": "grimoire repair --backup B --into NEW: graph.lmdb from the newest backup, "
             "then redo/graph.log replayed over it",
}


# ------------------------------------------------------------------ probes (child process)


def _sqlite(path: Path) -> dict[str, Any]:
    import apsw

    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.set_busy_timeout(5000)
        problems = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(20)")]
    finally:
        conn.close()
    return {"ok": problems == ["ok"], "detail": "; ".join(problems)[:2000]}


def _lance(path: Path) -> dict[str, Any]:
    import lancedb

    bad = []
    for file in sorted((path / "data").glob("*.lance")):
        with open(file, "rb") as f:
            f.seek(max(0, file.stat().st_size - len(_LANCE_MAGIC)))
            if f.read() != _LANCE_MAGIC:
                bad.append(file.name)
    table = lancedb.connect(str(path.parent)).open_table(path.stem)
    try:
        rows = table.to_arrow().num_rows
    except Exception as exc:  # what a damaged file raises varies: report it whole
        named = f" (damaged data file(s): {', '.join(bad)})" if bad else ""
        return {"ok": False, "detail": f"cannot read version {table.version}: {exc}{named}"}
    if bad:
        return {"ok": False, "detail": f"data file(s) without a Lance footer: {bad}",
                "rows": rows}
    return {"ok": True, "detail": "ok", "rows": rows, "version": int(table.version)}


def _lmdb(path: Path) -> dict[str, Any]:
    import lmdb

    size = (path / "data.mdb").stat().st_size
    env = lmdb.open(str(path), readonly=True, lock=False, subdir=True, max_dbs=64,
                    map_size=max(2 * size, 1 << 30))
    records = 0
    try:
        with env.begin() as txn:
            names = [key for key, _ in txn.cursor()]
            for name in names:
                db = env.open_db(name, txn=txn, create=False)
                for _key, _value in txn.cursor(db=db):
                    records += 1
    finally:
        env.close()
    return {"ok": True, "detail": "ok", "records": records}


def _probe(store: str, root: Path) -> dict[str, Any]:
    path = root / STORES[store]
    if not path.exists():
        return {"ok": False, "detail": f"{STORES[store]} is missing"}
    try:
        if store in ("semantic", "journal"):
            return _sqlite(path)
        if store == "episodes":
            return _lance(path)
        return _lmdb(path)
    except Exception as exc:
        return {"ok": False, "detail": f"{type(exc).__name__}: {exc}"[:2000]}


# ------------------------------------------------------------------ check


def check(data_dir: str | Path) -> dict[str, Any]:
    """Every store of ``data_dir`` read in a child process; ``ok`` only if all are."""
    root = Path(data_dir)
    if not (root / "semantic.sqlite").exists() and not (root / "episodes").exists():
        raise ValidationError(f"{root} is not a Grimoire data directory", field="data")
    stores: dict[str, Any] = {}
    for store in STORES:
        try:
            run = subprocess.run([sys.executable, "-m", "grimoire.portable.check", store,
                                  str(root)], capture_output=True, text=True,
                                 timeout=_PROBE_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            stores[store] = {"ok": False, "detail": "reading it did not finish"}
            continue
        lines = run.stdout.strip().splitlines()
        if run.returncode == 0 and lines:
            stores[store] = json.loads(lines[-1])
        else:  # the reader died (a signal: negative code) on what it read
            why = f"signal {-run.returncode}" if run.returncode < 0 else f"exit {run.returncode}"
            stores[store] = {"ok": False, "detail": f"its reader crashed ({why}): "
                             f"{run.stderr.strip()[-500:]}"}
        stores[store]["file"] = STORES[store]
        if not stores[store]["ok"]:
            stores[store]["repair"] = _REPAIR_HINT[store]
    damaged = [name for name, result in stores.items() if not result["ok"]]
    return {"data": str(root), "ok": not damaged, "damaged": damaged, "stores": stores}


# ------------------------------------------------------------------ repair


def _newest_readable(table_dir: Path) -> Any:
    """The rows of the newest version of the table at ``table_dir`` that reads whole, or
    None (LanceDB keeps older versions' files until compaction's cleanup)."""
    import lancedb

    try:
        table = lancedb.connect(str(table_dir.parent)).open_table(table_dir.stem)
        versions = sorted((int(v["version"] if isinstance(v, dict) else v.version)
                           for v in table.list_versions()), reverse=True)
    except Exception:
        return None
    for version in versions:
        try:
            table.checkout(version)
            return table.to_arrow()
        except Exception:
            continue
    return None


def _salvage_episodes(live: Path, into: Path) -> int:
    """Add to ``into``'s episode table the rows of ``live``'s newest readable version that
    it lacks; returns how many."""
    import lancedb
    import pyarrow.compute as pc

    rows = _newest_readable(live / STORES["episodes"])
    if rows is None or rows.num_rows == 0:
        return 0
    table = lancedb.connect(str(into / "episodes")).open_table("episodes")
    have = table.to_arrow().column("id")
    fresh = rows.filter(pc.invert(pc.is_in(rows.column("id"), value_set=have)))
    if fresh.num_rows:
        names = set(table.schema.names)
        fresh = fresh.select([n for n in fresh.column_names if n in names])
        table.add(fresh.cast(_schema_for(table.schema, fresh)))
    return int(fresh.num_rows)


def _schema_for(schema: Any, rows: Any) -> Any:
    """``schema`` restricted to the columns ``rows`` has (an older table lacks later ones)."""
    import pyarrow as pa

    return pa.schema([schema.field(n) for n in rows.column_names], metadata=schema.metadata)


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root):
        for name in [*files, "."]:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def repair(data_dir: str | Path, backup_dir: str | Path | None,
           into: str | Path) -> dict[str, Any]:
    """A repaired copy of ``data_dir`` in the new directory ``into`` (see the module doc).
    ``backup_dir`` None: no backup yet; the damaged stores are rebuilt from their redo
    copies alone (``portable.replay``)."""
    from grimoire.portable.backup import restore
    from grimoire.portable.manifest import read_manifest
    from grimoire.portable.replay import check_backup_age, replay_damaged

    live, out = Path(data_dir), Path(into)
    found = check(live)
    if backup_dir is not None:
        from grimoire.portable.backup import FORMAT_VERSION, KIND

        manifest = read_manifest(Path(backup_dir), KIND, FORMAT_VERSION)
        check_backup_age(live, manifest.get("stores", {}).get("redo", {}))
        restored = restore(backup_dir, out)
    else:
        if out.exists() and any(out.iterdir()):
            raise ValidationError(f"{out} is not empty: repair into a new directory",
                                  field="into")
        out.mkdir(parents=True, exist_ok=True, mode=0o700)
        (out / "episodes").mkdir(mode=0o700, exist_ok=True)
        restored = {"dir": str(out), "stores": {}, "source": str(live)}
    from_live, salvaged = [], 0
    for store, result in found["stores"].items():
        if not result["ok"]:
            continue
        src, dest = live / STORES[store], out / STORES[store]
        if src.is_dir():
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("lock.mdb"))
        else:  # with its write-ahead log: a daemon that died left committed pages there
            for suffix in ("", "-wal"):
                if Path(f"{src}{suffix}").exists():
                    shutil.copy2(f"{src}{suffix}", f"{dest}{suffix}")
        from_live.append(store)
    if "episodes" in found["damaged"] and backup_dir is not None:
        salvaged = _salvage_episodes(live, out)
    # Then every write acknowledged since the backup, from the damaged stores' second copy.
    replayed = replay_damaged(live, out, found["damaged"], backup_dir is not None)
    for name in ("PLAYBOOK.md", "FEED.json"):
        if (live / name).is_file():
            shutil.copy2(live / name, out / name)
    _fsync_tree(out)
    return {"into": str(out), "damaged": found["damaged"], "from_live": from_live,
            "from_backup": [s for s in STORES if s not in from_live] if backup_dir else [],
            "salvaged_episode_rows": salvaged, "replayed": replayed, "backup": restored,
            "check": check(out)}


if __name__ == "__main__":  # a probe: python -m grimoire.portable.check STORE DIR
    print(json.dumps(_probe(sys.argv[1], Path(sys.argv[2]))))
