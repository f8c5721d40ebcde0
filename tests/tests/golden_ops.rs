//! ggml's own MUL_MAT and FLASH_ATTN_EXT results (tests/data/golden): every file matches by
//! upstream's NMSE, with subgroup matrices and without.

use std::path::PathBuf;

use dawn_compute_tests::{full, gpu_planning};
use ggml_dawn::{ContextOptions, GpuContext};
use ggml_dawn_bench::golden::{self, Verdict};

/// Every file with the adapter's subgroup matrices; without them, every other file unless
/// `DAWN_COMPUTE_FULL_TESTS=1` (each file's kernels cost lavapipe seconds to compile).
fn check_all(op_dir: &str, options: ContextOptions) {
    check_files(op_dir, options, false);
}

fn check_files(op_dir: &str, options: ContextOptions, every: bool) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("data/golden")
        .join(op_dir);
    let files = golden::collect(&[dir]).unwrap();
    assert!(files.len() >= 12, "golden files missing in {op_dir}");
    let step = if options.no_subgroup_matrix && !full() && !every {
        2
    } else {
        1
    };
    let files: Vec<_> = files.into_iter().step_by(step).collect();
    let ctx = GpuContext::new(options).unwrap();
    for file in &files {
        let outcome = golden::check_file(&ctx, file);
        assert!(
            matches!(outcome.verdict, Verdict::Pass(_)),
            "{}: {:?}",
            outcome.case,
            outcome.verdict
        );
    }
}

#[test]
fn mul_mat_files_match() {
    check_all("mul_mat", ContextOptions::default());
}

#[test]
fn mul_mat_files_match_without_subgroup_matrices() {
    check_all(
        "mul_mat",
        ContextOptions {
            no_subgroup_matrix: true,
            ..Default::default()
        },
    );
}

#[test]
fn flash_attn_files_match() {
    check_all("flash_attn_ext", ContextOptions::default());
}

#[test]
fn flash_attn_files_match_without_subgroup_matrices() {
    check_all(
        "flash_attn_ext",
        ContextOptions {
            no_subgroup_matrix: true,
            ..Default::default()
        },
    );
}

/// With `DAWN_COMPUTE_FULL_TESTS=1`, every file of both ops planned as on GPUs (the subgroup-
/// matrix K step of 32, the mma kernel at every head size).
#[test]
fn files_match_planned_as_on_gpus() {
    if !full() {
        return;
    }
    for op_dir in ["mul_mat", "flash_attn_ext"] {
        let options = ContextOptions {
            tuning: gpu_planning(),
            ..Default::default()
        };
        check_files(op_dir, options, true);
    }
}
