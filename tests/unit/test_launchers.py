"""Golden argv for every launcher and MPI family, and the supervised run."""

from pathlib import Path

import pytest

from hpcvar.errors import LaunchError, LaunchTimeout, UsageError
from hpcvar.launch import LaunchSpec, get_launcher, oversubscription_warning
from hpcvar.launch.launchers import LocalLauncher, SrunLauncher, TemplateLauncher
from hpcvar.launch.mpi import MpiFlavor, parse_version_text

EXE = Path("/opt/hpcvar/_bin/hv_latency")
SPEC = LaunchSpec(np=4, exe=EXE, args=["--sizes", "8"])

OMPI4_TEXT = "mpiexec (OpenRTE) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n"
OMPI5_TEXT = "mpiexec (Open MPI) 5.0.11\n\nReport bugs to https://www.open-mpi.org/community/help/\n"
MPICH_TEXT = ("HYDRA build details:\n    Version:                                 5.0.2\n    Release Date: ...\n"
              "    Configure options:                       --with-device=ch4:ucx,ofi --with-pm=hydra:gforker\n")


def test_version_detection():
    assert parse_version_text(OMPI4_TEXT) == MpiFlavor("openmpi", "4.1.4")
    assert parse_version_text(OMPI5_TEXT) == MpiFlavor("openmpi", "5.0.11")
    assert parse_version_text(MPICH_TEXT) == MpiFlavor("mpich", "5.0.2", ("ucx", "ofi"))
    assert parse_version_text(MPICH_TEXT.replace("ucx,ofi", "ucx")).devices == ("ucx",)
    assert parse_version_text("something else").family == "unknown"


@pytest.mark.parametrize("version", ["4.1.4", "5.0.11"])
def test_openmpi_golden_argv_as_root_oversubscribed(version):
    launcher = LocalLauncher("/usr/bin/mpiexec", MpiFlavor("openmpi", version), cores=2, root=True)
    argv, env = launcher.command(SPEC)
    assert argv == ["/usr/bin/mpiexec", "-n", "4", "--bind-to", "none", "--oversubscribe", str(EXE),
                    "--sizes", "8"]
    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == "1" and env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"


def test_openmpi_golden_argv_not_root_with_env():
    launcher = LocalLauncher("mpiexec", MpiFlavor("openmpi", "5.0.11"), cores=8, root=False)
    spec = LaunchSpec(np=2, exe=EXE, args=[], env={"UCX_TLS": "tcp,self"}, extra_args=["--mca", "btl", "tcp,self"])
    argv, env = launcher.command(spec)
    assert argv == ["mpiexec", "-n", "2", "--bind-to", "none", "-x", "UCX_TLS=tcp,self", "--mca", "btl", "tcp,self",
                    str(EXE)]
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in env


def test_mpich_golden_argv():
    launcher = LocalLauncher("/venv/bin/mpiexec", MpiFlavor("mpich", "5.0.2"), cores=2, root=True)
    spec = LaunchSpec(np=4, exe=EXE, args=["--x", "1"], env={"MPIR_CVAR_NOLOCAL": "1"})
    argv, env = launcher.command(spec)
    assert argv == ["/venv/bin/mpiexec", "-n", "4", "-bind-to", "none", "-genv", "MPIR_CVAR_NOLOCAL", "1",
                    str(EXE), "--x", "1"]
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in env


def test_srun_golden_argv():
    spec = LaunchSpec(np=64, exe=EXE, args=["--sizes", "8"], ranks_per_node=32, env={"A": "1"})
    argv, _ = SrunLauncher(mpi="pmi2", flavor=MpiFlavor("mpich", "5.0.2"), in_allocation=True).command(spec)
    assert argv == ["srun", "--mpi=pmi2", "--ntasks", "64", "--kill-on-bad-exit=1", "--cpu-bind=none",
                    "--nodes=2", "--ntasks-per-node=32", "--export=ALL,A=1", str(EXE), "--sizes", "8"]


