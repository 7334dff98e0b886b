"""Where buffer contents live: lazy uploads and readbacks, the GPU dispatch transaction and the
quarantine latch (abi.md §4.3-4.7). Runs under the host lock; knows buffers, not Wasm."""
from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .abi import accessor as acc
from .abi.table import Status
from .compiler import parameter_block, workgroup_grid
from .compiler.contract import KernelError
from .gpu import DeviceAllocationError, DeviceFailure, DeviceTuning, ExecutePlan, UploadStage
READAHEAD_MAX_BYTES = DeviceTuning().readahead_max_bytes
from .buffers import MAX_IDLE_OUTPUTS, UNIFORM_BYTES, Buffer, DeviceResources, InstanceBuffers
from .diagnostics import BufferOperation, TransferCounters
from .memcopy import copy_bytes, copy_many

ERROR_WORD_BYTES = 16
KERNEL_FALLBACK = -1  # run_dispatch's "completed, nothing published, fall back" (never a guest status)
KERNEL_ERROR_REASONS = {KernelError.TRAP: "KERNEL_TRAP", KernelError.LOOP_BUDGET: "LOOP_BUDGET",
                        KernelError.INDEX_RANGE: "INDEX_RANGE"}

#: A full set of a buffer at least this big, whose last dispatch uploaded it whole, also writes
#: the words into a device upload stage (a second copy of the guest bytes running alongside the
#: one into the CPU copy: the PCIe write overlaps the host copy); the dispatch then uploads with a
#: device-side copy. 32-bit types only. (One thread writing each piece to both places in turn was
#: slower on the H200 host: 5.0 against 3.3 ms at 40 MB.) From 1 MiB: at 1M elements the round
#: trip with both paths from 1 MiB took 1.24 ms against 2.13 ms with them from 4 MiB (off).
PRESTAGE_MIN_BYTES = 1 << 20
#: A copy-back that must read back a buffer at least this big leaves the words in the mapped
#: readback staging ("parked") and copies them to the guest from there, skipping the copy into
#: the CPU copy; scalar access, fallback, partial sets and quarantine copy them in when needed.
#: Above the read-ahead limit, so the two never meet on one buffer.
PARK_MIN_BYTES = READAHEAD_MAX_BYTES + 4
#: A dispatch that overwrites a whole output whose current contents are parked writes the
#: committed copy itself instead of a scratch (the parking is the way back on failure), so a
#: budget-bound round trip needs no scratch and evicts nothing.
IN_PLACE_OUTPUTS = True
#: Threads for a prestaged set's two copies (into the CPU copy, into the stage). On the H200 host
#: (40 MB, the whole set): 4 + 4 took 2.54-2.78 ms, 6 + 4 2.70, 8 + 8 2.76, 6 + 2 3.51, 8 + 2 3.62.
SET_COPY_THREADS = (4, 4)

# Stored-format dtype per stored width, for narrowing words on readback and widening on upload.
_NARROW = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def words_to_stored(words: np.ndarray, stored_bytes: int) -> np.ndarray:
    """Device words -> stored bytes: narrow types keep the low 8/16 bits (§4.4 step 5)."""
    return words.astype(_NARROW[stored_bytes], copy=False).view(np.uint8)


def stored_to_words(raw: np.ndarray, stored_bytes: int) -> np.ndarray:
    """Stored bytes -> device words, narrow values zero-extended into the low bits (§4.5)."""
    return raw.view(_NARROW[stored_bytes]).astype(np.uint32, copy=False)


@dataclass
class DispatchPlan:
    """What the transaction needs to know about a kernel (from the compiler's KernelPlan)."""

    pipeline: Any
    used_slots: tuple[int, ...]
    write_slots: frozenset[int]
    read_before_write: frozenset[int]
    error_word: bool = False


