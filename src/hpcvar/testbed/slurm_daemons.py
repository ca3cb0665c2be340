"""A real Slurm cluster over the testbed's hosts (``hpcvar testbed up --slurm``), for rehearsing hpcvar on
a cluster on one machine (docs/testbed.md, "Slurm on the testbed"; docs/cluster.md).

What runs (everything under ``<state dir>/slurm``, fresh at every ``up``):

- ``munged`` with its own key and socket (``AuthInfo=socket=...``), in the root namespace; its socket works
  across network namespaces (it is a file);
- ``slurmctld`` in the root namespace, listening on an address of the testbed's first switch: a veth from
  the root namespace into the bridge (``<prefix>root`` / ``<prefix>rp``, not shaped), so that srun, sbatch
  and sinfo run from the root namespace and the slurmds reach the controller;
- one ``slurmd`` per host, inside the host's network namespace with the host's own hostname (a private UTS
  namespace, ``nsenter --net`` rather than ``ip netns exec``, which remounts /sys and hides the cgroups
  slurmd needs); the node is named after that hostname, which is also what MPI sees, and its address is the
  host's, so ranks on two nodes talk over the shaped links.

The plan (state file) records the directory, the ports, the controller's address and the root-side link
*before* anything starts, so ``down`` removes it all, also after a killed ``up``: ``scontrol shutdown``, then
every process whose command line names this cluster's directory, then the link and the directory.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from hpcvar.errors import HpcvarError, MissingToolError
from hpcvar.testbed.plan import HOST_DEV, Plan

TOOLS = ("munged", "mungekey", "slurmctld", "slurmd", "srun", "sbatch", "sinfo", "scontrol", "nsenter", "unshare")
PACKAGES = "slurmctld slurmd slurm-client munge libpmix-dev"
READY_TIMEOUT_S = 30.0
# CPUs each node declares: the machine's cores, at least 4, so that a step may put up to 4 ranks on a node
# (the paper's sharing schemes need 3 ends on one node); the namespaces share the machine's cores anyway,
# which hpcvar's own warnings say
MIN_NODE_CPUS = 4
MUNGE_SOCKET_ROOT = "/run/hpcvar-munge"
# run by sh inside the host's network namespace and new UTS and mount namespaces: $0 node, $1 slurm.conf,
# $2 an empty directory that holds the cgroup tree while /sys is mounted afresh for this network namespace,
# $3 the cgroup.procs of the host's cpu cgroup when it has a CPU fault (empty otherwise): slurmd joins it, so
# every step it starts runs there (testbed.cgroups)
SLURMD_SH = ('set -e; [ -z "$3" ] || echo $$ > "$3"; '
             'mount --make-rslave /; mount --rbind /sys/fs/cgroup "$2"; umount -l /sys; '
             'mount -t sysfs sysfs /sys; mount --move "$2" /sys/fs/cgroup; hostname "$0"; '
             'exec slurmd -f "$1" -N "$0"')


class SlurmError(HpcvarError):
    """The testbed's Slurm cannot be started or stopped."""

    def __init__(self, what: str):
        super().__init__(what, "--slurm", "Run 'hpcvar testbed down' (it stops what was started) and look at the "
                                          "logs under the testbed's slurm/log directory")


