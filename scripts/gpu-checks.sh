#!/usr/bin/env bash
# The GPU checks, on a GPU node, from the repo root: rebuild the seeded 1B model and check its
# pinned digest, make the float32 goldens where they are missing, run the GPU gate through the
# kit's executor (papermill, one kernel per case), then the scoring benchmark.
#
#   scripts/gpu-checks.sh OUT_DIR [WHEEL_DIR]
#
# OUT_DIR receives the log, the goldens made here, the gate's summary.html, result.json and
# evidence.md, and the benchmark's JSON. WHEEL_DIR (optional) holds wheels of the notebook stack
# for a node whose Python lacks it (papermill, nbclient, ipykernel, scrapbook, nbconvert, pydantic);
# they are installed into a private folder, never into the node's Python. BENCH=0 skips the benchmark.
# DESCRIPTOR picks another GPU descriptor (default descriptors/gpu-h200.toml). CALIBRATE="case ..."
# calibrates those cases first (`parity-kit calibrate`), points the descriptor's cases at the new
# records (scripts/use_calibration.py) and copies records and descriptor into OUT_DIR. GATE=0 skips the gate;
# GATE_RUNS, GATE_CASES and JOBS shape it (below). BENCH_ARGS replaces the benchmark's arguments (--model and --json stay).
set -uo pipefail
OUT_DIR=${1:?usage: scripts/gpu-checks.sh OUT_DIR [WHEEL_DIR]}
WHEELS=${2:-}
PY=${PYTHON:-python3}
DESCRIPTOR=${DESCRIPTOR:-descriptors/gpu-h200.toml}
MODEL=models/llama-1b-seeded
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

