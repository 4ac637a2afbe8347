"""Fixtures of the interpreter tests."""

from __future__ import annotations

import logging

import pytest

from .scheduling import LOGGER


@pytest.fixture
def log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """The scheduler's log records, DEBUG and up (see `scheduling.fallbacks`)."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    return caplog
