"""Containers: ``Sequential`` and ``ModuleList``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from asgrad.nn.module import Module


class Sequential(Module):
    """Calls its modules in order, each on the previous one's output.

    Sub-modules are named ``"0"``, ``"1"``..., so parameters are ``"0.weight"``.

    >>> from asgrad.nn import Linear, ReLU, Sequential
    >>> from asgrad.tensor import Graph
    >>> model = Sequential(Linear(4, 8, rng=0), ReLU(), Linear(8, 2, rng=1))
    >>> model(Graph().input("x", (3, 4))).shape, [name for name, _ in model.named_parameters()][:2]
    ((3, 2), ['0.weight', '0.bias'])
    """

    def __init__(self, *modules: Module) -> None:
        super().__init__()
        for i, m in enumerate(modules):
            setattr(self, str(i), m)

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())


class ModuleList(Module):
    """A list of modules, registered as ``"0"``, ``"1"``...

    >>> from asgrad.nn import Linear, ModuleList
    >>> layers = ModuleList([Linear(2, 2, rng=i) for i in range(3)])
    >>> len(layers), [name for name, _ in layers.named_parameters()][-1]
    (3, '2.bias')
    """

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> None:
        """Register ``module`` under the next index."""
        setattr(self, str(len(self._modules)), module)

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())
