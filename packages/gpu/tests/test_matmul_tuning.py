"""The measured tile choice: every candidate kernel against numpy, the cache file (round
trip, corrupted and foreign files ignored), the rule when tuning is off, and a tuned
choice read back from disk by the next process."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from asgrad.gpu import Device, GpuArray, to_gpu
from asgrad.gpu.device.buffers import ScopedPool
from asgrad.gpu.errors import GpuError
from asgrad.gpu.lowering import _matmul_tiles as tiling
from asgrad.gpu.lowering import _matmul_tuning as tuning
from asgrad.gpu.lowering.linalg import MatrixView, choose, matmul, matmul_into, select
from asgrad.gpu.plan.capture import capturing, replay

pytestmark = pytest.mark.gpu
Array = np.ndarray

# Every tile the tuner may pick, split or not.
CANDIDATES = sorted(set(tuning.TILES) | set(tuning.SPLIT_TILES) | set(tuning.BATCH_TILES))
# float16 changes only the loaders and the stores, which depend on the block, the
# outputs per thread, the K step and the q flag, not on the loop's buffers or on how the threads
# sit in subgroups: one candidate of each such shape (the quickest to compile).
_SHAPES: dict[tuple[int, ...], list[tiling.Tile]] = {}
for _t in map(tiling.tile, CANDIDATES):
    _SHAPES.setdefault((_t.bm, _t.bn, _t.tm, _t.tn, _t.bk, _t.quad), []).append(_t)
LOAD_SHAPES = sorted(
    min(ts, key=lambda t: (t.pingpong, t.unroll, t.warp, t.double)).name for ts in _SHAPES.values()
)


def _view(device: Device, x: Array, transposed: bool) -> MatrixView:
    if transposed:  # stored transposed, read through swapped strides
        return MatrixView(to_gpu(np.ascontiguousarray(np.swapaxes(x, -1, -2)), device)).transpose()
    return MatrixView(to_gpu(x, device))


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache folder for this test, and no choice remembered in memory."""
    monkeypatch.setenv("ASGRAD_CACHE_DIR", str(tmp_path))
    tuning._CACHES.clear()
    yield tmp_path / "gpu"
    tuning._CACHES.clear()


