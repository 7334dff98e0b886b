"""Config(adapter=..., backend=...): checked values, a ConfigError naming what exists when nothing
matches, and several Hosts in one process each on its own adapter (issue 18 item 1)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from wagogpu import Config, ConfigError, Host, Status

from ..conftest import kernel
from ..gpu_support import HARDWARE_REQUIRED, Guest, openable_adapters
from ..guests import runner_kernel

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)


@pytest.mark.parametrize("changes, message", [
    ({"adapter": -1}, "adapter: an index is 0 or more (as `wagogpu info` lists them), got -1"),
    ({"adapter": True}, "adapter: expected None, an adapter index or a piece of its name, got True"),
    ({"adapter": 1.5}, "adapter: expected None, an adapter index or a piece of its name, got 1.5"),
    ({"adapter": "  "}, "adapter: a name must not be empty"),
    ({"backend": "cuda"}, "backend: expected None or one of vulkan, metal, dx12, gl, got 'cuda'"),
    ({"backend": 3}, "backend: expected None or one of vulkan, metal, dx12, gl, got 3"),
])
def test_bad_adapter_settings_are_config_errors(changes, message):
    with pytest.raises(ConfigError) as e:
        Config(kernels=[kernel()], **changes)
    assert str(e.value) == message


def test_backend_is_any_case():
    assert Config(kernels=[kernel()], backend="Vulkan").backend == "vulkan"


def _listing() -> str:
    from wagogpu.gpu.adapters import describe, _enumerate

    return describe(_enumerate())


@pytest.mark.parametrize("changes, field, what", [
    ({"adapter": 99}, "adapter", "adapter index 99 matches no adapter"),
    ({"adapter": "no such gpu"}, "adapter", "adapter name 'no such gpu' matches no adapter"),
    ({"adapter": "no such gpu", "backend": "vulkan"}, "adapter",
     "adapter name 'no such gpu' matches no adapter on backend vulkan"),
])
def test_an_adapter_that_matches_nothing_names_what_exists(changes, field, what):
    with pytest.raises(ConfigError) as e:
        Host(Config(kernels=[kernel()], allow_software_adapter=True, **changes))
    assert str(e.value) == f"{field}: {what}; adapters: {_listing()}"


def test_a_disabled_host_never_looks_for_its_adapter():
    with Host(Config(disabled=True, adapter="no such gpu")) as host:
        assert host.device is None and host.buffer_snapshot().reason == "GPU disabled"


def _backends() -> list[str]:
    return [backend for _index, backend in openable_adapters()]


def _double_on(backend: str, values: np.ndarray, out: dict[str, object]) -> None:
    """One Host on one backend's adapter; kernel 1 doubles F32 values, many times over."""
    host = Host(Config(kernels=[kernel(1, "double")], allow_software_adapter=not HARDWARE_REQUIRED,
                       backend=backend, adapter="llvmpipe" if not HARDWARE_REQUIRED else None))
    try:
        g = Guest(host, kernels=runner_kernel("double", 0, 1, "(f32.mul $x (f32.const 2))"))
        a, b = g.create(8, values.size), g.create(8, values.size)
        g.bind(a, b)
        results = []
        for step in range(8):
            g.inst.write_buffer(a, values + step)
            results.append((g.dispatch(1, values.size), g.inst.read_buffer(b), g.last.outcome))
        out[backend] = (host.device.info.backend, results)
    except BaseException as exc:  # reported by the main thread
        out[backend] = exc
    finally:
        host.close()


def test_two_hosts_on_two_adapters_run_kernels_concurrently():
    """Here lavapipe (Vulkan) and llvmpipe (GL) share the name "llvmpipe (LLVM 15.0.6, 256 bits)":
    the backend tells them apart."""
    if len(set(_backends()) & {"Vulkan", "OpenGL"}) < 2:
        pytest.skip(f"needs a Vulkan and a GL adapter that open; these open here: {openable_adapters()}")
    out: dict[str, object] = {}
    inputs = {"vulkan": np.arange(1000, dtype=np.float32), "gl": np.arange(1000, dtype=np.float32) * -3}
    threads = [threading.Thread(target=_double_on, args=(name, values, out)) for name, values in inputs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for name, values in inputs.items():
        result = out[name]
        if isinstance(result, BaseException):
            raise result
        backend, runs = result
        assert backend == {"vulkan": "Vulkan", "gl": "OpenGL"}[name]
        for step, (status, got, outcome) in enumerate(runs):
            assert (status, outcome) == (Status.OK, "GPU")
            assert got.tolist() == ((values + step) * 2).tolist()
