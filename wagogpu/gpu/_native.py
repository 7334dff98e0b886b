"""The raw backend: wgpu-native's C API through wgpu-py's cffi handle.

This is the one module that touches wgpu-py's or wgpu-native's internals (``_ffi``, ``_api``,
``_helpers``, ``_mappings``, an adapter's ``_internal``).  wgpu-py's object layer costs tens of
microseconds per dispatch (descriptor dicts, wrappers, a promise and poll-thread token per map);
here the hot paths are cffi calls on pre-built structs, with entry points looked up once.  It was
written against wgpu-py 0.32 (wgpu-native 29), whose C API its struct names follow; importing it
with another wgpu raises ImportError, and the device then runs on ``_public.py``.
"""

from __future__ import annotations

import array
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import wgpu

TESTED_WGPU = "0.32."
if not wgpu.__version__.startswith(TESTED_WGPU):
    raise ImportError(f"wgpu {wgpu.__version__} is installed and the raw path was tested with {TESTED_WGPU}x")

try:
    import _cffi_backend  # type: ignore[import-untyped]
    from wgpu.backends.wgpu_native import _api as _wgpu_api
    from wgpu.backends.wgpu_native._ffi import ffi, lib
    from wgpu.backends.wgpu_native._helpers import get_wgpu_instance
    from wgpu.backends.wgpu_native._mappings import native_flags
except Exception as exc:  # a reorganised wgpu-py, or no native library
    raise ImportError(f"wgpu-native's internals are not as tested: {exc}") from exc

from .adapters import AdapterInfo, BackendName, _enumerate, info_from_wgpu
from .backend import CELL_OK, LIMIT_NAMES, Backend, BackendError, BackendFlags, DeviceApi, MapCell, Usage
from .errors import GpuUnavailable, PipelineError
from .natives import Native, NativeKind, NativeSet

__all__ = ["enumerate_adapters", "open_backend", "RawBackend"]

_NULL = ffi.NULL
_WHOLE_SIZE = 0xFFFFFFFFFFFFFFFF
_MAP_READ = int(wgpu.MapMode.READ)
_MAP_WRITE = int(wgpu.MapMode.WRITE)
_COMPUTE = int(wgpu.ShaderStage.COMPUTE)
_ERROR_NONE = lib.WGPUErrorType_NoError
_ERROR_NAMES = {lib.WGPUErrorType_Validation: "validation", lib.WGPUErrorType_OutOfMemory: "out-of-memory",
                lib.WGPUErrorType_Internal: "internal", lib.WGPUErrorType_Unknown: "unknown"}
_INSTANCE_BACKENDS = {BackendName.VULKAN: "Vulkan", BackendName.METAL: "Metal", BackendName.DX12: "DX12",
                      BackendName.GL: "GL"}
_LIMIT_FIELDS = dict(zip(LIMIT_NAMES, ("maxBufferSize", "maxStorageBufferBindingSize",
                                       "maxStorageBuffersPerShaderStage", "maxBindingsPerBindGroup",
                                       "maxComputeWorkgroupsPerDimension", "maxComputeInvocationsPerWorkgroup",
                                       "maxComputeWorkgroupSizeX", "maxUniformBufferBindingSize")))

# The C entry points the hot paths call, looked up on the cffi lib once at import.
_poll = lib.wgpuDevicePoll
_write_buffer = lib.wgpuQueueWriteBuffer
_create_encoder = lib.wgpuDeviceCreateCommandEncoder
_begin_compute = lib.wgpuCommandEncoderBeginComputePass
_set_pipeline = lib.wgpuComputePassEncoderSetPipeline
_set_bind_group = lib.wgpuComputePassEncoderSetBindGroup
_dispatch = lib.wgpuComputePassEncoderDispatchWorkgroups
_end_pass = lib.wgpuComputePassEncoderEnd
_release_pass = lib.wgpuComputePassEncoderRelease
_copy_b2b = lib.wgpuCommandEncoderCopyBufferToBuffer
_resolve = lib.wgpuCommandEncoderResolveQuerySet
_finish = lib.wgpuCommandEncoderFinish
_release_encoder = lib.wgpuCommandEncoderRelease
_submit = lib.wgpuQueueSubmit
_work_done = lib.wgpuQueueOnSubmittedWorkDone
_release_cmd = lib.wgpuCommandBufferRelease
_map_async = lib.wgpuBufferMapAsync
_mapped_range = lib.wgpuBufferGetMappedRange
_const_mapped_range = lib.wgpuBufferGetConstMappedRange
_unmap = lib.wgpuBufferUnmap


