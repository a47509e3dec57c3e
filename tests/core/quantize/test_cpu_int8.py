"""The CPU's int8 path picks the weight format: 7-bit where ONNX Runtime's u8s8 kernels saturate
(AVX2 / AVX-512 BW without VNNI, or a CPU we cannot read), 8-bit where they cannot (VNNI, AMX, ARM
dot product); a test pins the path, so nothing here depends on the CPU running it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from onnxport.core.quantize.cpu_int8 import PATHS, detect, from_flags, parse_cpuinfo, resolve
from onnxport.core.quantize.quantize import QuantizeOptions, quantize, quantize_info
from onnxport.core.util.errors import OnnxportError

from ..quant_models import encoder, save

X86_BASE = {"fpu", "sse2", "ssse3", "sse4_1", "sse4_2", "avx", "fma"}
CPUS = {  # flags as /proc/cpuinfo spells them, for CPUs people run this on
    "AMD EPYC 7B12 (Zen 2: AVX2 only)": (X86_BASE | {"avx2"}, "x86_64", "avx2"),
    "Intel Skylake-SP (AVX-512 without VNNI)": (X86_BASE | {"avx2", "avx512f", "avx512bw"}, "x86_64", "avx512bw"),
    "Intel Cascade Lake (AVX-512 VNNI)": (X86_BASE | {"avx2", "avx512f", "avx512bw", "avx512_vnni"}, "x86_64",
                                         "avx512-vnni"),
    "AMD EPYC Zen 4": (X86_BASE | {"avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni"}, "x86_64",
                       "avx512-vnni"),
    "Intel Alder Lake (AVX-VNNI, no AVX-512)": (X86_BASE | {"avx2", "avx_vnni"}, "x86_64", "avx-vnni"),
    "Intel Sapphire Rapids (AMX)": (X86_BASE | {"avx2", "avx512bw", "avx512_vnni", "amx_tile", "amx_int8"},
                                    "x86_64", "amx"),
    "old x86 (SSE only)": (X86_BASE - {"avx", "fma"}, "x86_64", "x86"),
    "Graviton 2 (ARMv8.2 with dot product)": ({"fp", "asimd", "asimddp"}, "aarch64", "arm-dotprod"),
    "Cortex-A53 (no dot product)": ({"fp", "asimd"}, "aarch64", "arm"),
    "Apple M1": ({"asimddp"}, "arm64", "arm-dotprod"),
    "unreadable flags": (set(), "x86_64", "unknown"),
    "RISC-V": ({"rv64imafdc"}, "riscv64", "unknown"),
}


@pytest.mark.parametrize("cpu", list(CPUS))
def test_each_cpu_kind_gets_its_path_and_weights(cpu):
    flags, machine, expected = CPUS[cpu]
    path = from_flags(flags, machine)
    assert path.name == expected
    assert path.reduce_range is (expected in ("avx2", "avx512bw", "x86", "unknown"))
    assert path.weight_bits == (7 if path.reduce_range else 8)


def test_cpuinfo_text_is_parsed_for_x86_and_arm():
    x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx2 fma\nbugs\t: none\n"
    assert parse_cpuinfo(x86) == {"fpu", "sse2", "avx2", "fma"}
    assert from_flags(parse_cpuinfo(x86), "x86_64").name == "avx2"
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes asimddp\nCPU part\t: 0xd0c\n"
    assert from_flags(parse_cpuinfo(arm), "aarch64").name == "arm-dotprod"
    assert parse_cpuinfo("no flags here") == set()


def test_the_report_line_says_path_and_weights():
    assert resolve("avx2").describe() == "int8 path: avx2 (no VNNI) -> 7-bit weights, pinned"
    assert resolve("vnni").describe() == "int8 path: AVX-512 VNNI -> 8-bit weights, pinned"  # an alias
    assert "u8s8 can saturate" in resolve("avx2").describe(reduce_range=False)
    assert "may not be faster" in resolve("arm").describe()
    assert resolve(None) == detect() and detect().source == "detected"
    assert resolve("auto").name in PATHS
    with pytest.raises(OnnxportError, match="unknown int8 path 'avx3'.*avx2"):
        resolve("avx3")


@pytest.fixture(scope="module")
def enc(tmp_path_factory):
    return save(encoder(), tmp_path_factory.mktemp("enc") / "encoder.onnx")


def _int8_weights(path) -> list[np.ndarray]:
    model = onnx.load(str(path))
    return [numpy_helper.to_array(t) for t in model.graph.initializer
            if t.data_type == onnx.TensorProto.INT8 and t.dims and np.prod(t.dims) > 1]


def test_pinned_paths_choose_the_weights_and_the_report_records_them(enc, tmp_path):
    """AVX2 pinned: every int8 weight fits 7 bits, so vpmaddubsw's pair sums (2 x 255 x 64 = 32640)
    never saturate; VNNI pinned: the full 8-bit range is used."""
    avx2 = quantize(enc, tmp_path / "avx2.onnx", "dynamic",
                    QuantizeOptions(int8_path="avx2", accuracy_target=None))
    vnni = quantize(enc, tmp_path / "vnni.onnx", "dynamic",
                    QuantizeOptions(int8_path="avx512-vnni", accuracy_target=None))
    assert avx2.options["reduce_range"] is True and vnni.options["reduce_range"] is False
    assert avx2.options["per_channel"] is True  # dynamic: per-channel first
    w7, w8 = _int8_weights(avx2.path), _int8_weights(vnni.path)
    assert w7 and all(np.abs(w.astype(np.int32)).max() <= 64 for w in w7)
    assert max(np.abs(w.astype(np.int32)).max() for w in w8) > 64
    assert 2 * 255 * 64 <= 32767 < 2 * 255 * 127  # why 7 bits are exact and 8 bits may saturate
    assert avx2.int8_path == "int8 path: avx2 (no VNNI) -> 7-bit weights, pinned"
    assert avx2.int8_path in avx2.notes and avx2.to_dict()["int8_path"] == avx2.int8_path
    assert quantize_info(avx2.path)["int8_path"] == "avx2" and quantize_info(vnni.path)["int8_path"] == "avx512-vnni"
    asked = quantize(enc, tmp_path / "asked.onnx", "dynamic",
                     QuantizeOptions(int8_path="avx2", reduce_range=False, per_channel=False,
                                     accuracy_target=None))  # the caller's choice wins, and is noted
    assert asked.options["reduce_range"] is False and asked.options["per_channel"] is False
    assert "u8s8 can saturate" in asked.int8_path
    fp16 = quantize(enc, tmp_path / "half.onnx", "fp16", QuantizeOptions(int8_path="avx2"))
    assert fp16.int8_path is None and fp16.options["int8_path"] is None  # no int8 kernels involved
