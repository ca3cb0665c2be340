"""characterize --resume RUN alone continues RUN with its stored parameters (--quick, --steps); a --quick or
--steps given beside it must be the stored one (issue #27)."""

from __future__ import annotations

import pytest

from hpcvar import characterize as ch
from hpcvar.bench.runner import BenchContext
from hpcvar.errors import UsageError
from hpcvar.launch.launchers import LocalLauncher
from hpcvar.results.store import Run


@pytest.fixture
def fake_steps(monkeypatch):
    """Two steps that need nothing and record the ``quick`` they were run with."""
    seen: list[tuple[str, bool]] = []

    def make(name):
        def run(sctx, quick):
            seen.append((name, quick))
            r = Run.create("sim jitter", {"step": name}, sctx.bench.runs_dir)
            r.finish("complete", {})
            return r
        return ch.Step(name, name, run, needs=set())

    monkeypatch.setattr(ch, "STEPS", [make("one"), make("two")])
    return seen


def _ctx(tmp_path, resume=None):
    return BenchContext(launcher=LocalLauncher(), np=2, runs_dir=str(tmp_path), resume=resume)


def _interrupted(tmp_path, fake_steps) -> Run:
    first = ch.run_characterization(_ctx(tmp_path), quick=True, only="one,two")
    run = Run.open(first["run"])
    run.info["steps"].pop("two")
    run.info["status"] = "interrupted"
    run.save()
    fake_steps.clear()
    return run


def test_resume_alone_takes_the_stored_quick_and_steps(tmp_path, fake_steps):
    run = _interrupted(tmp_path, fake_steps)
    # the command line's defaults (thorough, every step) are not what the run was started with
    again = ch.run_characterization(_ctx(tmp_path, run.id), quick=False, resume=run.id)
    assert again["run"] == str(run.path)
    assert fake_steps == [("two", True)]  # quick, as stored; step one is not run again
    assert Run.open(run.path).info["params"]["quick"] is True


def test_resume_with_a_different_quick_or_steps_is_refused(tmp_path, fake_steps):
    run = _interrupted(tmp_path, fake_steps)
    with pytest.raises(UsageError) as e:
        ch.run_characterization(_ctx(tmp_path, run.id), quick=False, resume=run.id, flags_given=("quick",))
    assert e.value.where == "--quick" and f"--resume {run.id} alone" in e.value.todo
    with pytest.raises(UsageError) as e:
        ch.run_characterization(_ctx(tmp_path, run.id), quick=True, only="one", resume=run.id,
                                flags_given=("steps",))
    assert e.value.where == "--steps"
    # the same values given again are fine
    ch.run_characterization(_ctx(tmp_path, run.id), quick=True, only="one,two", resume=run.id,
                            flags_given=("quick", "steps"))
    assert fake_steps == [("two", True)]
