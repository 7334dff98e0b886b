"""The one line every fuzzer prints last, so a script (fuzz/campaign.py) can read its counts.

    FUZZ-RESULT {"fuzzer": "hypothesis", "executions": 200000, "seconds": 812.4, "failures": 0, ...}

`executions` is an exact count of inputs the fuzzer checked (a counter incremented once per call of
the property, or libFuzzer's own `stat::number_of_executed_units`); `failures` counts inputs that
broke a property (the fuzzers stop at the first, so it is 0 or 1).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

PREFIX = "FUZZ-RESULT "


@dataclass
class FuzzResult:
    """What one run of one fuzzer did."""

    fuzzer: str
    executions: int
    seconds: float
    failures: int
    detail: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        record = asdict(self)
        record["seconds"] = round(self.seconds, 3)
        return PREFIX + json.dumps(record, sort_keys=True)


def parse(text: str) -> FuzzResult | None:
    """The last FUZZ-RESULT line of a fuzzer's output, or None when it printed none."""
    for line in reversed(text.splitlines()):
        if line.startswith(PREFIX):
            record = json.loads(line[len(PREFIX):])
            return FuzzResult(record["fuzzer"], int(record["executions"]), float(record["seconds"]),
                              int(record["failures"]), record.get("detail", {}))
    return None


def first_of(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first `kind` in `exc` or, when hypothesis found several distinct failures and raised them
    together as an ExceptionGroup, inside it."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = first_of(inner, kind)
            if found is not None:
                return found
    return None
