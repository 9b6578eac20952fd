# Sourced by scripts/test: installs what the tests need beyond the README's
# prerequisites, from Debian's packages, when it can (root with apt-get), or
# says exactly what to run when it cannot.
#   zstd, python3-venv: scripts/fetch-python-wasm builds the python snapshot with them
#   chromium:           the playground's browser test (CHROMIUM=path uses another one)
need_packages() {
  local missing=()
  command -v zstd >/dev/null 2>&1 || missing+=(zstd)
  python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
  if [ -z "${CHROMIUM:-}" ] && ! [ -x /usr/bin/chromium ]; then missing+=(chromium); fi
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "scripts/test: installing ${missing[*]} (Debian packages)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "scripts/test needs ${missing[*]}: run" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    echo "(or set CHROMIUM=/path/to/chromium for the browser test)" >&2
    return 1
  fi
}
need_packages
command -v npm >/dev/null 2>&1 || {
  echo "scripts/test needs Node.js 20.19+ with npm on PATH (the UI's tests)" >&2
  exit 1
}
