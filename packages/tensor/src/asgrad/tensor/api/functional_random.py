"""Random sampling inside graphs: ``rand``, ``randn``, ``bernoulli``, ``normal``.

Samples come from the counter-based hash that dropout uses (see
`asgrad.tensor.ops.random`): element ``i`` of a draw is a pure function of
``(seed, i)``, so the CPU and the GPU draw the same numbers for the same seed
(uniforms bit for bit, normals within float32 rounding of ``log`` and ``cos``).

The ``seed`` argument of every sampler says where the seed comes from:

* ``None`` (the default): the graph's own seed stream, a non-trainable int64
  [`Variable`][asgrad.tensor.Variable] ([`seed_stream`][asgrad.tensor.seed_stream]) made on the
  graph's first draw; a program compiled with the graph's updates (an optimizer's step always is)
  advances it, so every run draws afresh, as ``torch.randn`` does.
* a [`Variable`][asgrad.tensor.Variable] (an int scalar): that stream, advanced the same
  way; two draws in one graph read consecutive seeds.
* an int Tensor scalar (fed, say): used as it is.
* an int: a constant seed, the same numbers every run.

>>> import numpy as np
>>> from asgrad.tensor import Graph, compile
>>> g = Graph()
>>> x = g.input("x", (2, 3))
>>> noise = randn_like(x, seed=7)
>>> a = compile([noise])(x=np.zeros((2, 3), "float32"))[0]
>>> b = compile([noise])(x=np.zeros((5, 3), "float32"))[0]  # a larger batch
>>> bool((a == b[:2]).all())  # element i depends on (seed, i) only
True
>>> step = compile([rand(g, 4)], g.updates)  # the graph's stream, advanced per run
>>> bool((step()[0] != step()[0]).all())
True
"""

from __future__ import annotations

import itertools
import weakref

import numpy as np

from asgrad.tensor.api.located import checked, locate
from asgrad.tensor.api.tensor import Tensor
from asgrad.tensor.errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from asgrad.tensor.ir.common import shape_arg
from asgrad.tensor.ir.dtypes import is_float, is_int
from asgrad.tensor.ir.graph import Graph, Variable

__all__ = [
    "bernoulli",
    "normal",
    "rand",
    "rand_like",
    "randn",
    "randn_like",
    "seed_stream",
]

Seed = Tensor | Variable | int | None

_STREAMS: weakref.WeakKeyDictionary[Graph, Variable] = weakref.WeakKeyDictionary()
# Graphs made in the same order get the same streams (a run is reproducible); the
# starts are scattered (golden-ratio steps in the int32 range every backend holds).
_STARTS = itertools.count(1)


def seed_stream(graph: Graph, seed: int | None = None) -> Variable:
    """The graph's default seed Variable (``rng.seed``, int64), made on first use.

    ``seed`` sets its value (as ``torch.manual_seed`` does for the next draws);
    without it a new stream starts from a per-process counter.

    >>> from asgrad.tensor import Graph, seed_stream
    >>> g = Graph()
    >>> seed_stream(g, 0) is seed_stream(g)
    True
    """
    var = _STREAMS.get(graph)
    if var is None:
        start = (next(_STARTS) * 0x9E3779B1) % (1 << 30) if seed is None else seed
        var = _STREAMS[graph] = Variable("rng.seed", np.array(start, np.int64), trainable=False)
    elif seed is not None:
        var.value = np.array(seed, np.int64)
    return var


def _seed_tensor(graph: Graph, seed: Seed, op: str) -> Tensor:
    if seed is None:
        seed = seed_stream(graph)
    if isinstance(seed, Variable):
        if not is_int(seed.dtype) or seed.shape != ():
            raise DTypeError(f"{op}: a seed Variable must be an int scalar, got {seed}")
        # Each draw reads the stream's current value and moves it on by one, so two
        # draws of one graph differ and the next run continues after the last.
        current = graph.updates[seed] if seed in graph.updates else graph.bind(seed)
        if seed in graph.updates:
            graph.updates[seed] = current + 1
        else:
            graph.add_update(seed, current + 1)
        return current
    if isinstance(seed, Tensor):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ArgumentTypeError(
            f"{op}: seed must be None, an int, an int Tensor or a Variable, got"
            f" {type(seed).__name__}"
        )
    return graph.constant(int(seed), "int64")


