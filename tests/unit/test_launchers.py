"""Golden argv for every launcher and MPI family, and the supervised run."""

from pathlib import Path

import pytest

from hpcvar.errors import LaunchError, UsageError
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
    argv, _ = SrunLauncher().command(spec)
    assert argv == ["srun", "--ntasks", "64", "--kill-on-bad-exit=1", "--cpu-bind=none", "--ntasks-per-node=32",
                    "--export=ALL,A=1", str(EXE), "--sizes", "8"]


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
    assert e.value.where == "--timeout" and "within 1 s" in e.value.what


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
