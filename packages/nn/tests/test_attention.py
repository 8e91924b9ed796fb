"""SelfAttention, TransformerBlock and the positional encodings."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.nn import (
    ALiBi,
    LearnedPositionalEncoding,
    RoPE,
    SelfAttention,
    SinusoidalPositionalEncoding,
    TransformerBlock,
)
from asgrad.nn.layers.positional import alibi_slopes
from asgrad.tensor import Graph, Variable, evaluate
from asgrad.tensor.errors import DTypeError, FeedError, ShapeError

F64 = "float64"


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def value(v: Variable | None) -> np.ndarray:
    assert v is not None
    return v.value


def rope_ref(x: np.ndarray, offset: int = 0, base: float = 10000.0) -> np.ndarray:
    d = x.shape[-1]
    pos = np.arange(offset, offset + x.shape[-2])[:, None]
    angle = pos * base ** (-np.arange(0, d, 2) / d)[None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    cos, sin = np.cos(angle), np.sin(angle)
    out: np.ndarray = np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return out


def mha_ref(
    mha: SelfAttention,
    q: np.ndarray,
    kv: np.ndarray | None = None,
    *,
    causal: bool = False,
    pad: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    rope: bool = False,
) -> np.ndarray:
    """Attention written out in numpy, from the layer's weights."""
    kv = q if kv is None else kv
    e, h = mha.embed_dim, mha.num_heads
    d = e // h
    w, b = mha.in_proj.weight.value, value(mha.in_proj.bias)

    def heads(x: np.ndarray, part: int) -> np.ndarray:
        y: np.ndarray = x @ w[:, part * e : (part + 1) * e] + b[part * e : (part + 1) * e]
        return y.reshape(x.shape[0], x.shape[1], h, d).transpose(0, 2, 1, 3)

    Q, K, V = heads(q, 0), heads(kv, 1), heads(kv, 2)
    if rope:
        Q, K = rope_ref(Q), rope_ref(K)
    s = Q @ K.transpose(0, 1, 3, 2) / math.sqrt(d)
    if bias is not None:
        s = s + bias
    tq, tk = q.shape[1], kv.shape[1]
    if causal:
        s = np.where(np.tril(np.ones((tq, tk), bool), tk - tq), s, -np.inf)
    if pad is not None:
        s = np.where(pad[:, None, None, :], -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = (p @ V).transpose(0, 2, 1, 3).reshape(q.shape[0], tq, e)
    result: np.ndarray = out @ mha.out_proj.weight.value + value(mha.out_proj.bias)
    return result


# -- batch sizes, sequence lengths, masks ---------------------------------------------------------
@pytest.mark.parametrize("seq_len", [3, 8])
def test_one_graph_runs_on_batch_1_and_batch_5(seq_len: int) -> None:
    mha = SelfAttention(12, 3, dtype=F64, rng=0)
    g = Graph()
    y = mha(g.input("x", (1, seq_len, 12), F64), causal=True)
    for batch in (1, 5):
        x = rand(batch, seq_len, 12, seed=batch)
        out = evaluate(y, {"x": x})[0]
        assert out.shape == (batch, seq_len, 12)
        np.testing.assert_allclose(out, mha_ref(mha, x, causal=True), rtol=1e-10, atol=1e-12)


def test_causal_future_tokens_do_not_change_past_outputs() -> None:
    mha = SelfAttention(8, 2, causal=True, dtype=F64, rng=1)
    g = Graph()
    y = mha(g.input("x", (2, 6, 8), F64))
    x = rand(2, 6, 8)
    changed = x.copy()
    changed[:, 4:] = rand(2, 2, 8, seed=9)
    a, b = evaluate(y, {"x": x})[0], evaluate(y, {"x": changed})[0]
    np.testing.assert_allclose(a[:, :4], b[:, :4], rtol=1e-12)
    assert not np.allclose(a[:, 4:], b[:, 4:])
    # Without the mask the future leaks into the past.
    leak = evaluate(mha(g.input("x2", (2, 6, 8), F64), causal=False), {"x2": changed})[0]
    assert not np.allclose(a[:, :4], leak[:, :4])


def test_key_padding_mask_hides_padded_keys() -> None:
    mha = SelfAttention(8, 4, dtype=F64, rng=2)
    g = Graph()
    x, pad = g.input("x", (3, 5, 8), F64), g.input("pad", (3, 5), "bool")
    y = mha(x, key_padding_mask=pad)
    lengths = [5, 3, 1]
    mask = np.arange(5)[None, :] >= np.array(lengths)[:, None]
    xs = rand(3, 5, 8)
    garbage = xs.copy()
    garbage[mask] = 100.0
    a = evaluate(y, {"x": xs, "pad": mask})[0]
    b = evaluate(y, {"x": garbage, "pad": mask})[0]
    for i, n in enumerate(lengths):  # real positions ignore whatever the padding holds
        np.testing.assert_allclose(a[i, :n], b[i, :n], rtol=1e-10)
    np.testing.assert_allclose(a, mha_ref(mha, xs, pad=mask), rtol=1e-10, atol=1e-12)


def test_cross_attention_and_rectangular_causal_mask() -> None:
    mha = SelfAttention(8, 2, dtype=F64, rng=3)
    g = Graph()
    q, kv = g.input("q", (2, 3, 8), F64), g.input("kv", (2, 5, 8), F64)
    qs, kvs = rand(2, 3, 8), rand(2, 5, 8, seed=1)
    out = evaluate(mha(q, kv, kv), {"q": qs, "kv": kvs})[0]
    np.testing.assert_allclose(out, mha_ref(mha, qs, kvs), rtol=1e-10, atol=1e-12)
    # Queries are the last 3 of the 5 positions: query i sees keys 0 .. i + 2.
    out = evaluate(mha(q, kv, kv, causal=True), {"q": qs, "kv": kvs})[0]
    np.testing.assert_allclose(out, mha_ref(mha, qs, kvs, causal=True), rtol=1e-10, atol=1e-12)


def test_attention_bias_is_added_to_the_scores() -> None:
    mha = SelfAttention(8, 2, dtype=F64, rng=4)
    bias = rand(2, 4, 4, seed=5)
    g = Graph()
    y = mha(g.input("x", (3, 4, 8), F64), attn_bias=g.constant(bias, F64))
    x = rand(3, 4, 8)
    np.testing.assert_allclose(evaluate(y, {"x": x})[0], mha_ref(mha, x, bias=bias), rtol=1e-10)


def test_attention_matches_torch_multihead_attention(torch_reference: Callable[..., Any]) -> None:
    mha = SelfAttention(16, 4, dtype=F64, rng=0)
    x = rand(4, 6, 16)
    pad = np.zeros((4, 6), bool)
    pad[1, 4:] = pad[3, 2:] = True
    weights = [
        mha.in_proj.weight.value.T,
        value(mha.in_proj.bias),
        mha.out_proj.weight.value.T,
        value(mha.out_proj.bias),
    ]

    def theirs(torch: Any, weights: list[Any], x: Any, pad: Any) -> Any:
        ref = torch.nn.MultiheadAttention(16, 4, batch_first=True, dtype=torch.float64)
        with torch.no_grad():
            for target, w in zip(
                (ref.in_proj_weight, ref.in_proj_bias, ref.out_proj.weight, ref.out_proj.bias),
                weights,
                strict=True,
            ):
                target.copy_(torch.tensor(w))
        causal = torch.triu(torch.ones(6, 6, dtype=torch.bool), 1)
        tx = torch.tensor(x)
        return ref(tx, tx, tx, attn_mask=causal, key_padding_mask=torch.tensor(pad),
                   need_weights=False)[0]  # fmt: skip

    expected = torch_reference(theirs, weights, x, pad)
    g = Graph()
    y = mha(g.input("x", x.shape, F64), key_padding_mask=g.input("pad", pad.shape, "bool"),
            causal=True)  # fmt: skip
    out = evaluate(y, {"x": x, "pad": pad})[0]
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)


