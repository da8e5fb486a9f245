"""The owner's visual report: one self-contained HTML file (``grimoire report``).

``build_report(g)`` reads an open ``Grimoire`` and returns the HTML; charts are
inline SVG drawn in ``svg`` at build time, so the file needs no script, CDN or
network to open.
"""

from grimoire.report.build import build_report

__all__ = ["build_report"]