class Residency:
    def __init__(self, device: Any, budget_instances: Callable[[], list[InstanceBuffers]],
                 profile_stages: bool):
        self.device = device
        self.quarantined = False
        self.quarantine_reason = ""
        self.totals_complete = True
        self._instances = budget_instances
        self.profile_stages = profile_stages
        #: Phase split of the last big full set (seconds): reserve (with evictions), stage, copy.
        self.last_set_timing: dict[str, float] = {}

    # -- quarantine -----------------------------------------------------------------------
    @property
    def usable(self) -> bool:
        return self.device is not None and not self.quarantined

    def check_loss(self) -> None:
        if self.device is not None and not self.quarantined and self.device.is_lost():
            self.quarantine("device lost")

    def quarantine(self, reason: str) -> None:
        """Latch for the runtime's life: GPU-only contents become CONTENTS_LOST everywhere (§4.7)."""
        if not self.quarantined:
            self.quarantined = True
            self.quarantine_reason = reason
        for inst in self._instances():
            recs = inst.records()
            for buf in inst.buffers.values():
                if buf.parked is not None:
                    # Host memory still mapped (unless the device was closed under us): keep it.
                    if inst.parked_valid(buf) and self.device is not None and not self.device.closed:
                        self._materialize(inst, buf)
                    self._unpark(inst, buf, keep=False)
                if buf.stage is not None:
                    self.drop_held(inst, buf, "stage")
                f = int(recs["flags"][buf.record])
                if not f & acc.CPU_CURRENT:
                    f |= acc.LOST
                recs["flags"][buf.record] = f & ~(acc.GPU_CURRENT | acc.DIRTY)

    def release_device_buffer(self, gpu_buf: Any) -> None:
        if self.device is not None and gpu_buf is not None:
            self.device.release(gpu_buf)

    # -- upload stages and parked readbacks (extensions; see PRESTAGE_MIN_BYTES, PARK_MIN_BYTES) --
    def drop_held(self, inst: InstanceBuffers, buf: Buffer, what: str = "all") -> None:
        """Let go of buf's upload stage (unused: stop prestaging it) and/or its parked readback.
        "stage" and "parked" evict: a parked readback of the current version is first copied into
        the CPU copy (the buffer stays CPU-current, as a plain readback leaves it) and its staging
        is released. "all" (the buffer is being freed) keeps the staging for the next readback."""
        if what != "parked":
            stage, buf.stage = buf.stage, None
            self._drop_stage(inst, buf, stage)
        if what != "stage" and buf.parked is not None:
            if what == "parked" and inst.parked_valid(buf) and not inst.flags(buf) & acc.CPU_CURRENT \
                    and self.device is not None and not self.device.closed:
                self._materialize(inst, buf)
            self._unpark(inst, buf, keep=what == "all")

    def set_copy(self, inst: InstanceBuffers, buf: Buffer, cpu: int, guest: int, nbytes: int) -> UploadStage | None:
        """A full set's copy into the CPU copy; also into an upload stage when the next dispatch is
        likely to upload this buffer whole. Returns the stage for keep_stage() after the set commits."""
        if nbytes < PRESTAGE_MIN_BYTES and buf.stage is None and buf.parked is None:
            copy_bytes(cpu, guest, nbytes)  # the small sets of the hot path
            return None
        t0 = time.perf_counter()
        if buf.parked is not None:
            self._unpark(inst, buf)
        stage, buf.stage = buf.stage, None
        reserved = stage is None and buf.stage_hint and nbytes >= PRESTAGE_MIN_BYTES and buf.stored_bytes == 4 \
            and self.usable and inst.reserve(nbytes)
        t1 = time.perf_counter()
        if reserved:
            try:
                stage = self.device.stage(nbytes)
            except (DeviceAllocationError, DeviceFailure):
                inst.release(nbytes)
        t2 = time.perf_counter()
        if stage is None:
            copy_bytes(cpu, guest, nbytes)
        else:
            host_threads, stage_threads = SET_COPY_THREADS
            copy_many([(cpu, guest, nbytes, host_threads), (stage.address, guest, nbytes, stage_threads)])
        if nbytes >= PRESTAGE_MIN_BYTES:
            self.last_set_timing = {"reserve": t1 - t0, "stage": t2 - t1, "copy": time.perf_counter() - t2}
        return stage

    def keep_stage(self, inst: InstanceBuffers, buf: Buffer, stage: UploadStage | None) -> None:
        if stage is not None:
            buf.stage = stage
            buf.stage_version = inst.version(buf)

    def _unpark(self, inst: InstanceBuffers, buf: Buffer, keep: bool = True) -> None:
        """End buf's parked readback; its staging becomes the instance's again (or is released)."""
        parked, buf.parked = buf.parked, None
        if parked is None:
            return
        staging, size = parked
        d = inst.device
        if keep and d.staging is None and self.device is not None and not self.device.closed:
            self.device.unmap(staging)
            d.staging = parked
        else:
            self.release_device_buffer(staging)
            inst.release(size)

    def _materialize(self, inst: InstanceBuffers, buf: Buffer) -> None:
        """Copy a valid parked readback into the CPU copy: the buffer is CPU-current again."""
        assert buf.parked is not None
        copy_bytes(inst.cpu_address(buf), buf.parked[0].mapped, buf.nbytes)
        inst.set_flags(buf, inst.flags(buf) | acc.CPU_CURRENT)

    def copy_source(self, inst: InstanceBuffers, buf: Buffer, deadline: float, counters: TransferCounters,
                    op: BufferOperation) -> tuple[int, int]:
        """(status, address) of buf's current bytes for a copy-back: the CPU copy, or a parked
        readback (a big buffer whose CPU copy is stale is read back and parked, not copied in)."""
        flags = inst.flags(buf)
        if not flags & (acc.CPU_CURRENT | acc.LOST) and buf.parked is not None:
            if inst.parked_valid(buf):
                return Status.OK, buf.parked[0].mapped
            self._unpark(inst, buf)
        if flags & (acc.CPU_CURRENT | acc.LOST) or buf.stored_bytes != 4 or buf.gpu_bytes < PARK_MIN_BYTES:
            status = self.make_cpu_current(inst, buf, deadline, counters, op)
            return status, inst.cpu_address(buf) if status == Status.OK else 0
        status = self._readback(inst, buf, deadline, counters, op, park=True)
        return status, buf.parked[0].mapped if status == Status.OK and buf.parked is not None else 0

    # -- CPU side -----------------------------------------------------------------------------
    def make_cpu_current(self, inst: InstanceBuffers, buf: Buffer, deadline: float,
                         counters: TransferCounters, op: BufferOperation | None = None) -> int:
        """§4.4: the whole buffer read back once when the CPU copy is stale."""
        flags = inst.flags(buf)
        if flags & acc.LOST:
            return Status.CONTENTS_LOST
        if flags & acc.CPU_CURRENT:
            return Status.OK
        if buf.parked is not None:
            # This version was read back already (and counted then): copy it in from the parking.
            valid = inst.parked_valid(buf)
            if valid:
                self._materialize(inst, buf)
            self._unpark(inst, buf)
            if valid:
                return Status.OK
        return self._readback(inst, buf, deadline, counters, op, park=False)

    def _readback(self, inst: InstanceBuffers, buf: Buffer, deadline: float, counters: TransferCounters,
                  op: BufferOperation | None, park: bool) -> int:
        """§4.4 steps 3-7: into the CPU copy, or (park) left mapped in the staging as buf.parked."""
        self.check_loss()
        if not self.usable or buf.gpu is None:
            self.quarantine(self.quarantine_reason or "no usable device holds the current contents")
            return Status.CONTENTS_LOST
        d = inst.device
        size = buf.gpu_bytes
        if d.staging is None or d.staging[1] != size:
            if d.staging is not None:
                self.release_device_buffer(d.staging[0])
                inst.release(d.staging[1])
                d.staging = None
            if not inst.reserve(size):
                return Status.LIMIT_EXCEEDED
            try:
                staging = self.device.create_staging(size)
            except DeviceAllocationError:
                inst.release(size)
                return Status.DEVICE_ERROR
            d.staging = (staging, size)
            d.staging_allocations += 1
        if op is not None:
            op.hardware_submitted = not self.device.info.is_software
        t0 = time.perf_counter()
        # Whole-word types read straight into the (stale, not yet current) CPU copy.
        direct = inst.cpu_bytes(buf).view(np.uint32) if buf.stored_bytes == 4 and not park else None
        try:
            if park:
                self.device.read_mapped(buf.gpu, d.staging[0], size, max(0.0, deadline - t0))
                words = None
            else:
                words = self.device.read(buf.gpu, d.staging[0], size, max(0.0, deadline - t0), out=direct)
        except DeviceFailure as exc:
            self.totals_complete = False
            if op is not None:
                op.transfer_counts_complete = False
            data = getattr(exc, "data", None)
            if data is not None:
                inst.cpu_bytes(buf)[:] = words_to_stored(data, buf.stored_bytes)
                inst.set_flags(buf, inst.flags(buf) | acc.CPU_CURRENT)
            # The staging buffer's state is unknown now: keep it charged as retired, never reuse it.
            d.retired_bytes += d.staging[1]
            d.staging = None
            self.quarantine(f"readback failed: {exc}")
            return Status.CANCELLED if exc.timed_out or time.perf_counter() >= deadline else Status.DEVICE_ERROR
        t1 = time.perf_counter()
        if park:
            buf.parked, d.staging = d.staging, None
            buf.parked_version = inst.version(buf)
        else:
            if direct is None:
                inst.cpu_bytes(buf)[:] = words_to_stored(words, buf.stored_bytes)
            inst.set_flags(buf, inst.flags(buf) | acc.CPU_CURRENT)
        buf.readahead_hint = True
        buf.readahead_sent = False
        if op is not None:
            op.download += t1 - t0
            op.conversion += time.perf_counter() - t1
        counters.logical_download_bytes += buf.nbytes
        counters.gpu_download_bytes += size
        counters.download_count += 1
        return Status.OK

    # -- the dispatch transaction ----------------------------------------------------------
    def run_dispatch(self, inst: InstanceBuffers, plan: DispatchPlan, slot_buffers: dict[int, Buffer],
                     count: int, deadline: float, op: BufferOperation) -> int:
        """§4.6: outputs go to private scratch and are committed together after completion (an
        output whose current contents are parked may be written in place: see IN_PLACE_OUTPUTS)."""
        self.check_loss()
        if not self.usable:
            return Status.CONTENTS_LOST
        dev = self.device
        d = inst.device
        transient = 0  # bytes reserved only for this submission
        acquired: list[tuple[Any, int]] = []  # scratch taken from pool or newly allocated
        uploads: list[tuple[Buffer, int, int, np.ndarray | UploadStage]] = []  # (buf, start, end, words)
        seeds: list[tuple[Any, Any, int, int]] = []
        outputs: dict[int, tuple[Any, int]] = {}
        storage: list[Any] = []
        readahead: list[Any] = []
        # Outputs written in place (see below), with their parked readbacks held aside meanwhile.
        in_place: dict[int, tuple[Buffer, tuple[Any, int]]] = {}

        def reattach() -> None:
            for held_buf, parked in in_place.values():
                held_buf.parked = parked

        def unwind(status: int) -> int:
            reattach()
            for _b, _s, _e, words in uploads:
                if isinstance(words, UploadStage):
                    dev.unstage(words)  # its charge is in transient
            for gpu_buf, n in acquired:
                if len(d.idle_outputs) < MAX_IDLE_OUTPUTS:
                    d.idle_outputs.append((gpu_buf, n))
                else:
                    self.release_device_buffer(gpu_buf)
                    inst.release(n)
            inst.release(transient)
            return status

        for slot in plan.used_slots:
            buf = slot_buffers[slot]
            written = slot in plan.write_slots
            replace = written and slot not in plan.read_before_write and count == buf.length
            if inst.flags(buf) & acc.LOST:
                return unwind(Status.CONTENTS_LOST)
            if not replace:
                status, upload = self._prepare_gpu_copy(inst, buf)
                if status:
                    return unwind(status)
                if upload is not None:
                    start, end, words = upload
                    # (A stage was reserved when the set filled it.)
                    if not isinstance(words, UploadStage) and not inst.reserve(words.nbytes):
                        return unwind(Status.LIMIT_EXCEEDED)
                    transient += words.nbytes
                    uploads.append((buf, start, end, words))
            if written:
                size = buf.gpu_bytes
                if IN_PLACE_OUTPUTS and replace and not plan.error_word and buf.gpu is not None \
                        and buf.parked is not None and inst.parked_valid(buf) and inst.flags(buf) & acc.GPU_CURRENT:
                    # The current contents are safe on the host (parked): the kernel may write the
                    # committed copy itself, and no scratch is needed. A failure restores from the
                    # parking (quarantine copies it in; a late cancellation writes it back).
                    in_place[slot] = (buf, buf.parked)
                    buf.parked = None  # held aside: no reservation below may evict it
                    outputs[slot] = (buf.gpu, size)
                    storage.append(buf.gpu)
                    continue
                scratch = None
                for i, (gpu_buf, n) in enumerate(d.idle_outputs):
                    if n == size:
                        scratch = d.idle_outputs.pop(i)
                        break
                if scratch is None:
                    if not inst.reserve(size):
                        return unwind(Status.LIMIT_EXCEEDED)
                    try:
                        scratch = (dev.create_storage(size), size)
                    except DeviceAllocationError:
                        inst.release(size)
                        return unwind(Status.DEVICE_ERROR)
                acquired.append(scratch)
                outputs[slot] = scratch
                if buf.readahead_hint and size <= READAHEAD_MAX_BYTES:
                    readahead.append(scratch[0])
                if not replace:
                    if slot in plan.read_before_write:
                        seeds.append((buf.gpu, scratch[0], 0, size))
                    elif count < buf.length:
                        seeds.append((buf.gpu, scratch[0], count * 4, size - count * 4))
                storage.append(scratch[0])
            else:
                storage.append(buf.gpu)
        status, params = self._small_buffers(inst, plan, count)
        if status:
            return unwind(status)
        if params is not None:
            transient += UNIFORM_BYTES
        error_upload = []
        if plan.error_word:
            storage.append(d.error_word[0])
            error_upload = [(d.error_word[0], 0, np.zeros(ERROR_WORD_BYTES // 4, dtype=np.uint32))]
        if time.perf_counter() >= deadline:
            return unwind(Status.CANCELLED)
        execute = ExecutePlan(
            pipeline=plan.pipeline, uniform=d.uniform, params=params, storage=storage,
            uploads=[(b.gpu, start * 4, words) for b, start, _end, words in uploads] + error_upload,
            seeds=seeds, workgroups=workgroup_grid(count), separate_stages=self.profile_stages,
            readahead=readahead)
        op.hardware_submitted = not dev.info.is_software  # a software adapter is no GPU
        try:
            result = dev.execute(execute, max(0.0, deadline - time.perf_counter()))
        except DeviceFailure as exc:
            self.totals_complete = False
            op.transfer_counts_complete = False
            # Payloads the backend may still hold stay charged as retired (§4.6 step 7).
            d.retired_bytes += transient
            transient = 0
            self._retire(d, acquired)
            reattach()
            self.quarantine(f"dispatch failed at {exc.stage}: {exc}")
            return Status.CANCELLED if exc.timed_out or time.perf_counter() >= deadline else Status.DEVICE_ERROR
        inst.release(transient)
        transient = 0
        kernel_error = 0
        if plan.error_word:
            try:
                kernel_error = int(dev.read(d.error_word[0], d.error_word[1], ERROR_WORD_BYTES,
                                            max(0.0, deadline - time.perf_counter()))[0])
            except DeviceFailure as exc:
                self.totals_complete = False
                op.transfer_counts_complete = False
                self._retire(d, acquired)
                self.quarantine(f"error word readback failed: {exc}")
                return Status.CANCELLED if exc.timed_out else Status.DEVICE_ERROR
        # Completed: the uploads are valid cache even if we do not publish below.
        for buf, start, end, words in uploads:
            f = inst.flags(buf)
            inst.set_flags(buf, (f | acc.GPU_CURRENT) & ~acc.DIRTY)
            # Uploaded whole: prestage the next full set of it (if it is big enough to matter).
            buf.stage_hint = start == 0 and end == buf.length and buf.stored_bytes == 4 \
                and buf.gpu_bytes >= PRESTAGE_MIN_BYTES
            op.logical_upload_bytes += (end - start) * buf.stored_bytes
            op.gpu_upload_bytes += words.nbytes
            op.upload_count += 1
        for _src, _dst, _off, nbytes in seeds:
            op.device_copy_bytes += nbytes
            op.device_copy_count += 1
        if params is not None:
            op.parameter_upload_bytes += UNIFORM_BYTES
            op.parameter_upload_count += 1
            d.uniform_count = count
        op.upload += result.upload_s
        op.device_copy += result.seed_s
        op.compute += result.compute_s
        if result.device_compute_s is not None:
            op.timestamps_valid = True
            op.device_compute = result.device_compute_s
        if kernel_error:
            # The kernel would trap, ran out of loop budget or read out of range: publish nothing;
            # the guest's CPU runner reproduces the Wasm behaviour exactly.
            op.reason_code = KERNEL_ERROR_REASONS.get(kernel_error, "KERNEL_TRAP")
            op.reason = f"kernel error word {kernel_error}"
            return unwind(KERNEL_FALLBACK)
        if time.perf_counter() >= deadline:
            return self._restore_in_place(inst, in_place, unwind(Status.CANCELLED))
        if dev.is_lost():
            self._retire(d, acquired)
            reattach()
            self.quarantine("device lost after dispatch")
            return Status.DEVICE_ERROR
        # Single commit: every written slot switches to its scratch together.
        t0 = time.perf_counter()
        reattach()  # stale from here on: the loop below lets them go
        for slot, (scratch, size) in outputs.items():
            buf = slot_buffers[slot]
            if slot not in in_place:  # (written in place: the committed copy already is the output)
                if buf.gpu is not None:
                    if len(d.idle_outputs) < MAX_IDLE_OUTPUTS:
                        d.idle_outputs.append((buf.gpu, size))
                    else:
                        self.release_device_buffer(buf.gpu)
                        inst.release(size)
                    inst.gpu_charge -= size
                buf.gpu = scratch
                inst.gpu_charge += size
            if buf.parked is not None:
                self._unpark(inst, buf)
            if buf.readahead_sent:  # the last read-ahead of this buffer went unread: stop asking
                buf.readahead_hint = False
            buf.readahead_sent = scratch in readahead
            inst.set_flags(buf, (inst.flags(buf) | acc.GPU_CURRENT) & ~(acc.CPU_CURRENT | acc.DIRTY))
            inst.bump_version(buf)
        op.commit += time.perf_counter() - t0
        return Status.OK

    def _small_buffers(self, inst: InstanceBuffers, plan: DispatchPlan, count: int) -> tuple[int, bytes | None]:
        """The parameter block (one 16-byte uniform per instance, rewritten only when the count
        changes; its payload reserved for this dispatch) and the error word a kernel may need.
        They are in use from here on: no reservation made meanwhile may evict them."""
        d = inst.device
        d.small_in_use = True
        try:
            return self._set_up_small_buffers(inst, plan, count)
        finally:
            d.small_in_use = False

    def _set_up_small_buffers(self, inst: InstanceBuffers, plan: DispatchPlan, count: int) -> tuple[int, bytes | None]:
        d = inst.device
        dev = self.device
        if d.uniform is None:
            if not inst.reserve(UNIFORM_BYTES):
                return Status.LIMIT_EXCEEDED, None
            try:
                d.uniform = dev.create_uniform(UNIFORM_BYTES)
            except DeviceAllocationError:
                inst.release(UNIFORM_BYTES)
                return Status.DEVICE_ERROR, None
            d.uniform_allocations += 1
            d.uniform_count = None
        params = None
        if d.uniform_count != count:
            if not inst.reserve(UNIFORM_BYTES):
                return Status.LIMIT_EXCEEDED, None
            params = parameter_block(count)
        if plan.error_word and d.error_word is None:
            status = Status.OK
            if not inst.reserve(2 * ERROR_WORD_BYTES):
                status = Status.LIMIT_EXCEEDED
            else:
                try:
                    d.error_word = (dev.create_storage(ERROR_WORD_BYTES), dev.create_staging(ERROR_WORD_BYTES))
                except DeviceAllocationError:
                    inst.release(2 * ERROR_WORD_BYTES)
                    status = Status.DEVICE_ERROR
            if status:
                if params is not None:
                    inst.release(UNIFORM_BYTES)
                return status, None
        return Status.OK, params

    def _restore_in_place(self, inst: InstanceBuffers, in_place: dict[int, tuple[Buffer, tuple[Any, int]]],
                          status: int) -> int:
        """A dispatch that completed but publishes nothing (cancelled late): outputs written in
        place get their committed contents back from the parking (a failure here quarantines,
        which copies the parking into the CPU copy instead)."""
        for buf, (staging, _size) in in_place.values():
            words = np.frombuffer((ctypes.c_uint32 * (buf.gpu_bytes // 4)).from_address(staging.mapped), np.uint32)
            try:
                self.device.write(buf.gpu, 0, words)
            except DeviceFailure as exc:
                self.quarantine(f"restoring an output written in place failed: {exc}")
                break
        return status

    @staticmethod
    def _retire(d: DeviceResources, acquired: list[tuple[Any, int]]) -> None:
        """Scratch whose device state is uncertain: kept charged as retired until the host stops."""
        for _gpu_buf, n in acquired:
            d.retired_bytes += n
        acquired.clear()

    def _drop_stage(self, inst: InstanceBuffers, buf: Buffer, stage: UploadStage | None) -> None:
        """An upload stage that will not be used: its charge goes, and so does the hint."""
        if stage is not None:
            inst.release(stage.nbytes)
            buf.stage_hint = False
            if self.device is not None:
                self.device.unstage(stage)

    def _prepare_gpu_copy(self, inst: InstanceBuffers, buf: Buffer) -> tuple[int, tuple[int, int, np.ndarray | UploadStage] | None]:
        """§4.5: allocate the committed copy if needed and say which range must be uploaded."""
        flags = inst.flags(buf)
        if flags & acc.LOST:
            return Status.CONTENTS_LOST, None
        if flags & acc.GPU_CURRENT:
            return Status.OK, None
        if not flags & acc.CPU_CURRENT:
            return Status.CONTENTS_LOST, None
        # Taken off the buffer before anything is reserved (a reservation may evict held stages).
        stage, buf.stage = buf.stage, None
        had_gpu = buf.gpu is not None
        if not had_gpu:
            if not inst.reserve(buf.gpu_bytes):
                self._drop_stage(inst, buf, stage)
                return Status.LIMIT_EXCEEDED, None
            try:
                buf.gpu = self.device.create_storage(buf.gpu_bytes)
            except DeviceAllocationError:
                inst.release(buf.gpu_bytes)
                self._drop_stage(inst, buf, stage)
                return Status.DEVICE_ERROR, None
            inst.gpu_charge += buf.gpu_bytes
        dirty = inst.dirty(buf) if had_gpu else None
        start, end = dirty if dirty else (0, buf.length)
        if stage is not None:
            if start == 0 and end == buf.length and buf.stage_version == inst.version(buf):
                return Status.OK, (0, end, stage)  # the stage holds exactly this version's words
            self._drop_stage(inst, buf, stage)
        raw = inst.cpu_bytes(buf)[start * buf.stored_bytes:end * buf.stored_bytes]
        # A view of the accessor memory is fine: the device copies uploads before execute returns.
        return Status.OK, (start, end, stored_to_words(raw, buf.stored_bytes))
