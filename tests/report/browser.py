"""Headless Chromium for the report tests: a screenshot, the rendered DOM, console messages.

Uses Debian's ``chromium`` (``.ci/run`` installs it). Started with no sandbox (we are
root), no GPU, a fresh profile per run, and no way out: every host name resolves to
nothing and any request the browser makes on its own (update checks, account look-ups)
goes to a closed loopback port, so the test sends nothing beyond this machine. From
Chromium's own log on stderr (``--enable-logging=stderr --v=1``) it reads the console
messages (``CONSOLE:line] "message", source: …``) and every file the page loaded.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["CHROMIUM", "Rendered", "decode_png", "render"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
          "--disable-component-update", "--disable-sync", "--disable-default-apps",
          "--disable-extensions", "--no-pings", "--no-first-run", "--hide-scrollbars",
          "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9",
          "--enable-logging=stderr", "--v=1"]
_CONSOLE = re.compile(r'CONSOLE[:(]\d+\)?\] "(.*)", source: ')
_LOADED = re.compile(r"FileURLLoader::Start: (\S+)")


@dataclass(frozen=True)
class Rendered:
    png: np.ndarray  # height × width × 3, uint8
    dom: str
    console: list[str]  # console messages
    loads: list[str]  # every URL the page loaded besides itself


def _run(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, *_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def render(page: Path, *, width: int = 1100, height: int = 4000) -> Rendered:
    with tempfile.TemporaryDirectory() as tmp:
        shot = Path(tmp) / "shot.png"
        first = _run([f"--window-size={width},{height}", f"--screenshot={shot}",
                      page.resolve().as_uri()], Path(tmp) / "p1")
        if not shot.exists():
            raise RuntimeError(f"chromium wrote no screenshot: {first.stderr[-2000:]}")
        second = _run(["--dump-dom", page.resolve().as_uri()], Path(tmp) / "p2")
        logs = first.stderr + second.stderr
        console = [m.group(1) for m in _CONSOLE.finditer(logs)]
        loads = sorted({m.group(1) for m in _LOADED.finditer(logs)} - {page.resolve().as_uri()})
        return Rendered(decode_png(shot.read_bytes()), second.stdout, console, loads)


def decode_png(data: bytes) -> np.ndarray:
    """8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes) → H × W × 3 pixels."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    height = channels = 0
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big")
            depth, color, interlace = body[8], body[9], body[12]
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8)
    stride = width * channels
    rows = raw.reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.int32)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        kind, line = rows[y, 0], rows[y, 1:].astype(np.int32)
        if kind == 0:
            cur = line
        elif kind == 2:
            cur = (line + prev) & 0xFF
        else:  # Sub, Average, Paeth depend on the pixel to the left: per byte
            cur = np.zeros(stride, dtype=np.int32)
            for x in range(stride):
                left = cur[x - channels] if x >= channels else 0
                up = prev[x]
                if kind == 1:
                    pred = left
                elif kind == 3:
                    pred = (left + up) // 2
                else:
                    ul = prev[x - channels] if x >= channels else 0
                    p = left + up - ul
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                    pred = left if pa <= pb and pa <= pc else up if pb <= pc else ul
                cur[x] = (line[x] + pred) & 0xFF
        out[y], prev = cur, cur
    return out.reshape(height, width, channels)[:, :, :3].astype(np.uint8)
