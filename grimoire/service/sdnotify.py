"""systemd's notify protocol (``Type=notify``) without a dependency: one datagram per state.

``notify("READY=1")`` sends to the Unix datagram socket named in ``$NOTIFY_SOCKET``
(a path, or ``@name`` for the abstract namespace); without it (not under
systemd) it does nothing. ``watchdog_interval`` reads ``$WATCHDOG_USEC``
(set when the unit has ``WatchdogSec=``): the daemon sends ``WATCHDOG=1`` at
half of it from its event loop, so a hung loop is restarted by systemd.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

__all__ = ["notify", "watchdog_interval"]


def notify(state: str, env: Mapping[str, str] | None = None) -> bool:
    """Send ``state`` (e.g. ``READY=1``); True when a notify socket took it."""
    env = os.environ if env is None else env
    path = env.get("NOTIFY_SOCKET")
    if not path:
        return False
    address = "\0" + path[1:] if path.startswith("@") else path
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(state.encode("utf-8"))
    except OSError:
        return False
    return True


def watchdog_interval(env: Mapping[str, str] | None = None) -> float | None:
    """Seconds between ``WATCHDOG=1`` pings (half of ``$WATCHDOG_USEC``), else None."""
    env = os.environ if env is None else env
    usec = env.get("WATCHDOG_USEC", "")
    pid = env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) <= 0 or (pid.isdigit() and int(pid) != os.getpid()):
        return None
    return int(usec) / 2e6
