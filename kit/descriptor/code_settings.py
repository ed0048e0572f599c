"""Name, on stderr, every descriptor setting that makes an engine load code beyond the kit's own.

A descriptor is code, like a Makefile: its author may set LD_PRELOAD or trust_remote_code, and for a
descriptor its user wrote that is fine. One that came from elsewhere (a pull request, a colleague)
runs with the same power, so whenever the kit loads a descriptor it says which case sets what; each
backend's options schema knows its own such keys (BackendOptions.code_settings).
"""

from __future__ import annotations

import sys
from typing import Callable

from kit.descriptor.schema import CaseBase, Descriptor, case_schemas

_said: set[str] = set()  # a descriptor loaded twice in one process warns once


def code_warnings(where: Callable[..., str], doc: Descriptor, cases: dict[str, CaseBase]) -> list[str]:
    """One line per setting, each naming file:line, the case and the key; a release's engine options
    count for every case of its backend that they apply to."""
    lines = []
    for name, case in cases.items():
        for key, why in case.code_settings():
            lines.append(f"{where('cases', name, *key.split('.', 1))}: case {name} sets {key}: {why}")
    for rname, rel in doc.releases.items():
        for backend, built in rel.backends.items():
            if not built.options:
                continue
            loc = ("releases", rname, "backends", backend, "options")
            for name, entry in doc.cases.items():
                if entry.get("backend") != backend:
                    continue
                own = set(cases[name].code_settings())
                merged = case_schemas()[backend].model_validate({**entry, **built.options})
                for key, why in merged.code_settings():
                    if (key, why) not in own:
                        lines.append(f"{where(*loc, *key.split('.', 1))}: release {rname} sets {key} "
                                     f"for case {name}: {why}")
    return lines


def warn_code_settings(where: Callable[..., str], doc: Descriptor, cases: dict[str, CaseBase]) -> None:
    """Warn on stderr, once per process, about each setting of the descriptor that makes an engine load code
    beyond the kit's: a reviewer must see it before trusting a verdict."""
    for line in code_warnings(where, doc, cases):
        if line not in _said:
            _said.add(line)
            print(f"parity-kit: warning: {line}", file=sys.stderr)
