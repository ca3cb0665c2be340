"""The one base of every kind's parameters: a frozen dataclass stored in run.json as ``params``.

A kind's ``job.py`` declares ``@dataclass(frozen=True) class MyParams(Params)`` whose fields are exactly the
keys stored in ``run.json``'s ``params``, in the order stored, units in the names (``time_per_size_s``,
``msg_bytes``, ``rate_bytes_per_s``; a count or a ratio needs none). Values are parsed before they get here:
the command line turns ``75.9us`` into ``7.59e-05`` for a field named ``..._s``; a job never parses text
with units. Lists given to the constructor become tuples (the object is immutable); ``to_json`` turns them
back into lists. Subclasses with nested values (dataclasses, a scheme) override ``_decode`` to rebuild them
from JSON. ``from_json`` refuses unknown and missing keys (a run of another version, or edited), which is
what makes ``--resume`` safe.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

from hpcvar.errors import ResultsError

PT = TypeVar("PT", bound="Params")


@dataclass(frozen=True)
class Params:
    """Base of every kind's parameters (``LatencyParams``, ``JitterParams``, ...)."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, list):
                object.__setattr__(self, f.name, tuple(v))

    def to_json(self) -> dict[str, Any]:
        """The JSON object kept in run.json: the fields in order, tuples as lists, nested dataclasses as
        objects."""
        return {f.name: jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls: type[PT], doc: Any, where: str = "run.json") -> PT:
        """The parameters stored in a run.json (``where`` names the file in errors)."""
        names = [f.name for f in dataclasses.fields(cls)]
        if not isinstance(doc, dict):
            raise ResultsError(f"the stored parameters are not a JSON object but {type(doc).__name__}", where,
                               "Start a new run instead of resuming this one")
        unknown = [k for k in doc if k not in names]
        if unknown:
            raise ResultsError(f"the stored parameters have the unknown key '{unknown[0]}' (the keys of "
                               f"{cls.__name__} are {', '.join(names)})", where,
                               "The run was made by another hpcvar version or edited; start a new run")
        missing = [k for k in names if k not in doc]
        if missing:
            raise ResultsError(f"the stored parameters lack the key '{missing[0]}' of {cls.__name__}", where,
                               "The run was made by another hpcvar version or edited; start a new run")
        return cls(**cls._decode(dict(doc), where))

    @classmethod
    def _decode(cls, doc: dict[str, Any], where: str) -> dict[str, Any]:
        """Constructor arguments from the stored JSON values (every key present, no unknown key)."""
        return doc


def jsonable(v: Any) -> Any:
    """A parameter value as JSON: objects with ``to_json`` through it, dataclasses as objects (field order),
    tuples as lists; numbers, strings, None and dicts as they are."""
    if hasattr(v, "to_json"):
        return v.to_json()
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: jsonable(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    return v


__all__ = ["Params", "jsonable"]
