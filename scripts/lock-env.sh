#!/usr/bin/env bash
# Rewrite env/constraints.txt from the main environment as it is now installed (after a change to
# pyproject.toml: `make env` with the old lock, add what is new, then this).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
{
  echo "# The reference environment, locked: \`make env\` installs the kit with these exact versions, so goldens'"
  echo "# numerics do not drift between two installs. Regenerate with scripts/lock-env.sh after changing pyproject.toml."
  # The local version label of the CPU torch wheel is dropped: `==2.13.0` matches it and stays portable.
  "$VENV/bin/python" -m pip freeze --exclude-editable --disable-pip-version-check \
    | grep -v -e '^parity-kit' -e '^-e ' -e ' @ ' | sed -E 's/^(torch==[0-9.]+)\+cpu$/\1/'
} > env/constraints.txt
echo "wrote env/constraints.txt ($(grep -vc '^#' env/constraints.txt) pins)"
