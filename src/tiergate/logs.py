"""Structured JSON logs on stderr: one object per line, no prompt text, no secrets.

Callers pass facts as `extra={...}`; the formatter emits them as fields.
"""

from __future__ import annotations

import logging
import sys
import time

import orjson

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JSONFormatter(logging.Formatter):
    _second = -1
    _stamp = ""

    def _timestamp(self, created: float, msecs: float) -> str:
        second = int(created)
        if second != self._second:  # strftime once a second, not once a line
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        return f"{self._stamp}.{int(msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": self._timestamp(record.created, record.msecs),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for k, v in record.__dict__.items():
            if k not in _STANDARD and not k.startswith("_"):
                out[k] = v
        if record.exc_info and record.exc_info[0] is not None:
            out["exc_type"] = record.exc_info[0].__name__
        return orjson.dumps(out, default=str).decode()


def setup_logging(level: str = "INFO") -> None:
    # The JSON lines carry no caller file/line, thread or process: skip computing
    # them for every record (the logging HOWTO's "Optimization" knobs); the access
    # line is written on every request.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("uvicorn.access",):
        logging.getLogger(noisy).setLevel(logging.WARNING)
