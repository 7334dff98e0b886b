"""The steady state of one kernel's dispatch over one binding set, a resident loop (docs/design/abi.md §4.11).

A guest that dispatches the same kernel over the same buffers again and again asks the same
questions every time: which bound buffer is read and which written, what the storage bindings are
in binding order, whether the kernel replaces its outputs whole, what grid the count makes. A
SteadyPlan answers them once, when the host first sees the binding set. A dispatch in the steady
state (every input current on the device, or current on the CPU over a device copy and uploaded
from it, as a guest that sets its input before each dispatch has it; no output lost or parked; the
parameter block holding this count; an idle scratch per output; the uploads' charge fitting
without eviction) then runs the dispatcher's fixed sequence for it (Dispatcher.repeat: take,
execute, commit; Dispatcher._steady_enqueue when pipelined: take, record, commit) with no plan phase and no Transaction; one that is not goes through plan_slots
as before. The plan is a shortcut for one common state, not a second set of rules: what it skips
is what plan_slots would find had nothing to decide.

It also keeps the ExecutePlans it handed the device, one per set of handles: in a resident loop
each output alternates between two device buffers (the kernel writes the idle one, the commit
swaps them), so a repeated dispatch hands the device one of two plan objects it has seen before;
two kernels that feed each other rotate three buffers, so each sees one of three.

A SteadyPlan holds while the instance's binding set does (InstanceBuffers.bindings_epoch: a bind
that changes a slot, a free, closing); the dispatcher makes one on a binding set's second dispatch
and a new one when the set changed. Nothing in it can go stale unseen: flags, device copies, scratch and the parameter block are read anew by
every dispatch, and a kept ExecutePlan is used only when its handles are the very ones this
dispatch binds.
"""
from __future__ import annotations

from ..abi import accessor as acc
from ..abi.kernel import workgroup_grid
from ..diagnostics import BufferOperation
from ..gpu import BufferHandle, ExecutePlan
from .eviction import Scratch
from .records import FLAGS_WORD, Buffer
from .table import InstanceBuffers
from .transaction import DispatchPlan, Transaction, Upload

#: An input is resident when its device copy is current and nothing is lost; uploadable from its
#: CPU copy when that is current and nothing is lost.
_RESIDENT_MASK = acc.GPU_CURRENT | acc.LOST
_UPLOADABLE_MASK = acc.CPU_CURRENT | acc.LOST
_GPU_CURRENT, _CPU_CURRENT, _LOST = acc.GPU_CURRENT, acc.CPU_CURRENT, acc.LOST  # (globals: read on every dispatch)
#: Execute plans kept per steady plan, one per set of handles it binds: a kernel whose output swaps
#: with one scratch sees two, each kernel of a two-kernel chain over three device buffers three
#: (the buffers rotate), and each may come with and without a read-ahead copy.
MAX_PHASES = 8
#: What a steady dispatch took: its ExecutePlan, an output scratch per output, the uploads from the
#: CPU copies and the bytes charged for them until the device has them (a tuple: made on every
#: dispatch).
Taken = tuple[ExecutePlan, list[Scratch], "list[Upload] | tuple[()]", int]
_NO_UPLOADS: tuple[()] = ()


