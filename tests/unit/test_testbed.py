"""The testbed's plan, state file, agent and launcher argv (no root needed)."""

from __future__ import annotations

import ipaddress
import os
import subprocess
from pathlib import Path

import pytest

from hpcvar.errors import UsageError
from hpcvar.launch import LaunchSpec, get_launcher
from hpcvar.launch.mpi import MpiFlavor
from hpcvar.testbed.launcher import TestbedLauncher
from hpcvar.testbed.netns import TestbedError
from hpcvar.testbed.noise import Flow, flow_commands
from hpcvar.testbed.plan import (
    Plan,
    agent_script,
    choose_subnet,
    load_state,
    make_plan,
    networks_in_use,
    parse_rate_of,
    save_state,
    tbf_args,
)

IN_H1 = ["ip", "netns", "exec", "hv-h1", "unshare", "--uts", "--", "sh", "-c", 'hostname "$0" || exit 255; exec "$@"',
         "hv-h1"]


def plan3(**kw) -> Plan:
    p = make_plan(3, 1e9, {"h2": 2e8}, **kw)
    p.agent = "/run/hpcvar-testbed/agent"
    p.status = "up"
    return p


def spec(np=2, rpn=None) -> LaunchSpec:
    return LaunchSpec(np=np, exe=Path("/x/hv_latency"), args=["--sizes", "8"], env={"A": "1"}, ranks_per_node=rpn)


def mpich(plan, **kw) -> TestbedLauncher:
    return TestbedLauncher(plan=plan, mpiexec="/mpi/bin/mpiexec", flavor=MpiFlavor("mpich", "5.0.2"), root=True, **kw)


def ompi(plan, **kw) -> TestbedLauncher:
    return TestbedLauncher(plan=plan, mpiexec="/ompi/bin/mpiexec", flavor=MpiFlavor("openmpi", "5.0.11"), root=True,
                           **kw)


def test_plan_names_addresses_and_rates():
    p = plan3()
    assert [h.ns for h in p.hosts] == ["hv-h1", "hv-h2", "hv-h3"]
    assert [h.addr for h in p.hosts] == ["10.213.7.1", "10.213.7.2", "10.213.7.3"]
    assert [h.rate_bps for h in p.hosts] == [1e9, 2e8, 1e9]
    assert {h.dev for h in p.hosts} == {"hv-eth0"} and [h.port for h in p.hosts] == ["hv-p1", "hv-p2", "hv-p3"]
    assert p.namespaces == ["hv-h1", "hv-h2", "hv-h3", "hv-sw"]
    assert all(len(n) <= 15 for h in p.hosts for n in (h.dev, h.port))  # IFNAMSIZ
    assert p.bridges == ["hv-br0"] and p.uplink == []


def test_two_switches_split_hosts_and_carry_an_uplink():
    p = make_plan(5, 1e9, switches=2, uplink_rate_bps=1e8)
    assert [h.switch for h in p.hosts] == [0, 0, 0, 1, 1]
    assert p.bridges == ["hv-br0", "hv-br1"] and p.uplink == ["hv-up0", "hv-up1"] and p.uplink_rate_bps == 1e8


@pytest.mark.parametrize("kw, flag", [({"hosts": 0}, "--hosts"), ({"prefix": "HV_"}, "--prefix"),
                                      ({"prefix": "toolong-"}, "--prefix"), ({"switches": 3}, "--switches"),
                                      ({"intra_host": "rdma"}, "--intra-host")])
def test_plan_refuses_bad_options(kw, flag):
    args = {"hosts": 2, "rate_bps": 1e9, **kw}
    with pytest.raises(UsageError) as e:
        make_plan(**args)
    assert e.value.where == flag


def test_rate_of_parsing():
    assert parse_rate_of(["h2=200mbit", "h1=1gbit"], 2) == {"h2": 2e8, "h1": 1e9}
    for bad in (["h3=1gbit"], ["h2"], ["x=1gbit"], ["h1=fast"]):
        with pytest.raises(UsageError) as e:
            parse_rate_of(bad, 2)
        assert e.value.where == "--rate-of"