def check_tools() -> None:
    """Everything ``up --slurm`` needs, before anything is created."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise MissingToolError(f"'{missing[0]}' is not installed (Slurm on the testbed needs {', '.join(missing)})",
                               "--slurm", f"Install Debian's Slurm: apt-get install {PACKAGES}")
    if not Path("/sys/fs/cgroup").is_dir() or not any(Path("/sys/fs/cgroup").iterdir()):
        raise MissingToolError("no cgroup file system is mounted on /sys/fs/cgroup, which slurmd needs", "--slurm",
                               "Mount one (mount -t cgroup2 none /sys/fs/cgroup) and try again")


def slurm_dir(state_path: Path) -> Path:
    return state_path.parent / "slurm"


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def plan_slurm(plan: Plan, state_path: Path) -> dict:
    """The Slurm part of the plan: directory, ports, controller address, the root namespace's link."""
    import ipaddress

    net = ipaddress.ip_network(plan.subnet)
    ctl_addr = str(list(net.hosts())[-1])  # .254 of a /24: never a host's (hosts are numbered from .1)
    ctl_port, d_port = _free_ports(2)
    d = slurm_dir(state_path)
    import hashlib

    tag = hashlib.sha1(str(d.resolve()).encode()).hexdigest()[:10]
    # slurmctld runs only where the hostname is the controller's name: this (root namespace) host's short name
    return {"dir": str(d), "conf": str(d / "slurm.conf"), "ctl_host": socket.gethostname().split(".")[0],
            "ctl_addr": ctl_addr, "ctl_port": ctl_port,
            # munged wants every folder above its socket open to all (x): not so under a private temp directory
            "socket_dir": f"{MUNGE_SOCKET_ROOT}/{plan.prefix}{tag}",
            "slurmd_port": d_port, "root_link": f"{plan.prefix}{HOST_DEV}", "root_peer": f"{plan.prefix}rp",
            "cluster": "hpcvar" + plan.prefix.rstrip("-"), "cpus": max(os.cpu_count() or 1, MIN_NODE_CPUS),
            "first_job_id": first_job_id(), "status": "planned"}


# Every 'up' starts a fresh controller, and job ids would restart at 1: MPI libraries name their shared-memory
# segments after the job (MPICH: /dev/shm/mpich_shm_<hash of the PMI kvs name kvs_<job>_<step>>_<node>), so a
# segment that a killed job left behind collides with the next testbed's job of the same id ("Out of memory"
# in MPIDI_POSIX_comm_bootstrap, with two ranks on one node). A random first job id makes that unlikely.
MAX_FIRST_JOB_ID = 60_000_000  # below Slurm's largest job id (0x03ff0000)


def first_job_id() -> int:
    import secrets

    return 1000 + secrets.randbelow(MAX_FIRST_JOB_ID)


def conf_text(plan: Plan, s: dict) -> str:
    """slurm.conf of the testbed cluster (the configuration measured to work: ../shared/CLUSTER-FACTS.md)."""
    d = s["dir"]
    lines = [
        "# generated by 'hpcvar testbed up --slurm'; removed by 'hpcvar testbed down'",
        f"ClusterName={s['cluster']}",
        f"SlurmctldHost={s['ctl_host']}({s['ctl_addr']})", "MailProg=/bin/true",
        "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={s['socket_dir']}/munge.socket.2",
        f"SlurmctldPort={s['ctl_port']}", f"SlurmdPort={s['slurmd_port']}",
        f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool/%n", f"TmpFS={d}/tmp/%n",
        f"SlurmctldPidFile={d}/run/slurmctld.pid", f"SlurmdPidFile={d}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log", f"SlurmdLogFile={d}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "SlurmdParameters=config_overrides",
        "ReturnToService=2", "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none", "JobCompType=jobcomp/none",
        "SlurmctldTimeout=30", "SlurmdTimeout=30", "InactiveLimit=0", "KillWait=5", "MinJobAge=30",
        f"FirstJobId={s.get('first_job_id', 1)}",
    ]
    for h in plan.hosts:
        lines.append(f"NodeName={h.ns} NodeHostname={h.ns} NodeAddr={h.addr} CPUs={s['cpus']} State=UNKNOWN")
    lines.append("PartitionName=testbed Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def env(plan: Plan) -> dict[str, str]:
    """SLURM_CONF of the testbed's cluster and HYDRA_IFACE (empty without one).

    MPICH's hydra (how ``--launcher srun`` starts MPICH) tells its proxies to connect back to its own host name,
    which the testbed's hosts cannot resolve; HYDRA_IFACE makes it give the address of that interface instead. The
    root namespace's link to the switch has the hosts' interface name (``<prefix>eth0``), so one value serves
    mpiexec wherever it runs: in the root namespace (srun, salloc) or on a host (an sbatch job's script)."""
    if not plan.slurm:
        return {}
    return {"SLURM_CONF": plan.slurm["conf"], "HYDRA_IFACE": plan.slurm["root_link"]}


def _run(argv: list[str], env_extra: dict | None = None, timeout: float = 20.0) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env_extra or {})})
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"'{argv[0]}' did not answer within {timeout:.0f} s")


