"""Cross traffic between testbed hosts (``hpcvar testbed noise``) and flow measurements.

Each flow is a receiver in the destination host and a sender in the source
host (hpcvar.testbed.traffic, started with ``ip netns exec``); both stop by
themselves after the duration, so noise is always bounded in time, and the
traffic never leaves the testbed (its hosts have no route out).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcvar.errors import UsageError
from hpcvar.launch.guard import preexec
from hpcvar.testbed.netns import TestbedError, require_up
from hpcvar.testbed.plan import Host, Plan, save_state

BASE_PORT = 47000
MAX_DURATION_S = 24 * 3600.0
RECV_SLACK_S = 1.0  # the receiver outlives its senders by this much, to see their last bytes


@dataclass
class Flow:
    src: str  # host name
    dst: str
    rate_bps: float = 0.0  # during on periods; 0: as fast as the link takes
    on_s: float = 1.0
    off_s: float = 0.0


def _py(host: Host, args: list[str]) -> list[str]:
    """A traffic process inside ``host`` (in its cpu cgroup when it has a CPU fault: it is the host's process)."""
    from hpcvar.testbed.cgroups import join_argv

    return join_argv(host.cgroup, ["ip", "netns", "exec", host.ns, sys.executable, "-m", "hpcvar.testbed.traffic",
                                   *args])


def flow_commands(plan: Plan, flows: list[Flow], duration_s: float, port: int = BASE_PORT,
                  skip_s: float = 0.5) -> tuple[list[list[str]], list[list[str]]]:
    """(receiver argvs, sender argvs): one receiver per destination host, one sender per flow."""
    if not 0 < duration_s <= MAX_DURATION_S:
        raise UsageError(f"duration {duration_s:g} s is outside (0, {MAX_DURATION_S:.0f}] s", "--duration",
                         "Give a bounded duration such as 10s")
    dsts = sorted({f.dst for f in flows}, key=lambda n: plan.host(n).addr)
    ports = {d: port + i for i, d in enumerate(dsts)}
    recvs = [_py(plan.host(d, "--to"), ["recv", "--port", str(ports[d]), "--duration",
                                            repr(duration_s + RECV_SLACK_S), "--skip", repr(skip_s)])
             for d in dsts]
    sends = []
    for f in flows:
        src, dst = plan.host(f.src, "--from"), plan.host(f.dst, "--to")
        if src.name == dst.name:
            raise UsageError(f"noise from {src.name} to itself never crosses a link", "--to",
                             "Choose two different hosts")
        if f.on_s <= 0 or f.off_s < 0:
            raise UsageError("--on must be positive and --off not negative", "--on", "Example: --on 50ms --off 200ms")
        sends.append(_py(src, ["send", "--to", dst.addr, "--port", str(ports[f.dst]), "--duration",
                                  repr(duration_s), "--rate", repr(float(f.rate_bps)), "--on", repr(f.on_s),
                                  "--off", repr(f.off_s)]))
    return recvs, sends


def run_flows(state_path: Path, flows: list[Flow], duration_s: float, port: int = BASE_PORT,
              skip_s: float = 0.5, background: bool = False) -> dict:
    """Run the flows; in the foreground, wait and return what receivers and senders measured."""
    plan = require_up(state_path)
    recvs, sends = flow_commands(plan, flows, duration_s, port, skip_s)
    procs = []
    opts: dict[str, Any] = {"stdin": subprocess.DEVNULL, "start_new_session": True}
    if background:  # meant to outlive this command: bounded by the duration, stopped by 'testbed down'
        opts.update(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:  # ends with this hpcvar process, kill -9 included (hpcvar.launch.guard)
        opts.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec(signal.SIGKILL))
    try:
        for argv in recvs:
            procs.append(subprocess.Popen(argv, **opts))
        time.sleep(0.2)  # senders retry anyway; this only avoids a burst of refused connections
        for argv in sends:
            procs.append(subprocess.Popen(argv, **opts))
    except OSError as e:
        for p in procs:
            p.kill()
        raise TestbedError(f"cannot start the traffic processes: {e.strerror}", None, "Check 'ip netns exec'") \
            from None
    until = time.time() + duration_s + RECV_SLACK_S
    if background:
        plan.noise = [n for n in plan.noise if n.get("until", 0) > time.time()]
        plan.noise.append({"pids": [p.pid for p in procs], "until": until,
                           "flows": [vars(f) for f in flows]})
        save_state(state_path, plan)
        return {"background": True, "pids": [p.pid for p in procs], "until_unix": until,
                "flows": [vars(f) for f in flows]}
    return _merge(plan, flows, _wait_flows(procs, duration_s), len(recvs))


def _wait_flows(procs: list, duration_s: float) -> list[dict]:
    """What every traffic process measured (the last line of its output), once they all ended."""
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=duration_s + RECV_SLACK_S + 30)
            if p.returncode != 0:
                raise TestbedError(f"a traffic process failed (exit {p.returncode}): {err.strip()[-500:]}",
                                   None, "Check that the ports are free and the testbed is up")
            results.append(json.loads(out.strip().splitlines()[-1]))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        raise TestbedError("the traffic processes did not stop by themselves", None,
                           "Run 'hpcvar testbed down' to stop everything in the testbed") from None
    except KeyboardInterrupt:
        for p in procs:
            p.terminate()
        raise
    return results


def _merge(plan: Plan, flows: list[Flow], results: list[dict], nrecv: int) -> dict:
    by_addr = {h.addr: h.name for h in plan.hosts}
    rows = []
    received = [f for r in results[:nrecv] for f in r.get("flows", [])]
    for flow, sent in zip(flows, results[nrecv:], strict=False):
        src_addr = plan.host(flow.src).addr
        rx = [r for r in received if r["peer"].split(":")[0] == src_addr
              and by_addr.get(src_addr) == flow.src]
        rows.append({"from": flow.src, "to": flow.dst, "rate_bps": flow.rate_bps, "on_s": flow.on_s,
                     "off_s": flow.off_s, "sent_bytes": sent.get("bytes", 0),
                     "received_bytes": sum(r["bytes"] for r in rx),
                     "measured_bps": rx[0]["rate_bps"] if rx else None,
                     "window_s": rx[0]["window_s"] if rx else 0.0})
    return {"background": False, "flows": rows}
