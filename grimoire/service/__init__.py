"""The running daemon: the socket server and client, the method table, the daemon and its heartbeat.

- ``api``: the one method table (names, parameter checks, help) that the
  socket, the facade and the CLI share;
- ``server`` / ``client``: JSON-RPC 2.0 over the Unix socket, one object a line;
- ``daemon``: ``grimoire run`` (signals, the feed, start-up and drain);
- ``heartbeat``: the tick loop that feeds episodes and calls distillation and
  the curator when due.

May import the facade (``grimoire.grimoire``), ``grimoire.methods`` and the
lower layers; nothing below it imports this package.
"""
