"""Judge each case outcome against the spec and sum them up per file.

What must hold everywhere: the CPU runner gives the spec's result (NaN patterns honoured) or its
trap; a trap case makes `dispatch` return 1 with nothing published; an integer function's GPU
result is bit-exact. A float function's GPU result that differs is a FLOAT_DIFFERENCE with its
class (floats.py): allowed only where the adapter's record allows that class.
"""
from __future__ import annotations

import enum
from collections import Counter
from dataclasses import asdict, dataclass, field


from .floats import FloatClass, classify
from .literals import Expected, ValueType, f32_text
from .plan import FilePlan
from .runner import STATUS_OK, TRAP_CODES, CaseOutcome, JobOutcome

GPU_TRAP_REASON = "KERNEL_TRAP"


class Finding(enum.StrEnum):
    CPU_MISMATCH = "cpu-mismatch"  # the CPU runner's result or trap is not the spec's
    INTEGER_MISMATCH = "integer-mismatch"  # an integer function's GPU result is not the spec's
    TRAP_NOT_RAISED = "trap-not-raised"  # a trap case's dispatch returned 0
    TRAP_PUBLISHED = "trap-published"  # a trap case's failed dispatch changed an output
    FLOAT_DIFFERENCE = "float-difference"  # a float function's GPU result differs (classified)


FAILURES = frozenset({Finding.CPU_MISMATCH, Finding.INTEGER_MISMATCH, Finding.TRAP_NOT_RAISED,
                      Finding.TRAP_PUBLISHED})


@dataclass(frozen=True, slots=True)
class Difference:
    file: str
    line: int
    function: str
    finding: Finding
    float_class: str  # a FloatClass for FLOAT_DIFFERENCE, else ""
    args: tuple[str, ...]
    expected: str
    got: str  # hex words, or the trap / status seen

    def record(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else str(v) if isinstance(v, enum.Enum) else v)
                for k, v in asdict(self).items()}


@dataclass(slots=True)
class FileResult:
    file: str
    functions: int = 0  # defined functions in the file's modules
    cases: int = 0  # assert_return / assert_trap invoke cases
    spliced_functions: int = 0  # pure i32/f32 functions with cases
    spliced_cases: int = 0
    eligible_functions: int = 0  # of those, accepted by the GPU compiler
    eligible_cases: int = 0
    gpu_cases: int = 0  # cases the GPU path ran (a return at status 0, a trap raised by the kernel)
    float_cases: int = 0  # GPU-run return cases of float functions
    gpu_traps: int = 0  # trap cases whose kernel raised the trap on the GPU
    fallbacks: Counter[str] = field(default_factory=Counter)  # eligible, but status 1: reason -> cases
    not_run: Counter[str] = field(default_factory=Counter)  # reason -> cases not spliced
    not_eligible: Counter[str] = field(default_factory=Counter)  # compiler reason -> functions
    differences: list[Difference] = field(default_factory=list)

    def failures(self) -> list[Difference]:
        return [d for d in self.differences if d.finding in FAILURES]

    def classes(self) -> Counter[str]:
        return Counter(str(d.float_class) for d in self.differences if d.finding is Finding.FLOAT_DIFFERENCE)


def _words(expected: tuple[Expected, ...], words: tuple[int, ...]) -> str:
    """Result words as the spec writes them (f32 in hex-float notation, with its bits)."""
    return " ".join(f"{f32_text(w)} (0x{w:08x})" if e.type is ValueType.F32 else f"0x{w:08x}"
                    for e, w in zip(expected, words))


def _diff(o: CaseOutcome, job_name: str, file: str, finding: Finding, got: str, cls: str = "") -> Difference:
    c = o.case
    expected = c.message or " ".join(e.text for e in c.expected)
    return Difference(file, c.line, job_name, finding, cls, tuple(a.text for a in c.args), expected, got)


def _judge_return(o: CaseOutcome, out: JobOutcome, result: FileResult) -> None:
    job = out.job
    expected = o.case.expected
    if o.cpu is None or not all(e.accepts(w) for e, w in zip(expected, o.cpu)):
        got = f"trap {o.cpu_trap}" if o.cpu is None else _words(expected, o.cpu)
        result.differences.append(_diff(o, job.name, job.file, Finding.CPU_MISMATCH, got))
    if o.gpu is None:
        return
    for e, w in zip(expected, o.gpu):
        if e.accepts(w):
            continue
        if not job.floats:
            result.differences.append(_diff(o, job.name, job.file, Finding.INTEGER_MISMATCH, _words(expected, o.gpu)))
            return
        cls = classify(o.case.args, e, w, job.div_sqrt)
        result.differences.append(_diff(o, job.name, job.file, Finding.FLOAT_DIFFERENCE, _words(expected, o.gpu), cls))
        return


def _judge_trap(o: CaseOutcome, out: JobOutcome, result: FileResult) -> None:
    job = out.job
    want = TRAP_CODES.get(o.case.message)
    if want is None or o.cpu_trap != want.name:
        result.differences.append(_diff(o, job.name, job.file, Finding.CPU_MISMATCH, f"trap {o.cpu_trap or 'none'}"))
    if o.status == STATUS_OK:
        result.differences.append(_diff(o, job.name, job.file, Finding.TRAP_NOT_RAISED, "status 0"))
    if o.published:
        result.differences.append(_diff(o, job.name, job.file, Finding.TRAP_PUBLISHED, f"status {o.status}"))


def _count_gpu(o: CaseOutcome, is_trap: bool, out: JobOutcome, result: FileResult) -> None:
    ran = o.reason == GPU_TRAP_REASON if is_trap else o.status == STATUS_OK
    if ran:
        result.gpu_cases += 1
        result.float_cases += out.job.floats and not is_trap
        result.gpu_traps += is_trap
    elif out.eligible:
        result.fallbacks[o.reason] += 1


def summarize(plan: FilePlan, outcomes: list[JobOutcome]) -> FileResult:
    """The file's counts and every difference found in its outcomes."""
    result = FileResult(plan.file, plan.functions, plan.cases, len(plan.jobs),
                        sum(len(j.returns) + len(j.traps) for j in plan.jobs), not_run=Counter(plan.skipped))
    for out in outcomes:
        n = len(out.returns) + len(out.traps)
        if out.eligible:
            result.eligible_functions += 1
            result.eligible_cases += n
        else:
            result.not_eligible[out.reason] += 1
        for o in out.returns:
            _count_gpu(o, False, out, result)
            _judge_return(o, out, result)
        for o in out.traps:
            _count_gpu(o, True, out, result)
            _judge_trap(o, out, result)
    return result


def float_classes() -> list[str]:
    return [c.value for c in FloatClass]