# C types, taken from the entry points' signatures and the structs' fields: each C type named by
# a string costs cffi a parse of the whole header the first time (30-60 ms on this host), and a
# device open would pay ~20 of them.  Only types that appear in no signature are named.
def _arg(fn: Any, index: int) -> Any:
    return ffi.typeof(fn).args[index]


def _field(ctype: Any, name: str) -> Any:
    struct = ctype.item if ctype.kind == "pointer" else ctype
    return dict(struct.fields)[name].type


class _T:
    """The C types this module allocates, casts to or declares callbacks of."""

    buffer_desc = _arg(lib.wgpuDeviceCreateBuffer, 1)
    limits = _arg(lib.wgpuDeviceGetLimits, 1)
    device_desc = _arg(lib.wgpuAdapterRequestDevice, 1)
    features = _field(device_desc, "requiredFeatures")
    instance_desc = _arg(lib.wgpuCreateInstance, 0)
    chained = _field(instance_desc, "nextInChain")
    enumerate_options = _arg(lib.wgpuInstanceEnumerateAdapters, 1)
    adapters = _arg(lib.wgpuInstanceEnumerateAdapters, 2)
    commands = _arg(lib.wgpuQueueSubmit, 2)
    pass_desc = _arg(lib.wgpuCommandEncoderBeginComputePass, 1)
    timestamp_writes = _field(pass_desc, "timestampWrites")
    query_set_desc = _arg(lib.wgpuDeviceCreateQuerySet, 1)
    shader_desc = _arg(lib.wgpuDeviceCreateShaderModule, 1)
    layout_desc = _arg(lib.wgpuDeviceCreateBindGroupLayout, 1)
    layout_entries = _field(layout_desc, "entries")
    pipeline_layout_desc = _arg(lib.wgpuDeviceCreatePipelineLayout, 1)
    layouts = _field(pipeline_layout_desc, "bindGroupLayouts")
    pipeline_desc = _arg(lib.wgpuDeviceCreateComputePipeline, 1)
    group_desc = _arg(lib.wgpuDeviceCreateBindGroup, 1)
    group_entries = _field(group_desc, "entries")
    chars = _field(_field(buffer_desc, "label"), "data")
    void_p = _field(_arg(lib.wgpuBufferMapAsync, 4), "userdata1")
    u64 = ffi.typeof(lib.wgpuBufferGetSize).result
    on_map = _field(_arg(lib.wgpuBufferMapAsync, 4), "callback")
    on_work_done = _field(_arg(lib.wgpuQueueOnSubmittedWorkDone, 1), "callback")
    on_pop = _field(_arg(lib.wgpuDevicePopErrorScope, 1), "callback")
    on_device = _field(_arg(lib.wgpuAdapterRequestDevice, 2), "callback")
    on_lost = _field(_field(device_desc, "deviceLostCallbackInfo"), "callback")
    on_error = _field(_field(device_desc, "uncapturedErrorCallbackInfo"), "callback")


def _array(pointer: Any, count: int) -> Any:
    """``count`` zeroed items behind a pointer type (the pointer keeps its memory alive)."""
    return ffi.from_buffer(pointer, bytearray(max(1, count) * ffi.sizeof(pointer.item)), require_writable=True)


#: cffi's C cast itself: FFI.cast is a Python method around it (a frame more per fence, map and
#: callback); every type this module casts to is a ctype already, never a string to parse.
_cast = _cffi_backend.cast
_VOID_P = _T.void_p
_U64 = _T.u64
_CHARS = _T.chars


def _free_buffer(ptr: Any) -> None:
    lib.wgpuBufferDestroy(ptr)
    lib.wgpuBufferRelease(ptr)


