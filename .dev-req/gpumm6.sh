#!/bin/bash
# gpumm6: matmul tiles for transformer_large's products on the H200 (at most 3 minutes:
# each step's timeout is cut to what is left of 175 s).
# Runs from the repo root; $B is the benchmarks folder.
set -u
export ASGRAD_CACHE_DIR="$(mktemp -d /tmp/gpumm6-cache.XXXXXX)"
T0=$SECONDS
left() { local l=$((175 - (SECONDS - T0))); [ "$l" -lt 1 ] && l=1; [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
date -u
echo "== 1: transformer_large products, the new tuner's candidates (fresh cache)"
start=$SECONDS
timeout "$(left 110)" python3 "$B/matmul_sweep.py" --shapes default --quiet --total 45
echo "== 1 took $((SECONDS - start)) s"
echo "== tuner cache: per bucket the choice, tuning seconds and the 12 fastest (us)"
python3 - <<'PY'
import glob, json, os
for path in glob.glob(os.path.join(os.environ["ASGRAD_CACHE_DIR"], "gpu", "matmul-tiles-*.json")):
    for key, e in sorted(json.load(open(path))["entries"].items()):
        us = sorted(e.get("us", {}).items(), key=lambda kv: kv[1])[:12]
        print(f"{key}: {e['tile']}/{e['splits']} tuning {e.get('tuning_s')} s, n={len(e.get('us', {}))}")
        print("   " + ", ".join(f"{k} {v:.1f}" for k, v in us))
PY
echo "== 2: weight gradients (mn), more 8x16 tiles in 3-8 pieces"
start=$SECONDS
C=""
for t in 128x256_8x16_k8su 128x256_8x16_k16u 128x128_8x16_k8su 128x256_8x16_k8du 256x128_16x8_k8u; do
  for s in 3 4 6 8; do C="$C,$t/$s"; done
done
timeout "$(left 25)" python3 "$B/matmul_sweep.py" --shapes 512x1536x8192:mn,512x2048x8192:mn,512x512x8192:mn \
  --candidates "${C#,}" --quiet --budget 3
echo "== 2 took $((SECONDS - start)) s"
echo "== 3: attention heads (dv, dk^T, p @ v), more tiles"
start=$SECONDS
A="256x64_16x8_k8dqsu,256x64_16x8_k16qsu_w4,256x64_16x4_k16qsu,256x64_16x8_k16qu"
A="$A,128x64_8x8_k16dqsu,128x64_8x8_k32qsu,128x64_16x4_k32qsu"
A="$A,64x256_8x16_k8dqsu,64x256_8x16_k8qsu,64x256_4x16_k8qsu,64x128_8x8_k32qsu"
timeout "$(left 25)" python3 "$B/matmul_sweep.py" --shapes 256x64x256:mn:b256,64x256x256:mn:b256,256x64x256:kn:b256 \
  --candidates "$A" --quiet --budget 3
echo "== 3 took $((SECONDS - start)) s"
if [ "$(left 30)" -ge 20 ]; then
  echo "== 4: transformer_large step profile (same cache: tuned buckets reused)"
  start=$SECONDS
  timeout "$(left 60)" python3 "$B/gpu_micro.py" --profile transformer_large --top 30
  echo "== 4 took $((SECONDS - start)) s"
else
  echo "== 4 skipped (no time left)"
fi
date -u
