#!/usr/bin/env bash
# Debian tools some tests use, installed when missing (idempotent; needs root to install):
#   espeak-ng  speaks the voice note that the offline transcription test sends (tests/senses/).
#   chromium   the headless browser the web view's test drives through Playwright (tests/web/).
set -euo pipefail
cd "$(dirname "$0")/.."
needed=()
command -v espeak-ng >/dev/null 2>&1 || needed+=(espeak-ng)
command -v chromium >/dev/null 2>&1 || needed+=(chromium)
[ ${#needed[@]} -eq 0 ] && exit 0
[ "$(id -u)" = 0 ] || { echo "debian.sh: missing ${needed[*]}; install them (apt-get install ${needed[*]})" >&2; exit 1; }
echo "debian.sh: installing ${needed[*]} ..." >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
{ apt-get update -qq && apt-get install -y -qq --no-install-recommends "${needed[@]}"; } >"$log" 2>&1 \
  || { echo "debian.sh: apt-get install ${needed[*]} failed:" >&2; tail -5 "$log" >&2; exit 1; }
