import pytest

import hpcvar._native as native
from hpcvar.errors import MissingToolError


def test_without_mpi_every_mpi_command_says_what_to_install(tmp_path, monkeypatch):
    (tmp_path / "build_info.json").write_text('{"mpi_found": false}')
    monkeypatch.setattr(native, "native_dirs", lambda: [tmp_path])
    native.build_info.cache_clear()
    try:
        with pytest.raises(MissingToolError) as e:
            native.find_program("hv_latency", needs_mpi=True)
        assert "built without MPI" in e.value.what
        assert "hpcvar[mpich]" in e.value.todo and "MPICC" in e.value.todo
    finally:
        native.build_info.cache_clear()


def test_native_dir_override_comes_first(tmp_path, monkeypatch):
    prog = tmp_path / "hv_fake"
    prog.write_text("#!/bin/sh\n")
    prog.chmod(0o755)
    monkeypatch.setenv("HPCVAR_NATIVE_DIR", str(tmp_path))
    assert native.find_program("hv_fake") == prog
    with pytest.raises(MissingToolError):
        native.find_program("hv_does_not_exist")


def test_a_cmake_build_dir_brings_its_own_build_info(tmp_path, monkeypatch):
    # build/x/build_info.json next to build/x/bin: that build's MPI, not the installed package's
    (tmp_path / "bin").mkdir()
    (tmp_path / "build_info.json").write_text('{"mpi_found": true, "mpi_bindir": "/usr/bin"}')
    monkeypatch.setenv("HPCVAR_NATIVE_DIR", str(tmp_path / "bin"))
    native.build_info.cache_clear()
    try:
        info = native.build_info()
        assert info["mpi_bindir"] == "/usr/bin" and info["native_dir"] == str(tmp_path / "bin")
    finally:
        native.build_info.cache_clear()


def test_installed_build_has_the_probe_and_build_info():
    info = native.build_info()
    assert info.get("native_dir"), "hpcvar/_bin/build_info.json is missing: reinstall (make install)"
    assert native.find_program("hv_probe").is_file()


def test_op_codes_of_tracer_and_replay_are_the_python_ops():
    """native/common/hv_ops.h (written by the tracer, read by the replay's lowering) lists OPS in order."""
    import re
    from pathlib import Path

    from hpcvar.traces.parquet import OPS

    text = (Path(__file__).parents[2] / "native" / "common" / "hv_ops.h").read_text()
    names = re.findall(r"^\s+OP_([A-Z_]+)", text, re.M)
    assert names[-1] == "COUNT" and [n.lower() for n in names[:-1]] == list(OPS)
