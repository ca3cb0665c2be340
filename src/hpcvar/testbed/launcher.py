"""The ``testbed`` launcher: MPI ranks on testbed hosts, their traffic forced through the shaped links.

How (both MPI families; see docs/testbed.md):

- mpiexec itself runs inside the first host used (``ip netns exec`` with its own
  hostname), so every daemon it starts can reach it over the testbed network;
  the other hosts are reached through the testbed's ssh-like agent
  (hydra ``-launcher rsh -launcher-exec AGENT``; Open MPI 5
  ``--prtemca plm_ssh_agent AGENT``, 4.x ``--mca plm_rsh_agent AGENT``).
- Hosts are given by address with a slot count; placement is done by mpiexec:
  ``map_by="slot"`` fills a host before the next (rank r on host r // K),
  ``map_by="host"`` deals ranks round-robin (rank r on host r % H), with K ranks
  per host and H = ceil(np / K) hosts.
- Every host shares the machine's /dev/shm, so shared-memory transports would
  bypass the links: MPICH gets ``UCX_TLS=tcp,self`` (the ch4:ucx netmod; without
  it UCX reaches other hosts through shared memory) and ``FI_PROVIDER=tcp`` (the
  ch4:ofi netmod), and ``MPIR_CVAR_CH4_NETMOD=ofi`` for programs that say they
  receive from MPI_ANY_SOURCE (``LaunchSpec.any_source``) when the library has ofi
  (MPICH 5.0.2's ch4:ucx on tcp,self loses MPI_ANY_SOURCE receives that two
  senders compete for, and its ch4:ofi hangs with hundreds of unexpected messages);
  Open MPI gets ``--mca pml ob1 --mca btl tcp,sm,self`` (4.x: ``vader`` for ``sm``) with
  ``btl_tcp_if_include`` and ``oob_tcp_if_include`` set to the testbed subnet.
  Ranks on the same host use shared memory (hosts have distinct hostnames, so
  the MPI libraries see them as distinct nodes) unless the testbed was built with
  ``--intra-host tcp`` (MPICH ``MPIR_CVAR_NOLOCAL=1``, Open MPI ``btl tcp,self``).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from hpcvar.errors import HpcvarError, UsageError
from hpcvar.launch.base import Launcher, LaunchSpec
from hpcvar.launch.launchers import ROOT_ENV_OPENMPI, is_root
from hpcvar.launch.mpi import MpiFlavor, default_mpiexec, detect_flavor
from hpcvar.testbed.netns import TestbedError, require_up
from hpcvar.testbed.plan import Plan, default_state_path, in_host_argv, load_state

MPICH_TCP_ENV = {"UCX_TLS": "tcp,self", "FI_PROVIDER": "tcp"}


class TestbedLauncher(Launcher):
    """mpiexec started inside a testbed host, ranks placed on testbed hosts."""

    name = "testbed"
    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, map_by: str | None = "slot", ranks_per_host: int | None = None,
                 state_path: str | Path | None = None, plan: Plan | None = None,
                 mpiexec: str | Path | None = None, flavor: MpiFlavor | None = None, root: bool | None = None):
        if map_by not in (None, "slot", "host"):
            raise UsageError(f"unknown placement '{map_by}'", "--map-by", "Use slot or host")
        if ranks_per_host is not None and ranks_per_host < 1:
            raise UsageError("ranks per host must be at least 1", "--ranks-per-node", "Use 1 or more")
        self.map_by = map_by or "slot"
        self.ranks_per_host = ranks_per_host
        self.state_path = Path(state_path) if state_path else default_state_path()
        self._plan = plan
        self._mpiexec = str(mpiexec) if mpiexec else None
        self._flavor = flavor
        self.root = is_root() if root is None else root

    # --- what the launcher works with -------------------------------------------------------------------
    @property
    def plan(self) -> Plan:
        if self._plan is None:
            self._plan = load_state(self.state_path)
            if self._plan is None:
                raise TestbedError(f"no testbed is up (no state file {self.state_path})", "--launcher",
                                   "Start one first: sudo hpcvar testbed up --hosts 2 --rate 1gbit")
        return self._plan

    @property
    def mpiexec(self) -> str:
        if self._mpiexec is None:
            self._mpiexec = str(default_mpiexec())
        return self._mpiexec

    @property
    def flavor(self) -> MpiFlavor:
        if self._flavor is None:
            self._flavor = detect_flavor(self.mpiexec)
        return self._flavor

    def per_host(self, spec: LaunchSpec | None = None) -> int:
        """Ranks per host: the launcher's, else the spec's --ranks-per-node, else the testbed's."""
        if self.ranks_per_host:
            return self.ranks_per_host
        if spec is not None and spec.ranks_per_node:
            return spec.ranks_per_node
        return max(1, self.plan.ranks_per_host)

    def placement(self, spec: LaunchSpec) -> list[str]:
        """The host name of every rank, in rank order (what mpiexec is asked to do)."""
        k = self.per_host(spec)
        nhosts = math.ceil(spec.np / k)
        hosts = self.plan.hosts
        if nhosts > len(hosts):
            raise UsageError(f"{spec.np} ranks at {k} per host need {nhosts} hosts; the testbed has {len(hosts)}",
                             "--np", f"Use --np {k * len(hosts)} or less, raise --ranks-per-node, or bring the "
                                     f"testbed up with --hosts {nhosts}")
        alone = self._root_alone(spec)
        if alone:
            return alone
        if self.map_by == "host":
            return [hosts[r % nhosts].name for r in range(spec.np)]
        return [hosts[r // k].name for r in range(spec.np)]

    def _root_alone(self, spec: LaunchSpec) -> list[str] | None:
        """With ``spec.root_alone``: rank 0 alone on the first host, the others K to a host on the next hosts
        (None when they do not fit, or ranks are dealt round-robin: then the usual placement)."""
        k, hosts = self.per_host(spec), self.plan.hosts
        if not spec.root_alone or spec.np < 2 or self.map_by != "slot" or 1 + math.ceil((spec.np - 1) / k) > len(hosts):
            return None
        return [hosts[0].name] + [hosts[1 + r // k].name for r in range(spec.np - 1)]

    # --- the Launcher interface -------------------------------------------------------------------------
    def slots(self) -> int | None:
        """Ranks that fit: one core each, whichever host they are on (all hosts share this machine's cores)."""
        return os.cpu_count()

    def command(self, spec: LaunchSpec) -> tuple[list[str], dict[str, str]]:
        plan = self.plan
        ranks = self.placement(spec)
        used = [h for h in plan.hosts if h.name in set(ranks)]
        counts = {h.name: ranks.count(h.name) for h in used}
        family = self.flavor.family
        env = dict(spec.env)
        if family == "openmpi":
            mpi = self._openmpi(spec, plan, used, counts, env)
        elif family == "mpich":
            mpi = self._mpich(spec, plan, used, counts, env)
        else:
            raise UsageError(f"cannot tell which MPI '{self.mpiexec}' belongs to", "--launcher",
                             "The testbed launcher supports MPICH (hydra) and Open MPI mpiexec")
        mpi += spec.extra_args
        mpi += [str(spec.exe), *spec.args]
        return in_host_argv(used[0], mpi), env

    def _mpich(self, spec, plan, used, counts, env) -> list[str]:
        tcp = dict(MPICH_TCP_ENV)
        if spec.any_source and "ofi" in self.flavor.devices and "MPIR_CVAR_CH4_NETMOD" not in os.environ:
            # ch4:ucx restricted to tcp,self loses MPI_ANY_SOURCE receives that several senders compete
            # for; ch4:ofi cannot hold hundreds of unexpected messages (queues unexpected hangs): so ofi
            # only for the programs that need it (docs/testbed.md)
            tcp["MPIR_CVAR_CH4_NETMOD"] = "ofi"
        if plan.intra_host == "tcp":
            tcp["MPIR_CVAR_NOLOCAL"] = "1"
        hosts = ",".join(f"{h.addr}:{counts[h.name] if self.map_by == 'slot' else 1}" for h in used)
        argv = [self.mpiexec, "-launcher", "rsh", "-launcher-exec", plan.agent, "-hosts", hosts,
                "-n", str(spec.np), "-bind-to", "none"]
        for k, v in {**tcp, **spec.env}.items():
            argv += ["-genv", k, v]
        env.update(tcp)
        return argv

    def _openmpi(self, spec, plan, used, counts, env) -> list[str]:
        agent_opt = ["--prtemca", "plm_ssh_agent"] if self.flavor.major >= 5 else ["--mca", "plm_rsh_agent"]
        hosts = ",".join(f"{h.addr}:{counts[h.name]}" for h in used)
        # the shared-memory BTL is "sm" in Open MPI 5 and "vader" in 4.x (where "sm" is a dead alias that
        # fails MPI_Init: "btl sm is dead")
        shm = "sm" if self.flavor.major >= 5 else "vader"
        btl = "tcp,self" if plan.intra_host == "tcp" else f"tcp,{shm},self"
        argv = [self.mpiexec, *agent_opt, plan.agent, "--host", hosts, "-n", str(spec.np),
                "--map-by", "node" if self.map_by == "host" else "slot", "--bind-to", "none",
                "--mca", "pml", "ob1", "--mca", "btl", btl,
                "--mca", "btl_tcp_if_include", plan.subnet, "--mca", "oob_tcp_if_include", plan.subnet]
        if spec.np > (os.cpu_count() or 1):
            argv.append("--oversubscribe")
        if self.root:
            env.update(ROOT_ENV_OPENMPI)
        for k, v in spec.env.items():
            argv += ["-x", f"{k}={v}"]
        return argv

    def expected_rpn(self, spec: LaunchSpec) -> int | None:
        # the root placed alone is not K to a host: the program's hosts header shows the placement instead
        return None if self._root_alone(spec) else self.per_host(spec)

    def nodes(self) -> int | None:
        return len(self.plan.hosts)

    def prepare(self, spec: LaunchSpec) -> None:
        """Refuse to launch unless the testbed is up and the ranks fit on its hosts."""
        self._plan = require_up(self.state_path, "--launcher")
        self.placement(spec)

    def describe(self) -> dict:
        """Topology, rates and transport, for run metadata."""
        d: dict = {"launcher": self.name, "map_by": self.map_by, "ranks_per_host": self.ranks_per_host,
             "state": str(self.state_path)}
        try:
            plan = self.plan
        except TestbedError:
            d["testbed"] = None
            return d
        d["testbed"] = {
            "prefix": plan.prefix, "subnet": plan.subnet, "status": plan.status, "switches": len(plan.bridges),
            "uplink_rate_bps": plan.uplink_rate_bps, "intra_host": plan.intra_host, "mtu": plan.mtu,
            "ranks_per_host": plan.ranks_per_host, "shaping": "tbf both directions (host upload, switch port "
                                                              "download)",
            "hosts": [{"name": h.name, "addr": h.addr, "switch": h.switch, "rate_bps": h.rate_bps,
                       **({"cpu_period_us": h.cpu_period_us, "cpu_quota_us": h.cpu_quota_us} if h.cpu_quota_us
                          else {})} for h in plan.hosts]}
        try:
            d.update(mpiexec=self.mpiexec, mpi_family=self.flavor.family, mpi_version=self.flavor.version)
        except HpcvarError as e:  # metadata never fails a run; the launch itself reports the real error
            d["mpiexec_error"] = str(e)
        return d


def transport_env(plan: Plan) -> dict[str, str]:
    """The environment that keeps MPI ranks started by someone else (srun on the testbed's Slurm) on TCP over
    the shaped links, for both MPI families: what ``hpcvar testbed env`` exports. The hosts share this
    machine's /dev/shm, so without it MPICH's UCX and Open MPI's shared-memory transports would bypass the
    links between namespaces."""
    env = dict(MPICH_TCP_ENV)
    btl = "tcp,self"  # the same for Open MPI 4 (vader) and 5 (sm): ranks on one host talk TCP too
    env.update({"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": btl, "OMPI_MCA_btl_tcp_if_include": plan.subnet,
                "OMPI_MCA_oob_tcp_if_include": plan.subnet})
    if plan.intra_host == "tcp":
        env["MPIR_CVAR_NOLOCAL"] = "1"
    return env
