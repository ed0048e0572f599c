"""Start a Ray for tests, print its address, and stop it when stdin closes.

    ray_head.py --temp-dir DIR [--nodes N] [--num-cpus C]

With ``--nodes N > 1`` it starts N Ray nodes on this machine (``ray.cluster_utils.Cluster``),
each with C CPUs, so that placement groups that spread over nodes can be tested.
"""

from __future__ import annotations

import argparse
import sys


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--temp-dir", required=True)
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--num-cpus", type=int, default=2)
    args = ap.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    head = {"num_cpus": args.num_cpus, "temp_dir": args.temp_dir, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    for _ in range(args.nodes - 1):
        cluster.add_node(num_cpus=args.num_cpus)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address)
    alive = sum(n["Alive"] for n in ray.nodes())
    ray.shutdown()
    if alive != args.nodes:
        sys.exit(f"expected {args.nodes} Ray nodes, {alive} are alive")
    print(f"ADDRESS {cluster.address}", flush=True)
    try:
        sys.stdin.read()
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
