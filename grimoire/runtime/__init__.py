"""How the process runs its work: one writer thread, work left for after an answer, memory.

- ``writer``: the single writer thread that owns every mutation of every store, with
  group commit of queued episode writes;
- ``afterwards``: work a request leaves for after its answer is sent (the socket server
  runs it; retrieve's log hand-off uses it);
- ``memory``: handing freed C-heap memory back to the system after big, transient work.

A package because these are process machinery, not a part of the memory: the stores,
the models, retrieval and the service all use them. May import errors and logs only;
everything else may import it.
"""
