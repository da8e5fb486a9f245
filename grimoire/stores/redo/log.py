"""One store's redo log: an append-only file of numbered records, fsync'd at each append.

A record is ``[seq, ops]``; ``seq`` numbers the store's write transactions from 1 and
``ops`` is what the store's adapter recorded (SQL statements, LMDB puts and deletes), each
a list ``[kind, target, values...]`` (``target``: the SQL text or the LMDB database name,
never changed by ``scrub``), stored encoded one by one (a record of a 1,000-episode batch
holds thousands: ``scrub`` decodes only those whose raw bytes may hold what it seeks). A
frame on disk is ``u32 length | u32 crc32 | payload``; a torn or damaged frame ends the
log (a crash mid-append leaves at most the last record torn, and that transaction was
never committed nor acknowledged). The first record (``seq`` 0) is the header: which
store, and ``fresh`` (the log began with the store, so it alone rebuilds it).

The payload codec is a small tagged binary one (None, bool, int, float, str, bytes, list,
dict): strings and bytes are stored as they are, never re-encoded, so a byte scan of the
file (``forget``'s check) finds what is in it, and ``scrub`` can drop what it must.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from grimoire.errors import StoreError
from grimoire.stores.fsync import fsync_path
from grimoire.stores.redo.match import Needles

__all__ = ["FORGET", "Redactor", "RedoLog", "decode", "encode", "read_records"]

#: The first op of a record a forget's erase wrote (``Redo.forgetting``): ``scrub`` keeps
#: only it, since the forget's tombstone, applied again after a repair, does the erase.
FORGET = "forget"
_FRAME = struct.Struct("<II")
_FORGET_RAW = b"s" + struct.pack("<I", len(FORGET)) + FORGET.encode()
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")


def _put(value: Any, out: list[bytes]) -> None:
    if value is None:
        out.append(b"n")
    elif value is True or value is False:
        out.append(b"t" if value else b"f")
    elif isinstance(value, int):
        if -(1 << 63) <= value < 1 << 63:
            out += [b"i", _I64.pack(value)]
        else:
            raw = str(value).encode()
            out += [b"I", _U32.pack(len(raw)), raw]
    elif isinstance(value, float):
        out += [b"d", _F64.pack(value)]
    elif isinstance(value, str):
        raw = value.encode("utf-8", "surrogatepass")
        out += [b"s", _U32.pack(len(raw)), raw]
    elif isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        out += [b"b", _U32.pack(len(raw)), raw]
    elif isinstance(value, list | tuple):
        out += [b"l", _U32.pack(len(value))]
        for item in value:
            _put(item, out)
    elif isinstance(value, dict):
        out += [b"m", _U32.pack(len(value))]
        for key, item in value.items():
            _put(str(key), out)
            _put(item, out)
    else:
        try:  # what SQLite binds as a blob: anything with the buffer protocol
            raw = memoryview(value).tobytes()
        except TypeError:
            raise StoreError(f"redo log: cannot record a {type(value).__name__}") from None
        out += [b"b", _U32.pack(len(raw)), raw]


def encode(value: Any) -> bytes:
    out: list[bytes] = []
    _put(value, out)
    return b"".join(out)


def _get(buf: bytes, at: int) -> tuple[Any, int]:
    tag = buf[at:at + 1]
    at += 1
    if tag == b"n":
        return None, at
    if tag in (b"t", b"f"):
        return tag == b"t", at
    if tag == b"i":
        return _I64.unpack_from(buf, at)[0], at + 8
    if tag == b"d":
        return _F64.unpack_from(buf, at)[0], at + 8
    if tag in (b"s", b"b", b"I"):
        size = _U32.unpack_from(buf, at)[0]
        raw = buf[at + 4:at + 4 + size]
        at += 4 + size
        if tag == b"s":
            return raw.decode("utf-8", "surrogatepass"), at
        return (raw if tag == b"b" else int(raw)), at
    if tag in (b"l", b"m"):
        count = _U32.unpack_from(buf, at)[0]
        at += 4
        items = []
        for _ in range(count * (2 if tag == b"m" else 1)):
            item, at = _get(buf, at)
            items.append(item)
        if tag == b"l":
            return items, at
        return dict(zip(items[::2], items[1::2], strict=True)), at
    raise StoreError(f"redo log: unknown tag {tag!r}")


def decode(payload: bytes) -> Any:
    value, at = _get(payload, 0)
    if at != len(payload):
        raise StoreError("redo log: trailing bytes in a record")
    return value


def _frame(record: Any) -> bytes:
    payload = encode(record)
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def _payloads(path: Path) -> Iterator[bytes]:
    """The payload of every whole frame, stopping at the first torn one; read a frame at a
    time (a log can be large before its first backup)."""
    try:
        f = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return
    with f:
        while True:
            head = f.read(_FRAME.size)
            if len(head) < _FRAME.size:
                return
            size, crc = _FRAME.unpack(head)
            payload = f.read(size)
            if len(payload) != size or zlib.crc32(payload) != crc:
                return
            yield payload


def _frames(path: Path) -> Iterator[tuple[int, int, int, Any, bytes]]:
    """(offset, end, seq, body, payload) of every whole frame (see ``_payloads``); the
    body is the header's dict (seq 0) or the record's ops, each still encoded (a blob)."""
    at = 0
    for payload in _payloads(path):
        try:
            seq, body = decode(payload)
        except (StoreError, struct.error, UnicodeDecodeError, ValueError, TypeError):
            return
        end = at + _FRAME.size + len(payload)
        yield at, end, int(seq), body, payload
        at = end


def _record(payload: bytes) -> tuple[int, list[tuple[int, int]]]:
    """The ``seq`` of a record's payload and where each of its ops' encoded bytes lies
    (``[seq, [blob, ...]]``, each blob tagged ``b``), without copying them; the header
    (seq 0) has none. StoreError if the payload is not laid out so."""
    if payload[:1] != b"l" or _U32.unpack_from(payload, 1)[0] != 2:
        raise StoreError("redo log: a record is not [seq, ops]")
    seq, at = _get(payload, 5)
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise StoreError("redo log: a record's seq is not a number")
    if seq == 0:
        return 0, []
    if payload[at:at + 1] != b"l":
        raise StoreError("redo log: a record's ops are not a list")
    count = _U32.unpack_from(payload, at + 1)[0]
    at += 5
    spans = []
    for _ in range(count):
        if payload[at:at + 1] != b"b":
            raise StoreError("redo log: an op is not encoded bytes")
        size = _U32.unpack_from(payload, at + 1)[0]
        spans.append((at + 5, at + 5 + size))
        at += 5 + size
    if at != len(payload):
        raise StoreError("redo log: trailing bytes in a record")
    return seq, spans


def _decodes(payload: bytes) -> bool:
    try:
        decode(payload)
    except (StoreError, struct.error, UnicodeDecodeError, ValueError, TypeError):
        return False
    return True


def _raw(payload: bytes) -> bytes:
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def read_records(path: Path) -> tuple[dict[str, Any], list[tuple[int, list[Any]]]]:
    """The header and the ``(seq, ops)`` records of the log at ``path`` (read only)."""
    header: dict[str, Any] = {}
    records: list[tuple[int, list[Any]]] = []
    for _, _, seq, body, _ in _frames(path):
        if seq == 0:
            header = body
        else:
            records.append((seq, [decode(blob) for blob in body]))
    return header, records


def _open_rw(path: Path) -> Any:
    """``path`` opened for reading and writing, created owner-only (0600) if absent."""
    return os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "r+b")


class RedoLog:
    """The writer's handle on one log file (see the module doc). Thread-safe."""

    def __init__(self, path: Path, *, store: str, fresh: bool) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        end, last = 0, 0
        header = None
        for _, stop, seq, body, _ in _frames(path):
            end = stop
            if seq == 0:
                header = body
            last = max(last, seq)
        self.header: dict[str, Any] = header or {"store": store, "fresh": fresh}
        self.last_seq = last
        try:
            self._file = _open_rw(path)
            self._file.truncate(end)  # a torn tail: an append a crash cut short
            self._file.seek(end)
            if header is None:
                self._file.write(_frame([0, self.header]))
                self._sync()
                fsync_path(path.parent)
        except OSError as exc:
            raise StoreError(f"cannot open redo log {path}: {exc}") from exc
        self._undo_at: int | None = None

    def _sync(self) -> None:
        self._file.flush()
        os.fdatasync(self._file.fileno())

    def append(self, seq: int, ops: Sequence[Any]) -> None:
        """Append record ``seq`` and make it durable (one fdatasync)."""
        frame = _frame([seq, [encode(op) for op in ops]])  # each op its own blob: scrub
        # looks at an op's raw bytes and decodes only the ops that may hold what it seeks
        with self._lock:
            at = self._file.tell()
            try:
                self._file.write(frame)
                self._sync()
            except OSError as exc:
                self._file.truncate(at)
                self._file.seek(at)
                raise StoreError(f"redo log {self.path}: append failed: {exc}") from exc
            self._undo_at = at
            self.last_seq = seq

    def undo(self, seq: int) -> None:
        """Take back record ``seq`` just appended (its transaction did not commit)."""
        with self._lock:
            if self._undo_at is None or self.last_seq != seq:
                return
            self._file.truncate(self._undo_at)
            self._file.seek(self._undo_at)
            self._sync()
            self._undo_at = None
            self.last_seq = seq - 1

    def _rewrite_locked(self, frames: Iterable[bytes],
                        changed: Callable[[], bool] = lambda: True) -> None:
        """Write the header and ``frames`` (streamed from this file) to a new file; put it
        in place of this one if ``changed()`` says so once all is written (atomic)."""
        fresh = self.path.with_name(self.path.name + ".new")
        try:
            with _open_rw(fresh) as out:
                out.truncate(0)
                out.write(_frame([0, self.header]))
                for frame in frames:
                    out.write(frame)
                out.flush()
                os.fsync(out.fileno())
            if not changed():
                fresh.unlink()
                return
            self._file.close()
            os.replace(fresh, self.path)
            fsync_path(self.path.parent)
            self._file = _open_rw(self.path)
            self._file.seek(0, os.SEEK_END)
        except OSError as exc:
            raise StoreError(f"redo log {self.path}: rewrite failed: {exc}") from exc
        self._undo_at = None

    def _kept(self, keep: Callable[[int], bool], dropped: list[int]) -> Iterator[bytes]:
        for _, _, seq, _, payload in _frames(self.path):
            if seq == 0:
                continue
            if keep(seq):
                yield _raw(payload)
            else:
                dropped[0] += 1

    def prune(self, upto: int) -> int:
        """Drop the records a backup covers (``seq <= upto``); returns how many."""
        with self._lock:
            self._file.flush()
            first = next((seq for _, _, seq, _, _ in _frames(self.path) if seq), None)
            if first is None or first > upto:
                return 0
            dropped = [0]
            self.header = {**self.header, "fresh": False, "pruned_to": upto}
            self._rewrite_locked(self._kept(lambda seq: seq > upto, dropped))
            return dropped[0]

    def drop_after(self, seq: int) -> int:
        """Drop records past ``seq`` (appended, then their transaction never committed)."""
        with self._lock:
            self._file.flush()
            if self.last_seq <= seq:
                return 0
            dropped = [0]
            self._rewrite_locked(self._kept(lambda s: s <= seq, dropped))
            self.last_seq = seq
            return dropped[0]

    def scrub(self, redact: Redactor) -> int:
        """Rewrite the file with ``redact`` applied to every op (``forget``); returns the
        ops changed. Two streamed passes over the records' ASCII-lowered bytes
        (``match.Needles``). The first finds the ops that hold a forgotten id or text
        (``redact.hits``) and learns from them (``redact.learn``); the second looks only
        for the keys learnt (``redact.key_hits``, when there are any), then decodes only
        the ops found, re-encodes only those that change and splices them into the
        record's bytes; every other record is copied as it is."""
        if not redact:
            return 0
        with self._lock:
            self._file.flush()
            found: dict[int, list[int]] = {}  # the ops found in each record (its order)
            headers, count = set(), 0
            for count, payload in enumerate(_payloads(self.path), 1):
                try:
                    seq, spans = _record(payload)
                except (StoreError, struct.error, UnicodeDecodeError, ValueError, TypeError):
                    if _decodes(payload):  # whole, but not laid out as a record: refuse
                        raise StoreError(f"redo log {self.path}: a record is not "  # noqa: B904
                                         "[seq, [encoded op, ...]]; not scrubbed")
                    count -= 1  # a frame that does not decode ends the log (``_frames``)
                    break
                if not seq:
                    headers.add(count)
                    continue
                hits = redact.hits(payload.lower(), spans)
                for i in hits:
                    redact.learn(decode(payload[spans[i][0]:spans[i][1]]))
                if hits:
                    found[count] = hits
            changed = [0]

            def out() -> Iterator[bytes]:
                for at, payload in enumerate(_payloads(self.path), 1):
                    if at > count:
                        return
                    if at in headers:
                        continue  # the header: written first
                    hits = found.get(at, [])
                    marked = _FORGET_RAW in payload
                    low = payload.lower() if redact.seeks_keys() else b""
                    if not hits and not marked and not redact.may_hold_key(low):
                        yield _raw(payload)
                        continue
                    seq, spans = _record(payload)
                    first = payload[spans[0][0]:spans[0][1]] if spans else b""
                    if marked and first and decode(first)[0] == FORGET:  # a forget's own
                        changed[0] += len(spans) - 1  # erase: its tombstone, applied again
                        yield _frame([seq, [first]])  # after a repair, redoes it
                        continue
                    yield _raw(self._changed(payload, spans, sorted(
                        {*hits, *redact.key_hits(low, spans)}), redact, changed))

            self._rewrite_locked(out(), lambda: changed[0] > 0)
            return changed[0]

    @staticmethod
    def _changed(payload: bytes, spans: list[tuple[int, int]], ops: list[int],
                 redact: Redactor, changed: list[int]) -> bytes:
        """``payload`` with ``redact.op`` applied to the ops ``ops`` (indexes of ``spans``,
        in order): each that changes re-encoded in place (its tag stays, its length is
        new)."""
        pieces, at = [], 0
        for i in ops:
            start, end = spans[i]
            op = decode(payload[start:end])
            new = redact.op(op)
            if new != op:
                changed[0] += 1
                blob = encode(new)
                pieces += [payload[at:start - _U32.size], _U32.pack(len(blob)), blob]
                at = end
        if not pieces:
            return payload
        pieces.append(payload[at:])
        return b"".join(pieces)

    def close(self) -> None:
        with self._lock:
            self._file.close()


