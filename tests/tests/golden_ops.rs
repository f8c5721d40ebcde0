//! ggml's own MUL_MAT and FLASH_ATTN_EXT results (tests/data/golden): every file matches by
//! upstream's NMSE, with subgroup matrices and without.

use std::path::PathBuf;

use ggml_dawn::{ContextOptions, GpuContext};
use ggml_dawn_bench::golden::{self, Verdict};

fn check_all(op_dir: &str, options: ContextOptions) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("data/golden")
        .join(op_dir);
    let files = golden::collect(&[dir]).unwrap();
    assert!(files.len() >= 12, "golden files missing in {op_dir}");
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
