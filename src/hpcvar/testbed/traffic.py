"""Bounded TCP traffic between testbed hosts: cross traffic ("network noise") and flow measurements.

Run inside a host's namespace (``ip netns exec``) as
``python -m hpcvar.testbed.traffic recv|send ...``. Both sides stop by
themselves at ``--duration``, whatever happens to the other side.

- ``recv --port P --duration D``: accepts any number of senders, counts the
  bytes of each, and prints JSON: per flow the bytes and the rate in bit/s over
  the measurement window [first byte + ``--skip``, last tick] (the skip leaves
  out TCP slow start).
- ``send --to ADDR --port P --duration D [--rate R] [--on T --off T]``: sends
  64 KiB writes, paced to ``R`` bit/s during "on" periods (0: as fast as the
  link takes), silent during "off" periods; prints JSON with the bytes sent.
"""

from __future__ import annotations

import argparse
import json
import selectors
import socket
import sys
import time
from typing import cast

CHUNK = 64 * 1024
TICK_S = 0.05
# Paced traffic is paced by the kernel as well (SO_MAX_PACING_RATE: TCP's own pacing where the qdisc is not fq; it
# counts what the application sends: 100 mbit asked, 99.997 Mbit/s received); the sender then keeps up to
# PACING_LEAD_S of data ahead in the socket buffer, so that a sender starved of CPU for less than that (a CI
# machine's load beside busy-polling MPI ranks) leaves no gap in the traffic. Without kernel pacing (another OS)
# the sender paces alone, no data ahead; with on/off periods too (an off period is silent).
PACING_LEAD_S = 0.25
SO_MAX_PACING_RATE = getattr(socket, "SO_MAX_PACING_RATE", 47)  # Linux's value; Python does not name it


def receive(port: int, duration_s: float, skip_s: float, bind: str = "0.0.0.0") -> dict:
    deadline = time.monotonic() + duration_s
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((bind, port))
    srv.listen(64)
    srv.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ, None)
    flows: dict[int, dict] = {}
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        for key, _ in sel.select(timeout=min(TICK_S, deadline - now)):
            if key.data is None:
                conn, peer = srv.accept()
                conn.setblocking(False)
                fid = len(flows)
                flows[fid] = {"peer": f"{peer[0]}:{peer[1]}", "bytes": 0, "t_first": None, "marks": []}
                sel.register(conn, selectors.EVENT_READ, fid)
                continue
            flow = flows[key.data]
            try:
                n = cast(socket.socket, key.fileobj).recv_into(view)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                n = 0
            if n == 0:
                sel.unregister(key.fileobj)
                cast(socket.socket, key.fileobj).close()
                flow["t_last"] = time.monotonic()
                continue
            if flow["t_first"] is None:
                flow["t_first"] = time.monotonic()
            flow["bytes"] += n
        t = time.monotonic()
        for flow in flows.values():
            if flow["t_first"] is not None and "t_last" not in flow and (
                    not flow["marks"] or t - flow["marks"][-1][0] >= TICK_S):
                flow["marks"].append((t, flow["bytes"]))
    for key in list(sel.get_map().values()):
        cast(socket.socket, key.fileobj).close()
    return {"role": "recv", "port": port, "flows": [_flow_summary(f, skip_s) for f in flows.values()]}


def _flow_summary(flow: dict, skip_s: float) -> dict:
    marks = flow["marks"]
    out = {"peer": flow["peer"], "bytes": flow["bytes"], "rate_bps": None, "window_s": 0.0}
    if flow["t_first"] is None or not marks:
        return out
    start = flow["t_first"] + skip_s
    inside = [(t, b) for t, b in marks if t >= start]
    if len(inside) >= 2 and inside[-1][0] > inside[0][0]:
        (t0, b0), (t1, b1) = inside[0], inside[-1]
        out["rate_bps"] = (b1 - b0) * 8 / (t1 - t0)
        out["window_s"] = t1 - t0
    return out


def send(to: str, port: int, duration_s: float, rate_bps: float, on_s: float, off_s: float) -> dict:
    deadline = time.monotonic() + duration_s
    sock = None
    while sock is None:  # the receiver may start a moment later
        try:
            sock = socket.create_connection((to, port), timeout=max(0.1, deadline - time.monotonic()))
        except OSError:
            if time.monotonic() + 0.05 >= deadline:
                return {"role": "send", "to": f"{to}:{port}", "bytes": 0, "error": "could not connect"}
            time.sleep(0.05)
    sock.settimeout(0.2)  # a full queue never blocks past the deadline
    lead_s = PACING_LEAD_S if off_s <= 0 and _kernel_pacing(sock, rate_bps) else 0.0
    data = bytes(CHUNK)
    sent = 0
    t0 = time.monotonic()
    period = on_s + off_s
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        phase = (now - t0) % period if off_s > 0 else 0.0
        if phase >= on_s:  # off period: stay quiet until the next on period (or the deadline)
            time.sleep(min(period - phase, deadline - now))
            continue
        if rate_bps > 0:
            # pace: never ahead of rate x (time spent in on periods so far)
            elapsed_on = _on_time(now - t0, on_s, off_s)
            ahead_s = sent * 8 / rate_bps - elapsed_on - lead_s
            if ahead_s > 0:
                time.sleep(min(ahead_s, deadline - now, on_s - phase))
                continue
        try:
            sent += sock.send(data)
        except TimeoutError:
            continue
        except OSError:
            break
    sock.close()
    return {"role": "send", "to": f"{to}:{port}", "bytes": sent, "elapsed_s": time.monotonic() - t0}


def _kernel_pacing(sock: socket.socket, rate_bps: float) -> bool:
    """Ask the kernel to pace ``sock`` at the rate; False where it cannot."""
    if rate_bps <= 0 or not sys.platform.startswith("linux"):
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, min(int(rate_bps / 8), 2**32 - 1))
    except OSError:
        return False
    return True


def _on_time(elapsed: float, on_s: float, off_s: float) -> float:
    if off_s <= 0:
        return elapsed
    period = on_s + off_s
    full, rest = divmod(elapsed, period)
    return full * on_s + min(rest, on_s)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hpcvar.testbed.traffic")
    sub = ap.add_subparsers(dest="role", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--duration", type=float, required=True)
    r.add_argument("--skip", type=float, default=0.5)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--duration", type=float, required=True)
    s.add_argument("--rate", type=float, default=0.0, help="bit/s during on periods; 0: unpaced")
    s.add_argument("--on", type=float, default=1.0)
    s.add_argument("--off", type=float, default=0.0)
    a = ap.parse_args(argv)
    if a.role == "recv":
        out = receive(a.port, a.duration, a.skip)
    else:
        out = send(a.to, a.port, a.duration, a.rate, a.on, a.off)
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