def test_srun_starts_mpich_through_hydra():
    """MPICH under Slurm: hydra's mpiexec with its Slurm launcher (srun starts the proxies), never srun's PMI-1
    server, which cuts requests above 1024 bytes (docs/cluster.md); the srun options go to hydra's srun."""
    spec = LaunchSpec(np=8, exe=EXE, args=["--sizes", "8"], ranks_per_node=2, env={"A": "1"}, timeout_s=90,
                      extra_args=["--exclusive"])
    inside = SrunLauncher(flavor=MpiFlavor("mpich", "5.0.2"), in_allocation=True, mpiexec="/venv/bin/mpiexec")
    argv, env = inside.command(spec)
    assert argv == ["/venv/bin/mpiexec", "-launcher", "slurm", "-launcher-exec", "srun", "-np", "8", "-bind-to",
                    "none", "-ppn", "2", "-genv", "A", "1", str(EXE), "--sizes", "8"]
    assert env["HYDRA_LAUNCHER_EXTRA_ARGS"] == "--cpu-bind=none --exclusive"
    assert inside.mpi_choice()["srun_mpi"] == "hydra" and "1024 bytes" in inside.mpi_choice()["srun_mpi_from"]
    # outside an allocation salloc makes one for the launch, bounded by its timeout
    outside = SrunLauncher(srun="/usr/bin/srun", flavor=MpiFlavor("mpich", "5.0.2"), in_allocation=False,
                           mpiexec="/venv/bin/mpiexec")
    argv, _ = outside.command(spec)
    assert argv[:8] == ["/usr/bin/salloc", "--quiet", "--ntasks", "8", "--nodes=4", "--ntasks-per-node=2",
                        "--time=2", "--job-name=hpcvar"]
    assert argv[8:13] == ["/venv/bin/mpiexec", "-launcher", "slurm", "-launcher-exec", "/usr/bin/srun"]


def test_srun_without_a_slurm_configuration_names_what_is_missing(tmp_path, monkeypatch):
    from hpcvar.launch.base import LaunchResult, failure_error

    monkeypatch.delenv("SLURM_CONF", raising=False)
    err = tmp_path / "x.stderr"
    err.write_text("srun: error: fetch_config: DNS SRV lookup failed\nsrun: error: _establish_config_source: failed "
                   "to fetch config\nsrun: fatal: Could not establish a configuration source\n")
    e = failure_error(LaunchResult(["srun"], 1, 0.1, tmp_path / "x.stdout", err),
                      SrunLauncher(flavor=MpiFlavor("openmpi", "5"), in_allocation=False))
    assert e.where == "--launcher" and "SLURM_CONF is not set" in e.todo and "hpcvar testbed env" in e.todo


def test_srun_plugin_follows_the_build_and_the_user():
    spec = LaunchSpec(np=3, exe=EXE, timeout_s=90)
    ompi = SrunLauncher(flavor=MpiFlavor("openmpi", "4.1.4"), in_allocation=False)
    argv, _ = ompi.command(spec)
    # outside an allocation srun asks for one, bounded by the launch timeout (rounded up to whole minutes)
    assert argv == ["srun", "--mpi=pmix", "--ntasks", "3", "--kill-on-bad-exit=1", "--cpu-bind=none",
                    "--time=2", "--job-name=hpcvar", str(EXE)]
    assert ompi.mpi_choice() == {"srun_mpi": "pmix", "srun_mpi_from": "build MPI family openmpi 4.1.4"}
    user = SrunLauncher(mpi="pmix_v4", flavor=MpiFlavor("mpich", "5.0.2"), in_allocation=True)
    assert user.command(spec)[0][1] == "--mpi=pmix_v4"
    assert user.mpi_choice()["srun_mpi_from"] == "--srun-mpi"
    with pytest.raises(UsageError) as e:
        SrunLauncher(mpi="pmi2; rm", flavor=MpiFlavor("mpich", "5"))
    assert e.value.where == "--srun-mpi"
    with pytest.raises(UsageError) as e:
        SrunLauncher(flavor=MpiFlavor("unknown", ""), in_allocation=True).command(spec)
    assert e.value.where == "--srun-mpi"


