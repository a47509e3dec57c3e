"""No traceback in an error dialog: "Show Details…" says what happened in words and names the log
file (in the test's own cache folder) that holds the traceback."""

from __future__ import annotations

import os
import traceback

import pytest
from PySide6.QtWidgets import QWidget

from onnxport.core.util.error_log import MAX_LOG_BYTES
from onnxport.core.util.errors import CorruptFileError
from onnxport.gui.dialogs.error_dialog import show_error
from onnxport.gui.dialogs.error_log import details_in_words, error_log_path, log_error

pytestmark = pytest.mark.gui


def raised(make) -> tuple[BaseException, str]:
    try:
        make()
    except Exception as exc:  # noqa: BLE001 - any error, as the worker catches them
        return exc, traceback.format_exc()
    raise AssertionError("nothing raised")


def test_an_unexpected_error_reads_as_words_and_its_traceback_goes_to_the_log(qtbot, tmp_path):
    def fail():
        try:
            {}["weights"]
        except KeyError as exc:
            raise ValueError("the truth value of an array is ambiguous") from exc

    exc, tb = raised(fail)
    parent = QWidget()
    qtbot.addWidget(parent)
    box = show_error(parent, "Quantize failed", exc, tb)
    details = box.detailedText()
    assert "Traceback" not in details and 'File "' not in details
    assert "ValueError: the truth value of an array is ambiguous" in details and "bug" in details
    assert "Caused by KeyError: 'weights'" in details
    log = error_log_path()
    assert log.is_relative_to(tmp_path) and str(log) in details  # the test's own cache folder
    assert "Traceback" in log.read_text() and "Quantize failed" in log.read_text()
    box.close()


def test_a_users_error_says_its_message_and_hint(qtbot):
    exc, tb = raised(lambda: (_ for _ in ()).throw(CorruptFileError("model.onnx is truncated", hint="copy it again")))
    details = details_in_words(exc, log_error("Open failed", exc, tb))
    assert details.splitlines()[:2] == ["model.onnx is truncated", "What to try: copy it again"]
    assert str(error_log_path()) in details


def test_the_log_stays_bounded(qtbot):
    log = error_log_path()
    log.parent.mkdir(parents=True)
    log.write_text("x" * (MAX_LOG_BYTES + 1))
    exc, tb = raised(lambda: 1 / 0)
    assert log_error("Export failed", exc, tb) == log
    assert log.stat().st_size < 10_000 and log.with_name("errors.log.1").exists()


def test_a_fifo_in_the_logs_place_never_blocks_the_dialog(qtbot):
    log = error_log_path()
    log.parent.mkdir(parents=True)
    os.mkfifo(log)  # nobody reads it: opening it for writing, as before, waited for good
    exc, tb = raised(lambda: 1 / 0)
    parent = QWidget()
    qtbot.addWidget(parent)
    box = show_error(parent, "Export failed", exc, tb)
    assert f"could not be written to {log}" in box.detailedText()
    box.close()


@pytest.mark.parametrize(("option", "field"), [("--calibration", "choose Calibration data"),
                                               ("--validation-inputs", "choose Validation inputs"),
                                               ("--mode", 'choose "Static int8')])
def test_a_hint_about_a_cli_option_is_said_in_the_apps_words(option, field):
    """The policy's hint names the CLI's option; the app names its own field (app_hints.py)."""
    from onnxport.core.util.errors import OnnxportError
    from onnxport.gui.dialogs.error_dialog import error_text

    exc = OnnxportError("m.onnx: something is missing", hint=f"give {option} DATA", option=option)
    assert exc.one_line() == f"m.onnx: something is missing (give {option} DATA)"  # the CLI keeps its words
    assert error_text(exc).startswith(f"m.onnx: something is missing ({field}") and option not in error_text(exc)
    assert f"What to try: {field}" in details_in_words(exc, None)
    plain = OnnxportError("m.onnx: bad", hint="give --other X")
    assert error_text(plain) == plain.one_line()  # no words of its own: the hint as it is
