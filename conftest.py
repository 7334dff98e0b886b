"""Repository-wide pytest hooks."""
import gc


def pytest_sessionfinish(session, exitstatus):  # noqa: ARG001 - pytest's hook signature
    """Collect unreachable wasmtime objects while their modules are intact: freed during interpreter
    shutdown, their finalizers find wasmtime-py's globals already gone."""
    gc.collect()
