#!/usr/bin/env bash
# Create (or reuse) .venv-levanter/: Levanter 1.1 and its JAX, whose pins conflict with the main
# environment's (pydantic 1, numpy 1.26, transformers 4.35), plus the kit itself and a Jupyter
# kernel registered in the main environment so that its papermill finds it.
# Idempotent: a second run only compares a stamp and reads one kernel.json.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
MAIN="${VENV:-.venv}"
VENV="${LEVANTER_VENV:-.venv-levanter}"
KERNEL=parity-kit-levanter
CONSTRAINTS=env/levanter-constraints.txt
STAMP="$VENV/.parity-kit-installed"
# ipykernel and scrapbook let a case notebook run and glue its scraps in this kernel.
PACKAGES=(levanter==1.1 jax==0.4.20 jaxlib==0.4.20 ipykernel scrapbook==0.5.0 six)

if [ ! -x "$VENV/bin/python" ]; then
  echo "creating $VENV with $("$PYTHON" --version)" >&2
  "$PYTHON" -m venv "$VENV"
fi

quiet_pip() {
  # pip warns once per package about index folders it cannot read; those lines are noise.
  "$VENV/bin/python" -m pip --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
  return "${PIPESTATUS[0]}"
}

want="$(cat "$CONSTRAINTS" pyproject.toml scripts/ensure-levanter-env.sh | sha256sum | cut -c1-64) $("$VENV/bin/python" --version)"
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$want" ]; then
  echo "installing Levanter 1.1 into $VENV (first run: one to three minutes)" >&2
  start=$(date +%s)
  # --no-compile: byte-compiling every module of ray, jax and pyarrow up front cost a third of the
  # install's CPU time; the few modules a case imports compile on first import instead.
  quiet_pip install --quiet --no-compile -c "$CONSTRAINTS" "${PACKAGES[@]}" || { echo "pip install failed" >&2; exit 1; }
  # No dependencies: the kit's own (pydantic 2, transformers 5) belong to the main environment;
  # the case-side modules a notebook imports need none of them.
  quiet_pip install --quiet --no-deps -e . || { echo "pip install of the kit failed" >&2; exit 1; }
  echo "$want" > "$STAMP"
  echo "installed in $(( $(date +%s) - start )) s" >&2
fi

# Registered in the main environment's prefix, where its jupyter looks; the spec holds the
# interpreter's absolute path, so re-register when the folder moved.
# The kernel also names the main environment's interpreter (PARITY_KIT_MAIN_PYTHON): a notebook run by
# hand in this kernel asks it to resolve its case, since pydantic 1 here cannot parse a descriptor.
spec="$MAIN/share/jupyter/kernels/$KERNEL/kernel.json"
main_python="$(cd "$MAIN" && pwd)/bin/python"
if [ ! -f "$spec" ] || ! grep -qF "\"$(cd "$VENV" && pwd)/bin/python\"" "$spec" || ! grep -qF "\"$main_python\"" "$spec"; then
  # ipykernel warns that the main prefix is not on this interpreter's own kernel path: that is the point.
  out="$("$VENV/bin/python" -m ipykernel install --prefix "$MAIN" --name "$KERNEL" \
    --display-name "parity-kit (levanter 1.1)" --env PARITY_KIT_MAIN_PYTHON "$main_python" 2>&1)" \
    || { echo "$out" >&2; exit 1; }
  echo "registered kernel $KERNEL" >&2
fi
