"""What the commands say on the console: logging, through one handler on the ``kit`` logger, set up once.

Library modules log to ``logging.getLogger(__name__)`` and never print what a person reads on stderr; the CLI sets
the level from ``-q`` and ``-v`` (``setup``), and a command called from a notebook or a script sets the default one
on its first call (``ensure``), so it says the same lines there.

Three levels are in use. NOTICE is what a command says whatever ``-q``: its verdict, and each step of a long
command (control, refresh, bisect, calibrate, regen), as before logging came. INFO is the gate's progress, which
``-q`` leaves out: its header, each case's line, the heartbeat, a large model's hashing. DEBUG (``-v``) adds
detail to those (each case's start, buckets of N, every model hashing). Warnings and errors always show.

The handler writes through one rich console on stderr, which the gate's progress bar shares, so a line logged while
the bar is drawn lands above it instead of through it. Each message is written as it is, on one line: rich's own
RichHandler lays a record out in columns (time, level, path) and wraps a long one at the console's width, and a
line a CI log is grepped for ("gate failed: ...") must stay whole, so the handler is a plain one that prints through
the console. Rich markup is opt in (``extra=MARKUP``): most messages carry paths and text from the world, in which
``[...]`` is not markup.
"""

from __future__ import annotations

import logging

NOTICE = logging.INFO + 5
logging.addLevelName(NOTICE, "NOTICE")
QUIET, NORMAL, VERBOSE = NOTICE, logging.INFO, logging.DEBUG  # the levels -q, the default and -v set

ROOT = "kit"  # the logger every library module's logger is a child of


# ``extra`` for a message written in rich markup (its pieces from the world escaped): styled and highlighted as the
# console prints markup. Without it a message is plain text, as print writes it.
MARKUP = {"markup": True}

_handler: "LineHandler | None" = None


def setup(level: int = NORMAL) -> None:
    """The ``kit`` logger at ``level``, with its console handler (installed on the first call only)."""
    global _handler
    logger = logging.getLogger(ROOT)
    if _handler is None:
        _handler = _line_handler()
        logger.addHandler(_handler)
        # An application that configured the root logger would otherwise show every line twice.
        logger.propagate = False
    logger.setLevel(level)


def ensure() -> None:
    """The default level and the handler, unless set up already (by the CLI, or an earlier command)."""
    if _handler is None:
        setup(NORMAL)


def console():
    """The rich console the handler writes to (set up first if need be): the gate draws its progress bar there."""
    ensure()
    return _handler.console


def shows(level: int) -> bool:
    """Whether a message at ``level`` would be shown now."""
    return logging.getLogger(ROOT).isEnabledFor(level)


class LineHandler(logging.Handler):
    """Each record's message on a line of its own, through a rich console."""

    def __init__(self, console) -> None:
        super().__init__()
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        """Write one log record to the console, markup only where the record asks for it; a line that cannot
        be written never ends the run."""
        try:
            markup = getattr(record, "markup", False)
            self.console.print(self.format(record), markup=markup, highlight=markup, emoji=markup)
        except Exception:  # logging's rule: a line that cannot be written never ends the run
            self.handleError(record)


def _line_handler() -> LineHandler:
    from rich.console import Console

    # force_jupyter=False: in a notebook's kernel (qualify.ipynb runs a gate) the lines are the cell's stderr text.
    return LineHandler(Console(stderr=True, soft_wrap=True, force_jupyter=False))
