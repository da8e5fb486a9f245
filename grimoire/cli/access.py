"""Reach a data directory: through the daemon's socket when one listens, else directly.

Reads (``status``, ``explain``, ``playbook``, ``retrieve``, ``entry.*``, ``kg``
queries) work whether or not a daemon runs: with no daemon listening the CLI
opens the directory itself with ``Grimoire.open(read_only=True)``. That open
also works beside a running daemon (``grimoire report`` and ``export`` use it
so), but a listening daemon is asked first: its episodes are live, where a
read-only open sees them as of the open. Writes need the daemon (one writer per
data directory).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grimoire.cli.probe import daemon_listening
from grimoire.config import Config
from grimoire.errors import ProtocolError
from grimoire.service.api import METHODS, dispatch

__all__ = ["call", "daemon_listening", "has_data"]


def has_data(config: Config) -> bool:
    return (Path(config.data_dir) / "semantic.sqlite").exists()


def call(config: Config, method: str, params: dict[str, Any], scope: str | None = None
         ) -> Any:
    """``method`` on the daemon if it listens, else on a read-only open of the directory;
    in ``scope`` when one is given (``--scope``)."""
    if scope is not None:
        params = {**params, "scope": scope}
    from grimoire.service.client import Client

    if daemon_listening(config.socket):
        with Client(config.socket) as client:
            return client.call(method, params)
    # Right after the README's demo the memory is in data/demo, not in the default
    # directory: say so, rather than that the curator has not run yet.
    from grimoire.cli.probe import demo_hint

    hint = demo_hint(config, Config().data_dir)
    if hint is not None:
        raise ProtocolError(f"no daemon answers on {config.socket}, and {hint}")
    spec = METHODS.get(method)
    if spec is not None and spec.mutates and not (method == "forget"
                                                  and params.get("dry_run") is True):
        raise ProtocolError(
            f"{method} changes the memory and needs the daemon, but nothing is listening on "
            f"{config.socket}: is `grimoire run --data {config.data_dir}` running?")
    if not has_data(config):
        raise ProtocolError(
            f"no daemon socket at {config.socket} and no Grimoire data in {config.data_dir}: "
            "is `grimoire run` running with this data directory?")
    from grimoire.grimoire import Grimoire

    with Grimoire.open(config=config, read_only=True) as g:
        return dispatch(g, method, params)
