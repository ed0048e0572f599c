"""Lineage: for every baseline, what it supersedes, why, by which command, on which runtime, and the backtest
it passed.

A baseline (a calibration record, an exact or a semantic golden, a power record) is named by its content; its
lineage entry is too: one canonical JSON file named by its SHA-256 in the descriptor's lineage folder, written
once and never over another. Entries of one case, kind and runtime form a chain through ``supersedes`` (a power
record's runtime is the class of hardware of the calibration record it was measured against); the first of a
chain supersedes nothing. The head of a chain is the baseline that runtime uses now, so a new baseline reaches the
gate as two new files in a pull request (the baseline and its entry), and the descriptor's own lists stay as
their authors wrote them.

Nothing here is taken on its word either: an entry's name must be its bytes' digest, every key of its type, a
chain may neither loop nor name a parent that is not there, and two heads for one runtime are refused.
Stdlib only, like every record format of kit.core.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from kit.core.baselines.baselinekind import LINEAGE_KINDS, BaselineKind
from kit.core.errors import BadInput
from kit.core.records.jsonio import ContentAddressed, read_addressed, sha256_bytes
from kit.core.records.recordcheck import Wrong, formatted, listing, mapping, text

FORMAT = "parity-kit-lineage/1"
KINDS = tuple(k.name for k in LINEAGE_KINDS)  # each kind's one spelling, as an entry's file holds it
_BY_NAME = {k.name: k for k in LINEAGE_KINDS}
KEYS = ("format", "descriptor", "kind", "case", "baseline", "file", "runtime", "supersedes", "reason", "command",
        "created_at", "bounds", "backtest")
FIRST_REASON = "made before baselines kept a lineage"


@dataclass(frozen=True)
class LineageEntry(ContentAddressed):
    """One baseline's place in its chain. ``case`` is the case a calibration record belongs to, or the
    ``[goldens]`` entry a golden is listed under; ``runtime`` is where its numbers hold (a record's class of
    hardware, an exact golden's runtime key); ``bounds`` a record's per-bucket bounds, kept here so that how
    a case's bounds moved reads from the chain alone; ``backtest`` the summary of the backtest it passed (None
    for a baseline made before backtests)."""

    descriptor: str  # the name of the descriptor whose case it is: a lineage folder may serve several
    kind: BaselineKind  # one of LINEAGE_KINDS; its name only in the entry's file
    case: str
    baseline: str  # the SHA-256 of the baseline's file
    file: str  # the baseline's file name, as its folder holds it
    runtime: str
    supersedes: str | None
    reason: str
    command: tuple[str, ...]
    created_at: str
    bounds: Mapping[str, float] = field(default_factory=dict)
    backtest: Mapping[str, Any] | None = None
    path: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # A name in its place would compare unequal to every kind and the entry would belong to no chain.
        if self.kind not in LINEAGE_KINDS:
            raise TypeError(f"a lineage entry's kind is one of {', '.join(KINDS)} as a BaselineKind, not {self.kind!r}")

    def to_dict(self) -> dict:
        """The entry as its file holds it (format parity-kit-lineage/1): these keys are what its name hashes."""
        return {"format": FORMAT, "descriptor": self.descriptor, "kind": self.kind.name, "case": self.case,
                "baseline": self.baseline,
                "file": self.file, "runtime": self.runtime, "supersedes": self.supersedes, "reason": self.reason,
                "command": list(self.command), "created_at": self.created_at, "bounds": dict(self.bounds),
                "backtest": dict(self.backtest) if self.backtest is not None else None}

    @property
    def key(self) -> tuple[str, BaselineKind, str, str]:
        """The chain it belongs to: its descriptor, kind, case and runtime (``normal_runtime``)."""
        return (self.descriptor, self.kind, self.case, normal_runtime(self.runtime))


def normal_runtime(runtime: str) -> str:
    """A runtime as it keys a chain: its words joined by one space. ``"cpu (x86-64-v3) "`` and ``"cpu
    (x86-64-v3)"`` are one class of hardware, so they are one chain, whose two heads are then refused, never two
    chains side by side."""
    return " ".join(runtime.split())


def entry_from_dict(doc: Any, shown: str) -> LineageEntry:
    """An entry from its JSON, every key checked; one line naming the file and the key otherwise."""
    try:
        d = formatted(doc, KEYS, FORMAT)
        kind = _lineage_kind(d["kind"])
        baseline = text(d["baseline"], "baseline")
        if len(baseline) != 64 or any(c not in "0123456789abcdef" for c in baseline):
            raise Wrong("baseline", "expected a SHA-256 (64 hex digits)", baseline)
        parent = d["supersedes"]
        if parent is not None and (not isinstance(parent, str) or len(parent) != 64):
            raise Wrong("supersedes", "expected null or a lineage entry's SHA-256", parent)
        if not isinstance(d["reason"], str) or not d["reason"].strip():
            raise Wrong("reason", "expected the reason the baseline was made", d["reason"])
        command = [text(c, f"command.{i}") for i, c in enumerate(listing(d["command"], "command"))]
        bounds = mapping(d["bounds"], "bounds")
        for bucket, value in bounds.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise Wrong(f"bounds.{bucket}", "expected a positive number", value)
        backtest = d["backtest"]
        if backtest is not None:
            mapping(backtest, "backtest")
        return LineageEntry(descriptor=text(d["descriptor"], "descriptor"), kind=kind,
                            case=text(d["case"], "case"), baseline=baseline,
                            file=text(d["file"], "file"), runtime=text(d["runtime"], "runtime"), supersedes=parent,
                            reason=d["reason"], command=tuple(command), created_at=text(d["created_at"], "created_at"),
                            bounds={str(k): float(v) for k, v in bounds.items()}, backtest=backtest)
    except Wrong as exc:
        raise BadInput(f"{shown}: malformed lineage entry: {exc.text}") from None


def _lineage_kind(name: Any) -> BaselineKind:
    """The kind an entry's file names, in its one spelling (no entry was ever written in another)."""
    kind = _BY_NAME.get(name) if isinstance(name, str) else None
    if kind is None:
        raise Wrong("kind", f"expected one of {', '.join(KINDS)}", name)
    return kind


