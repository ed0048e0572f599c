"""For a case's kernel: the Ray placement group the Ray executor reserved for the case.

A multi-node case (``resources.nodes > 1``) runs its notebook in bundle 0 of a
placement group with one bundle per node; the engine's stages belong in those
bundles (vLLM, for one, places its Ray workers in the placement group it is
given). The executor passes the group to the kernel by name in the environment.
No kit module beyond this one is needed, so a backend kernel with other library
versions can use it.
"""

from __future__ import annotations

import logging
import os

from kit.core.records.contract import PLACEMENT_GROUP_ENV

# Named placement groups are looked up within a Ray namespace: executor and kernel share this one.
RAY_NAMESPACE = "parity-kit"


def case_placement_group():
    """The case's placement group (joining the Ray cluster first if needed), or None outside a Ray gang."""
    name = os.environ.get(PLACEMENT_GROUP_ENV)
    if not name:
        return None
    import ray

    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS"), namespace=RAY_NAMESPACE, logging_level=logging.WARNING,
                 log_to_driver=False)
    return ray.util.get_placement_group(name)
