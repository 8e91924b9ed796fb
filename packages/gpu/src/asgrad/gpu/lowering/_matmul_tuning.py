"""The matmul tile per device, measured once and cached on disk.

`select` in `asgrad.gpu.lowering.linalg` is a rule written from one GPU's
measurements. With tuning on, the first product of each *bucket* (M, N and K rounded
up to powers of two or 1.5 times one, the batch likewise, the operands' layouts and
vec4 alignment, whether an epilogue forbids split-K, the workgroup memory allowed, a
matmul or a convolution's gathered product) times the `candidates` (tiles of 32x32 to
128x256 outputs, 4x4 to 16x8 per thread, and split-K for deep products with few
outputs: K in up to as many pieces as bring the workgroups to twice `FILL_GROUPS`, the
pieces summed by a second pass) on the device, with timestamp queries where the adapter
has them (wall time after a sync otherwise), and keeps the fastest: in memory
and in a JSON file under `cache_dir`, one per adapter (its name, vendor, backend and
driver description, the wgpu version and the kernel's text), so the next process
measures nothing. A file that cannot be read, or that another adapter or kernel
wrote, is ignored (and rewritten at the next measurement).

The switch, ``ASGRAD_MATMUL_TUNING`` (read at each choice): ``0``/``off`` uses the
rule (`select`) only, ``1``/``on`` tunes on any adapter, unset (or ``auto``) tunes
except on a CPU adapter (lavapipe, where the rule is kept: tests stay deterministic).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
import tempfile
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asgrad.gpu.device import Device
from asgrad.gpu.device.source import kernel_text
from asgrad.gpu.errors import GpuError
from asgrad.gpu.lowering import _matmul_tiles as tiles

__all__ = [
    "BATCH_TILES",
    "ENV",
    "Choice",
    "Problem",
    "TileCache",
    "block_seconds",
    "cache_dir",
    "candidates",
    "choose",
    "enabled",
    "identity",
    "split_counts",
]

ENV = "ASGRAD_MATMUL_TUNING"

# Bumped when the meaning of a cached entry changes (the bucket, the candidates).
FORMAT = 3

Choice = tuple[str, int]  # (tile name, K pieces)

# Tiles timed for every bucket (where they fit the device and the product): large ones
# for products that fill the GPU (K steps of 16 double-buffered where the device grants
# 32 KiB of workgroup memory), narrower ones and fewer outputs per thread for small and
# batched products (attention heads).
TILES: tuple[str, ...] = (
    "128x128_8x8_k8du",
    "128x128_8x8_k16du",
    "128x128_8x8_k16u",
    # 8x16 outputs per thread, one buffer: the fastest on an H200 at 4096^3 (44.1 and
    # 43.7 TFLOP/s against 40.2 for 128x128_8x8_k8du, benchmarks/matmul_sweep.py)
    "128x256_8x16_k8u",
    "128x128_8x16_k8u",
    "128x128_8x8_k8du_w8",
    "128x64_8x8_k8du",
    "128x64_8x8_k16du",
    "64x128_8x8_k8du",
    "128x64_8x4_k8du",
    "64x128_4x8_k8du",
    "64x64_8x8_k8du",
    # 128 or 256 threads on 64x64: the fastest at 1024^3 (29.0 TFLOP/s for k16dpu
    # against 25.4 for 128x64_8x8_k16du)
    "64x64_8x4_k16dpu",
    "64x64_8x4_k32u",
    # the attention heads' p @ v (256 x (256 x 64 x 256)) on an H200: 81.3 us for
    # 256x64_16x8_k16qsu (256 rows over the whole 64-wide N, C stored as vec4) and 85.4
    # for 64x64_8x8_k8 against 91.6 for the best tile before them (64x64_4x4_k8du);
    # 64x64_8x8_k8 second on p^T @ dO and q^T @ dS too (benchmarks/matmul_sweep.py
    # --shapes default --candidates all, 2026-12-02)
    "256x64_16x8_k16qsu",
    "64x64_8x8_k8",
    "64x64_4x4_k16du",
    "64x64_4x4_k8du",
    "64x32_4x4_k8du",
    "32x64_4x4_k8du",
    "32x32_4x4_k8d",
)
# Tiles timed where B is read along K (a linear layer's x @ W^T) in a matmul: B copied
# first into a contiguous K x N array (a transposing copy of a weight is a few us),
# then the tiles that win for operands as stored: on an H200 those ran 8192 x 2048 x
# 512 in 409 us against 455 for the best tile reading B along K
# (benchmarks/matmul_sweep.py --shapes default --candidates all, 2026-12-02; the copy
# not included: these candidates are timed with it).
COPY_TILES: tuple[str, ...] = ("128x256_8x16_k8cu", "128x128_8x16_k8cu")
# Tiles timed for a batch of products (the attention heads: 256 x 64 or 64 x 256
# outputs each, K 256), each the fastest for one of them on an H200 (GPU time of 256
# products; benchmarks/matmul_sweep.py --shapes 256x64x256:mn:b256,64x256x256:mn:b256,
# 256x64x256:kn:b256 with tile names, 2026-12-02): p^T @ dO ("m n") 68.2 us for
# 256x64_16x4_k16qsu (256 threads of 16x4 outputs; 72.4 for 256x64_16x8_k16qsu), q^T @ dS
# (64 x 256, "m n") 68.5 for 64x256_4x16_k16qsu (85.1 for the tile tuned before,
# 64x64_8x4_k16dpu), p @ v ("k n") 77.4 for 256x64_16x8_k8dqsu (81.1); cuBLAS 56-62. C
# is stored as vec4 (``s``), an operand read along K staged as 4x4 blocks (``q``; where
# neither is, the tile without it).
BATCH_TILES: tuple[str, ...] = (
    "256x64_16x4_k16qsu",
    "256x64_16x8_k8dqsu",
    "64x256_4x16_k16qsu",
    # the two winners' parameters together (not yet timed on the H200)
    "256x64_16x4_k8dqsu",
)
# Tiles timed with K cut in pieces, for deep products with few output tiles (16x16,
# 16 threads: outputs smaller than 32x32, such as a first convolution's weight gradient).
# (8x16 outputs per thread, the fastest unsplit tiles at 4096^3, lost split on an
# H200: X^T @ dY of 512 x 2048 x 8192, "m n", 445 us in 4 pieces for 128x128_8x16_k16u,
# 478-535 for the k8u 8x16 tiles, against 430 for 128x128_8x8_k16u; 2026-12-02.)
SPLIT_TILES: tuple[str, ...] = (
    "128x128_8x8_k16du",
    "128x128_8x8_k16u",
    # K steps of 32 (32 KiB of workgroup memory): K steps of 16 beat 8 on X^T @ dY (A
    # read along M), 32 not yet timed on the H200
    "128x128_8x8_k32u",
    "64x64_8x8_k8du",
    "32x32_4x4_k8d",
    "16x16_4x4_k16d",
)
# K pieces timed for every split tile; more (powers of two) while the workgroups stay
# within twice FILL_GROUPS (`split_counts`).
# Counts between the powers of two let a tile of few workgroups come close to a whole
# number of waves of the GPU: X^T @ dY of 512 x 1536 x 8192 on an H200 ran in 353 us
# in 5 pieces of 128x128_8x8_k16u (240 workgroups), 430 in 4 (192), 356 in 16.
SPLITS: tuple[int, ...] = (2, 3, 4, 5, 6, 8, 12, 16)
# Workgroups that keep a large GPU busy: a few per compute unit of a 132-unit H200
# (WebGPU does not report a device's compute units; the tuner measures the split
# counts around this).
FILL_GROUPS = 256
# A piece of K is at least this long.
MIN_PIECE = 64
# Split-K is timed where a tile gives fewer workgroups than this.
SPLIT_BELOW_GROUPS = 256
# Split tiles timed at least, however little of them lies inside the product (a
# 16x9 output: 16x16 tiles of 16 threads and 32x32 ones of 64, both mostly outside).
SPLIT_AT_LEAST = 2
# The least fraction of a tile's outputs inside the product for it to be timed.
MIN_USE = 0.5
# Where the tile FILLING (8x8 outputs per thread) fits the product and gives at least
# MANY_GROUPS workgroups, the GPU is full with 8x8 per thread, so the tiles of fewer
# outputs per thread (more workgroup-memory reads per multiply-add) are not timed: each
# would cost a compile and could not win.
FILLING = "64x64_8x8_k8du"
MANY_GROUPS = 1024
# Invocations per workgroup asgrad requests (WebGPU's default): no tile is larger.
MAX_THREADS = 256
# Products of fewer multiply-adds keep the rule's tile: their time is the launch's,
# whichever tile runs them, and measuring them would only delay a program's first step.
MIN_TUNED = 1 << 21
# Floating-point operations per timed block of products recorded back to back in one
# compute pass (at least one product, at most MAX_REPS), so a block takes some 0.5 ms of
# a large GPU and the launches overlap the products instead of being timed.
TARGET_FLOPS = 2e10
MAX_REPS = 64
ROUNDS = 3
# After a round, a candidate this much slower than the fastest is not timed again (its
# later rounds could not make it the fastest).
GIVE_UP = 1.5
# The fastest candidates after the rounds are timed again in FINAL_ROUNDS more rounds,
# in blocks of FINAL_BLOCK times as many products (a few ms of a large GPU): short
# blocks after an idle wait can rank tiles otherwise than the GPU running steadily
# does. On an H200, 8192 x 512 x 512 (A along K) took 107 us with 128x128_8x16_k8u
# and 110 with 128x256_8x16_k8u in the tuner's blocks of 4 products, 124 and 112 in
# blocks of 46 (benchmarks/matmul_sweep.py --shapes default, 2026-12-02).
FINALISTS = 3
FINAL_ROUNDS = 3
FINAL_BLOCK = 8
# GPU seconds of products run before the timing starts (its clocks up after the
# compiles), in at most MAX_WARM_BLOCKS blocks.
WARM_SECONDS = 0.1
MAX_WARM_BLOCKS = 200


@dataclass(frozen=True)
class Problem:
    """One product as launched (batch folded into M where it could be): sizes, the axis
    each operand is contiguous along (A "k"/"m", B "n"/"k"), whether each is read as
    vec4, whether K may be split (not under an epilogue), the workgroup memory and grid
    the device allows, and how the operands are read (``kind``)."""

    M: int
    N: int
    K: int
    nbatch: int
    layouts: tuple[str, str] = ("k", "n")
    vec: tuple[bool, bool] = (False, False)
    splittable: bool = True
    max_shared: int = 16384
    max_groups: int = 65535
    kind: str = "matmul"  # or a convolution's gathers (`asgrad.gpu.lowering.linalg.Gather`)
    elem: str = "f32"  # the operands' storage type (f16: half the bytes per load)

    @property
    def key(self) -> str:
        """The bucket: sizes rounded up to powers of two or 1.5 times one (a
        1536-wide output is not a 2048-wide one: on an H200 their weight gradients
        split K best into different numbers of pieces), and everything else."""

        def up(v: int) -> int:
            power = 1 << max(0, math.ceil(math.log2(max(v, 1))))
            return power * 3 // 4 if power >= 4 and v <= power * 3 // 4 else power

        return (
            f"{self.kind}_m{up(self.M)}_n{up(self.N)}_k{up(self.K)}_b{up(self.nbatch)}"
            f"_{''.join(self.layouts)}_v{int(self.vec[0])}{int(self.vec[1])}"
            f"_s{int(self.splittable)}_w{self.max_shared}"
            + ("" if self.elem == "f32" else f"_{self.elem}")
        )

    def fits(self, choice: Choice) -> bool:
        """Whether ``choice`` can run this product: a valid tile within the workgroup
        memory and `MAX_THREADS`, a grid within the limits, K split only where allowed
        (a cache file edited by hand may name anything)."""
        name, splits = choice
        try:
            t = tiles.tile(name)
        except GpuError:
            return False
        grid = (-(-self.N // t.bn), -(-self.M // t.bm), self.nbatch * splits)
        return (
            t.shared <= self.max_shared
            and t.threads <= MAX_THREADS
            and max(grid) <= self.max_groups
            and splits >= 1
            and (splits == 1 or self.splittable)
        )

    def use(self, name: str) -> float:
        """The fraction of the tile's outputs that lie inside the product."""
        t = tiles.tile(name)
        gm, gn = -(-self.M // t.bm), -(-self.N // t.bn)
        return self.M * self.N / (gm * t.bm * gn * t.bn)

    def groups(self, name: str) -> int:
        t = tiles.tile(name)
        return -(-self.M // t.bm) * -(-self.N // t.bn) * self.nbatch


def split_counts(problem: Problem, name: str) -> list[int]:
    """The numbers of K pieces timed for tile ``name``: `SPLITS`, then powers of two
    while the workgroups stay within twice `FILL_GROUPS`, each piece at least
    `MIN_PIECE` long."""
    groups = max(1, problem.groups(name))
    counts = list(SPLITS)
    s = 2 * max(SPLITS)
    while groups * s <= 2 * FILL_GROUPS:
        counts.append(s)
        s *= 2
    return [s for s in counts if problem.K // s >= MIN_PIECE]


def candidates(problem: Problem, default: Choice) -> list[Choice]:
    """What `choose` times for ``problem``: ``default`` (the rule's choice) first, then
    each of `TILES` whose outputs lie mostly inside the product, then, where K is deep
    and may be split, `SPLIT_TILES` giving few workgroups (over the whole batch) with K
    in `split_counts` pieces: those whose outputs lie mostly inside the product or,
    where fewer than `SPLIT_AT_LEAST` do (an output smaller than most tiles), also the
    `SPLIT_AT_LEAST` wasting least. Tiles
    of fewer than 8x8 outputs per thread are left out where `FILLING` gives
    `MANY_GROUPS` workgroups; tiles staging operands read along K as 4x4 blocks
    (``q``) are timed as their plain twin where neither operand is read along K; for a
    batch of products, `BATCH_TILES` too; where B is read along K (not gathered),
    `COPY_TILES` too (B copied along N first)."""
    out: list[Choice] = [default] if problem.fits(default) else []
    full = problem.groups(FILLING) >= MANY_GROUPS and problem.use(FILLING) >= MIN_USE
    for name in TILES:
        t = tiles.tile(name)
        if full and t.tm * t.tn < 64:
            continue
        if problem.use(name) >= MIN_USE or name == TILES[-1]:
            out.append((name, 1))
    if problem.nbatch > 1:
        out += [(name, 1) for name in BATCH_TILES if problem.use(name) >= MIN_USE]
    if problem.layouts[1] == "k" and problem.kind == "matmul":
        out += [(name, 1) for name in COPY_TILES if problem.use(name) >= MIN_USE]
    if problem.splittable:
        few = [n for n in SPLIT_TILES if problem.groups(n) < SPLIT_BELOW_GROUPS]
        inside = [n for n in few if problem.use(n) >= MIN_USE]
        least = sorted(few, key=problem.use, reverse=True)[:SPLIT_AT_LEAST]
        for name in inside if len(inside) >= SPLIT_AT_LEAST else [*inside, *least]:
            out += [(name, s) for s in split_counts(problem, name)]
    seen: set[Choice] = set()
    unique = []
    for choice in out:
        t = tiles.tile(choice[0])
        if choice != default and "k" not in problem.layouts and t.quad:
            # both operands staged as read: the kernel of its plain twin
            choice = (dataclasses.replace(t, quad=False).name, choice[1])
        if choice not in seen and problem.fits(choice):
            seen.add(choice)
            unique.append(choice)
    return unique


def enabled(device: Device) -> bool:
    """Whether products are tuned on ``device`` (``ASGRAD_MATMUL_TUNING``, see above)."""
    value = os.environ.get(ENV, "auto").strip().lower()
    if value in ("0", "off", "false", "no"):
        return False
    if value in ("1", "on", "true", "yes"):
        return True
    return device.capabilities.adapter_type.lower() != "cpu"


def cache_dir() -> Path:
    """Where the tile choices are kept: ``gpu`` under asgrad's cache folder
    (``ASGRAD_CACHE_DIR``, else ``$XDG_CACHE_HOME/asgrad`` or ``~/.cache/asgrad``: the
    root that the CPU path's compiled kernels use too)."""
    root = os.environ.get("ASGRAD_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "asgrad"
    )
    return Path(root) / "gpu"


def identity(device: Device) -> dict[str, str]:
    """What a cache file must have been written for: the adapter, its driver, the wgpu
    version, the kernel and the shader runtime checks it is compiled with (a changed
    kernel times differently)."""
    caps = device.capabilities
    wgpu_version = str(getattr(sys.modules.get("wgpu"), "__version__", ""))
    sample = tiles.source(tiles.tile(TILES[0]), "k", "n", True, True)  # the generator's output
    names = "".join((*TILES, *SPLIT_TILES, *COPY_TILES, *BATCH_TILES))
    kernel = kernel_text("linalg_matmul_tiled") + sample + names
    return {
        "format": str(FORMAT),
        "adapter": caps.adapter,
        "vendor": caps.vendor,
        "backend": caps.backend,
        "adapter_type": caps.adapter_type,
        "driver": caps.description,
        "wgpu": wgpu_version,
        "kernel": hashlib.sha256(kernel.encode()).hexdigest()[:16],
        "checks": device.pipelines.checks,
    }


class TileCache:
    """The tuned choices of one adapter: a dict of bucket -> `Choice`, read from and
    written to ``path`` (JSON holding the `identity` and the entries, each with the
    candidates' times in microseconds)."""

    def __init__(self, path: Path, ident: dict[str, str]) -> None:
        self.path = path
        self.identity = ident
        self.entries: dict[str, Choice] = {}
        self.timings: dict[str, dict[str, float]] = {}
        self.tuning_seconds: dict[str, float] = {}

    @classmethod
    def for_device(cls, device: Device) -> TileCache:
        """The cache file of ``device``'s adapter under `cache_dir`, loaded."""
        ident = identity(device)
        digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
        cache = cls(cache_dir() / f"matmul-tiles-{digest}.json", ident)
        cache.load()
        return cache

    def load(self) -> None:
        """Read the file; anything unreadable, foreign or malformed is left out."""
        try:
            data: Any = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        if not isinstance(data, dict) or data.get("identity") != self.identity:
            return
        entries = data.get("entries")
        if not isinstance(entries, dict):
            return
        for key, value in entries.items():
            if not (isinstance(value, dict) and isinstance(key, str)):
                continue
            name, splits = value.get("tile"), value.get("splits")
            if not (isinstance(name, str) and isinstance(splits, int) and splits >= 1):
                continue
            try:
                tiles.tile(name)
            except GpuError:
                continue
            self.entries[key] = (name, splits)

    def save(self) -> None:
        """Write the entries, with those another process of the same adapter wrote
        meanwhile (atomically; a folder that cannot be written is skipped: the choices
        then last for this process only)."""
        ours = dict(self.entries)
        self.load()
        self.entries.update(ours)
        data = {
            "identity": self.identity,
            "entries": {
                key: {
                    "tile": name,
                    "splits": splits,
                    "us": self.timings.get(key, {}),
                    "tuning_s": self.tuning_seconds.get(key),
                }
                for key, (name, splits) in sorted(self.entries.items())
            },
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh, indent=1)
            os.replace(tmp, self.path)
        except OSError:
            return


_CACHES: weakref.WeakKeyDictionary[Device, TileCache] = weakref.WeakKeyDictionary()


def device_cache(device: Device) -> TileCache:
    """``device``'s `TileCache`, loaded from disk once per process."""
    cache = _CACHES.get(device)
    if cache is None or cache.path.parent != cache_dir():
        cache = _CACHES[device] = TileCache.for_device(device)
    return cache


def choose(
    device: Device,
    problem: Problem,
    default: Choice,
    run: Callable[[str, int], Callable[[], object]],
) -> Choice:
    """The tile and K pieces for ``problem``: ``default`` when tuning is off or the
    product is small (under `MIN_TUNED` multiply-adds), else the cached choice of its
    bucket, else the fastest of `candidates`, timed through ``run(tile, splits)`` (a
    function recording one product, measured by `_measure`) and cached."""
    size = problem.M * problem.N * problem.K * problem.nbatch
    if size < MIN_TUNED or not enabled(device):
        return default
    cache = device_cache(device)
    key = problem.key
    hit = cache.entries.get(key)
    if hit is not None and problem.fits(hit):
        return hit
    start = time.perf_counter()
    measured = _measure(device, problem, candidates(problem, default), run)
    best = min(measured, key=measured.__getitem__) if measured else default
    times = {f"{name}/{splits}": round(sec * 1e6, 2) for (name, splits), sec in measured.items()}
    cache.entries[key] = best
    cache.timings[key] = times
    cache.tuning_seconds[key] = round(time.perf_counter() - start, 3)
    cache.save()
    return best


def block_seconds(device: Device, record: Callable[[], object], reps: int) -> float:
    """GPU seconds of ``reps`` calls of ``record`` recorded back to back (timestamps), or
    the wall time of their one submission where the adapter has no timestamps."""
    seconds = device.gpu_seconds(lambda: [record() for _ in range(reps)])
    if seconds is None:
        start = time.perf_counter()
        for _ in range(reps):
            record()
        device.synchronize()
        seconds = time.perf_counter() - start
    return seconds


def _measure(
    device: Device,
    problem: Problem,
    choices: list[Choice],
    run: Callable[[str, int], Callable[[], object]],
) -> dict[Choice, float]:
    """Seconds per product of each of ``choices`` on ``device`` (those the adapter
    refuses left out), outside any plan being captured.

    Every candidate is compiled and run once before any is timed, and the GPU is then
    kept busy with the first for `WARM_SECONDS` (a GPU left idle while kernels compile
    lowers its clocks: a candidate timed right after its own compile would run on a
    cold GPU, by how much depending on how long it compiled). Then `ROUNDS` rounds
    time one block of products of each candidate in turn (after the first round only
    those within `GIVE_UP` of the fastest), and the `FINALISTS` fastest are timed in
    `FINAL_ROUNDS` more, in alternating order, in blocks of `FINAL_BLOCK` times as many
    products; a candidate's time is its least block (a block is only ever slowed down:
    by clocks, other work, the host), a finalist's that of the long blocks, the
    others' their rounds' scaled by the least ratio of a finalist's two times (so
    the fastest is a finalist)."""
    flops = 2.0 * problem.M * problem.N * problem.K * problem.nbatch
    reps = max(1, min(MAX_REPS, int(TARGET_FLOPS / max(flops, 1.0))))
    capture, device.capture = device.capture, None
    try:
        records: dict[Choice, Callable[[], object]] = {}
        for choice in choices:
            try:
                record = run(*choice)
                record()  # compile, warm
                device.synchronize()
            except GpuError:
                continue  # a kernel this adapter refuses is no candidate
            records[choice] = record
        if not records:
            return {}
        busy, blocks = 0.0, 0
        first = next(iter(records.values()))
        while busy < WARM_SECONDS and blocks < MAX_WARM_BLOCKS:
            busy += block_seconds(device, first, reps)
            blocks += 1
        best = dict.fromkeys(records, math.inf)
        alive = list(records)
        for _ in range(ROUNDS):
            for choice in alive:
                seconds = block_seconds(device, records[choice], reps) / reps
                best[choice] = min(best[choice], seconds)
            fastest = min(best.values())
            alive = [c for c in alive if best[c] <= GIVE_UP * fastest]
        finalists = sorted(alive, key=best.__getitem__)[:FINALISTS]
        final = dict.fromkeys(finalists, math.inf)
        long = reps * FINAL_BLOCK
        for k in range(FINAL_ROUNDS):
            for choice in finalists[:: -1 if k % 2 == 0 else 1]:
                seconds = block_seconds(device, records[choice], long) / long
                final[choice] = min(final[choice], seconds)
        # the others' times in the measure of the long blocks, by the least ratio of a
        # finalist's two times: no candidate slower in the rounds than a finalist
        # overtakes it
        scale = min(final[c] / best[c] for c in finalists)
        return {c: final.get(c, t * scale) for c, t in best.items()}
    finally:
        device.capture = capture