@pytest.mark.parametrize("tile", CANDIDATES)
def test_every_candidate_matches_numpy_at_its_edges(device: Device, tile: str) -> None:
    """One small product crossing every edge of the largest tiles: 131 rows (a second,
    partial row of 128-row tiles), 132 columns (128 + 4), K 77 whole and cut in two
    uneven pieces (an odd and an even number of K steps for every K step of 8 to 32:
    a loop that runs two steps per iteration stops after either); A read along K as
    scalars, B along N as vec4."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((131, 77)).astype(np.float32)
    b = rng.standard_normal((77, 132)).astype(np.float32)
    for splits in (2, 1):
        got = matmul(_view(device, a, False), _view(device, b, False), tile, splits).numpy()
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4, err_msg=f"{splits=}")


@pytest.mark.parametrize("tile", [t for t in CANDIDATES if tiling.tile(t).quad])
def test_every_quad_candidate_matches_numpy_with_both_operands_along_k(
    device: Device, tile: str
) -> None:
    """A candidate staging operands read along K as 4x4 blocks, with B stored
    transposed too, aligned (vec4 blocks) and past the edges of 256-row tiles."""
    rng = np.random.default_rng(13)
    a = rng.standard_normal((2, 260, 44)).astype(np.float32)
    b = rng.standard_normal((2, 44, 72)).astype(np.float32)
    got = matmul(_view(device, a, False), _view(device, b, True), tile, 1).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tile", LOAD_SHAPES)
def test_every_candidate_reads_and_stores_float16(device: Device, tile: str) -> None:
    """float16 operands read transposed (A along M as vec4, B along K as scalars, K odd),
    batch dims broadcast both ways, accumulated in float32 and rounded to float16 once."""
    if "shader-f16" not in device.capabilities.features:
        pytest.skip("the adapter has no shader-f16")
    rng = np.random.default_rng(12)
    a = rng.standard_normal((2, 1, 12, 37)).astype(np.float16)
    b = rng.standard_normal((3, 37, 20)).astype(np.float16)
    got = matmul(_view(device, a, True), _view(device, b, True), tile, 1).numpy()
    want = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3)


def test_candidates_fit_the_product_and_start_with_the_rule() -> None:
    small = tuning.Problem(20, 24, 64, 1)
    chosen = tuning.candidates(small, ("32x32_4x4_k8", 1))
    assert chosen[0] == ("32x32_4x4_k8", 1)
    assert all(s == 1 for _, s in chosen)  # K too short to split
    assert "128x128_8x8_k8du" not in {t for t, _ in chosen}  # mostly outside the product
    deep = tuning.Problem(256, 256, 8192, 1)
    splits = {s for t, s in tuning.candidates(deep, ("64x64_8x8_k8du", 8))}
    assert {2, 4, 8, 16} <= splits
    fused = tuning.Problem(256, 256, 8192, 1, splittable=False)
    assert {s for _, s in tuning.candidates(fused, ("64x64_8x8_k8du", 1))} == {1}
    # a product that fills the GPU with 8x8 outputs per thread times no 4x4 tile
    large = {t for t, _ in tuning.candidates(tuning.Problem(2048, 2048, 512, 1), ("x", 1))}
    assert "128x128_8x8_k8du" in large
    assert not {"64x64_4x4_k8du", "32x32_4x4_k8d", "128x64_8x4_k8du"} & large
    narrow = {t for t, _ in tuning.candidates(tuning.Problem(64, 64, 64, 8), ("x", 1))}
    assert "64x64_4x4_k8du" in narrow
    tight = tuning.Problem(4096, 4096, 4096, 1, max_shared=8192)
    assert all(tight.fits(c) for c in tuning.candidates(tight, ("x", 1)))
    assert ("x", 1) not in tuning.candidates(tight, ("x", 1))
    assert not tight.fits(("128x128_4x4_k8", 1))  # 1024 threads
    assert not fused.fits(("64x64_8x8_k8du", 2))


def test_weight_gradients_time_k_in_pieces_between_powers_of_two() -> None:
    """X^T @ dY over 8192 rows (a transformer's weight gradient, 512 x 1536 outputs):
    K in 3, 5, 6 and 12 pieces too, so that 48 workgroups of 128x128 can come close to
    a whole number of waves; a product filling the GPU is not split."""
    chosen = tuning.candidates(tuning.Problem(512, 1536, 8192, 1, ("m", "n")), ("x", 1))
    assert {2, 3, 4, 5, 6, 8, 12, 16} <= {s for t, s in chosen if t == "128x128_8x8_k16u"}
    square = tuning.candidates(tuning.Problem(2048, 2048, 8192, 1, ("m", "n")), ("x", 1))
    assert all(s == 1 for _, s in square)


def test_batches_of_narrow_products_time_the_batch_tiles() -> None:
    """The attention heads' products (256 of 256 x 64 x 256) time `BATCH_TILES`, a q
    tile as its plain twin where no operand is read along K; a single product does
    not."""

    def timed(m: int, n: int, batch: int, layouts: tuple[str, str]) -> set[str]:
        problem = tuning.Problem(m, n, 256, batch, layouts, max_shared=32768)
        return {t for t, _ in tuning.candidates(problem, ("x", 1))}

    dv = timed(256, 64, 256, ("m", "n"))
    assert {"256x64_16x4_k16su", "256x64_16x8_k8dsu", "256x64_16x8_k16su"} <= dv
    assert not [t for t in dv if tiling.tile(t).quad]
    assert {"256x64_16x4_k16qsu", "256x64_16x8_k8dqsu"} <= timed(256, 64, 256, ("k", "n"))
    dkt = timed(64, 256, 256, ("m", "n"))
    assert "64x256_4x16_k16su" in dkt
    assert "256x64_16x4_k16su" not in dkt  # three quarters of it outside the product
    single = timed(256, 64, 1, ("k", "n"))
    assert not single & set(tuning.BATCH_TILES)


class _Clock:
    """A device on which each candidate's block of products takes ``base[name]``
    seconds, twice that while the GPU is cold: for ``cold[name]`` blocks after that
    candidate's compile (a GPU left idle while a long kernel compiles lowers its
    clocks); a candidate named in ``refused`` fails to compile."""

    capture = None

    def __init__(
        self, base: dict[str, float], cold: dict[str, int], refused: tuple[str, ...] = ()
    ) -> None:
        self.base, self.cold, self.refused = base, cold, refused
        self.cold_blocks = 0
        self.current = ""
        self.timed: list[str] = []  # the candidate of each block, warm-up included

    def run(self, name: str, splits: int) -> Callable[[], object]:
        compiled = False

        def record() -> None:
            nonlocal compiled
            if name in self.refused:
                raise GpuError(f"{name}: refused")
            if not compiled:
                compiled = True
                self.cold_blocks = max(self.cold_blocks, self.cold.get(name, 0))
            self.current = name

        return record

    def synchronize(self) -> None:
        pass

    def gpu_seconds(self, record: Callable[[], object]) -> float:
        record()
        self.timed.append(self.current)
        factor = 2.0 if self.cold_blocks else 1.0
        self.cold_blocks = max(0, self.cold_blocks - 1)
        return self.base[self.current] * factor


def _measure(clock: _Clock, names: list[str]) -> dict[tuning.Choice, float]:
    problem = tuning.Problem(1024, 1024, 1024, 1)
    choices = [(n, 1) for n in names]
    return tuning._measure(cast(Device, clock), problem, choices, clock.run)


def test_timing_does_not_favour_candidates_that_compile_quickly() -> None:
    """The fastest kernel compiles slowly (the GPU idles, its clocks drop): timed right
    after its compile it would look 2x slower than a quickly compiled rival that is
    1.3x slower; every candidate is compiled before the GPU is warmed and any timed."""
    clock = _Clock({"fast": 1e-3, "rival": 1.3e-3}, {"fast": 6})
    seconds = _measure(clock, ["fast", "rival"])
    assert min(seconds, key=seconds.__getitem__) == ("fast", 1)
    reps = int(tuning.TARGET_FLOPS / (2.0 * 1024**3))
    assert reps >= 8  # many products per block: a launch's gap is not what is timed
    assert seconds[("fast", 1)] == pytest.approx(1e-3 / (reps * tuning.FINAL_BLOCK))
    warm = clock.timed.index("rival")
    assert warm >= tuning.WARM_SECONDS / 2e-3  # the GPU kept busy first (<= 2 ms a block)


def test_slow_candidates_leave_the_rounds_and_the_fastest_are_timed_again() -> None:
    clock = _Clock({"a": 1e-3, "b": 1.1e-3, "c": 1.2e-3, "d": 1.3e-3, "slow": 2e-3}, {})
    seconds = _measure(clock, ["a", "b", "c", "d", "slow"])
    rounds = clock.timed[clock.timed.index("b") - 1 :]  # after the warm-up
    assert rounds.count("slow") == 1  # past GIVE_UP after the first round
    assert rounds.count("d") == tuning.ROUNDS  # not among the finalists
    for name in "abc":
        assert rounds.count(name) == tuning.ROUNDS + tuning.FINAL_ROUNDS
    assert set(seconds) == {(n, 1) for n in ("a", "b", "c", "d", "slow")}
    assert min(seconds, key=seconds.__getitem__) == ("a", 1)


def test_the_finalists_are_ranked_by_long_blocks() -> None:
    """A tile that looks fastest in the rounds' short blocks but runs slower steadily
    (in the finalists' long blocks) loses to one that keeps its pace; a candidate left
    out of the finals never overtakes a finalist, however slow the long blocks."""
    reps = int(tuning.TARGET_FLOPS / (2.0 * 1024**3))

    class _Steady(_Clock):
        """Each product takes ``base[name]`` seconds in a block of the rounds' length,
        ``steady[name]`` in a longer one."""

        def __init__(self, base: dict[str, float], steady: dict[str, float]) -> None:
            super().__init__(base, {})
            self.steady, self.calls = steady, 0

        def run(self, name: str, splits: int) -> Callable[[], object]:
            inner = super().run(name, splits)

            def record() -> None:
                self.calls += 1
                inner()

            return record

        def gpu_seconds(self, record: Callable[[], object]) -> float:
            self.calls = 0
            record()
            self.timed.append(self.current)
            per = (self.steady if self.calls > reps else self.base)[self.current]
            return per * self.calls

    short = {"bursty": 1.00e-6, "steady": 1.05e-6, "third": 1.10e-6, "fourth": 1.12e-6}
    steady = {**short, "bursty": 1.30e-6}
    seconds = _measure(_Steady(short, steady), list(short))
    assert min(seconds, key=seconds.__getitem__) == ("steady", 1)
    assert seconds[("bursty", 1)] == pytest.approx(1.30e-6)
    assert seconds[("fourth", 1)] >= seconds[("steady", 1)]


def test_a_candidate_the_adapter_refuses_is_left_out() -> None:
    clock = _Clock({"a": 1e-3, "b": 2e-3}, {}, refused=("a",))
    assert set(_measure(clock, ["a", "b"])) == {("b", 1)}
    assert _measure(_Clock({}, {}, refused=("a",)), ["a"]) == {}


def test_buckets_round_sizes_up_to_powers_of_two_or_one_and_a_half_times_one() -> None:
    key = tuning.Problem(100, 64, 97, 3, ("m", "n"), (True, False)).key
    assert key == tuning.Problem(128, 49, 128, 3, ("m", "n"), (True, False)).key
    assert key != tuning.Problem(129, 49, 128, 3, ("m", "n"), (True, False)).key
    assert key != tuning.Problem(100, 48, 97, 3, ("m", "n"), (True, False)).key
    # a qkv projection's weight gradient is not timed for the feed-forward layer's
    qkv = tuning.Problem(512, 1536, 8192, 1, ("m", "n")).key
    assert qkv == tuning.Problem(512, 1100, 8192, 1, ("m", "n")).key
    assert qkv != tuning.Problem(512, 2048, 8192, 1, ("m", "n")).key
    assert key != tuning.Problem(100, 64, 97, 3, ("k", "n"), (True, False)).key
    assert key != tuning.Problem(100, 64, 97, 3, ("m", "n"), (True, False), False).key


def test_cache_file_round_trip(tmp_path: Path) -> None:
    ident = {"adapter": "a", "driver": "1"}
    path = tmp_path / "sub" / "tiles.json"
    first = tuning.TileCache(path, ident)
    first.entries = {"k1": ("64x64_8x8_k8du", 4), "k2": ("32x32_4x4_k8d", 1)}
    first.save()
    second = tuning.TileCache(path, ident)
    second.load()
    assert second.entries == first.entries


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "",
        "[1, 2]",
        json.dumps({"identity": {"adapter": "other GPU", "driver": "1"}, "entries": {}}),
        json.dumps({"identity": {"adapter": "a", "driver": "1"}, "entries": []}),
    ],
)
def test_corrupted_or_foreign_cache_is_ignored(tmp_path: Path, text: str) -> None:
    path = tmp_path / "tiles.json"
    path.write_text(text)
    cache = tuning.TileCache(path, {"adapter": "a", "driver": "1"})
    cache.load()
    assert cache.entries == {}


def test_a_foreign_cache_is_replaced_by_the_next_measurement(tmp_path: Path) -> None:
    path = tmp_path / "tiles.json"
    foreign = {"adapter": "other GPU", "driver": "1"}
    path.write_text(
        json.dumps({"identity": foreign, "entries": {"k": {"tile": "32", "splits": 1}}})
    )
    cache = tuning.TileCache(path, {"adapter": "a", "driver": "1"})
    cache.load()
    cache.entries["k2"] = ("32x32_4x4_k8d", 1)
    cache.save()
    data = json.loads(path.read_text())
    assert data["identity"] == {"adapter": "a", "driver": "1"}
    assert list(data["entries"]) == ["k2"]


def test_malformed_entries_are_left_out(tmp_path: Path) -> None:
    ident = {"adapter": "a"}
    entries = {
        "good": {"tile": "64x64_8x8_k8du", "splits": 2},
        "bad_tile": {"tile": "64x64_6x6_k8", "splits": 1},
        "bad_splits": {"tile": "64x64_8x8_k8du", "splits": 0},
        "not_a_dict": 3,
    }
    path = tmp_path / "tiles.json"
    path.write_text(json.dumps({"identity": ident, "entries": entries}))
    cache = tuning.TileCache(path, ident)
    cache.load()
    assert cache.entries == {"good": ("64x64_8x8_k8du", 2)}


def test_heuristic_choice_when_tuning_is_off(
    device: Device, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(tuning.ENV, "0")
    a = MatrixView(to_gpu(np.ones((200, 96), np.float32), device))
    b = MatrixView(to_gpu(np.ones((96, 160), np.float32), device))
    before = device.counter.dispatches
    assert choose(a, b) == select(200, 160, 96, 1, device.limits[_SHARED], ("k", "n"))
    assert device.counter.dispatches == before  # nothing timed
    assert not cache_dir.exists()


_SHARED = "max-compute-workgroup-storage-size"


def test_small_products_keep_the_rule_even_when_tuning(
    device: Device, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(tuning.ENV, "1")
    a = MatrixView(to_gpu(np.ones((100, 64), np.float32), device))
    b = MatrixView(to_gpu(np.ones((64, 120), np.float32), device))
    assert tuning.MIN_TUNED > 100 * 64 * 120
    before = device.counter.dispatches
    assert choose(a, b) == select(100, 120, 64, 1, device.limits[_SHARED], ("k", "n"))
    assert device.counter.dispatches == before
    assert not cache_dir.exists()


def test_saving_keeps_the_entries_another_process_wrote(tmp_path: Path) -> None:
    ident = {"adapter": "a"}
    path = tmp_path / "tiles.json"
    mine, theirs = tuning.TileCache(path, ident), tuning.TileCache(path, ident)
    mine.load()
    theirs.load()
    theirs.entries["b1"] = ("64x64_8x8_k8du", 1)
    theirs.save()
    mine.entries["b2"] = ("32x32_4x4_k8d", 2)
    mine.save()
    again = tuning.TileCache(path, ident)
    again.load()
    assert again.entries == {"b1": ("64x64_8x8_k8du", 1), "b2": ("32x32_4x4_k8d", 2)}


def test_tuning_is_off_by_default_on_a_cpu_adapter_only(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(tuning.ENV, raising=False)
    cpu = device.capabilities.adapter_type.lower() == "cpu"
    assert tuning.enabled(device) is not cpu
    monkeypatch.setenv(tuning.ENV, "1")
    assert tuning.enabled(device)
    monkeypatch.setenv(tuning.ENV, "off")
    assert not tuning.enabled(device)


def test_tuned_choice_is_measured_once_and_read_back_from_disk(
    device: Device, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(tuning.ENV, "1")
    monkeypatch.setattr(tuning, "MIN_TUNED", 0)
    rng = np.random.default_rng(13)
    x = rng.standard_normal((48, 40)).astype(np.float32)
    w = rng.standard_normal((40, 24)).astype(np.float32)
    a, b = MatrixView(to_gpu(x, device)), MatrixView(to_gpu(w, device))
    problem_key = tuning.Problem(48, 24, 40, 1, ("k", "n"), (True, True), True,
                                 device.limits[_SHARED], device.max_groups).key  # fmt: skip
    first = choose(a, b)
    files = list(cache_dir.glob("matmul-tiles-*.json"))
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert data["identity"]["adapter"] == device.capabilities.adapter
    entry = data["entries"][problem_key]
    assert (entry["tile"], entry["splits"]) == first
    assert len(entry["us"]) >= 2  # more than one candidate was timed
    # in this process: no second measurement
    before = device.counter.dispatches
    assert choose(a, b) == first
    assert device.counter.dispatches == before
    # the next process reads the file: a choice written there is the one used
    entry.update(tile="32x64_4x4_k8du", splits=1)
    files[0].write_text(json.dumps(data))
    tuning._CACHES.clear()
    assert choose(a, b) == ("32x64_4x4_k8du", 1)
    out = matmul(a, b).numpy()
    np.testing.assert_allclose(out, x @ w, rtol=1e-4, atol=1e-4)


def test_tuning_inside_a_captured_plan_records_only_the_product(
    device: Device, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidates run at once on scratch buffers of the device's own pool; the plan
    gets the one product, which replays to numpy's result."""
    monkeypatch.setenv(tuning.ENV, "1")
    monkeypatch.setattr(tuning, "MIN_TUNED", 0)
    rng = np.random.default_rng(14)
    x = rng.standard_normal((36, 52)).astype(np.float32)
    w = rng.standard_normal((52, 28)).astype(np.float32)
    a, b = MatrixView(to_gpu(x, device)), MatrixView(to_gpu(w, device))
    scope = ScopedPool(device.pool)
    with capturing(device, scope) as capture:
        out = GpuArray.empty((36, 28), np.float32, device)
        matmul_into(a, b, out)
        assert device.current_pool is scope
    assert device.capture is None
    chosen = choose(a, b)
    assert len(capture.commands) == (1 if chosen[1] == 1 else 2)
    assert list(cache_dir.glob("matmul-tiles-*.json"))
    replay(device, capture.commands)
    np.testing.assert_allclose(out.numpy(), x @ w, rtol=1e-4, atol=1e-4)
    scope.close()


def test_a_product_with_too_many_tiles_for_the_grid_takes_wider_tiles(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(tuning.ENV, "0")
    monkeypatch.setattr(device, "max_groups", 3)  # 300 columns: 5 tiles of 64, 3 of 128
    rng = np.random.default_rng(15)
    x = rng.standard_normal((5, 8)).astype(np.float32)
    w = rng.standard_normal((8, 300)).astype(np.float32)
    a, b = MatrixView(to_gpu(x, device)), MatrixView(to_gpu(w, device))
    assert select(5, 300, 8, 1)[0].startswith("32x32")
    tile, splits = choose(a, b)
    assert tile.startswith("128x128")
    assert splits == 1
    np.testing.assert_allclose(matmul(a, b).numpy(), x @ w, rtol=1e-4, atol=1e-4)
