"""The `parity-kit` command (``entry``: the parser and the one command it runs), a module per command or group of
commands adding their parsers and holding their handlers, and what they share (``common``)."""

from kit.cli.entry import main

__all__ = ["main"]
