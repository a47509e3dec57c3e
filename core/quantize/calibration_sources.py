"""Calibration data in the forms people have it: arrays saved without names, and lines of text.

Why: ranges from random inputs miss real activations; users hold real samples as `np.savez(f, x)`
files (arrays named `arr_0`...) or, for a language model, as plain text.

Contract: `calibration_data(source, specs, model_path, tokenizer=None)` returns what
`evaluate.feeds.open_feeds` reads, converting two more forms:
- `.npz` files (one, or a folder) whose arrays are all positional, in the order of the model's
  inputs: mapped by position (read whole);
- a `.txt` file: one sample per non-empty line, tokenized with a Hugging Face tokenizer (given, or
  the first `tokenizer.json` beside the model or the text), `BATCH_LINES` lines per batch, padded
  and truncated (to the model's fixed sequence length, else the tokenizer's, else `MAX_TOKENS`),
  fed to the inputs named like `input_ids`, `attention_mask`, `token_type_ids`, `position_ids`;
  any other input is an error.
Anything else is returned unchanged. Errors are one line naming the file."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from onnxport.core.io.npz_reader import list_npz, read_member
from onnxport.core.util.budgets import JSON_FILE_MAX, TEXT_LINE_MAX, TEXT_READ_MAX
from onnxport.core.util.errors import OnnxportError, cannot_read
from onnxport.core.util.json_files import read_json

BATCH_LINES = 8
MAX_TOKENS = 128
MAX_LINES = 100_000
_POSITIONAL = re.compile(r"arr_(\d+)$")
_TEXT_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")


def calibration_data(source, specs: Sequence, model_path: str | Path | None = None,
                     tokenizer: str | Path | None = None):
    """See the module docstring."""
    if not isinstance(source, (str, Path)):
        return source
    path = Path(source)
    if path.is_file() and path.suffix.lower() == ".txt":
        return text_feeds(path, specs, find_tokenizer(tokenizer, model_path, path))
    if path.is_file() and path.suffix.lower() == ".npz":
        feed = _positional(path, specs)
        return [feed] if feed is not None else source
    if path.is_dir():
        files = sorted(path.glob("*.npz"))
        if files and not any(p.stem in {s.name for s in specs} for p in path.glob("*.npy")):
            feeds = [_positional(p, specs) for p in files]
            if all(f is not None for f in feeds):
                return feeds
    return source


def _positional(path: Path, specs: Sequence) -> dict[str, np.ndarray] | None:
    """The arrays of an .npz keyed by input name when they are all positional, else None."""
    members = list_npz(path)
    found = {int(m.group(1)): member for member in members if (m := _POSITIONAL.match(member.name))}
    if not members or len(found) != len(members) or {s.name for s in specs} & {m.name for m in members}:
        return None
    if sorted(found) != list(range(len(specs))):
        names = ", ".join(s.name for s in specs)
        raise OnnxportError(f"{path}: {len(found)} unnamed array(s) (arr_0...) for {len(specs)} model input(s) "
                            f"({names}); save one array per input, in that order, or name them like the inputs")
    return {spec.name: read_member(path, found[i]) for i, spec in enumerate(specs)}


# --- text ----------------------------------------------------------------------------------------

def find_tokenizer(given: str | Path | None, model_path: str | Path | None, text: Path) -> Path:
    if given is not None:
        given = Path(given)
        found = given / "tokenizer.json" if given.is_dir() else given
        if not found.is_file():
            raise OnnxportError(f"{given}: no tokenizer.json there (a Hugging Face tokenizer folder is needed "
                                "to calibrate on text)")
        return found
    for folder in [Path(model_path).parent] if model_path else []:
        if (folder / "tokenizer.json").is_file():
            return folder / "tokenizer.json"
    if (text.parent / "tokenizer.json").is_file():
        return text.parent / "tokenizer.json"
    raise OnnxportError(f"{text}: no tokenizer to turn the text into model inputs (no tokenizer.json beside the "
                        "model or the text)", hint="give the Hugging Face model folder with --tokenizer FOLDER")


def _tokenizer_config(tokenizer_json: Path) -> dict:
    config = tokenizer_json.parent / "tokenizer_config.json"
    try:
        return read_json(config, JSON_FILE_MAX) if config.is_file() else {}  # nesting bounded
    except OnnxportError:
        return {}


def _text_role(name: str) -> str | None:
    low = name.lower()
    return next((role for role in _TEXT_INPUTS if role in low), "attention_mask" if "mask" in low else None)


def _fixed_length(specs: Sequence) -> int | None:
    for spec in specs:
        shape = spec.shape or ()
        if len(shape) >= 2 and isinstance(shape[1], int) and shape[1] > 0:
            return int(shape[1])
    return None


def _lines(path: Path) -> list[str]:
    """The non-empty lines, read in pieces: at most TEXT_LINE_MAX characters of a line (the rest is
    skipped), MAX_LINES lines and TEXT_READ_MAX characters in all (budgets.py)."""
    try:
        with path.open(encoding="utf-8") as f:
            lines: list[str] = []
            read = 0
            while len(lines) < MAX_LINES and read < TEXT_READ_MAX:
                line = f.readline(TEXT_LINE_MAX)
                if not line:
                    break
                read += len(line)
                rest = line
                while rest and not rest.endswith("\n") and read < TEXT_READ_MAX:  # a longer line: skip the rest
                    rest = f.readline(TEXT_LINE_MAX)
                    read += len(rest)
                if line.strip():
                    lines.append(line.rstrip("\n"))
    except UnicodeDecodeError:
        raise OnnxportError(f"{path}: not UTF-8 text (one calibration sample per line expected)") from None
    except OSError as exc:
        raise cannot_read(path, exc) from None
    if not lines:
        raise OnnxportError(f"{path}: no lines of text to calibrate with")
    return lines


def text_feeds(path: Path, specs: Sequence, tokenizer_json: Path) -> list[dict[str, np.ndarray]]:
    """Batches of tokenized lines, one dict per batch (input name -> int array [lines, tokens])."""
    from tokenizers import Tokenizer

    roles = {spec.name: _text_role(spec.name) for spec in specs}
    unknown = [name for name, role in roles.items() if role is None]
    if unknown:
        raise OnnxportError(f"{path}: text gives input_ids/attention_mask/token_type_ids, but the model also "
                            f"takes '{unknown[0]}'; give calibration arrays (.npz) instead")
    try:
        tok = Tokenizer.from_file(str(tokenizer_json))
    except Exception as exc:  # noqa: BLE001 - tokenizers raises a bare Exception for a bad file
        raise OnnxportError(f"{tokenizer_json}: not a readable Hugging Face tokenizer ({exc})") from None
    config = _tokenizer_config(tokenizer_json)
    length = _fixed_length(specs) or min(int(config.get("model_max_length") or MAX_TOKENS), 512)
    if _fixed_length(specs) or tok.truncation is None or tok.truncation.get("max_length", length) > length:
        tok.enable_truncation(max_length=length)
    if _fixed_length(specs):
        tok.enable_padding(length=length, pad_id=_pad_id(tok, config))
    elif tok.padding is None:
        tok.enable_padding(pad_id=_pad_id(tok, config))
    lines = _lines(path)
    feeds = []
    for start in range(0, len(lines), BATCH_LINES):
        encodings = tok.encode_batch(lines[start:start + BATCH_LINES])
        values = {
            "input_ids": np.array([e.ids for e in encodings], np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], np.int64),
        }
        values["position_ids"] = np.broadcast_to(np.arange(values["input_ids"].shape[1]),
                                                 values["input_ids"].shape).copy()
        feeds.append({name: values[role] for name, role in roles.items()})
    return feeds


def _pad_id(tok, config: dict) -> int:
    pad = config.get("pad_token")
    pad = pad.get("content") if isinstance(pad, dict) else pad
    found = tok.token_to_id(pad) if isinstance(pad, str) else None
    return int(found) if found is not None else 0
