"""Event traces of MPI applications (docs/formats.md "Event traces", docs/replay.md).

- ``parquet``: hpcvar's own format, one Parquet file with a row per traced MPI call (``Trace``,
  ``read_parquet``, ``write_parquet``, ``make_events``, ``OPS``), what ``hpcvar trace`` writes;
- ``load``: ``load_trace``, a Trace from any format hpcvar reads, and ``import_engine``, the choice between
  an importer's C and Python implementations;
- the imports: ``tit`` (SimGrid time-independent traces) and ``otf2_import`` (OTF2 archives), each with its C
  engine (``tit_native``, ``otf2_native``) and the column steps they share (``columns``);
- ``chrome`` (Chrome/Perfetto timelines), ``cut`` (a trace cut at a collective), ``collectives`` (collectives
  decomposed into messages), ``hpcc`` (HPL's input and results).
"""

from hpcvar.traces.load import ENGINE_ENV, IMPORT_ENGINES, import_engine, load_trace

__all__ = ["ENGINE_ENV", "IMPORT_ENGINES", "import_engine", "load_trace"]
