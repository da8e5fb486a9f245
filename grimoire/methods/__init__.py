"""The API methods, one module per namespace of the method table (API.md).

``episode`` (episode.*), ``entry`` (entry.*), ``kg`` (kg.*), ``causal``
(causal.*), ``outcome`` (outcome.report), ``playbook`` (playbook.get),
``status`` and ``health`` (SPEC §12 metrics, shown by ``status``). The
facade's methods call these; each validates its params and reads or writes
the stores through the context (writes on the single writer thread).

May import the stores, records, the gate, retrieval, the curator's learners
(post-write hooks) and the playbook compiler; must not import ``service``.
"""
