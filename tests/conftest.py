"""Test set-up: Qt runs offscreen (WebEngine as root needs --no-sandbox), before any Qt import."""

import os
import signal

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QTWEBENGINE_CHROMIUM_FLAGS", "--no-sandbox")
os.environ.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")

# Tests assert no wall-clock time (a loaded machine would fail it): no hypothesis test has a
# per-example deadline or a "too slow" health check, and its examples are derandomized, unless
# its own settings say otherwise (fuzz_seeds.fuzz_settings: `make fuzz` has a deadline).
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("onnxport", deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("onnxport")

# The signal tests need SIGINT as a terminal delivers it; a shell's background job (`make test &`)
# starts with it ignored, which the CLI rightly keeps (core/cli/interrupts.py), and so would the
# tests' children. The suite runs as if started in the foreground.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
