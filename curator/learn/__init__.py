"""Applying what the learners find: the distill hook, votes, filters, Reflexion, causal discovery.

- ``hook``: the heartbeat's distill hook (distiller + causal discovery on the
  stores), with ``filter`` (leaks and thin hour rules), ``apply`` (operations
  through the gate), ``votes`` (pending votes for the curator), ``alias``,
  ``verify`` (LLM proposals checked against the data);
- ``reflexion`` (pure, seed 004's deterministic steps) and ``reflexion_hook``
  (run after each action episode is durable);
- ``causal_discovery``: lead→follow links between event types;
- ``llm_paths`` / ``llm_prompts``: the optional LLM paths (every step has a
  rule-based default; nothing here calls the network unless an LLM is configured).

May import ``curator.distiller``, the gate (its admission path: ``grimoire.gate.admit``),
the playbook compiler's sentence of a claim (``playbook.render_text.entry_sentence``)
and the stores; episodes are written through ``ctx.write_episodes`` (the API's own
path, wired by the facade). Must not import ``grimoire.methods`` or ``curator.cycle``.
"""