def rand_like(x: Tensor, seed: Seed = None) -> Tensor:
    """Uniform samples in ``[0, 1)`` with ``x``'s shape and float dtype (``torch.rand_like``).

    Each value has 24 random bits (``k * 2**-24``), exact in float32 on every backend.

    >>> from asgrad.tensor import Graph, evaluate, rand_like
    >>> g = Graph()
    >>> rand_like(g.input("x", (2, 3)), seed=0).shape
    (2, 3)
    """
    return x.graph.apply("rand_like", (x, _seed_tensor(x.graph, seed, "rand_like")), {})


def randn_like(x: Tensor, seed: Seed = None) -> Tensor:
    """Standard normal samples with ``x``'s shape and float dtype (``torch.randn_like``).

    Box-Muller on two 24-bit uniforms, so ``|z| < 5.8``. The CPU computes in float64
    and rounds; the GPU computes in float32 (within 2e-6 of the CPU's float32 values).

    >>> from asgrad.tensor import Graph, evaluate, randn_like
    >>> g = Graph()
    >>> randn_like(g.input("x", (2, 3)), seed=0).shape
    (2, 3)
    """
    return x.graph.apply("randn_like", (x, _seed_tensor(x.graph, seed, "randn_like")), {})


def _shaped(graph: Graph, size: tuple[object, ...], dtype: str, op: str) -> Tensor:
    if not isinstance(graph, Graph):
        raise ArgumentTypeError(f"{op}: the first argument must be the Graph, got {graph!r}")
    shape = checked(op, shape_arg, size)
    if any(d < 0 for d in shape):
        raise locate(op, ShapeError(f"sizes must be >= 0, got {list(shape)}"))
    checked(op, _require_float_dtype, dtype)
    # A zero broadcast to the shape: read for its shape only, never materialised.
    return graph.constant(0, dtype).broadcast_to(shape)


def _require_float_dtype(dtype: str) -> None:
    if not is_float(dtype):
        raise DTypeError(f"samples are floating point, got dtype {dtype!r}; use float32 or float64")


def rand(graph: Graph, *size: int, seed: Seed = None, dtype: str = "float32") -> Tensor:
    """Uniform samples in ``[0, 1)`` of shape ``size`` in ``graph`` (``torch.rand``).

    >>> from asgrad.tensor import Graph, evaluate, rand
    >>> g = Graph()
    >>> u = evaluate(rand(g, 1000, seed=0))[0]
    >>> u.shape, bool(0 <= u.min() and u.max() < 1)
    ((1000,), True)
    """
    return rand_like(_shaped(graph, size, dtype, "rand"), seed)


def randn(graph: Graph, *size: int, seed: Seed = None, dtype: str = "float32") -> Tensor:
    """Standard normal samples of shape ``size`` in ``graph`` (``torch.randn``).

    >>> from asgrad.tensor import Graph, evaluate, randn
    >>> g = Graph()
    >>> z = evaluate(randn(g, 2, 3, seed=0))[0]
    >>> z.shape, z.dtype
    ((2, 3), dtype('float32'))
    """
    return randn_like(_shaped(graph, size, dtype, "randn"), seed)


def bernoulli(p: Tensor, seed: Seed = None) -> Tensor:
    """1 with probability ``p`` (elementwise, in ``[0, 1]``), else 0, in ``p``'s dtype.

    ``rand_like(p) < p``: no gradient flows to ``p`` (as ``torch.bernoulli``).

    >>> from asgrad.tensor import Graph, evaluate, bernoulli
    >>> g = Graph()
    >>> p = g.constant([0.0, 1.0])
    >>> evaluate(bernoulli(p, seed=0))[0].tolist()
    [0.0, 1.0]
    """
    return (rand_like(p, seed) < p).cast(p.dtype)


def normal(mean: Tensor, std: Tensor | float = 1.0, seed: Seed = None) -> Tensor:
    """``mean + std * randn_like(mean)``: differentiable in ``mean`` and ``std``.

    The reparameterisation of a VAE (``torch.normal`` does not pass gradients; this
    does, as ``torch.distributions.Normal.rsample``).

    >>> from asgrad.tensor import Graph, evaluate, normal
    >>> g = Graph()
    >>> mean = g.constant([0.0, 100.0])
    >>> z = evaluate(normal(mean, 0.001, seed=0))[0]
    >>> [round(float(v)) for v in z]
    [0, 100]
    """
    if not isinstance(std, Tensor) and not std >= 0:
        raise ArgumentError(f"normal: std must be >= 0, got {std!r}")
    return mean + randn_like(mean, seed) * std
