use super::tile::TILE_ACC_BUDGET;
use super::*;
use crate::ops::flash_attn::MAX_SPLIT;
use crate::tuning::profiles;

fn shape(hsk: usize, hsv: usize, nh: usize, r2: usize, kv: usize, nb: usize, ty: GgmlType) -> Problem {
    Problem {
        hsk,
        hsv,
        n_q: nb,
        n_heads: nh * r2,
        kv_heads: nh,
        kv,
        n_seq: 1,
        k_type: ty,
        v_type: ty,
        has_mask: true,
    }
}

/// The device's profile with `overrides` on top.
fn tuned(d: &DeviceFacts, overrides: &str) -> FlashAttnTuning {
    let mut t = profiles::flash_attn(d.class);
    t.apply(overrides).unwrap();
    t
}

fn h200(m: u32, n: u32, k: u32) -> DeviceFacts {
    DeviceFacts {
        shader_f16: true,
        subgroups: true,
        subgroup_min_size: 32,
        subgroup_max_size: 32,
        subgroup_matrix: Some(MatrixConfig {
            m,
            n,
            k,
            f32_result: true,
            f16_result: true,
        }),
        max_workgroup_storage: 49152,
        max_invocations: 1024,
        max_workgroup_size_x: 1024,
        max_workgroups_per_dim: 65535,
        max_storage_binding: 2_147_483_644,
        class: crate::facts::DeviceClass::NvidiaHopper,
    }
}

fn lavapipe() -> DeviceFacts {
    DeviceFacts {
        shader_f16: true,
        subgroups: true,
        subgroup_min_size: 8,
        subgroup_max_size: 8,
        subgroup_matrix: Some(MatrixConfig {
            m: 8,
            n: 8,
            k: 8,
            f32_result: true,
            f16_result: true,
        }),
        max_workgroup_storage: 32768,
        max_invocations: 1024,
        max_workgroup_size_x: 1024,
        max_workgroups_per_dim: 65535,
        max_storage_binding: 134_217_728,
        class: crate::facts::DeviceClass::Cpu,
    }
}

/// Every plan respects the device's limits and its own invariants.
fn check(s: &Problem, d: &DeviceFacts, p: &FlashAttnPlan) {
    assert!(p.n_split >= 1 && p.n_split <= MAX_SPLIT);
    assert!(p.scratch_bytes(s) <= d.max_storage_binding);
    match &p.choice {
        Choice::Simple(_) => {}
        Choice::Tile(t) => {
            assert!(t.shared_bytes <= d.max_workgroup_storage, "{t:?}");
            assert!(t.threads <= d.max_threads() && t.threads % d.subgroup_max() == 0);
            assert_eq!(t.ds * t.gq * t.kv_tile, t.threads, "{t:?}");
            assert!(t.gq * t.rq >= t.rows);
            assert!(t.ds <= d.subgroup_min() && t.tpr <= d.subgroup_min());
            assert!(t.lv * t.rgn * t.ks <= t.threads && t.ro * t.rgn >= t.rows);
            assert!(t.lv * t.ch * 8 >= s.hsv as u32);
            assert!(t.ro * t.ch * 8 <= TILE_ACC_BUDGET);
            assert_eq!(p.split_len % t.kv_tile, 0);
        }
        Choice::Mma(m) => {
            assert!(m.shared_bytes <= d.max_workgroup_storage, "{m:?}");
            assert_eq!(m.threads % d.subgroup_max(), 0);
            assert_eq!(m.rb * m.cg, m.subgroups);
            assert_eq!(m.rows, m.rb * m.m);
            assert_eq!(m.kv_tile % m.n, 0);
            assert_eq!(m.kv_tile % m.k, 0);
            assert_eq!(m.hskp % m.k, 0);
            assert_eq!(m.hsvp % m.n, 0);
            assert!(m.sf >= m.subgroups * m.sb * m.m * m.n / 4);
            assert!(m.sf >= m.rows * m.sstr && m.sstr >= m.kv_tile / 4);
            assert!(m.sb <= (m.hsvp / m.n).div_ceil(m.cg));
            assert!(m.kstr >= m.hskp / 8 && m.vstr >= m.hsvp / 8 && m.pstr >= m.kv_tile / 8);
            if m.p_alias {
                assert!(m.rows * m.pstr <= m.kv_tile * m.kstr);
            }
            assert_eq!(p.split_len % m.kv_tile, 0);
        }
        Choice::Vec(v) => {
            assert!(v.shared_bytes <= d.max_workgroup_storage, "{v:?}");
            assert!(v.threads <= d.max_threads() && v.threads % v.team == 0);
            assert!(v.team <= d.subgroup_min() && v.team % v.lanes == 0);
            assert!(v.lanes * v.ck * 8 >= s.hsk as u32 && v.lanes * v.cv * 8 >= s.hsv as u32);
            assert!(v.rows as usize >= s.rows_per_kv_head() && p.row_blocks == 1);
            assert_eq!(p.split_len % v.kv_tile(), 0);
        }
    }
    assert!(p.n_split as u64 * p.split_len as u64 >= s.kv as u64);
    assert!((p.n_split as u64 - 1) * (p.split_len as u64) < s.kv as u64);
}

