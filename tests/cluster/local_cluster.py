"""A three-primary Redis Cluster on this machine, from the same server binary as the
embedded server: three processes on free TCP ports, the 16,384 slots split between
them, joined with CLUSTER MEET. No replicas: the tests need slot routing, not failover."""

from __future__ import annotations

import contextlib
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis

from saga.adapters.embedded_redis import server_binary

SLOTS = 16384


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port(taken: list[int]) -> int:
    """A free port whose cluster bus port (+10,000) is free too; both must be < 65,536."""
    for _ in range(200):
        port = random.randint(20_000, 45_000)
        if port not in taken and _bindable(port) and _bindable(port + 10_000):
            return port
    raise RuntimeError("no free port pair for a cluster node")


class LocalCluster:
    def __init__(self, data_dir: Path, nodes: int = 3) -> None:
        self.data_dir = data_dir
        self.ports: list[int] = []
        for _ in range(nodes):
            self.ports.append(_free_port(self.ports))
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
                "--cluster-node-timeout", "1000",
            ]  # fmt: skip
            self._argvs.append(argv)
            self.procs.append(self._spawn(argv, d))
        deadline = time.monotonic() + within_s
        clients = [self._wait_ping(p, deadline) for p in self.ports]
        share = SLOTS // len(self.ports)
        for i, c in enumerate(clients):
            last = SLOTS - 1 if i == len(clients) - 1 else (i + 1) * share - 1
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
        for port in self.ports[1:]:
            clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", port)
        while True:
            states = [c.execute_command("CLUSTER", "INFO") for c in clients]
            if all(b"cluster_state:ok" in s and b"cluster_known_nodes:3" in s for s in states):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster did not form: {states}")
            time.sleep(0.05)
        for c in clients:
            c.close()

    @staticmethod
    def _spawn(argv: list[str], d: Path) -> subprocess.Popen[bytes]:
        log = (d / "server.log").open("ab")
        try:
            return subprocess.Popen(argv, stdout=log, stderr=log)
        finally:
            log.close()

    def stop_node(self, i: int) -> None:
        """SIGTERM one primary (it writes its AOF): its slots are unserved until restart."""
        self.procs[i].send_signal(signal.SIGTERM)
        self.procs[i].wait(10)

    def restart_node(self, i: int, within_s: float = 30.0) -> None:
        """Start a stopped primary again from its data; returns once every node says ok."""
        self.procs[i] = self._spawn(self._argvs[i], self.data_dir / str(self.ports[i]))
        deadline = time.monotonic() + within_s
        self._wait_ping(self.ports[i], deadline).close()
        while not all(b"cluster_state:ok" in self.state(n) for n in range(len(self.ports))):
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not recover")
            time.sleep(0.05)

    def state(self, i: int) -> bytes:
        c = redis.Redis(host="127.0.0.1", port=self.ports[i], socket_timeout=2)
        try:
            return bytes(c.execute_command("CLUSTER", "INFO"))
        finally:
            c.close()

    def clusterdown_replies(self) -> int:
        """CLUSTERDOWN errors the running nodes have replied so far (INFO errorstats)."""
        total = 0
        for port, proc in zip(self.ports, self.procs, strict=True):
            if proc.poll() is not None:
                continue
            c = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2)
            try:
                total += int(c.info("errorstats").get("errorstat_CLUSTERDOWN", {}).get("count", 0))
            finally:
                c.close()
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
