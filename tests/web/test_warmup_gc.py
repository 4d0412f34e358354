"""A full garbage collection never walks what the server loaded at start-up.

With the model SDKs loaded, each full collection walked every object they made while holding the
GIL, so the event loop stood still for 130 to 190 ms: the soak (tests/faults/test_soak.py) saw
/healthz take 150 to 360 ms while a trivial server on the same machine answered at once, and a
collection during the warm-up itself did the same. The warm-up (lib/runtime.py Warmup) now loads
with the collector off and freezes what it loaded; a server that stops thaws it again. How long a
collection takes depends on the machine, so the test checks the mechanism: off while loading,
everything loaded by then frozen, collecting again afterwards.
"""

from __future__ import annotations

import gc
import sys

from lib.runtime import Warmup


async def test_the_warm_up_loads_with_the_collector_off_and_freezes_what_it_loaded():
    seen: dict[str, object] = {}

    def prepare() -> None:
        seen["collecting while loading"] = gc.isenabled()
        seen["loaded"] = sys.modules["colorsys"]  # stands for an SDK and its objects

    gc.unfreeze()
    warmup = Warmup(["colorsys"], prepare)
    try:
        warmup.start()
        await warmup.ready()
        assert seen["collecting while loading"] is False
        assert gc.isenabled()
        frozen = gc.get_freeze_count()
        assert frozen > 0
        # What was loaded is in the frozen set: a collection leaves it alone.
        assert not any(obj is seen["loaded"] for obj in gc.get_objects())
    finally:
        Warmup.thaw()
    assert gc.get_freeze_count() == 0
    assert any(obj is seen["loaded"] for obj in gc.get_objects())
