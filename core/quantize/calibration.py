"""Calibration for static (QDQ) quantization, with memory bounded by one batch of activations.

Contract: `calibrate(model_path, feeds, op_types, workdir)` runs ONNX Runtime's MinMax calibrator
over `feeds` (a lazy `FeedSource`: batches are read from files one at a time) and returns the
tensor ranges. ORT's calibrator keeps every batch's outputs until the end (its
`max_intermediate_outputs` option *drops* them instead of merging: a bug in 1.19 and still in
1.2x), so it is fed `MAX_HELD_BATCHES` batches per `collect_data` call, each of which merges its
ranges into the running ones: memory does not grow with the calibration set. Its augmented model goes to `workdir`. Cancellation is
checked between batches. The ranges are computed once and reused by every quantization attempt.
"""

from __future__ import annotations

from pathlib import Path

from onnxport.core.evaluate.feeds import FeedSource
from onnxport.core.quantize.finite_values import check_feed, check_ranges
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import Reporter

MAX_HELD_BATCHES = 4


def _reader_class():
    from onnxruntime.quantization import CalibrationDataReader

    class FeedReader(CalibrationDataReader):
        """Yields the batches of a `FeedSource` lazily, reporting progress and honouring cancel."""

        def __init__(self, feeds: FeedSource, report: Reporter) -> None:
            self._feeds = feeds
            self._iter = iter(feeds)
            self._report = report
            self._total = max(len(feeds), 1)
            self._done = 0

        def get_next(self):
            self._report.check()
            feed = next(self._iter, None)
            if feed is None:  # the end: nothing to announce (never "batch 17/16")
                return None
            check_feed(feed, self._feeds.description)  # NaN/Inf: ORT's quantizer fails on the range
            self._done += 1
            self._report((self._done - 1) / self._total,
                         f"calibrating (batch {min(self._done, self._total)}/{self._total})")
            return feed

        def __len__(self) -> int:
            return len(self._feeds)

        def rewind(self) -> None:
            self._iter = iter(self._feeds)
            self._done = 0

    return FeedReader


def feed_reader(feeds: FeedSource, report: Reporter):
    return _reader_class()(feeds, report)


def calibrate(model_path: Path, feeds: FeedSource, op_types: list[str], workdir: Path, report: Reporter,
              use_external_data: bool = False):
    from onnxruntime.quantization import CalibrationMethod
    from onnxruntime.quantization.calibrate import create_calibrator

    calibrator = create_calibrator(
        Path(model_path), op_types, augmented_model_path=str(workdir / "augmented_model.onnx"),
        calibrate_method=CalibrationMethod.MinMax, use_external_data_format=use_external_data,
    )
    reader = feed_reader(feeds, report)
    try:
        while True:
            first = reader.get_next()
            if first is None:
                break
            calibrator.collect_data(_Chunk(first, reader, MAX_HELD_BATCHES))
        ranges = calibrator.compute_data()
    finally:
        del calibrator
    if ranges is None:
        raise OnnxportError(f"{feeds.description}: no calibration data")
    check_ranges(ranges)
    return ranges


class _Chunk:
    """At most `size` batches of a reader (the first already taken), as a CalibrationDataReader."""

    def __init__(self, first: dict, parent, size: int) -> None:
        self._pending: dict | None = first
        self._parent = parent
        self._left = size

    def get_next(self):
        if self._left <= 0:
            return None
        self._left -= 1
        if self._pending is not None:
            item, self._pending = self._pending, None
            return item
        return self._parent.get_next()

