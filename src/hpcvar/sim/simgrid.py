"""SimGrid's SMPI replay of a time-independent trace on the platform of an hpcvar cluster: a second opinion
on ``hpcvar sim app`` (docs/replay.md, "SimGrid"; Debian's ``libsimgrid-dev`` ships ``smpirun``).

The platform and options make SimGrid's network the one ``sim app --model maxmin`` simulates: one node per
host, each with its own link to a crossbar, split-duplex (a node sends and receives at full bandwidth at once),
each direction of ``bandwidth`` with half the ``latency`` (a message crosses two links); SMPI's piecewise
bandwidth and latency factors set to 1, its cross traffic (the ACKs of every flow on the reverse route) off, and
its messages below the eager limit sent at once (smpi/async-small-thresh = smpi/send-is-detached-thresh =
65536: without it SMPI's detached sends still wait for the matching receive to start their transfer, where
hpcvar's eager messages leave when sent). Bandwidth is then shared max-min between the flows of a link, as in
hpcvar's ``maxmin`` model.

What remains different: SMPI sends every message with a 16-byte envelope (``SMPI_ENVELOPE_BYTES``, "MPI
envelope size (tag+dest+communicator)" in smpi_request.cpp): ``with_smpi_envelope`` adds it to the messages
of a trace; and SMPI sends a message eagerly below 65536 bytes (smpi/send-is-detached-thresh) where hpcvar's
``--eager`` is inclusive: ``SMPI_EAGER_BYTES`` is the value of ``--eager`` that matches. The collectives follow
each simulator's own algorithms.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hpcvar.errors import LaunchError, MissingToolError

SMPI_ENVELOPE_BYTES = 16
SMPI_EAGER_BYTES = 65535  # hpcvar's --eager equal to SMPI's default detached-send threshold (sizes below 65536)
OPTIONS = ["--cfg=smpi/bw-factor:0:1", "--cfg=smpi/lat-factor:0:1", "--cfg=network/crosstraffic:0",
           "--cfg=smpi/send-is-detached-thresh:65536", "--cfg=smpi/async-small-thresh:65536",
           "--log=smpi_replay.fmt:%.12r:%m%n", "--log=xbt_cfg.thres:warning", "--log=smpi_config.thres:warning"]
TIME = re.compile(r"^([0-9.]+):Simulation time", re.M)  # SimGrid's end of replay, at the log format of OPTIONS


def smpirun() -> str:
    path = shutil.which("smpirun")
    if path is None:
        raise MissingToolError("SimGrid's smpirun is not installed", "smpirun",
                               "Install SimGrid (Debian: apt-get install libsimgrid-dev)")
    return path


def platform_xml(nodes: int, bandwidth: float, latency: float, speed: float = 1e9, cores: int = 1,
                 shm_bandwidth: float = 5e9, shm_latency: float = 5e-7) -> str:
    """A SimGrid platform of ``nodes`` hosts ``node-0``.. of ``cores`` cores of ``speed`` flop/s, each linked to a
    crossbar by a split-duplex link of ``bandwidth`` bytes/s and ``latency`` / 2 s per direction; messages inside
    a host cross its loopback (``shm_bandwidth``, ``shm_latency``: sim app's --shm-bandwidth, --shm-latency)."""
    return ("<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
            "<platform version=\"4.1\">\n"
            f"  <cluster id=\"hpcvar\" prefix=\"node-\" suffix=\"\" radical=\"0-{nodes - 1}\" speed=\"{speed!r}f\" "
            f"core=\"{cores}\" bw=\"{bandwidth!r}Bps\" lat=\"{latency / 2!r}s\" sharing_policy=\"SPLITDUPLEX\" "
            f"loopback_bw=\"{shm_bandwidth!r}Bps\" loopback_lat=\"{shm_latency!r}s\"/>\n</platform>\n")


def write_platform(directory: Path, nodes: int, bandwidth: float, latency: float, speed: float = 1e9,
                   cores: int = 1, shm_bandwidth: float = 5e9, shm_latency: float = 5e-7):
    """(platform file, host file) in ``directory``: rank r on host node-(r div cores), sim app's mapping rrp."""
    plat, hosts = directory / "platform.xml", directory / "hosts"
    plat.write_text(platform_xml(nodes, bandwidth, latency, speed, cores, shm_bandwidth, shm_latency))
    hosts.write_text("".join(f"node-{i}\n" * cores for i in range(nodes)))
    return plat, hosts


@dataclass
class Replay:
    makespan_s: float  # SimGrid's simulated time when the last rank ends
    wall_s: float  # the whole smpirun process
    output: str


def replay_dir(index: Path) -> Path:
    """The directory to run SimGrid's replay in: SimGrid opens the index's entries from its working directory;
    they are written relative to where the index was made (or absolute): the index's directory if its first entry
    is there, else the current directory."""
    index = Path(index).resolve()
    first = next((ln.strip() for ln in index.read_text().splitlines() if ln.strip()), "")
    if first and not (index.parent / first).is_file() and (Path.cwd() / first).is_file():
        return Path.cwd()
    return index.parent


def replay(index: Path, np_: int, platform: Path, hostfile: Path, timeout: float = 600,
           extra: tuple[str, ...] = ()) -> Replay:
    """``smpirun -replay index`` (an index of per-rank files, or of one file for every rank), run where its
    entries resolve (``replay_dir``). A failure or a timeout is a LaunchError with SimGrid's last lines."""
    cmd = [smpirun(), "-np", str(np_), "-platform", str(Path(platform).resolve()), "-hostfile",
           str(Path(hostfile).resolve()), "-replay", str(Path(index).resolve()), *OPTIONS, *extra]
    t0 = time.perf_counter()
    try:
        res = subprocess.run(cmd, cwd=replay_dir(index), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LaunchError(f"SimGrid's replay did not end within {timeout:g} s", "smpirun",
                          "Replay a shorter trace") from None
    wall = time.perf_counter() - t0
    out = res.stdout + res.stderr
    m = TIME.findall(out)
    if res.returncode or not m:
        raise LaunchError(f"SimGrid's replay failed (status {res.returncode}): {out.strip()[-1500:]}", "smpirun",
                          "Check that the trace and the platform name the same ranks")
    return Replay(float(m[-1]), wall, out)


def with_smpi_envelope(trace, nbytes: int = SMPI_ENVELOPE_BYTES):
    """A copy of the trace whose point-to-point messages carry ``nbytes`` more (SMPI's envelope); collectives are
    left alone (hpcvar decomposes them when it replays, SimGrid with its own algorithms)."""
    from hpcvar.traces.parquet import Trace

    ev = trace.events.copy()
    p2p = ev["op"].isin(["send", "recv", "isend", "irecv", "sendrecv", "sendrecv_recv"]).to_numpy()
    ev["bytes"] = np.where(p2p, ev["bytes"].to_numpy() + nbytes, ev["bytes"].to_numpy())
    return Trace(ev, trace.ntasks, dict(trace.comms), trace.timed, trace.source, dict(trace.meta))


__all__ = ["OPTIONS", "SMPI_EAGER_BYTES", "SMPI_ENVELOPE_BYTES", "TIME", "Replay", "platform_xml", "replay",
           "replay_dir", "smpirun", "with_smpi_envelope", "write_platform"]
