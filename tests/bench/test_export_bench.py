"""export_bench's speed bar: a ratio over a few ms of copying is a fixed cost, not disk speed."""

from __future__ import annotations

from bench.export_bench import SPEED_MIN_COPY_S, speed_barred


def test_the_speed_bar_holds_where_copying_takes_long_enough():
    assert speed_barred({"copy": {"seconds": 0.22}})  # 400 MB here
    assert not speed_barred({"copy": {"seconds": 0.007}})  # 10 MB: the fixed cost, printed
    assert speed_barred({"copy": {"error": "failed"}})  # a failed copy leaves no ratio: the bar fails
    assert speed_barred({"copy": {"seconds": SPEED_MIN_COPY_S}})
