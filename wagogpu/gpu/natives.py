"""One release protocol for every native object a device owns.

In the manner of wgpu-py's ``_release_function``: each kind of native object names the function
that frees it (the backend supplies the table), and ``NativeSet.release`` is the one place that
calls it.  Every object the device creates is registered here when it is made, so close() frees
what is left in one sweep and nothing is freed twice: a released ``Native`` forgets its object.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["NativeKind", "Native", "NativeSet"]


class NativeKind(enum.StrEnum):
    """The kinds of native objects a device creates, in the order close() frees them
    (users before what they use: bind groups before their buffers and layouts)."""

    BIND_GROUP = "bind_group"
    PIPELINE = "pipeline"
    PIPELINE_LAYOUT = "pipeline_layout"
    BIND_GROUP_LAYOUT = "bind_group_layout"
    SHADER_MODULE = "shader_module"
    BUFFER = "buffer"
    QUERY_SET = "query_set"


class Native:
    """One native object and its kind; ``obj`` is None once it was released."""

    __slots__ = ("kind", "obj")

    def __init__(self, kind: NativeKind, obj: Any) -> None:
        self.kind = kind
        self.obj = obj

    def __repr__(self) -> str:
        return f"<Native {self.kind}{' released' if self.obj is None else ''}>"


class NativeSet:
    """Every live native object of one device, each freed exactly once by its kind's function.

    After ``release_all()`` (or ``abandon()``) the set is closed: a later ``release`` only marks
    the object released, since the device that owned it is gone.
    """

    def __init__(self, release_functions: Mapping[NativeKind, Callable[[Any], None]]) -> None:
        missing = set(NativeKind) - set(release_functions)
        if missing:
            raise ValueError(f"no release function for {', '.join(sorted(missing))}")
        self._release = dict(release_functions)
        self._live: dict[int, Native] = {}
        self.closed = False

    def own(self, kind: NativeKind, obj: Any) -> Native:
        """Register a freshly created object; the returned Native is what release() takes."""
        native = Native(kind, obj)
        if not self.closed:
            self._live[id(native)] = native
        return native

    def release(self, native: Native | None) -> None:
        """Free ``native`` now (idempotent; a no-op for None and once the set is closed)."""
        if native is None or native.obj is None:
            return
        obj, native.obj = native.obj, None
        if self._live.pop(id(native), None) is not None:
            self._release[native.kind](obj)

    def release_all(self) -> None:
        """Free everything still registered, kind by kind in NativeKind's order; closes the set."""
        order = list(NativeKind)
        for native in sorted(self._live.values(), key=lambda n: order.index(n.kind)):
            self.release(native)
        self.closed = True

    def abandon(self) -> None:
        """Forget everything without freeing it (a thread is still inside a native call): the
        objects are left to process exit.  Closes the set."""
        for native in self._live.values():
            native.obj = None
        self._live.clear()
        self.closed = True

    def count(self, kind: NativeKind) -> int:
        return sum(1 for n in self._live.values() if n.kind is kind)

    def __len__(self) -> int:
        return len(self._live)
