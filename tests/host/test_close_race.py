"""Instance.close() from another thread while the owner calls exports (documented as supported):
the close may land between any two lines of the owner's call, and the call then either finishes or
raises 'closed', never reaching into a deleted Store (which crashed the process, SIGSEGV or a
runtime panic). Each interleaving is forced with a line tracer, in a child process so that a crash
is a failed test rather than a dead test run."""
from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent('''
    import sys, threading
    from wagogpu import Config, ElementType, Host
    from wagogpu.host.instance import Instance
    from tests.guests import abi_module

    TRACED = {Instance.call.__code__, Instance._resolve.__code__, Instance.read_memory.__code__,
              Instance.write_memory.__code__, Instance._in_store.__wrapped__.__code__,
              Instance._release_store.__code__}
    host = Host(Config(disabled=True))
    module = host.compile(abi_module())

    def closing_at(k, inst):
        """A tracer that closes inst from another thread at the k-th traced line event."""
        seen = [0]
        def local(frame, event, arg):
            if event == "line":
                seen[0] += 1
                if seen[0] == k:
                    other = threading.Thread(target=inst.close)
                    other.start()
                    other.join(10)
                    assert not other.is_alive(), "close() from another thread did not finish"
            return local
        return lambda frame, event, arg: local if frame.f_code in TRACED else None

    CALLS = {
        "first call": lambda inst, h: inst.call("readbitsI32", h, 0),
        "cached call": lambda inst, h: (inst.call("readbitsI32", h, 0), inst.call("readbitsI32", h, 0)),
        "trap": lambda inst, h: inst.call("readbitsI32", 99999, 0),
        "read_memory": lambda inst, h: inst.read_memory(0, 16),
        "write_memory": lambda inst, h: inst.write_memory(0, b"abcd"),
    }
    outcomes = {}
    for what, call in CALLS.items():
        for k in range(1, 40):
            inst = host.instantiate(module)
            handle, status = inst.call("createBuffer", ElementType.I32, 4)
            assert status == 0
            inst.call("readbitsI32", handle, 0)  # warm: 'cached call' takes the resolved path
            if what == "first call":
                inst._calls.clear()
            sys.settrace(closing_at(k, inst))
            try:
                call(inst, handle)
                outcome = "finished"
            except ValueError as exc:
                outcome = "closed" if "is closed" in str(exc) else repr(exc)
            except Exception as exc:
                outcome = type(exc).__name__
            finally:
                sys.settrace(None)
            inst.close()
            outcomes.setdefault(what, set()).add(outcome)
    print(sorted((w, sorted(o)) for w, o in outcomes.items()))
''')


def test_a_close_from_another_thread_between_any_two_lines_of_a_call_is_safe() -> None:
    child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-2000:]
    outcomes = dict(eval(child.stdout.strip().splitlines()[-1]))  # noqa: S307 - our own child's repr
    for what, seen in outcomes.items():
        assert set(seen) <= {"finished", "closed", "Trap"}, (what, seen)
        assert "closed" in seen, what  # some interleavings closed before the call reached the Store
