"""Import from PyTorch asks once per file before running a program's code, and says why."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QMessageBox

pytestmark = [pytest.mark.gui, pytest.mark.torch]
torch = pytest.importorskip("torch")
builders = pytest.importorskip("tests.core.torch_builders")
hostile = pytest.importorskip("tests.core.trust_builders")


@pytest.fixture
def answers(monkeypatch):
    """Answer the trust question with the next queued button; record every question's text."""
    asked: list[str] = []
    queue: list[QMessageBox.StandardButton] = []

    def question(parent, title, text, *args, **kwargs):
        asked.append(text)
        return queue.pop(0)

    from onnxport.gui.widgets import plain_text

    monkeypatch.setattr(plain_text, "ask", question)  # the question box (text shown as plain text)
    return asked, queue


def test_declining_runs_nothing_and_says_why(qtbot, window, tmp_path, answers):
    from onnxport.gui.dialogs.import_dialog import ImportDialog

    asked, queue = answers
    marker = tmp_path / "ran"
    source = hostile.load_marker_torchscript(tmp_path / "net.pt", marker)  # torch.jit.load would create it
    queue.append(QMessageBox.StandardButton.No)
    window.import_source(source)
    assert len(asked) == 1 and "executes its author's code" in asked[0] and "net.pt" in asked[0]
    assert window.job is None and window.findChild(ImportDialog) is None
    assert "not imported: net.pt" in window.log.toPlainText()
    queue.append(QMessageBox.StandardButton.No)  # a No is not remembered: asked again next time
    window.import_source(source)
    assert len(asked) == 2 and window.job is None  # no job started: nothing will run later
    assert not marker.exists()


def test_a_yes_is_remembered_for_the_file_and_reaches_the_export_options(qtbot, window, tmp_path, answers):
    from onnxport.gui.dialogs.import_dialog import ImportDialog

    asked, queue = answers
    source = builders.save_torchscript(builders.bn_net(), tmp_path / "net.pt")
    queue.append(QMessageBox.StandardButton.Yes)
    window.import_source(source)
    qtbot.waitUntil(lambda: window.findChild(ImportDialog) is not None, timeout=300_000)
    dialog = window.findChild(ImportDialog)
    assert dialog.trust_code and dialog.options().trust_code
    assert len(asked) == 1
    dialog.reject()
    dialog.deleteLater()
    qtbot.waitUntil(lambda: window.findChild(ImportDialog) is None and window.job is None, timeout=300_000)
    window.import_source(source)  # the same file again in this session: not asked again
    qtbot.waitUntil(lambda: window.findChild(ImportDialog) is not None, timeout=300_000)
    assert len(asked) == 1 and window.findChild(ImportDialog).options().trust_code


def test_data_sources_ask_nothing(tmp_path, answers):
    from onnxport.gui.dialogs.trust_prompt import TrustedPrograms, trust_for_import

    asked, _ = answers
    folder = tmp_path / "bert"
    folder.mkdir()
    (folder / "config.json").write_text("{}")  # a Hugging Face folder: data, not a program
    state = tmp_path / "state.pt"
    torch.save({"w": torch.ones(2)}, state)  # a state_dict: read weights-only
    for source in (folder, state):
        assert trust_for_import(None, source, TrustedPrograms()) is False
    assert asked == []
