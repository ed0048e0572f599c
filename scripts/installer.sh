# Sourced by scripts/ensure-env.sh and scripts/ensure-levanter-env.sh: how an environment's packages are installed.
#
# uv when there is one (on PATH, or bootstrapped from the package index into the environment with its own pip):
# from a clean clone it set up both environments in a fifth of pip's time on 2 cores, every package at the same
# version (docs/figures.md, Set-up). It is handed pip's own sources (scripts/uv_install.py), so that it installs
# exactly what pip would. pip where uv cannot be had or fails, and where PARITY_KIT_INSTALLER=pip asks for it.

# The uv release the bootstrap installs: the one the set-up was measured with.
UV_RELEASE="uv==0.13.9"

# Print the uv to install into the environment $1 with: the caller's, the environment's own, one on PATH, or one
# bootstrapped into the environment with its pip;
# print nothing where pip is to install.
find_uv() {
  [ "${PARITY_KIT_INSTALLER:-}" = pip ] && return 0
  if [ -n "${PARITY_KIT_UV:-}" ]; then echo "$PARITY_KIT_UV"; return 0; fi
  if [ -x "$1/bin/uv" ]; then echo "$1/bin/uv"; return 0; fi
  if command -v uv >/dev/null 2>&1; then command -v uv; return 0; fi
  if "$1/bin/python" -m pip install --quiet --disable-pip-version-check "$UV_RELEASE" >/dev/null 2>&1 \
      && [ -x "$1/bin/uv" ]; then
    echo "$1/bin/uv"
  else
    echo "could not install $UV_RELEASE; installing with pip" >&2
  fi
}

quiet_pip() {
  # pip warns once per package about index folders it cannot read; those lines are noise.
  "$PIP_PYTHON" -m pip --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
  return "${PIPESTATUS[0]}"
}

# install_into VENV UV SKIP [pip install arguments...]: install into VENV with UV (pip where UV is empty).
# SKIP names packages the environment's dependencies bring but that must not be installed: uv never fetches
# them (an override no platform matches); pip installs them and they are uninstalled after.
# --no-compile for pip: byte-compiling every module of torch, vllm, ray and jax up front is CPU time the install need
# not spend; the modules a run imports compile on first import instead. uv does not byte-compile unless asked.
install_into() {
  local venv="$1" uv="$2" skip="$3"
  shift 3
  PIP_PYTHON="$venv/bin/python"
  if [ -n "$uv" ]; then
    local overrides
    overrides="$(mktemp)"
    local name
    for name in $skip; do echo "$name; sys_platform == 'never'" >>"$overrides"; done
    if "$PIP_PYTHON" scripts/uv_install.py "$uv" "$PIP_PYTHON" --quiet --overrides "$overrides" "$@"; then
      rm -f "$overrides"
      return 0
    fi
    rm -f "$overrides"
    echo "uv failed; installing with pip" >&2
  fi
  quiet_pip install --quiet --no-compile "$@" || return 1
  if [ -n "$skip" ]; then
    # shellcheck disable=SC2086  # one argument per name
    quiet_pip uninstall --quiet -y $skip | { grep -v "not installed" || true; }
  fi
}
