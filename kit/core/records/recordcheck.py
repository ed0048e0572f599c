"""The shape of a calibration record: every key present, of its type, inside its range, and nothing else.

A record sets a case's bounds, so nothing in it is taken on its word: its figures are re-derived from its
samples (kit.core.noise.calibration), and before that every value must be what the rule can work on. A bound of
"wide", a drift alpha of 0 or a negative count would otherwise pass a comparison, crash one, or judge
nothing. Each problem is named by its key (``buckets.512.bound``) and the value found.

Stdlib only: calibrate's kernel checks the samples it resumes with the same rules.
"""

from __future__ import annotations

import math
from typing import Any, Collection, Mapping, Sequence

from kit.core.errors import ParityKitError

TOP_KEYS = ("format", "case", "backend", "noise_class", "inputs", "options", "fingerprint", "command", "variants",
            "samples", "created_at", "prompts", "buckets", "drift", "rule")
SAMPLE_KEYS = ("variant", "launch", "repeat", "errors", "shifts")
PROMPT_KEYS = ("bucket", "largest", "smallest", "shift_low", "shift_high")
BUCKET_KEYS = ("prompts", "largest", "spread", "bound")
DRIFT_KEYS = ("alpha", "distinct_samples", "variants", "leave_one_out")
LEAVE_ONE_OUT_KEYS = ("variant", "launch", "passed", "p_value")
INPUT_KEYS = ("fixture_sha256", "golden_sha256", "model_digest")
NOISE_CLASS_KEYS = ("device", "dtype")
# A format-2 record's ``decode`` section (kit.core.noise.stepnoise derives it) and each of its steps.
DECODE_KEYS = ("steps", "distinct_samples", "per_step")
STEP_KEYS = ("prompts", "largest", "spread", "bound")


class Wrong(ParityKitError):
    """One value that is not what a record holds there: its key, what was expected, what was found."""

    def __init__(self, key: str, expected: str, found: Any = ...):
        self.key, self.expected, self.found = key, expected, found
        super().__init__(self.text)

    @property
    def text(self) -> str:
        """The problem in one line: the key, what was expected there and, where given, what was found (shortened)."""
        got = "" if self.found is ... else f", got {_short(self.found)}"
        return f"{self.key}: {self.expected}{got}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _join(key: str, part: str) -> str:
    return f"{key}.{part}" if key else part


def mapping(value: Any, key: str, keys: Collection[str] | None = None) -> dict:
    """A JSON object; with ``keys``, exactly those (a missing key is named first, then an unknown one)."""
    if not isinstance(value, dict):
        raise Wrong(key or "(top level)", "expected an object", value)
    if keys is not None:
        missing = [k for k in keys if k not in value]
        if missing:
            raise Wrong(_join(key, missing[0]), "missing")
        unknown = sorted(set(value) - set(keys))
        if unknown:
            raise Wrong(_join(key, unknown[0]), f"unknown key (expected one of: {', '.join(keys)})")
    return value


def formatted(doc: Any, keys: Collection[str], fmt: str) -> dict:
    """A record's top level: exactly ``keys``, one of which is ``format``, and that format ``fmt`` (a file of
    another format, or another record altogether, is named as such before any of its keys is read)."""
    d = mapping(doc, "", keys)
    if d["format"] != fmt:
        raise Wrong("format", f"expected {fmt!r}", d["format"])
    return d


def listing(value: Any, key: str, non_empty: bool = False) -> list:
    """A JSON list (with ``non_empty``, of at least one entry), or Wrong naming ``key``."""
    if not isinstance(value, list):
        raise Wrong(key, "expected a list", value)
    if non_empty and not value:
        raise Wrong(key, "expected at least one entry", value)
    return value


def text(value: Any, key: str) -> str:
    """A non-empty string, or Wrong naming ``key``."""
    if not isinstance(value, str) or not value:
        raise Wrong(key, "expected a non-empty string", value)
    return value


