"""Print what each case of a descriptor can detect: per case and fault family, the detectable effect its power
record holds (re-derived from its faulted samples as the descriptor loads it). docs/calibration.md keeps the
output ("What each case can detect").

    python benchmarks/power_figures.py [DESCRIPTOR]
"""

from __future__ import annotations

import sys

from kit.core.records import paths
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve


def cell(p: dict) -> str:
    if p["ratio"] is None:
        top = p["tried"][-1]
        return f"not caught up to {top[0]:g} ({p['fault']})"
    below = f"; {p['below']:g} missed" if p["below"] is not None else ""
    return f"{p['ratio']:.2g}x ({p['fault']} {p['magnitude']:g}, effect {p['effect']:.2g}{below})"


def main(descriptor: str) -> None:
    plan = resolve(load_descriptor(descriptor))
    rows = {n: c.spec.power for n, c in plan.cases.items() if c.spec.power}
    families = sorted({f for power in rows.values() for f in power["families"]})
    print("| case | clean error | detects from | " + " | ".join(families) + " |")
    print("| --- | ---: | ---: | " + " | ".join("---" for _ in families) + " |")
    for name, power in rows.items():
        worst = power["detects_from"]
        cells = [cell(power["families"][f]) if f in power["families"] else "not measured" for f in families]
        print(f"| {name} | {power['clean_error']:.3g} | {'never' if worst is None else f'{worst:.2g}x'} | "
              + " | ".join(cells) + " |")
    unmeasured = [n for n, c in plan.cases.items() if c.spec.calibration and not c.spec.power]
    if unmeasured:
        print(f"\nno power record: {', '.join(unmeasured)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(paths.EMBEDDED_DESCRIPTOR))