def test_subnet_avoids_the_machines_networks():
    addrs = [{"addr_info": [{"family": "inet", "local": "10.213.7.9", "prefixlen": 16}]}]
    routes = [{"dst": "10.231.19.0/24"}, {"dst": "default"}]
    used = networks_in_use(addrs, routes)
    assert choose_subnet(used) == "172.29.213.0/24"
    assert choose_subnet([]) == "10.213.7.0/24"
    with pytest.raises(UsageError, match="overlaps"):
        choose_subnet(used, "10.213.0.0/24")
    with pytest.raises(UsageError, match="private"):
        choose_subnet([], "8.8.8.0/24")
    assert ipaddress.ip_network(choose_subnet([], "192.168.50.0/24")).prefixlen == 24


def test_tbf_burst_holds_a_gso_packet_and_2ms():
    args = tbf_args(2e8)
    assert args[:3] == ["tbf", "rate", "200000000bit"]
    assert int(args[args.index("burst") + 1]) >= 64 * 1024
    assert int(tbf_args(1e10)[4]) == int(1e10 / 8 * 0.002)


def test_state_round_trip_and_unknown_version(tmp_path):
    p = plan3(switches=2)
    f = tmp_path / "s" / "state.json"
    save_state(f, p)
    q = load_state(f)
    assert q.to_json() == p.to_json()
    assert load_state(tmp_path / "none.json") is None
    f.write_text(f.read_text().replace('"version": 1', '"version": 99'))
    with pytest.raises(UsageError, match="version"):
        load_state(f)


def test_agent_runs_the_command_in_the_hosts_namespace(tmp_path):
    """The generated agent, with a fake 'ip' that prints its arguments: ssh options are skipped, the host
    (by address or name) picks the namespace, the command is passed as one shell string."""
    p = plan3()
    agent = tmp_path / "agent"
    agent.write_text(agent_script(p))
    agent.chmod(0o755)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ip").write_text('#!/bin/sh\nfor a in "$@"; do echo "[$a]"; done\n')
    (fake / "ip").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    out = subprocess.run([str(agent), "-x", "-o", "BatchMode=yes", "10.213.7.2", "prted", "--x", "a b"],
                         capture_output=True, text=True, env=env, check=True).stdout.splitlines()
    assert out[:6] == ["[netns]", "[exec]", "[hv-h2]", "[unshare]", "[--uts]", "[--]"]
    assert out[-1] == "prted --x a b]" and out[-2] == "[hostname hv-h2 || exit 255"
    out = subprocess.run([str(agent), "h3", "true"], capture_output=True, text=True, env=env).stdout
    assert "[hv-h3]" in out
    bad = subprocess.run([str(agent), "10.0.0.1", "true"], capture_output=True, text=True, env=env)
    assert bad.returncode == 255 and "unknown host" in bad.stderr


def test_mpich_argv_golden():
    argv, env = mpich(plan3()).command(spec())
    assert argv == IN_H1 + [
        "/mpi/bin/mpiexec", "-launcher", "rsh", "-launcher-exec", "/run/hpcvar-testbed/agent",
        "-hosts", "10.213.7.1:1,10.213.7.2:1", "-n", "2", "-bind-to", "none",
        "-genv", "UCX_TLS", "tcp,self", "-genv", "FI_PROVIDER", "tcp", "-genv", "A", "1",
        "/x/hv_latency", "--sizes", "8"]
    assert env == {"A": "1", "UCX_TLS": "tcp,self", "FI_PROVIDER": "tcp"}


def test_mpich_with_ofi_uses_the_ofi_netmod_for_wildcard_receivers():
    launcher = TestbedLauncher(plan=plan3(), mpiexec="/mpi/bin/mpiexec",
                               flavor=MpiFlavor("mpich", "5.0.2", ("ucx", "ofi")), root=True)
    argv, env = launcher.command(spec())
    assert "MPIR_CVAR_CH4_NETMOD" not in argv and "MPIR_CVAR_CH4_NETMOD" not in env  # ucx by default
    s = spec()
    s.any_source = True  # a program with wildcard receives gets ofi (ucx on tcp loses them)
    argv, env = launcher.command(s)
    assert argv[argv.index("MPIR_CVAR_CH4_NETMOD") + 1] == "ofi" and env["MPIR_CVAR_CH4_NETMOD"] == "ofi"
    assert env["FI_PROVIDER"] == "tcp"


