"""Config / KernelConfig validation: a bad value raises ValueError naming the field (docs/design/abi.md §7)."""
from __future__ import annotations

import pytest

from wagogpu import Access, BindingConfig, Config, ConfigError, ElementType, Host, KernelConfig

from ..conftest import kernel

MIB = 1 << 20


@pytest.mark.parametrize("field, value", [
    ("max_buffers_per_instance", 65), ("max_kernels_per_module", 65), ("max_bindings_per_kernel", 9),
    ("max_instance_buffer_bytes", 256 * MIB + 1), ("max_runtime_buffer_bytes", 512 * MIB + 1),
    ("max_elements", 10_000_001), ("max_elements", -1), ("run_timeout", -0.5), ("min_elements", -1),
    ("power_preference", "fastest"), ("disabled", "yes"), ("max_elements", 1.5)])
def test_bad_values_name_their_field(field, value):
    with pytest.raises(ValueError, match=f"^{field}: "):
        Config(kernels=[kernel()], **{field: value})


def test_zero_selects_defaults():
    cfg = Config(kernels=[kernel()], max_buffers_per_instance=0, max_elements=0, run_timeout=0,
                 max_instance_buffer_bytes=0)
    assert (cfg.max_buffers_per_instance, cfg.max_elements, cfg.run_timeout, cfg.max_instance_buffer_bytes) == (
        64, 10_000_000, 5.0, 256 * MIB)


def k(**changes) -> KernelConfig:
    base = dict(id=1, export="wago_gpu.kernel.x", cpu_export="wago_gpu.cpu.x",
                bindings=[BindingConfig(0, ElementType.F32, Access.READ)])
    base.update(changes)
    return KernelConfig(**base)


@pytest.mark.parametrize("kernels, field", [
    ([k(id=0)], "kernels[0].id"),
    ([k(export="kernel.x")], "kernels[0].export"),
    ([k(export="wago_gpu.kernel.")], "kernels[0].export"),
    ([k(cpu_export="wago_gpu.cpu.y")], "kernels[0].cpu_export"),
    ([k(export="wago_gpu.kernel." + "x" * 250, cpu_export="wago_gpu.cpu." + "x" * 250)], "kernels[0].export"),
    ([k(bindings=[])], "kernels[0].bindings"),
    ([k(bindings=[BindingConfig(8, 8, 1)])], "kernels[0].bindings[0].slot"),
    ([k(bindings=[BindingConfig(0, 8, 1), BindingConfig(0, 8, 2)])], "kernels[0].bindings[1].slot"),
    ([k(bindings=[BindingConfig(0, 12, 1)])], "kernels[0].bindings[0].type"),
    ([k(bindings=[BindingConfig(0, 8, 4)])], "kernels[0].bindings[0].access"),
    ([k(), k()], "kernels[1].id"),
    ([k(), k(id=2)], "kernels[1].export"),
    ([k(min_elements=10_000_001)], "kernels[0].min_elements"),
])
def test_bad_kernels_name_their_field(kernels, field):
    with pytest.raises(ValueError) as e:
        Config(kernels=kernels)
    assert str(e.value).startswith(field + ":"), str(e.value)


def test_binding_limit_follows_config():
    two = k(bindings=[BindingConfig(0, 8, 1), BindingConfig(1, 8, 2)])
    with pytest.raises(ValueError, match="bindings"):
        Config(kernels=[two], max_bindings_per_kernel=1)
    assert Config(kernels=[two]).kernels == (two,)


def test_host_wants_a_config():
    with pytest.raises(ValueError, match="config"):
        Host({"kernels": []})  # type: ignore[arg-type]


def test_bad_module_is_one_clear_error():
    with Host(Config(kernels=[kernel()], disabled=True)) as host:
        with pytest.raises(ValueError, match="invalid WAT"):
            host.compile("(module (func $f (result i32))")
        with pytest.raises(ValueError, match="invalid module: .*type mismatch"):
            host.compile("(module (func $f (result i32)))")
        with pytest.raises(ValueError, match="invalid module"):
            host.compile(b"\0asm\x01\0\0\0\x01\xff")
        with pytest.raises(ValueError, match="^not a Wasm module: "):
            host.compile(b"\xff\xfe")


def test_require_gpu_fails_without_hardware_and_says_why():
    from wagogpu.gpu import list_adapters
    from wagogpu.host import GpuRequiredError

    hardware = [a for a in list_adapters() if not a.is_software]
    if hardware:
        with Host(Config(kernels=[kernel()], require_gpu=True)) as host:
            assert host.gpu_active and not host.device.info.is_software
    else:
        with pytest.raises(GpuRequiredError, match="require_gpu"):
            Host(Config(kernels=[kernel()], require_gpu=True))
    with pytest.raises(GpuRequiredError, match="GPU disabled"):
        Host(Config(kernels=[kernel()], require_gpu=True, disabled=True))


def test_cpu_only_reason_is_visible():
    with Host(Config(kernels=[kernel()], allow_software_adapter=False, power_preference="low-power")) as host:
        snap = host.buffer_snapshot()
        if host.gpu_active:
            assert snap.state == "READY" and snap.device
        else:
            assert snap.state == "UNAVAILABLE" and snap.reason and snap.device_state == "UNAVAILABLE"


def test_link_failure_is_a_module_error():
    from wagogpu import ModuleError

    with Host(Config(kernels=[kernel()], disabled=True)) as host:
        module = host.compile('(module (import "env" "f" (func)))')
        with pytest.raises(ModuleError, match="cannot instantiate: .*env::f"):
            host.instantiate(module)
        with pytest.raises(ModuleError) as e:
            host.compile("# not wat\nat all")
        assert "|" not in str(e.value)
        assert host.buffer_snapshot().instances == []


