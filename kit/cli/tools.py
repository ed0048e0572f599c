"""For editors and CI steps: `schema` (the descriptor's JSON schema), `backends` (the registered backends,
installed here or not) and `key generate` (a signing keypair and its trusted-keys entry)."""

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


def _add_key(sub) -> None:
    k = sub.add_parser("key", help="make a keypair that signs runs (`gate --sign`) and lineage entries",
                       epilog=exits("done"))
    ks = k.add_subparsers(dest="key_command", required=True, metavar="COMMAND")
    g = ks.add_parser("generate", help="write an ed25519 private key to DIR/NAME.pem and print its trusted-keys entry",
                      description="Writes a new ed25519 private key (PEM, readable by its owner only) and prints\n"
                                  "the entry that lists its public key in the repository's trusted-keys.toml.\n"
                                  "The key signs; the entry, reviewed like code, makes its signatures count.",
                      epilog=exits("written; the entry on stdout"))
    g.add_argument("name", help="the name a verified signature is reported by (letters, digits, . _ -)")
    g.add_argument("--out", metavar="DIR", required=True, help="the folder to write NAME.pem into (never over a file)")
    g.set_defaults(func=_key_generate)


def _key_generate(args) -> int:
    import logging
    from pathlib import Path

    from kit.core.records.paths import display
    from kit.run.signing import generate

    path, entry = generate(args.name, Path(args.out))
    logging.getLogger(__name__).warning(f"wrote {display(path)}: keep it secret (a CI secret, "
                                        "$PARITY_KIT_SIGNING_KEY); add this entry to trusted-keys.toml")
    print(entry.entry(), end="")
    return ExitCode.PASSED


def _schema(args) -> int:
    from kit.descriptor.json_schema import descriptor_json_schema

    print(json.dumps(descriptor_json_schema(), indent=2))
    return ExitCode.PASSED


def _backends(args) -> int:
    from kit.backends import registry
    from kit.core.records import paths
    from kit.gate.preflight import installed_kernels

    kernels = installed_kernels()
    for row in registry.backend_rows():
        goldens = "makes goldens" if row["makes_goldens"] else "makes no goldens"
        if row["kernel"] != paths.MAIN_KERNEL:  # its own environment: what counts is whether its kernel is there
            ready = row["kernel"] in kernels
            here = "its kernel is installed" if ready else f"its kernel is missing; install with: {row['install']}"
        else:
            here = "installed here" if row["installed"] else f"not installed here; install with: {row['install']}"
        print(f"{row['name']}: {row['summary']}")
        print(f"  kernel {row['kernel']}, notebook {row['notebook']}, {goldens}; {here}")
    return ExitCode.PASSED


# The commands this module adds to the parser, by name (kit.cli.entry adds them in the order --help lists them).
COMMANDS = {"schema": _add_schema, "backends": _add_backends, "key": _add_key}
