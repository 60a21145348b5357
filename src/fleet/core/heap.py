"""Keep CPython's cyclic collector from walking what is alive anyway: what a process loaded to
serve, and what one bounded bulk call is building.

CPython's full collections walk every tracked object. A `fleet serve` worker holds about 117,000
once Django, the apps and the URL patterns are loaded, and a full pass over them took 63 ms
(measured on the 2-core bench machine); in the bench's process one landed about once every ten
500-item upserts. `gc.freeze()` moves what exists now into a permanent generation that no pass walks
(the use the gc module's documentation gives it); objects made afterwards are collected as
before. A frozen object is still freed when its last reference goes, but a frozen reference
cycle dropped later stays until the process ends: freeze once, after loading, never per request.

A bulk call (a 500-item upsert, a rerun of 10,000 devices) builds objects that all live until it
returns; each collection while it runs walks them again: 2.5 ms of a 30 ms upsert request and 0.3
s of a 2 s dispatch (six full collections; measured). `collector_paused` keeps collections off
for such a call. Its size is bounded (the request's own limits), so is the garbage a paused
collector leaves, and the first collection after it frees any cycles as usual. Pauses do not
stack: the first one to begin ends them when it ends, so overlapping calls (threads, or async
requests interleaving) never keep the collector off longer than one call.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rest_framework.views import APIView as _ViewBase
else:
    _ViewBase = object

_pause_lock = threading.Lock()
_pause_holder: object | None = None


def freeze_loaded() -> int:
    """Collect what is already garbage, then freeze the rest; returns how many objects were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside, unless a pause that began earlier ends first; a collector
    already off stays off."""
    global _pause_holder
    mine = object()
    with _pause_lock:
        if _pause_holder is None and gc.isenabled():
            _pause_holder = mine
            gc.disable()
    try:
        yield
    finally:
        with _pause_lock:
            if _pause_holder is mine:
                _pause_holder = None
                gc.enable()


class CollectorPausedView(_ViewBase):
    """An API view whose requests (authentication, which parses the body, and the handler) run
    with the collector paused: for the views of bounded bulk requests."""

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        with collector_paused():
            return super().dispatch(request, *args, **kwargs)
