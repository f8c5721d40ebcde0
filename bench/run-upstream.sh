#!/bin/sh
# Runs upstream ggml's test-backend-ops with the dynamic loader, C library and Dawn of a bundle
# (`cargo xtask bundle`), on the machine's NVIDIA Vulkan driver when it has one.
#   sh bench/run-upstream.sh BUNDLE_DIR UPSTREAM ARGS...
# UPSTREAM is a tarball that `cargo xtask upstream` packed (ggml-<rev>-webgpu-test-backend-ops.tar.xz:
# test-backend-ops and its libraries under up/), or a folder holding one; it is unpacked once into
# $UPSTREAM_UNPACKED (default /tmp/ggml-upstream/<its name>). A bundle made after
# `cargo xtask upstream` carries the program itself: run it as BUNDLE_DIR/run-upstream ARGS instead.
bundle=$(cd "$1" && pwd) || exit 2
if [ -f "$2" ]; then
    tarball=$2
else
    tarball=$(ls "$2"/ggml-*-webgpu-test-backend-ops.tar.xz 2>/dev/null | tail -n 1)
    [ -n "$tarball" ] || { echo "no ggml-*-webgpu-test-backend-ops.tar.xz in $2" >&2; exit 2; }
fi
shift 2
dir=${UPSTREAM_UNPACKED:-/tmp/ggml-upstream/$(basename "$tarball" .tar.xz)}
if [ ! -x "$dir/up/test-backend-ops" ]; then
    mkdir -p "$dir" && tar -xJf "$tarball" -C "$dir" || exit 2
fi
driver=/usr/local/nvidia
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$driver/share/vulkan/icd.d/nvidia_icd.json" ]; then
    export VK_DRIVER_FILES="$driver/share/vulkan/icd.d/nvidia_icd.json"
fi
exec "$bundle/ld-linux-x86-64.so.2" --library-path "$dir/up:$bundle:$driver/lib64:$driver/lib" \
    "$dir/up/test-backend-ops" "$@"