#[test]
fn decode_splits_the_kv_sequence_and_shares_kv_heads() {
    let d = h200(16, 16, 16);
    let s = shape(128, 128, 8, 4, 16384, 1, GgmlType::F16);
    let p = plan(&s, &d, &tuned(&d, ""));
    check(&s, &d, &p);
    let Choice::Vec(v) = &p.choice else { panic!("{p:?}") };
    // The 4 query heads of a KV head in one workgroup: K/V read once per split.
    assert_eq!((v.rows, p.row_blocks), (4, 1));
    assert_eq!((v.lanes, v.ck, v.cv), (16, 1, 1));
    assert!(p.n_split >= 64, "{p:?}");
    assert!(p.workgroups(&s) >= 512);
    assert!(!v.qint);
    // q8_0 and q4_0 K are scored by 8-bit dot products for up to 4 rows unless told
    // otherwise.
    for (ty, r2) in [(GgmlType::Q8_0, 4), (GgmlType::Q4_0, 1), (GgmlType::Q8_0, 8)] {
        let s = shape(128, 128, 8, r2, 16384, 1, ty);
        let by_rows = r2 <= 4;
        #[allow(unused_mut)]
        let mut cases = vec![("", by_rows), ("vec_qint=0", false), ("vec_qint=1", true)];
        #[cfg(feature = "probes")]
        cases.push(("vec_probe=1", by_rows));
        for (knobs, qint) in cases {
            let p = plan(&s, &d, &tuned(&d, knobs));
            let Choice::Vec(v) = &p.choice else { panic!("{p:?}") };
            assert_eq!(v.qint, qint, "{ty} r2={r2} {knobs}");
        }
    }
    // Not on CPU adapters unless told.
    let s = shape(128, 128, 8, 4, 4096, 1, GgmlType::Q8_0);
    for (knobs, qint) in [("kernel=vec", false), ("kernel=vec,vec_qint=1", true)] {
        let p = plan(&s, &lavapipe(), &tuned(&lavapipe(), knobs));
        let Choice::Vec(v) = &p.choice else { panic!("{p:?}") };
        assert_eq!(v.qint, qint, "lavapipe {knobs}");
    }
}

#[test]
fn prefill_uses_subgroup_matrices_and_no_split() {
    let d = h200(16, 16, 16);
    let s = shape(72, 72, 16, 1, 5776, 5776, GgmlType::F16);
    let p = plan(&s, &d, &tuned(&d, ""));
    check(&s, &d, &p);
    let Choice::Mma(m) = &p.choice else { panic!("{p:?}") };
    assert_eq!((m.hskp, m.hsvp), (80, 80));
    assert_eq!(m.rows, 128);
    assert!(m.q_regs);
    assert_eq!(p.n_split, 1);
    assert_eq!(p.row_blocks, 5776u32.div_ceil(128));
}

