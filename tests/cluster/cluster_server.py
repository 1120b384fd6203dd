"""A Ray cluster of several nodes on this machine, all on loopback addresses, for the multi-node
tests: run as a script, it starts ``ray.cluster_utils.Cluster`` (a head with no CPU on 127.0.0.1,
then one node per ``NAME=IP:CPUS`` argument), prints one JSON line (the head's address, each
node's IP and raylet pid), and then obeys one command per line on stdin, answering one JSON line
each:

- ``remove NAME``: kill that node (its raylet and its workers), as a machine lost mid-trial;
- ``add NAME``: start it again;
- ``busy``: per node, the pids of the workers that run a trial now;
- ``quit``: shut the cluster down.

Token authentication is on (Ray's default for ``ray start``), with the token of
``$RAY_AUTH_TOKEN_PATH``. The cluster lives in its own process (and session) so that the test
process never becomes a Ray driver.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    os.environ["RAY_AUTH_MODE"] = "token"
    # a head on 127.0.0.1 listens on loopback only; without this Ray turns 127.0.0.1 into the
    # machine's outward address
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import importlib

    from ray.cluster_utils import Cluster

    psutil = importlib.import_module("psutil")  # Ray's own copy: importable once Ray is

    temp_dir = sys.argv[1]
    specs = {}
    for arg in sys.argv[2:]:
        name, rest = arg.split("=")
        ip, cpus = rest.split(":")
        specs[name] = (ip, int(cpus))
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "node_ip_address": "127.0.0.1",
            "include_dashboard": False,
            "temp_dir": temp_dir,
            "object_store_memory": 100 * 1024**2,
        },
    )
    nodes = {}

    def add(name: str) -> None:
        ip, cpus = specs[name]
        nodes[name] = cluster.add_node(
            num_cpus=cpus, node_ip_address=ip, object_store_memory=100 * 1024**2
        )
        cluster.wait_for_nodes()

    def raylet_pid(node) -> int:  # type: ignore[no-untyped-def]
        return node.all_processes["raylet"][0].process.pid

    for name in specs:
        add(name)
    print(
        json.dumps(
            {
                "address": cluster.address,
                "nodes": {
                    n: {"ip": specs[n][0], "raylet": raylet_pid(v)} for n, v in nodes.items()
                },
            }
        ),
        flush=True,
    )
    for line in sys.stdin:
        cmd, *args = line.split()
        if cmd == "remove":
            cluster.remove_node(nodes.pop(args[0]), allow_graceful=False)
            print(json.dumps({"removed": args[0]}), flush=True)
        elif cmd == "add":
            add(args[0])
            print(json.dumps({"added": args[0], "raylet": raylet_pid(nodes[args[0]])}), flush=True)
        elif cmd == "busy":
            busy = {}
            for name, node in nodes.items():
                try:
                    kids = psutil.Process(raylet_pid(node)).children(recursive=True)
                    busy[name] = [
                        k.pid for k in kids if "ImplicitFunc.train" in " ".join(k.cmdline())
                    ]
                except psutil.Error:
                    busy[name] = []
            print(json.dumps(busy), flush=True)
        elif cmd == "quit":
            break
    cluster.shutdown()
    print(json.dumps({"quit": True}), flush=True)


if __name__ == "__main__":
    main()
