//! The plans of a broad grid of problems on the preset devices, as text: a refactoring of the
//! planner that must keep every plan writes it before and after and compares
//! (`FLASH_ATTN_PLAN_GRID=<file> cargo test -p ggml-dawn --lib flash_attn::plan_grid -- --ignored`).

use std::fmt::Write as _;

use super::plan::{Placement, Problem, plan_placed};
use crate::facts::presets;
use crate::ggml_type::GgmlType;
use crate::tuning::Tuning;

/// One line per (device, overrides, problem): the problem and its plan. The overrides: none,
/// then each kernel forced.
pub fn plan_grid() -> String {
    let devices = [
        ("h100", presets::h100()),
        ("h200", presets::h200()),
        ("lavapipe", presets::lavapipe()),
        ("no-subgroup-matrix", presets::without_subgroup_matrix(presets::h100())),
        ("apple", presets::apple()),
    ];
    let overrides = ["", "kernel=tile", "kernel=vec", "kernel=mma", "kernel=simple"];
    let heads = [
        (40, 40),
        (64, 64),
        (72, 72),
        (80, 80),
        (96, 96),
        (112, 112),
        (128, 128),
        (192, 128),
        (256, 256),
        (576, 512),
    ];
    let types = [
        (GgmlType::F16, GgmlType::F16),
        (GgmlType::Q8_0, GgmlType::Q8_0),
        (GgmlType::Q4_0, GgmlType::Q4_0),
        (GgmlType::F16, GgmlType::Q8_0),
    ];
    let mut out = String::new();
    for (name, d) in devices {
        for text in overrides {
            let mut t = Tuning::for_device(&d).flash_attn;
            t.apply(text).expect("valid overrides");
            for (hsk, hsv) in heads {
                for n_q in [1, 2, 4, 5, 8, 32, 75, 512] {
                    for kv in [256, 4096, 16384] {
                        for (n_heads, kv_heads, n_seq) in [(8, 8, 1), (32, 8, 1), (16, 1, 1), (8, 8, 2)] {
                            for has_mask in [false, true] {
                                for (k_type, v_type) in types {
                                    let p = Problem {
                                        hsk,
                                        hsv,
                                        n_q,
                                        n_heads,
                                        kv_heads,
                                        kv,
                                        n_seq,
                                        k_type,
                                        v_type,
                                        has_mask,
                                    };
                                    let float = k_type == GgmlType::F16 && v_type == GgmlType::F16;
                                    let placement = Placement {
                                        aligned: true,
                                        k_vec: float,
                                        v_vec: float,
                                    };
                                    let _ = writeln!(
                                        out,
                                        "{name} [{text}] {hsk}/{hsv} nb={n_q} kv={kv} heads={n_heads}/{kv_heads} seq={n_seq} mask={has_mask} {k_type}/{v_type}: {}",
                                        plan_placed(&p, &d, &t, placement)
                                    );
                                }
                            }
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
    let path = std::env::var("FLASH_ATTN_PLAN_GRID").expect("FLASH_ATTN_PLAN_GRID=<file>");
    std::fs::write(path, plan_grid()).unwrap();
}
