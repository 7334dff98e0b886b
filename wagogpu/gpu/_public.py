"""The public backend: the device's interface on wgpu-py's public API alone.

Used when the installed wgpu is not the version the raw backend was tested with, or when the
environment sets WAGOGPU_PUBLIC_WGPU=1.  It gives the same results and the same failure stages
as far as that API allows, more slowly: every object is a wgpu-py wrapper, every map a promise.
What the public API does not offer is left out: no GPU timestamps (there is no public timestamp
period), no device-loss report (wgpu-py only logs it), and the upload windows are host memory
copied in with ``write_mapped`` (there is no public writable view of a mapping).

Two things stand in for calls wgpu-py 0.32 lacks or breaks: the completion fence is a 4-byte
copy, at the end of every submission, out of a small map-write buffer whose next map resolves
when the submission is done (``queue.on_submitted_work_done_sync`` fails on 0.32), and maps are
started and resolved by one waiter thread calling ``sync_wait()`` (the public way to learn a
map's result, and it blocks) so that the device's own wait loop keeps its deadline.  Buffers are
destroyed on that thread too, after every map asked for before: wgpu-py's poll thread waits on
the GPU inside wgpu-native while any promise is pending, and a destroy waits for that wait to end
(measured: a read-ahead buffer freed after a 2 ms timeout held the caller 0.05-0.94 s on lavapipe).
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import wgpu

from .adapters import F64_FEATURES, AdapterInfo, BackendName, _enumerate
from .backend import CELL_OK, LIMIT_NAMES, Backend, BackendError, BackendFlags, DeviceApi, MapCell, Usage
from .errors import GpuUnavailable, PipelineError
from .natives import Native, NativeKind, NativeSet

__all__ = ["enumerate_adapters", "open_backend", "PublicBackend"]

_CELL_FAILED = 2
_ERROR_NAMES = {wgpu.GPUValidationError: "validation", wgpu.GPUOutOfMemoryError: "out-of-memory",
                wgpu.GPUInternalError: "internal"}
_keys = itertools.count(1)
_log = logging.getLogger("wagogpu.gpu")

#: One piece of the waiter's work.
_Job = Callable[[], None]


def _destroy(obj: Any) -> None:
    obj.destroy()


def _drop(obj: Any) -> None:
    """Dropping the device's reference is the release: wgpu-py frees the object when it is collected."""


#: Every kind but BUFFER, which each backend releases through its waiter (PublicBackend._release_buffer).
_RELEASE: dict[NativeKind, Callable[[Any], None]] = {kind: _drop for kind in NativeKind if kind is not NativeKind.BUFFER}
_RELEASE[NativeKind.QUERY_SET] = _destroy


def _message(exc: BaseException) -> str:
    """One line: wgpu's error kind and its report."""
    kind = next((name for cls, name in _ERROR_NAMES.items() if isinstance(exc, cls)), type(exc).__name__)
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return f"{kind}: {text}"


def enumerate_adapters(backends: frozenset[BackendName] | None) -> list[tuple[Any, AdapterInfo]]:
    """wgpu-py enumerates every backend; the others are filtered out afterwards."""
    types = None if backends is None else {t for b in backends for t in b.backend_types}
    return [(a, info) for a, info in _enumerate() if types is None or info.backend in types]


def open_backend(adapter: Any, info: AdapterInfo) -> PublicBackend:
    try:
        features = list(F64_FEATURES) if info.has_f64 else []
        device = adapter.request_device_sync(required_limits=dict(adapter.limits), required_features=features)
    except Exception as exc:
        raise GpuUnavailable(f"device request failed: {_message(exc)}") from exc
    return PublicBackend(device)