#[test]
fn gpus_give_small_heads_more_subgroups_and_large_heads_whole_rows() {
    let mma = |d: &DeviceFacts, hs: usize| {
        let s = shape(hs, hs, 8, 8, 7680, 512, GgmlType::F16);
        let p = plan(&s, d, &tuned(d, ""));
        check(&s, d, &p);
        match p.choice {
            Choice::Mma(m) => m,
            other => panic!("{other:?}"),
        }
    };
    let gpu = h200(16, 16, 16);
    // Head size 64: 16 subgroups (8 row blocks of 16 rows, two subgroups on each, as
    // much as 48 KiB of workgroup memory holds).
    let small = mma(&gpu, 64);
    assert_eq!((small.subgroups, small.rb, small.cg, small.rows), (16, 8, 2, 128));
    // Head size 256: 16 O blocks of 8 f32 a lane fit the budget of 128, so the layout
    // starts from whole rows per subgroup, and fitting 48 KiB ends at 4 row blocks with a
    // fresh 32-key tile; the old budget of 64 (a knob still asks for it) starts from two
    // subgroups a row block and ends at 16 keys with K and V sharing their buffer.
    let large = mma(&gpu, 256);
    let knobs = FlashAttnTuning {
        mma_o_budget: 64,
        ..tuned(&gpu, "")
    };
    let s = shape(256, 256, 8, 8, 7680, 512, GgmlType::F16);
    let Choice::Mma(old) = plan(&s, &gpu, &knobs).choice else {
        panic!()
    };
    assert_eq!((large.subgroups, large.rb, large.cg), (8, 4, 2));
    assert_eq!((large.kv_tile, large.kv_alias), (32, false), "{large:?}");
    assert_eq!((old.kv_tile, old.kv_alias), (16, true), "{old:?}");
    // CPU adapters keep 8 subgroups and the smaller budget.
    let cpu = lavapipe();
    assert_eq!(mma(&cpu, 64).subgroups, 8);
}

#[test]
fn cpu_adapters_take_the_tile_kernel_for_large_heads() {
    let d = lavapipe();
    let kernel = |hsk, hsv, knobs: &FlashAttnTuning| {
        let s = shape(hsk, hsv, 8, 2, 512, 32, GgmlType::F16);
        let p = plan(&s, &d, knobs);
        check(&s, &d, &p);
        p.choice
    };
    let defaults = tuned(&d, "");
    assert!(matches!(kernel(128, 128, &defaults), Choice::Mma(_)));
    for (hsk, hsv) in [(192, 128), (256, 256), (576, 512)] {
        assert!(matches!(kernel(hsk, hsv, &defaults), Choice::Tile(_)), "{hsk}/{hsv}");
        // Forced, or with the limit raised, the mma kernel runs them.
        let forced = FlashAttnTuning {
            kernel: Some(Force::Mma),
            ..defaults
        };
        assert!(matches!(kernel(hsk, hsv, &forced), Choice::Mma(_)), "{hsk}/{hsv}");
        let raised = tuned(&d, "mma_max_head=576");
        assert!(matches!(kernel(hsk, hsv, &raised), Choice::Mma(_)), "{hsk}/{hsv}");
    }
    // GPUs' profiles take it at every head size.
    let gpu = tuned(&h200(8, 8, 8), "");
    let s = shape(576, 512, 8, 2, 512, 32, GgmlType::F16);
    assert!(matches!(plan(&s, &d, &gpu).choice, Choice::Mma(_)));
}

