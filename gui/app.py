"""Start the app: `onnxport-gui [FILES...]`, `python -m onnxport.gui`, `onnxport gui`."""

from __future__ import annotations

import os
import re
import sys

# Chromium switches that keep the embedded preview from reaching out on its own (each checked to
# exist in Qt WebEngine 6's Chromium; see `chromium_flags`). Values with spaces are quoted the way
# Qt reads QTWEBENGINE_CHROMIUM_FLAGS.
PRIVACY_SWITCHES = {
    "--no-pings": "",
    "--force-webrtc-ip-handling-policy": "disable_non_proxied_udp",
    "--host-resolver-rules": '"MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"',
}
# Chromium's own log lines on stderr ("Failed to connect to the bus" at every start): fatal ones
# only, unless the user asks for logging (--log-level / --enable-logging of their own).
QUIET_SWITCH = "--log-level=3"
PRIVACY_DISABLED_FEATURES = (
    "NetworkErrorLogging", "ConversionMeasurement", "BrowsingTopics", "Fledge", "AdInterestGroupAPI",
    "SharedStorageAPI", "PrivateStateTokens", "FedCm", "AutofillServerCommunication",
)
_DISABLE_FEATURES = re.compile(r'(^|\s)--disable-features=("?)([^\s"]*)\2')


def chromium_flags(current: str, as_root: bool) -> str:
    """QTWEBENGINE_CHROMIUM_FLAGS for the app: what the user set (`current`), plus:

    - `--no-sandbox` as root: Qt WebEngine refuses to start as root without it (containers, CI);
    - `--no-pings`: no hyperlink-auditing pings (`<a ping>`);
    - `--force-webrtc-ip-handling-policy=disable_non_proxied_udp`: WebRTC opens no UDP to STUN
      servers and reveals no local addresses;
    - `--host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"`: every host but 127.0.0.1 (the
      preview server) fails to resolve inside Chromium, so nothing that slips past the page's
      request interceptor (gui/preview/netron_view.py) - a preconnect, a report the browser itself sends -
      can look up a name or open a connection; kept as the user's if they set their own rules;
    - `--disable-features=...`: web features whose reports or fetches the browser itself sends
      (Network Error Logging, Attribution Reporting, Topics, Protected Audience, Shared Storage,
      Private State Tokens, FedCM, autofill server queries), merged with the user's list (Chromium
      keeps only the last `--disable-features`).
    Chrome's own `--disable-background-networking`, `--disable-component-update`, `--disable-sync`,
    `--disable-domain-reliability`, `--dns-prefetch-disable` do not exist in Qt WebEngine (none of
    those services is built in; DNS prefetch is a QWebEngineSettings attribute, off by default).
    What no switch stops: on a host lookup (127.0.0.1 included), at most once a second, Chromium's
    resolver connect()s a UDP socket to [2001:4860:4860::8888]:443 to learn whether IPv6 is
    routable; it reads the local address and closes it, sending nothing (a UDP connect() sends no
    packet).
    - `--log-level=3`: Chromium logs only fatal errors to stderr (a quiet start), unless the user
      set `--log-level` or `--enable-logging`.
    A switch the user already gave is left as they gave it."""
    flags = current.strip()
    if as_root and "--no-sandbox" not in flags.split():
        flags += " --no-sandbox"
    for switch, value in PRIVACY_SWITCHES.items():
        if not re.search(rf"(^|\s){re.escape(switch)}(=|\s|$)", flags):
            flags += f" {switch}={value}" if value else f" {switch}"
    if not re.search(r"(^|\s)--(log-level|enable-logging)(=|\s|$)", flags):
        flags += " " + QUIET_SWITCH
    user_features = [f for m in _DISABLE_FEATURES.finditer(flags) for f in m.group(3).split(",") if f]
    flags = _DISABLE_FEATURES.sub("", flags)
    features = ",".join(dict.fromkeys(user_features + list(PRIVACY_DISABLED_FEATURES)))
    return f"{flags.strip()} --disable-features={features}".strip()


def prepare_environment() -> None:
    """Compose QTWEBENGINE_CHROMIUM_FLAGS (`chromium_flags`) before Qt starts: the entry point's
    business, for this process (and what it starts) only. Tests and benchmarks that build windows
    call it too."""
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    os.environ["QTWEBENGINE_CHROMIUM_FLAGS"] = chromium_flags(os.environ.get("QTWEBENGINE_CHROMIUM_FLAGS", ""), as_root)


SWITCH_INTERVAL_S = 0.0001


