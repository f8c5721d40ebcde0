//! End-to-end tests of the workspace live in `tests/`; their data in `data/`. This library holds
//! what several of them share.

use ggml_dawn::tuning::Overrides;

/// `DAWN_COMPUTE_FULL_TESTS=1` runs the broad selections; by default (CI) a representative
/// subset, since each new shader variant costs lavapipe seconds to compile.
pub fn full() -> bool {
    std::env::var_os("DAWN_COMPUTE_FULL_TESTS").is_some_and(|v| v == "1")
}

/// Knobs under which a CPU adapter (lavapipe) plans as GPUs do where the planners' CPU defaults
/// differ: MUL_MAT's subgroup-matrix K step of 32 (8 on CPU adapters) and the mma kernel at
/// every head size (up to 128 on CPU adapters).
pub fn gpu_planning() -> Overrides {
    Overrides::parse("sg_tk=32", "mma_max_head=65536").expect("valid knobs")
}
