"""The suite decides nothing by the wall clock (issue 37): hypothesis' defaults here (tests/conftest.py)
have no per-example deadline and no 'too slow' health check, which a loaded machine would fail, and
their examples are derandomized."""

from hypothesis import HealthCheck, settings


def test_hypothesis_defaults_have_no_wall_clock_bound():
    assert settings.default.deadline is None and settings.default.derandomize
    assert HealthCheck.too_slow in settings.default.suppress_health_check
