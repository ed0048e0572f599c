#!/usr/bin/env python
"""Install into a virtual environment with uv, from the package sources pip is configured with.

uv installs the two environments in a fraction of pip's time (docs/figures.md, Set-up), but it reads none of
pip's configuration: a machine whose pip reaches PyPI through a mirror, an extra index or a folder of local wheels
(a CPU torch among them) would have uv resolve against plain PyPI instead, and a pin such as torch==2.13.0 would
then bring the CUDA build and its gigabytes. So the sources, the constraints and the CA bundle are read from
`pip config list` (every configuration file and PIP_* variable, as pip itself merged them) and handed to uv, and
uv is told to pick the best version across all indexes, as pip does.

    python scripts/uv_install.py UV PYTHON [uv pip install arguments...]

PYTHON is the environment's interpreter; its pip answers `pip config list`. The exit code is uv's.
"""

from __future__ import annotations

import ast
import logging
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

log = logging.getLogger("uv_install")

# pip's precedence for `pip install`: a PIP_* variable over the [install] section over [global]. Files are
# already merged by `pip config list` (a site file's value replaces a user's, a user's the system's).
SECTIONS = (":env:", "install", "global")


@dataclass(frozen=True)
class PipSources:
    """Where pip would look for packages, and what it would hold them to."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    trusted_hosts: tuple[str, ...] = ()
    no_index: bool = False
    cert: str | None = None
    timeout: str | None = None
    ignored: dict[str, str] = field(default_factory=dict)


def parse_config_list(text: str) -> dict[str, dict[str, str]]:
    """`pip config list`'s lines (``section.key='value'``) as {key: {section: value}}."""
    found: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        name, sep, raw = line.partition("=")
        section, dot, key = name.rpartition(".")
        if not (sep and dot):
            continue
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw  # pip prints repr(); anything else is taken as it stands
        found.setdefault(key, {})[section] = str(value)
    return found


def _chosen(found: Mapping[str, Mapping[str, str]], key: str) -> str | None:
    by_section = found.get(key, {})
    return next((by_section[s] for s in SECTIONS if s in by_section), None)


def _many(found: Mapping[str, Mapping[str, str]], key: str) -> tuple[str, ...]:
    # pip splits a list option's value on whitespace, in a file as in a variable.
    return tuple((_chosen(found, key) or "").split())


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def pip_sources(config_list: str) -> PipSources:
    """What `pip install` would use, from `pip config list`'s output."""
    found = parse_config_list(config_list)
    known = {"index-url", "extra-index-url", "find-links", "constraint", "trusted-host", "no-index", "cert", "timeout",
             "default-timeout"}
    return PipSources(
        index_url=_chosen(found, "index-url"),
        extra_index_urls=_many(found, "extra-index-url"),
        find_links=_many(found, "find-links"),
        constraints=_many(found, "constraint"),
        trusted_hosts=_many(found, "trusted-host"),
        no_index=_true(_chosen(found, "no-index")),
        cert=_chosen(found, "cert"),
        timeout=_chosen(found, "timeout") or _chosen(found, "default-timeout"),
        ignored={k: v for k in found.keys() - known if (v := _chosen(found, k)) is not None},
    )


def uv_arguments(sources: PipSources) -> list[str]:
    """uv pip install's options for the same sources; the best version across every index, as pip picks."""
    args = ["--index-strategy", "unsafe-best-match"]
    if sources.index_url:
        args += ["--index-url", sources.index_url]
    for url in sources.extra_index_urls:
        args += ["--extra-index-url", url]
    for place in sources.find_links:
        args += ["--find-links", place]
    for path in sources.constraints:
        args += ["--constraint", path]
    for host in sources.trusted_hosts:
        args += ["--allow-insecure-host", host]
    if sources.no_index:
        args.append("--no-index")
    return args


def uv_environment(sources: PipSources, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment uv runs in: pip's CA bundle and network timeout as uv reads them, unless set already."""
    env = dict(environ)
    if sources.cert:
        env.setdefault("SSL_CERT_FILE", sources.cert)
    if sources.timeout:
        try:  # uv reads whole seconds; pip takes a float
            env.setdefault("UV_HTTP_TIMEOUT", str(max(1, round(float(sources.timeout)))))
        except ValueError:
            log.warning("pip's timeout %r is not a number of seconds; uv keeps its own", sources.timeout)
    return env


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if len(argv) < 2:
        log.error("usage: uv_install.py UV PYTHON [uv pip install arguments...]")
        return 2
    uv, python, rest = argv[0], argv[1], argv[2:]
    listed = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        log.error("%s -m pip config list failed: %s", python, listed.stderr.strip())
        return listed.returncode
    sources = pip_sources(listed.stdout)
    if sources.ignored:
        log.debug("pip settings uv does not take: %s", ", ".join(sorted(sources.ignored)))
    command = [uv, "pip", "install", "--python", python, *uv_arguments(sources), *rest]
    return subprocess.run(command, env=uv_environment(sources, os.environ), check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
