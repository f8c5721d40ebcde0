#!/bin/sh
# Runs upstream ggml's test-backend-ops with the dynamic loader, C library and Dawn of a bundle
# (`cargo xtask bundle`), on the machine's NVIDIA Vulkan driver when it has one.
#   sh bench/run-upstream.sh BUNDLE_DIR UPSTREAM_DIR ARGS...
# UPSTREAM_DIR holds ggml-d99724f-webgpu-test-backend-ops.tar.xz (test-backend-ops and its ggml
# libraries under up/); it is unpacked once into $UPSTREAM_UNPACKED (default /tmp/ggml-upstream).
bundle=$(cd "$1" && pwd) || exit 2
tarball=$2/ggml-d99724f-webgpu-test-backend-ops.tar.xz
shift 2
dir=${UPSTREAM_UNPACKED:-/tmp/ggml-upstream}
if [ ! -x "$dir/up/test-backend-ops" ]; then
    mkdir -p "$dir" && tar -xJf "$tarball" -C "$dir" || exit 2
fi
driver=/usr/local/nvidia
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$driver/share/vulkan/icd.d/nvidia_icd.json" ]; then
    export VK_DRIVER_FILES="$driver/share/vulkan/icd.d/nvidia_icd.json"
fi
exec "$bundle/ld-linux-x86-64.so.2" --library-path "$dir/up:$bundle:$driver/lib64:$driver/lib" \
    "$dir/up/test-backend-ops" "$@"
