"""Building, inspecting and removing the testbed with ``ip`` and ``tc`` (needs root).

``up`` writes the plan to the state file first (status ``creating``), then
creates the switch namespace with its bridge(s), one namespace per host with a
veth pair into the switch, addresses, and a ``tbf`` on both ends of every link
(the host end shapes its upload, the switch port its download, so that N
senders into one receiver share the receiver's link). ``down`` deletes exactly
the namespaces the state file names (which takes their interfaces and qdiscs
with them), stops recorded noise processes and removes the state directory's
files: it is idempotent and works after a killed ``up``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from hpcvar.errors import HpcvarError, MissingToolError, UsageError
from hpcvar.testbed.plan import (
    Plan,
    agent_script,
    choose_subnet,
    load_state,
    networks_in_use,
    place_cgroups,
    save_state,
    tbf_args,
)

IP_TIMEOUT_S = 20.0


class TestbedError(HpcvarError):
    """The testbed cannot be built, used or removed."""

    __test__ = False  # not a pytest test class, despite its name


def check_root(flag: str | None = None) -> None:
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        raise TestbedError("the testbed needs root (network namespaces, bridges and qdiscs)", flag,
                           "Run it as root, e.g. sudo $(which hpcvar) testbed up ...")
    for tool, pkg in (("ip", "iproute2"), ("tc", "iproute2"), ("unshare", "util-linux")):
        if shutil.which(tool) is None:
            raise MissingToolError(f"'{tool}' is not installed", None, f"Install it: apt-get install {pkg}")


def sh(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    """Run one ip/tc command; a failure becomes a TestbedError quoting the command and its message."""
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise TestbedError(f"'{' '.join(argv)}' did not finish within {IP_TIMEOUT_S:.0f} s", None,
                           "Check the machine's network configuration") from None
    if check and res.returncode != 0:
        raise TestbedError(f"'{' '.join(argv)}' failed: {res.stderr.strip() or res.stdout.strip()}", None,
                           "Run 'hpcvar testbed down' to remove what was created, then check that this kernel "
                           "supports network namespaces, veth, bridge and tbf")
    return res


def existing_namespaces() -> set[str]:
    res = sh(["ip", "-j", "netns", "list"], check=False)
    if res.returncode != 0 or not res.stdout.strip():
        return set()
    return {n["name"] for n in json.loads(res.stdout)}


def machine_networks():
    addrs = json.loads(sh(["ip", "-j", "-4", "addr", "show"]).stdout or "[]")
    routes = json.loads(sh(["ip", "-j", "-4", "route", "show", "table", "all"]).stdout or "[]")
    return networks_in_use(addrs, routes)


def agent_path(state_path: Path) -> Path:
    return state_path.parent / "agent"


def owner_path(state_path: Path) -> Path:
    """The testbed's owner (``up --owner-pid``) and the watcher that takes it down when the owner ends."""
    return state_path.with_name(state_path.name + ".owner")


