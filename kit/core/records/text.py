"""Text from the world (prompt ids, prompts, messages that name them) as a terminal or a file shows it.

A fixture is data from anywhere: a prompt id may hold an escape sequence that recolours or rewrites the
terminal it is printed to, a bell, a right-to-left override that shows a name backwards, or a line break
that forges a line of the log. Wherever such text is shown, these characters are written as Python
writes them in a string literal (``\\x1b``, ``\\u202e``), so the reader sees what is there. A lone
surrogate cannot be written as UTF-8 at all: it is named where it is read, not carried on. Stdlib only.
"""

from __future__ import annotations

import unicodedata

# Control, format (bidi overrides, zero-width marks), surrogate, line and paragraph separator characters.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def printable(text: str) -> str:
    """``text`` with every character that acts on the display instead of showing written as its escape."""
    return "".join(_escape(ch) if unicodedata.category(ch) in _HIDDEN else ch for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def lone_surrogate(text: str) -> str | None:
    """The first lone surrogate of ``text`` as its escape, or None: what UTF-8 cannot encode."""
    return next((_escape(ch) for ch in text if 0xD800 <= ord(ch) <= 0xDFFF), None)
