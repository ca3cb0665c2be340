"""The testbed's plan: names, addresses, rates and shaping, as data (no root needed).

A plan is computed from the ``up`` options, written to the state file *before*
anything is created (so that ``down`` can remove a half-built testbed after a
crash), and read back by ``status``, ``exec``, ``noise`` and the launcher.

Layout (prefix ``hv-``, two hosts on one switch)::

    netns hv-h1                 netns hv-sw                     netns hv-h2
    hv-eth0 10.213.7.1/24 ==== hv-p1 -+- hv-br0 -+- hv-p2 ==== hv-eth0 10.213.7.2/24
      tbf (upload of h1)      tbf (download of h1)   tbf (download of h2)   tbf (upload of h2)

Every name starts with the prefix; nothing is created in the root namespace
(veth pairs are created directly inside their namespaces).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpcvar import units
from hpcvar.errors import UsageError

STATE_VERSION = 1
DEFAULT_PREFIX = "hv-"
DEFAULT_STATE = "/run/hpcvar-testbed/state.json"
STATE_ENV = "HPCVAR_TESTBED_STATE"
# private /24 subnets tried in order; the first one that overlaps none of the machine's addresses and routes wins
SUBNET_CANDIDATES = ("10.213.7.0/24", "10.231.19.0/24", "172.29.213.0/24", "192.168.213.0/24")
MAX_HOSTS = 250
HOST_DEV = "eth0"  # the host's interface (inside its namespace), after the prefix: hv-eth0
# tbf: the bucket holds at least one 64 KiB GSO packet (smaller bursts drop or split them) or 2 ms of traffic;
# the queue holds 20 ms of traffic (an N-into-1 burst queues here instead of being dropped at once)
TBF_MIN_BURST_BYTES = 64 * 1024 + 2048
TBF_BURST_S = 0.002
TBF_LATENCY = "20ms"
PREFIX_RE = re.compile(r"[a-z][a-z0-9]{0,4}-")


def default_state_path() -> Path:
    return Path(os.environ.get(STATE_ENV) or DEFAULT_STATE)


@dataclass
class Host:
    name: str  # "h1"
    ns: str  # "hv-h1": the network namespace, also the host's hostname inside it
    addr: str  # "10.213.7.1"
    dev: str  # "hv-eth0": its interface, inside ns
    port: str  # "hv-p1": the switch port (bridge side of the veth), inside the switch namespace
    switch: int  # index of the bridge the host is on
    rate_bps: float  # shaped rate of its link, both directions
    # a CPU fault (testbed.cgroups): its processes get cpu_quota_us of CPU time per cpu_period_us (0: no fault),
    # in the group ``cgroup`` (a directory under the plan's cgroup_mount; empty without a fault)
    cpu_period_us: int = 0
    cpu_quota_us: int = 0
    cgroup: str = ""


@dataclass
class Plan:
    prefix: str
    subnet: str  # "10.213.7.0/24"
    hosts: list[Host]
    switch_ns: str  # "hv-sw"
    bridges: list[str]  # ["hv-br0"] or ["hv-br0", "hv-br1"]
    uplink: list[str] = field(default_factory=list)  # ["hv-up0", "hv-up1"]: the link between two bridges
    uplink_rate_bps: float | None = None
    ranks_per_host: int = 1
    intra_host: str = "shm"  # "shm": MPI may use shared memory inside a host; "tcp": TCP even there
    mtu: int = 1500
    status: str = "planned"  # planned -> creating -> up
    agent: str = ""  # path of the ssh-like agent script (written by up)
    noise: list[dict] = field(default_factory=list)  # background noise processes: {"pids": [...], "until": t}
    slurm: dict = field(default_factory=dict)  # up --slurm: directory, ports, controller (testbed.slurm_daemons)
    cgroup_mount: str = ""  # the cpu cgroup hierarchy, bind-mounted where every namespace sees it (testbed.cgroups)
    created_unix: float = 0.0
    version: int = STATE_VERSION

    @property
    def prefixlen(self) -> int:
        return ipaddress.ip_network(self.subnet).prefixlen

    @property
    def namespaces(self) -> list[str]:
        """Every namespace of the testbed (the switch last: hosts' veths go with their namespaces)."""
        return [h.ns for h in self.hosts] + [self.switch_ns]

    def host(self, name: str, flag: str = "HOST") -> Host:
        for h in self.hosts:
            if name in (h.name, h.ns, h.addr):
                return h
        raise UsageError(f"no testbed host '{name}'", flag,
                         f"Choose one of {', '.join(h.name for h in self.hosts)} ('hpcvar testbed status' lists them)")

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict, where: str = "state") -> Plan:
        if not isinstance(d, dict):
            raise TypeError(f"a {type(d).__name__}, not a testbed")
        if d.get("version") != STATE_VERSION:
            from hpcvar.errors import InputFileError

            raise InputFileError(f"unknown testbed state version {d.get('version')!r} (expected {STATE_VERSION})",
                                 where, todo="Remove the testbed with the hpcvar version that created it")
        d = dict(d)
        if not isinstance(d.get("hosts"), list) or not all(isinstance(h, dict) for h in d["hosts"]):
            raise TypeError("no list of hosts")
        d["hosts"] = [Host(**h) for h in d["hosts"]]
        return cls(**d)


