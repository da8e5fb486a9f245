"""Rule-based ExpeL distillation (SPEC §7): episodes and stored claims in, operations out.

``distill`` runs ``features`` (columns) → ``scan`` (hypotheses and tests,
corrected by ``autocorr``) → ``select`` (family-wise significance, one
window per family, ``redundancy``) → ``match`` (against stored claims);
``stats`` holds the exact test statistics; ``operations`` is what the distiller and
causal discovery emit (ADD, UPVOTE, DOWNVOTE, EDIT) and the stored claims they read.

Pure: no store, clock or log side effects. May import records, config and
``curator.views.render``; must not import ``grimoire.methods``, stores or the cycle.
"""
