"""One class per quantization mode behind one interface; `quantize.quantize` coordinates them.

Contract: `strategy_for(mode, options)` returns the mode's `Strategy`. The coordinator calls, in
order: `check(job)` (up-front notes and refusals, before anything is written), `choose(job)` (the
choices recorded in the metadata), `prepare(job)` (after the validation inputs are split: static
calibrates, fp16 measures float16's range, dynamic splits off outlier channels), then `search(job,
verdict)`, which writes attempts with `attempt(exclude, dst)` and returns the search's `LoopResult`
(the accuracy-target searches are shared: search.py, search_static.py, fp16_mode.py).
`Job` is what one run shares between the coordinator and its strategy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from onnxport.core.evaluate.compare import Thresholds
from onnxport.core.evaluate.feeds import FeedSource, open_feeds
from onnxport.core.evaluate.validate import ValidationReport
from onnxport.core.export.staging import Staging
from onnxport.core.io.model_io import read_graph
from onnxport.core.quantize import cpu_int8, fp16_mode, gain, held_out, int4, modes, search
from onnxport.core.quantize.calibration_bias import bias_corrected, input_means
from onnxport.core.quantize.finite_values import check_weights
from onnxport.core.quantize.int4_method import weight_method
from onnxport.core.quantize.int4_search import bits_loop
from onnxport.core.quantize.mode_choice import dynamic_refusal
from onnxport.core.quantize.options import QuantizeOptions
from onnxport.core.quantize.search_static import input_producers, static_loop
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import Reporter

CALIBRATION_BATCH = 8
GENERATED_CALIBRATION_BATCHES = 16


@dataclass
class Job:
    """One run's shared state: paths, the model being quantized, its validation inputs and notes."""

    model_path: Path
    out_name: str
    source: object  # the float model (onnx.ModelProto, weights not loaded)
    specs: list
    stage: Staging
    report: Reporter
    big: bool
    prepared: Path
    source_bytes: int = 0  # the float model's file and data files
    excluded: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    text: FeedSource | None = None  # the bundled sentences, for a text model with a known tokenizer
    calibration: object = None
    validation_inputs: object = None
    parts: held_out.Split | None = None
    fitted: FeedSource | None = None  # every validation batch (the split's parent)
    thresholds: Thresholds | None = None
    float_session: object = None  # the float model's session, handed to the verdict's ReferenceRuns
    bounded: bool = False  # quantized without holding the model (bounded.py)

    @property
    def search_feeds(self) -> FeedSource:
        assert self.parts is not None
        return self.parts.search


class Strategy:
    """The interface; the base runs the shared layer-error search with no mode-specific step."""

    mode = ""
    preprocess = True  # ONNX Runtime's pre-processing before quantizing
    held_out_after = 0  # generated held-out batches start past the ones calibration generates

    def __init__(self, options: QuantizeOptions) -> None:
        self.options = options
        self.op_types = list(options.op_types) if options.op_types else None

    def needs_text(self, job: Job) -> bool:
        """Whether the bundled sentences are wanted (as validation inputs, or calibration data)."""
        return job.validation_inputs is None

    def check(self, job: Job) -> None:
        """Up-front notes and refusals: weights a scale cannot be made for (finite_values.py)."""
        if (ops := self.weight_ops()) is not None:
            check_weights(job.source, job.model_path.parent, ops, list(dict.fromkeys(self.options.exclude_nodes)),
                          job.model_path.name)

    def weight_ops(self) -> list[str] | None:
        """The op types whose weights get a scale from their min and max (None: no scale)."""
        return None

    def choose(self, job: Job) -> dict:
        return {"mode": self.mode, "per_channel": bool(self.options.per_channel),
                "reduce_range": bool(self.options.reduce_range), "op_types": self.op_types,
                "keep_io_types": self.options.keep_io_types, "block_ops": list(self.options.block_ops),
                "accuracy_target": self.options.accuracy_target, "int8_path": None}

    def validation_source(self, job: Job):
        return job.validation_inputs if job.validation_inputs is not None else job.text

    def prepare(self, job: Job) -> None:
        """The mode's own work between the split and the first attempt."""

    def ranked_ops(self) -> set[str] | None:
        return None

    def attempt(self, exclude: list[str], dst: Path, job: Job) -> None:
        raise NotImplementedError

    def search(self, job: Job, verdict) -> search.LoopResult:
        return search.layer_error_loop(lambda exclude, dst: self.attempt(exclude, dst, job), job.stage, job.out_name,
                                       job.prepared, job.search_feeds, job.excluded, job.thresholds, self.ranked_ops(),
                                       job.report.sub(0.4, 0.92))

    @property
    def int8_line(self) -> str | None:
        return None


