#!/usr/bin/env bash
# Renders an HTML report to PNG in headless Chromium (Debian's `chromium`) and fails if the page
# logged anything to the console (script errors, failed resource loads).
#   scripts/render-report.sh REPORT.html OUT.png [WIDTHxHEIGHT]
# Exit: 0 rendered cleanly, 1 console messages or no PNG, 2 usage, 77 chromium not installed (CTest skip).
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 REPORT.html OUT.png [WIDTHxHEIGHT]" >&2
  exit 2
fi
html=$(realpath "$1")
png=$2
size=${3:-1400x2000}
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$browser" ]]; then
  echo "render-report: chromium not found (apt-get install -y chromium); skipping" >&2
  exit 77
fi
profile=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$profile" "$log"' EXIT
rm -f "$png"
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --enable-logging=stderr --v=0 \
  --screenshot="$png" --window-size="${size/x/,}" "file://$html" >"$log" 2>&1 || {
  echo "render-report: chromium failed:" >&2
  cat "$log" >&2
  exit 1
}
if grep -E ':CONSOLE|Uncaught' "$log" >&2; then
  echo "render-report: the page logged console messages (above)" >&2
  exit 1
fi
if [[ ! -s "$png" ]]; then
  echo "render-report: no PNG was written" >&2
  cat "$log" >&2
  exit 1
fi
echo "rendered $png"
