"""The core's events in Python's :mod:`logging`.

fencelock's Rust core reports what happens to locks and nodes (a lock acquired,
a renewal that failed, a lock lost, a node unreachable…). From the moment
``fencelock`` is imported, these events reach the logger ``fencelock``, each on
the child logger of the core module that emitted it (``fencelock.lock_state``,
``fencelock.acquire``, ``fencelock.connection``…), so handlers and filters can
pick them apart. A record's message is one line, the event followed by its
fields (``lock lost resource=jobs reason=…``); the fields are also in
``record.fencelock_fields`` (a dict of strings), the core module in
``record.fencelock_target`` and the bare event in ``record.fencelock_message``.

Levels (the core's, as in ``tests/vectors/protocol.json``, → :mod:`logging`'s):
error → ``ERROR``, warn → ``WARNING`` (a lost lock, a failed renewal, an
unreachable node), info → ``INFO``, debug → ``DEBUG`` (each acquisition,
release, extension and connection change) and trace → :data:`TRACE` (5, each
renewal; named ``"TRACE"`` unless the application already named level 5).

Only the events the ``fencelock`` loggers would handle cross over from Rust:
the level is read from their effective level (``logger.isEnabledFor``) when
``fencelock`` is imported and again each time a ``Client`` or ``AsyncClient``
is made. Configure logging before creating clients, or call
:func:`sync_log_level` after changing it.

Records are delivered in order on a thread of fencelock's own, never on the
thread of a lock call, so a slow handler never slows a lock operation; records
it cannot keep up with are dropped and the next one says how many. They name
nodes without their credentials and never carry a lock's random token or a
password.
"""

from __future__ import annotations

import atexit
import logging
import types
import warnings
from typing import Dict, List, Mapping, Optional, Tuple

from . import _native

LOGGER_NAME = "fencelock"
"""The logger every fencelock record goes to (through a child per core module)."""

TRACE = 5
"""The :mod:`logging` level of the core's trace events (each renewal), below ``DEBUG``."""

if logging.getLevelName(TRACE) == f"Level {TRACE}":
    logging.addLevelName(TRACE, "TRACE")

LOG_LEVELS: Mapping[str, int] = types.MappingProxyType(
    {
        "error": logging.ERROR,
        "warn": logging.WARNING,
        "info": logging.INFO,
        "debug": logging.DEBUG,
        "trace": TRACE,
    }
)
"""Each core level name → the :mod:`logging` level its records carry."""

# The core's level numbers (1 error … 5 trace), most verbose first.
_NUMBERS: Mapping[str, int] = types.MappingProxyType(
    {"trace": 5, "debug": 4, "info": 3, "warn": 2, "error": 1}
)
_BY_NUMBER: Mapping[int, int] = types.MappingProxyType(
    {number: LOG_LEVELS[name] for name, number in _NUMBERS.items()}
)
_NAMES: Mapping[int, str] = types.MappingProxyType(
    {number: name for name, number in _NUMBERS.items()}
)


# Each core module's logger, by target (the core has a few dozen modules).
_LOGGERS: Dict[str, logging.Logger] = {}


def _logger_for(target: str) -> logging.Logger:
    """The logger of a core module: ``fencelock::lock_state`` → ``fencelock.lock_state``."""
    logger = _LOGGERS.get(target)
    if logger is None:
        name = target.replace("::", ".")
        if name != LOGGER_NAME and not name.startswith(LOGGER_NAME + "."):
            name = f"{LOGGER_NAME}.{name}"
        logger = _LOGGERS[target] = logging.getLogger(name)
    return logger


def _deliver(
    level: int, target: str, message: str, fields: Tuple[Tuple[str, str], ...], line: str
) -> None:
    """The sink the core calls (on its log delivery thread) with each record."""
    py_level = _BY_NUMBER.get(level, logging.WARNING)
    logger = _logger_for(target)
    if logger.isEnabledFor(py_level):
        logger.log(
            py_level,
            "%s",
            line,
            extra={
                "fencelock_fields": dict(fields),
                "fencelock_target": target,
                "fencelock_message": message,
            },
        )


def _fencelock_loggers() -> List[logging.Logger]:
    """The ``fencelock`` logger and every child logger made so far."""
    loggers = [logging.getLogger(LOGGER_NAME)]
    prefix = LOGGER_NAME + "."
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if name.startswith(prefix) and isinstance(logger, logging.Logger):
            loggers.append(logger)
    return loggers


def _threshold() -> Optional[int]:
    """The most verbose core level any fencelock logger handles (its number), or None."""
    loggers = _fencelock_loggers()
    for number in sorted(_BY_NUMBER, reverse=True):
        if any(logger.isEnabledFor(_BY_NUMBER[number]) for logger in loggers):
            return number
    return None


def sync_log_level() -> Optional[str]:
    """Forwards the core's events at the level the ``fencelock`` loggers use now.

    The level is read from the effective level of the ``fencelock`` logger and of
    its child loggers (``logging.disable`` included): fencelock calls this when it
    is imported and whenever a ``Client`` or ``AsyncClient`` is made, so call it
    yourself only after changing logging's configuration while clients exist.
    Returns the core level now forwarded at (``"error"``, ``"warn"``, ``"info"``,
    ``"debug"`` or ``"trace"``, see :data:`LOG_LEVELS`), or None when none is.
    """
    number = _threshold()
    if _native._log_level() != number:
        _native._set_log_level(number)
    return None if number is None else _NAMES[number]


def _install() -> None:
    """Starts forwarding (at import); stops before the interpreter shuts down."""
    # Registered before ``settle`` (atexit runs the last registered first), so
    # records of the clean-up it waits for may still reach logging.
    atexit.register(_native._close_logs)
    try:
        _native._forward_logs(_deliver, _threshold())
    except Exception as error:  # another tracing subscriber owns this process's events
        warnings.warn(
            f"fencelock: the core's events cannot reach logging: {error}",
            RuntimeWarning,
            stacklevel=2,
        )
