"""A quiet start: the lines Qt WebEngine and its graphics stack print on every start (no GPU, no
D-Bus, the page's console) are not the user's business.

Chromium's own log lines (`[pid:tid:...:ERROR:bus.cc] Failed to connect to the bus`) are turned
off by `--log-level=3` (gui/app.py `chromium_flags`); what comes through Qt's message handler is
filtered here: the page's JavaScript console (`js`), WebEngine's context dump, and the known
graphics fallbacks (no OpenGL, no Vulkan, an offscreen platform's unsupported calls). Critical and
fatal messages always pass, and so does anything not known to be noise. Installed by the app's
entry point (a process-wide change), never by a widget.
"""

from __future__ import annotations

import re
import sys

from PySide6.QtCore import QtMsgType, qFormatLogMessage, qInstallMessageHandler

NOISY_CATEGORIES = frozenset({"js", "qt.webenginecontext"})
NOISE = re.compile(
    r"(This plugin does not support (propagateSizeHints|createPlatformVulkanInstance)"
    r"|QRhiGles2: Failed to create|Failed to create RHI for backend|QVulkanInstance: Failed to initialize"
    r"|GBM is not supported|GPUInfo not initialized|Release of profile requested but WebEnginePage still not deleted"
    r"|Sandboxing disabled by user)")
QUIET_TYPES = (QtMsgType.QtDebugMsg, QtMsgType.QtInfoMsg, QtMsgType.QtWarningMsg)


def is_noise(kind: QtMsgType, category: str | None, message: str) -> bool:
    return kind in QUIET_TYPES and (category in NOISY_CATEGORIES or NOISE.match(message) is not None)


def quiet_qt_messages() -> None:
    """Install the filter in front of the handler there was (Qt's own output if none)."""
    previous = None

    def handler(kind: QtMsgType, context, message: str) -> None:
        if is_noise(kind, context.category, message):
            return
        if previous is not None:
            previous(kind, context, message)
        else:
            sys.stderr.write(qFormatLogMessage(kind, context, message) + "\n")

    previous = qInstallMessageHandler(handler)
