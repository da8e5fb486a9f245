"""``grimoire report``: one self-contained HTML file of what the memory holds and learned.

``data`` reads a store into plain series (PLAYBOOK.md's listings per curator cycle,
episodes per day by type and outcome, retrieval latency and hit rate, the knowledge
graph's size, the causal links and their lags); ``svg`` draws charts as inline SVG at
build time; ``page`` lays out the HTML (inline CSS, no script, no network, no CDN), so the
file opens anywhere. May import the stores' read methods and records; writes nothing but
the output file.
"""

from grimoire.report.data import ReportData, collect
from grimoire.report.page import render_page, write_report

__all__ = ["ReportData", "collect", "render_page", "write_report"]
