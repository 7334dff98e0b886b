"""The steady state of one kernel's dispatch over one binding set, a resident loop (docs/design/abi.md §4.11).

A guest that dispatches the same kernel over the same buffers again and again asks the same
questions every time: which bound buffer is read and which written, what the storage bindings are
in binding order, whether the kernel replaces its outputs whole, what grid the count makes. A
SteadyPlan answers them once, when the host first sees the binding set. A dispatch in the steady
state (every input current on the device, no output lost or parked, the parameter block holding
this count, an idle scratch per output) then runs the dispatcher's fixed sequence for it
(Dispatcher._steady: take the scratch, execute, commit) with no plan phase and no Transaction;
one that is not goes through plan_slots as before. The plan is a shortcut for one common state,
not a second set of rules: what it skips is what plan_slots would find had nothing to do.

It also keeps the ExecutePlans it handed the device, one per set of handles: in a resident loop
each output alternates between two device buffers (the kernel writes the idle one, the commit
swaps them), so a repeated dispatch hands the device one of two plan objects it has seen before.

The host drops a SteadyPlan with its binding set (a bind, a free, the instance closing). Nothing
in it can go stale unseen: flags, device copies, scratch and the parameter block are read anew by
every dispatch, and a kept ExecutePlan is used only when its handles are the very ones this
dispatch binds.
"""
from __future__ import annotations

from typing import cast

from ..abi import accessor as acc
from ..abi.kernel import workgroup_grid
from ..diagnostics import BufferOperation
from ..gpu import BufferHandle, ExecutePlan
from .eviction import Scratch
from .records import FLAGS_WORD, Buffer
from .table import InstanceBuffers
from .transaction import DispatchPlan, Transaction

#: An input is resident when its device copy is current and nothing is lost.
_RESIDENT_MASK = acc.GPU_CURRENT | acc.LOST
#: Execute plans kept per steady plan: the two phases of a resident loop's output swap.
MAX_PHASES = 2


class SteadyPlan:
    """One kernel's binding set, resolved once (see the module docstring)."""

    __slots__ = ("plan", "bound", "count", "inputs", "outputs", "order", "phases")

    def __init__(self, plan: DispatchPlan, bound: dict[int, Buffer]) -> None:
        write = plan.write_slots
        used = plan.used_slots
        self.plan = plan
        self.bound = bound
        self.inputs = tuple(bound[s] for s in used if s not in write)
        self.outputs = tuple((s, bound[s], bound[s].gpu_bytes) for s in used if s in write)
        # Binding order as positions in [inputs..., outputs...]; None when that already is it.
        flat = [s for s in used if s not in write] + [s for s in used if s in write]
        order = tuple(flat.index(s) for s in used)
        self.order = None if order == tuple(range(len(used))) else order
        lengths = {buf.length for _s, buf, _n in self.outputs}
        # The shortcut serves kernels that replace every output whole (all one length, none read
        # first), without an error word or a guest memory snapshot: count must be that length.
        served = (len(lengths) == 1 and not write & plan.read_before_write and not plan.error_word
                  and plan.memory < 0)
        self.count = lengths.pop() if served else -1
        self.phases: list[ExecutePlan] = []

    def take(self, inst: InstanceBuffers, count: int) -> list[Scratch] | None:
        """An idle scratch per output when this dispatch is in the steady state (as plan_slots
        and set_up_small_buffers would find it: inputs resident, outputs replaced whole and
        neither lost nor parked, the parameter block holding count); None (nothing taken) if not."""
        if count != self.count:
            return None
        d = inst.device
        if d.uniform is None or d.uniform_count != count or d.uniform_budget != self.plan.loop_budget:
            return None
        for buf in self.inputs:
            if buf.record.words[FLAGS_WORD] & _RESIDENT_MASK != acc.GPU_CURRENT or buf.gpu is None:
                return None
        for _slot, buf, _size in self.outputs:
            if buf.parked is not None or buf.record.words[FLAGS_WORD] & acc.LOST:
                return None  # (a parked output may be written in place: plan_slots decides)
        idle = d.idle_outputs
        taken: list[Scratch] = []
        for _slot, _buf, size in self.outputs:
            scratch = d.take_idle_output(size)
            if scratch is None:
                idle.extend(taken)
                return None
            taken.append(scratch)
        return taken

    def execute_plan(self, uniform: BufferHandle, taken: list[Scratch], readahead_max: int,
                     profile: bool) -> ExecutePlan:
        """The ExecutePlan of this dispatch: one handed the device before for exactly these
        handles (storage, parameter block, read-ahead), or a new one, kept."""
        storage = [cast(BufferHandle, buf.gpu) for buf in self.inputs]  # (take() saw every one)
        storage += [scratch[0] for scratch in taken]
        if self.order is not None:
            storage = [storage[i] for i in self.order]
        readahead = [scratch[0] for (_s, buf, _n), scratch in zip(self.outputs, taken)
                     if buf.readahead_hint and scratch[1] <= readahead_max]
        for execute in self.phases:
            if execute.uniform is uniform and execute.storage == storage and execute.readahead == readahead:
                return execute
        execute = ExecutePlan(self.plan.pipeline, uniform, None, storage, (), (), workgroup_grid(self.count),
                              profile, None, readahead)
        if len(self.phases) >= MAX_PHASES:
            del self.phases[0]
        self.phases.append(execute)
        return execute

    def transaction(self, inst: InstanceBuffers, deadline: float, op: BufferOperation,
                    taken: list[Scratch]) -> Transaction:
        """The Transaction the plan phase would have made, for the ways back (unwind, fail)."""
        tx = Transaction(inst, self.plan, self.bound, self.count, deadline, op)
        tx.acquired = taken
        tx.outputs = {slot: scratch for (slot, _b, _n), scratch in zip(self.outputs, taken)}
        return tx
