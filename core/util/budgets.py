"""Memory and work budgets: how much a file may make onnxport allocate, write or compute.

Why: a crafted file must never exhaust memory. Every budget is derived from the file at hand (its
size, the bytes its headers declare, the model's parameter bytes) with a small floor so tiny
legitimate files are never refused. Readers check their budget from headers *before* they
allocate; folding checks from shapes before it computes.
Archives (.npz, zip state_dicts): one member may inflate to max(INFLATE_FLOOR, MAX_INFLATE_RATIO x
its compressed bytes), all together to max(ARCHIVE_TOTAL_FLOOR, MAX_INFLATE_RATIO x the file's
size). Real weights deflate about 1.1:1, token ids about 4:1, deflate bombs ~1030:1; an archive
over budget is refused with one line saying to save it uncompressed.
Folding (core/graph/fold.py) never fails on a budget; it leaves the node unfolded: one output <=
max(FOLD_OUTPUT_FLOOR, FOLD_OUTPUT_FACTOR x its distinct inputs' bytes); the constants' total
growth <= max(FOLD_GROWTH_FLOOR, FOLD_GROWTH_FACTOR x the model's constant bytes); total work <=
max(FOLD_WORK_FLOOR, FOLD_WORK_FACTOR x those bytes), so chains of folds cannot take exponential
time. Declared sizes are multiplied as Python ints (`declared_bytes`), never in int64 (it wraps)."""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

# --- archives: .npz and PyTorch zip files ---
INFLATE_FLOOR = 64 * MiB
ARCHIVE_MEMBERS_MAX = 200_000  # members listed (~50 us and ~1 KB of Python objects each)
MAX_INFLATE_RATIO = 32
ARCHIVE_TOTAL_FLOOR = 256 * MiB

# --- safetensors ---
SAFETENSORS_MAX_HEADER = 100_000_000  # the format's own limit on the JSON header
# JSON parsing costs ~10-60 bytes of Python objects per value; a header's values are bounded by
# counting its separators (, : [ {) before parsing. Real headers use ~11 per tensor: this allows
# ~190,000 tensors and keeps parsing's memory bounded (docs/performance.md, figures behind comments).
SAFETENSORS_MAX_HEADER_TOKENS = 1 << 21

# --- PyTorch zip state_dicts: torch unpickles data.pkl in pure Python, slowly (docs/performance.md);
# real ones hold ~150 bytes per tensor, so this allows ~100,000 tensors.
TORCH_PICKLE_MAX = 16 * MiB

# --- sparse tensors: ONNX Runtime densifies them on load. A real sparse weight stores >= 12 bytes
# per non-zero (value + int64 index): at 1% density its dense form is ~33x what it stores. Beyond
# this the dense forms of all sparse tensors together are refused (a 281-byte model declared 10 GB).
SPARSE_DENSE_FLOOR = 256 * MiB
SPARSE_DENSE_RATIO = 64

# --- model-local functions: shape inference and ONNX Runtime expand every call in place (inference
# time grows with the expanded nodes). Past this the expanded graph is refused (48 functions
# each calling the next twice: 3.8 KB on disk, 2^47 nodes expanded; inference never ended).
FUNCTION_EXPANSION_FLOOR = 2_000_000  # nodes
FUNCTION_EXPANSION_FACTOR = 16  # x the nodes the file stores (functions reused across a big model)

# --- entries a source may list: tensors, optimizer states, properties (checkpoint tables, legacy
# records). Each costs time and memory to read (docs/performance.md); a 100,000-parameter model
# with Adam state lists ~400,000.
ENTRIES_MAX = 500_000

# --- constant folding ---
FOLD_OUTPUT_FLOOR = 1 * MiB
FOLD_OUTPUT_FACTOR = 8
FOLD_GROWTH_FLOOR = 16 * MiB
FOLD_GROWTH_FACTOR = 1
FOLD_WORK_FLOOR = 256 * MiB
FOLD_WORK_FACTOR = 16
FOLD_VALUE_MAX = 1 * MiB  # shape/axes/index inputs whose values folding reads to infer shapes
FOLD_EAGER_MAX = 64 * KiB  # small folded outputs are computed at once (read by later folds)
FOLD_EAGER_TOTAL = 64 * MiB  # ... up to this much in memory in all

# --- generated inputs (validate, bench, quantize, deploy's check): a model or an option declares
# their sizes; a 300-byte model may declare eight 1 GiB inputs. Past these, inputs come from a file.
GENERATED_INPUT_MAX = 1 * GiB  # one input of one feed
GENERATED_TOTAL_MAX = 2 * GiB  # every input of every feed one request generates, together
DIM_MAX = (1 << 63) - 1  # the largest size an option may give: ONNX stores dims as int64

# --- text read from a file (calibration lines): read in pieces, never a whole line at once (a 1 GiB
# one-line file made the tokenizer run out of memory).
TEXT_LINE_MAX = 64 * KiB  # characters kept of one line (tokenizers truncate to <= 512 tokens)
TEXT_READ_MAX = 64 * MiB  # characters read of one text file in all

# --- JSON from a file (config.json, tokenizer files, modules.json): Python's parser recurses per
# level and raises RecursionError near 1,000; real files nest under 20 levels.
JSON_DEPTH_MAX = 100
JSON_FILE_MAX = 256 * MiB  # a tokenizer.json of a large vocabulary is ~35 MB


def archive_member_limit(compressed_bytes: int) -> int:
    """The most one compressed archive member may declare (uncompressed)."""
    return max(INFLATE_FLOOR, MAX_INFLATE_RATIO * compressed_bytes)


def archive_total_limit(file_bytes: int) -> int:
    """The most all members of an archive of `file_bytes` may declare together (uncompressed)."""
    return max(ARCHIVE_TOTAL_FLOOR, MAX_INFLATE_RATIO * file_bytes)


def sparse_dense_limit(file_bytes: int | None) -> int:
    """The most the dense forms of a model's sparse tensors may take together (model of `file_bytes`)."""
    return max(SPARSE_DENSE_FLOOR, SPARSE_DENSE_RATIO * (file_bytes or 0))


def function_expansion_limit(stored_nodes: int) -> int:
    """The most nodes a model storing `stored_nodes` nodes may expand to once its functions are inlined."""
    return max(FUNCTION_EXPANSION_FLOOR, FUNCTION_EXPANSION_FACTOR * stored_nodes)


def declared_bytes(shape, itemsize: int) -> int:
    """The bytes of an array of `shape` (any sizes a file or an option declares), exactly: int64
    products wrap (2^32 x 2^32 is 0 there) and would let any size pass a limit."""
    n = int(itemsize)
    for d in shape:
        n *= int(d)
    return n


def human_bytes(n: int) -> str:
    """'4.0 GiB', '12.5 MiB', '300 bytes': sizes in one-line messages."""
    for unit, size in (("TiB", 1 << 40), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"