def test_attention_errors_name_shapes_and_fixes() -> None:
    with pytest.raises(ShapeError, match="embed_dim 10 is not divisible by num_heads 4"):
        SelfAttention(10, 4)
    mha = SelfAttention(8, 2)
    g = Graph()
    with pytest.raises(ShapeError, match=r"query must be \(batch, seq, 8\), got shape \[2, 5, 6\]"):
        mha(g.input("x", (2, 5, 6)))
    x = g.input("y", (2, 5, 8))
    with pytest.raises(DTypeError, match="must be bool"):
        mha(x, key_padding_mask=g.input("m", (2, 5)))
    with pytest.raises(ShapeError, match=r"must be \(batch, 5\)"):
        mha(x, key_padding_mask=g.input("m2", (2, 4), "bool"))
    y = mha(x)
    with pytest.raises(FeedError):  # a new sequence length needs a new trace
        evaluate(y, {"y": np.zeros((2, 6, 8), np.float32)})


# -- transformer block ------------------------------------------------------------------------
def test_transformer_block_matches_torch_pre_norm_encoder_layer(
    torch_reference: Callable[..., Any],
) -> None:
    block = TransformerBlock(8, 2, hidden_dim=16, dtype=F64, rng=0)
    for name, v in block.named_variables():
        if name.endswith(".seed"):
            continue
        scale = 1.0 if name.startswith("ln") and name.endswith("weight") else 0.0
        v.value = rand(*v.shape, seed=len(name)) * 0.5 + scale
    mapping = {
        "self_attn.in_proj_weight": block.attn.in_proj.weight.value.T,
        "self_attn.in_proj_bias": value(block.attn.in_proj.bias),
        "self_attn.out_proj.weight": block.attn.out_proj.weight.value.T,
        "self_attn.out_proj.bias": value(block.attn.out_proj.bias),
        "linear1.weight": block.ff.fc1.weight.value.T,
        "linear1.bias": value(block.ff.fc1.bias),
        "linear2.weight": block.ff.fc2.weight.value.T,
        "linear2.bias": value(block.ff.fc2.bias),
        "norm1.weight": value(block.ln1.weight),
        "norm1.bias": value(block.ln1.bias),
        "norm2.weight": value(block.ln2.weight),
        "norm2.bias": value(block.ln2.bias),
    }
    x = rand(3, 5, 8)

    def theirs(torch: Any, mapping: dict[str, Any], x: Any) -> Any:
        ref = torch.nn.TransformerEncoderLayer(
            8, 2, 16, dropout=0.0, activation="gelu", batch_first=True, norm_first=True,
            dtype=torch.float64,
        )  # fmt: skip
        ref.load_state_dict({k: torch.tensor(np.ascontiguousarray(v)) for k, v in mapping.items()})
        ref.eval()
        causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
        return ref(torch.tensor(x), src_mask=causal, is_causal=True).detach()

    expected = torch_reference(theirs, mapping, x)
    g = Graph()
    out = evaluate(block(g.input("x", x.shape, F64), causal=True), {"x": x})[0]
    np.testing.assert_allclose(out, expected, rtol=1e-9, atol=1e-10)


