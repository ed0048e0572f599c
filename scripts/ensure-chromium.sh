#!/usr/bin/env bash
# The browser test renders summary.html in a real headless Chromium (Debian's package).
# Idempotent: does nothing when chromium is on PATH.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium is not installed and this script can only install it as root with apt-get;" \
       "install Debian's 'chromium' package, then run the tests again" >&2
  exit 1
fi
echo "installing chromium for the browser test (first run only)" >&2
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends chromium >/dev/null
echo "installed $(chromium --version) in $(( $(date +%s) - start )) s" >&2
