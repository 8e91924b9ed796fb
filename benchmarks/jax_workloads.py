"""The reference workloads in JAX, as ../shared/bench/anchor_jax.py has them.

JAX is optional and never a dependency of asgrad: it is imported at run time
(``pip install jax`` for the CPU; ``pip install "jax[cuda12]"`` for its CUDA backend).
The whole training step (loss, gradients by ``jax.value_and_grad``, the optimizer
update written out as in the anchor) runs under one ``jax.jit``; fp32 with
``jax_default_matmul_precision="highest"`` (no TF32 on GPUs).

``build(name, cache_dir)`` returns ``(step, timed_steps, sync)``: ``step()`` runs one
compiled step and returns the loss (a device array); ``sync(loss)`` blocks until it
is ready. With ``cache_dir``, JAX's persistent compilation cache lives there (every
program cached, however quick its compile), so a second process reusing the folder
loads the compiled step instead of compiling it.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from typing import Any

STEPS = {"xor": 1000, "mlp": 300, "cnn": 40, "transformer": 20, "transformer_large": 10}


def load_jax() -> Any:
    """The jax module, or None when it is not importable."""
    try:
        return importlib.import_module("jax")
    except ImportError:
        return None


def configure(jax: Any, cache_dir: str | None) -> None:
    """fp32 matmuls at full precision; the persistent compilation cache in ``cache_dir``."""
    jax.config.update("jax_default_matmul_precision", "highest")
    if cache_dir:
        jax.config.update("jax_compilation_cache_dir", cache_dir)
        for flag, value in (
            ("jax_persistent_cache_min_compile_time_secs", 0.0),
            ("jax_persistent_cache_min_entry_size_bytes", 0),
        ):
            with contextlib.suppress(AttributeError):  # an older JAX without this knob
                jax.config.update(flag, value)


def _optimizers(jax: Any, jnp: Any) -> tuple[Any, Any]:
    def adam(
        lr: float, wd: float = 0.0, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
    ) -> Any:
        def init(p: Any) -> Any:
            z = jax.tree.map(jnp.zeros_like, p)
            return (z, z, 0)

        def update(p: Any, g: Any, s: Any) -> Any:
            m, v, t = s
            t = t + 1
            m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
            v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
            p = jax.tree.map(
                lambda p, m, v: (
                    p - lr * wd * p - lr * (m / (1 - b1**t)) / (jnp.sqrt(v / (1 - b2**t)) + eps)
                ),
                p,
                m,
                v,
            )
            return p, (m, v, t)

        return init, update

    def sgd_momentum(lr: float, mu: float) -> Any:
        def init(p: Any) -> Any:
            return jax.tree.map(jnp.zeros_like, p)

        def update(p: Any, g: Any, s: Any) -> Any:
            s = jax.tree.map(lambda b, g: mu * b + g, s, g)
            return jax.tree.map(lambda p, b: p - lr * b, p, s), s

        return init, update

    return adam, sgd_momentum


def _workload(jax: Any, name: str) -> tuple[Any, Callable[[Any], Any], Any]:
    """``(params, loss(params), (opt_init, opt_update))`` for ``name``, as in the anchor."""
    jnp = jax.numpy
    lax = jax.lax
    adam, sgd_momentum = _optimizers(jax, jnp)
    ks = jax.random.split(jax.random.PRNGKey(0), 32)

    def dense(k: Any, i: int, o: int) -> dict[str, Any]:
        b = 1 / i**0.5
        return {"w": jax.random.uniform(k, (i, o), minval=-b, maxval=b), "b": jnp.zeros(o)}

    def ce(logits: Any, y: Any) -> Any:
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))

    def layer_norm(x: Any, eps: float = 1e-5) -> Any:
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + eps)

    if name == "xor":
        p: Any = [dense(ks[0], 2, 8), dense(ks[1], 8, 1)]
        x = jnp.array([[0.0, 0], [0, 1], [1, 0], [1, 1]])
        y = jnp.array([[0.0], [1], [1], [0]])

        def loss(p: Any) -> Any:
            h = jax.nn.relu(x @ p[0]["w"] + p[0]["b"])
            return jnp.mean((jax.nn.sigmoid(h @ p[1]["w"] + p[1]["b"]) - y) ** 2)

        return p, loss, sgd_momentum(0.5, 0.9)
    if name == "mlp":
        p = [dense(ks[0], 784, 128), dense(ks[1], 128, 64), dense(ks[2], 64, 10)]
        x = jax.random.normal(ks[3], (64, 784))
        y = jax.random.randint(ks[4], (64,), 0, 10)

        def loss(p: Any) -> Any:
            h = x
            for i, layer in enumerate(p):
                h = h @ layer["w"] + layer["b"]
                if i < 2:
                    h = jax.nn.relu(h)
            return ce(h, y)

        return p, loss, adam(1e-3)
    if name == "cnn":
        p = {
            "c1": jax.random.normal(ks[0], (16, 1, 3, 3)) * 0.3,
            "b1": jnp.zeros(16),
            "c2": jax.random.normal(ks[1], (32, 16, 3, 3)) * 0.1,
            "b2": jnp.zeros(32),
            "fc": dense(ks[2], 32 * 7 * 7, 10),
        }
        x = jax.random.normal(ks[3], (32, 1, 28, 28))
        y = jax.random.randint(ks[4], (32,), 0, 10)

        def conv(x: Any, w: Any, b: Any) -> Any:
            out = lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)))
            return out + b[None, :, None, None]

        def pool(x: Any) -> Any:
            return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

        def loss(p: Any) -> Any:
            h = pool(jax.nn.relu(conv(x, p["c1"], p["b1"])))
            h = pool(jax.nn.relu(conv(h, p["c2"], p["b2"]))).reshape(32, -1)
            return ce(h @ p["fc"]["w"] + p["fc"]["b"], y)

        return p, loss, adam(1e-3)
    if name in ("transformer", "transformer_large"):
        V, T, D, H, FF, L, B = (
            (64, 64, 128, 4, 512, 2, 16)
            if name == "transformer"
            else (256, 256, 512, 8, 2048, 4, 32)
        )
        p = {
            "emb": jax.random.normal(ks[0], (V, D)),
            "pos": jnp.zeros((1, T, D)),
            "head": dense(ks[1], D, V),
            "blocks": [
                {
                    "qkv": dense(ks[2 + 4 * i], D, 3 * D),
                    "proj": dense(ks[3 + 4 * i], D, D),
                    "ff1": dense(ks[4 + 4 * i], D, FF),
                    "ff2": dense(ks[5 + 4 * i], FF, D),
                }
                for i in range(L)
            ],
        }
        idx = jax.random.randint(ks[30], (B, T), 0, V)
        tgt = jax.random.randint(ks[31], (B, T), 0, V)
        mask = jnp.triu(jnp.ones((T, T), bool), 1)

        def lin(layer: Any, x: Any) -> Any:
            return x @ layer["w"] + layer["b"]

        def loss(p: Any) -> Any:
            x = p["emb"][idx] + p["pos"]
            for b in p["blocks"]:
                q, k, v = jnp.split(lin(b["qkv"], layer_norm(x)), 3, axis=-1)
                q, k, v = (t.reshape(B, T, H, D // H).transpose(0, 2, 1, 3) for t in (q, k, v))
                att = jnp.where(mask, -jnp.inf, q @ k.transpose(0, 1, 3, 2) / (D // H) ** 0.5)
                y = (jax.nn.softmax(att, -1) @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
                x = x + lin(b["proj"], y)
                x = x + lin(b["ff2"], jax.nn.gelu(lin(b["ff1"], layer_norm(x)), approximate=False))
            return ce(lin(p["head"], layer_norm(x)).reshape(-1, V), tgt.reshape(-1))

        return p, loss, adam(1e-3, wd=0.01)
    raise ValueError(f"unknown workload {name!r}")


def build(
    name: str, cache_dir: str | None = None, compute: str = "float32"
) -> tuple[Callable[[], Any], int, Callable[[Any], None]]:
    """``(step, timed_steps, sync)`` for workload ``name`` on JAX's default backend.

    ``compute`` other than float32 (``"bfloat16"``): the parameters are cast to it for
    the forward and backward pass (``jmp``'s usual policy: float32 parameters and
    optimizer, the loss returned in float32)."""
    jax = load_jax()
    if jax is None:
        raise ImportError("JAX is not importable")
    configure(jax, cache_dir)
    params, loss, (opt_init, opt_update) = _workload(jax, name)
    if compute != "float32":
        jnp, full = jax.numpy, loss
        dtype = getattr(jnp, compute)

        def loss(p: Any) -> Any:
            cast = jax.tree_util.tree_map(lambda v: v.astype(dtype), p)
            return full(cast).astype(jnp.float32)

    def whole_step(p: Any, s: Any) -> Any:
        value, grads = jax.value_and_grad(loss)(p)
        p, s = opt_update(p, grads, s)
        return p, s, value

    compiled = jax.jit(whole_step)

    state = [params, opt_init(params)]

    def step() -> Any:
        state[0], state[1], value = compiled(state[0], state[1])
        return value

    def sync(value: Any) -> None:
        if value is not None:
            value.block_until_ready()

    return step, STEPS[name], sync