def _tail(path: Path, n: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def start(plan: Plan, sh, say) -> None:
    """Start munged, slurmctld and every slurmd (``plan.slurm`` recorded beforehand); wait until every node is
    idle. ``sh`` runs one ip/tc command (testbed.netns.sh)."""
    s = plan.slurm
    d = Path(s["dir"])
    shutil.rmtree(d, ignore_errors=True)  # a fresh state every up: a reused one can report idle too early
    for sub in ("munge", "state", "run", "log", "spool", "tmp", "mnt"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "munge").chmod(0o755)  # munged refuses a socket folder without execute permission for all
    for h in plan.hosts:
        (d / "spool" / h.ns).mkdir(exist_ok=True)
        (d / "tmp" / h.ns).mkdir(exist_ok=True)
    Path(s["conf"]).write_text(conf_text(plan, s))
    # the root namespace's foot on the first switch: the controller listens there, srun connects from there
    sw = plan.switch_ns
    say(f"slurm: root namespace on the switch as {s['ctl_addr']} ({s['root_link']})")
    sh(["ip", "link", "add", s["root_link"], "type", "veth", "peer", "name", s["root_peer"], "netns", sw])
    sh(["ip", "-n", sw, "link", "set", s["root_peer"], "master", plan.bridges[0], "up"])
    sh(["ip", "addr", "add", f"{s['ctl_addr']}/{plan.prefixlen}", "dev", s["root_link"]])
    sh(["ip", "link", "set", s["root_link"], "up"])
    key = d / "munge" / "munge.key"
    res = _run(["mungekey", "--create", f"--keyfile={key}"])
    if res.returncode != 0:
        raise SlurmError(f"mungekey failed: {res.stderr.strip()}")
    key.chmod(0o600)
    m = d / "munge"
    sock = Path(s["socket_dir"])
    sock.mkdir(parents=True, exist_ok=True)
    for folder in (sock.parent, sock):
        folder.chmod(0o755)
    res = _run(["munged", f"--key-file={key}", f"--socket={sock}/munge.socket.2", f"--pid-file={m}/munged.pid",
                f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed"])
    if res.returncode != 0:
        raise SlurmError(f"munged did not start: {res.stderr.strip() or _tail(m / 'munged.log')}")
    conf = {"SLURM_CONF": s["conf"]}
    res = _run(["slurmctld", "-f", s["conf"]], conf)
    if res.returncode != 0:
        raise SlurmError(f"slurmctld did not start: {res.stderr.strip()}\n{_tail(d / 'log' / 'slurmctld.log')}")
    for h in plan.hosts:
        # inside the host's network namespace, with its hostname and a /sys of that namespace (UCX finds its
        # network devices in /sys/class/net) that keeps the cgroup tree slurmd needs
        cg = d / "mnt" / h.ns
        cg.mkdir(parents=True, exist_ok=True)
        res = _run(["nsenter", f"--net=/run/netns/{h.ns}", "unshare", "--uts", "--mount", "--", "sh", "-c",
                    SLURMD_SH, h.ns, s["conf"], str(cg), f"{h.cgroup}/cgroup.procs" if h.cgroup else ""], conf)
        if res.returncode != 0:
            raise SlurmError(f"slurmd of {h.name} did not start: {res.stderr.strip()}\n"
                             f"{_tail(d / 'log' / f'slurmd-{h.ns}.log')}")
    say(f"slurm: munged, slurmctld and {len(plan.hosts)} slurmd started; waiting for the nodes")
    deadline = time.monotonic() + READY_TIMEOUT_S
    states: dict[str, str] = {}
    ctld = d / "run" / "slurmctld.pid"
    while time.monotonic() < deadline:
        if ctld.is_file() and not any(_alive(p) for p in _pidfile_pids(d) if p == _read_pid(ctld)):
            raise SlurmError(f"slurmctld stopped; its log:\n{_tail(d / 'log' / 'slurmctld.log')}")
        states = node_states(plan)
        if len(states) == len(plan.hosts) and all(v.startswith("idle") for v in states.values()):
            return
        time.sleep(0.1)
    seen = states or "sinfo answered nothing"
    raise SlurmError(f"the Slurm nodes were not idle within {READY_TIMEOUT_S:.0f} s ({seen}); slurmctld log:\n"
                     f"{_tail(d / 'log' / 'slurmctld.log')}")


def node_states(plan: Plan) -> dict[str, str]:
    """Node -> state as Slurm sees it (``sinfo -N``); empty when the controller does not answer."""
    res = _run(["sinfo", "--noheader", "-N", "-o", "%N %t"], env(plan), timeout=10)
    if res.returncode != 0:
        return {}
    out = {}
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = parts[1]
    return out


def sinfo(plan: Plan) -> list[dict]:
    """Nodes as Slurm sees them: name, state, CPUs, address (for ``testbed status``)."""
    res = _run(["sinfo", "--noheader", "-N", "-o", "%N|%t|%c|%o|%P"], env(plan), timeout=10)
    if res.returncode != 0:
        return [{"error": res.stderr.strip() or f"sinfo exited {res.returncode}"}]
    rows = []
    for line in res.stdout.splitlines():
        parts = line.split("|")
        if len(parts) == 5:
            rows.append({"node": parts[0], "state": parts[1], "cpus": int(parts[2]) if parts[2].isdigit() else None,
                         "addr": parts[3], "partition": parts[4]})
    return rows


def _pids_naming(text: str) -> list[int]:
    """Processes whose command line contains ``text`` (this cluster's directory)."""
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            if text.encode() in (p / "cmdline").read_bytes():
                pids.append(int(p.name))
        except OSError:
            continue
    return pids


def _read_pid(f: Path) -> int | None:
    try:
        return int(f.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _pidfile_pids(d: Path) -> list[int]:
    out = []
    for f in [*d.glob("run/*.pid"), d / "munge" / "munged.pid"]:
        try:
            out.append(int(f.read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def daemons(plan: Plan) -> list[int]:
    """Processes of this testbed's cluster still running (munged, slurmctld, slurmd, slurmstepd)."""
    if not plan.slurm:
        return []
    d = Path(plan.slurm["dir"])
    pids = set(_pids_naming(str(d)))
    if plan.slurm.get("socket_dir"):
        pids.update(_pids_naming(plan.slurm["socket_dir"]))
    pids.update(p for p in _pidfile_pids(d) if _alive(p) and _is_slurm_or_munge(p))
    return sorted(p for p in pids if _alive(p))


def _is_slurm_or_munge(pid: int) -> bool:
    try:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return False
    return exe in ("munged", "slurmctld", "slurmd", "slurmstepd")


def stop(plan: Plan, say) -> None:
    """Stop every daemon of the cluster and remove its directory and link (idempotent)."""
    s = plan.slurm
    if not s:
        return
    d = Path(s["dir"])
    if Path(s["conf"]).is_file() and shutil.which("scontrol"):
        _run(["scontrol", "shutdown"], env(plan), timeout=10)
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and any(_is_slurm_daemon(p) for p in daemons(plan)):
            time.sleep(0.05)
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 2.0)):
        pids = daemons(plan)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.05)
    left = daemons(plan)
    if left:
        say(f"slurm: processes {left} did not stop")
    subprocess.run(["ip", "link", "del", s["root_link"]], capture_output=True, timeout=20)
    sock = Path(s.get("socket_dir", ""))
    if sock.parent == Path(MUNGE_SOCKET_ROOT) and sock.is_dir():
        shutil.rmtree(sock, ignore_errors=True)
    if d.name == "slurm" and d.is_dir():  # never anything but the directory this module made
        shutil.rmtree(d, ignore_errors=True)


def _is_slurm_daemon(pid: int) -> bool:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")) in ("slurmctld", "slurmd")
    except OSError:
        return False


def to_json(plan: Plan) -> str:
    return json.dumps(plan.slurm, indent=1)