def burst_bytes(rate_bps: float) -> int:
    return max(TBF_MIN_BURST_BYTES, int(rate_bps / 8 * TBF_BURST_S))


def tbf_args(rate_bps: float) -> list[str]:
    """``tc qdisc replace ... root`` arguments shaping one direction of a link to ``rate_bps``."""
    return ["tbf", "rate", f"{int(round(rate_bps))}bit", "burst", str(burst_bytes(rate_bps)), "latency", TBF_LATENCY]


def parse_rate_of(items: list[str] | tuple[str, ...], nhosts: int) -> dict[str, float]:
    """``['h2=200mbit', ...]`` -> {'h2': 2e8}; names are checked against h1..hN."""
    out = {}
    for item in items:
        name, sep, rate = item.partition("=")
        name = name.strip()
        if not sep:
            raise UsageError(f"'{item}' is not HOST=RATE", "--rate-of", "Write it as h2=200mbit")
        m = re.fullmatch(r"h(\d+)", name)
        if not m or not 1 <= int(m.group(1)) <= nhosts:
            raise UsageError(f"'{name}' is not a host of this testbed", "--rate-of",
                             f"Hosts are h1..h{nhosts}")
        out[name] = units.parse_rate(rate, "--rate-of")
    return out


def networks_in_use(addr_json: list[dict], route_json: list[dict]) -> list[ipaddress.IPv4Network]:
    """IPv4 networks of the machine's addresses and routes (``ip -j -4 addr`` / ``ip -j -4 route``)."""
    nets: list[ipaddress.IPv4Network] = []
    for link in addr_json:
        for a in link.get("addr_info", []):
            if a.get("family") == "inet":
                nets.append(ipaddress.IPv4Network(f"{a['local']}/{a.get('prefixlen', 32)}", strict=False))
    for r in route_json:
        dst = r.get("dst")
        if dst and dst != "default":
            try:
                nets.append(ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False))
            except ValueError:
                continue
    return nets


def choose_subnet(in_use: list[ipaddress.IPv4Network], wanted: str | None = None) -> str:
    """The given subnet (checked) or the first candidate that overlaps nothing in use."""
    if wanted:
        try:
            net = ipaddress.ip_network(wanted, strict=True)
        except ValueError as e:
            raise UsageError(f"'{wanted}' is not a subnet: {e}", "--subnet", "Give one such as 10.213.7.0/24") \
                from None
        if net.version != 4 or not net.is_private or net.prefixlen > 24:
            raise UsageError(f"'{wanted}' is not a private IPv4 subnet of at least 254 addresses", "--subnet",
                             "Give a private /24 or larger, such as 10.213.7.0/24")
        clash = [n for n in in_use if n.overlaps(net)]
        if clash:
            raise UsageError(f"subnet {net} overlaps the machine's {clash[0]}", "--subnet",
                             "Choose another private subnet")
        return str(net)
    for cand in SUBNET_CANDIDATES:
        net = ipaddress.ip_network(cand)
        if not any(n.overlaps(net) for n in in_use):
            return cand
    raise UsageError("every built-in testbed subnet overlaps an address or route of this machine", "--subnet",
                     "Give a free private subnet with --subnet")