# -- one set of rules for Python and JSON -----------------------------------------------------------------
def _json_kernel(**changes) -> dict:
    raw = {"id": 1, "name": "double", "bindings": [[0, "F32", "read"], [1, "F32", "write"]]}
    raw.update(changes)
    return {"kernels": [raw]}


@pytest.mark.parametrize("data, message", [
    (_json_kernel(relaxed_float="false"), "kernels[0].relaxed_float: expected a bool, got 'false'"),
    (_json_kernel(relaxed_float=1), "kernels[0].relaxed_float: expected a bool, got 1"),
    (_json_kernel(min_elements=True), "kernels[0].min_elements: expected an integer, got True"),
    (_json_kernel(id="1"), "kernels[0].id: expected an integer, got '1'"),
    (_json_kernel(bindings=[["0", "F32", "read"]]), "kernels[0].bindings[0].slot: expected an integer, got '0'"),
    (_json_kernel(bindings=[[0, "F99", "read"]]),
     "kernels[0].bindings[0].type: unknown element type 'F99' (one of I8, U8, I16, U16, I32, U32, F16, F32, I64, "
     "U64, F64)"),
    (_json_kernel(bindings=[[0, "F32", "sometimes"]]),
     "kernels[0].bindings[0].access: unknown access 'sometimes' (one of READ, WRITE, READ_WRITE, r, w, rw, readwrite)"),
    ({**_json_kernel(), "disabled": "false"}, "disabled: expected a bool, got 'false'"),
    ({**_json_kernel(), "adapter": -2}, "adapter: an index is 0 or more (as `wagogpu info` lists them), got -2"),
    ({}, "kernels: configure buffer kernels or a legacy kernel_export (or disabled=True for a CPU-only host)"),
])
def test_json_configs_follow_the_python_rules(data, message):
    from wagogpu.config import config_from_json

    with pytest.raises(ValueError) as e:
        config_from_json(data)
    assert str(e.value) == message


@pytest.mark.parametrize("access, expected", [("read", Access.READ), ("R", Access.READ), ("w", Access.WRITE),
                                              ("rw", Access.READ_WRITE), ("ReadWrite", Access.READ_WRITE),
                                              ("READ_WRITE", Access.READ_WRITE), (3, Access.READ_WRITE)])
def test_binding_names_are_the_same_in_python_and_json(access, expected):
    from wagogpu.config import config_from_json

    python = BindingConfig(0, "f32", access)
    parsed = config_from_json(_json_kernel(bindings=[[0, "f32", access]])).kernels[0].bindings[0]
    assert python == parsed == BindingConfig(0, ElementType.F32, expected)


def test_a_cpu_only_host_needs_no_kernels():
    with Host(Config(disabled=True)) as host:
        inst = host.instantiate(host.compile('(module (func (export "f") (result i32) i32.const 3))'))
        assert inst.call("f") == 3 and host.device is None


def test_json_takes_the_adapter_fields():
    from wagogpu.config import config_from_json

    cfg = config_from_json({**_json_kernel(), "adapter": "llvmpipe", "backend": "GL"})
    assert (cfg.adapter, cfg.backend) == ("llvmpipe", "gl")
def test_strict_float_is_a_kernel_flag_in_python_and_json():
    from wagogpu import ConfigError
    from wagogpu.config import config_from_json

    k = KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k", [BindingConfig(0, "F32", "read")], strict_float=True)
    assert k.strict_float and not k.relaxed_float
    with pytest.raises(ConfigError) as e:
        KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k", [BindingConfig(0, "F32", "read")], strict_float=1)
    assert e.value.field == "strict_float"
    cfg = config_from_json({"kernels": [{"id": 1, "name": "k", "strict_float": True, "bindings": [[0, "F32", "read"]]}]})
    assert cfg.kernels[0].strict_float


def test_config_from_json_is_public_and_takes_text_or_a_dict():
    import wagogpu

    text = '{"disabled": true, "run_timeout": 2.5}'
    assert wagogpu.config_from_json(text) == wagogpu.config_from_json({"disabled": True, "run_timeout": 2.5})
    assert wagogpu.config_from_json(text.encode()).run_timeout == 2.5
    with pytest.raises(ConfigError, match=r"^config: not valid JSON: "):
        wagogpu.config_from_json('{"disabled": tru}')


def test_an_unknown_field_suggests_the_closest_and_lists_them_all():
    from wagogpu.config import CONFIG_FIELDS, KERNEL_JSON_FIELDS, config_from_json

    with pytest.raises(ConfigError) as e:
        config_from_json({"allow_sofware_adapter": True, "disabled": True})
    message = str(e.value)
    assert message.startswith("allow_sofware_adapter: unknown Config field (did you mean 'allow_software_adapter'? ")
    assert all(name in message for name in CONFIG_FIELDS)
    with pytest.raises(ConfigError) as e:
        config_from_json({"kernels": [{**_json_kernel()["kernels"][0], "bindingz": []}]})
    assert str(e.value).startswith("kernels[0].bindingz: unknown kernel field (did you mean 'bindings'? ")
    assert all(name in str(e.value) for name in KERNEL_JSON_FIELDS)
    with pytest.raises(ConfigError, match=r"^zzz: unknown Config field \(fields: adapter, "):
        config_from_json({"zzz": 1})
