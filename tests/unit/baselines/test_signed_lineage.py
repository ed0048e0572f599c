"""`baseline make --sign KEY` signs each lineage entry it writes, as `gate --sign` signs a run; `baseline verify` says
who signed them (by the repository's trusted keys), and refuses an envelope that does not verify or that signs
another entry than the one it is named after. An entry reads the same signed or not."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kit.baselines.made import Made
from kit.baselines.make import _folders, _place
from kit.baselines.signed import SIGNATURES, SUFFIX
from kit.core.baselines.baselinekind import CALIBRATION
from kit.core.baselines.lineage import load_folder
from kit.core.host.runtime import accelerator
from kit.core.noise.calibration import load_record
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve
from kit.run import signing
from support import parity_kit

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from unit.baselines.test_status import _remade, lineage_descriptor, record_elsewhere  # noqa: E402

pytestmark = pytest.mark.unit


def made_and_placed(repo: Path, embedded, signer) -> tuple[Path, Path, list[Path]]:
    """A repository whose descriptor (in its descriptors/ folder) lists a record of this host's class, and a remade
    record placed by `baseline make`'s own placing (its entry superseding the listed record's first entry), signed by
    ``signer``."""
    (repo / ".git").mkdir(parents=True, exist_ok=True)  # the repository whose trusted-keys.toml counts
    tmp_path = repo / "descriptors"
    here = accelerator("cpu")["name"]
    old = record_elsewhere(embedded, tmp_path / "calibrations", here)
    new = _remade(old, tmp_path / "staged")
    desc = lineage_descriptor(tmp_path, embedded, old)
    plan = resolve(load_descriptor(desc))
    made = Made(CALIBRATION, "hf-bf16", here, new, old, bounds=dict(load_record(new).bounds),
                command=["parity-kit", "baseline", "make", "--reason", "remade"])
    written = _place(plan, _folders(plan), [made], "remade", list(made.command), None, "passed", signer)
    return desc, tmp_path / "lineage", written


def test_baseline_make_signs_each_entry_it_writes_and_verify_names_the_signer(tmp_path, embedded):
    pem, key = signing.generate("maintainer", tmp_path / "keys")
    (tmp_path / signing.TRUSTED_KEYS).write_text(key.entry())
    desc, lineage, written = made_and_placed(tmp_path, embedded, signing.load_signer(str(pem)))
    entries = load_folder(lineage)  # the envelopes are no entries
    assert len(entries) == 2
    envelopes = sorted((lineage / SIGNATURES).glob(f"*{SUFFIX}"))
    assert sorted(p.name for p in envelopes) == sorted(f"{e.sha256}{SUFFIX}" for e in entries)
    assert set(envelopes) <= set(written)
    proc = parity_kit("baseline", "verify", str(desc))
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.strip().endswith(f"; 2 signed: by maintainer (key {key.keyid[:16]}): 2")


def test_an_unsigned_lineage_says_so_and_a_forged_envelope_is_refused(tmp_path, embedded):
    desc, lineage, _ = made_and_placed(tmp_path / "unsigned", embedded, None)
    proc = parity_kit("baseline", "verify", str(desc))
    assert proc.returncode == 0 and proc.stdout.strip().endswith("; none signed"), proc.stdout

    pem, key = signing.generate("maintainer", tmp_path / "keys")
    (tmp_path / "signed").mkdir()
    (tmp_path / "signed" / signing.TRUSTED_KEYS).write_text(key.entry())
    desc, lineage, _ = made_and_placed(tmp_path / "signed", embedded, signing.load_signer(str(pem)))
    first, second = sorted((lineage / SIGNATURES).glob(f"*{SUFFIX}"))
    # One entry's envelope put under the other's name: it verifies, but signs another entry.
    second.write_bytes(first.read_bytes())
    proc = parity_kit("baseline", "verify", str(desc))
    assert proc.returncode == 3, proc.stdout
    assert f"refused: {second}: signs " in proc.stdout and ", not the lineage entry " in proc.stdout
    # An envelope whose signature no longer matches its payload.
    envelope = json.loads(first.read_text())
    envelope["payload"] = envelope["payload"][:-8] + ("A" * 8 if not envelope["payload"].endswith("A" * 8) else "B" * 8)
    first.write_text(json.dumps(envelope))
    proc = parity_kit("baseline", "verify", str(desc))
    assert proc.returncode == 3
    assert f"refused: {first}: the signature of maintainer does not verify" in proc.stdout