def count(value: Any, key: str, minimum: int = 1) -> int:
    """A whole number of at least ``minimum`` (a bool is not one, though Python counts it as an int)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise Wrong(key, f"expected a whole number of at least {minimum}", value)
    return value


def number(value: Any, key: str, low: float, high: float, low_open: bool = False, high_open: bool = False) -> float:
    """A finite number in the interval the brackets say ((0, 1] for a bound)."""
    ok = (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
          and (value > low if low_open else value >= low) and (value < high if high_open else value <= high))
    if not ok:
        span = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise Wrong(key, f"expected a number in {span}", value)
    return float(value)


def check_sample(value: Any, key: str) -> set[str]:
    """One clean sample (kit.core.noise.calibration.Sample as a dict); returns its prompt ids. A decode case's
    sample also holds ``steps``, each prompt's error per decode step (kit.core.noise.stepnoise)."""
    s = mapping(value, key, SAMPLE_KEYS + (("steps",) if isinstance(value, dict) and "steps" in value else ()))
    text(s["variant"], f"{key}.variant")
    count(s["launch"], f"{key}.launch")
    count(s["repeat"], f"{key}.repeat")
    errors = mapping(s["errors"], f"{key}.errors")
    shifts = mapping(s["shifts"], f"{key}.shifts")
    if not errors:
        raise Wrong(f"{key}.errors", "expected the error of at least one prompt", errors)
    for pid, e in errors.items():
        number(e, f"{key}.errors.{pid}", 0.0, 1.0)  # a probability difference
    for pid, x in shifts.items():
        number(x, f"{key}.shifts.{pid}", -1.0, 1.0)
    if set(shifts) != set(errors):
        odd = sorted(set(shifts) ^ set(errors))[0]
        raise Wrong(f"{key}.shifts", f"expected the same prompts as its errors (prompt {odd} is in one only)")
    if "steps" in s:
        check_steps_of_sample(s["steps"], f"{key}.steps", set(errors))
    return set(errors)


def check_steps_of_sample(value: Any, key: str, prompts: set[str]) -> None:
    """A sample's ``steps``: per prompt it measured, the error of each decode step compared (at least one)."""
    steps = mapping(value, key)
    if set(steps) != prompts:
        odd = sorted(set(steps) ^ prompts)[0]
        raise Wrong(key, f"expected the same prompts as its errors (prompt {odd} is in one only)")
    for pid, errors in steps.items():
        if not isinstance(errors, list) or not errors:
            raise Wrong(f"{key}.{pid}", "expected a list of at least one step's error", errors)
        for i, e in enumerate(errors):
            number(e, f"{key}.{pid}[{i}]", 0.0, 1.0)


def check_decode_section(value: Any, samples: Sequence[Mapping]) -> None:
    """A record's ``decode`` section, and that every sample kept its steps (the section's evidence)."""
    section = mapping(value, "decode", DECODE_KEYS)
    count(section["steps"], "decode.steps")
    count(section["distinct_samples"], "decode.distinct_samples")
    for i, s in enumerate(samples):
        if "steps" not in s:
            raise Wrong(f"samples[{i}].steps", "missing (a record with a decode section keeps every sample's steps)")
    per_step = mapping(section["per_step"], "decode.per_step")
    for name, s in per_step.items():
        key = f"decode.per_step.{name}"
        if not name.isdigit() or not 1 <= int(name) <= section["steps"]:
            raise Wrong(key, f"expected a decode step from 1 to {section['steps']} as its name")
        mapping(s, key, STEP_KEYS)
        count(s["prompts"], f"{key}.prompts")
        number(s["largest"], f"{key}.largest", 0.0, 1.0)
        number(s["spread"], f"{key}.spread", 0.0, 1.0)
        number(s["bound"], f"{key}.bound", 0.0, 1.0, low_open=True)


def check_samples(value: Any) -> set[str]:
    """Every sample, all of the same prompts; returns those prompt ids."""
    samples = listing(value, "samples", non_empty=True)
    ids = check_sample(samples[0], "samples[0]")
    for i, s in enumerate(samples[1:], start=1):
        other = check_sample(s, f"samples[{i}]")
        if other != ids:
            odd = sorted(other ^ ids)[0]
            raise Wrong(f"samples[{i}].errors", f"expected the prompts of samples[0] (prompt {odd} is in one only)")
    return ids


def check_prompts(value: Any, ids: set[str]) -> None:
    """Per prompt: its bucket and ranges, for exactly the prompts the samples measured."""
    prompts = mapping(value, "prompts")
    if set(prompts) != ids:
        odd = sorted(set(prompts) ^ ids)[0]
        where = "has no samples" if odd in prompts else "is measured by the samples but missing here"
        raise Wrong(f"prompts.{odd}", f"expected the prompts the samples measured (this one {where})")
    for pid, p in prompts.items():
        key = f"prompts.{pid}"
        mapping(p, key, PROMPT_KEYS)
        count(p["bucket"], f"{key}.bucket")
        for k in ("largest", "smallest"):
            number(p[k], f"{key}.{k}", 0.0, 1.0)
        for k in ("shift_low", "shift_high"):
            number(p[k], f"{key}.{k}", -1.0, 1.0)


