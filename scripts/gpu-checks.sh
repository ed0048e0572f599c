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
# GATE_RUNS, GATE_CASES and JOBS shape it (scripts/gpu-gates.sh, which runs the gates: each into a fresh run
# directory under OUT_DIR). BENCH_ARGS replaces the benchmark's arguments (--model and --json stay).
#
# Exit code: 1 when the notebook stack, the model or a missing golden cannot be made; 0 with GATE=0; otherwise
# the worst (highest) exit code of the gates it ran (0 passed, 1 failed, 2 incomplete, 3 bad input, 128+N
# stopped by signal N), never an earlier run's.
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
# The kernel's spec. nbconvert's HTML templates need no entry: the kit finds them in /tmp/kit-site/share/jupyter
# itself (kit.run.notebook.html_exporter), so a command run later without this variable renders too.
export JUPYTER_PATH=/tmp/kit-kernels/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c "import torch, jax, transformers; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), \
'| jax', jax.__version__, jax.devices()[0].device_kind, '| transformers', transformers.__version__)"

step "model: rebuild from its seed, check the pinned digest"
pinned=$($PY -c "import tomllib; print(tomllib.load(open('$DESCRIPTOR', 'rb'))['model']['digest'])")
fixture=$($PY -c "import tomllib; print('descriptors/' + tomllib.load(open('$DESCRIPTOR', 'rb'))['fixture']['path'])")
# A node kept between calls still has it: its digest (seconds) then spares the rebuild (most of a minute).
built=$([ -d "$MODEL" ] && $PY -m kit.cli digest "$MODEL" 2>/dev/null)
if [ "$built" != "$pinned" ]; then
  $PY scripts/make_gpu_model.py --out "$MODEL" || exit 1
  built=$($PY -m kit.cli digest "$MODEL")
fi
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