class Int8Strategy(Strategy):
    """What dynamic and static share: the CPU's int8 path picks the weights' bits; per-channel first."""

    def __init__(self, options: QuantizeOptions) -> None:
        super().__init__(options)
        self.path = cpu_int8.resolve(options.int8_path)
        self.reduce_range = bool(self.path.reduce_range if options.reduce_range is None else options.reduce_range)
        self.channel_default = options.per_channel is None  # static falls back per-tensor if it cannot
        self.per_channel = True if options.per_channel is None else bool(options.per_channel)

    def check(self, job: Job) -> None:
        super().check(job)
        job.notes.append(self.path.describe(self.options.reduce_range))

    def choose(self, job: Job) -> dict:
        return {**super().choose(job), "per_channel": self.per_channel, "reduce_range": self.reduce_range,
                "int8_path": self.path.name}

    @property
    def int8_line(self) -> str | None:
        return self.path.describe(self.reduce_range)


class Dynamic(Int8Strategy):
    mode = "dynamic"

    def weight_ops(self) -> list[str]:
        return [*(self.op_types or modes.DYNAMIC_OP_TYPES), "Gemm"]

    def check(self, job: Job) -> None:
        if refusal := dynamic_refusal(job.model_path.name, job.source):  # the app's int8 choice, said here
            raise refusal
        if any(n.op_type in modes.NO_DYNAMIC for g in gain.all_graphs(job.source) for n in g.node):
            job.notes.append("Conv layers stay float in dynamic mode (ONNX Runtime's CPU provider has no int8 "
                             "ConvInteger); --mode static quantizes them")
        super().check(job)

    def prepare(self, job: Job) -> None:
        """Outlier channels in float beside the int8 rest: exact in float (outlier_plan.py)."""
        job.report.check()
        job.report(0.4, "splitting off outlier channels")
        job.prepared = modes.dynamic_source(job.prepared, job.search_feeds, job.stage.path("split.onnx"), job.notes,
                                            self.op_types, job.big)
        job.report.check()
        model = read_graph(job.prepared)[0]  # written by this run (or the source, checked at open)
        self.gemms = {n.name for g in gain.all_graphs(model) for n in g.node if n.op_type == "Gemm"}
        self.parts = modes.dynamic_parts(model)  # read once, not per attempt

    def ranked_ops(self) -> set[str]:
        return set(self.op_types or modes.DYNAMIC_OP_TYPES) | {"Gemm"}

    def attempt(self, exclude: list[str], dst: Path, job: Job) -> None:
        # ORT splits a Gemm `g` into `g_MatMul` + `g_Add` before it reads the exclusions
        exclude = exclude + [f"{n}_MatMul" for n in exclude if n in self.gemms]
        modes.dynamic(job.prepared, dst, op_types=self.op_types, per_channel=self.per_channel,
                      reduce_range=self.reduce_range, exclude=exclude, big=job.big, subgraphs=self.parts[0],
                      outlier_parts=self.parts[1])

    def search(self, job: Job, verdict) -> search.LoopResult:
        if job.thresholds is None:
            return super().search(job, verdict)
        return search.dynamic_loop(lambda exclude, dst: self.attempt(exclude, dst, job), job.stage, job.out_name,
                                   job.prepared, job.search_feeds, job.excluded, job.thresholds, self.ranked_ops(),
                                   job.report.sub(0.4, 0.92), verdict if job.parts.apart else None)