def check_buckets(value: Any) -> None:
    """Per bucket: its prompt count, largest error, spread and bound, a bound in (0, 1] as a descriptor's."""
    buckets = mapping(value, "buckets")
    for name, b in buckets.items():
        key = f"buckets.{name}"
        if not name.isdigit():
            raise Wrong(key, "expected a bucket's length in tokens as its name")
        mapping(b, key, BUCKET_KEYS)
        count(b["prompts"], f"{key}.prompts")
        number(b["largest"], f"{key}.largest", 0.0, 1.0)
        number(b["spread"], f"{key}.spread", 0.0, 1.0)
        number(b["bound"], f"{key}.bound", 0.0, 1.0, low_open=True)


def check_drift(value: Any) -> None:
    """The drift test's rate (a probability strictly between 0 and 1), its sample count and left-out tests."""
    drift = mapping(value, "drift", DRIFT_KEYS)
    number(drift["alpha"], "drift.alpha", 0.0, 1.0, low_open=True, high_open=True)
    count(drift["distinct_samples"], "drift.distinct_samples")
    for i, v in enumerate(listing(drift["variants"], "drift.variants")):
        text(v, f"drift.variants[{i}]")
    for i, x in enumerate(listing(drift["leave_one_out"], "drift.leave_one_out")):
        key = f"drift.leave_one_out[{i}]"
        mapping(x, key, LEAVE_ONE_OUT_KEYS)
        text(x["variant"], f"{key}.variant")
        count(x["launch"], f"{key}.launch")
        if not isinstance(x["passed"], bool):
            raise Wrong(f"{key}.passed", "expected true or false", x["passed"])
        if x["p_value"] is not None:
            number(x["p_value"], f"{key}.p_value", 0.0, 1.0)


def check_rule(value: Any, rules: Mapping[str, str]) -> None:
    """A rule this kit knows, stated in its own words (``rules``: name -> text)."""
    rule = mapping(value, "rule", ("name", "text"))
    name = text(rule["name"], "rule.name")
    if name not in rules:
        raise Wrong("rule.name", f"expected a rule this kit derives bounds by ({', '.join(rules)})", name)
    if rule["text"] != rules[name]:
        raise Wrong("rule.text", f"expected the text of rule {name}", rule["text"])


def check_provenance(doc: Mapping) -> None:
    """Who measured what: the case, its backend, noise class, inputs and where it ran."""
    for key in ("case", "backend", "created_at"):
        text(doc[key], key)
    for key, value in mapping(doc["noise_class"], "noise_class", NOISE_CLASS_KEYS).items():
        text(value, f"noise_class.{key}")
    for key, value in mapping(doc["inputs"], "inputs", INPUT_KEYS).items():
        text(value, f"inputs.{key}")  # compared with the case's own digests where it is used
    mapping(doc["options"], "options")
    runtime = mapping(doc["fingerprint"], "fingerprint").get("runtime", {})
    accelerator = mapping(runtime, "fingerprint.runtime").get("accelerator", {})
    name = mapping(accelerator, "fingerprint.runtime.accelerator").get("name")
    if name is not None:
        text(name, "fingerprint.runtime.accelerator.name")
    for i, arg in enumerate(listing(doc["command"], "command")):
        if not isinstance(arg, str):
            raise Wrong(f"command[{i}]", "expected a string", arg)
    for i, v in enumerate(listing(doc["variants"], "variants")):
        mapping(v, f"variants[{i}]")


def check_record(doc: Any, rules: Mapping[str, str], decode: bool = False) -> None:
    """Raises Wrong at the first value of ``doc`` that is not what a calibration record holds; with ``decode``
    (a format-2 record), its ``decode`` section is required and checked too."""
    mapping(doc, "", TOP_KEYS + (("decode",) if decode else ()))
    check_provenance(doc)
    ids = check_samples(doc["samples"])
    check_prompts(doc["prompts"], ids)
    check_buckets(doc["buckets"])
    check_drift(doc["drift"])
    check_rule(doc["rule"], rules)
    if decode:
        check_decode_section(doc["decode"], doc["samples"])