def test_transformer_block_numpy_reference_and_any_batch() -> None:
    block = TransformerBlock(8, 2, causal=True, dtype=F64, rng=1)
    g = Graph()
    y = block(g.input("x", (1, 4, 8), F64))

    def ln(x: np.ndarray) -> np.ndarray:
        out: np.ndarray = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
        return out

    erf = np.vectorize(math.erf)
    for batch in (1, 3):
        x = rand(batch, 4, 8, seed=batch)
        h = x + mha_ref(block.attn, ln(x), causal=True)
        ff = block.ff
        hidden = ln(h) @ ff.fc1.weight.value + value(ff.fc1.bias)
        hidden = 0.5 * hidden * (1 + erf(hidden / math.sqrt(2)))
        expected = h + hidden @ ff.fc2.weight.value + value(ff.fc2.bias)
        np.testing.assert_allclose(evaluate(y, {"x": x})[0], expected, rtol=1e-9, atol=1e-11)


def test_transformer_block_dropout_only_in_training() -> None:
    block = TransformerBlock(8, 2, dropout=0.5, rng=0)
    g = Graph()
    block(g.input("x", (2, 3, 8)))
    assert len(g.updates) == 4  # attention weights, residual 1, hidden, residual 2
    block.eval()
    g = Graph()
    block(g.input("x", (2, 3, 8)))
    assert not g.updates


# -- positional encodings --------------------------------------------------------------------
def test_sinusoidal_encoding_formula_and_offset() -> None:
    pe = SinusoidalPositionalEncoding(6, max_len=20)
    x = np.zeros((2, 4, 6))
    out = evaluate(pe(Graph().input("x", x.shape, F64), offset=3), {"x": x})[0]
    pos = np.arange(3, 7)[:, None]
    i = np.arange(3)[None, :]
    np.testing.assert_allclose(out[0, :, 0::2], np.sin(pos / 10000 ** (2 * i / 6)), atol=1e-12)
    np.testing.assert_allclose(out[1, :, 1::2], np.cos(pos / 10000 ** (2 * i / 6)), atol=1e-12)
    with pytest.raises(ShapeError, match="exceed max_len 20"):
        pe(Graph().input("x", (1, 4, 6)), offset=17)


