"""`baseline make --sign KEY`: each lineage entry it writes signed as a gate run is (kit.run.signing), and `baseline
verify` saying who signed which.

A lineage entry is named by its digest, so an edit shows; who wrote it does not. Signed, an entry says that the
holder of a key the repository trusts made it: the envelope (an in-toto Statement whose subjects are the entry and
the baseline it names, by SHA-256) is kept as ``signatures/<entry's SHA-256>.dsse.json`` in the lineage folder, beside
the entries and outside their names, so an entry reads the same signed or not. An envelope that does not verify, or
that signs another entry than the one it is named after, is refused by `baseline verify`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Sequence

from kit.core.baselines.lineage import LineageEntry
from kit.core.records.paths import display
from kit.gate.attest import git_commit
from kit.run import signing

SIGNATURES = "signatures"  # the lineage folder's subfolder of envelopes (its entries are its *.json files only)
SUFFIX = ".dsse.json"
PREDICATE_TYPE = "urn:parity-kit:lineage-entry:v1"


def sign_entry(lineage: Path, entry: LineageEntry, signer) -> Path:
    """Sign the entry ``entry`` kept in the folder ``lineage``: its envelope, written beside it."""
    stated = signing.intoto_statement([(f"{entry.sha256}.json", entry.sha256), (entry.file, entry.baseline)],
                               PREDICATE_TYPE,
                               {"descriptor": entry.descriptor, "kind": entry.kind.name, "case": entry.case,
                                "runtime": entry.runtime, "reason": entry.reason,
                                "git_commit": git_commit(lineage)})
    return signing.write_envelope(lineage / SIGNATURES / f"{entry.sha256}{SUFFIX}", signing.sign(stated, signer))


def signature_check(lineage: Path, entries: Sequence[LineageEntry], keys_file: Path) -> tuple[str, list[str]]:
    """Who signed the entries (``entries``, kept in ``lineage``) in words ("2 signed: by ci (key ...) 2"; "none
    signed"), and one line per envelope that does not verify or signs another entry than its name's."""
    trusted = signing.read_trusted(keys_file)
    said: Counter[str] = Counter()
    problems = []
    for entry in entries:
        path = lineage / SIGNATURES / f"{entry.sha256}{SUFFIX}"
        if not path.is_file():
            continue
        opened = signing.open_envelope(path, trusted)
        if opened.problem is not None:
            problems.append(opened.problem)
            continue
        stated = opened.statement or {}
        if stated.get("predicateType") != PREDICATE_TYPE or entry.sha256 not in signing.subject_digests(
                stated).values():
            problems.append(f"{display(path)}: signs {', '.join(signing.subject_digests(stated).values()) or 'nothing'}"
                            f", not the lineage entry {entry.sha256} it is named after")
            continue
        said[opened.said.removeprefix("signed ")] += 1
    if not said:
        return "none signed", problems
    return f"{sum(said.values())} signed: " + ", ".join(f"{who}: {n}" for who, n in said.items()), problems