class Static(Int8Strategy):
    mode = "static"
    held_out_after = GENERATED_CALIBRATION_BATCHES

    def weight_ops(self) -> list[str]:
        return modes.static_op_types(self.op_types)

    def needs_text(self, job: Job) -> bool:
        return job.calibration is None

    def check(self, job: Job) -> None:
        if inside := gain.static_reach(job.model_path.name, job.source):
            job.notes.append(inside)  # raised instead when every weight op is inside a body
        if job.calibration is None and job.text is None and self.options.calibration_required:
            raise held_out.calibration_needed(job.model_path.name)
        super().check(job)

    def validation_source(self, job: Job):
        if job.validation_inputs is not None:
            return job.validation_inputs
        return job.calibration if job.calibration is not None else job.text

    def prepare(self, job: Job) -> None:
        """Calibration ranges (never from the held-out part), once; per-channel QDQ needs opset 13."""
        assert job.parts is not None
        if job.calibration is None and job.text is not None:
            job.calibration = job.parts.seen if self.validation_source(job) is job.text else job.text
        elif job.calibration is not None and self.validation_source(job) is job.calibration:
            job.calibration = job.parts.seen  # the held-out part stays unseen by calibration too
        if self.per_channel:  # convert before calibrating, so ranges match
            job.prepared, self.per_channel = _axis_opset(job.prepared, job.stage.path("opset13.onnx"), job.big,
                                                         job.notes, self.channel_default)
        self.ranges, self.means = _calibrate(job, self.op_types)

    def ranked_ops(self) -> set[str]:
        return set(modes.static_op_types(self.op_types)) | {"Gemm"}

    def attempt(self, exclude: list[str], dst: Path, job: Job) -> None:
        """Biases corrected for this attempt's weight rounding (calibration_bias.py)."""
        corrected = bias_corrected(job.prepared, job.stage.path("corrected.onnx"), self.means,
                                   per_channel=self.per_channel, reduce_range=self.reduce_range, exclude=exclude,
                                   notes=job.notes)
        modes.static(corrected, dst, tensors_range=self.ranges, op_types=self.op_types, per_channel=self.per_channel,
                     reduce_range=self.reduce_range, exclude=exclude, big=job.big)

    def search(self, job: Job, verdict) -> search.LoopResult:
        if job.thresholds is None:
            return super().search(job, verdict)
        return static_loop(lambda exclude, dst: self.attempt(exclude, dst, job), job.stage, job.out_name,
                           job.prepared, job.search_feeds, job.excluded, job.thresholds, self.ranked_ops(),
                           job.report.sub(0.4, 0.92), input_producers(job.prepared, self.ranked_ops()))


class Fp16(Strategy):
    mode = "fp16"
    preprocess = False

    def prepare(self, job: Job) -> None:
        self.beyond = fp16_mode.fp16_beyond(job.prepared, job.search_feeds, job.stage.path(""))

    def attempt(self, exclude: list[str], dst: Path, job: Job) -> None:
        fp16 = fp16_mode.fp16(job.prepared, dst, keep_io_types=self.options.keep_io_types,
                              block_ops=self.options.block_ops, exclude=exclude, big=job.big, beyond=self.beyond)
        job.notes[:] = [n for n in job.notes if not n.startswith("kept float32")] + fp16.notes()

    def search(self, job: Job, verdict) -> search.LoopResult:
        """Judged on the held-out part first (nothing is tuned), then the layer-error search."""
        assert job.parts is not None
        return fp16_mode.fp16_loop(lambda exclude, dst: self.attempt(exclude, dst, job), job.stage, job.out_name,
                                   job.prepared, job.search_feeds, job.excluded, job.thresholds, None,
                                   job.report.sub(0.4, 0.92), verdict if job.parts.apart else None)