# POWER="case ...": `parity-kit power` for each case (what it can detect: the fault catalogue at graded magnitudes
# against its record; POWER_ARGS adds to its arguments, e.g. "--family output --steps-down 0"), in one run directory
# (the cases share the float32 effects of the model's faults), all within POWER_TIMEOUT seconds. The power records
# and the run's samples and effects (power.tgz, which `--resume` continues from) go to OUT_DIR. POWER_RESUME=DIR
# continues an earlier call's (DIR holds the unpacked power.tgz); POWER_DIR names the run directory (default
# OUT_DIR/power; one outside OUT_DIR outlives the call on a node kept between calls, and is not removed).
if [ -n "${POWER:-}" ]; then
  work="${POWER_DIR:-$OUT_DIR/power}"
  mkdir -p "$work"
  if [ -n "${POWER_RESUME:-}" ]; then
    cp "$POWER_RESUME"/*.jsonl "$work/" 2>/dev/null
  fi
  deadline=$((SECONDS + ${POWER_TIMEOUT:-540}))
  for case in $POWER; do
    step "power $case"
    started=$SECONDS
    [ "$started" -lt "$deadline" ] || { echo "no time left for $case"; continue; }
    # shellcheck disable=SC2086
    timeout "$((deadline - started))" $PY -m kit.cli power "$DESCRIPTOR" --case "$case" --float32-case hf-f32 \
      --resume "$work" --to calibrations/power ${POWER_ARGS:-} > "$OUT_DIR/power-$case.out"
    code=$?
    cat "$OUT_DIR/power-$case.out"; echo "power exit code $code, $((SECONDS - started)) s"
    record=$(tail -n 1 "$OUT_DIR/power-$case.out")
    [ -f "$record" ] && cp "$record" "$OUT_DIR/"
  done
  tar czf "$OUT_DIR/power.tgz" -C "$work" $(cd "$work" && ls *.jsonl *.kernel.log 2>/dev/null)
  [ -z "${POWER_DIR:-}" ] && rm -rf "$work"
fi

# BASELINE="case ...": `baseline status`, then `baseline make --again` for each case (its record made again here,
# backtested against the one it supersedes, checked by an evidence gate); the work, the new records and the
# lineage go to OUT_DIR, the checkout's own records stay as they are.
if [ -n "${BASELINE:-}" ]; then
  step "baseline status"
  $PY -m kit.cli baseline status "$DESCRIPTOR" | tee "$OUT_DIR/baseline-status.md"
  for case in $BASELINE; do
    step "baseline make $case"
    started=$SECONDS
    $PY -m kit.cli baseline make "$DESCRIPTOR" --case "$case" --again --out "$OUT_DIR/baseline-$case" \
      --reason "remade from scratch on this GPU node, to compare with the committed record"
    echo "baseline make exit code $?, $((SECONDS - started)) s"
    # One file each: the work folder (samples, notebooks, the evidence gate, evidence.html) and the lineage.
    tar czf "$OUT_DIR/baseline-$case.tgz" -C "$OUT_DIR" "baseline-$case" && rm -rf "$OUT_DIR/baseline-$case"
  done
  tar czf "$OUT_DIR/lineage.tgz" baselines calibrations
  cases=(); for case in $BASELINE; do cases+=(--case "$case"); done
  $PY -m kit.cli baseline log "$DESCRIPTOR" "${cases[@]}" | tee "$OUT_DIR/baseline-log.txt"
fi

# MAKE="args": `baseline make` of the descriptor with those arguments (e.g. `--case hf-bf16 --case jax-bf16 --reason
# "..."`); DEEPEN="args": `baseline deepen` likewise (e.g. `--case jax-bf16 --launches 3 --reason "..."`). Each is
# resumable across calls of a few minutes: its working directory goes to OUT_DIR/baseline-<make|deepen>.tgz, and
# MAKE_RESUME=DIR (a folder holding an earlier call's tgz) continues it (`--resume`: finished samples and staged
# baselines are reused). MAKE_TIMEOUT (default 480) stops it in time to save its state; the records, power records and
# lineage entries it blessed go to OUT_DIR/lineage.tgz.
baseline_step() {  # $1: make or deepen; $2: its arguments
  step "baseline $1 $2"
  local started=$SECONDS work=/tmp/kit-$1/work where
  mkdir -p "/tmp/kit-$1"
  if [ -n "${MAKE_RESUME:-}" ] && [ -d "$work" ]; then
    where=(--resume "$work")  # a node kept between calls still has it
  elif [ -n "${MAKE_RESUME:-}" ] && [ -f "$MAKE_RESUME/baseline-$1.tgz" ]; then
    tar xzf "$MAKE_RESUME/baseline-$1.tgz" -C "/tmp/kit-$1"
    where=(--resume "$work")
  else
    where=(--out "$work")
  fi
  eval "timeout -s INT ${MAKE_TIMEOUT:-480} $PY -m kit.cli baseline $1 $DESCRIPTOR $2 ${where[*]}"
  echo "baseline $1 exit code $?, $((SECONDS - started)) s"
  tar czf "$OUT_DIR/baseline-$1.tgz" -C "/tmp/kit-$1" work
  tar czf "$OUT_DIR/lineage.tgz" baselines calibrations
}
[ -n "${MAKE:-}" ] && baseline_step make "$MAKE"
[ -n "${DEEPEN:-}" ] && baseline_step deepen "$DEEPEN"

if [ "${BENCH:-1}" != 0 ]; then
step "benchmark: scoring speed and memory per bucket"
timeout 300 $PY benchmarks/gpu_scoring.py --model "$MODEL" ${BENCH_ARGS:---kernels cudnn,auto,flash --breakdown} \
  --json "$OUT_DIR/gpu_scoring.json"
fi

[ "${GATE:-1}" = 0 ] && exit 0
# Each gate into a fresh run directory under OUT_DIR; the exit code is the worst of the gates' (see there).
PY=$PY DESCRIPTOR=$DESCRIPTOR "$(dirname "$0")/gpu-gates.sh" "$OUT_DIR"
exit $?
