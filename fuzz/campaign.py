"""A resumable compiler-fuzzing campaign over both fuzzers (hypothesis_fuzz.py and fuzz_compiler.py).

    python fuzz/campaign.py --executions 10000000            # until 10 M executions are recorded
    python fuzz/campaign.py --executions 10000000 --jobs 8   # eight nice'd fuzzers at a time
    python fuzz/campaign.py --minutes 30 --executions 10000000   # at most 30 minutes now; resume later
    python fuzz/campaign.py --status                          # what the results file holds so far

The campaign runs chunks (a bounded run of one fuzzer, `--chunk` executions) under `nice -n 10`,
reads each chunk's FUZZ-RESULT line and appends one JSONL record per chunk to
`fuzz/results/<campaign>.jsonl` (fuzzer, executions, seconds, failures, wagogpu commit). A second
invocation with the same `--campaign` on the same commit counts what is already recorded and only
runs the rest, so an interrupted campaign loses at most its running chunks (`--any-commit` also
counts records of other commits). The next chunk goes to the fuzzer that has
had the least time so far (`--balance time`) or the fewest executions (`--balance executions`).
A failing chunk stops the campaign (its output is kept in fuzz/results/<campaign>-failure-*.log)
unless `--keep-going`.
"""
from __future__ import annotations

import argparse
import enum
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from fuzz_result import FuzzResult, parse  # noqa: E402

RESULTS = HERE / "results"
CORPUS = HERE / "corpus"  # atheris's growing corpus (ignored by git)


class Fuzzer(enum.StrEnum):
    HYPOTHESIS = "hypothesis"
    ATHERIS = "atheris"


class Balance(enum.StrEnum):
    TIME = "time"
    EXECUTIONS = "executions"


@dataclass
class Record:
    """One chunk of one fuzzer, as appended to the results file."""

    campaign: str
    fuzzer: str
    executions: int
    seconds: float
    failures: int
    commit: str
    dirty: bool
    returncode: int
    started: float  # Unix time the chunk started
    detail: dict = field(default_factory=dict)


def commit() -> tuple[str, bool]:
    """The checkout's commit and whether tracked files differ from it. A copy of the tree without
    its git folder (a remote machine's) names its commit in WAGOGPU_COMMIT (dirty: unknown, False)."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if not head:
        return os.environ.get("WAGOGPU_COMMIT", "unknown"), False
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "wagogpu"], cwd=ROOT).returncode != 0
    return head, dirty


def command(fuzzer: Fuzzer, executions: int, seconds: float) -> list[str]:
    """The nice'd command line of one chunk: at most `executions` inputs and about `seconds`."""
    nice = ["nice", "-n", "10", sys.executable]
    if fuzzer is Fuzzer.HYPOTHESIS:
        return nice + [str(HERE / "hypothesis_fuzz.py"), "--quiet", "--executions", str(executions),
                       "--minutes", f"{seconds / 60:.4f}", "--max-input-seconds", "5"]
    return nice + [str(HERE / "fuzz_compiler.py"), f"-runs={executions}", f"-max_total_time={max(1, int(seconds))}",
                   "-timeout=5", "-rss_limit_mb=4096", f"-artifact_prefix={RESULTS}/", str(CORPUS)]


def run_chunk(campaign: str, fuzzer: Fuzzer, executions: int, seconds: float) -> tuple[Record, str]:
    """Run one chunk; its record and its whole output."""
    head, dirty = commit()
    started = time.time()
    proc = subprocess.run(command(fuzzer, executions, seconds), cwd=ROOT, capture_output=True, text=True,
                          errors="replace")
    output = proc.stdout + proc.stderr
    result = parse(proc.stdout) or FuzzResult(fuzzer.value, 0, time.time() - started, 1, {"error": "no result line"})
    failures = result.failures or int(proc.returncode != 0)
    return Record(campaign, fuzzer.value, result.executions, result.seconds, failures, head, dirty, proc.returncode,
                  started, result.detail), output