if [ -n "$WHEELS" ]; then
  step "notebook stack from $WHEELS"
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/kit-site \
    "$WHEELS"/*.whl || exit 1
  export PYTHONPATH=/tmp/kit-site:$PWD${PYTHONPATH:+:$PYTHONPATH}
  export PATH=/tmp/kit-site/bin:$PATH
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
# The backends register through entry points, which only an installed parity-kit has: without one, a
# private folder names the checkout's (scripts/register_checkout.py).
if ! $PY -c "import importlib.metadata as m; m.distribution('parity-kit')" 2>/dev/null; then
  $PY scripts/register_checkout.py /tmp/kit-dist >/dev/null || exit 1
  export PYTHONPATH=/tmp/kit-dist:$PYTHONPATH
fi
# The kernel runs the node's own Python, with the environment above (kernels inherit it).
$PY -m ipykernel install --prefix /tmp/kit-kernels --name parity-kit --display-name "parity-kit (GPU node)" >/dev/null
# nbconvert finds its HTML templates under share/jupyter of where it was installed.
export JUPYTER_PATH=/tmp/kit-kernels/share/jupyter${WHEELS:+:/tmp/kit-site/share/jupyter}${JUPYTER_PATH:+:$JUPYTER_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c "import torch, jax, transformers; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), \
'| jax', jax.__version__, jax.devices()[0].device_kind, '| transformers', transformers.__version__)"

step "model: rebuild from its seed, check the pinned digest"
pinned=$($PY -c "import tomllib; print(tomllib.load(open('$DESCRIPTOR', 'rb'))['model']['digest'])")
fixture=$($PY -c "import tomllib; print('descriptors/' + tomllib.load(open('$DESCRIPTOR', 'rb'))['fixture']['path'])")
$PY scripts/make_gpu_model.py --out "$MODEL" || exit 1
built=$($PY -m kit.cli digest "$MODEL")
echo "pinned $pinned"; echo "built  $built"
[ "$pinned" = "$built" ] || { echo "MODEL DIGEST MISMATCH"; exit 1; }

step "goldens: hf float32 on the GPU (made only where missing; goldens are never overwritten)"
for kind in semantic; do
  golden=descriptors/$($PY -c "import tomllib; print(tomllib.load(open('$DESCRIPTOR', 'rb'))['goldens']['$kind'])")
  if [ ! -f "$golden" ]; then
    $PY -m kit.cli golden make --model "$MODEL" --fixture "$fixture" --kind "$kind" --dtype float32 \
      --attn-implementation sdpa_repeat_kv --device cuda --top-k 25 --out goldens || exit 1
    cp "$golden" "$OUT_DIR/"
  fi
  $PY -m kit.cli golden verify "$golden" --fixture "$fixture" --model "$MODEL"
done

for case in ${CALIBRATE:-}; do
  step "calibrate $case: its clean variants, one launch each"
  started=$SECONDS
  # Its own compilation cache: a gate after it starts cold, as on a fresh machine.
  PARITY_KIT_COMPILE_CACHE=/tmp/kit-compile-calibrate \
  $PY -m kit.cli calibrate "$DESCRIPTOR" --case "$case" --out "$OUT_DIR/calibrate-$case" --to calibrations \
    > "$OUT_DIR/calibrate-$case.out"
  code=$?
  cat "$OUT_DIR/calibrate-$case.out"; echo "calibrate exit code $code, $((SECONDS - started)) s"
  record=$(tail -n 1 "$OUT_DIR/calibrate-$case.out")
  if [ "$code" = 0 ] && [ -f "$record" ]; then
    mkdir -p "$OUT_DIR/calibrations" && cp "$record" "$OUT_DIR/calibrations/"
    $PY scripts/use_calibration.py "$DESCRIPTOR" "$case" "$record"
  fi
  cp "$DESCRIPTOR" "$OUT_DIR/"
done

if [ "${BENCH:-1}" != 0 ]; then
step "benchmark: scoring speed and memory per bucket"
timeout 300 $PY benchmarks/gpu_scoring.py --model "$MODEL" ${BENCH_ARGS:---kernels cudnn,auto,flash --breakdown} \
  --json "$OUT_DIR/gpu_scoring.json"
fi

[ "${GATE:-1}" = 0 ] && exit 0
# GATE_RUNS=2 runs the gate again with the compilation caches the first run filled (cold, then warm);
# GATE_CASES limits it to those cases; JOBS=auto lets the gate place cases on the GPUs itself
# (resources.num_gpus), the default 1 runs one case at a time.
runs=()
for n in $(seq 1 "${GATE_RUNS:-1}"); do
  label=$([ "$n" = 1 ] && echo cold || echo "warm$((n - 1))")
  step "gate ($label): $DESCRIPTOR through papermill, summary included, jobs ${JOBS:-1}"
  started=$SECONDS
  $PY -m kit.cli gate "$DESCRIPTOR" $([ "${JOBS:-1}" = auto ] || echo "--jobs ${JOBS:-1}") \
    $(for c in ${GATE_CASES:-}; do echo "--case $c"; done) --out "/tmp/gpu-gate-$label"
  echo "gate ($label) exit code $?, $((SECONDS - started)) s wall"
  runs+=("/tmp/gpu-gate-$label")
  cp "/tmp/gpu-gate-$label/result.json" "$OUT_DIR/result-$label.json" 2>/dev/null
done
[ "${#runs[@]}" -gt 1 ] && $PY benchmarks/gate_timeline.py "${runs[@]}" --markdown
last=${runs[-1]}
for f in summary.html result.json evidence.md; do cp "$last/$f" "$OUT_DIR/" 2>/dev/null; done
$PY - "$last" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1] + "/result.json"))
print("gate verdict:", r["verdict"])
gpus = lambda c: ",".join(str(d["index"]) for d in c.get("devices") or []) or "none of its own"
for c in r["cases"].values():
    errs = [p["max_probability_error"] for p in c.get("prompts", [])]
    print(f"{c['case']:<18} {c['status']:<8} bound {c.get('bucket_bounds') or c.get('bound')}  largest error "
          f"{max(errs) if errs else float('nan'):.3g}  scoring {c.get('scoring_s') or 0:.1f} s  "
          f"duration {c.get('duration_s') or 0:.1f} s  GPUs {gpus(c)}  "
          f"tensor_parallel {(c.get('release') or {}).get('tensor_parallel', 1)}  {c.get('error') or ''}")
    if c.get("drift"):
        print(f"    drift: passed {c['drift'].get('passed')}  p {c['drift'].get('p_value')}  "
              f"{'; '.join(c['drift'].get('failures') or [])}")
    for p in (c.get("prompts", []) if c["status"] != "passed" else []):  # 64 lines a case: only where it failed
        print(f"    {p['id']:<16} {p['n_tokens']:>6} tokens  error {p['max_probability_error']:.3g}  "
              f"golden top-1 {p['golden_top_probability']:.3f}  backend top-1 {p['backend_top_probability']:.3f}")
durations = [c.get("duration_s") or 0 for c in r["cases"].values()]
if durations:  # side by side on several GPUs, the gate's wall comes near its slowest case instead of the sum
    print(f"gate wall {r.get('duration_s') or 0:.1f} s; slowest case {max(durations):.1f} s; "
          f"cases summed {sum(durations):.1f} s")
EOF
# A run with the single-GPU and the sharded jax case (descriptors/gpu-h200-x2.toml): how far the split moves it.
if $PY -c "import json, sys; sys.exit(not {'jax-bf16', 'jax-bf16-tp2'} <= set(json.load(open('$last/result.json'))['cases']))" \
  2>/dev/null; then
  step "agreement: jax-bf16-tp2 (model split over two GPUs) against jax-bf16 (one GPU)"
  $PY benchmarks/tp_agreement.py "$last" --json "$OUT_DIR/tp_agreement.json"
fi