class SteadyPlan:
    """One kernel's binding set, resolved once (see the module docstring)."""

    __slots__ = ("plan", "bound", "count", "grid", "inputs", "outputs", "written", "sizes", "written_bytes", "order",
                 "phases")

    def __init__(self, plan: DispatchPlan, bound: dict[int, Buffer]) -> None:
        write = plan.write_slots
        used = plan.used_slots
        self.plan = plan
        self.bound = bound
        self.inputs = tuple(bound[s] for s in used if s not in write)
        self.outputs = tuple((s, bound[s], bound[s].gpu_bytes) for s in used if s in write)
        self.written = tuple(buf for _s, buf, _n in self.outputs)  # what a pipelined dispatch leaves unconfirmed
        self.sizes = tuple(n for _s, _b, n in self.outputs)
        self.written_bytes = sum(n for _s, _b, n in self.outputs)
        # Binding order as positions in [inputs..., outputs...]; None when that already is it.
        flat = [s for s in used if s not in write] + [s for s in used if s in write]
        order = tuple(flat.index(s) for s in used)
        self.order = None if order == tuple(range(len(used))) else order
        lengths = {buf.length for _s, buf, _n in self.outputs}
        # The shortcut serves kernels that replace every output whole (all one length, none read
        # first), without an error word or a guest memory snapshot: count must be that length.
        served = (len(lengths) == 1 and write <= plan.overwritten_slots and not plan.error_word
                  and plan.memory < 0)
        self.count = lengths.pop() if served else -1
        self.grid = workgroup_grid(self.count) if served else (0, 0)
        # take()'s key (see _execute_plan) -> the ExecutePlan for it (the counts are fixed, so
        # the key splits one way only; oldest first).
        self.phases: dict[tuple[object, ...], ExecutePlan] = {}

    def take(self, inst: InstanceBuffers, readahead_max: int, profile: bool) -> Taken | None:
        """What a dispatch of this plan's count needs in the steady state, taken (as plan_slots and
        set_up_small_buffers would find it: inputs resident, or current on the CPU over a device
        copy and not prestaged, so uploaded from the CPU copy; outputs replaced whole and neither
        lost nor parked; the parameter block holding the count; the uploads' bytes fitting the
        budgets without evicting anything): an idle scratch per output, the uploads' charge and the
        ExecutePlan for them (_execute_plan). None (nothing taken or charged) when it is not in
        that state. Its callers dispatch exactly self.count (Dispatcher.repeat's). (One frame for
        the whole step: it runs on every steady dispatch.)"""
        count = self.count
        d = inst.device
        uniform = d.uniform
        if uniform is None or d.uniform_count != count or d.uniform_budget != self.plan.loop_budget:
            return None
        uploads: list[Upload] | None = None
        transient = 0
        # The kept ExecutePlan's key, built while the checks read what it holds (a plain list:
        # map() over a tuple this short costs more than the loop, about 150 ns each here).
        key: list[object] = [uniform, readahead_max]
        for buf in self.inputs:
            rec = buf.record
            flags = rec.words[FLAGS_WORD]
            gpu = buf.gpu
            key.append(gpu)
            if flags & _RESIDENT_MASK == _GPU_CURRENT and gpu is not None:
                continue
            if flags & _UPLOADABLE_MASK != _CPU_CURRENT or gpu is None or buf.stage is not None:
                return None  # (lost, never on the device, or prestaged: plan_slots decides)
            start, end = rec.dirty() or (0, buf.length)
            words = inst.cpu_words(buf, start, end)
            if uploads is None:
                uploads = []
            uploads.append(Upload(buf, gpu, start, end, words))
            transient += words.nbytes
        for buf in self.written:
            if buf.parked is not None or buf.record.words[FLAGS_WORD] & _LOST:
                return None  # (a parked output may be written in place: plan_slots decides)
            key.append(buf.readahead_hint)
        if transient and not inst.fits(transient):
            return None  # (a charge that evicts: plan_slots makes it, in its order)
        taken = d.take_idle_outputs(self.sizes)
        if taken is None:
            return None
        if transient:
            inst.reserve(transient)  # (it fits: nothing is evicted)
        for scratch in taken:
            key.append(scratch[0])
        return self._execute_plan(uniform, taken, uploads, readahead_max, profile, key), taken, \
            uploads or _NO_UPLOADS, transient

    def _execute_plan(self, uniform: BufferHandle, taken: list[Scratch], took_uploads: list[Upload] | None,
                      readahead_max: int, profile: bool, key: list[object]) -> ExecutePlan:
        """The ExecutePlan of this dispatch: the one handed the device before for exactly these
        handles and read-ahead choices, or a new one, kept; with uploads (fresh views of the CPU
        copies) a new plan over the kept one's storage and read-ahead lists. ``key`` is take()'s
        (parameter block, read-ahead bound, the inputs' device copies, the outputs' read-ahead
        hints, their scratch): a kept plan is found from it alone, and the storage and read-ahead
        lists are built only for a new one."""
        phases = self.phases
        kept = tuple(key)
        execute = phases.get(kept)
        if execute is None:
            storage, readahead = self._bindings(taken, readahead_max)
            execute = ExecutePlan(self.plan.pipeline, uniform, None, storage, (), (), self.grid, profile, None,
                                  readahead)
            if len(phases) >= MAX_PHASES:
                del phases[next(iter(phases))]
            phases[kept] = execute
        if took_uploads:
            uploads = []
            for u in took_uploads:
                uploads.append((u.gpu, u.start * u.buf.gpu_stride, u.words))
            return ExecutePlan(self.plan.pipeline, uniform, None, execute.storage, uploads, (), self.grid, profile,
                               None, execute.readahead)
        return execute

    def _bindings(self, taken: list[Scratch], readahead_max: int) -> tuple[list[BufferHandle], list[BufferHandle]]:
        """The storage handles in binding order (inputs' device copies, the outputs' scratch), and
        the scratch to read ahead: each output that asks for it and is small enough."""
        # (Plain loops: a comprehension is a frame of its own, and map() over a tuple this short
        # costs more than the loop.)
        storage: list[BufferHandle] = []
        for buf in self.inputs:
            gpu = buf.gpu
            assert gpu is not None  # (take() saw every one)
            storage.append(gpu)
        readahead = []
        for buf, scratch in zip(self.written, taken):
            storage.append(scratch[0])
            if buf.readahead_hint and scratch[1] <= readahead_max:
                readahead.append(scratch[0])
        if self.order is not None:
            storage = [storage[i] for i in self.order]
        return storage, readahead

    def transaction(self, inst: InstanceBuffers, deadline: float, op: BufferOperation, took: Taken) -> Transaction:
        """The Transaction the plan phase would have made, for the ways back (unwind, fail);
        ``took``'s charge as it stands now (the dispatcher gives it back once the device has it)."""
        _execute, scratch, uploads, transient = took
        tx = Transaction(inst, self.plan, self.bound, self.count, deadline, op)
        tx.acquired = scratch
        tx.outputs = {slot: s for (slot, _b, _n), s in zip(self.outputs, scratch)}
        tx.uploads = list(uploads)
        tx.transient = transient
        return tx
