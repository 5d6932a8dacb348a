"""structlog configuration: JSON in-cluster or on request, readable console otherwise."""

from __future__ import annotations

import logging
import os
import sys

import structlog

LEVELS = ("debug", "info", "warning", "error")


def default_format() -> str:
    return "json" if os.environ.get("KUBERNETES_SERVICE_HOST") or not sys.stderr.isatty() else "console"


def configure(level: str = "info", fmt: str | None = None) -> None:
    fmt = fmt or default_format()
    numeric = getattr(logging, level.upper())
    renderer = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
