# shellcheck shell=bash
# Sourced by scripts/build-base-image and scripts/container-smoke: make podman usable on this
# kind of machine (Debian, root, no systemd, no registry), installing it when it is missing.
#
#   pm ARGS...          podman with the settings this machine needs
#   ensure_tools CMD... install podman/runc/debootstrap from Debian when a command is missing;
#                       returns 77 (with a reason on stderr) when that cannot be done

deploy_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$deploy_dir/containers.conf}
LOOPING_RUNTIME=${LOOPING_RUNTIME:-/usr/sbin/runc}

pm() {
  # cgroupfs: there is no systemd to manage cgroups; runc: crun is not installed with podman here.
  podman --cgroup-manager=cgroupfs --runtime "$LOOPING_RUNTIME" "$@"
}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

_missing() {
  local cmd
  for cmd in "$@"; do
    case $cmd in
      runc) [ -x "$LOOPING_RUNTIME" ] || echo runc ;;
      debootstrap) command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] \
        || echo debootstrap ;;
      *) command -v "$cmd" >/dev/null 2>&1 || echo "$cmd" ;;
    esac
  done
}

ensure_tools() {
  local missing
  local -a pkgs
  missing=$(_missing "$@" | tr '\n' ' ')
  [ -z "${missing// /}" ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "SKIP: missing ${missing}and cannot install it (needs root and apt-get)"
    return 77
  fi
  read -r -a pkgs <<<"$missing"
  log "installing ${missing}from Debian"
  if ! { apt-get update -q >/dev/null \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${pkgs[@]}" >/dev/null; }; then
    log "SKIP: apt-get could not install ${missing}"
    return 77
  fi
  missing=$(_missing "$@" | tr '\n' ' ')
  if [ -n "${missing// /}" ]; then
    log "SKIP: still missing ${missing}after apt-get install"
    return 77
  fi
}
