"""Whether a passed case may say "passed": the judgment of what its power record shows it can detect.

A case within its bounds passes only as far as it could have seen a fault: a case whose power record
(kit.core.noise.power, the measurement) says it detects faults only from more than the ``detectable_limit`` its
descriptor asks, or whose measurement does not cover what it ran, is inconclusive (exit 8) instead. The
measurement is noise's; this decision is the verdict's, taken here by the rule ``rules.past_limit``, so that a
change to it reaches the gate and everything that reads its statuses.

Stdlib only: the kernel-safe core.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from kit.core.noise.power import FAMILY_NAMES, unmeasured
from kit.core.records.records import CaseResult, Status
from kit.core.rules import rules


def judged_by_power(result: CaseResult, detectable: Mapping[str, Any] | None, limit: float | None,
                    where: str) -> CaseResult:
    """The case's result carrying what it can detect; a passed case whose detectable effect is over ``limit``
    (or was not measured for so few prompts) becomes inconclusive, with the reason. Failed and unfinished
    cases keep their status: a fault seen is seen whatever the case could have missed."""
    if not detectable:
        return result
    result = dataclasses.replace(result, detectable=dict(detectable))
    if result.status != Status.PASSED or limit is None:
        return result
    reason = inconclusive_reason(detectable, limit, len(result.prompts), where)
    return dataclasses.replace(result, status=Status.INCONCLUSIVE, error=reason) if reason else result


def inconclusive_reason(detectable: Mapping[str, Any], limit: float, prompts: int, where: str) -> str | None:
    """Why "passed" would claim more than the case can see, or None."""
    worst, hardest = detectable.get("detects_from"), detectable.get("hardest")
    if worst is None:
        return (f"it does not detect the {hardest} family ({detectable['families'][hardest]['fault']}) at any "
                f"magnitude tried; {where} asks for {limit:g}x the clean error")
    if rules.past_limit(worst, limit):
        return (f"it detects faults only from {worst:.2g}x the clean error ({hardest}: "
                f"{detectable['families'][hardest]['fault']}), over the limit of {limit:g}x ({where})")
    missing = unmeasured(detectable)
    if missing:
        return (f"its detectable effect ({worst:.2g}x) was measured for {len(FAMILY_NAMES) - len(missing)} of "
                f"{len(FAMILY_NAMES)} fault families: it cannot say what it would see of {', '.join(missing)}")
    measured = int(detectable.get("prompts") or 0)
    if prompts < measured:
        return (f"it scored {prompts} prompts and its detectable effect ({worst:.2g}x) was measured on {measured}: "
                "with fewer prompts it may see less")
    return None
