#!/usr/bin/env bash
# A Docker engine and the sandbox image for the docker tests (idempotent; quiet unless it works).
#   source .ci/docker.sh        # exports DOCKER_HOST
#   eval "$(.ci/docker.sh)"     # the same from any shell (prints `export DOCKER_HOST=...`)
# Uses $DOCKER_HOST or the default socket when an engine answers there. Otherwise installs
# Debian's docker.io if needed and starts a private dockerd (root) on a socket under
# ${TMPDIR:-/tmp}/ash-docker: no bridge, no iptables, nothing pulled. Then builds the sandbox
# image offline (`ash sandbox build --offline`) if it is missing.

_ash_docker_host() (
  set -euo pipefail
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  dir="${TMPDIR:-/tmp}/ash-docker"
  private="unix://$dir/docker.sock"
  say() { echo "docker.sh: $*" >&2; }
  answers() { DOCKER_HOST="$1" .venv/bin/python -c 'import docker; docker.from_env(timeout=5).ping()' >/dev/null 2>&1; }
  mkdir -p "$dir"

  host=""
  for candidate in "${DOCKER_HOST:-}" unix:///var/run/docker.sock "$private"; do
    if [ -n "$candidate" ] && answers "$candidate"; then host=$candidate; break; fi
  done

  if [ -z "$host" ]; then
    [ "$(id -u)" = 0 ] || { say "no Docker engine answers, and starting one needs root; set DOCKER_HOST"; exit 1; }
    if ! command -v dockerd >/dev/null 2>&1; then
      say "installing Debian's docker.io ..."
      export DEBIAN_FRONTEND=noninteractive
      { apt-get update -qq && apt-get install -y -qq docker.io; } >"$dir/apt.log" 2>&1 \
        || { say "apt-get install docker.io failed:"; tail -5 "$dir/apt.log" >&2; exit 1; }
    fi
    # overlay2 first; vfs where the filesystem under $dir cannot carry overlays.
    for driver in overlay2 vfs; do
      say "starting dockerd ($driver) on $private ..."
      setsid dockerd --host "$private" --data-root "$dir/data" --exec-root "$dir/exec" \
        --pidfile "$dir/dockerd.pid" --storage-driver "$driver" \
        --iptables=false --ip6tables=false --bridge=none >"$dir/dockerd.log" 2>&1 </dev/null &
      pid=$!
      for _ in $(seq 1 60); do
        if answers "$private"; then host=$private; break 2; fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 1
      done
      if kill -0 "$pid" 2>/dev/null; then break; fi  # alive but silent: do not start a second one
    done
    [ -n "$host" ] || { say "dockerd did not answer within 60 s; $dir/dockerd.log ends:"; tail -5 "$dir/dockerd.log" >&2; exit 1; }
  fi

  has_image() {
    DOCKER_HOST=$host .venv/bin/python -c 'import docker
from lib.config import load_settings
docker.from_env(timeout=10).images.get(load_settings().config.sandbox.image)' >/dev/null 2>&1
  }
  if ! has_image; then
    say "building the sandbox image offline (log: $dir/build.log) ..."
    DOCKER_HOST=$host .venv/bin/ash sandbox build --offline >"$dir/build.log" 2>&1 \
      || { say "image build failed:"; tail -5 "$dir/build.log" >&2; exit 1; }
  fi
  echo "$host"
)

if [ "${BASH_SOURCE[0]}" != "$0" ]; then
  if _ash_host=$(_ash_docker_host); then export DOCKER_HOST=$_ash_host; else return 1; fi
  unset _ash_host
else
  _ash_host=$(_ash_docker_host) || exit 1
  echo "export DOCKER_HOST=$_ash_host"
fi
