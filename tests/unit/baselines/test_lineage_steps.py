"""A chain of calibration records cannot be loosened in steps, nor headed by a record of another class of
hardware or of another case: each record is held to its parent's margin and to the margin of the record its chain
last agreed on (its first, or the latest that accepted looser bounds), and `baseline verify` refuses what `baseline
status` and `check` refuse, by their own checks."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from kit.baselines.made import Made
from kit.baselines.make import _judge_moves, with_moves
from kit.core.baselines.baselinekind import CALIBRATION
from kit.core.baselines.lineage import LineageEntry, write_entry
from kit.core.baselines.lineageclaims import loosening, movements
from kit.core.host.runtime import accelerator
from kit.core.errors import BadInput
from kit.core.noise.calibration import load_record
from kit.core.records.paths import display
from kit.descriptor.load import load_descriptor
from support import parity_kit

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from unit.baselines.test_status import (ELSEWHERE_CPU, _remade, entry_for, lineage_descriptor,  # noqa: E402
                                        record_elsewhere)

pytestmark = pytest.mark.unit

ACCEPTED = ("parity-kit", "baseline", "make", "--accept-looser", "torch 2.14 rounds more")


def _steps(tmp_path, embedded, n: int = 3) -> list[Path]:
    """A record of this host's class and ``n`` records after it, each looser than the one before by less than that
    one's own margin (its bound less its largest clean error), together looser than the first beyond the first's."""
    records = [record_elsewhere(embedded, tmp_path / "calibrations", accelerator("cpu")["name"])]
    while len(records) <= n:
        parent = load_record(records[-1])
        raised = next(iter(parent.samples[0].errors))  # the prompt _remade raises, in its bucket
        largest = float(parent.buckets[str(parent.prompts[raised]["bucket"])]["largest"])
        records.append(_remade(records[0], tmp_path / "calibrations", largest * 1.3))
        assert loosening(movements(parent, load_record(records[-1]))) is None  # each step within its parent's margin
    assert loosening(movements(load_record(records[0]), load_record(records[-1]))) is not None
    return records


def _chain(tmp_path, records: list[Path], accepting: int | None = None) -> list[Path]:
    """One entry per record, each superseding the one before; the entry at ``accepting`` gave --accept-looser."""
    lineage, parent, written = tmp_path / "lineage", None, []
    for i, record in enumerate(records):
        entry = entry_for(record, lineage, supersedes=parent, **({"command": ACCEPTED} if i == accepting else {}))
        written.append(write_entry(lineage, entry))
        parent = entry.sha256
    return written


def _crossing(records: list[Path]) -> int:
    """The first record beyond the first's margin: the entry that crosses it."""
    first = load_record(records[0])
    return next(i for i, r in enumerate(records) if loosening(movements(first, load_record(r))) is not None)


def test_a_chain_loosened_in_steps_each_within_its_parents_margin_is_refused(tmp_path, embedded):
    records = _steps(tmp_path, embedded)
    entries = _chain(tmp_path, records)
    desc = lineage_descriptor(tmp_path, embedded, records[0])
    crossing = entries[_crossing(records)]
    proc = parity_kit("baseline", "verify", str(desc))
    assert proc.returncode == 3, proc.stdout
    # The entry that crossed is refused (and each after it, still beyond the first's margin with no reason given).
    (line,) = [x for x in proc.stdout.splitlines() if display(crossing) in x]
    assert line.startswith(f"refused: lineage entry {display(crossing)} loosens, in steps each within its parent's "
                           f"margin, bucket ")
    assert f"beyond {display(records[0])}'s margin of " in line
    assert line.endswith("and no entry on the way gave a reason (--accept-looser REASON)")
    with pytest.raises(BadInput) as refused:  # status, check and the gate take the head no more than verify does
        load_descriptor(desc).case_specs(["hf-bf16"])
    assert f"lineage entry {display(entries[-1])} loosens, in steps" in str(refused.value)
    assert parity_kit("baseline", "status", str(desc)).returncode == 3


def test_the_entry_that_crosses_the_first_records_margin_gives_the_reason_and_later_steps_start_from_it(
        tmp_path, embedded):
    records = _steps(tmp_path / "crossing", embedded)
    _chain(tmp_path / "crossing", records, accepting=_crossing(records))
    proc = parity_kit("baseline", "verify", str(lineage_descriptor(tmp_path / "crossing", embedded, records[0])))
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.startswith(f"verified: {len(records)} lineage entries")

    # A reason given by a later entry is not the reason of the one that crossed.
    records = _steps(tmp_path / "late", embedded)
    assert _crossing(records) < len(records) - 1
    entries = _chain(tmp_path / "late", records, accepting=len(records) - 1)
    desc = lineage_descriptor(tmp_path / "late", embedded, records[0])
    problems = load_descriptor(desc).baselines.verify_lineage()
    assert any(p.startswith(f"lineage entry {display(entries[_crossing(records)])} loosens, in steps")
               for p in problems)


