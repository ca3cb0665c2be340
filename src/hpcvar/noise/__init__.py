"""OS jitter: trace model and formats (trace.py), collector front end, analysis, multi-node recordings.

The alignments of jitter traces (jitSim, docs/jitter-sim.md), one vocabulary for ``sim jitter --align``,
``sim app --align`` and the verdict of a multi-node recording (which mode fits the nodes):
"""

UNSYNC = "unsync"  # every task starts its trace at an independent random offset
SYNC = "sync"  # one offset shared by every task
COSCHED = "cosched"  # every task starts at a random start of a co-scheduler window (--window)
MEASURED = "measured"  # the offsets a multi-node recording measured between its nodes
DRAWN_ALIGNMENTS = (UNSYNC, SYNC, COSCHED)  # the simulators draw these offsets themselves
ALIGNMENTS = (*DRAWN_ALIGNMENTS, MEASURED)
