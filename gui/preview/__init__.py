"""The Preview (the window's centre): Netron served from a loopback server, in a locked-down WebEngine view."""

from __future__ import annotations


def make_preview():
    """The Netron preview panel if it is there, else a placeholder label saying why not."""
    from PySide6.QtCore import Qt

    from ..widgets.plain_text import plain_label

    try:
        from .preview_panel import PreviewPanel
    except ImportError as exc:
        label = plain_label(f"The graph preview is not available ({exc}).")
        label.setAlignment(Qt.AlignCenter)
        label.setWordWrap(True)
        return label
    return PreviewPanel()
