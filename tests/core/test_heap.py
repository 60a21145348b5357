"""`collector_paused`: no cyclic collection inside, collections back as they were after."""

from __future__ import annotations

import gc
import threading

import pytest

from fleet.core.heap import collector_paused


def test_collections_pause_inside_and_resume_after(collecting):
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collections_resume_after_an_exception(collecting):
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_nested_pause_leaves_the_collector_to_the_outer_one(collecting):
    with collector_paused():
        with collector_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off(collecting):
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_overlapping_pauses_never_keep_the_collector_off_past_the_first(collecting):
    """Pauses on two threads (or interleaved async requests): collections resume when the pause
    that began first ends, though the other is still running, so back-to-back overlapping calls
    cannot keep the collector off indefinitely."""
    inside, release, done = threading.Event(), threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)
        done.set()

    thread = threading.Thread(target=other)
    with collector_paused():
        thread.start()
        inside.wait(10)
        assert not gc.isenabled()
    assert gc.isenabled()  # the other thread is still inside its pause
    assert not done.is_set()
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_a_decorated_function_runs_paused(collecting):
    @collector_paused()
    def planned() -> bool:
        return gc.isenabled()

    assert planned() is False
    assert planned() is False  # each call makes its own pause
    assert gc.isenabled()
