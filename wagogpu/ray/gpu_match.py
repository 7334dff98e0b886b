"""Which adapter an actor's Host opens: the one Ray gave it, where that can be known.

Ray hands an actor GPUs by number (``get_accelerator_ids()["GPU"]``, e.g. ``["3"]``) and sets
CUDA_VISIBLE_DEVICES to match, but Vulkan ignores CUDA_VISIBLE_DEVICES: every actor's wgpu sees every
GPU of the node, and without a choice each would open the same best-ranked one. So when a Config
names no adapter and Ray gave the actor exactly one GPU, the actor's Config gets
``adapter=<index>``: Ray's number, counted among the node's hardware adapters of one backend
(``Config.backend``, else Vulkan, Metal, D3D12: the first that has any), in list_adapters() order.

That mapping is right only if both count the same GPUs in the same order, which this module checks
as far as it can: the node must have as many hardware adapters on that backend as Ray counts GPUs,
and they must all have the same name (a node of identical GPUs). Ray numbers GPUs as CUDA does (by
default fastest first, ties in PCI bus order) and NVIDIA's Vulkan driver lists them in PCI bus order,
so on such a node the numbers agree; where they might not agree (GPUs of different models, counts
that differ) the Config is left as it is and ``note`` says why. Even then distinct actors get
distinct adapters whenever a mapping is made, because it is one-to-one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..config import Config
from ..gpu.adapters import AdapterInfo, BackendName

#: The backends tried, in order, when the Config names none (GL is never a GPU-per-actor choice).
PREFERRED_BACKENDS = (BackendName.VULKAN, BackendName.METAL, BackendName.DX12)


@dataclass(frozen=True)
class GpuMatch:
    """What the actor decided: the Config its Host opens with, and why (for ActorInfo)."""

    config: Config
    note: str


def _backend_adapters(adapters: Sequence[AdapterInfo], backend: str | None) -> tuple[str, list[int]]:
    """(backend name, indices of its hardware adapters) for the backend the mapping counts on."""
    choices = [BackendName(backend)] if backend else list(PREFERRED_BACKENDS)
    for choice in choices:
        found = [i for i, a in enumerate(adapters) if not a.is_software and a.backend in choice.backend_types]
        if found:
            return str(choice), found
    return str(choices[0]), []


def match_gpu(config: Config, gpu_ids: Sequence[str], adapters: Sequence[AdapterInfo], node_gpus: int) -> GpuMatch:
    """The Config with the adapter Ray's one GPU names, or the Config unchanged and why not."""
    if config.adapter is not None:
        return GpuMatch(config, f"Config.adapter={config.adapter!r} given")
    if config.disabled:
        return GpuMatch(config, "GPU disabled")
    if len(gpu_ids) != 1 or not gpu_ids[0].isdigit():
        return GpuMatch(config, f"Ray gave this actor {len(gpu_ids)} GPUs: the default adapter choice applies")
    gpu = int(gpu_ids[0])
    backend, found = _backend_adapters(adapters, config.backend)
    if len(found) != node_gpus or gpu >= len(found):
        return GpuMatch(config, f"{len(found)} hardware {backend} adapters for the {node_gpus} GPUs Ray counts on "
                                "this node: Ray's GPU number cannot be matched to an adapter")
    names = {adapters[i].name for i in found}
    if len(names) > 1:
        return GpuMatch(config, f"the node's {backend} adapters differ ({', '.join(sorted(names))}): Ray's GPU "
                                "order cannot be checked against theirs")
    index = found[gpu]
    return GpuMatch(config.with_changes(adapter=index),
                    f"Ray GPU {gpu} -> adapter [{index}] {adapters[index].name} ({backend})")
