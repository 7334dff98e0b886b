"""A guest's exports, each read on first use.

wasmtime-py's ``Instance.exports`` reads every export when it is first asked for, through
``wasmtime_instance_export_nth``, whose cost grows with the index: 20,000 exports took 18.8 s to
instantiate. Here the instance is defined once in a linker namespace of its own (one linear pass
in wasmtime) and each export is fetched by name when first used, so instantiation costs the same
whatever the export count, and a name is looked up once.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping

import wasmtime

from .engine import Extern
from .memexports import MEMORY_EXPORT_PREFIX

#: The linker namespace the guest instance is defined under (no guest can import it: the linker
#: is the instance's own and is done linking when this is defined).
GUEST_NAMESPACE = "wagogpu:guest"


class GuestExports(Mapping[str, Extern]):
    """The exports of one guest instance, by name; empty once its instance is closed. The memory
    exports the host adds (memexports.py) are the host's: `lookup` reaches them, the mapping hides them."""

    def __init__(self, linker: wasmtime.Linker, store: wasmtime.Store, guest: wasmtime.Instance,
                 module: wasmtime.Module) -> None:
        linker.define_instance(store, GUEST_NAMESPACE, guest)
        self._linker: wasmtime.Linker | None = linker
        self._store = store
        self._module = module
        self._found: dict[str, Extern] = {}
        self._names: tuple[str, ...] | None = None

    def __getitem__(self, name: str) -> Extern:
        if not isinstance(name, str) or name.startswith(MEMORY_EXPORT_PREFIX):
            raise KeyError(name)
        return self.lookup(name)

    def lookup(self, name: str) -> Extern:
        """Any export, the host's own memory exports included (KeyError when there is none)."""
        found = self._found.get(name)
        if found is not None:
            return found
        if self._linker is None:
            raise KeyError(name)
        try:
            found = self._linker.get(self._store, GUEST_NAMESPACE, name)
        except wasmtime.WasmtimeError:
            raise KeyError(name) from None
        self._found[name] = found
        return found

    def _all_names(self) -> tuple[str, ...]:
        if self._linker is None:
            return ()
        if self._names is None:
            self._names = tuple(e.name for e in self._module.exports if not e.name.startswith(MEMORY_EXPORT_PREFIX))
        return self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._all_names())

    def __len__(self) -> int:
        return len(self._all_names())

    def __contains__(self, name: object) -> bool:
        try:
            self[name]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def close(self) -> None:
        """Forget the linker and every export (their store is going)."""
        self._linker = None
        self._found = {}
        self._names = None
