"""The project's error types.

`OnnxportError` is a *user* error: bad input, an unknown output name, a checkpoint that does not
fit. Front ends show its message as one line (CLI: stderr + exit 2; app: a dialog) and never a
traceback. Anything else that escapes is a bug and is shown with details.
"""

from __future__ import annotations

import os


class OnnxportError(Exception):
    """A problem with the user's input or environment, explained in one line. `hint` says what to
    try in the CLI's words; `option` names the CLI option it is about (e.g. "--calibration"), so a
    front end with its own words for that choice (the app's fields) says it in them."""

    def __init__(self, message: str, *, hint: str | None = None, option: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint
        self.option = option

    def one_line(self) -> str:
        text = str(self).strip().replace("\n", " ")
        return f"{text} ({self.hint})" if self.hint else text


class CorruptFileError(OnnxportError):
    """A file is truncated, malformed or not of the kind it claims to be."""


class CheckpointMismatchError(OnnxportError):
    """The checkpoint's parameters do not fit the model's."""


class NominalCheckpointError(OnnxportError):
    """A nominal checkpoint holds parameter names only, no values."""


class UnknownOutputError(OnnxportError):
    """A requested output name is not a tensor of the graph."""


class Cancelled(OnnxportError):
    """The user cancelled the operation; nothing was written."""

    def __init__(self, message: str = "cancelled; nothing was written") -> None:
        super().__init__(message)


class UnavailableError(OnnxportError):
    """A feature needs a package that is not installed here (e.g. onnxruntime-training)."""


def cannot_write(path: str | os.PathLike, reason: OSError | str) -> OnnxportError:
    """The one-line error for a destination that cannot be written: `cannot write PATH: REASON`.

    An `OSError` gives its strerror ("No space left on device"), else its text. Raise it with
    `from None`: the OS error is the whole story, not a traceback.
    """
    text = (reason.strerror or str(reason)) if isinstance(reason, OSError) else reason
    return OnnxportError(f"cannot write {path}: {text}")


def no_such_file(path: str | os.PathLike) -> OnnxportError:
    """The one wording for a path that is not there: `PATH: no such file or folder`."""
    return OnnxportError(f"{path}: no such file or folder")


def cannot_read(path: str | os.PathLike, exc: OSError, kind: type[OnnxportError] = OnnxportError) -> OnnxportError:
    """The one-line error for a file that cannot be read: a missing one is `no_such_file`, any other
    `OSError` is `PATH: cannot read (STRERROR)` (as `kind`). Raise it `from None`."""
    if isinstance(exc, FileNotFoundError):
        return no_such_file(path)
    return kind(f"{path}: cannot read ({exc.strerror or exc})")
