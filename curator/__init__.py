"""Learning: Reflexion, the ExpeL distiller, causal discovery and the curator cycle.

Packages: ``distiller`` (rule-based ExpeL), ``claims`` (judging stored claims),
``learn`` (applying what learners find), ``cycle`` (the 50-tick cycle), ``hierarchy``
(summaries, clusters, regions) and ``views`` (what the owner reads). The grimoire facade
reaches all of it through one module, ``api``. The curator may import the stores, the
gate, retrieval, records and the playbook compiler; it never imports ``grimoire.methods``,
``grimoire.service`` or the facade.
"""

import logging

# Silent unless the host configures logging (see grimoire/__init__.py and grimoire.logs).
logging.getLogger("curator").addHandler(logging.NullHandler())
