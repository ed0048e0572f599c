"""For editors and CI steps: `schema` (the descriptor's JSON schema) and `backends` (the registered backends,
installed here or not)."""

from __future__ import annotations

import json

from kit.cli.common import exits
from kit.core.exitcodes import ExitCode


def _add_schema(sub) -> None:
    sc = sub.add_parser("schema", help="print the descriptor's JSON schema, for editors",
                        description="The descriptor's JSON schema (draft 2020-12): each case is one of the\n"
                                    "registered backends' case schemas, chosen by its `backend` key, so a\n"
                                    "third-party backend's options are in it too.",
                        epilog=exits("printed"))
    sc.set_defaults(func=_schema)


def _add_backends(sub) -> None:
    b = sub.add_parser("backends", help="list the registered backends and whether each is installed here",
                       epilog=exits("listed (a backend not installed here is not an error)"))
    b.set_defaults(func=_backends)


def _schema(args) -> int:
    from kit.descriptor.json_schema import descriptor_json_schema

    print(json.dumps(descriptor_json_schema(), indent=2))
    return ExitCode.PASSED


def _backends(args) -> int:
    from kit.backends import registry
    from kit.core.records import paths
    from kit.gate.preflight import installed_kernels

    kernels = installed_kernels()
    for row in registry.describe():
        goldens = "makes goldens" if row["makes_goldens"] else "makes no goldens"
        if row["kernel"] != paths.MAIN_KERNEL:  # its own environment: what counts is whether its kernel is there
            ready = row["kernel"] in kernels
            here = "its kernel is installed" if ready else f"its kernel is missing; install with: {row['install']}"
        else:
            here = "installed here" if row["installed"] else f"not installed here; install with: {row['install']}"
        print(f"{row['name']}: {row['summary']}")
        print(f"  kernel {row['kernel']}, notebook {row['notebook']}, {goldens}; {here}")
    return ExitCode.PASSED


# The commands this module adds to the parser, by name (kit.cli adds them in the order --help lists them).
COMMANDS = {"schema": _add_schema, "backends": _add_backends}