def load(path: Path) -> list[Record]:
    if not path.exists():
        return []
    return [Record(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class Tally:
    """Executions and seconds per fuzzer so far (recorded plus running chunks' shares)."""

    executions: dict[str, int]
    seconds: dict[str, float]
    failures: int = 0

    @classmethod
    def of(cls, records: list[Record], fuzzers: list[Fuzzer]) -> "Tally":
        tally = cls({f.value: 0 for f in fuzzers}, {f.value: 0.0 for f in fuzzers})
        for r in records:
            tally.add(r)
        return tally

    def add(self, r: Record) -> None:
        self.executions[r.fuzzer] = self.executions.get(r.fuzzer, 0) + r.executions
        self.seconds[r.fuzzer] = self.seconds.get(r.fuzzer, 0.0) + r.seconds
        self.failures += r.failures

    @property
    def total(self) -> int:
        return sum(self.executions.values())

    def next_fuzzer(self, fuzzers: list[Fuzzer], balance: Balance, running: dict[str, int]) -> Fuzzer:
        key = self.seconds if balance is Balance.TIME else self.executions
        weight = 60.0 if balance is Balance.TIME else 1.0  # a running chunk counts as a minute / its size
        return min(fuzzers, key=lambda f: key.get(f.value, 0) + weight * running.get(f.value, 0))


@dataclass
class Plan:
    campaign: str
    target: int
    deadline: float
    chunk: int
    chunk_seconds: float
    jobs: int
    fuzzers: list[Fuzzer]
    balance: Balance
    keep_going: bool
    any_commit: bool = False
    path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.path = RESULTS / f"{self.campaign}.jsonl"

    def recorded(self) -> list[Record]:
        """The records this campaign resumes from: its own, of this commit unless any_commit."""
        head = commit()[0]
        return [r for r in load(self.path)
                if r.campaign == self.campaign and (self.any_commit or r.commit == head)]


def _submit(pool: ThreadPoolExecutor, plan: Plan, fuzzer: Fuzzer, remaining: int) -> Future:
    seconds = max(5.0, min(plan.chunk_seconds, plan.deadline - time.monotonic()))
    return pool.submit(run_chunk, plan.campaign, fuzzer, min(plan.chunk, max(remaining, 1)), seconds)


def _finish(plan: Plan, record: Record, output: str, lock: threading.Lock) -> None:
    with lock, plan.path.open("a") as f:
        f.write(json.dumps(asdict(record), sort_keys=True) + "\n")
    rate = record.executions / max(record.seconds, 1e-9)
    print(f"{record.fuzzer}: {record.executions} executions in {record.seconds:.0f} s ({rate:.0f}/s), "
          f"{record.failures} failures", flush=True)
    if record.failures:
        log = RESULTS / f"{plan.campaign}-failure-{record.fuzzer}-{int(record.started)}.log"
        log.write_text(output)
        print(f"failure: output kept in {log}", flush=True)


def campaign(plan: Plan) -> Tally:
    """Run chunks until the target is recorded, the deadline passes or (by default) a chunk fails."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    _ensure_corpus(plan.fuzzers)
    tally = Tally.of(plan.recorded(), plan.fuzzers)
    lock = threading.Lock()
    running: dict[Future, Fuzzer] = {}
    with ThreadPoolExecutor(plan.jobs) as pool:
        while True:
            stop = (tally.failures and not plan.keep_going) or time.monotonic() >= plan.deadline
            planned = tally.total + sum(plan.chunk for _ in running)
            while not stop and len(running) < plan.jobs and planned < plan.target:
                counts = {f.value: sum(1 for g in running.values() if g is f) for f in plan.fuzzers}
                fuzzer = tally.next_fuzzer(plan.fuzzers, plan.balance, counts)
                running[_submit(pool, plan, fuzzer, plan.target - planned)] = fuzzer
                planned += plan.chunk
            if not running:
                return tally
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                running.pop(future)
                record, output = future.result()
                tally.add(record)
                _finish(plan, record, output, lock)


def _ensure_corpus(fuzzers: list[Fuzzer]) -> None:
    """Seed atheris's corpus once (the reference's seeds and our fixtures)."""
    if Fuzzer.ATHERIS in fuzzers and not (CORPUS.exists() and any(CORPUS.iterdir())):
        subprocess.run([sys.executable, str(HERE / "fuzz_compiler.py"), "--write-seeds", str(CORPUS)], cwd=ROOT,
                       check=True, capture_output=True)


def summary(tally: Tally, campaign_name: str) -> str:
    parts = []
    for name, n in tally.executions.items():
        seconds = tally.seconds.get(name, 0.0)
        parts.append(f"{name} {n} in {seconds:.0f} s ({n / max(seconds, 1e-9):.0f}/s per core)")
    return f"campaign {campaign_name}: {tally.total} executions, {tally.failures} failures; " + "; ".join(parts)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--campaign", default="compiler", help="results file name and resume key (default compiler)")
    p.add_argument("--executions", type=int, default=200_000, help="total executions to reach (default 200,000)")
    p.add_argument("--minutes", type=float, default=None, help="stop starting chunks after this long")
    p.add_argument("--chunk", type=int, default=50_000, help="executions per chunk (default 50,000)")
    p.add_argument("--chunk-minutes", type=float, default=20.0, help="time bound per chunk (default 20)")
    p.add_argument("--jobs", type=int, default=1, help="chunks at a time (one core each)")
    p.add_argument("--fuzzers", default="hypothesis,atheris", help="comma-separated: hypothesis, atheris")
    p.add_argument("--balance", type=Balance, default=Balance.TIME, choices=list(Balance))
    p.add_argument("--keep-going", action="store_true", help="do not stop at a failing chunk")
    p.add_argument("--any-commit", action="store_true", help="resume from records of any commit")
    p.add_argument("--status", action="store_true", help="print what is recorded and exit")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    fuzzers = [Fuzzer(f.strip()) for f in args.fuzzers.split(",") if f.strip()]
    deadline = time.monotonic() + (args.minutes * 60 if args.minutes is not None else 1e12)
    plan = Plan(args.campaign, args.executions, deadline, args.chunk, args.chunk_minutes * 60, args.jobs, fuzzers,
                args.balance, args.keep_going, args.any_commit)
    if args.status:
        tally = Tally.of(plan.recorded(), fuzzers)
    else:
        tally = campaign(plan)
    print(summary(tally, plan.campaign))
    print(FuzzResult("campaign", tally.total, sum(tally.seconds.values()), tally.failures,
                     {"executions": tally.executions, "seconds": tally.seconds}).line())
    return 1 if tally.failures else 0


if __name__ == "__main__":
    sys.exit(main())
