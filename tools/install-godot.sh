#!/usr/bin/env bash
# Install headless Godot 3 (Debian's godot3-server, pinned to the 3.2.3 series the Godot example's
# bridge script is written for) when it is missing; print the path of the binary. Fast and
# silent when it is already installed.
set -euo pipefail
PACKAGE="godot3-server"
VERSION_PREFIX="3.2.3"
if ! command -v "$PACKAGE" >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
  VERSION="$(apt-cache madison "$PACKAGE" 2>/dev/null | awk -v p="$VERSION_PREFIX" '$3 ~ "^"p {print $3; exit}')"
  if [ -z "$VERSION" ]; then
    $SUDO apt-get update -q >&2
    VERSION="$(apt-cache madison "$PACKAGE" | awk -v p="$VERSION_PREFIX" '$3 ~ "^"p {print $3; exit}')"
  fi
  if [ -z "$VERSION" ]; then
    echo "no $PACKAGE $VERSION_PREFIX package in the apt sources" >&2
    exit 1
  fi
  $SUDO apt-get install -y -q "$PACKAGE=$VERSION" >&2
fi
command -v "$PACKAGE"
