"""hpcvar testbed: up, down, status, exec, noise."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from hpcvar.cli.common import DURATION, POSITIVE_DURATION, RATE, print_json, stderr_console, stdout_console
from hpcvar.errors import UsageError

STATE_HELP = "State file of the testbed (default: $HPCVAR_TESTBED_STATE or /run/hpcvar-testbed/state.json)."


def _state(path: str | None) -> Path:
    from hpcvar.testbed.plan import default_state_path

    return Path(path) if path else default_state_path()


def _mbit(bps: float | None) -> str:
    return "-" if bps is None else f"{bps / 1e6:g} Mbit/s"


@click.group("testbed")
def cli() -> None:
    """A virtual cluster of network namespaces with shaped links (needs root).

    Hosts h1..hN are network namespaces joined by a bridge (the switch); each
    link is shaped with tbf in both directions. Run MPI on it with
    '--launcher testbed'; see docs/testbed.md.
    """


@cli.command("up")
@click.option("--hosts", type=click.IntRange(1, 250), default=2, show_default=True, help="Number of hosts.")
@click.option("--rate", type=RATE, default="1gbit", show_default=True,
              help="Rate of every host's link, each direction (tc units: 200mbit, 1gbit).")
@click.option("--rate-of", multiple=True, metavar="HOST=RATE",
              help="Another rate for one host's link, e.g. --rate-of h2=200mbit (repeatable).")
@click.option("--cpu-quota-of", multiple=True, metavar="HOST=SHARE[/PERIOD]",
              help="A slow CPU: HOST's processes together get SHARE of the machine's CPUs, e.g. h2=50% "
                   "(cgroup cpu quota, period 100ms unless given: h2=50%/10ms). Repeatable.")
@click.option("--cpu-noise-of", multiple=True, metavar="HOST=LOST/PERIOD",
              help="Periodic throttling, per-host OS noise: h3=1ms/10ms loses 1 ms of every 10 ms when HOST's "
                   "processes keep the CPUs busy (cgroup cpu quota). Repeatable.")
@click.option("--switches", type=click.IntRange(1, 2), default=1, show_default=True,
              help="2: two bridges joined by an uplink ('across the router'); h1..h(N/2 rounded up) on the first.")
@click.option("--uplink-rate", type=RATE, default=None, help="Rate of the link between two switches (default --rate).")
@click.option("--ranks-per-host", type=click.IntRange(1), default=1, show_default=True,
              help="Default ranks per host for '--launcher testbed'.")
@click.option("--intra-host", type=click.Choice(["shm", "tcp"]), default="shm", show_default=True,
              help="Transport between ranks on the same host: shared memory, or TCP as well.")
@click.option("--mtu", type=click.IntRange(576, 65000), default=1500, show_default=True, help="MTU of every link.")
@click.option("--subnet", default=None, help="Private IPv4 subnet (default: the first of 10.213.7.0/24, "
                                             "10.231.19.0/24, ... that the machine does not use).")
@click.option("--prefix", default="hv-", show_default=True,
              help="Prefix of every namespace and interface created; auto: the first of hv-, hv1-, hv2-, ... that "
                   "no namespace of this machine uses.")
@click.option("--replace", is_flag=True,
              help="Take down the testbed recorded in the state file and replace it (without it, 'up' refuses while "
                   "that testbed is up).")
@click.option("--slurm", is_flag=True,
              help="Also start a real Slurm cluster over the hosts: munged and slurmctld in this namespace, one "
                   "slurmd per host (needs Debian's slurmctld slurmd slurm-client munge); see docs/cluster.md.")
@click.option("--owner-pid", type=click.IntRange(1), default=None, metavar="PID",
              help="Take the testbed down when process PID ends, even by kill -9 (e.g. a script's $$): a detached "
                   "watcher runs 'down' for it.")
@click.option("--state", "state_path", default=None, help=STATE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the testbed as JSON.")
def up_cmd(hosts, rate, rate_of, cpu_quota_of, cpu_noise_of, switches, uplink_rate, ranks_per_host, intra_host, mtu,
           subnet, prefix, replace, slurm, owner_pid, state_path, as_json):
    """Create the testbed; refused while the one its state file records is up (--replace)."""
    from hpcvar.testbed import cgroups, netns
    from hpcvar.testbed.plan import make_plan, parse_rate_of, with_cpu_faults

    if uplink_rate is not None and switches != 2:
        raise UsageError("--uplink-rate needs --switches 2", "--uplink-rate", "Add --switches 2 or drop it")
    ncpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    cpu_of = cgroups.parse_cpu_quota_of(cpu_quota_of, hosts, ncpus)
    noisy = cgroups.parse_cpu_noise_of(cpu_noise_of, hosts, ncpus)
    both = sorted(set(cpu_of) & set(noisy))
    if both:
        raise UsageError(f"{both[0]} has both a CPU quota and CPU noise", "--cpu-noise-of",
                         "Give one CPU fault per host")
    if prefix == "auto":
        netns.check_root()
        prefix = netns.free_prefix(_state(state_path))
    plan = make_plan(hosts, rate, parse_rate_of(rate_of, hosts), switches, uplink_rate, ranks_per_host, prefix,
                     intra_host=intra_host, mtu=mtu)
    plan = with_cpu_faults(plan, {**cpu_of, **noisy})
    err = stderr_console()
    plan = netns.up(plan, _state(state_path), subnet, log=None if as_json else (lambda m: err.print(m)),
                    slurm=slurm, replace=replace)
    if owner_pid is not None:
        netns.watch_owner(_state(state_path), owner_pid)
    if as_json:
        print_json(netns.status(_state(state_path)))
        return
    out = stdout_console()
    out.print(f"testbed up: {len(plan.hosts)} hosts on {plan.subnet}, prefix {plan.prefix}, state in "
              f"{_state(state_path)}")
    if plan.slurm:
        out.print(f"slurm up: {len(plan.hosts)} idle nodes ({', '.join(h.ns for h in plan.hosts)}); to use it:")
        out.print(f'  eval "$(hpcvar testbed env{_state_flag(state_path)})"   # or: export SLURM_CONF='
                  f'{plan.slurm["conf"]}')
        out.print("  sinfo; hpcvar bench latency --launcher srun --np 2 --ranks-per-node 1 --sizes 4MiB")
    else:
        out.print("try: hpcvar bench latency --launcher testbed --sizes 8,4MiB")


@cli.command("down")
@click.option("--state", "state_path", default=None, help=STATE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print what was removed as JSON.")
def down_cmd(state_path, as_json):
    """Remove exactly what 'up' recorded (idempotent; works after an interrupted 'up')."""
    from hpcvar.testbed import netns

    removed = netns.down(_state(state_path))
    if as_json:
        print_json({"removed_namespaces": removed})
    elif removed:
        stdout_console().print(f"removed {len(removed)} namespaces: {' '.join(removed)}")
    else:
        stdout_console().print("no testbed was up")


def _state_flag(path: str | None) -> str:
    return f" --state {path}" if path else ""


@cli.command("watch", hidden=True)
@click.option("--state", "state_path", required=True)
@click.option("--pid", type=int, required=True)
@click.option("--start", required=True)
def watch_cmd(state_path, pid, start):
    """The watcher of 'up --owner-pid': waits for the owner to end, then takes the testbed down."""
    from hpcvar.testbed import netns

    if netns.wait_for_owner(Path(state_path), pid, start):
        netns.down(Path(state_path))


@cli.command("env")
@click.option("--state", "state_path", default=None, help=STATE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the variables as a JSON object.")
def env_cmd(state_path, as_json):
    """Shell exports for using the testbed from outside hpcvar: eval "$(hpcvar testbed env)".

    SLURM_CONF of its Slurm (up --slurm), HPCVAR_TESTBED_STATE when it is not the default, and the variables
    that keep MPI ranks started by srun on TCP over the shaped links (MPICH: UCX_TLS, FI_PROVIDER; Open MPI:
    OMPI_MCA_pml, OMPI_MCA_btl and the testbed subnet), since the hosts share this machine's /dev/shm.
    """
    import shlex

    from hpcvar.testbed import slurm_daemons as sl
    from hpcvar.testbed.launcher import transport_env
    from hpcvar.testbed.netns import require_up
    from hpcvar.testbed.plan import DEFAULT_STATE

    path = _state(state_path)
    plan = require_up(path)
    env = {**sl.env(plan), **transport_env(plan)}
    if str(path) != DEFAULT_STATE:
        env["HPCVAR_TESTBED_STATE"] = str(path)
    if as_json:
        print_json(env)
        return
    for k, v in env.items():
        click.echo(f"export {k}={shlex.quote(v)}")


@cli.command("status")
@click.option("--state", "state_path", default=None, help=STATE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def status_cmd(state_path, as_json):
    """Hosts, addresses, rates and the qdisc counters of every link."""
    from hpcvar.testbed import netns

    netns.check_root()
    st = netns.status(_state(state_path))
    if as_json:
        print_json(st)
        return
    render_status(stdout_console(), st)


def _cpu(c: dict | None) -> str:
    if not c:
        return "all"
    return f"{c['quota_us'] / 1000:g} ms per {c['period_us'] / 1000:g} ms"


def render_status(console, st: dict) -> None:
    from rich.table import Table

    if st["status"] == "down":
        console.print(f"no testbed is up ({st['state']})")
        return
    console.print(f"testbed {st['status']}: prefix {st['prefix']}, subnet {st['subnet']}, "
                  f"switch namespace {st['switch_ns']} ({'present' if st['switch_exists'] else 'MISSING'}), "
                  f"intra-host {st['intra_host']}, mtu {st['mtu']}")
    t = Table("host", "namespace", "address", "switch", "rate", "CPU", "link", "up: sent / drops",
              "down: sent / drops")
    for h in st["hosts"]:
        def cnt(q):
            return f"{q['bytes'] / 1e6:.1f} MB / {q['drops']}" if q.get("bytes") is not None else "-"

        t.add_row(h["name"], h["ns"] + ("" if h["exists"] else " (MISSING)"), h["addr"], str(h["switch"]),
                  _mbit(h["rate_bps"]), _cpu(h.get("cpu")), str(h["link"] or "-"), cnt(h["upload"]),
                  cnt(h["download"]))
    console.print(t)
    if "uplink" in st:
        console.print(f"uplink between switches: {_mbit(st['uplink']['rate_bps'])}")
    if "slurm" in st:
        sl = st["slurm"]
        t = Table("node", "state", "CPUs", "address", "partition", title=f"Slurm (controller {sl['controller']}, "
                                                                          f"SLURM_CONF={sl['conf']})")
        for n in sl["nodes"]:
            if "error" in n:
                console.print(f"sinfo failed: {n['error']}")
                continue
            t.add_row(n["node"], n["state"], str(n["cpus"]), n["addr"], n["partition"])
        console.print(t)
    for n in st.get("noise", []):
        console.print(f"noise running: {n.get('flows')} (pids {n.get('pids')})")


@cli.command("exec", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("host")
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--state", "state_path", default=None, help=STATE_HELP)
def exec_cmd(host, cmd, state_path):
    """Run CMD inside HOST (its namespace and hostname): hpcvar testbed exec h2 -- ip addr."""
    from hpcvar.testbed.netns import require_up
    from hpcvar.testbed.plan import in_host_argv

    cmd = list(cmd[1:] if cmd and cmd[0] == "--" else cmd)
    if not cmd:
        raise UsageError("no command to run", "CMD", "Example: hpcvar testbed exec h2 -- ip addr")
    plan = require_up(_state(state_path))
    argv = in_host_argv(plan.host(host), cmd)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp(argv[0], argv)


@cli.command("noise")
@click.option("--from", "src", multiple=True, required=True, help="Sending host (repeatable: N-into-1).")
@click.option("--to", "dst", required=True, help="Receiving host.")
@click.option("--rate", type=RATE, default=None, help="Rate of each sender during on periods (default: as fast "
                                                      "as the link takes).")
@click.option("--on", "on_s", type=POSITIVE_DURATION, default="1s", show_default=True, help="Length of on periods.")
@click.option("--off", "off_s", type=DURATION, default="0s", show_default=True,
              help="Length of off periods (0: always on).")
@click.option("--duration", type=POSITIVE_DURATION, default="10s", show_default=True,
              help="Total length; the traffic stops by itself after it.")
@click.option("--port", type=click.IntRange(1024, 65000), default=47000, show_default=True, help="First TCP port.")
@click.option("--background", is_flag=True, help="Return at once; the traffic still stops after --duration "
                                                 "('testbed down' stops it earlier).")
@click.option("--state", "state_path", default=None, help=STATE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def noise_cmd(src, dst, rate, on_s, off_s, duration, port, background, state_path, as_json):
    """Bounded cross traffic between testbed hosts, e.g. --from h3 --to h1 --rate 300mbit --on 50ms --off 200ms.

    In the foreground, prints what each flow sent and the rate its receiver
    measured (after 0.5 s of slow start).
    """
    from hpcvar.testbed.noise import Flow, run_flows

    flows = [Flow(s, dst, rate or 0.0, on_s, off_s) for s in src]
    res = run_flows(_state(state_path), flows, duration, port, background=background)
    if as_json:
        print_json(res)
        return
    out = stdout_console()
    if res["background"]:
        out.print(f"noise running in the background until it stops by itself (pids {res['pids']})")
        return
    for f in res["flows"]:
        out.print(f"{f['from']} -> {f['to']}: sent {f['sent_bytes'] / 1e6:.1f} MB, received at "
                  f"{_mbit(f['measured_bps'])} over {f['window_s']:.1f} s")
