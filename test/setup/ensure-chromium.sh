#!/bin/sh
# Run by `npm test` (pretest) before anything else. The dashboard's browser test (test/e2e) drives Debian's
# Chromium at /usr/bin/chromium through playwright-core, which downloads no browser. On a machine without
# it (Debian 12, as the README's `npm ci && npm test` assumes), install Debian's package: as root, or
# through `sudo -n`. Silent when Chromium is there; one line while installing; a clear message and exit 1
# when it cannot be installed, so `npm test` stops before a test fails for a missing browser.
set -eu

CHROMIUM=/usr/bin/chromium
[ -x "$CHROMIUM" ] && exit 0

say() { echo "ensure-chromium: $*" >&2; }

if ! command -v apt-get >/dev/null 2>&1; then
  say "$CHROMIUM is missing, and this is no Debian-like system (no apt-get): install Chromium at $CHROMIUM, the dashboard test needs it"
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  as_root=''
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root='sudo -n'
else
  say "$CHROMIUM is missing and installing it needs root: run 'apt-get install -y chromium' as root (or allow sudo), then npm test again"
  exit 1
fi

say "installing Debian's chromium for the dashboard test (apt-get; once) ..."
log=$(mktemp)
if ! { $as_root apt-get update -qq && $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  say "apt-get could not install chromium (its output is above)"
  exit 1
fi
rm -f "$log"
if [ ! -x "$CHROMIUM" ]; then
  say "apt-get installed chromium, but $CHROMIUM is still missing"
  exit 1
fi
say "chromium installed at $CHROMIUM"