class _Waiter:
    """Starts wgpu-py maps and resolves their MapCells, in order, on a daemon thread of its own;
    buffer destroys wait their turn behind them (see the module docstring).

    Starting maps here too matters: a read map first makes a submission of its own (wgpu-py's
    workaround for wgpu-native issue 305), and on some drivers (lavapipe) a submission blocks
    until the work before it is done, which would take the caller's deadline with it.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="wagogpu-public-waiter", daemon=True)
        self._thread.start()

    def watch(self, start: Callable[[], Any], cell: MapCell, then: Callable[[bool], None] | None = None) -> None:
        """Call ``start()`` (which returns a promise), wait for the promise, run ``then(ok)`` and
        resolve ``cell``."""
        self._queue.put(lambda: _resolve(start, cell, then))

    def destroy(self, obj: Any) -> None:
        """Destroy ``obj`` once every map started before has resolved."""
        self._queue.put(obj.destroy)

    def stop(self) -> None:
        self._queue.put(None)

    def _run(self) -> None:
        while (job := self._queue.get()) is not None:
            try:
                job()
            except Exception as exc:  # a destroy: nobody waits for it, so it is logged
                _log.warning("public backend: deferred destroy failed: %s", _message(exc))


def _resolve(start: Callable[[], Any], cell: MapCell, then: Callable[[bool], None] | None) -> None:
    """On the waiter thread: wait for the promise ``start()`` returns and resolve ``cell``."""
    try:
        start().sync_wait()
        ok = True
    except Exception as exc:
        ok = False
        cell.message = _message(exc)
    if then is not None:
        try:
            then(ok)
        except Exception as exc:  # a failed unmap of a fence: report it on the cell
            ok, cell.message = False, _message(exc)
    cell.status = CELL_OK if ok else _CELL_FAILED


class PublicBackend(Backend):
    """One wgpu-py GPUDevice behind the backend interface (see the module docstring)."""

    api = DeviceApi.PUBLIC

    def __init__(self, device: Any) -> None:
        self._device = device
        self._queue = device.queue
        self.flags = BackendFlags()
        self.natives = NativeSet({**_RELEASE, NativeKind.BUFFER: self._release_buffer})
        self.submissions = 0
        self.limits = {name: int(device.limits[name]) for name in LIMIT_NAMES}
        self.has_timestamps = False
        self.has_f64 = all(f in device.features for f in F64_FEATURES)
        self.encoder = self._encoder
        self.copy = self._copy
        self.poll = self._poll
        self.unmap = self._unmap
        self._waiter = _Waiter()
        self._fence_sink = self.create_buffer(4, Usage.STORAGE)
        self._fences: list[Native] = []  # idle fence buffers (map-write, copy source), unmapped
        self._last_fence: Native | None = None  # the one the last submission copied from

    def _error(self, exc: BaseException) -> None:
        self.flags.errors.append(_message(exc))

    # -------------------------------------------------------------- resources

    def _created(self, kind: NativeKind, create: Callable[..., Any], **desc: Any) -> Native:
        try:
            return self.natives.own(kind, create(**desc))
        except Exception as exc:
            raise BackendError(_message(exc)) from None

    def create_buffer(self, size: int, usage: int, mapped: bool = False) -> Native:
        return self._created(NativeKind.BUFFER, self._device.create_buffer, size=size, usage=usage,
                             mapped_at_creation=bool(mapped))

    def create_pipeline(self, wgsl: str, read_only: tuple[bool, ...], entry_point: str) -> tuple[Native, ...]:
        d = self._device
        entries = [{"binding": 0, "visibility": wgpu.ShaderStage.COMPUTE,
                    "buffer": {"type": wgpu.BufferBindingType.uniform, "min_binding_size": 16}}]
        entries += [{"binding": i, "visibility": wgpu.ShaderStage.COMPUTE,
                     "buffer": {"type": wgpu.BufferBindingType.read_only_storage if ro
                                else wgpu.BufferBindingType.storage}} for i, ro in enumerate(read_only, 1)]
        made: list[Native] = []
        try:
            made.append(self._created(NativeKind.SHADER_MODULE, d.create_shader_module, code=wgsl))
            made.append(self._created(NativeKind.BIND_GROUP_LAYOUT, d.create_bind_group_layout, entries=entries))
            made.append(self._created(NativeKind.PIPELINE_LAYOUT, d.create_pipeline_layout,
                                      bind_group_layouts=[made[1].obj]))
            made.append(self._created(NativeKind.PIPELINE, d.create_compute_pipeline, layout=made[2].obj,
                                      compute={"module": made[0].obj, "entry_point": entry_point}))
        except BackendError as exc:
            for native in made:
                self.natives.release(native)
            raise PipelineError(str(exc)) from None
        module, bgl, layout, pipeline = made
        return pipeline, bgl, layout, module

    def create_bind_group(self, layout: Any, uniform: Any, storage: Sequence[Any]) -> Native:
        entries = [{"binding": i, "resource": {"buffer": buf, "offset": 0, "size": buf.size}}
                   for i, buf in enumerate((uniform, *storage))]
        return self._created(NativeKind.BIND_GROUP, self._device.create_bind_group, layout=layout, entries=entries)

    # -------------------------------------------------------------- recording and submission

    def write_buffer(self, buf: Any, offset: int, data: np.ndarray | bytes, nbytes: int) -> None:
        try:
            self._queue.write_buffer(buf, offset, data, 0, nbytes)
        except Exception as exc:
            self._error(exc)

    def _encoder(self) -> Any:
        try:
            return self._device.create_command_encoder()
        except Exception as exc:
            self._error(exc)
            return None

    def _copy(self, enc: Any, src: Any, src_offset: int, dst: Any, dst_offset: int, nbytes: int) -> None:
        try:
            enc.copy_buffer_to_buffer(src, src_offset, dst, dst_offset, nbytes)
        except Exception as exc:
            self._error(exc)

    def _poll(self) -> None:
        """Nothing to do: wgpu-py's poll thread and the waiter resolve the cells."""

    def dispatch(self, enc: Any, pipeline: Any, bind_group: Any, gx: int, gy: int, timestamps: bool) -> None:
        try:
            cp = enc.begin_compute_pass()
            cp.set_pipeline(pipeline)
            cp.set_bind_group(0, bind_group)
            cp.dispatch_workgroups(gx, gy, 1)
            cp.end()
        except Exception as exc:
            self._error(exc)

    def begin_pass(self, enc: Any) -> Any:
        try:
            return enc.begin_compute_pass()
        except Exception as exc:
            self._error(exc)
            return None

    def pass_dispatch(self, cp: Any, pipeline: Any, bind_group: Any, gx: int, gy: int) -> None:
        if cp is None:
            return  # begin_pass failed and reported it
        try:
            if pipeline is not None:
                cp.set_pipeline(pipeline)
            if bind_group is not None:
                cp.set_bind_group(0, bind_group)
            cp.dispatch_workgroups(gx, gy, 1)
        except Exception as exc:
            self._error(exc)

    def end_pass(self, cp: Any) -> None:
        if cp is None:
            return
        try:
            cp.end()
        except Exception as exc:
            self._error(exc)

    def submit(self, enc: Any) -> None:
        """Every submission ends with a 4-byte copy out of a small map-write buffer: mapping that
        buffer again resolves once the submission is done, which is what fence() needs (a
        submission of its own would block on some drivers, and a read map submits too)."""
        try:
            fence_buffer = self._fences.pop() if self._fences else self.create_buffer(4, Usage.UPLOAD)
            enc.copy_buffer_to_buffer(fence_buffer.obj, 0, self._fence_sink.obj, 0, 4)
            self._queue.submit([enc.finish()])
        except Exception as exc:  # the caller finds it in flags.errors before it waits
            self._error(exc)
            return
        self.submissions += 1
        if self._last_fence is not None:
            self._fences.append(self._last_fence)  # never mapped: reusable as it is
        self._last_fence = fence_buffer

    def _release_buffer(self, obj: Any) -> None:
        """Destroy a buffer on the waiter thread; during close() at once (destroying resolves the
        pending maps the waiter may be stuck on)."""
        if self.flags.closing:
            obj.destroy()
        else:
            self._waiter.destroy(obj)

    def fence(self) -> MapCell:
        cell = MapCell(next(_keys))
        fence_buffer, self._last_fence = self._last_fence, None
        if fence_buffer is None:  # nothing was submitted since the last fence
            cell.status = CELL_OK
            return cell
        obj = fence_buffer.obj
        self._waiter.watch(lambda: obj.map_async(wgpu.MapMode.WRITE, 0, 4), cell,
                           lambda ok: self._fence_done(fence_buffer, ok))
        return cell

    def _fence_done(self, fence_buffer: Native, ok: bool) -> None:
        """On the waiter thread: a resolved fence's buffer is unmapped and reused.  A failed one is
        not reused; it stays registered and close() frees it (the NativeSet is the device
        thread's)."""
        if ok and fence_buffer.obj is not None:
            fence_buffer.obj.unmap()
            self._fences.append(fence_buffer)

    def drop_encoder(self, enc: Any) -> None:
        """Dropping it is enough: wgpu-py releases an unfinished encoder when it is collected."""

    # -------------------------------------------------------------- mapping

    def map(self, buf: Any, write: bool, offset: int, size: int) -> MapCell:
        cell = MapCell(next(_keys))
        mode = wgpu.MapMode.WRITE if write else wgpu.MapMode.READ
        self._waiter.watch(lambda: buf.map_async(mode, offset, size), cell)
        return cell

    def forget(self, cell: MapCell) -> None:
        """Nothing to do: the waiter resolves the cell and nobody reads it."""

    def read_address(self, buf: Any, offset: int, size: int) -> int:
        try:
            view = np.frombuffer(buf.read_mapped(offset, size, copy=False), np.uint8)
        except Exception as exc:
            self._error(exc)
            return 0
        return int(view.ctypes.data)  # the mapping's memoryview lives in the buffer until unmap

    def write_window(self, buf: Any, size: int) -> tuple[int, Any]:
        window = np.empty(size, np.uint8)
        return int(window.ctypes.data), window

    def flush_window(self, buf: Any, window: Any, nbytes: int) -> None:
        try:
            buf.write_mapped(window[:nbytes], 0)
        except Exception as exc:
            self._error(exc)

    def _unmap(self, buf: Any) -> None:
        try:
            if buf.map_state == "mapped":
                buf.unmap()
        except Exception as exc:
            self._error(exc)

    # -------------------------------------------------------------- timestamps: not offered

    def timestamp_cell(self) -> MapCell:
        raise BackendError("the public wgpu-py path takes no GPU timestamps")

    def timestamp_seconds(self) -> float | None:
        return None

    def reset_timestamps(self) -> None:
        """Nothing to reset."""

    def close(self) -> None:
        self.flags.closing = True
        self.natives.release_all()  # destroys the buffers first, which resolves their pending maps
        self._fences.clear()
        self._waiter.stop()
        self._device.destroy()
        self._device = self._queue = None
