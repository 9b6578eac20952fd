# Sourced by the scripts in scripts/: what every build here needs.
#
# The v8 crate links a prebuilt V8 archive its build script downloads; this
# workplace has no route to that host but ships the archive beside the
# checkout, so point the build at it when it is there (elsewhere the
# variable stays unset and the download happens as usual).
root=${root:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
v8_archive="$root/../shared/rusty_v8/librusty_v8_release_x86_64-unknown-linux-gnu.a.gz"
if [ -z "${RUSTY_V8_ARCHIVE:-}" ] && [ -f "$v8_archive" ]; then
  RUSTY_V8_ARCHIVE=$(cd "$(dirname "$v8_archive")" && pwd)/$(basename "$v8_archive")
  export RUSTY_V8_ARCHIVE
fi
