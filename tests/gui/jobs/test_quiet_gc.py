"""quiet_gc puts the collector back as it found it; only the entry point's choice freezes."""

from __future__ import annotations

import gc
import threading

from onnxport.gui.jobs.quiet_gc import freeze_survivors, quiet_gc


def test_collection_is_off_inside_and_back_as_it_was_after():
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    with quiet_gc():
        assert not gc.isenabled()
        with quiet_gc():  # nested (or another job at the same time)
            assert not gc.isenabled()
        assert not gc.isenabled()  # still inside the outer block
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen  # nobody asked to freeze: nothing frozen
    gc.disable()
    try:
        with quiet_gc():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_blocks_in_several_threads_restore_once_the_last_ends():
    inside, release = threading.Event(), threading.Event()

    def job():
        with quiet_gc():
            inside.set()
            assert release.wait(60)

    worker = threading.Thread(target=job)
    worker.start()
    assert inside.wait(60)
    with quiet_gc():
        pass
    assert not gc.isenabled()  # the worker's block is still open
    release.set()
    worker.join(10)
    assert gc.isenabled()


def test_the_entry_points_choice_freezes_the_survivors():
    frozen = gc.get_freeze_count()
    freeze_survivors(True)
    try:
        with quiet_gc():
            built = [[i] for i in range(1000)]
        assert gc.get_freeze_count() > frozen and built
    finally:
        freeze_survivors(False)
        gc.unfreeze()
