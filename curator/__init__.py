"""Learning: Reflexion, the ExpeL distiller, causal discovery and the curator cycle."""

import logging

# Silent unless the host configures logging (see grimoire/__init__.py and grimoire.logs).
logging.getLogger("curator").addHandler(logging.NullHandler())
