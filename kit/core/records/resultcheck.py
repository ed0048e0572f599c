"""The shape of what a run directory holds (its manifest and each case's result) when it is read back.

A run directory outlives the command that wrote it: a full disk cuts a file short, a person edits one, a kit of
another version wrote it with other keys. Read as if whole, such a record fails deep inside a report with a
traceback that names neither the file nor the key. Checked first, each problem is one line naming both (as
kit.core.records.recordcheck names a calibration record's). The types expected are the record classes' own annotations
(kit.core.records.records), so the check follows the records as they change without a second list to keep in step.

Stdlib only: kit.core.records.results reads runs with it, and that module runs in kernels too.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from pathlib import Path
from typing import Any, Callable, TypeVar

from kit import __version__
from kit.core.records import rundir
from kit.core.errors import BadInput
from kit.core.records.jsonio import read_json_input
from kit.core.records.paths import display
from kit.core.records.recordcheck import Wrong, listing, mapping, text
from kit.core.records.records import CaseResult, DecodeScore, PromptScore, RepeatSpread, Status

# Metrics of one prompt may be NaN (a backend's logprob was not finite), which JSON writes as null
# (kit.core.records.jsonio.json_safe); every other number of a result (bounds, times) is a number when written.
NULLABLE_METRICS = (PromptScore, DecodeScore, RepeatSpread)
_WORDS = {str: "a string", bool: "true or false", int: "a whole number", float: "a number", type(None): "null"}


def check_case_result(doc: Any, case: str) -> None:
    """Raises Wrong at the first value of ``doc`` that a result of ``case`` cannot hold."""
    check_fields(CaseResult, doc, "")
    if doc["status"] not in tuple(Status):
        raise Wrong("status", f"expected one of {', '.join(Status)}", doc["status"])
    if doc["case"] != case:
        raise Wrong("case", f"expected {case!r}, the case its file is named after", doc["case"])


def check_manifest(doc: Any) -> None:
    """What a report reads of a gate run's manifest: its name, its cases and the release it ran against."""
    mapping(doc, "")
    for key in ("name", "cases"):
        if key not in doc:
            raise Wrong(key, "missing")
    text(doc["name"], "name")
    for i, name in enumerate(listing(doc["cases"], "cases")):
        text(name, f"cases[{i}]")
        problem = rundir.name_problem(name)
        if problem:  # the name becomes cases/<name>.json: it must not lead out of the run directory
            raise Wrong(f"cases[{i}]", f"expected a case name, one file name inside cases/ ({problem})", name)
    release = doc.get("release")
    if release is not None:
        mapping(release, "release")
        if release.get("name") is not None:
            text(release["name"], "release.name")
    if doc.get("duration_s") is not None:
        _conform(doc["duration_s"], float, "duration_s", nullable=False)


def read_checked(path: Path, check: Callable[[Any], None], version: str | None = None,
                 version_key: str | None = None) -> Any:
    """``path``'s JSON once ``check`` has held it whole, or one line naming the file and the first value it lacks;
    with the kit version that wrote it when another did (``version``, or the document's own ``version_key``)."""
    return checked(read_json_input(path, display(path)), display(path), check, version, version_key)


def checked(doc: Any, where: str, check: Callable[[Any], None], version: str | None = None,
            version_key: str | None = None) -> Any:
    """``doc`` (read from ``where``) once ``check`` has held it whole, or one line naming ``where`` and the first
    value it lacks, with the kit version that wrote it as ``read_checked`` says it."""
    try:
        check(doc)
    except Wrong as wrong:
        if version_key is not None:
            version = doc.get(version_key) if isinstance(doc, dict) else None
        raise BadInput(f"{where}: {wrong.text}{written_by(version)}") from None
    return doc


T = TypeVar("T")


def read_shaped(path: Path, what: str, shape: Callable[[Any], T]) -> T:
    """What ``shape`` makes of ``path``'s JSON, or one line naming the file, ``what`` it should be and the key
    that is not as ``shape`` expects (``FILE: malformed bad mark: reason: missing``)."""
    doc = read_json_input(path, display(path))
    try:
        return shape(doc)
    except Wrong as wrong:
        raise BadInput(f"{display(path)}: malformed {what}: {wrong.text}") from None


def written_by(version: object) -> str:
    """Where another kit version wrote a record, the likely reason it lacks what this one reads: for a message."""
    if not isinstance(version, str) or version == __version__:
        return ""
    return f" (written by kit {version}; this is kit {__version__})"


def check_fields(cls: type, value: Any, key: str) -> None:
    """Every field of the dataclass ``cls`` in ``value``: present unless it has a default, of its annotated
    type where present. Keys the class does not know are left alone: a newer kit may have written them."""
    doc = mapping(value, key)
    hints = typing.get_type_hints(cls)
    nullable = cls in NULLABLE_METRICS
    for f in dataclasses.fields(cls):
        where = f"{key}.{f.name}" if key else f.name
        if f.name in doc:
            _conform(doc[f.name], hints[f.name], where, nullable)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise Wrong(where, "missing")


def _conform(value: Any, hint: Any, key: str, nullable: bool) -> None:
    """Raises Wrong unless ``value`` (parsed JSON) is of type ``hint``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return
    if origin in (typing.Union, types.UnionType):
        _conform_union(value, args, key, nullable)
    elif origin in (list, tuple):
        for i, item in enumerate(listing(value, key)):
            _conform(item, args[0] if args else Any, f"{key}[{i}]", nullable)
    elif origin is dict:
        for k, item in mapping(value, key).items():
            _conform(item, args[1] if len(args) == 2 else Any, f"{key}.{k}", nullable)
    elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
        check_fields(hint, value, key)
    elif not _is_a(value, hint, nullable):
        raise Wrong(key, f"expected {_WORDS.get(hint, str(hint))}", value)


def _conform_union(value: Any, args: tuple, key: str, nullable: bool) -> None:
    for arg in args:
        try:
            _conform(value, arg, key, nullable)
            return
        except Wrong:
            continue
    raise Wrong(key, "expected " + " or ".join(_WORDS.get(a, str(a)) for a in args), value)


def _is_a(value: Any, hint: Any, nullable: bool) -> bool:
    if hint is float:  # JSON writes 1.0 as 1, so a whole number is a number too (a bool is not)
        return (value is None and nullable) or (isinstance(value, (int, float)) and not isinstance(value, bool))
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is type(None):
        return value is None
    if isinstance(hint, type) and issubclass(hint, enum.Enum):  # a kind: one a newer kit wrote is read as words
        return isinstance(value, str)
    return isinstance(value, hint) if isinstance(hint, type) else True
