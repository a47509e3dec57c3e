"""Fuzz every reader of untrusted files: no crafted file may read, run or exhaust anything.

Property, for every input: the read ends in success (and every tensor it exposes materializes,
with its declared shape) or in `OnnxportError`; never another exception, never a crash, within
bounded CPU time and memory (the readers run in `fuzz_worker`'s process under RLIMIT_CPU and
RLIMIT_AS, and each read's peak RSS growth must stay under PEAK_BUDGET_MIB; `make fuzz` adds a
2 s wall-clock deadline).
Inputs: small valid seeds of every kind (fuzz_seeds) mutated byte-wise and structure-aware
(fuzz_mutations), and whole files built from fuzzed parts (fuzz_formats; model-local function
call graphs and names with markup and controls: fuzz_names_functions), ONNX field edits
included (sparse tensors' dense shape, indices and values: what is accepted, ORT densifies). Readers: ORT
checkpoints (flatbuffer, external data, nominal, legacy .pbseq folder), safetensors, .npz, PyTorch
state_dicts (zip and legacy), the .pt2 pre-check (never trusted, never loaded), ONNX models with
external data and their index; every input also goes through the sniffing entry.
Bounded and derandomized in `make test`; `ONNXPORT_FUZZ_EXAMPLES=5000` for a long random run.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ..fuzz_formats import ONNX_EDITS, apply_onnx_edits, npz_file, safetensors_file
from ..fuzz_mutations import EDITS, mutate, rezip
from ..fuzz_names_functions import NAMES, local_function_models, renamed
from ..fuzz_seeds import Seed, build_seeds, fuzz_settings, onnx_model
from ..fuzz_worker import CPU_BUDGET_S, FuzzWorker

PEAK_BUDGET_MIB = 300  # readers' own floors allow 256 MiB for tiny archives (budgets.py)
CHECKPOINTS = ["checkpoint", "checkpoint_external", "checkpoint_nominal", "legacy"]
PARAM_FILES = ["npz", "npz_compressed", "safetensors", "state_dict", "state_dict_legacy"]
ZIPS = ["npz", "npz_compressed", "state_dict", "pt2"]
ONNX_SEEDS = ["onnx", "onnx_external"]
SUFFIXES = ["", ".onnx", ".safetensors", ".npz", ".pt", ".pt2", ".pbseq", ".data", ".bin"]


class Cases:
    """Writes each example into a fresh folder and has the worker read it."""

    def __init__(self, root, worker: FuzzWorker, seeds: dict[str, Seed]) -> None:
        self.root, self.worker, self.seeds = root, worker, seeds
        self.outside = root / "outside.bin"
        self.outside.write_bytes(bytes(range(64)))
        self.counter = itertools.count()
        self.seed_outcomes: dict[str, str] = {}

    def write(self, files: dict[str, bytes]):
        folder = self.root / f"case{next(self.counter)}"
        shutil.rmtree(self.root / f"case{int(folder.name[4:]) - 1}", ignore_errors=True)
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "inner.bin").write_bytes(bytes(64))
        (folder / "link_out").symlink_to(self.outside)
        (folder / "loop").symlink_to(folder / "loop")
        (folder / "dangling").symlink_to(folder / "nowhere")
        os.mkfifo(folder / "pipe")  # opening it would block: folder listings must skip it
        for name, data in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        if not (folder / "link_in").exists():
            (folder / "link_in").symlink_to(folder / next(iter(files)))
        return folder

    def check(self, target: str, files: dict[str, bytes], main: str) -> dict:
        folder = self.write(files)
        reply = self.worker.read(target, folder / main)
        with contextlib.suppress(InvalidArgument):  # outside a hypothesis test: no statistics
            event(reply["outcome"])
        assert reply["outcome"] != "bug", reply["detail"]
        assert reply["peak_mib"] <= PEAK_BUDGET_MIB, f"a read took {reply['peak_mib']:.0f} MiB"
        if reply["outcome"] == "refused":
            assert folder.name in reply["detail"], f"the message does not name the file: {reply['detail']}"
        return reply

    def seed(self, name: str, files: dict[str, bytes] | None = None) -> dict:
        seed = self.seeds[name]
        return self.check(seed.target, files if files is not None else seed.files, seed.main)


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz_readers")
    seeds = build_seeds(root / "seeds")
    worker = FuzzWorker(root / "worker.log")
    try:
        cases = Cases(root, worker, seeds)
        # Start and warm the worker (torch's lazy imports...) outside any timed example.
        cases.seed_outcomes = {name: cases.seed(name)["outcome"] for name in seeds}
        yield cases
    finally:
        worker.close()


def _with(seed: Seed, which: int, edits) -> dict[str, bytes]:
    name = sorted(seed.files)[which % len(seed.files)]
    return {**seed.files, name: mutate(seed.files[name], edits, seed.layout[name])}


def test_every_seed_reads_cleanly(cases):
    assert cases.seed_outcomes == dict.fromkeys(cases.seeds, "ok")


def test_the_memory_cap_turns_a_missing_guard_into_a_failed_example(cases):
    reply = cases.worker.read("memory_probe", cases.root)
    assert reply["outcome"] == "bug" and "MemoryError" in reply["detail"]
    assert cases.seed("npz")["outcome"] == "ok"  # and the worker lives on


def test_the_cpu_bound_turns_a_reader_that_grinds_into_a_failed_example(cases):
    """Judged on CPU time (the worker's RLIMIT_CPU), not the wall clock a loaded machine stretches."""
    reply = cases.worker.read("cpu_probe", cases.root)
    assert reply["outcome"] == "bug" and f"used over {CPU_BUDGET_S} s of CPU" in reply["detail"]
    assert cases.seed("npz")["outcome"] == "ok"  # a new worker reads on


@fuzz_settings(500)
@given(name=st.sampled_from(CHECKPOINTS), which=st.integers(0, 7), edits=EDITS)
def test_mutated_checkpoints(cases, name, which, edits):
    cases.seed(name, _with(cases.seeds[name], which, edits))


@fuzz_settings(500)
@given(name=st.sampled_from(PARAM_FILES), edits=EDITS)
def test_mutated_parameter_files(cases, name, edits):
    cases.seed(name, _with(cases.seeds[name], 0, edits))


@fuzz_settings(500)
@given(name=st.sampled_from(ZIPS), member=st.integers(0, 63), edits=EDITS)
def test_mutated_zip_members(cases, name, member, edits):
    seed = cases.seeds[name]
    cases.seed(name, {seed.main: rezip(seed.files[seed.main], member, edits)})


@fuzz_settings(300)
@given(edits=EDITS)
def test_mutated_pt2_archives(cases, edits):
    cases.seed("pt2", _with(cases.seeds["pt2"], 0, edits))


@fuzz_settings(300)
@given(name=st.sampled_from(ONNX_SEEDS), which=st.integers(0, 1), edits=EDITS)
def test_mutated_onnx_models(cases, name, which, edits):
    cases.seed(name, _with(cases.seeds[name], which, edits))


@fuzz_settings(300)
@given(which=st.integers(0, 1), edits=EDITS)
def test_mutated_model_and_checkpoint_opened_together(cases, which, edits):
    cases.seed("model_and_checkpoint", _with(cases.seeds["model_and_checkpoint"], which, edits))


@fuzz_settings(500)
@given(name=st.sampled_from(ONNX_SEEDS), edits=ONNX_EDITS)
def test_onnx_field_edits(cases, name, edits):
    seed = cases.seeds[name]
    cases.seed(name, {**seed.files, seed.main: apply_onnx_edits(seed.files[seed.main], edits)})


@fuzz_settings(150, deadline_s=None)  # an accepted graph near the bound is ~2M nodes to infer (a few s)
@given(case=local_function_models())
def test_model_local_functions(cases, case):
    """Any call graph of local functions: what the oracle accepts loads and indexes, a cycle or an
    expansion past the bound is refused in one line, never a hang (the worker's timeout)."""
    data, verdict = case
    event(verdict)
    reply = cases.check("onnx", {"model.onnx": data}, "model.onnx")
    expected = {"ok": "ok", "recursive": "calls itself", "too big": "expands to"}[verdict]
    assert (reply["outcome"] == "ok") if verdict == "ok" else expected in reply["detail"], reply["detail"]


@fuzz_settings(200)
@given(names=st.lists(NAMES, min_size=1, max_size=3))
def test_names_with_markup_and_control_characters(cases, names):
    """Tensor names holding markup, controls, bidi overrides...: read and indexed like any name."""
    data = renamed(onnx_model(), names).SerializeToString()
    assert cases.check("onnx", {"model.onnx": data}, "model.onnx")["outcome"] == "ok"


@fuzz_settings(500)
@given(data=safetensors_file())
def test_crafted_safetensors_headers(cases, data):
    cases.check("safetensors", {"p.safetensors": data}, "p.safetensors")


@fuzz_settings(500)
@given(data=npz_file())
def test_crafted_npy_headers(cases, data):
    cases.check("npz", {"p.npz": data}, "p.npz")


@fuzz_settings(300)
@given(name=st.sampled_from(sorted(set(CHECKPOINTS + PARAM_FILES + ZIPS + ONNX_SEEDS) - {"legacy"})),
       suffix=st.sampled_from(SUFFIXES), edits=st.one_of(st.just([]), EDITS))
def test_sniffing_any_file_under_any_name(cases, name, suffix, edits):
    seed = cases.seeds[name]
    data = mutate(seed.files[seed.main], edits, seed.layout[seed.main])
    cases.check("sniff", {**seed.files, "f" + suffix: data}, "f" + suffix)