def test_learned_encoding_adds_rows_and_accepts_a_fed_offset() -> None:
    pe = LearnedPositionalEncoding(10, 4, dtype=F64, rng=0)
    assert abs(LearnedPositionalEncoding(1000, 8, rng=0).weight.value.std() - 1) < 0.05
    g = Graph()
    x = rand(2, 3, 4)
    t = g.input("x", x.shape, F64)
    out = evaluate(pe(t, offset=2), {"x": x})[0]
    np.testing.assert_allclose(out, x + pe.weight.value[2:5])
    fed = evaluate(pe(t, offset=g.input("pos", (), "int64")), {"x": x, "pos": np.array(6)})[0]
    np.testing.assert_allclose(fed, x + pe.weight.value[6:9])


def test_rope_rotates_split_halves_with_offset() -> None:
    rope = RoPE(8, max_len=32)
    x = rand(2, 3, 5, 8)
    g = Graph()
    t = g.input("x", x.shape, F64)
    np.testing.assert_allclose(evaluate(rope(t), {"x": x})[0], rope_ref(x), atol=1e-12)
    np.testing.assert_allclose(
        evaluate(rope(t, offset=7), {"x": x})[0], rope_ref(x, offset=7), atol=1e-12
    )
    # An offset equals the matching slice of a longer sequence.
    longer = rand(1, 1, 12, 8)
    full = evaluate(rope(g.input("l", longer.shape, F64)), {"l": longer})[0]
    part = evaluate(rope(g.input("p", (1, 1, 4, 8), F64), offset=8), {"p": longer[..., 8:, :]})[0]
    np.testing.assert_allclose(part, full[..., 8:, :], atol=1e-12)
    with pytest.raises(ShapeError, match="even head dimension"):
        RoPE(7)


def test_rope_scores_depend_on_relative_position_only() -> None:
    rope = RoPE(4, max_len=64)
    q, k = rand(1, 4), rand(1, 4, seed=1)
    g = Graph()
    tq, tk = g.input("q", (1, 4), F64), g.input("k", (1, 4), F64)

    def score(i: int, j: int) -> float:
        a, b = evaluate([rope(tq, offset=i), rope(tk, offset=j)], {"q": q, "k": k})
        return float((a * b).sum())

    assert score(5, 2) == pytest.approx(score(13, 10), rel=1e-10)
    assert score(5, 2) != pytest.approx(score(5, 3), rel=1e-3)


def test_attention_with_rope_matches_reference() -> None:
    mha = SelfAttention(8, 2, position="rope", causal=True, dtype=F64, rng=5)
    x = rand(2, 5, 8)
    out = evaluate(mha(Graph().input("x", x.shape, F64)), {"x": x})[0]
    np.testing.assert_allclose(out, mha_ref(mha, x, causal=True, rope=True), rtol=1e-10)


def test_alibi_slopes_and_bias() -> None:
    np.testing.assert_allclose(alibi_slopes(8), 2.0 ** -np.arange(1, 9))
    # Not a power of two: the 4-head slopes, then every other slope of 8 heads.
    np.testing.assert_allclose(alibi_slopes(6), [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3])
    alibi = ALiBi(2)
    bias = alibi.bias_array(3, 3)
    np.testing.assert_allclose(bias[0], -(2**-4) * np.abs(np.subtract.outer(range(3), range(3))))
    mha = SelfAttention(8, 2, position="alibi", causal=True, dtype=F64, rng=6)
    x = rand(3, 3, 8)
    out = evaluate(mha(Graph().input("x", x.shape, F64)), {"x": x})[0]
    np.testing.assert_allclose(out, mha_ref(mha, x, causal=True, bias=bias), rtol=1e-10)
    with pytest.raises(ShapeError, match=r"ALiBi\(2\) expects scores"):
        alibi(Graph().input("s", (1, 3, 4, 4)))


def test_reprs() -> None:
    reprs: list[Any] = [
        SelfAttention(8, 2, 0.1, causal=True, position="rope"),
        RoPE(8),
        ALiBi(4),
    ]
    assert repr(reprs[0]).startswith(
        "SelfAttention(8, num_heads=2, dropout=0.1, bias=True, causal=True, position='rope'"
    )
    assert repr(reprs[1]) == "RoPE(8, max_len=2048, base=10000.0)"
    assert repr(reprs[2]) == "ALiBi(num_heads=4)"


def test_the_old_spelling_names_both_attention_classes() -> None:
    import asgrad.nn as nn

    old, unknown = "MultiHeadAttention", "Nope"
    with pytest.raises(AttributeError, match=r"is SelfAttention.*is MultiheadAttention"):
        getattr(nn, old)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        getattr(nn, unknown)
    assert not hasattr(nn, old)
