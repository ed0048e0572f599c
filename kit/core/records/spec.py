"""The resolved gate case: everything one notebook execution needs, as plain data.

The executor resolves a descriptor entry into a CaseSpec (absolute paths,
defaults applied) and hands it to the case notebook as a papermill parameter.
The notebook side needs no descriptor parsing and no pydantic, so a backend
kernel with other library versions can run it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from kit.core.records.jsonio import canonical_bytes, sha256_bytes
from kit.core.records.records import NoBaseline


@dataclass(frozen=True)
class CaseSpec:
    name: str
    backend: str
    kernel: str
    notebook: str
    timeout_s: float
    model_path: str
    model_digest: str
    fixture_path: str
    golden_path: str
    golden_kind: str
    bound: float | None
    top_n: int
    descriptor: str
    bucket_bounds: dict[str, float] = field(default_factory=dict)
    buckets: list[int] | None = None
    prompt_ids: list[str] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    # The named release this case runs against (empty outside a release): name, kernel, version, ...
    release: dict[str, Any] = field(default_factory=dict)
    repeats: int = 1
    repeat_launches: int = 1
    repeat_prompts: list[str] | None = None
    exact_repeats: bool = False
    # Fresh launches of the case as set that calibrating (and measuring its power) scores.
    calibration_launches: int = 2
    # The calibration record's reference (kit.core.noise.calibration.CalibrationRecord.reference) when the
    # case's bounds come from measured noise; its drift test runs unless ``drift`` is off.
    calibration: dict[str, Any] | None = None
    drift: bool = True
    # The decode check (kit.core.verdict.decode): continue each prompt greedily this many steps through the
    # backend's own decode path and compare with the golden's continuation; 0: no decode check.
    decode: int = 0
    # An exact case judged against a reference its kernel computes (the same backend on another model
    # folder, with some options changed) instead of a golden file: {model_path, model_digest, model, options}.
    reference: dict[str, Any] | None = None
    # Why the case has no baseline on this host (an exact golden of its runtime, a calibration record of its class of
    # hardware), and the command that makes it; such a case does not run.
    no_baseline: NoBaseline | None = None
    # The key of the runtime an exact case's bits depend on here (kit.core.host.runtime); empty for other cases.
    runtime: str = ""
    # What the case can detect, from the power record measured against its calibration record
    # (kit.core.noise.power.detectable_of); None when none was measured.
    power: dict[str, Any] | None = None
    # The largest detectable effect (x the clean error) under which the case may say "passed" (None: no limit).
    detectable_limit: float | None = None

    @property
    def repeated(self) -> bool:
        """Whether the case runs more than once (repeats or launches): only then can its repeats be compared
        bit for bit."""
        return self.repeats > 1 or self.repeat_launches > 1

    def to_dict(self) -> dict:
        """The spec as a case notebook receives it (a papermill parameter): plain JSON, readable by a kernel
        of any environment."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "CaseSpec":
        """A spec read from a notebook's parameter; an unknown key is refused (a spec from a newer kit would
        otherwise run with part of its meaning lost)."""
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown case spec keys: {sorted(unknown)}")
        return cls(**{**d, "no_baseline": NoBaseline.read(d.get("no_baseline"))})

    def inputs_digest(self, fixture_sha256: str, golden_sha256: str) -> str:
        """What a finished result depends on; equal digests mean a result can be reused."""
        entry = {k: v for k, v in self.to_dict().items() if k not in ("timeout_s", "descriptor")}
        if not self.decode:  # a case without the check keeps the digest it had before the check existed
            entry.pop("decode")
        for key in ("reference", "no_baseline", "runtime", "power", "detectable_limit"):  # likewise without these
            if not entry[key]:
                entry.pop(key)
        return sha256_bytes(canonical_bytes({"entry": entry, "fixture": fixture_sha256, "golden": golden_sha256}))