def watch_owner(state_path: Path, owner_pid: int) -> int:
    """Start a detached watcher (its own session, so that no kill of the owner's process group reaches it) that
    takes the testbed of ``state_path`` down once process ``owner_pid`` has ended, ``kill -9`` included; returns
    its pid, recorded beside the state so that ``down`` stops it."""
    import sys

    from hpcvar.launch.guard import start_time

    start = start_time(owner_pid)
    if not start:
        raise HpcvarError(f"process {owner_pid} does not exist", "--owner-pid", "Give the pid of a running process, "
                                                                                "e.g. your script's $$")
    watcher = subprocess.Popen([sys.executable, "-m", "hpcvar", "testbed", "watch", "--state", str(state_path),
                                "--pid", str(owner_pid), "--start", start], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    owner_path(state_path).write_text(json.dumps({"owner_pid": owner_pid, "owner_start": start,
                                                  "watcher_pid": watcher.pid}))
    return watcher.pid


def wait_for_owner(state_path: Path, owner_pid: int, owner_start: str, poll_s: float = 0.5) -> bool:
    """The watcher's loop: True once the owner has ended (then the caller takes the testbed down), False when the
    testbed went away first (someone ran ``down``)."""
    from hpcvar.launch.guard import running

    while state_path.exists():
        if not running(owner_pid, owner_start):
            return True
        time.sleep(poll_s)
    return False


def _stop_watcher(state_path: Path) -> None:
    try:
        rec = json.loads(owner_path(state_path).read_text())
    except (OSError, ValueError):
        return
    pid = rec.get("watcher_pid")
    if isinstance(pid, int) and pid != os.getpid():
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass


def up(plan: Plan, state_path: Path, subnet: str | None = None, log=None, slurm: bool = False,
       replace: bool = False) -> Plan:
    """Create the testbed of ``plan``, with a Slurm cluster over its hosts when ``slurm``; returns the plan as
    built. A testbed recorded in ``state_path`` whose namespaces still exist is refused unless ``replace`` (it is
    then taken down first); a recorded one whose namespaces are all gone is replaced (stale state)."""
    from hpcvar.testbed import cgroups
    from hpcvar.testbed import slurm_daemons as sl

    check_root()
    if slurm:
        sl.check_tools()  # before anything is created
    if any(h.cpu_quota_us for h in plan.hosts):
        cgroups.cpu_hierarchy()  # the cpu controller is there, before anything is created
    say = log or (lambda msg: None)
    old = load_state(state_path)
    if old is not None:
        _refuse_recorded(old, state_path, replace)
        say(f"replacing the recorded testbed ({describe(old)})")
        down(state_path, log=log)
    present = existing_namespaces()
    foreign = sorted(set(plan.namespaces) & present)
    if foreign:
        raise UsageError(f"namespace {foreign[0]} exists but is not recorded in {state_path}", "--prefix",
                         f"Choose another --prefix, or remove it yourself (ip netns del {foreign[0]}) if it is "
                         "a leftover of an old testbed")
    chosen = choose_subnet(machine_networks(), subnet)
    if chosen != plan.subnet:
        plan.subnet = chosen
        _readdress(plan)
    plan.status = "creating"
    plan.agent = str(agent_path(state_path))
    if slurm:
        plan.slurm = sl.plan_slurm(plan, state_path)
    place_cgroups(plan, state_path)
    save_state(state_path, plan)  # recorded before anything exists: down works after a crash from here on
    try:
        _build(plan, say)
        cgroups.setup(plan, say)  # before any process starts in a host (slurmd joins its group)
        agent = agent_path(state_path)
        agent.write_text(agent_script(plan))
        agent.chmod(0o755)
        if slurm:
            sl.start(plan, sh, say)
            plan.slurm["status"] = "up"
    except BaseException:
        say("up failed: removing what was created")
        down(state_path)
        raise
    plan.status = "up"
    save_state(state_path, plan)
    return plan


def describe(plan: Plan) -> str:
    """One line naming a recorded testbed: hosts, prefix, subnet, status and since when."""
    import datetime as dt

    since = (dt.datetime.fromtimestamp(plan.created_unix, dt.UTC).strftime(" since %Y-%m-%d %H:%M UTC")
             if plan.created_unix else "")
    return f"{len(plan.hosts)} hosts, prefix {plan.prefix}, subnet {plan.subnet}, {plan.status}{since}"


def _refuse_recorded(old: Plan, state_path: Path, replace: bool) -> None:
    """A testbed recorded in the state file whose namespaces exist belongs to someone (another session, another
    engineer): replacing it is asked for with --replace, never done silently."""
    alive = sorted(set(old.namespaces) & existing_namespaces())
    if alive and not replace:
        raise UsageError(f"a testbed is up and recorded in {state_path} ({describe(old)})", "--replace",
                         "Take it down first (hpcvar testbed down" + _state_flag(state_path) + "), bring yours up "
                         "beside it with its own --state FILE and --prefix auto, or give --replace to take it "
                         "down and replace it")


def _state_flag(state_path: Path) -> str:
    from hpcvar.testbed.plan import DEFAULT_STATE

    return "" if str(state_path) == DEFAULT_STATE else f" --state {state_path}"


def free_prefix(state_path: Path | None = None) -> str:
    """The first of hv-, hv1-, hv2-, ... hv9999- that no namespace of this machine starts with (and that the state
    file does not record): ``testbed up --prefix auto``."""
    from hpcvar.testbed.plan import DEFAULT_PREFIX

    present = existing_namespaces()
    recorded = load_state(state_path) if state_path is not None else None
    for k in range(10000):
        prefix = DEFAULT_PREFIX if k == 0 else f"hv{k}-"
        if recorded is not None and recorded.prefix == prefix:
            continue
        if not any(ns.startswith(prefix) for ns in present):
            return prefix
    raise UsageError("every prefix from hv- to hv9999- is in use by a network namespace", "--prefix",
                     "Give a prefix of your own (1-5 lowercase letters or digits and a dash), or remove leftover "
                     "namespaces (ip netns list)")


def _readdress(plan: Plan) -> None:
    import ipaddress

    addrs = list(ipaddress.ip_network(plan.subnet).hosts())
    for i, h in enumerate(plan.hosts):
        h.addr = str(addrs[i])


def _build(plan: Plan, say) -> None:
    sw = plan.switch_ns
    say(f"switch namespace {sw}")
    sh(["ip", "netns", "add", sw])
    sh(["ip", "-n", sw, "link", "set", "lo", "up"])
    for br in plan.bridges:
        sh(["ip", "-n", sw, "link", "add", br, "type", "bridge", "forward_delay", "0", "stp_state", "0"])
        sh(["ip", "-n", sw, "link", "set", br, "mtu", str(plan.mtu), "up"])
    if plan.uplink:
        a, b = plan.uplink
        sh(["ip", "-n", sw, "link", "add", a, "mtu", str(plan.mtu), "type", "veth", "peer", "name", b,
            "mtu", str(plan.mtu)])
        assert plan.uplink_rate_bps is not None  # make_plan sets it with the uplink
        for dev, br in ((a, plan.bridges[0]), (b, plan.bridges[1])):
            sh(["ip", "-n", sw, "link", "set", dev, "master", br, "up"])
            sh(["tc", "-n", sw, "qdisc", "replace", "dev", dev, "root", *tbf_args(plan.uplink_rate_bps)])
    for h in plan.hosts:
        say(f"host {h.name}: namespace {h.ns}, {h.addr}/{plan.prefixlen}, {h.rate_bps / 1e6:g} Mbit/s")
        sh(["ip", "netns", "add", h.ns])
        sh(["ip", "-n", h.ns, "link", "set", "lo", "up"])
        # every connection starts afresh: no cwnd/ssthresh/RTT cached from an earlier run to this peer
        sh(["ip", "netns", "exec", h.ns, "sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1"])
        # both ends are created inside their namespaces: nothing ever appears in the root namespace
        sh(["ip", "link", "add", h.dev, "netns", h.ns, "mtu", str(plan.mtu), "type", "veth",
            "peer", "name", h.port, "netns", sw, "mtu", str(plan.mtu)])
        sh(["ip", "-n", sw, "link", "set", h.port, "master", plan.bridges[h.switch], "up"])
        sh(["ip", "-n", h.ns, "addr", "add", f"{h.addr}/{plan.prefixlen}", "dev", h.dev])
        sh(["ip", "-n", h.ns, "link", "set", h.dev, "up"])
        sh(["tc", "-n", h.ns, "qdisc", "replace", "dev", h.dev, "root", *tbf_args(h.rate_bps)])  # upload
        sh(["tc", "-n", sw, "qdisc", "replace", "dev", h.port, "root", *tbf_args(h.rate_bps)])  # download


def down(state_path: Path, log=None) -> list[str]:
    """Remove the recorded testbed; returns the namespaces deleted (empty when there was nothing)."""
    check_root()
    say = log or (lambda msg: None)
    plan = load_state(state_path)
    if plan is None:
        return []
    stop_noise(plan)
    if plan.slurm:
        from hpcvar.testbed import slurm_daemons as sl

        sl.stop(plan, say)
        say("stopped the testbed's Slurm")
    present = existing_namespaces()
    removed = []
    for ns in plan.namespaces:
        if not ns.startswith(plan.prefix):
            continue  # never touch anything outside the prefix, whatever the file says
        if ns in present:
            _kill_in_namespace(ns)
            sh(["ip", "netns", "del", ns])
            removed.append(ns)
            say(f"deleted namespace {ns}")
    from hpcvar.testbed import cgroups

    cgroups.teardown(plan, say)
    _stop_watcher(state_path)
    for p in (agent_path(state_path), owner_path(state_path), state_path):
        try:
            p.unlink()
        except FileNotFoundError:
            pass
    return removed


def _kill_in_namespace(ns: str) -> None:
    """Processes still running inside ``ns`` (a killed MPI job, noise) would keep it alive: stop them."""
    res = sh(["ip", "netns", "pids", ns], check=False)
    pids = [int(p) for p in res.stdout.split() if p.isdigit()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in pids:
            try:
                os.kill(pid, sig)
                alive.append(pid)
            except ProcessLookupError:
                continue
        if not alive:
            return
        deadline = time.monotonic() + 2.0
        while alive and time.monotonic() < deadline:
            alive = [p for p in alive if _alive(p)]
            time.sleep(0.05)
        pids = alive


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of ours counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (OSError, IndexError):
        return False


def stop_noise(plan: Plan) -> None:
    for entry in plan.noise:
        for pid in entry.get("pids", []):
            if _is_noise(pid):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass


def _is_noise(pid: int) -> bool:
    try:
        return b"hpcvar.testbed.traffic" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def require_up(state_path: Path, flag: str | None = None) -> Plan:
    """The recorded testbed, checked to exist; TestbedError with the remedy otherwise."""
    plan = load_state(state_path)
    if plan is None:
        raise TestbedError(f"no testbed is up (no state file {state_path})", flag,
                           "Start one: sudo hpcvar testbed up --hosts 2 --rate 1gbit")
    if plan.status != "up":
        raise TestbedError(f"the testbed in {state_path} is '{plan.status}', not up (an interrupted 'up'?)", flag,
                           "Run 'hpcvar testbed down' then 'hpcvar testbed up' again")
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        raise TestbedError("using the testbed needs root (ip netns exec)", flag, "Run it as root")
    missing = [ns for ns in plan.namespaces if ns not in existing_namespaces()]
    if missing:
        raise TestbedError(f"namespace {missing[0]} of the testbed is gone", flag,
                           "Run 'hpcvar testbed down' then 'hpcvar testbed up' again")
    return plan


def qdisc_counters(ns: str, dev: str) -> dict:
    """Counters of the root qdisc of ``dev`` in ``ns`` (bytes, packets, drops, overlimits, backlog)."""
    res = sh(["tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", dev], check=False)
    if res.returncode != 0 or not res.stdout.strip():
        return {}
    for q in json.loads(res.stdout):
        if q.get("root"):
            return {"kind": q.get("kind"), "rate": (q.get("options") or {}).get("rate"),
                    "bytes": q.get("bytes"), "packets": q.get("packets"), "drops": q.get("drops"),
                    "overlimits": q.get("overlimits"), "backlog_bytes": q.get("backlog")}
    return {}


def link_state(ns: str, dev: str) -> str | None:
    res = sh(["ip", "-n", ns, "-j", "link", "show", "dev", dev], check=False)
    if res.returncode != 0 or not res.stdout.strip():
        return None
    links = json.loads(res.stdout)
    return links[0].get("operstate") if links else None


def status(state_path: Path) -> dict:
    """What is recorded and what actually exists, with qdisc counters (for ``testbed status``)."""
    plan = load_state(state_path)
    if plan is None:
        return {"state": str(state_path), "status": "down", "hosts": []}
    present = existing_namespaces()
    hosts = []
    for h in plan.hosts:
        exists = h.ns in present
        hosts.append({
            "name": h.name, "ns": h.ns, "addr": f"{h.addr}/{plan.prefixlen}", "switch": h.switch,
            "rate_bps": h.rate_bps, "exists": exists,
            "cpu": {"period_us": h.cpu_period_us, "quota_us": h.cpu_quota_us, "cgroup": h.cgroup}
            if h.cpu_quota_us else None,
            "link": link_state(h.ns, h.dev) if exists else None,
            "upload": qdisc_counters(h.ns, h.dev) if exists else {},
            "download": qdisc_counters(plan.switch_ns, h.port) if plan.switch_ns in present else {},
        })
    out = {"state": str(state_path), "status": plan.status, "prefix": plan.prefix, "subnet": plan.subnet,
           "switch_ns": plan.switch_ns, "switch_exists": plan.switch_ns in present, "bridges": plan.bridges,
           "ranks_per_host": plan.ranks_per_host, "intra_host": plan.intra_host, "mtu": plan.mtu, "hosts": hosts,
           "noise": [n for n in plan.noise if n.get("until", 0) > time.time()]}
    if plan.slurm:
        from hpcvar.testbed import slurm_daemons as sl

        out["slurm"] = {"conf": plan.slurm["conf"], "controller": f"{plan.slurm['ctl_addr']}:{plan.slurm['ctl_port']}",
                        "nodes": sl.sinfo(plan)}
    if plan.uplink:
        out["uplink"] = {"rate_bps": plan.uplink_rate_bps,
                         "s0_to_s1": qdisc_counters(plan.switch_ns, plan.uplink[0]),
                         "s1_to_s0": qdisc_counters(plan.switch_ns, plan.uplink[1])}
    return out


def leftovers(prefix: str, state_path: Path | None = None) -> dict:
    """Anything carrying ``prefix`` that exists now: namespaces, and links in the root namespace; with
    ``state_path``, also the Slurm directory beside it and any process naming that directory (the daemons)."""
    links = json.loads(sh(["ip", "-j", "link", "show"]).stdout or "[]")
    out = {"namespaces": sorted(n for n in existing_namespaces() if n.startswith(prefix)),
           "links": sorted(link["ifname"] for link in links if link.get("ifname", "").startswith(prefix))}
    from hpcvar.testbed import cgroups

    out["cgroups"] = cgroups.leftovers(prefix)
    if state_path is not None:
        from hpcvar.testbed import slurm_daemons as sl

        out["cgroup_mount"] = [str(p) for p in [cgroups.mount_path(Path(state_path))] if os.path.ismount(p)]

        d = sl.slurm_dir(Path(state_path))
        out["slurm_dir"] = [str(d)] if d.exists() else []
        out["slurm_processes"] = sl._pids_naming(str(d))
        socks = Path(sl.MUNGE_SOCKET_ROOT)
        out["munge_sockets"] = sorted(str(p) for p in socks.glob(f"{prefix}*")) if socks.is_dir() else []
    return out
