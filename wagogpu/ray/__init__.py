"""A pool of wagogpu Hosts on Ray actors: one actor per GPU, each owning one Host.

    from wagogpu.ray import HostPool
    with HostPool(config) as pool:
        ref = pool.submit(wasm, "render_tile", 0, 0, 64, 64, 640, 360, 256,
                          reads={"counts": (65536, 4 * 64 * 64)})
        result = ray.get(ref)            # JobResult: .value, .reads["counts"], .actor

This is the optional extra ``pip install "wagogpu[ray]"``; ``import wagogpu`` never imports Ray.
The guide is docs/ray.md.
"""
try:
    import ray as _ray  # noqa: F401 - only to fail early, with the install line
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError('wagogpu.ray needs Ray, which is not installed: pip install "wagogpu[ray]"') from exc

from .jobs import ActorInfo, ActorSlot, FailureKind, Job, JobError, JobResult
from .pool import HostPool
from .signals import wasm_trap_handlers

__all__ = ["HostPool", "Job", "JobResult", "JobError", "FailureKind", "ActorSlot", "ActorInfo",
           "wasm_trap_handlers"]
