#!/usr/bin/env bash
# The gate runs of scripts/gpu-checks.sh, from the repo root, with the environment it set up:
#
#   scripts/gpu-gates.sh OUT_DIR
#
# Every gate writes a run directory of its own under a fresh OUT_DIR/gates-<UTC time>-XXXXXX/ (a gate
# refuses a run directory that exists: a fixed path made a second run on one machine report the first
# run's result as its own). The last gate's summary.html, result.json and evidence.md, and each gate's
# result as result-<label>.json, are copied into OUT_DIR; copies an earlier run left there are removed
# first, so OUT_DIR never shows an earlier run's result as this one's.
#
# GATE_RUNS=2 runs the gate again with the compilation caches the first run filled (cold, then warm);
# GATE_FRESH=1 gives every gate empty caches of its own instead (XLA's programs and autotuning, inductor,
# Triton), so each gate compiles and autotunes afresh as on a fresh node: the clean gates that measure a
# false-failure rate must be fresh draws of the launch noise, and a cached program is not;
# GATE_CASES limits it to those cases; JOBS=auto lets the gate place cases on the GPUs itself
# (resources.num_gpus), the default 1 runs one case at a time. PY (default python3) and DESCRIPTOR
# (default descriptors/gpu-h200.toml) as in scripts/gpu-checks.sh.
#
# Exit code: the worst (highest) exit code of the gates it ran, each as `parity-kit gate` gives it
# (0 passed, 1 failed, 2 incomplete, 3 bad input, 128+N stopped by signal N); a gate that said 0 but
# left no result.json counts as 2.
set -uo pipefail
OUT_DIR=${1:?usage: scripts/gpu-gates.sh OUT_DIR}
PY=${PY:-${PYTHON:-python3}}
DESCRIPTOR=${DESCRIPTOR:-descriptors/gpu-h200.toml}
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

mkdir -p "$OUT_DIR" || exit 3
GATES=$(mktemp -d "$OUT_DIR/gates-$(date -u +%Y%m%dT%H%M%SZ)-XXXXXX") || exit 3
for f in summary.html result.json evidence.md result-*.json tp_agreement.json; do
  rm -f "$OUT_DIR"/$f
done

worst=0
runs=()
for n in $(seq 1 "${GATE_RUNS:-1}"); do
  label=$([ "$n" = 1 ] && echo cold || echo "warm$((n - 1))")
  caches=()
  if [ "${GATE_FRESH:-0}" = 1 ]; then
    label="fresh$n"
    fresh="$GATES/caches-$n"
    caches=(env PARITY_KIT_COMPILE_CACHE="$fresh/kit" TORCHINDUCTOR_CACHE_DIR="$fresh/inductor"
            TRITON_CACHE_DIR="$fresh/triton")
  fi
  run="$GATES/$label"
  step "gate ($label): $DESCRIPTOR through papermill, summary included, jobs ${JOBS:-1}, into $run"
  started=$SECONDS
  "${caches[@]}" $PY -m kit.cli gate "$DESCRIPTOR" $([ "${JOBS:-1}" = auto ] || echo "--jobs ${JOBS:-1}") \
    $(for c in ${GATE_CASES:-}; do echo "--case $c"; done) --out "$run"
  code=$?
  echo "gate ($label) exit code $code, $((SECONDS - started)) s wall"
  if [ -f "$run/result.json" ]; then
    cp "$run/result.json" "$OUT_DIR/result-$label.json"
  else
    echo "gate ($label) wrote no result.json"
    [ "$code" = 0 ] && code=2
  fi
  [ "$code" -gt "$worst" ] && worst=$code
  [ "${GATE_FRESH:-0}" = 1 ] && rm -rf "$fresh"  # gigabytes of programs no later gate may use
  runs+=("$run")
done
[ "${#runs[@]}" -gt 1 ] && $PY benchmarks/gate_timeline.py "${runs[@]}" --markdown
last=${runs[-1]}
[ -f "$last/result.json" ] || exit "$worst"
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
exit "$worst"
