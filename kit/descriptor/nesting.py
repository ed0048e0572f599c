"""How deep a descriptor's values nest, refused past a limit as it is loaded.

tomllib parses an inline table or array by recursion, and so do pydantic and the kit's own walks over a value: a
descriptor holding ``x = {a={a={...}}}`` 3,000 deep ended ``check``, ``spec`` and ``kernels`` in a RecursionError
traceback (exit 70). A descriptor needs six levels at most (``cases.NAME.reference.options.engine_args.KEY``), so
anything past ``MAX_DEPTH`` is refused in one line at the line where it goes past: brackets counted in the text
before it is parsed (outside strings and comments), and tables nested by dotted keys or headers counted once it is.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 32


def deep_line(text: str) -> int | None:
    """The line at which inline tables and arrays (``{`` and ``[``) first nest deeper than ``MAX_DEPTH``, read
    lexically: outside strings (basic, literal, multi-line) and comments; None when they never do."""
    i, n, depth, line = 0, len(text), 0, 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c in "\"'":
            end = _string_end(text, i)
            line += text.count("\n", i, end)
            i = end
            continue
        elif c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return line
        elif c in "]}":
            depth = max(0, depth - 1)
        i += 1
    return None


def _string_end(text: str, i: int) -> int:
    """Where the string that opens at ``i`` ends (just past its closing quote, or the end of the text)."""
    quote = text[i]
    triple = text.startswith(quote * 3, i)
    j = i + (3 if triple else 1)
    while j < len(text):
        c = text[j]
        if c == "\\" and quote == '"':
            j += 2
            continue
        if not triple and c == "\n":  # a one-line string cannot go on; tomllib says so itself
            return j
        if triple and text.startswith(quote * 3, j):
            j += 3
            extra = 0  # a multi-line string may end with one or two quotes of its own before its delimiter
            while extra < 2 and j < len(text) and text[j] == quote:
                j, extra = j + 1, extra + 1
            return j
        if not triple and c == quote:
            return j + 1
        j += 1
    return j


def deep_key(doc: Any) -> tuple[str, ...] | None:
    """The path of the first value nested deeper than ``MAX_DEPTH`` tables and arrays (walked without recursion),
    or None."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(doc, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            return path
        if isinstance(value, dict):
            stack += [(v, (*path, str(k))) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, (*path, str(k))) for k, v in enumerate(value)]
    return None