def load_entry(path: str | Path) -> LineageEntry:
    """An entry from its file: canonical bytes whose SHA-256 is the file's name, then every key checked."""
    path = Path(path)
    shown = str(path)
    doc = read_addressed(path, "lineage entry", "entry",
                         "an entry is written once by `parity-kit baseline make` and never changed")
    entry = entry_from_dict(doc, shown)
    return LineageEntry(**{**entry.__dict__, "path": path})


def load_folder(folder: str | Path) -> list[LineageEntry]:
    """Every entry of a lineage folder (none when the folder does not exist yet), chains checked."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    entries = [load_entry(p) for p in sorted(folder.glob("*.json"))]
    check_chains(entries, str(folder))
    return entries


def write_entry(folder: str | Path, entry: LineageEntry) -> Path:
    """Write ``entry`` as ``<sha256>.json``; an identical file already there is the same entry, kept as it is."""
    from kit.core.records.jsonio import atomic_write_bytes

    folder = Path(folder)
    data = entry.canonical()
    target = folder / f"{sha256_bytes(data)}.json"
    if target.exists():
        if target.read_bytes() != data:  # a name is its content's digest: only tampering gets here
            raise BadInput(f"{target}: exists with other bytes than its name promises; not overwritten")
        return target
    folder.mkdir(parents=True, exist_ok=True)
    return atomic_write_bytes(target, data)


def check_chains(entries: Sequence[LineageEntry], where: str) -> None:
    """Refuse, in one line, a parent that is missing or of another chain, a loop, and two heads of one chain."""
    by_sha = {e.sha256: e for e in entries}
    for e in entries:
        if e.supersedes is None:
            continue
        parent = by_sha.get(e.supersedes)
        shown = str(e.path or where)
        if parent is None:
            raise BadInput(f"{shown}: supersedes {e.supersedes}, which is not in {where}: the lineage names a "
                           "missing parent")
        if parent.key != e.key:
            raise BadInput(f"{shown}: supersedes an entry of another chain ({parent.kind} of {parent.descriptor}'s "
                           f"{parent.case} on {parent.runtime}); an entry supersedes only one of its own descriptor, "
                           "case, kind and runtime")
    for e in entries:
        seen: list[str] = []
        node: LineageEntry | None = e
        while node is not None and node.supersedes is not None:
            if node.sha256 in seen:
                raise BadInput(f"{e.path or where}: its lineage forms a cycle ({' -> '.join(s[:12] for s in seen)})")
            seen.append(node.sha256)
            node = by_sha.get(node.supersedes)
    for key, group in _group(entries).items():
        heads = _heads(group)
        if len(heads) > 1:
            shown = ", ".join(str(h.path or h.sha256) for h in heads)
            raise BadInput(f"{where}: the {key[1]} of {key[0]}'s {key[2]} on {key[3]} has {len(heads)} current "
                           f"baselines ({shown}); each new one supersedes the one before")


def _group(entries: Iterable[LineageEntry]) -> dict[tuple[str, BaselineKind, str, str], list[LineageEntry]]:
    groups: dict[tuple[str, BaselineKind, str, str], list[LineageEntry]] = {}
    for e in entries:
        groups.setdefault(e.key, []).append(e)
    return groups


def _heads(group: Sequence[LineageEntry]) -> list[LineageEntry]:
    parents = {e.supersedes for e in group}
    return [e for e in group if e.sha256 not in parents]


def heads(entries: Sequence[LineageEntry], kind: BaselineKind, case: str) -> dict[str, LineageEntry]:
    """Per runtime, the baseline of ``kind`` that ``case`` uses now (the head of its chain); ``entries`` are one
    descriptor's (``of_descriptor``)."""
    return {key[3]: _heads(group)[0] for key, group in _group(entries).items()
            if key[1] is kind and key[2] == case}


