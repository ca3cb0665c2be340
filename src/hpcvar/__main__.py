from hpcvar.cli import entry

entry()
