"""Learning: Reflexion, the ExpeL distiller, causal discovery and the curator cycle."""