class Redactor:
    """What ``forget`` does to a redo log's ops (``[kind, target, values...]``; the kind
    and target, the SQL text or database name, are never changed).

    - An op holding a forgotten **id** (in any string or bytes value, ASCII case folded)
      is about a forgotten item: each of its string and bytes values is replaced whole
      (in a JSON document, each string in it: it stays a document).
    - A delete (kind ``d``) of a key that such an op wrote (``learn``: the same target and
      key) is replaced whole too: the erase of an index entry or head that holds a
      forgotten name but no id.
    - A forgotten **text** is replaced wherever it occurs in any other op's values.

    A replacement is a filler of the same length: a keyed hash of what it replaces, with
    a key made for this scrub and never kept. Equal values get equal fillers in every
    record, different ones different fillers, so a replay still does what the log did: a
    row inserted under a forgotten id and deleted by it later is inserted and deleted
    under the same filler, and the ``forget`` that follows in the log (its tombstone,
    applied again after a repair) leaves nothing of it. Nothing of the original stays.
    ``str`` values are matched on their UTF-8 bytes."""

    def __init__(self, ids: Iterable[bytes] = (), texts: Iterable[bytes] = ()) -> None:
        self._key = os.urandom(16)
        self._ids = Needles(ids)
        self._texts = Needles(texts)
        self._keys: set[tuple[Any, Any]] = set()
        self._raw_keys: set[bytes] = set()
        self._sought: Needles | None = None  # ids and texts: made when first asked
        self._change: Needles | None = None  # _raw_keys: made when first asked

    def __bool__(self) -> bool:
        return bool(self._ids) or bool(self._texts)

    def _filler(self, raw: bytes) -> bytes:
        digest = hashlib.blake2b(raw, key=self._key).hexdigest().encode()
        return (digest * (len(raw) // len(digest) + 1))[:len(raw)]

    def _holds(self, value: Any) -> bool:
        if isinstance(value, str):
            return self._ids.search(value.encode("utf-8", "surrogatepass"))
        if isinstance(value, bytes):
            return self._ids.search(value)
        if isinstance(value, list):
            return any(self._holds(v) for v in value)
        if isinstance(value, dict):
            return any(self._holds(v) for v in value.values())
        return False

    def _map(self, value: Any, whole: bool) -> Any:
        if isinstance(value, list):
            return [self._map(v, whole) for v in value]
        if isinstance(value, dict):
            return {k: self._map(v, whole) for k, v in value.items()}
        if not isinstance(value, str | bytes):
            return value
        raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
        if whole and isinstance(value, str) and value[:1] in ("{", "["):
            try:  # a JSON document stays one (SQL reads it with json_extract)
                return json.dumps(self._map(json.loads(value), whole), ensure_ascii=False)
            except ValueError:
                pass
        if whole:
            new = self._filler(raw)
        else:
            new = self._texts.sub(raw, self._filler)  # the filler of the lowered match
            if new is raw:
                return value
        return new.decode("utf-8", "surrogatepass") if isinstance(value, str) else new

    def hits(self, low: bytes, spans: Sequence[tuple[int, int]]) -> list[int]:
        """Which ops (``spans`` of a record's lowered bytes ``low``) may hold a forgotten
        id or text (strings and bytes are stored as they are: none found means none
        there)."""
        if self._sought is None:
            self._sought = Needles.union(self._ids, self._texts)
        return self._sought.hits(low, spans)

    def _key_needles(self) -> Needles:
        if self._change is None:
            self._change = Needles(self._raw_keys, shortest=1)
        return self._change

    def seeks_keys(self) -> bool:
        """Whether ``learn`` has seen keys (``may_hold_key`` needs the lowered bytes)."""
        return bool(self._raw_keys)

    def may_hold_key(self, low: bytes) -> bool:
        """Whether a record's lowered bytes may hold a key ``learn`` saw (in any ASCII
        case: a wider net than ``op``'s exact key)."""
        return b"" in self._raw_keys or self._key_needles().find(low) is not None

    def key_hits(self, low: bytes, spans: Sequence[tuple[int, int]]) -> list[int]:
        """Which ops of such a record may hold one (see ``may_hold_key``)."""
        if b"" in self._raw_keys:
            return list(range(len(spans)))
        return self._key_needles().hits(low, spans) if self._raw_keys else []

    def learn(self, op: list[Any]) -> None:
        """First pass: remember the keys the ops about a forgotten id write."""
        if (self._ids is not None and len(op) > 2 and isinstance(op[2], bytes | str)
                and self._holds(op[2:])):
            self._keys.add((op[1], op[2]))
            key = op[2]
            self._raw_keys.add(key.encode("utf-8", "surrogatepass") if isinstance(key, str)
                               else key)
            self._change = None

    def op(self, op: list[Any]) -> list[Any]:
        values = op[2:]
        whole = bool(self._ids) and (
            self._holds(values) or (op[0] == "d" and len(op) > 2
                                    and isinstance(op[2], bytes | str)
                                    and (op[1], op[2]) in self._keys))
        if not whole and not self._texts:
            return op
        return [*op[:2], *self._map(values, whole)]