#: The release function of each native kind.  No wgpuQuerySetDestroy: in wgpu-native 29 destroy
#: followed by release panics (the registry entry is removed twice).
_RELEASE = {NativeKind.BIND_GROUP: lib.wgpuBindGroupRelease, NativeKind.PIPELINE: lib.wgpuComputePipelineRelease,
            NativeKind.PIPELINE_LAYOUT: lib.wgpuPipelineLayoutRelease,
            NativeKind.BIND_GROUP_LAYOUT: lib.wgpuBindGroupLayoutRelease,
            NativeKind.SHADER_MODULE: lib.wgpuShaderModuleRelease, NativeKind.BUFFER: _free_buffer,
            NativeKind.QUERY_SET: lib.wgpuQuerySetRelease}

# ---------------------------------------------------------------- callbacks (must outlive devices)

_cells: dict[int, MapCell] = {}
_keys = itertools.count(1)
_keepalive: list[Any] = []


def _text(view: Any) -> str:
    """Python str from a WGPUStringView (empty for NULL); never raises (it runs in callbacks)."""
    try:
        if view.data == _NULL:
            return ""
        n = view.length
        raw = ffi.string(view.data) if n == _WHOLE_SIZE else ffi.unpack(view.data, n)
        return bytes(raw).decode("utf-8", "replace")
    except Exception:
        return "(unreadable message)"


def _resolve_cell(status: int, message: Any, userdata1: Any, userdata2: Any) -> None:
    """A map's or a work-done fence's callback (both have this signature): the cell keyed by
    userdata1 gets the status. Runs inside wgpuDevicePoll on the polling thread; never raises."""
    cell = _cells.pop(int(_cast(_U64, userdata1)), None)
    if cell is not None:
        if status != CELL_OK:
            cell.message = _text(message) or f"map status {int(status)}"
        cell.status = int(status)


_on_map = ffi.callback(_T.on_map)(_resolve_cell)
# The header's signature (wgpu-py 0.32's own on_submitted_work_done_sync has an older one and fails).
_on_work_done = ffi.callback(_T.on_work_done)(_resolve_cell)


def _new_cell() -> MapCell:
    cell = MapCell(next(_keys))
    _cells[cell.key] = cell
    return cell


# ---------------------------------------------------------------- adapters and device request

@dataclass(frozen=True)
class RawAdapter:
    """An adapter handle, the instance it came from (its callbacks run there) and the wgpu-py
    object that owns the handle."""

    ptr: Any
    instance: Any
    owner: Any


_instances: dict[int, Any] = {}


def _instance(mask: int) -> Any:
    """An instance of its own for a set of backends, so that e.g. GL's driver is never started
    when only the first-tier backends are asked for (wgpu-py's global instance has them all)."""
    inst = _instances.get(mask)
    if inst is None:
        extras = ffi.new("WGPUInstanceExtras *")  # a chained struct: in no signature
        extras.chain.sType = lib.WGPUSType_InstanceExtras
        extras.backends = mask
        extras.flags = native_flags["InstanceFlag.Default"]
        desc = ffi.new(_T.instance_desc)
        desc.nextInChain = ffi.cast(_T.chained, extras)
        inst = lib.wgpuCreateInstance(desc)
        if inst == _NULL:
            raise GpuUnavailable(f"wgpu-native could not create an instance for backends {mask:#x}")
        _instances[mask] = inst
    return inst


def enumerate_adapters(backends: frozenset[BackendName] | None) -> list[tuple[Any, AdapterInfo]]:
    """The adapters of ``backends`` (None: all, through wgpu-py, in list_adapters() order)."""
    if backends is None:
        instance = get_wgpu_instance()
        return [(RawAdapter(a._internal, instance, a), info) for a, info in _enumerate()]
    mask = 0
    for name in backends:
        mask |= native_flags["InstanceBackend." + _INSTANCE_BACKENDS[name]]
    instance = _instance(mask)
    options = ffi.new(_T.enumerate_options)
    options.backends = mask
    count = lib.wgpuInstanceEnumerateAdapters(instance, options, _NULL)
    handles = _array(_T.adapters, count)
    lib.wgpuInstanceEnumerateAdapters(instance, options, handles)
    found = []
    for ptr in (handles[i] for i in range(count)):
        owner = _wgpu_api.gpu._create_adapter(ptr)
        found.append((RawAdapter(ptr, instance, owner), info_from_wgpu(owner)))
    return found


