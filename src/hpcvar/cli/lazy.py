"""A click group that imports a subcommand's module only when that subcommand runs.

``hpcvar --help`` and ``hpcvar bench latency`` must not pay for importing
every benchmark, model and simulator (pandas, scipy, matplotlib). Each lazy
entry is ``name -> ("module:attribute", "short help")``; a test checks that the
short help matches the command's own docstring.
"""

from __future__ import annotations

import importlib

import click


class LazyGroup(click.Group):
    def __init__(self, *args, lazy: dict[str, tuple[str, str]] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def load(self, name: str) -> click.Command:
        target, _ = self.lazy[name]
        module, _, attr = target.partition(":")
        cmd = getattr(importlib.import_module(module), attr)
        self.add_command(cmd, name)
        return cmd

    def get_command(self, ctx, name):
        if name in self.lazy and name not in self.commands:
            return self.load(name)
        return super().get_command(ctx, name)

    def format_commands(self, ctx, formatter):
        limit = formatter.width - 6 - max((len(n) for n in self.list_commands(ctx)), default=0)
        rows = []
        for name in self.list_commands(ctx):
            if name in self.commands:
                cmd = self.commands[name]
                if cmd.hidden:
                    continue
                rows.append((name, cmd.get_short_help_str(limit)))
            else:
                rows.append((name, self.lazy[name][1]))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