def tune_process() -> None:
    """Process-wide settings for a responsive window: the entry point's business (main()), never a
    widget's (tests and scripts that build a window themselves keep their process as it was).

    - `sys.setswitchinterval`: each call from Qt into Python (a paint asking the tree model for
      data) must take the GIL; while a worker runs Python it gives the GIL up only every switch
      interval (5 ms by default), so a repaint with dozens of such calls stalls for dozens of
      intervals. 0.1 ms keeps them short (a worker pays only while the GUI thread waits for it).
    - `freeze_survivors`: what a job builds under `quiet_gc` (a 100,000-tensor index, its tree) is
      frozen when the job ends, so later collections skip it (gui/jobs/quiet_gc.py)."""
    from .jobs.quiet_gc import freeze_survivors

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    freeze_survivors(True)


EXIT_NO_DISPLAY = 2  # a user error, as the CLI's
# Qt platforms that draw without a window system (QT_QPA_PLATFORM); xcb and wayland need one.
HEADLESS_PLATFORMS = ("offscreen", "minimal", "minimalegl", "vnc", "linuxfb", "eglfs", "vkkhrdisplay")


def no_display_line(env=os.environ, platform: str = sys.platform) -> str | None:
    """The one line to print instead of starting Qt when there is no display, else None.

    Without one, Qt aborts (exit 134) with "no Qt platform plugin could be initialized". Only on
    X11/Wayland systems (not macOS/Windows), and only when neither DISPLAY nor WAYLAND_DISPLAY is
    set and QT_QPA_PLATFORM names no platform that draws without a window system."""
    if platform in ("darwin", "win32", "cygwin") or env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"):
        return None
    chosen = [p.split(":")[0].strip() for p in env.get("QT_QPA_PLATFORM", "").split(";")]
    if any(p in HEADLESS_PLATFORMS for p in chosen):
        return None
    return ("onnxport: no display (DISPLAY and WAYLAND_DISPLAY are unset), so the app cannot open; "
            "run it in a desktop session, or use the CLI ('make run' falls back to it: onnxport inspect/export)")


EXIT_SIGTERM = 143  # 128 + SIGTERM, as a shell reports a process SIGTERM ended
TERMINATE_WAIT_MS = 10_000  # how long a running job gets to reach its next cancel check


def handle_sigterm(app, window):
    """SIGTERM ends the app without leaving temp files: the running job is cancelled (the core
    removes its temps at its next check; a job past its commit point finishes its write), the
    temps still registered (core/util/atomic.py) are removed, one line goes to stderr and the app
    exits with 143. The core installs no handler; this entry point does.

    Why a wakeup fd: Python runs a signal handler only when the main thread runs Python code, and
    that thread sits in Qt's event loop; the byte the C handler writes to the socket wakes a
    QSocketNotifier, whose (Python) slot lets the handler run. Returns what must stay alive."""
    import signal
    import socket

    from PySide6.QtCore import QSocketNotifier, QThreadPool

    from onnxport.core.util.atomic import remove_live_temps

    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno())
    notifier = QSocketNotifier(reader.fileno(), QSocketNotifier.Type.Read, app)

    def drain(*_args) -> None:
        try:
            reader.recv(256)
        except OSError:
            pass

    def on_sigterm(signum, frame) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough: let the cleanup finish
        if window.job is not None:
            window.job.cancel()
        finished = QThreadPool.globalInstance().waitForDone(TERMINATE_WAIT_MS)
        remove_live_temps()
        print("onnxport: terminated by SIGTERM; unfinished files were removed", file=sys.stderr, flush=True)
        if not finished:  # a job stuck in native code: do not wait for it at interpreter exit
            os._exit(EXIT_SIGTERM)
        window.close()
        app.exit(EXIT_SIGTERM)

    notifier.activated.connect(drain)
    signal.signal(signal.SIGTERM, on_sigterm)
    return reader, writer, notifier


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    missing = no_display_line()
    if missing:  # before Qt, which would abort
        print(missing, file=sys.stderr)
        return EXIT_NO_DISPLAY
    prepare_environment()
    tune_process()
    from .preview.qt_noise import quiet_qt_messages

    quiet_qt_messages()  # before Qt prints anything
    from PySide6.QtCore import QCoreApplication, Qt
    from PySide6.QtWidgets import QApplication

    QCoreApplication.setAttribute(Qt.AA_ShareOpenGLContexts)  # WebEngine wants it before the app
    try:
        import PySide6.QtWebEngineWidgets  # noqa: F401 - must load before the QApplication exists
    except ImportError:
        pass  # the preview panel will say it is unavailable
    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setOrganizationName("onnxport")
    app.setApplicationName("onnxport")
    from .dialogs.error_hook import install_error_hook

    install_error_hook(app)  # an exception outside a job: a dialog and the log, never a traceback
    from .main_window import MainWindow

    window = MainWindow()
    window.show()
    keep = handle_sigterm(app, window)  # noqa: F841 - the notifier and its sockets live while the app runs
    if argv:
        window.open_paths(argv)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
