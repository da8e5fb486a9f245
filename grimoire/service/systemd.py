"""systemd's notify protocol, spoken directly (no dependency): READY, STATUS, WATCHDOG, STOPPING.

Under ``Type=notify`` systemd passes ``$NOTIFY_SOCKET`` (a filesystem path, or ``@name``
for the abstract namespace); each notification is one datagram of ``KEY=value`` lines.
With ``WatchdogSec=`` it also passes ``$WATCHDOG_USEC`` (and ``$WATCHDOG_PID``): the
service must send ``WATCHDOG=1`` more often than that, or systemd restarts it. Outside
systemd (no ``$NOTIFY_SOCKET``) every call does nothing. A failed send is logged once and
never stops the daemon: supervision is a courtesy, not a dependency.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from grimoire.logs import get_logger

__all__ = ["Notifier"]

log = get_logger(__name__)


class Notifier:
    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        raw = env.get("NOTIFY_SOCKET", "")
        self.address: str | None = None
        if raw.startswith("@"):
            self.address = "\0" + raw[1:]
        elif raw.startswith("/"):
            self.address = raw
        self.watchdog_s: float | None = None
        usec, pid = env.get("WATCHDOG_USEC", ""), env.get("WATCHDOG_PID", "")
        if usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.watchdog_s = int(usec) / 1e6
        self._failed = False

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def notify(self, **fields: str | int) -> bool:
        """Send one notification (``READY=1``, ``STATUS=…``); False if it could not be sent."""
        if self.address is None:
            return False
        message = "\n".join(f"{k.upper()}={v}" for k, v in fields.items()).encode("utf-8")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.sendto(message, self.address)
        except OSError as exc:
            if not self._failed:
                log.warning("systemd.notify.failed", socket=self.address.lstrip("\0"),
                            error=str(exc))
            self._failed = True
            return False
        return True

    def ready(self, status: str) -> bool:
        return self.notify(ready=1, status=status, mainpid=os.getpid())

    def watchdog(self) -> bool:
        return self.notify(watchdog=1)

    def stopping(self) -> bool:
        return self.notify(stopping=1, status="draining and closing the stores")

    def ping_interval_s(self) -> float | None:
        """How often to send WATCHDOG=1: half the watchdog time, as systemd advises."""
        return None if self.watchdog_s is None else self.watchdog_s / 2
