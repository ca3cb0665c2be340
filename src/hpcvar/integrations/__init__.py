"""hpcvar inside other tools: ``reframe`` is a ReFrame test library (docs/watch.md). Nothing in hpcvar imports
these modules: each is loaded by its tool, which must be installed (pip install 'hpcvar[reframe]')."""
