"""Inputs for the accuracy search and, kept apart, for the verdict: the search never sees them.

Why: a search tuned on a few inputs overfits them (MiniLM: 0.990 promised on 4 random sequences,
0.989 on others). So the search tunes on one part and the verdict is measured on another.

Contract:
- `default_text(specs, model_path, tokenizer)`: the bundled sentences (resources/sentences.txt)
  as batches for a text model whose Hugging Face tokenizer is known (each batch cut after its
  last real token unless the model fixes the length), else None.
- `split(feeds, after=0)` -> `Split`: `held_out` the last batches, >= `HELD_OUT_SAMPLES` samples
  when there are twice that many, else half (one batch is cut in two); `search` the first ones
  (<= `SEARCH_SAMPLES`); `seen` all but the held-out part. Generated feeds are made afresh: the
  search's first, the held-out ones from batch `after` on (past what calibration generates).
- `first_batches(part, count)`: the first `count` batches of a part (a verdict that must be short).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from onnxport.core.evaluate.feeds import FeedSource, open_feeds
from onnxport.core.evaluate.input_shapes import batch_axis
from onnxport.core.evaluate.runtime import describe_feed
from onnxport.core.util.errors import OnnxportError

HELD_OUT_SAMPLES = 32  # the verdict's minimum: fewer and a min cosine means little
SEARCH_SAMPLES = 64
MAX_HELD_OUT_SAMPLES = 128
TEXT_FILE = Path(__file__).resolve().parents[2] / "resources" / "sentences.txt"


@dataclass
class Split:
    search: FeedSource
    held_out: FeedSource
    seen: FeedSource
    notes: list[str] = field(default_factory=list)

    @property
    def apart(self) -> bool:
        return self.held_out is not self.search


@dataclass
class _Part(FeedSource):
    """Batches `start:stop` of a parent source (read lazily, in order)."""

    parent: FeedSource | None = None
    start: int = 0
    stop: int = 0

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        assert self.parent is not None
        yield from itertools.islice(iter(self.parent), self.start, self.stop)

    def __len__(self) -> int:
        return self.stop - self.start


def default_text(specs: Sequence, model_path: str | Path, tokenizer: str | Path | None):
    """The bundled sentences tokenized for this model, or None when it is not a text model with a known tokenizer."""
    from onnxport.core.quantize.calibration_sources import _text_role, find_tokenizer, text_feeds

    if not specs or any(_text_role(s.name) is None for s in specs):
        return None
    if not any(_text_role(s.name) == "input_ids" for s in specs):
        return None
    folder = Path(model_path).parent
    if tokenizer is None and not (folder / "tokenizer.json").is_file():
        return None
    batches = [_without_padding(b, specs)
               for b in text_feeds(TEXT_FILE, specs, find_tokenizer(tokenizer, model_path, TEXT_FILE))]
    fixed = {s.shape[0] for s in specs if s.shape and isinstance(s.shape[0], int) and s.shape[0] > 0}
    if len(fixed) == 1:  # a fixed batch size (e.g. 1): rows in batches of exactly that many
        size = fixed.pop()
        rows = [{k: v[i:i + size] for k, v in b.items()}
                for b in batches for i in range(0, len(next(iter(b.values()))), size)]
        batches = [r for r in rows if all(len(v) == size for v in r.values())]
    source = open_feeds(batches, list(specs))
    source.description = f"bundled sentences ({TEXT_FILE.name}, {len(batches)} batch(es))"
    return source


def _without_padding(batch: dict[str, np.ndarray], specs: Sequence) -> dict[str, np.ndarray]:
    """A batch cut after its last real token (`attention_mask`), unless the model fixes the length: a
    tokenizer padding to a fixed 128 (all-MiniLM-L6-v2's) made every run mostly padding."""
    mask = batch.get("attention_mask")
    if mask is None or np.ndim(mask) != 2 or not mask.any():
        return batch
    if any(s.shape and len(s.shape) == 2 and isinstance(s.shape[1], int) for s in specs):
        return batch
    used = int(np.flatnonzero(mask.any(axis=0)).max()) + 1
    return {k: v[:, :used] if np.shape(v) == mask.shape else v for k, v in batch.items()}


def calibration_needed(name: str) -> OnnxportError:
    """Static quantization without calibration data, where no bundled text fits: say what it needs."""
    return OnnxportError(f"{name}: static quantization needs calibration data: inputs like the real ones (an .npz "
                         "named like the inputs, a folder of .npy/.npz, or a .txt of lines with a Hugging Face "
                         "tokenizer); ranges from random inputs rarely fit real data",
                         hint="give --calibration DATA, or --calibration generated to calibrate on random inputs "
                              "anyway", option="--calibration")


def samples_in(feed: dict[str, np.ndarray], specs: Sequence) -> int:
    """How many samples one batch holds (along the first input's batch axis that has one)."""
    for spec in specs:
        axis = batch_axis(spec)
        value = feed.get(spec.name)
        if axis is not None and value is not None and np.ndim(value) > axis:
            return int(np.shape(value)[axis])
    return 1


def split(feeds: FeedSource, after: int = 0) -> Split:
    """See the module docstring."""
    if feeds.generated and feeds.regenerate is not None:
        return _generated(feeds, after)
    batches = len(feeds)
    if batches == 0:
        return Split(feeds, feeds, feeds)
    per_batch = max(samples_in(feeds.first(), feeds.specs), 1)
    if batches == 1:
        return _one_batch(feeds, per_batch)
    least = min(math.ceil(HELD_OUT_SAMPLES / per_batch), batches // 2)  # at least 32 samples, at most half
    searched = min(math.ceil(SEARCH_SAMPLES / per_batch), batches - least)
    hold = max(least, min(batches - searched, math.ceil(MAX_HELD_OUT_SAMPLES / per_batch)))
    parts = [_part(feeds, 0, searched, "searched on"), _part(feeds, batches - hold, batches, "held out"),
             _part(feeds, 0, batches - hold, "all but the held-out")]
    return Split(*parts, notes=_few(hold * per_batch))


def _part(feeds: FeedSource, start: int, stop: int, what: str) -> _Part:
    return _Part(feeds.specs, f"{feeds.description}, batches {start + 1}-{stop} ({what})", hint=feeds.hint,
                 parent=feeds, start=start, stop=stop)


def _few(held: int) -> list[str]:
    if held >= HELD_OUT_SAMPLES:
        return []
    return [f"only {held} sample(s) held out for the verdict (fewer than {HELD_OUT_SAMPLES}): "
            "give more validation inputs for a figure that means something"]


def _one_batch(feeds: FeedSource, samples: int) -> Split:
    """One batch: its first half searched on, its second half held out (one sample: no split)."""
    if samples < 2:
        return Split(feeds, feeds, feeds, notes=["one validation sample: the verdict is measured on the inputs "
                                                 "the search tuned on (give more to hold some out)"])
    feed, half = feeds.first(), samples // 2
    first, second = _rows(feed, feeds.specs, 0, half), _rows(feed, feeds.specs, half, samples)
    search = FeedSource(feeds.specs, f"{feeds.description}, samples 1-{half} (searched on)", _feeds=[first],
                        hint=feeds.hint)
    held = FeedSource(feeds.specs, f"{feeds.description}, samples {half + 1}-{samples} (held out)",
                      _feeds=[second], hint=feeds.hint)
    return Split(search, held, search, notes=_few(samples - half))


def _rows(feed: dict[str, np.ndarray], specs: Sequence, start: int, stop: int) -> dict[str, np.ndarray]:
    axes = {s.name: batch_axis(s) for s in specs}
    out = {}
    for name, value in feed.items():
        axis = axes.get(name)
        if axis is None or np.ndim(value) <= axis:
            out[name] = value
        else:
            out[name] = np.take(value, range(start, stop), axis=axis)
    return out


def _generated(feeds: FeedSource, after: int) -> Split:
    per_batch = max(samples_in(feeds.first(), feeds.specs), 1)
    hold = math.ceil(HELD_OUT_SAMPLES / per_batch)  # and as many searched on: random inputs vary a lot
    start = max(after, hold)
    assert feeds.regenerate is not None
    made = feeds.regenerate(start + hold)
    search, held = made[:hold], made[start:]

    def source(batches: list, what: str) -> FeedSource:
        return FeedSource(feeds.specs, f"{len(batches)} generated batch(es) {what}: {describe_feed(batches[0])}",
                          _feeds=batches, generated=True, hint=feeds.hint)

    searched = source(search, "searched on")
    return Split(searched, source(held, "held out"), searched)


def first_batches(part: FeedSource, count: int) -> FeedSource:
    """The first `count` batches of `part` (all of them when it has no more), described so."""
    if len(part) <= count:
        return part
    batches = list(itertools.islice(iter(part), count))
    source = open_feeds(batches, list(part.specs))
    source.description = f"the first {len(batches)} of {part.description}"
    source.hint = part.hint
    return source