def of_descriptor(entries: Sequence[LineageEntry], name: str) -> list[LineageEntry]:
    """The entries of one descriptor's cases: a case name means nothing outside its descriptor."""
    return [e for e in entries if e.descriptor == name]


def chain(entries: Sequence[LineageEntry], head: LineageEntry) -> list[LineageEntry]:
    """The chain that ends at ``head``, oldest first."""
    by_sha = {e.sha256: e for e in entries}
    out = [head]
    while out[-1].supersedes is not None:
        out.append(by_sha[out[-1].supersedes])
    return out[::-1]


def entry_of(entries: Sequence[LineageEntry], baseline_sha256: str) -> LineageEntry | None:
    """The entry of a baseline, by the baseline's digest (None: made before lineage, or not kept)."""
    return next((e for e in entries if e.baseline == baseline_sha256), None)


@dataclass(frozen=True)
class BoundMove:
    """One bucket's bound from one baseline to the next: the one way a move is said, wherever it is shown."""

    bucket: str
    before: float
    after: float

    @property
    def ratio(self) -> float:
        """The new bound over the old (infinite from a bound of 0): how far a bucket's bound moved, whichever
        its scale."""
        return self.after / self.before if self.before else math.inf

    @property
    def text(self) -> str:
        """The move as `baseline log` shows it: the bucket, both bounds and their ratio."""
        return f"bucket {self.bucket} {self.before:g} -> {self.after:g} ({self.ratio:.2f}x)"

    @property
    def short(self) -> str:
        """The move in a few words (bucket and ratio), for a line that lists several."""
        return f"bucket {self.bucket} {self.ratio:.2f}x"


def bound_changes(before: Mapping[str, float], after: Mapping[str, float]) -> list[BoundMove]:
    """Each bucket both bound whose bound changed, in bucket order."""
    shared = sorted(set(before) & set(after), key=_bucket_order)
    return [BoundMove(b, float(before[b]), float(after[b])) for b in shared if after[b] != before[b]]


@dataclass(frozen=True)
class BoundMoves:
    """How a chain's bounds moved from each baseline to the next: wider, tighter, or both (per bucket)."""

    moves: int
    wider: int
    tighter: int
    # The latest move, per bucket that moved (its ratio: 1.33 = a third looser).
    latest: tuple[BoundMove, ...] = ()

    @property
    def text(self) -> str:
        """A case's bound history in one line: how often its bounds moved, wider or tighter, and the latest moves."""
        if not self.moves:
            return "never moved"
        parts = [f"{n} {word}" for n, word in ((self.wider, "wider"), (self.tighter, "tighter")) if n]
        latest = ", ".join(m.short for m in self.latest)
        return f"moved {self.moves} time{'s' if self.moves != 1 else ''} ({', '.join(parts)}; latest: {latest})"


def bound_moves(entries: Sequence[LineageEntry]) -> BoundMoves:
    """Count the steps of a chain (oldest first) whose bounds changed, and in which direction: a step counts as
    wider when any shared bucket's bound grew, tighter when any shrank (a step can be both); and the latest move
    per bucket, as a ratio."""
    moves = wider = tighter = 0
    latest: tuple[BoundMove, ...] = ()
    for before, after in zip(entries, entries[1:]):
        changed = bound_changes(before.bounds, after.bounds)
        up = any(m.after > m.before for m in changed)
        down = any(m.after < m.before for m in changed)
        moves += bool(changed)
        wider += up
        tighter += down
        if changed:
            latest = tuple(changed)
    return BoundMoves(moves, wider, tighter, latest)


def _bucket_order(bucket: str) -> tuple[int, str]:
    return (int(bucket), bucket) if bucket.isdigit() else (0, bucket)
