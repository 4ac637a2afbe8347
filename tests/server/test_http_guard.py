"""The log filter that keeps a flood of one error (asyncio's accept errors, uvicorn's bad requests) to a
line per interval, and the connection limit under a low open-files limit."""

from __future__ import annotations

import logging
import re
import resource
import time

import pytest

from despina.server.http_guard import QuietFloods, connection_limit


def test_a_repeated_line_passes_once_per_interval_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("despina.test.floods")
    quiet = QuietFloods(interval_s=0.2)
    logger.addFilter(quiet)
    try:
        with caplog.at_level(logging.ERROR, logger="despina.test.floods"):
            for _ in range(1000):
                logger.error("socket.accept() out of system resource")
            logger.error("another message")
            time.sleep(0.25)
            logger.error("socket.accept() out of system resource")
        lines = [r.getMessage() for r in caplog.records]
        assert lines[0] == "socket.accept() out of system resource" and lines[1] == "another message"
        assert len(lines) == 3 and re.search(r"\(999 more like this in the last 0\.\d s not logged\)$", lines[2]), lines
    finally:
        logger.removeFilter(quiet)


def test_the_connection_limit_stays_below_the_open_files_limit(caplog: pytest.LogCaptureFixture) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert connection_limit(100) == 100
    if hard != resource.RLIM_INFINITY:
        assert connection_limit(hard) == max(16, hard - 256) and "ulimit -n" in caplog.text
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard  # raised to the hard limit
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