# adapters.F64_FEATURES as wgpu-native feature IDs (both are wgpu-native's own, not WebGPU's).
_F64_FEATURE_IDS = (lib.WGPUNativeFeature_ShaderF64, lib.WGPUNativeFeature_ShaderInt64)


def open_backend(adapter: RawAdapter, info: AdapterInfo) -> RawBackend:
    """Request a device with the adapter's own limits (timestamps and f64 when offered)."""
    wanted = ([lib.WGPUFeatureName_TimestampQuery] if "timestamp-query" in info.features else []) + (
        list(_F64_FEATURE_IDS) if info.has_f64 else [])
    device, flags = _request_device(adapter, wanted)
    return RawBackend(adapter, device, flags)


def _request_device(adapter: RawAdapter, wanted: list[int]) -> tuple[Any, BackendFlags]:
    flags = BackendFlags()
    limits = ffi.new(_T.limits)
    if lib.wgpuAdapterGetLimits(adapter.ptr, limits) != CELL_OK:
        raise GpuUnavailable("the adapter did not report its limits")

    @ffi.callback(_T.on_lost)
    def on_lost(dev: Any, reason: int, message: Any, u1: Any, u2: Any) -> None:
        if not flags.closing:
            flags.lost_reason = f"device lost (reason {int(reason)}): {_text(message)}".strip()
            flags.lost = True

    @ffi.callback(_T.on_error)
    def on_error(dev: Any, etype: int, message: Any, u1: Any, u2: Any) -> None:
        flags.errors.append(f"{_ERROR_NAMES.get(int(etype), 'error')}: {_text(message)}")

    result: dict[str, Any] = {}

    @ffi.callback(_T.on_device)
    def on_device(status: int, device: Any, message: Any, u1: Any, u2: Any) -> None:
        result.update(status=int(status), device=device, message=_text(message))

    _keepalive.extend((on_lost, on_error, on_device))
    desc = ffi.new(_T.device_desc)
    feature_ids = array.array("I", wanted or [0])  # (a buffer, not a named C array type: no header parse)
    features = ffi.from_buffer(_T.features, feature_ids)
    desc.requiredFeatureCount = len(wanted)
    desc.requiredFeatures = features
    desc.requiredLimits = limits
    desc.deviceLostCallbackInfo.mode = lib.WGPUCallbackMode_AllowSpontaneous
    desc.deviceLostCallbackInfo.callback = on_lost
    desc.uncapturedErrorCallbackInfo.callback = on_error
    info = ffi.new("WGPURequestDeviceCallbackInfo *")  # passed by value: in no signature as a pointer
    info.mode = lib.WGPUCallbackMode_AllowProcessEvents
    info.callback = on_device
    try:
        lib.wgpuAdapterRequestDevice(adapter.ptr, desc, info[0])
        lib.wgpuInstanceProcessEvents(adapter.instance)
    except Exception as exc:
        raise GpuUnavailable(f"device request raised: {exc}") from exc
    if result.get("status") != CELL_OK or result.get("device") in (None, _NULL):
        raise GpuUnavailable(f"device request failed: {result.get('message') or result.get('status', 'no answer')}")
    return result["device"], flags


# ---------------------------------------------------------------- the backend

