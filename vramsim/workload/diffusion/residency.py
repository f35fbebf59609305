"""CPU offload of a pipeline's components: their weights leave the device and come back as accelerate's hooks move them."""

from __future__ import annotations

import torch

from vramsim.tracer.categories import Category
from vramsim.workload.program import StepObserver

__all__ = ["Residency"]


class Residency:
    """Which weights are on the device under CPU offload, as accelerate's hooks move them.

    ``model`` (``enable_model_cpu_offload``): a component's weights come to the device when it is
    called and stay until the component after it in the pipeline's ``model_cpu_offload_seq`` is called
    (accelerate's ``prev_module_hook``; so Kontext's VAE, called to encode before the transformer,
    shares the device with T5 and then with the transformer); after the call none is left
    (``maybe_free_model_hooks``). ``sequential`` (``enable_sequential_cpu_offload``):
    each module's own weights come for its forward and leave after it. Weights start on the host:
    leaving frees their device storage, coming allocates it again.
    """

    def __init__(self, *, mode: str, modules: dict[str, torch.nn.Module], sequence: tuple[str, ...]) -> None:
        self.mode = mode
        self.observer: StepObserver | None = None
        self._modules = modules
        self._shapes = {id(t): t.shape for m in modules.values() for t in (*m.parameters(), *m.buffers())}
        chained = [name for name in sequence if name in modules]
        self._previous = dict(zip(chained[1:], chained, strict=False))
        """Each component's ``prev_module_hook``: the one its call sends back to the host."""
        self._resident: list[str] = []
        self._placeholders: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}
        for module in modules.values():
            self._leave(module, recurse=True)
            if mode == "sequential":
                for sub in module.modules():
                    if next(sub.parameters(recurse=False), None) is not None:
                        sub.register_forward_pre_hook(lambda m, _: self._come(m, recurse=False))
                        sub.register_forward_hook(lambda m, _, __: self._leave(m, recurse=False))

    def use(self, name: str) -> None:
        """Model offload: ``name`` is called next; its hook first offloads the component before it in the sequence."""
        if self.mode != "model":
            return
        previous = self._previous.get(name)
        if previous in self._resident:
            self._leave(self._modules[previous], recurse=True)
            self._resident.remove(previous)
        if name not in self._resident:
            self._come(self._modules[name], recurse=True)
            self._resident.append(name)

    def release(self) -> None:
        """The end of the call: every component back on the host."""
        for name in self._resident:
            self._leave(self._modules[name], recurse=True)
        self._resident = []

    def _leave(self, module: torch.nn.Module, *, recurse: bool) -> None:
        """Free the device copies; what stays keeps the shape and holds no memory (accelerate leaves a meta tensor,
        whose shape the model may still read), here one shared element expanded."""
        for tensor in (*module.parameters(recurse=recurse), *module.buffers(recurse=recurse)):
            key = (tensor.dtype, tensor.device)
            if key not in self._placeholders:
                self._placeholders[key] = torch.empty((), dtype=tensor.dtype, device=tensor.device)
            tensor.data = self._placeholders[key].expand(self._shapes[id(tensor)])

    def _come(self, module: torch.nn.Module, *, recurse: bool) -> None:
        tensors = [*module.parameters(recurse=recurse), *module.buffers(recurse=recurse)]
        for tensor in tensors:
            tensor.data = torch.empty(self._shapes[id(tensor)], dtype=tensor.dtype, device=tensor.device)
        if self.observer is not None:
            self.observer.mark(tensors, Category.PARAMETER)