def test_layout_args_per_launcher():
    spec = LaunchSpec(np=4, exe=EXE, ranks_per_node=2)
    assert SrunLauncher(flavor=MpiFlavor("mpich", "5")).layout_args(spec) == ["--expect-np", "4", "--expect-rpn", "2"]
    local = LocalLauncher("mpiexec", MpiFlavor("mpich", "5"), cores=2, root=False)
    assert local.layout_args(spec) == ["--expect-np", "4"]  # one node: no placement to check
    assert TemplateLauncher("mpirun -np {np} {exe}").layout_args(spec) == ["--expect-np", "4"]
    assert TemplateLauncher("mpirun -np {np} -N {rpn} {exe}").layout_args(spec)[-1] == "2"


def test_world_mismatch_names_the_flag(tmp_path):
    from hpcvar.launch.base import LaunchResult, failure_error

    err = tmp_path / "x.stderr"
    err.write_text("hpcvar[rank 0]: world mismatch: MPI_Init gave a world of 1 rank(s) but 2 were launched: the "
                   "ranks did not join one MPI job (under srun: an --mpi plugin that this MPI library does not "
                   "speak) (/src/native/common/hv_mpi.c:129)\n")
    res = LaunchResult(["srun"], 1, 0.1, tmp_path / "x.stdout", err)
    e = failure_error(res, SrunLauncher(flavor=MpiFlavor("mpich", "5"), in_allocation=True))
    assert e.where == "--srun-mpi" and "world of 1 rank" in e.what and "hv_mpi.c" not in e.what
    assert "--srun-mpi hydra" in e.todo
    err.write_text("hpcvar[rank 0]: world mismatch: 2 rank(s) sit on 1 host(s), up to 2 on one, but 1 per node "
                   "were asked for (2 host(s)): the allocation or the launcher placed them otherwise (hv_mpi.c:150)\n")
    e = failure_error(res, SrunLauncher(flavor=MpiFlavor("mpich", "5"), in_allocation=True))
    assert e.where == "--ranks-per-node"


def test_template_golden_argv_never_shell():
    t = TemplateLauncher("mpirun -np {np} --hostfile 'my hosts' {exe} {args} ; rm -rf /")
    argv, _ = t.command(SPEC)
    assert argv == ["mpirun", "-np", "4", "--hostfile", "my hosts", str(EXE), "--sizes", "8", ";", "rm", "-rf", "/"]


def test_template_errors():
    with pytest.raises(UsageError) as e:
        TemplateLauncher("mpirun -np {np}")
    assert e.value.where == "--template"
    with pytest.raises(UsageError):
        TemplateLauncher("mpirun 'unclosed {exe}")
    with pytest.raises(UsageError):
        get_launcher("nope")


def test_oversubscription_warning_has_remedy():
    launcher = LocalLauncher("mpiexec", MpiFlavor("mpich", "5"), cores=2, root=False)
    msg = oversubscription_warning(4, launcher)
    assert "4 ranks share 2 cores" in msg and "--np 2" in msg
    assert oversubscription_warning(2, launcher) is None


def test_timeout_stops_the_job(tmp_path):
    t = TemplateLauncher("{exe} {args}")
    spec = LaunchSpec(np=1, exe=Path("/bin/sleep"), args=["30"], timeout_s=1.0)
    with pytest.raises(LaunchError) as e:
        t.run(spec, tmp_path)
    assert e.value.where == "--timeout" and "ran past its timeout of 1 s" in e.value.what
    assert isinstance(e.value, LaunchTimeout) and e.value.exit_code == 124


def test_failure_names_the_rank_and_its_last_lines(tmp_path):
    script = tmp_path / "fail.sh"
    script.write_text("#!/bin/sh\necho working\necho 'hpcvar[rank 3]: MPI_Send(...) failed: boom (x.c:1)' >&2\n"
                      "exit 7\n")
    script.chmod(0o755)
    t = TemplateLauncher("{exe}")
    with pytest.raises(LaunchError) as e:
        t.run(LaunchSpec(np=1, exe=script), tmp_path)
    assert e.value.what == "rank 3 failed: MPI_Send(...) failed: boom (x.c:1)"
    assert "Exit code 7" in e.value.todo


def test_failure_without_rank_shows_output(tmp_path):
    script = tmp_path / "fail.sh"
    script.write_text("#!/bin/sh\necho 'no such thing' >&2\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(LaunchError) as e:
        TemplateLauncher("{exe}").run(LaunchSpec(np=1, exe=script), tmp_path)
    assert "exit code 3" in e.value.what and "no such thing" in e.value.todo