class RawBackend(Backend):
    """One wgpu-native device driven through its C API (see the module docstring)."""

    api = DeviceApi.RAW
    #: A copy between buffers and an unmap: the C functions themselves, no Python frame in between.
    copy = staticmethod(_copy_b2b)
    unmap = staticmethod(_unmap)

    def __init__(self, adapter: RawAdapter, device: Any, flags: BackendFlags) -> None:
        self._adapter: RawAdapter | None = adapter  # keeps the adapter handle alive
        self._D = device
        self._Q = lib.wgpuDeviceGetQueue(device)
        self.flags = flags
        self.natives = NativeSet(_RELEASE)
        self.submissions = 0
        limits = ffi.new(_T.limits)
        lib.wgpuDeviceGetLimits(device, limits)
        self.limits = {name: int(getattr(limits, f)) for name, f in _LIMIT_FIELDS.items()}
        # Pre-built structs and bound calls of the hot paths (callback infos are passed by value).
        self.encoder = partial(_create_encoder, device, _NULL)
        self.poll = partial(_poll, device, 0, _NULL)
        self._cmds = ffi.new(_T.commands)
        self._map_info = ffi.new("WGPUBufferMapCallbackInfo *")  # by-value structs: named once
        self._map_info.mode = lib.WGPUCallbackMode_AllowSpontaneous
        self._map_info.callback = _on_map
        self._fence_info = ffi.new("WGPUQueueWorkDoneCallbackInfo *")
        self._fence_info.mode = lib.WGPUCallbackMode_AllowSpontaneous
        self._fence_info.callback = _on_work_done
        self._pass = ffi.new(_T.pass_desc)
        self._pass_ts = ffi.new(_T.pass_desc)
        self._init_scopes()
        self.has_timestamps = bool(lib.wgpuDeviceHasFeature(device, lib.WGPUFeatureName_TimestampQuery))
        self.has_f64 = all(lib.wgpuDeviceHasFeature(device, f) for f in _F64_FEATURE_IDS)
        self._ts_cell: MapCell | None = None
        if self.has_timestamps:
            self._init_timestamps()

    # -------------------------------------------------------------- error scopes

    def _init_scopes(self) -> None:
        popped: list[tuple[int, int, str]] = []

        @ffi.callback(_T.on_pop)
        def on_pop(status: int, etype: int, message: Any, u1: Any, u2: Any) -> None:
            popped.append((int(status), int(etype), _text(message) if etype != _ERROR_NONE else ""))

        _keepalive.append(on_pop)
        self._popped = popped
        self._pop_info = ffi.new("WGPUPopErrorScopeCallbackInfo *")
        self._pop_info.mode = lib.WGPUCallbackMode_AllowSpontaneous
        self._pop_info.callback = on_pop

    def _push(self) -> int:
        """Push out-of-memory and validation scopes (wgpu-native 29 panics on the internal filter,
        so internal errors reach the uncaptured list); returns a mark into that list."""
        lib.wgpuDevicePushErrorScope(self._D, lib.WGPUErrorFilter_OutOfMemory)
        lib.wgpuDevicePushErrorScope(self._D, lib.WGPUErrorFilter_Validation)
        return len(self.flags.errors)

    def _pop(self, mark: int) -> str | None:
        """Pop _push's scopes: the first error, also an uncaptured one reported since ``mark``."""
        popped = self._popped
        del popped[:]
        lib.wgpuDevicePopErrorScope(self._D, self._pop_info[0])
        lib.wgpuDevicePopErrorScope(self._D, self._pop_info[0])
        msg = None
        for status, etype, text in popped:
            if status == CELL_OK and etype != _ERROR_NONE:
                msg = f"{_ERROR_NAMES.get(etype, 'error')}: {text}"
                break
            if status != CELL_OK and msg is None:
                msg = f"error scope could not be popped (status {status})"
        if len(popped) < 2 and msg is None:
            msg = "error scope callback did not run"
        errors = self.flags.errors
        if len(errors) > mark:
            msg = msg or errors[mark]
            del errors[mark:]
        return msg

    def _checked(self, kind: NativeKind, create: Any, *args: Any) -> Native:
        """``create(*args)`` inside error scopes, registered; BackendError with nothing left behind."""
        mark = self._push()
        obj = create(*args)
        err = self._pop(mark)
        native = self.natives.own(kind, obj) if obj != _NULL else None
        if err is None and native is not None:
            return native
        self.natives.release(native)
        raise BackendError(err or f"no {kind} returned")

    # -------------------------------------------------------------- resources

    def create_buffer(self, size: int, usage: int, mapped: bool = False) -> Native:
        desc = ffi.new(_T.buffer_desc)
        desc.usage = usage
        desc.size = size
        desc.mappedAtCreation = bool(mapped)
        return self._checked(NativeKind.BUFFER, lib.wgpuDeviceCreateBuffer, self._D, desc)

    def create_pipeline(self, wgsl: str, read_only: tuple[bool, ...], entry_point: str) -> tuple[Native, ...]:
        made: list[Native] = []
        try:
            made.append(self._shader_module(wgsl))
            made.append(self._bind_group_layout(read_only))
            layouts = ffi.new(_T.layouts, made[1].obj)
            pld = ffi.new(_T.pipeline_layout_desc)
            pld.bindGroupLayoutCount = 1
            pld.bindGroupLayouts = layouts
            made.append(self._checked(NativeKind.PIPELINE_LAYOUT, lib.wgpuDeviceCreatePipelineLayout, self._D, pld))
            cpd = ffi.new(_T.pipeline_desc)
            cpd.layout = made[2].obj
            cpd.compute.module = made[0].obj
            entry = entry_point.encode()
            cpd.compute.entryPoint.data = entry_chars = ffi.from_buffer(_T.chars, entry)
            cpd.compute.entryPoint.length = len(entry)
            made.append(self._checked(NativeKind.PIPELINE, lib.wgpuDeviceCreateComputePipeline, self._D, cpd))
        except BackendError as exc:
            for native in made:
                self.natives.release(native)
            raise PipelineError(str(exc)) from None
        pipeline, bgl, layout, module = made[3], made[1], made[2], made[0]
        return pipeline, bgl, layout, module

    def _shader_module(self, wgsl: str) -> Native:
        src = ffi.new("WGPUShaderSourceWGSL *")  # a chained struct: in no signature
        src.chain.sType = lib.WGPUSType_ShaderSourceWGSL
        code = wgsl.encode()
        keep = ffi.from_buffer(_T.chars, code)  # alive until the call returned
        src.code.data = keep
        src.code.length = len(code)
        smd = ffi.new(_T.shader_desc)
        smd.nextInChain = ffi.cast(_T.chained, src)
        return self._checked(NativeKind.SHADER_MODULE, lib.wgpuDeviceCreateShaderModule, self._D, smd)

    def _bind_group_layout(self, read_only: tuple[bool, ...]) -> Native:
        entries = _array(_T.layout_entries, len(read_only) + 1)
        entries[0].binding = 0
        entries[0].visibility = _COMPUTE
        entries[0].buffer.type = lib.WGPUBufferBindingType_Uniform
        entries[0].buffer.minBindingSize = 16
        for i, ro in enumerate(read_only, 1):
            entries[i].binding = i
            entries[i].visibility = _COMPUTE
            entries[i].buffer.type = (lib.WGPUBufferBindingType_ReadOnlyStorage if ro
                                      else lib.WGPUBufferBindingType_Storage)
        desc = ffi.new(_T.layout_desc)
        desc.entryCount = len(read_only) + 1
        desc.entries = entries
        return self._checked(NativeKind.BIND_GROUP_LAYOUT, lib.wgpuDeviceCreateBindGroupLayout, self._D, desc)

    def create_bind_group(self, layout: Any, uniform: Any, storage: Sequence[Any]) -> Native:
        entries = _array(_T.group_entries, len(storage) + 1)
        for i, buf in enumerate((uniform, *storage)):
            entries[i].binding = i
            entries[i].buffer = buf
            entries[i].size = _WHOLE_SIZE
        desc = ffi.new(_T.group_desc)
        desc.layout = layout
        desc.entryCount = len(storage) + 1
        desc.entries = entries
        return self._checked(NativeKind.BIND_GROUP, lib.wgpuDeviceCreateBindGroup, self._D, desc)

    # -------------------------------------------------------------- recording and submission

    def write_buffer(self, buf: Any, offset: int, data: np.ndarray | bytes, nbytes: int) -> None:
        _write_buffer(self._Q, buf, offset, data if data.__class__ is bytes else ffi.from_buffer(_CHARS, data), nbytes)

    def dispatch(self, enc: Any, pipeline: Any, bind_group: Any, gx: int, gy: int, timestamps: bool) -> None:
        cp = _begin_compute(enc, self._pass_ts if timestamps else self._pass)
        _set_pipeline(cp, pipeline)
        _set_bind_group(cp, 0, bind_group, 0, _NULL)
        _dispatch(cp, gx, gy, 1)
        _end_pass(cp)
        _release_pass(cp)
        if timestamps:
            _resolve(enc, self._ts_query.obj, 0, 2, self._ts_resolve.obj, 0)
            _copy_b2b(enc, self._ts_resolve.obj, 0, self._ts_read.obj, 0, 16)

    def begin_pass(self, enc: Any) -> Any:
        return _begin_compute(enc, self._pass)

    def pass_dispatch(self, cp: Any, pipeline: Any, bind_group: Any, gx: int, gy: int) -> None:
        if pipeline is not None:
            _set_pipeline(cp, pipeline)
        if bind_group is not None:
            _set_bind_group(cp, 0, bind_group, 0, _NULL)
        _dispatch(cp, gx, gy, 1)

    def end_pass(self, cp: Any) -> None:
        _end_pass(cp)
        _release_pass(cp)

    def submit(self, enc: Any) -> None:
        cmd = _finish(enc, _NULL)
        _release_encoder(enc)
        cmds = self._cmds
        cmds[0] = cmd
        _submit(self._Q, 1, cmds)
        _release_cmd(cmd)
        self.submissions += 1

    def fence(self) -> MapCell:
        # wgpuDevicePoll's "queue empty" answer is no fence on wgpu-native 29 (it reports true
        # while a dispatch still runs); the work-done callback is.
        cell = _new_cell()
        info = self._fence_info
        info.userdata1 = _cast(_VOID_P, cell.key)
        _work_done(self._Q, info[0])
        return cell

    def drop_encoder(self, enc: Any) -> None:
        _release_encoder(enc)

    # -------------------------------------------------------------- mapping

    def map(self, buf: Any, write: bool, offset: int, size: int) -> MapCell:
        cell = _new_cell()
        info = self._map_info
        info.userdata1 = _cast(_VOID_P, cell.key)
        _map_async(buf, _MAP_WRITE if write else _MAP_READ, offset, size, info[0])
        return cell

    def forget(self, cell: MapCell) -> None:
        _cells.pop(cell.key, None)

    def read_address(self, buf: Any, offset: int, size: int) -> int:
        return int(_cast(_U64, _const_mapped_range(buf, offset, size)))

    def write_window(self, buf: Any, size: int) -> tuple[int, Any]:
        return int(_cast(_U64, _mapped_range(buf, 0, size))), None

    def flush_window(self, buf: Any, window: Any, nbytes: int) -> None:
        """Nothing to do: the window is the mapping itself."""

    # -------------------------------------------------------------- timestamps

    def _init_timestamps(self) -> None:
        desc = ffi.new(_T.query_set_desc)
        desc.type = lib.WGPUQueryType_Timestamp
        desc.count = 2
        try:
            self._ts_query = self._checked(NativeKind.QUERY_SET, lib.wgpuDeviceCreateQuerySet, self._D, desc)
            self._ts_resolve = self.create_buffer(256, Usage.QUERY_RESOLVE)
            self._ts_read = self.create_buffer(16, Usage.READBACK)
        except BackendError:
            self.has_timestamps = False
            return
        self._ts_writes = ffi.new(_T.timestamp_writes)
        self._ts_writes.querySet = self._ts_query.obj
        self._ts_writes.beginningOfPassWriteIndex = 0
        self._ts_writes.endOfPassWriteIndex = 1
        self._pass_ts.timestampWrites = self._ts_writes
        self._ts_period_ns = float(lib.wgpuQueueGetTimestampPeriod(self._Q))

    def timestamp_cell(self) -> MapCell:
        cell = self._ts_cell = self.map(self._ts_read.obj, False, 0, 16)
        return cell

    def timestamp_seconds(self) -> float | None:
        cell, self._ts_cell = self._ts_cell, None
        if cell is None or cell.status != CELL_OK:
            raise BackendError(f"timestamp readback failed: {cell.message if cell else 'no map'}")
        read = self._ts_read.obj
        p = _const_mapped_range(read, 0, 16)
        begin, end = np.frombuffer(ffi.buffer(p, 16), np.uint64).tolist() if p != _NULL else (1, 0)
        _unmap(read)
        return None if end < begin else (end - begin) * self._ts_period_ns * 1e-9

    def reset_timestamps(self) -> None:
        if self._ts_cell is None:
            return
        self.forget(self._ts_cell)
        self._ts_cell = None
        self.natives.release(self._ts_read)
        try:
            self._ts_read = self.create_buffer(16, Usage.READBACK)
        except BackendError:
            self.has_timestamps = False

    def close(self) -> None:
        self.flags.closing = True
        self.natives.release_all()
        lib.wgpuQueueRelease(self._Q)
        lib.wgpuDeviceDestroy(self._D)
        lib.wgpuDeviceRelease(self._D)
        self._adapter = None