def test_mpich_intra_host_tcp_and_map_by_host():
    p = plan3(intra_host="tcp")
    argv, _ = mpich(p, map_by="host", ranks_per_host=2).command(spec(np=4))
    assert argv[argv.index("-hosts") + 1] == "10.213.7.1:1,10.213.7.2:1"  # round robin: rank r on host r % 2
    assert ["-genv", "MPIR_CVAR_NOLOCAL", "1"] == argv[argv.index("MPIR_CVAR_NOLOCAL") - 1:][:3]
    argv, _ = mpich(p, map_by="slot", ranks_per_host=2).command(spec(np=3))
    assert argv[argv.index("-hosts") + 1] == "10.213.7.1:2,10.213.7.2:1"


def test_openmpi_argv_golden():
    argv, env = ompi(plan3()).command(spec(np=4, rpn=2))
    assert argv == IN_H1 + [
        "/ompi/bin/mpiexec", "--prtemca", "plm_ssh_agent", "/run/hpcvar-testbed/agent",
        "--host", "10.213.7.1:2,10.213.7.2:2", "-n", "4", "--map-by", "slot", "--bind-to", "none",
        "--mca", "pml", "ob1", "--mca", "btl", "tcp,sm,self",
        "--mca", "btl_tcp_if_include", "10.213.7.0/24", "--mca", "oob_tcp_if_include", "10.213.7.0/24",
        *(["--oversubscribe"] if 4 > (os.cpu_count() or 1) else []),
        "-x", "A=1", "/x/hv_latency", "--sizes", "8"]
    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == "1" and env["A"] == "1"
    old = TestbedLauncher(plan=plan3(intra_host="tcp"), mpiexec="m", flavor=MpiFlavor("openmpi", "4.1.5"), root=False,
                          map_by="host")
    argv, env = old.command(spec(np=3))
    assert argv[12:15] == ["--mca", "plm_rsh_agent", "/run/hpcvar-testbed/agent"]
    assert "tcp,self" in argv and argv[argv.index("--map-by") + 1] == "node" and "OMPI_ALLOW_RUN_AS_ROOT" not in env
    old4 = TestbedLauncher(plan=plan3(), mpiexec="m", flavor=MpiFlavor("openmpi", "4.1.4"), root=False)
    argv, _ = old4.command(spec(np=2))
    assert argv[argv.index("btl") + 1] == "tcp,vader,self"  # Open MPI 4: "sm" is a dead alias of vader


def test_placement_and_capacity():
    p = plan3()
    assert mpich(p, map_by="slot", ranks_per_host=2).placement(spec(np=5)) == ["h1", "h1", "h2", "h2", "h3"]
    assert mpich(p, map_by="host", ranks_per_host=2).placement(spec(np=5)) == ["h1", "h2", "h3", "h1", "h2"]
    assert mpich(p).placement(spec(np=2, rpn=2)) == ["h1", "h1"]  # --ranks-per-node when the launcher has none
    with pytest.raises(UsageError) as e:
        mpich(p).placement(spec(np=4))
    assert e.value.where == "--np" and "--hosts 4" in e.value.todo


