"""A private test network of Linux network namespaces, made and removed by the test.

Topology (``X`` a random /24 inside 10.213.0.0/16, ``T`` a random tag)::

    root namespace ──veth── ┐
    odrT-<member> ───veth── ┤ bridge br0 in namespace odrTbr
    odrT-<member> ───veth── ┘

Every member namespace gets ``lo`` and one veth end with address ``10.213.X.n/24``;
the root namespace gets one veth end with ``10.213.X.1`` so the test process and the
services that stay in the root namespace (bound to 127.0.0.1) can reach the members.
Partitions are iptables DROP rules inside a member's own namespace; nothing outside
the namespaces this object created is touched, and :meth:`remove` deletes them all.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from dataclasses import dataclass, field


class NetnsUnavailable(RuntimeError):
    pass


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {result.stderr.strip()}")
    return result


def unavailable_reason() -> str | None:
    """Why namespaces cannot be used here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian packages iproute2, iptables)"
    probe = f"odrprobe{random.randrange(1 << 16):04x}"
    result = _run("ip", "netns", "add", probe, check=False)
    if result.returncode != 0:
        return f"cannot create a network namespace: {result.stderr.strip()}"
    _run("ip", "netns", "del", probe, check=False)
    return None


@dataclass
class PrivateNetwork:
    tag: str = field(default_factory=lambda: f"{random.randrange(1 << 16):04x}")
    subnet: int = field(default_factory=lambda: random.randrange(1, 255))
    members: dict[str, str] = field(default_factory=dict)  # member -> address
    _links: list[str] = field(default_factory=list)  # root-namespace link names we made
    _namespaces: list[str] = field(default_factory=list)

    @property
    def host_address(self) -> str:
        return f"10.213.{self.subnet}.1"

    @property
    def bridge_ns(self) -> str:
        return f"odr{self.tag}br"

    def ns(self, member: str) -> str:
        return f"odr{self.tag}-{member}"

    def address(self, member: str) -> str:
        return self.members[member]

    def _add_ns(self, name: str) -> None:
        _run("ip", "netns", "add", name)
        self._namespaces.append(name)
        _run("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")

    def create(self, members: list[str]) -> None:
        self._add_ns(self.bridge_ns)
        _run("ip", "netns", "exec", self.bridge_ns, "ip", "link", "add", "br0", "type", "bridge")
        _run("ip", "netns", "exec", self.bridge_ns, "ip", "link", "set", "br0", "up")
        self._attach(None, f"odr{self.tag}h", f"{self.host_address}/24")
        for i, member in enumerate(members):
            address = f"10.213.{self.subnet}.{10 + i}"
            self._add_ns(self.ns(member))
            self._attach(self.ns(member), f"odr{self.tag}{i:02d}", f"{address}/24")
            self.members[member] = address

    def _attach(self, netns: str | None, link: str, cidr: str) -> None:
        peer = f"{link}b"
        _run("ip", "link", "add", link, "type", "veth", "peer", "name", peer)
        self._links.append(link)
        _run("ip", "link", "set", peer, "netns", self.bridge_ns)
        inside = ["ip", "netns", "exec", self.bridge_ns]
        _run(*inside, "ip", "link", "set", peer, "master", "br0")
        _run(*inside, "ip", "link", "set", peer, "up")
        prefix: list[str] = []
        if netns is not None:
            _run("ip", "link", "set", link, "netns", netns)
            self._links.remove(link)  # gone with its namespace
            prefix = ["ip", "netns", "exec", netns]
        _run(*prefix, "ip", "addr", "add", cidr, "dev", link)
        _run(*prefix, "ip", "link", "set", link, "up")

    def cut(self, member: str, peers: list[str]) -> None:
        """Drop everything between ``member`` and ``peers`` (rules in member's namespace)."""
        inside = ["ip", "netns", "exec", self.ns(member), "iptables"]
        for peer in peers:
            address = self.members[peer]
            _run(*inside, "-I", "INPUT", "-s", address, "-j", "DROP")
            _run(*inside, "-I", "OUTPUT", "-d", address, "-j", "DROP")

    def heal(self, member: str) -> None:
        _run("ip", "netns", "exec", self.ns(member), "iptables", "-F")

    def remove(self) -> None:
        for link in self._links:
            _run("ip", "link", "del", link, check=False)
        for name in reversed(self._namespaces):
            _run("ip", "netns", "del", name, check=False)
        self._links.clear()
        self._namespaces.clear()
