"""``Module``: layers that declare their parameters, and ``Parameter`` itself."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NoReturn

import numpy as np

from asgrad.nn import init as init_
from asgrad.nn.casting import cast_variables, lossless_cast
from asgrad.nn.errors import StateMismatchError
from asgrad.tensor import Graph, Tensor, Variable
from asgrad.tensor.errors import (
    ArgumentError,
    ArgumentTypeError,
    AsgradError,
    DefineByRunError,
    GraphError,
    ShapeError,
)
from asgrad.tensor.ir.graph import user_location
from asgrad.tensor.ir.scopes import scope


class Parameter(Variable):
    """A trainable [`Variable`][asgrad.tensor.Variable] that knows how it is initialised.

    A layer declares each parameter's shape and initializer; the value is drawn at
    once from ``rng`` (a Generator or an int seed) and again by
    [`Module.initialize`][asgrad.nn.Module.initialize].

    Give a shape and an initializer, or (PyTorch's form) an initial array, which is
    copied, cast to ``dtype``, and restored by [`reset`][asgrad.nn.Parameter.reset]. ``defined_at``
    is the ``file:line`` that made it (for a layer's parameter: the line that built the layer).

    >>> p = Parameter((2, 3), init_.zeros)
    >>> p.value.sum()
    np.float32(0.0)
    >>> Parameter(np.ones(3)).value
    array([1., 1., 1.], dtype=float32)
    """

    __slots__ = ("defined_at", "init", "owned")

    def __init__(
        self,
        shape: tuple[int, ...] | np.ndarray,
        init: Callable[..., np.ndarray] | None = None,
        *,
        dtype: str = "float32",
        rng: init_.RNG = None,
        trainable: bool = True,
        name: str = "param",
    ) -> None:
        if isinstance(shape, np.ndarray):
            if init is not None:
                raise ArgumentError(
                    "Parameter: give an initial array or a shape and an initializer, not both"
                )
            initial = np.array(shape, dtype=dtype, copy=True)
            initial.setflags(write=False)
            init, shape = _constant_init(initial), initial.shape
        elif init is None:
            raise ArgumentError(
                f"Parameter({shape!r}): give an initializer, e.g. Parameter(shape, init.zeros),"
                " or an initial numpy array, e.g. Parameter(np.ones(3))"
            )
        self.init = init
        self.owned = False  # set when a module registers it: its name is then kept on tying
        # Where it was made (the line that built its layer: a frame walk, no more), which
        # the graph viewer shows; its node's location is where the graph first used it.
        self.defined_at = user_location()
        super().__init__(name, _draw(init, tuple(shape), dtype, rng), trainable=trainable)

    def reset(self, rng: init_.RNG = None) -> None:
        """Draw a new initial value."""
        self.value = _draw(self.init, self.shape, self.dtype, rng)


def _constant_init(initial: np.ndarray) -> Callable[..., np.ndarray]:
    def init(shape: tuple[int, ...], dtype: str, rng: init_.RNG = None) -> np.ndarray:
        return np.array(initial, dtype=dtype, copy=True)

    return init


def _draw(
    init: Callable[..., np.ndarray], shape: tuple[int, ...], dtype: str, rng: init_.RNG
) -> np.ndarray:
    value = np.asarray(init(shape, dtype, rng), dtype=dtype)
    if value.shape != tuple(shape):
        raise ShapeError(f"initializer returned shape {list(value.shape)}, expected {list(shape)}")
    return value


class Module:
    """Base class of layers and models, as PyTorch's ``nn.Module``.

    Assigning a [`Parameter`][asgrad.nn.Parameter], a buffer ([`Variable`][asgrad.tensor.Variable])
    or a sub-module to an attribute registers it; names are dotted paths from the
    outermost module (``"encoder.0.weight"``). Calling a module on symbolic tensors
    runs [`forward`][asgrad.nn.Module.forward], which appends graph nodes; parameters enter the
    graph of their inputs as ``parameter`` nodes, so one model can be traced into a training
    graph and an evaluation graph.

    >>> from asgrad.nn import Linear, Module
    >>> from asgrad.tensor import Graph
    >>> class TwoLayers(Module):
    ...     def __init__(self) -> None:
    ...         super().__init__()
    ...         self.first, self.second = Linear(4, 8, rng=0), Linear(8, 2, rng=1)
    ...     def forward(self, x):
    ...         return self.second(self.first(x).relu())
    >>> model = TwoLayers()
    >>> [name for name, _ in model.named_parameters()]
    ['first.weight', 'first.bias', 'second.weight', 'second.bias']
    >>> model(Graph().input("x", (3, 4))).shape
    (3, 2)
    """

    training: bool
    _parameters: dict[str, Parameter]
    _buffers: dict[str, Variable]
    _modules: dict[str, Module]

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise GraphError(f"call Module.__init__() in {type(self).__name__}.__init__ first")
        for store in (self._parameters, self._buffers, self._modules):
            store.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
            if not value.owned:  # a tied parameter keeps the name of its first owner
                value.name = name
            value.owned = True
        elif isinstance(value, Variable):
            self._buffers[name] = value
            value.name = name
        elif isinstance(value, Module):
            known = {id(v) for _, v in self.named_variables()}  # tied: keep the first name
            self._modules[name] = value
            for sub, var in value.named_variables():
                if id(var) not in known:
                    var.name = f"{name}.{sub}"
        object.__setattr__(self, name, value)

    # -- registry ----------------------------------------------------------------------
    def named_parameters(
        self, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` for every parameter, this module's first.

        A parameter shared by several modules (tied weights, ``decoder.weight =
        encoder.weight``) comes once, under its first name, as in PyTorch, unless
        ``remove_duplicate=False``.
        """
        seen: set[int] = set()
        for name, p in self._walk("_parameters", prefix):
            if remove_duplicate and id(p) in seen:
                continue
            seen.add(id(p))
            yield name, p

    def _walk(self, store: str, prefix: str) -> Iterator[tuple[str, Any]]:
        for name, v in getattr(self, store).items():
            yield prefix + name, v
        for name, m in self._modules.items():
            yield from m._walk(store, f"{prefix}{name}.")

    def parameters(self) -> list[Parameter]:
        """Every parameter (trainable or frozen), in registration order, each once."""
        return [p for _, p in self.named_parameters()]

    def named_buffers(
        self, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Variable]]:
        """Non-trainable state, such as batch norm's running statistics."""
        seen: set[int] = set()
        for name, b in self._walk("_buffers", prefix):
            if remove_duplicate and id(b) in seen:
                continue
            seen.add(id(b))
            yield name, b

    def named_variables(self, remove_duplicate: bool = True) -> Iterator[tuple[str, Variable]]:
        """Parameters and buffers (a shared one once, unless ``remove_duplicate=False``)."""
        yield from self.named_parameters(remove_duplicate=remove_duplicate)
        yield from self.named_buffers(remove_duplicate=remove_duplicate)

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """``(dotted name, module)`` for this module (name ``""``) and every sub-module."""
        yield prefix.rstrip("."), self
        for name, m in self._modules.items():
            yield from m.named_modules(f"{prefix}{name}.")

    def children(self) -> list[Module]:
        """The direct sub-modules, in registration order."""
        return list(self._modules.values())

    def num_parameters(self) -> int:
        """The number of scalar values in all parameters."""
        return sum(int(np.prod(p.shape)) for p in self.parameters())

    # -- modes ---------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout active, batch norm on batch statistics).

        Also sets the mode variable that graphs traced in training mode read when
        they run ([`mode_flag`][asgrad.nn.Module.mode_flag]), so a graph already built follows the
        switch.
        """
        for _, m in self.named_modules():
            object.__setattr__(m, "training", bool(mode))
            flag = m.__dict__.get("_mode_variable")
            if flag is not None:
                flag.value = np.array(1.0 if mode else 0.0, dtype=np.float32)
        return self

    def eval(self) -> Module:
        """Evaluation mode (dropout off, batch norm on running statistics)."""
        return self.train(False)

    def mode_flag(self, graph: Graph) -> Tensor:
        """A bool scalar of ``graph``, true while this module is in training mode.

        It reads this module's mode variable (a float32 scalar, 1 in training mode, 0
        in evaluation mode, not trainable and not part of
        [`state_dict`][asgrad.nn.Module.state_dict]) when the graph runs, so a compiled program
        follows [`train`][asgrad.nn.Module.train] / [`eval`][asgrad.nn.Module.eval] without being
        traced again. Layers whose forward depends on the mode select with it
        (``where(self.mode_flag(g), train_value, eval_value)``).
        """
        flag = self.__dict__.get("_mode_variable")
        if flag is None:
            value = np.array(1.0 if self.training else 0.0, dtype=np.float32)
            flag = Variable("training", value, trainable=False)
            object.__setattr__(self, "_mode_variable", flag)
        return graph.bind(flag) > 0.5

    def initialize(self, seed: int | np.random.Generator = 0) -> Module:
        """Redraw every parameter from its initializer, reproducibly from ``seed``."""
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        for _, p in self.named_parameters():
            p.reset(rng)
        return self

    def apply(self, fn: Callable[[Module], object]) -> Module:
        """Call ``fn`` on every sub-module, then on this one (PyTorch's order); returns self.

        >>> from asgrad.nn import Linear, Sequential, init
        >>> def weights_init(m):
        ...     if isinstance(m, Linear):
        ...         init.zeros_(m.weight)
        >>> net = Sequential(Linear(2, 3), Linear(3, 1)).apply(weights_init)  # Module.apply
        >>> float(abs(net[1].weight.value).sum())
        0.0
        """
        for m in self._modules.values():
            m.apply(fn)  # Module.apply
        fn(self)
        return self

    def register_buffer(
        self, name: str, tensor: np.ndarray | None, persistent: bool = True
    ) -> None:
        """PyTorch's ``register_buffer``: ``tensor`` (an array) becomes non-trainable state
        under ``name``, in [`state_dict`][asgrad.nn.Module.state_dict] and
        [`named_buffers`][asgrad.nn.Module.named_buffers]; in ``forward`` it is a
        [`Variable`][asgrad.tensor.Variable] (``x.graph.bind(self.name)``, or combined with
        a Tensor).

        >>> import numpy as np
        >>> m = Module()
        >>> m.register_buffer("mask", np.tril(np.ones((2, 2), np.float32)))
        >>> [name for name, _ in m.named_buffers()]
        ['mask']
        """
        if not persistent:
            raise ArgumentError(
                f"register_buffer({name!r}, persistent=False): every buffer is saved in"
                " state_dict here; keep a non-saved array as a plain attribute instead"
            )
        if "." in name or not name:
            raise ArgumentError(f"register_buffer: invalid buffer name {name!r}")
        if tensor is None:
            object.__setattr__(self, name, None)
            return
        setattr(self, name, Variable(name, np.array(tensor), trainable=False))

    def cuda(self, device: object = None) -> NoReturn:
        """Refused with the asgrad way: the device is chosen when compiling."""
        raise DefineByRunError(
            f"{type(self).__name__}.cuda(): a model has no device here; the program and its"
            " parameters are placed when compiled: opt.compile(loss, backend='gpu')"
        )

    def cpu(self) -> Module:
        """This module, unchanged: parameters live where the last program ran them."""
        return self

    def zero_grad(self, set_to_none: bool = True) -> NoReturn:
        """Refused with the asgrad way: a compiled step computes fresh gradients each run."""
        raise DefineByRunError(
            f"{type(self).__name__}.zero_grad(): asgrad accumulates no gradients between"
            " steps; step = opt.compile(loss) once, then step(x=..., y=...) per batch"
        )

    def to(self, dtype: str | np.dtype[Any] | type, *, exact: bool = True) -> Module:
        """Cast every floating-point parameter and buffer to ``dtype``, in place; returns self.

        The same [`Parameter`][asgrad.nn.Parameter] objects keep their identity (an optimizer made
        before still holds them). As [`load_state_dict`][asgrad.nn.Module.load_state_dict], a cast
        that would change a value (float64 to float32 of values float32 cannot hold) is refused
        unless ``exact=False``. Integer buffers (``num_batches_tracked``) keep their dtype.
        Build graphs after the cast: a graph traced before it has the old dtypes.
        Devices are chosen when compiling (``backend="gpu"``), not here.

        >>> from asgrad.nn import Linear
        >>> Linear(2, 3).double().weight.dtype
        'float64'
        """
        cast_variables(dict(self.named_variables()), dtype, exact=exact)
        return self

    def double(self) -> Module:
        """Cast floating-point parameters and buffers to float64 (see
        [`to`][asgrad.nn.Module.to])."""
        return self.to("float64")

    def float(self, *, exact: bool = True) -> Module:
        """Cast floating-point parameters and buffers to float32 (see
        [`to`][asgrad.nn.Module.to])."""
        return self.to("float32", exact=exact)

    # -- state -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, np.ndarray]:
        """Every parameter and buffer by dotted name (copies).

        A tied parameter appears under each of its names, as in PyTorch.
        """
        return {name: np.array(v.value) for name, v in self.named_variables(False)}

    def load_state_dict(self, state: Mapping[str, np.ndarray], strict: bool = True) -> None:
        """Load values by dotted name; reports every missing, unexpected and mismatched entry.

        A value of another dtype is cast when no value changes (float64 arrays saved
        from a float32 model); a cast that would change a value is refused, naming the
        dtypes.
        """
        own = dict(self.named_variables(remove_duplicate=False))
        missing = sorted(set(own) - set(state))
        unexpected = sorted(set(state) - set(own))
        mismatched = [
            f"{k}: expected {own[k].dtype}{list(own[k].shape)}, got"
            f" {np.asarray(state[k]).dtype}{list(np.shape(state[k]))}"
            + (
                " (transposed? PyTorch checkpoints load with nn.load_torch_state_dict)"
                if len(own[k].shape) == 2 and np.shape(state[k]) == own[k].shape[::-1]
                else ""
            )
            for k in sorted(set(own) & set(state))
            if np.shape(state[k]) != own[k].shape
        ]
        if mismatched or (strict and (missing or unexpected)):
            parts = []
            if missing:
                parts.append("missing: " + ", ".join(missing))
            if unexpected:
                parts.append("unexpected: " + ", ".join(unexpected))
            if mismatched:
                parts.append("mismatched: " + "; ".join(mismatched))
            raise StateMismatchError(
                "state does not fit the model (" + " | ".join(parts) + ");"
                " check that it was saved from the same architecture"
            )
        values = {k: lossless_cast(k, state[k], v.dtype) for k, v in own.items() if k in state}
        for k, value in values.items():
            own[k].value = value

    # -- calling ---------------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation, in graph ops; subclasses define it and are called as ``module(x)``."""
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Masks given by keyword (tgt_mask=...) may be arrays: constants of the graph.
        fixed = [v for k, v in kwargs.items() if not k.endswith("mask")]
        for arg in (*args, *fixed):
            if isinstance(arg, np.ndarray | np.generic):
                raise ArgumentTypeError(
                    f"{type(self).__name__} expects a symbolic Tensor from g.input(...), got"
                    f" {type(arg).__module__}.{type(arg).__name__}; build the graph on inputs"
                    " and feed the arrays when it runs (asgrad.tensor.evaluate, or a compiled"
                    f" step)\n  (at {user_location()})"
                )
        try:
            # Nodes made inside are in this module's scope: its dotted name in the
            # module that called it (``blocks.0.attn``; the outermost module: none).
            with scope(_name_in_caller(self)):
                _CALLING.append(self)
                try:
                    if _CALL_HOOKS:  # asgrad.nn.summary records each call while it traces
                        return _CALL_HOOKS[-1](self, lambda: self.forward(*args, **kwargs))
                    return self.forward(*args, **kwargs)
                finally:
                    _CALLING.pop()
        except AsgradError as exc:
            # Name the line of user code that called the model, once, however deep
            # in nested modules the mistake was found.
            if "\n  (at " not in str(exc) and not getattr(exc, "located", False):
                exc.add_note(f"  (at {user_location()}, in {type(self).__name__})")
                exc.located = True  # type: ignore[attr-defined]  # marks the note as added
            raise

    def extra_repr(self) -> str:
        """The arguments shown inside this module's ``repr``."""
        return ""

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {sub}")
        return "\n".join(lines) + ("\n)" if self._modules else ")")


# The modules whose forward is running, the innermost last (for node scopes).
_CALLING: list[Module] = []


def _name_in_caller(module: Module) -> str:
    """``module``'s dotted name inside the module running now, or "" if not inside it."""
    if _CALLING:
        for name, m in _CALLING[-1].named_modules():
            if m is module:
                return name
    return ""


CallHook = Callable[[Module, Callable[[], Any]], Any]
_CALL_HOOKS: list[CallHook] = []


@contextmanager
def call_hook(hook: CallHook) -> Iterator[None]:
    """While active, ``module(...)`` returns ``hook(module, run)``, where ``run()``
    runs the module's ``forward`` and returns its outputs (the innermost hook only)."""
    _CALL_HOOKS.append(hook)
    try:
        yield
    finally:
        _CALL_HOOKS.remove(hook)