def test_registry_builds_it_and_describe_without_a_testbed(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCVAR_TESTBED_STATE", str(tmp_path / "none.json"))
    lau = get_launcher("testbed", map_by="host", ranks_per_host=None)
    assert isinstance(lau, TestbedLauncher) and lau.map_by == "host"
    assert lau.describe()["testbed"] is None
    with pytest.raises(TestbedError, match="no testbed is up"):
        lau.command(spec())
    with pytest.raises(TestbedError, match="no testbed is up"):
        lau.prepare(spec())
    with pytest.raises(UsageError):
        TestbedLauncher(map_by="core")


def test_describe_records_topology_and_rates():
    d = mpich(plan3(switches=2, uplink_rate_bps=1e8)).describe()
    tb = d["testbed"]
    assert tb["switches"] == 2 and tb["uplink_rate_bps"] == 1e8 and tb["subnet"] == "10.213.7.0/24"
    assert [(h["name"], h["rate_bps"], h["switch"]) for h in tb["hosts"]] == [("h1", 1e9, 0), ("h2", 2e8, 0),
                                                                               ("h3", 1e9, 1)]
    assert d["mpi_family"] == "mpich"


def test_noise_commands_are_bounded_and_between_hosts():
    p = plan3()
    recvs, sends = flow_commands(p, [Flow("h2", "h1"), Flow("h3", "h1", 3e8, 0.05, 0.2)], 2.0)
    assert len(recvs) == 1 and recvs[0][:4] == ["ip", "netns", "exec", "hv-h1"]
    assert recvs[0][recvs[0].index("--duration") + 1] == "3.0"
    assert sends[1][3] == "hv-h3" and sends[1][sends[1].index("--to") + 1] == "10.213.7.1"
    assert sends[1][sends[1].index("--off") + 1] == "0.2"
    with pytest.raises(UsageError):
        flow_commands(p, [Flow("h1", "h1")], 1.0)
    with pytest.raises(UsageError) as e:
        flow_commands(p, [Flow("h2", "h1")], 0.0)
    assert e.value.where == "--duration"
    with pytest.raises(UsageError) as e:
        flow_commands(p, [Flow("h9", "h1")], 1.0)
    assert e.value.where == "--from"


def test_traffic_pacing_counts_only_on_time():
    from hpcvar.testbed.traffic import _on_time

    assert _on_time(1.0, 0.05, 0.2) == pytest.approx(4 * 0.05)  # four whole periods of 250 ms
    assert _on_time(0.26, 0.05, 0.2) == pytest.approx(0.06)
    assert _on_time(3.0, 1.0, 0.0) == 3.0


def test_cli_without_root_says_so(monkeypatch, tmp_path):
    from hpcvar.testbed import netns

    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    with pytest.raises(TestbedError) as e:
        netns.down(tmp_path / "state.json")
    assert "root" in e.value.what and "sudo" in e.value.todo


def test_slurm_conf_of_the_testbed(tmp_path):
    from hpcvar.testbed import slurm_daemons as sl
    from hpcvar.testbed.plan import make_plan

    plan = make_plan(3, 2e8, prefix="ab-")
    s = sl.plan_slurm(plan, tmp_path / "state.json")
    assert s["ctl_addr"].endswith(".254") and s["root_link"] == "ab-eth0" and s["cpus"] >= sl.MIN_NODE_CPUS
    assert s["socket_dir"].startswith(sl.MUNGE_SOCKET_ROOT + "/ab-")
    plan.slurm = s
    conf = sl.conf_text(plan, s)
    for h in plan.hosts:
        assert f"NodeName={h.ns} NodeHostname={h.ns} NodeAddr={h.addr} CPUs={s['cpus']}" in conf
    for line in ("AuthType=auth/munge", "MpiDefault=none", "ProctrackType=proctrack/linuxproc",
                 f"SlurmctldPort={s['ctl_port']}", f"TmpFS={s['dir']}/tmp/%n", "PartitionName=testbed Nodes=ALL",
                 f"FirstJobId={s['first_job_id']}"):
        assert line in conf, line
    # job ids do not restart at 1 with every up (MPI names shared memory after them)
    assert len({sl.plan_slurm(plan, tmp_path / "state.json")["first_job_id"] for _ in range(5)}) > 1
    assert sl.env(plan) == {"SLURM_CONF": s["conf"], "HYDRA_IFACE": "ab-eth0"}


def test_slurm_missing_tools_name_the_packages(monkeypatch):
    import shutil as sh

    from hpcvar.errors import MissingToolError
    from hpcvar.testbed import slurm_daemons as sl

    monkeypatch.setattr(sh, "which", lambda name: None if name == "slurmd" else f"/usr/bin/{name}")
    with pytest.raises(MissingToolError) as e:
        sl.check_tools()
    assert "slurmd" in e.value.what and "apt-get install slurmctld slurmd slurm-client munge" in e.value.todo


def test_testbed_transport_env_keeps_both_mpi_families_on_tcp():
    from hpcvar.testbed.launcher import transport_env
    from hpcvar.testbed.plan import make_plan

    plan = make_plan(2, 1e9)
    env = transport_env(plan)
    assert env["UCX_TLS"] == "tcp,self" and env["FI_PROVIDER"] == "tcp"
    assert env["OMPI_MCA_btl"] == "tcp,self" and env["OMPI_MCA_btl_tcp_if_include"] == plan.subnet
    assert "MPIR_CVAR_NOLOCAL" not in env
    plan.intra_host = "tcp"
    assert transport_env(plan)["MPIR_CVAR_NOLOCAL"] == "1"


# ---- per-host CPU faults (testbed.cgroups) ---------------------------------------------------------------------
def test_cpu_fault_options_parse_to_cgroup_bandwidth():
    from hpcvar.testbed.cgroups import parse_cpu_noise_of, parse_cpu_quota_of

    # a share of the machine's CPUs per period (100 ms unless given), summed over the host's threads
    assert parse_cpu_quota_of(["h2=50%"], 4, 2) == {"h2": (100_000, 100_000)}
    assert parse_cpu_quota_of(["h3=80%/10ms"], 4, 2) == {"h3": (10_000, 16_000)}
    # lose 1 ms of every 10 ms when every CPU is busy: 9 ms per CPU per period
    assert parse_cpu_noise_of(["h1=1ms/10ms"], 4, 2) == {"h1": (10_000, 18_000)}
    for items, fn, flag in ((["h5=50%"], parse_cpu_quota_of, "--cpu-quota-of"),
                            (["h2=150%"], parse_cpu_quota_of, "--cpu-quota-of"),
                            (["h2=50%/5s"], parse_cpu_quota_of, "--cpu-quota-of"),
                            (["h2"], parse_cpu_quota_of, "--cpu-quota-of"),
                            (["h2=10ms/10ms"], parse_cpu_noise_of, "--cpu-noise-of"),
                            (["h2=1ms"], parse_cpu_noise_of, "--cpu-noise-of")):
        with pytest.raises(UsageError) as e:
            fn(items, 4, 2)
        assert e.value.where == flag, (items, e.value)


def test_cpu_hierarchy_is_found_in_mountinfo():
    from hpcvar.errors import MissingToolError
    from hpcvar.testbed.cgroups import cpu_hierarchy

    info = ("30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
            "31 30 0:27 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n"
            "32 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n")
    assert str(cpu_hierarchy(info)) == "/sys/fs/cgroup/cpu"
    with pytest.raises(MissingToolError, match="cgroup v1 'cpu'"):
        cpu_hierarchy(info.replace("rw,cpu\n", "rw,memory\n"))


def test_faulty_hosts_processes_join_their_cgroup(tmp_path):
    """A host with a CPU fault: mpiexec (in_host_argv), the agent and the traffic processes write their pid into
    the host's group before they enter the namespace; hosts without a fault are started as before."""
    from hpcvar.testbed.plan import in_host_argv, place_cgroups

    clean = make_plan(3, 1e9)
    place_cgroups(clean, tmp_path / "state.json")  # no fault: no group, argv as before
    assert not clean.cgroup_mount and in_host_argv(clean.hosts[0], ["x"]) == [*IN_H1, "x"]
    from hpcvar.testbed.plan import with_cpu_faults

    p = with_cpu_faults(make_plan(3, 1e9), {"h2": (10_000, 18_000)})
    place_cgroups(p, tmp_path / "state.json")
    h1, h2 = p.hosts[0], p.hosts[1]
    assert p.cgroup_mount == str(tmp_path / "cgroup-cpu") and h2.cgroup == str(tmp_path / "cgroup-cpu/hpcvar-hv-h2")
    # every host is in a group (the others without a quota): the scheduler treats them alike
    assert h1.cgroup == str(tmp_path / "cgroup-cpu/hpcvar-hv-h1") and not h1.cpu_quota_us
    argv = in_host_argv(h2, ["x"])
    assert argv[:4] == ["sh", "-c", 'echo $$ > "$0" || exit 255; exec "$@"', f"{h2.cgroup}/cgroup.procs"]
    assert argv[4:8] == ["ip", "netns", "exec", "hv-h2"]
    recvs, sends = flow_commands(p, [Flow("h2", "h1")], 1.0)
    assert sends[0][3] == f"{h2.cgroup}/cgroup.procs" and recvs[0][3] == f"{h1.cgroup}/cgroup.procs"
    # the agent, run for real with a fake 'ip': the shell's pid lands in h2's cgroup.procs (here a plain file)
    for h in p.hosts:
        Path(h.cgroup).mkdir(parents=True)
    p.agent = str(tmp_path / "agent")
    Path(p.agent).write_text(agent_script(p))
    Path(p.agent).chmod(0o755)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ip").write_text('#!/bin/sh\necho "$@"\n')
    (fake / "ip").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    out = subprocess.run([p.agent, "h2", "true"], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.startswith("netns exec hv-h2") and (Path(h2.cgroup) / "cgroup.procs").read_text().strip()
    subprocess.run([p.agent, "h1", "true"], capture_output=True, text=True, env=env, check=True)


# ---- a recorded testbed that is up is not replaced silently (issue 27) ----------------------------------------
def _fake_machine(monkeypatch, namespaces: set[str]) -> list[str]:
    """netns without root: the namespaces that 'exist', and what down() was asked to remove."""
    from hpcvar.testbed import netns

    downs: list[str] = []
    monkeypatch.setattr(netns, "check_root", lambda flag=None: None)
    monkeypatch.setattr(netns, "existing_namespaces", lambda: set(namespaces))
    monkeypatch.setattr(netns, "down", lambda path, log=None: downs.append(str(path)) or [])

    def no_build(plan, say):
        raise RuntimeError("built")  # nothing is created in a unit test

    monkeypatch.setattr(netns, "_build", no_build)
    return downs


def test_up_refuses_while_the_recorded_testbed_is_up_and_names_it(tmp_path, monkeypatch):
    from hpcvar.testbed import netns

    state = tmp_path / "state.json"
    save_state(state, plan3(prefix="ab-"))
    downs = _fake_machine(monkeypatch, {"ab-h1", "ab-h2", "ab-h3", "ab-sw"})
    with pytest.raises(UsageError) as e:
        netns.up(make_plan(2, 1e9, prefix="cd-"), state)
    msg = e.value.render()
    assert e.value.where == "--replace" and "3 hosts, prefix ab-" in msg and str(state) in msg
    assert "--prefix auto" in msg and "--state" in msg and downs == []
    assert load_state(state).prefix == "ab-"  # the record is untouched
    # --replace takes it down first (then the build starts: stopped here by the fake)
    with pytest.raises(RuntimeError, match="built"):
        netns.up(make_plan(2, 1e9, prefix="cd-"), state, replace=True)
    assert downs and downs[0] == str(state)


def test_up_replaces_a_stale_record_whose_namespaces_are_gone(tmp_path, monkeypatch):
    from hpcvar.testbed import netns

    state = tmp_path / "state.json"
    save_state(state, plan3(prefix="ab-"))
    downs = _fake_machine(monkeypatch, set())
    with pytest.raises(RuntimeError, match="built"):
        netns.up(make_plan(2, 1e9, prefix="cd-"), state)
    assert downs[0] == str(state)  # taken down before the build (and again when the build failed)


def test_prefix_auto_is_the_first_prefix_no_namespace_uses(tmp_path, monkeypatch):
    from hpcvar.testbed import netns

    _fake_machine(monkeypatch, {"hv-h1", "hv-sw", "hv1-h1", "other"})
    assert netns.free_prefix(tmp_path / "none.json") == "hv2-"
    _fake_machine(monkeypatch, set())
    assert netns.free_prefix(tmp_path / "none.json") == "hv-"


def test_testbed_up_command_refuses_and_names_the_flag(tmp_path, monkeypatch, capsys):
    from hpcvar.cli import main

    state = tmp_path / "state.json"
    save_state(state, plan3())
    _fake_machine(monkeypatch, {"hv-h1", "hv-sw"})
    with pytest.raises(SystemExit) as e:
        main(["testbed", "up", "--hosts", "2", "--prefix", "auto", "--state", str(state)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "(--replace)" in err and "prefix hv-" in err, err
