#!/usr/bin/env bash
# Builds webgpu-dawn-sys with every Dawn hidden and checks that the build fails with the message
# naming the three ways to provide Dawn. Runs inside the sid root as root, in the private mount
# namespace `cargo xtask shell` gives each command, so the hiding mounts vanish with it.
set -euo pipefail
for dir in /usr/include/webgpu /usr/include/dawn; do
    mount -t tmpfs hidden "$dir"
done
log=$(mktemp)
if env -u DAWN_DIR -u DAWN_SOURCE_DIR CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/missing-dawn" \
    cargo build --locked --package webgpu-dawn-sys >"$log" 2>&1; then
    echo "FAIL: webgpu-dawn-sys built although no Dawn was available"
    exit 1
fi
for want in "Build it from source" "Point at an installed Dawn" "Install the system's Dawn"; do
    if ! grep -q "$want" "$log"; then
        cat "$log"
        echo "FAIL: the error message lacks \"$want\""
        exit 1
    fi
done
sed -n '/was not found/,/^Searched/p' "$log" | sed 's/^/    /'
echo "missing-Dawn check: OK"