def make_plan(hosts: int, rate_bps: float, rate_of: dict[str, float] | None = None, switches: int = 1,
              uplink_rate_bps: float | None = None, ranks_per_host: int = 1, prefix: str = DEFAULT_PREFIX,
              subnet: str = SUBNET_CANDIDATES[0], intra_host: str = "shm", mtu: int = 1500) -> Plan:
    if not PREFIX_RE.fullmatch(prefix):
        raise UsageError(f"prefix '{prefix}' is not 1-5 lowercase letters/digits and a dash", "--prefix",
                         "Use a short prefix such as hv- (interface names are limited to 15 characters)")
    if not 1 <= hosts <= MAX_HOSTS:
        raise UsageError(f"{hosts} hosts is outside [1, {MAX_HOSTS}]", "--hosts", f"Give 2..{MAX_HOSTS} hosts")
    if switches not in (1, 2):
        raise UsageError(f"{switches} switches is not supported", "--switches", "Use 1, or 2 for two bridges "
                         "joined by an uplink")
    if switches == 2 and hosts < 2:
        raise UsageError("two switches need at least two hosts", "--hosts", "Use --hosts 2 or more")
    if rate_bps <= 0:
        raise UsageError("the rate must be positive", "--rate", "Give a rate such as 1gbit")
    if intra_host not in ("shm", "tcp"):
        raise UsageError(f"unknown intra-host transport '{intra_host}'", "--intra-host", "Use shm or tcp")
    rate_of = rate_of or {}
    net = ipaddress.ip_network(subnet)
    addrs = list(net.hosts())
    first_on_s1 = (hosts + 1) // 2  # two switches: h1..h(ceil(N/2)) on the first, the rest on the second
    host_list = []
    for i in range(1, hosts + 1):
        name = f"h{i}"
        host_list.append(Host(name=name, ns=f"{prefix}{name}", addr=str(addrs[i - 1]), dev=f"{prefix}{HOST_DEV}",
                              port=f"{prefix}p{i}", switch=0 if switches == 1 or i <= first_on_s1 else 1,
                              rate_bps=float(rate_of.get(name, rate_bps))))
    plan = Plan(prefix=prefix, subnet=str(net), hosts=host_list, switch_ns=f"{prefix}sw",
                bridges=[f"{prefix}br{k}" for k in range(switches)], ranks_per_host=ranks_per_host,
                intra_host=intra_host, mtu=mtu)
    if switches == 2:
        plan.uplink = [f"{prefix}up0", f"{prefix}up1"]
        plan.uplink_rate_bps = float(uplink_rate_bps or rate_bps)
    return plan


def with_cpu_faults(plan: Plan, cpu_of: dict[str, tuple[int, int]]) -> Plan:
    """The plan with CPU faults (testbed.cgroups): ``cpu_of`` {host: (cpu period us, cpu quota us)}."""
    for h in plan.hosts:
        h.cpu_period_us, h.cpu_quota_us = cpu_of.get(h.name, (0, 0))
    return plan


def place_cgroups(plan: Plan, state_path: Path) -> None:
    """Where the CPU groups live (recorded before anything is created): under the bind mount beside the state
    file, one group per host as soon as one host has a CPU fault. The hosts without a fault get a group too
    (without a quota): the scheduler shares the CPUs between groups, not between the processes of different
    groups, so that a faulty host differs from the others only by its quota."""
    from hpcvar.testbed import cgroups

    if not any(h.cpu_quota_us for h in plan.hosts):
        return
    mnt = cgroups.mount_path(state_path)
    plan.cgroup_mount = str(mnt)
    for h in plan.hosts:
        h.cgroup = str(mnt / cgroups.group_name(h.ns))


def agent_script(plan: Plan) -> str:
    """An ssh-like agent: ``agent [ssh options] HOST COMMAND...`` runs COMMAND (a shell string, as ssh
    would) inside HOST's namespace with the host's own hostname (a private UTS namespace), so that MPI
    launchers (hydra ``-launcher-exec``, Open MPI ``plm_ssh_agent``) start their daemons on testbed hosts."""
    cases = "\n".join(f"  {h.addr}|{h.name}|{h.ns}) ns={h.ns}" + (f" cg={h.cgroup}/cgroup.procs" if h.cgroup else "")
                      + " ;;" for h in plan.hosts)
    return f"""#!/bin/sh
# hpcvar testbed agent (generated by 'hpcvar testbed up'; removed by 'hpcvar testbed down')
while [ $# -gt 0 ]; do
  case "$1" in
    -o|-p|-l|-i|-F|-E) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
host=$1
[ $# -gt 0 ] && shift
cg=
case "$host" in
{cases}
  *) echo "hpcvar testbed agent: unknown host '$host'" >&2; exit 255 ;;
esac
# a host with a CPU fault: the daemon and everything it starts join the host's cpu cgroup
[ -z "$cg" ] || echo $$ > "$cg" || exit 255
exec ip netns exec "$ns" unshare --uts -- sh -c "hostname $ns || exit 255
$*"
"""


def in_host_argv(host: Host, cmd: list[str]) -> list[str]:
    """argv running ``cmd`` inside ``host``: its network namespace, its own hostname and, with a CPU fault, its
    cpu cgroup."""
    from hpcvar.testbed.cgroups import join_argv

    return join_argv(host.cgroup, ["ip", "netns", "exec", host.ns, "unshare", "--uts", "--", "sh", "-c",
                                   'hostname "$0" || exit 255; exec "$@"', host.ns, *cmd])


def load_state(path: Path) -> Plan | None:
    """The recorded testbed, or None when there is none."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return Plan.from_json(json.loads(text), str(path))
    except (ValueError, TypeError, KeyError) as e:
        from hpcvar.errors import InputFileError

        raise InputFileError(f"the testbed state file is unreadable: {e}", str(path),
                             todo="Remove the namespaces it names by hand (ip netns list) and delete the file") \
            from None


def save_state(path: Path, plan: Plan) -> None:
    from hpcvar.results.store import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    if not plan.created_unix:
        plan.created_unix = time.time()
    atomic_write_text(path, json.dumps(plan.to_json(), indent=1) + "\n")
