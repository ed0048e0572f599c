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

# shellcheck source=scripts/installer.sh
. scripts/installer.sh

want="$(cat "$CONSTRAINTS" pyproject.toml scripts/ensure-levanter-env.sh | sha256sum | cut -c1-64) $("$VENV/bin/python" --version)"
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$want" ]; then
  echo "installing Levanter 1.1 into $VENV (first run: under a minute)" >&2
  start=$(date +%s)
  uv="$(find_uv "$VENV")"
  install_into "$VENV" "$uv" "" -c "$CONSTRAINTS" "${PACKAGES[@]}" || { echo "installing Levanter failed" >&2; exit 1; }
  # No dependencies: the kit's own (pydantic 2, transformers 5) belong to the main environment;
  # the case-side modules a notebook imports need none of them.
  install_into "$VENV" "$uv" "" --no-deps -e . || { echo "installing the kit into $VENV failed" >&2; exit 1; }
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
