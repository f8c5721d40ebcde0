//! The default plans of a broad grid of problems on the preset devices, as text: a refactoring
//! of the planner that must keep every default plan writes it before and after and compares
//! (`MUL_MAT_PLAN_GRID=<file> cargo test -p ggml-dawn --lib plan_grid -- --ignored`).

use std::fmt::Write as _;

use super::plan::{BPrologue, DstEpilogue, Problem, plan};
use crate::facts::presets;
use crate::ggml_type::GgmlType;
use crate::tuning::Tuning;

/// One line per (device, problem): the problem and its default plan.
pub fn plan_grid() -> String {
    let devices = [
        ("h100", presets::h100()),
        ("h200", presets::h200()),
        ("lavapipe", presets::lavapipe()),
        ("no-subgroup-matrix", presets::without_subgroup_matrix(presets::h100())),
        ("apple", presets::apple()),
    ];
    let mut out = String::new();
    for (name, d) in devices {
        let t = Tuning::for_device(&d).mul_mat;
        for &a_type in GgmlType::ALL {
            for b_type in [GgmlType::F32, GgmlType::F16] {
                for n in [1u64, 2, 3, 4, 5, 8, 9, 64, 512] {
                    for (m, k) in [(4096u64, 14336u64), (300, 512), (64, 2048), (100, 100)] {
                        for (a_align, b_align, b_contiguous) in [(16, 16, true), (4, 4, true), (2, 4, false)] {
                            let p = Problem {
                                a_type,
                                b_type,
                                m,
                                n,
                                k,
                                batches: 1,
                                a_batches: 1,
                                a_align,
                                b_align,
                                b_contiguous,
                                dst_bytes: m * n * 4,
                                b_prologue: BPrologue::None,
                                dst_epilogue: DstEpilogue::None,
                            };
                            let _ = writeln!(
                                out,
                                "{name} {a_type:?}x{b_type:?} m={m} n={n} k={k} align={a_align}/{b_align}/{b_contiguous}: {}",
                                plan(&p, &d, &t)
                            );
                        }
                    }
                }
            }
        }
    }
    out
}

#[test]
#[ignore = "writes the grid for a before/after comparison"]
fn write_plan_grid() {
    let path = std::env::var("MUL_MAT_PLAN_GRID").expect("MUL_MAT_PLAN_GRID=<file>");
    std::fs::write(path, plan_grid()).unwrap();
}
