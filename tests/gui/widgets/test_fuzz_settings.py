"""Fuzzed settings files (issue 36, item 5): whatever the app's settings file holds - values of
any type and shape, JSON nested deep, Qt's `@ByteArray`/`@Variant` forms, junk lines - the app
state reads it without an error, gives only well-formed values, and drops what is bad once (a
second read finds nothing to drop). `make fuzz` runs it long and random."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMainWindow, QMenu

from onnxport.gui.widgets.app_state import FOLDER_KEYS, LAYOUT_KEYS, MAX_FILES_PER_ENTRY, MAX_RECENT, AppState
from tests.core.fuzz_seeds import fuzz_settings

pytestmark = pytest.mark.gui

KEYS = ["recent", *FOLDER_KEYS, *LAYOUT_KEYS, "other/key"]
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=40)
JSON_ATOMS = st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(), st.none(), TEXT)
JSON = st.recursive(JSON_ATOMS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(TEXT, inner, max_size=3)), max_leaves=12)


VALUES = st.one_of(
    TEXT,
    JSON.map(json.dumps).map(lambda t: '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'),  # quoted, as Qt writes
    JSON.map(json.dumps),  # unquoted: Qt splits it at commas
    st.integers(1, 200_000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 200_000).map(lambda n: '"' + "[" * n + '"'),
    st.binary(max_size=64).map(lambda b: "@ByteArray(" + b.decode("latin-1").replace("\n", "\\n") + ")"),
    st.binary(max_size=64).map(lambda b: "@Variant(" + "".join(f"\\x{c:02x}" for c in b) + ")"),
    st.sampled_from(["@Invalid()", "@Size(1 2)", "@Rect(0 0 -5 99999999999)", "@Point(a b)", "a, b, c", ""]),
)
LINES = st.one_of(
    st.tuples(st.sampled_from(KEYS), VALUES).map(lambda kv: "{}={}".format(*kv)),
    st.sampled_from(["[General]", "[open]", "[window]", "[export]", "[deploy]", "[%General]", "["]),
    TEXT,
)


def as_ini(lines: list[str]) -> str:
    """Keys with a slash go in their section, as Qt writes them (`window/state` -> [window] state=)."""
    out = []
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and "/" in key:
            section, _, name = key.partition("/")
            out += [f"[{section}]", f"{name}={value}", "[General]"]
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def well_formed(state: AppState) -> None:
    recent = state.recent()
    assert isinstance(recent, list) and len(recent) <= MAX_RECENT
    assert all(isinstance(e, list) and 0 < len(e) <= MAX_FILES_PER_ENTRY and all(isinstance(p, str) and p for p in e)
               for e in recent)
    assert isinstance(state.open_folder, str) and state.open_folder


@fuzz_settings(bounded=100, deadline_s=4.0)
@given(lines=st.lists(LINES, max_size=12))
def test_any_settings_file_reads_well_formed_and_drops_once(qtbot, lines):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "settings.ini"
        path.write_text(as_ini(lines), encoding="utf-8")
        state = AppState(QSettings(str(path), QSettings.IniFormat))
        well_formed(state)
        menu, window = QMenu(), QMainWindow()
        state.fill_recent_menu(menu, lambda _paths: None)
        state.restore_window(window)
        state.settings.sync()
        again = AppState(QSettings(str(path), QSettings.IniFormat))
        assert again.dropped == [], again.dropped  # what was bad is gone from the file: said once
        well_formed(again)
        menu.deleteLater()
        window.deleteLater()