#[test]
fn non_square_configs_pad_by_their_own_sizes() {
    for (m, n, k) in [(16, 8, 16), (16, 8, 8), (8, 16, 16)] {
        let d = h200(m, n, k);
        for (hsk, hsv) in [(40, 40), (72, 72), (192, 128), (576, 512), (320, 256), (256, 256)] {
            let s = shape(hsk, hsv, 4, 2, 1000, 64, GgmlType::Q8_0);
            let p = plan(&s, &d, &tuned(&d, ""));
            check(&s, &d, &p);
            let Choice::Mma(mm) = &p.choice else {
                panic!("{m}x{n}x{k} {hsk}/{hsv}: {p:?}")
            };
            assert_eq!((mm.m, mm.n, mm.k), (m, n, k));
            assert!(mm.hskp >= hsk as u32 && mm.hskp - (hsk as u32) < k.max(8));
            assert!(mm.hsvp >= hsv as u32 && mm.hsvp - (hsv as u32) < n.max(8));
        }
    }
    // 16x8x16: 72 → 80 for K (k = 16), 72 stays for V (n = 8).
    let d = h200(16, 8, 16);
    let s = shape(72, 72, 4, 1, 1000, 512, GgmlType::F16);
    let Choice::Mma(mm) = plan(&s, &d, &tuned(&d, "")).choice else {
        panic!()
    };
    assert_eq!((mm.hskp, mm.hsvp), (80, 72));
}

