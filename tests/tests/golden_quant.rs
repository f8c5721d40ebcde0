//! ggml's quantization results (tests/data/golden/quant): bit-exact dequantization on the CPU
//! and on the GPU, byte-exact quantization on the CPU.

use std::path::PathBuf;

use ggml_dawn::golden::{self, Verdict};
use ggml_dawn::{ContextOptions, GpuContext};

#[test]
fn every_quant_file_matches_bit_for_bit() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/golden/quant");
    let files = golden::collect(&[dir]).unwrap();
    assert!(files.len() >= 20, "golden files missing: {files:?}");
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let mut gpu_checked = 0;
    for file in &files {
        let outcome = golden::check_file(&ctx, file);
        eprintln!("{}: {:?}", outcome.case, outcome.verdict);
        match &outcome.verdict {
            Verdict::Pass(detail) => gpu_checked += usize::from(detail.contains("GPU dequantization bit-exact")),
            other => panic!("{}: {other:?}", file.display()),
        }
    }
    // The legacy and K-quant formats, f16 and bf16 at least.
    assert!(gpu_checked >= 12, "only {gpu_checked} types checked on the GPU");
}