def test_baseline_make_holds_a_new_record_to_its_chains_agreed_record_as_well_as_its_parent(tmp_path, embedded):
    records = _steps(tmp_path, embedded)
    lineage = tmp_path / "lineage"
    crossing = _crossing(records)
    _chain(tmp_path, records[:crossing])  # the chain as it stands before the make
    from kit.core.baselines.lineage import load_folder

    entries = load_folder(lineage)
    made = with_moves(Made(CALIBRATION, "hf-bf16", accelerator("cpu")["name"], records[crossing],
                           records[crossing - 1]), entries, lineage)
    assert loosening(made.moves) is None and made.agreed == records[0].resolve()
    (refusal,) = _judge_moves(made, None)
    assert refusal.startswith("hf-bf16: the new record loosens, in steps each within its parent's margin, bucket ")
    assert refusal.endswith("find why its noise grew, or bless it with --accept-looser REASON")
    assert _judge_moves(made, "torch 2.14 rounds more") == []
    # Without the chain (its parent listed by hand, no lineage), only the parent's margin is known.
    alone = with_moves(Made(CALIBRATION, "hf-bf16", accelerator("cpu")["name"], records[crossing],
                            records[crossing - 1]))
    assert alone.agreed is None and _judge_moves(alone, None) == []


@pytest.mark.parametrize("measured, keyed", [(ELSEWHERE_CPU, "here"), ("here", "gpu NoSuchCard 80GB")])
def test_a_record_heads_only_a_chain_of_the_class_it_measured(tmp_path, embedded, measured, keyed):
    here = accelerator("cpu")["name"]
    measured, keyed = (here if v == "here" else v for v in (measured, keyed))
    listed = record_elsewhere(embedded, tmp_path / "calibrations", here)
    other = record_elsewhere(embedded, tmp_path / "other", measured)
    other = _remade(other, tmp_path / "calibrations")  # other bytes than the listed one, whichever class
    lineage = tmp_path / "lineage"
    first = entry_for(listed, lineage)
    write_entry(lineage, first)
    head = write_entry(lineage, entry_for(other, lineage, supersedes=first.sha256 if keyed == here else None,
                                          runtime=keyed))
    desc = lineage_descriptor(tmp_path, embedded, listed)
    proc = parity_kit("baseline", "verify", str(desc))
    assert proc.returncode == 3, proc.stdout
    assert proc.stdout.strip() == (
        f"refused: lineage entry {display(head)} puts its record in the chain of {keyed}, but the record measured its "
        f"noise on {measured}: a record heads only a chain of the class it measured (every host of {keyed} would use "
        "bounds measured elsewhere, without its drift test)")
    assert parity_kit("baseline", "status", str(desc)).returncode == 3


def test_baseline_verify_refuses_another_cases_record_at_the_head_as_check_does(tmp_path, embedded):
    here = accelerator("cpu")["name"]
    listed = record_elsewhere(embedded, tmp_path / "calibrations", here)
    decode = next(p for p in ((embedded.descriptor.parent / f).resolve()
                              for f in embedded.doc["cases"]["hf-bf16-decode"]["calibration"])
                  if load_record(p).fingerprint["runtime"]["accelerator"]["name"] == here)
    shutil.copyfile(decode, tmp_path / "calibrations" / decode.name)
    lineage = tmp_path / "lineage"
    first = entry_for(listed, lineage)
    write_entry(lineage, first)
    write_entry(lineage, LineageEntry(**{**entry_for(tmp_path / "calibrations" / decode.name, lineage,
                                                     supersedes=first.sha256).__dict__, "case": "hf-bf16"}))
    desc = lineage_descriptor(tmp_path, embedded, listed)
    check = parity_kit("check", str(desc))
    assert check.returncode == 3 and "does not fit: it was made for golden " in check.stderr
    proc = parity_kit("baseline", "verify", str(desc))
    assert proc.returncode == 3, proc.stdout
    refused = proc.stdout.strip()
    assert refused.startswith("refused: ") and "\n" not in refused
    # The very line check refuses with: one check, not a copy of it.
    assert refused.removeprefix("refused: ") in check.stderr