#[test]
fn every_upstream_head_size_fits_both_devices_and_modes() {
    let sizes = [
        (40, 40),
        (64, 64),
        (72, 72),
        (80, 80),
        (96, 96),
        (128, 128),
        (192, 128),
        (192, 192),
        (256, 256),
        (320, 256),
        (512, 512),
        (576, 512),
        (128, 64),
        (64, 128),
    ];
    for d in [h200(16, 16, 16), h200(16, 8, 8), lavapipe()] {
        for no_matrix in [false, true] {
            let mut d = d;
            if no_matrix {
                d.subgroup_matrix = None;
            }
            for (hsk, hsv) in sizes {
                for (r2, nb, kv) in [(1, 1, 113), (4, 1, 16384), (20, 1, 1024), (1, 75, 512), (8, 512, 7680)] {
                    for ty in [GgmlType::F16, GgmlType::Q4_0, GgmlType::F32] {
                        let s = shape(hsk, hsv, 2, r2, kv, nb, ty);
                        let p = plan(&s, &d, &tuned(&d, ""));
                        check(&s, &d, &p);
                        assert!(
                            !matches!(p.choice, Choice::Simple(_)),
                            "{hsk}/{hsv} r2={r2} nb={nb} falls back: {p:?}"
                        );
                        if no_matrix {
                            assert!(matches!(p.choice, Choice::Tile(_) | Choice::Vec(_)));
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn fallbacks_say_why() {
    let d = h200(16, 16, 16);
    let s = shape(36, 36, 1, 1, 100, 1, GgmlType::F16);
    assert!(matches!(plan(&s, &d, &tuned(&d, "")).choice, Choice::Simple(ref w) if w.contains("multiples of 8")));
    let mut no_sg = d;
    no_sg.subgroups = false;
    let s = shape(64, 64, 1, 1, 100, 1, GgmlType::F16);
    assert!(matches!(plan(&s, &no_sg, &tuned(&no_sg, "")).choice, Choice::Simple(ref w) if w.contains("subgroups")));
    // Without f32 results the mma kernel is not used.
    let mut f16_only = d;
    f16_only.subgroup_matrix = Some(MatrixConfig {
        m: 16,
        n: 16,
        k: 16,
        f32_result: false,
        f16_result: true,
    });
    let s = shape(64, 64, 1, 1, 100, 512, GgmlType::F16);
    assert!(matches!(
        plan(&s, &f16_only, &tuned(&f16_only, "")).choice,
        Choice::Tile(_)
    ));
}

#[test]
fn knobs_force_kernels_and_splits() {
    let d = lavapipe();
    let s = shape(64, 64, 2, 1, 300, 40, GgmlType::F16);
    let force = |f| FlashAttnTuning {
        kernel: Some(f),
        ..tuned(&d, "")
    };
    assert!(matches!(plan(&s, &d, &force(Force::Tile)).choice, Choice::Tile(_)));
    assert!(matches!(plan(&s, &d, &force(Force::Mma)).choice, Choice::Mma(_)));
    assert!(matches!(plan(&s, &d, &force(Force::Simple)).choice, Choice::Simple(_)));
    // Vec takes only what fits it, else tile; tile keeps decode on the previous kernel.
    assert!(matches!(plan(&s, &d, &force(Force::Vec)).choice, Choice::Tile(_)));
    let dec = shape(64, 64, 2, 4, 300, 1, GgmlType::F16);
    assert!(matches!(plan(&dec, &d, &tuned(&d, "")).choice, Choice::Vec(_)));
    assert!(matches!(plan(&dec, &d, &force(Force::Tile)).choice, Choice::Tile(_)));
    let p = plan(&s, &d, &tuned(&d, "split=3"));
    check(&s, &d, &p);
    assert_eq!(p.n_split, 3);
    // More splits than tiles are clamped; splits are never empty.
    let p = plan(&s, &d, &tuned(&d, "split=100"));
    check(&s, &d, &p);
}

#[test]
fn large_batches_split_the_grid_and_not_the_sequence() {
    let d = h200(16, 16, 16);
    let s = shape(64, 64, 8, 8, 7680, 512, GgmlType::Q4_0);
    let p = plan(&s, &d, &tuned(&d, ""));
    check(&s, &d, &p);
    assert!(matches!(p.choice, Choice::Mma(_)));
    assert!(p.n_split <= 2, "{p:?}");
    let s = shape(256, 256, 2, 16, 20000, 1, GgmlType::F16);
    let p = plan(&s, &d, &tuned(&d, ""));
    check(&s, &d, &p);
    assert!(p.n_split > 1);
}

/// Every knob at both ends of its range plans within the device's limits, whatever kernel is
/// forced (the ends found by trying values: a knob's text refuses those out of its range).
#[test]
fn knobs_at_the_ends_of_their_ranges_plan() {
    let device = DeviceFacts {
        subgroup_min_size: 8,
        subgroup_max_size: 32,
        max_workgroup_storage: 32768,
        max_invocations: 256,
        max_workgroup_size_x: 256,
        max_storage_binding: 1 << 27,
        ..h200(8, 8, 8)
    };
    let base = tuned(&device, "");
    let candidates: Vec<u32> = [0, 3, 11, u32::MAX]
        .into_iter()
        .chain((0..=20).map(|b| 1 << b))
        .collect();
    for end in [0, 1] {
        let mut t = base;
        for name in FlashAttnTuning::NAMES.iter().filter(|&&n| n != "kernel") {
            let accepted = candidates.iter().filter(|v| {
                let mut probe = base;
                probe.set(name, &v.to_string()).is_ok()
            });
            let v = if end == 0 { accepted.min() } else { accepted.max() };
            if let Some(v) = v {
                t.set(name, &v.to_string()).unwrap();
            }
        }
        for kernel in [
            None,
            Some(Force::Tile),
            Some(Force::Mma),
            Some(Force::Vec),
            Some(Force::Simple),
        ] {
            let t = FlashAttnTuning { kernel, ..t };
            for (n_q, kv) in [(1, 1), (1, 4096), (7, 300), (64, 1000)] {
                let shape = Problem {
                    hsk: 128,
                    hsv: 128,
                    n_q,
                    n_heads: 8,
                    kv_heads: 2,
                    kv,
                    n_seq: 1,
                    k_type: GgmlType::F16,
                    v_type: GgmlType::F16,
                    has_mask: true,
                };
                let p = plan(&shape, &device, &t);
                check(&shape, &device, &p);
            }
        }
    }
}
