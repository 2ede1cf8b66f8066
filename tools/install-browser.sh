#!/usr/bin/env bash
# install-browser: the headless browser the inspector tests drive (tests/dev/test_inspector_browser.py):
# Debian's chromium and its matching chromedriver. Idempotent: nothing is installed when both are
# already there. The Python side (selenium) comes with the dev extra: pip install -e ".[dev]".
#
# Output (stdout, one line): the chromium binary's path. Exit code 0 on success, 2 on failure.
set -uo pipefail

die() { echo "install-browser: $*" >&2; exit 2; }

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || die "chromium and chromedriver are missing and there is no apt-get; install them"
  echo "install-browser: apt-get install chromium chromium-driver" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >&2 ||
    die "apt-get install chromium chromium-driver failed"
fi
browser="$(command -v chromium)"
driver_major="$(chromedriver --version | awk '{print $2}' | cut -d. -f1)"
browser_major="$("$browser" --version 2>/dev/null | grep -o '[0-9]\+\.' | head -1 | tr -d .)"
[ "$driver_major" = "$browser_major" ] || die "chromedriver $driver_major does not match chromium $browser_major"
echo "$browser"
