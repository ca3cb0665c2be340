"""The kinds of runs, one folder each: ``hpcvar/kinds/<kind>/job.py`` and ``views.py``.

The contract every kind follows (hpcvar.results.kinds has the table that joins the two files):

``job.py``
    ``@dataclass(frozen=True) class MyParams(hpcvar.results.params.Params)``: the run's parameters, parsed
    (units in the field names: ``duration_s``, ``size_bytes``), stored in run.json by ``to_json``.
    ``def job(params: MyParams, ctx: JobContext) -> Run``: ``ctx`` is a hpcvar.results.context.JobContext
    (hpcvar.bench.runner.BenchContext for the kinds that launch MPI programs). It creates the run
    (``ctx.create_run(command, params, metadata)``), does its work inside
    ``with hpcvar.results.store.run_lifecycle(run):``, writes the declared tables (``run.write_table``),
    builds the JSON result from them into ``run.info["result"]``, keeps what the user must know with
    ``run.warn(text)``, draws its figures with ``hpcvar.results.kinds.draw_plots(run)`` (never by importing
    its views) and returns the run. It prints nothing but progress (``ctx.say``, a bar when
    ``ctx.show_progress()``).

``views.py``
    ``render(console, run)``: the terminal view of the stored run (its result and tables); the warnings, the
    figures and "stored in" are printed after it by hpcvar.report.terminal.render_run, never by the view.
    ``section(run) -> Section`` (the HTML/Markdown report), ``metrics(run) -> list[Metric]`` (what
    ``hpcvar compare`` tests), ``plots(run) -> list[Path]`` (figures into ``run.plots_dir()``). Views import
    the report toolkit (hpcvar.report) and their own job module; nothing but the command line,
    hpcvar.characterize and the table imports a kind.

Then one row in ``hpcvar.results.kinds.KINDS`` and, for the command line, a module in hpcvar.cli that turns
flags into the Params, calls the job and ends with ``emit_run(run, as_json)``.
"""
