"""The daemon freezes what it built at start-up, so full collections skip it."""

from __future__ import annotations

import gc

from grimoire.service.daemon import freeze_startup_objects


def test_freeze_moves_live_objects_out_of_collection_and_later_garbage_is_still_collected():
    held = [{"k": i} for i in range(1000)]  # long-lived, like the stores' caches
    try:
        freeze_startup_objects()
        assert gc.get_freeze_count() >= len(held)
        assert not any(o is held for o in gc.get_objects())

        class Cycle:
            pass

        a, b = Cycle(), Cycle()
        a.other, b.other = b, a  # garbage made after the freeze is collected as before
        del a, b
        assert gc.collect() >= 2
    finally:
        gc.unfreeze()