class Int4(Strategy):
    """Weight-only 4/8-bit (int4.py): the weights' method and statistics first (int4_method.py), then
    the search for each weight's width (int4_search.py)."""

    mode = "int4"

    def weight_ops(self) -> list[str]:
        return list(self._ops())

    def _ops(self) -> tuple[str, ...]:
        return tuple(o for o in (self.op_types or int4.WEIGHT_OPS) if o in int4.WEIGHT_OPS)

    def choose(self, job: Job) -> dict:
        method = getattr(self, "method", None)
        return {**super().choose(job), "block_size": self.options.block_size, "symmetric": self.options.symmetric,
                "int4_method": method.name if method else self.options.int4_method,
                "accuracy_level": int4.accuracy_levels(), "bits": getattr(self, "bits", {})}

    def prepare(self, job: Job) -> None:
        int4.check_block_size(self.options.block_size)
        uses = [u for u in int4.weight_uses(read_graph(job.prepared)[0], self.options.block_size, int4.MIN_ELEMENTS)
                if u.op in self._ops()]
        self.nodes = list(dict.fromkeys(u.node for u in uses))
        self.sizes = {u.node: u.values for u in uses}
        calibration = None
        if job.calibration is not None:
            calibration = open_feeds(job.calibration, job.specs, batch_size=CALIBRATION_BATCH)
        # a model too big to hold (bounded.py): no activation statistics (they run it whole), one attempt
        self.cache: dict | None = None if job.bounded else {}  # each weight quantized once per width
        self.method = weight_method(self.options.int4_method, self.options.symmetric, job.prepared, self.nodes,
                                    calibration, None if job.bounded else job.search_feeds, job.stage.path(""),
                                    job.report.sub(0.1, 0.4), whole=not job.bounded)
        levels = ", ".join(f"{b}-bit weights: {lvl}" for b, lvl in int4.accuracy_levels().items())
        job.notes.append(f"int4 weights: {self.method.describe()}, blocks of {self.options.block_size}; "
                         f"MatMulNBits accuracy_level for this CPU ({cpu_int8.detect().label}): {levels}")

    def write(self, bits: dict[str, int], dst: Path, job: Job) -> None:
        plan = int4.NbitsPlan({n: b for n, b in bits.items() if b}, self.options.block_size, self.method,
                              int4.accuracy_levels(), cache=self.cache)
        int4.write_weight_only(job.prepared, dst, plan, job.big)

    def attempt(self, exclude: list[str], dst: Path, job: Job) -> None:
        """Every candidate but `exclude` in 4 bits (bounded.py's one attempt)."""
        self.bits = {n: 4 for n in self.nodes if n not in set(exclude)}
        self.write(self.bits, dst, job)

    def search(self, job: Job, verdict) -> search.LoopResult:
        assert job.parts is not None
        outcome = bits_loop(lambda bits, dst: self.write(bits, dst, job), self.sizes, job.stage, job.out_name, job.prepared,
                            job.search_feeds, job.excluded, job.thresholds, self.nodes, job.report.sub(0.4, 0.92),
                            verdict if job.parts.apart else None)
        self.bits = outcome.search.get("bits", {})
        return outcome


STRATEGIES = {s.mode: s for s in (Dynamic, Static, Fp16, Int4)}


def strategy_for(mode: str, options: QuantizeOptions) -> Strategy:
    if mode not in STRATEGIES:
        raise OnnxportError(f"unknown quantization mode '{mode}'; choose one of {', '.join(STRATEGIES)}")
    return STRATEGIES[mode](options)


def _axis_opset(prepared: Path, dst: Path, big: bool, notes: list[str], fallback: bool) -> tuple[Path, bool]:
    """(the model with opset >= 13, per-channel) or, when per-channel was only the default and the
    conversion fails, (the model as it is, per-tensor) with a note."""
    try:
        return modes.with_axis_opset(prepared, dst, big, notes), True
    except OnnxportError as exc:
        if not fallback:
            raise
        notes.append(f"per-tensor weight scales: {exc.one_line()}")
        return prepared, False


def _calibrate(job: Job, op_types):
    """The ranges (calibration.py) and, with Conv among the op types, the input means (calibration_bias.py)."""
    from onnxport.core.quantize.calibration import calibrate

    feeds = open_feeds(job.calibration, job.specs, batch_size=CALIBRATION_BATCH,
                       generate=GENERATED_CALIBRATION_BATCHES, like=job.fitted)
    if feeds.generated:
        job.notes.append("calibrated on generated random inputs: ranges may not match real data "
                         "(give calibration data for a better model)")
    ops = modes.static_op_types(op_types)
    report = job.report.sub(0.1, 0.4)
    ranges = calibrate(job.prepared, feeds, ops, job.stage.path(""), report, job.big)
    if not {"Conv", "ConvTranspose"} & set(ops):
        return ranges, None
    return ranges, input_means(job.prepared, feeds, job.stage.path(""), report, ops)


__all__ = ["Job", "Strategy", "ValidationReport", "strategy_for"]
