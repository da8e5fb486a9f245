"""``grimoire mcp``: the Model Context Protocol server over stdio (official ``mcp`` SDK).

``server`` builds the tools and bridges each to the daemon's socket methods
(``tools`` holds what each tool computes from those answers). Depends on the
service client and the method table; nothing else depends on it.
"""
