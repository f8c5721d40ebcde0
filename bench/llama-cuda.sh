#!/usr/bin/env bash
# Builds llama.cpp's CUDA backend on the GPU machine: llama-bench, llama-perplexity and
# test-backend-ops, from the source tarball that `cargo xtask upstream --llama DIR
# --source-tarball` packs (and `cargo xtask bundle` carries as gpu-bundle/llama-<rev>-source.tar.xz).
#
# Usage (on the GPU machine, from the repository root):
#   bash bench/llama-cuda.sh [--cpu-only] [SOURCE_TARBALL]
# SOURCE_TARBALL: default the one bundle carries (gpu-bundle/llama-*-source.tar.xz).
# --cpu-only: no CUDA (no nvcc needed), to check on any machine that the tarball configures and
#   builds; the build folder is then build-cpu instead of build-cuda.
# Environment: LLAMA_CUDA_DIR (where the source is unpacked and built, default /tmp/llama-cuda;
#   kept, so a second run with the same tarball only rebuilds what changed, and a run cut short
#   by a time limit goes on where it stopped), JOBS (default: all
#   cores), CUDA_ARCHS (default 90, the H100's and H200's), TARGETS (default the three above).
# The programs are left in $LLAMA_CUDA_DIR/build-cuda/bin (they find their libraries there); the
# build's log (build.log) and a list of what was built (built.txt: path, size) are kept in
# $LLAMA_CUDA_DIR and copied under $OUT/llama-cuda when OUT is set.
set -euo pipefail

cuda=ON
if [ "${1:-}" = "--cpu-only" ]; then
    cuda=OFF
    shift
fi
if [ $# -gt 1 ]; then
    echo "usage: $0 [--cpu-only] [SOURCE_TARBALL]" >&2
    exit 2
fi
if [ $# -eq 1 ]; then
    tarball=$1
else
    shopt -s nullglob
    found=(gpu-bundle/llama-*-source.tar.xz)
    shopt -u nullglob
    if [ ${#found[@]} -ne 1 ]; then
        echo "error: pass the source tarball: found ${#found[@]} gpu-bundle/llama-*-source.tar.xz" \
            "(\`cargo xtask upstream --llama DIR --source-tarball\`, then \`cargo xtask bundle\`)" >&2
        exit 2
    fi
    tarball=${found[0]}
fi
if [ ! -f "$tarball" ]; then
    echo "error: no such source tarball: $tarball" >&2
    exit 2
fi

work=${LLAMA_CUDA_DIR:-/tmp/llama-cuda}
jobs=${JOBS:-$(nproc)}
archs=${CUDA_ARCHS:-90}
read -r -a targets <<< "${TARGETS:-llama-bench llama-perplexity test-backend-ops}"
build=$work/build-cpu
if [ "$cuda" = ON ]; then
    build=$work/build-cuda
fi

missing=()
for tool in cmake ninja tar xz; do
    command -v "$tool" > /dev/null || missing+=("$tool")
done
if [ "$cuda" = ON ] && ! command -v nvcc > /dev/null; then
    # The CUDA toolkit's usual place, when it is not on PATH.
    if [ -x /usr/local/cuda/bin/nvcc ]; then
        export PATH=/usr/local/cuda/bin:$PATH
    else
        missing+=(nvcc)
    fi
fi
if [ ${#missing[@]} -ne 0 ]; then
    echo "error: not on this machine: ${missing[*]}" >&2
    exit 1
fi

echo "llama-cuda: source $tarball ($(du -h "$tarball" | cut -f1))"
if [ "$cuda" = ON ]; then
    echo "llama-cuda: $(nvcc --version | tail -n 1)"
    echo "llama-cuda: building ${targets[*]} with CUDA (architectures $archs) and the CPU backend, $jobs jobs, in $build"
else
    echo "llama-cuda: building ${targets[*]} with the CPU backend only (--cpu-only), $jobs jobs, in $build"
fi

mkdir -p "$work"
log=$work/build.log
: > "$log"
# The log and the list of what was built come back under $OUT, whatever happens.
keep() {
    if [ -n "${OUT:-}" ]; then
        mkdir -p "$OUT/llama-cuda"
        cp "$log" "$OUT/llama-cuda/build.log"
        if [ -f "$work/built.txt" ]; then cp "$work/built.txt" "$OUT/llama-cuda/built.txt"; fi
    fi
}
trap keep EXIT
trap 'exit 143' TERM INT

# Unpacked afresh when the tarball differs from the one unpacked last (its build folder too:
# Ninja judges by times, which another source does not order).
stamp="$(sha256sum < "$tarball" | cut -d' ' -f1)"
if [ "$(cat "$work/unpacked" 2> /dev/null || true)" != "$stamp" ]; then
    rm -rf "$work/llama.cpp" "$work/build-cuda" "$work/build-cpu" "$work/unpacked" "$work/built.txt"
    tar -xJf "$tarball" -C "$work"
    echo "$stamp" > "$work/unpacked"
fi
if [ ! -f "$work/llama.cpp/CMakeLists.txt" ]; then
    echo "error: $tarball holds no llama.cpp/CMakeLists.txt" >&2
    exit 1
fi

configure=(
    cmake -S "$work/llama.cpp" -B "$build" -G Ninja
    -DCMAKE_BUILD_TYPE=Release
    -DBUILD_SHARED_LIBS=ON
    -DGGML_CUDA="$cuda"
    -DGGML_NATIVE=OFF
    -DGGML_CCACHE=OFF
    -DLLAMA_OPENSSL=OFF
    -DLLAMA_BUILD_SERVER=OFF
    -DLLAMA_BUILD_TESTS=ON
    -DLLAMA_BUILD_TOOLS=ON
    -DLLAMA_BUILD_EXAMPLES=OFF
    -DLLAMA_BUILD_APP=OFF
)
if [ "$cuda" = ON ]; then
    configure+=(-DCMAKE_CUDA_ARCHITECTURES="$archs")
fi
echo "llama-cuda: ${configure[*]}"
started=$(date +%s)
set +e
"${configure[@]}" >> "$log" 2>&1
status=$?
set -e
if [ $status -ne 0 ]; then
    echo "error: CMake could not configure llama.cpp (log: $log):" >&2
    grep -E -A5 'CMake Error' "$log" | head -n 40 >&2 || tail -n 30 "$log" >&2
    exit 1
fi
set +e
cmake --build "$build" --parallel "$jobs" --target "${targets[@]}" 2>&1 | tee -a "$log" |
    grep --line-buffered -E '^\[[0-9]+/[0-9]+\] Linking'
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
    echo "error: the build failed (log: $log):" >&2
    grep -E -B2 -A12 'FAILED:' "$log" | head -n 60 >&2 || tail -n 30 "$log" >&2
    exit 1
fi

built=()
for target in "${targets[@]}"; do
    built+=("$build/bin/$target")
done
if [ "$cuda" = ON ]; then
    for lib in "$build"/bin/libggml-cuda.so*; do
        built+=("$lib")
        break
    done
fi
{
    for file in "${built[@]}"; do
        if [ ! -f "$file" ]; then
            echo "error: the build made no $file" >&2
            exit 1
        fi
        echo "$file $(stat -L --format %s "$file")"
    done
} > "$work/built.txt"
echo "llama-cuda: built in $(($(date +%s) - started)) s:"
cat "$work/built.txt"
