//! The planner's tests, on the preset devices with their profiles.

use super::*;

use crate::facts::DeviceClass;
use crate::facts::presets::{self, lavapipe};
use crate::tuning::profiles;
use crate::tuning::values::Pair;

/// Overrides (`name=value,…`) applied on top of the profile of the device a plan is made for,
/// as a context applies them.
#[derive(Debug, Clone)]
struct Knobs(String);

impl Knobs {
    fn none() -> Knobs {
        Knobs(String::new())
    }

    /// Checked as a context checks them (on any profile: every knob's range is its own).
    fn parse(text: &str) -> Result<Knobs, String> {
        profiles::mul_mat(DeviceClass::NvidiaHopper).apply(text)?;
        Ok(Knobs(text.to_owned()))
    }

    fn on(&self, d: &DeviceFacts) -> MulMatTuning {
        let mut t = profiles::mul_mat(d.class);
        t.apply(&self.0).expect("checked knobs");
        t
    }
}

/// The plan for `p` on `d` with `d`'s profile and `k`.
fn planned(p: &Problem, d: &DeviceFacts, k: &Knobs) -> MulMatPlan {
    plan(p, d, &k.on(d))
}

fn nvidia(config: (u32, u32, u32)) -> DeviceFacts {
    presets::with_config(presets::h100(), config)
}

fn problem(a_type: GgmlType, m: u64, n: u64, k: u64) -> Problem {
    Problem {
        a_type,
        b_type: GgmlType::F32,
        m,
        n,
        k,
        batches: 1,
        a_batches: 1,
        a_align: 4,
        b_align: 4,
        b_contiguous: true,
        dst_bytes: m * n * 4,
        b_prologue: BPrologue::None,
        dst_epilogue: DstEpilogue::None,
    }
}

type SgShape = (MatrixConfig, (u32, u32), (u32, u32), u32, u32, u32, bool);

fn sg_shape(plan: &MulMatPlan) -> SgShape {
    match plan.choice {
        Choice::SubgroupMatrix(SubgroupMatrixPlan {
            config,
            count_m,
            count_n,
            frag_m,
            frag_n,
            tk,
            stages,
            wg_size,
            narrow,
            ..
        }) => (
            config,
            (count_m, count_n),
            (frag_m, frag_n),
            tk,
            stages,
            wg_size,
            narrow,
        ),
        ref other => panic!("not the subgroup-matrix kernel: {other:?}"),
    }
}

#[test]
fn gpus_stage_f16_copies_of_quantized_a_and_f32_b_and_cpus_do_not() {
    let t = Knobs::none();
    let gpu = nvidia((16, 8, 16));
    let q = planned(&problem(GgmlType::Q4_K, 4096, 512, 14336), &gpu, &t);
    assert!(
        matches!(
            q.choice,
            Choice::SubgroupMatrix(SubgroupMatrixPlan { raw_units: true, .. })
        ),
        "{q}"
    );
    let (a, b) = (q.dequantize_a.expect("a's copy"), q.convert_b.expect("b's copy"));
    assert_eq!(a.scratch_bytes, 4096 * 14336 * 2);
    assert_eq!(b.scratch_bytes, 512 * 14336 * 2);
    assert_eq!(u64::from(a.units) * 16, a.scratch_bytes);
    let kp = q.kernel_problem();
    assert_eq!(
        (kp.a_type, kp.b_type, kp.a_align, kp.b_align),
        (GgmlType::F16, GgmlType::F16, 16, 16)
    );
    assert!(q.a_vec4 && q.b_vec4, "{q}");
    // Float a: only b's copy; n=9 is the first n the subgroup-matrix kernel takes.
    let f = planned(&problem(GgmlType::F16, 4096, 9, 14336), &gpu, &t);
    assert!(f.dequantize_a.is_none() && f.convert_b.is_some(), "{f}");
    // Mat-vec n, CPU adapters, a switched-off knob, k off the 8-element grid, and copies
    // over the binding limit: none.
    assert!(
        planned(&problem(GgmlType::Q4_K, 4096, 8, 14336), &gpu, &t)
            .dequantize_a
            .is_none()
    );
    let cpu = planned(&problem(GgmlType::Q4_K, 512, 512, 1024), &lavapipe(), &t);
    assert!(cpu.dequantize_a.is_none() && cpu.convert_b.is_none(), "{cpu}");
    assert!(
        matches!(
            cpu.choice,
            Choice::SubgroupMatrix(SubgroupMatrixPlan { raw_units: false, .. })
        ),
        "{cpu}"
    );
    let off = Knobs::parse("sg_a_f16_min_n=never,sg_b_f16_min_n=never").unwrap();
    let o = planned(&problem(GgmlType::Q4_K, 4096, 512, 14336), &gpu, &off);
    assert!(o.dequantize_a.is_none() && o.convert_b.is_none(), "{o}");
    let odd = planned(&problem(GgmlType::F32, 64, 64, 36), &gpu, &t);
    assert!(odd.convert_b.is_none(), "{odd}");
    let tight = DeviceFacts {
        max_storage_binding: 1 << 26,
        ..gpu
    };
    let big = planned(&problem(GgmlType::Q4_K, 4096, 512, 14336), &tight, &t);
    assert!(big.dequantize_a.is_none() && big.convert_b.is_some(), "{big}");
}

#[test]
fn b_is_read_as_16_byte_words_where_it_measured_faster() {
    let d = nvidia((16, 16, 16));
    let no_sg = DeviceFacts {
        subgroup_matrix: None,
        ..d
    };
    let vec4 = |ty: GgmlType, n: u64, d: &DeviceFacts, t: &Knobs| {
        let mut p = problem(ty, 4096, n, 14336);
        p.b_align = 16;
        planned(&p, d, t).b_vec4
    };
    let t = Knobs::none();
    assert!(vec4(GgmlType::F16, 512, &d, &t), "subgroup-matrix");
    assert!(vec4(GgmlType::IQ4_XS, 1, &d, &t), "mat-vec of a lookup-table format");
    assert!(!vec4(GgmlType::Q1_0, 1, &d, &t), "not measured: words");
    assert!(!vec4(GgmlType::F16, 8, &d, &t), "float mat-vec");
    assert!(!vec4(GgmlType::F16, 512, &no_sg, &t), "register-tiled");
    let all = Knobs::parse("b_vec4=always").unwrap();
    assert!(vec4(GgmlType::F16, 8, &d, &all) && vec4(GgmlType::F16, 512, &no_sg, &all));
    let none = Knobs::parse("b_vec4=never").unwrap();
    assert!(!vec4(GgmlType::F16, 512, &d, &none) && !vec4(GgmlType::IQ4_XS, 1, &d, &none));
    // A layout that does not allow it is never read so, whatever the knob (unless the kernel
    // reads b's f16 copy instead).
    let mut p = problem(GgmlType::F16, 4096, 512, 14336);
    p.b_align = 4;
    let uncopied = Knobs::parse("b_vec4=always,sg_b_f16_min_n=never").unwrap();
    assert!(!planned(&p, &d, &uncopied).b_vec4);
    assert!(planned(&p, &d, &all).b_vec4);
}

#[test]
fn nvidia_16x16x16_gets_128_square_tiles_one_deep_stage() {
    let plan = planned(
        &problem(GgmlType::F16, 4096, 2048, 14336),
        &nvidia((16, 16, 16)),
        &Knobs::none(),
    );
    let (_, counts, frags, tk, stages, wg, narrow) = sg_shape(&plan);
    assert_eq!(
        (counts, frags, tk, stages, wg, narrow),
        ((4, 4), (2, 2), 64, 1, 512, false)
    );
    assert!(
        matches!(
            plan.choice,
            Choice::SubgroupMatrix(SubgroupMatrixPlan { prefetch: true, .. })
        ),
        "{plan}"
    );
    assert_eq!(plan.tile(), (128, 128));
    assert_eq!((plan.tiles_m, plan.tiles_n), (32, 16));
    assert!(plan.workgroup_bytes <= 49152, "{plan}");
}

#[test]
fn edge_scratch_takes_what_staging_leaves() {
    let scratch = |t: &Knobs| match planned(&problem(GgmlType::F16, 4096, 512, 14336), &nvidia((16, 16, 16)), t).choice
    {
        Choice::SubgroupMatrix(SubgroupMatrixPlan { scratch_sgs, tk, .. }) => (scratch_sgs, tk),
        ref other => panic!("{other:?}"),
    };
    // 4x4 subgroups, one stage of 256 rows x 72 halves: 36864 B leave room for 12 of the
    // 16 (1 KiB each), which take turns in two rounds.
    assert_eq!(scratch(&Knobs::none()), (12, 64));
    // Two stages of 256 rows x 40 halves: 40960 B leave room for 8.
    let t = Knobs::parse("sg_tk=32,sg_stages=2").unwrap();
    assert_eq!(scratch(&t), (8, 32));
    // 2x4 subgroups: one stage of 36864 B leaves room for all 8.
    let t = Knobs::parse("sg_counts=2/4").unwrap();
    assert_eq!(scratch(&t), (8, 64));
    let t = Knobs::parse("sg_scratch_max=1").unwrap();
    assert_eq!(scratch(&t), (1, 64));
}

#[test]
fn non_square_16x8x16_config_keeps_the_tile_and_the_limit() {
    let d = nvidia((16, 8, 16));
    let plan = planned(&problem(GgmlType::Q4_0, 4096, 2048, 14336), &d, &Knobs::none());
    let (c, counts, frags, tk, _, wg, _) = sg_shape(&plan);
    assert_eq!((c.m, c.n, c.k), (16, 8, 16));
    assert_eq!(plan.tile(), (128, 128), "{plan}");
    assert_eq!((counts, frags, wg), ((4, 4), (2, 4), 512));
    assert!(tk.is_multiple_of(16));
    assert!(plan.workgroup_bytes <= 49152);
    // The narrow tile for small n: columns in steps of the config's n (8).
    let off = Knobs::parse("").unwrap();
    let narrow = planned(&problem(GgmlType::Q4_0, 4096, 20, 14336), &d, &off);
    let (_, counts, frags, _, _, _, narrow_flag) = sg_shape(&narrow);
    assert!(narrow_flag);
    assert_eq!((counts, frags), ((4, 1), (1, 3)));
    assert_eq!(narrow.tile(), (64, 24));
}

#[test]
fn intel_8x16x16_and_16x8x8() {
    for (cfg, sg) in [((8, 16, 16), 16), ((16, 8, 8), 32)] {
        let d = DeviceFacts {
            subgroup_min_size: 8,
            subgroup_max_size: sg,
            ..nvidia(cfg)
        };
        let plan = planned(&problem(GgmlType::F16, 1000, 300, 999), &d, &Knobs::none());
        let (c, counts, _, tk, _, wg, _) = sg_shape(&plan);
        assert_eq!((c.m, c.n, c.k), cfg);
        assert_eq!(wg, counts.0 * counts.1 * sg);
        assert!(tk.is_multiple_of(cfg.2) && tk.is_multiple_of(8));
        assert!(plan.workgroup_bytes <= d.max_workgroup_storage);
    }
}

#[test]
fn lavapipe_8x8x8_fits_32k() {
    let off = Knobs::parse("sg_counts=2/4,sg_tk=32").unwrap();
    let plan = planned(&problem(GgmlType::Q4_K, 300, 100, 512), &lavapipe(), &off);
    let (_, counts, frags, tk, stages, wg, _) = sg_shape(&plan);
    assert_eq!((counts, frags, tk, stages, wg), ((2, 4), (4, 2), 32, 2, 64));
    assert_eq!(plan.tile(), (64, 64));
    assert!(plan.workgroup_bytes <= 32768);
    // The default 4x4 subgroups: 8 accumulators of 8 words each per subgroup; a CPU
    // adapter's K step of 8.
    let plan = planned(&problem(GgmlType::Q4_K, 300, 100, 512), &lavapipe(), &Knobs::none());
    let (_, counts, frags, tk, stages, wg, _) = sg_shape(&plan);
    assert_eq!((counts, frags, tk, stages, wg), ((4, 4), (2, 4), 8, 2, 128));
    assert!(plan.workgroup_bytes <= 32768);
    // Two 32-deep stages fit as well.
    let two = Knobs::parse("sg_tk=32,sg_stages=2").unwrap();
    let plan = planned(&problem(GgmlType::Q4_K, 300, 100, 512), &lavapipe(), &two);
    let (_, counts, frags, tk, stages, wg, _) = sg_shape(&plan);
    assert_eq!((counts, frags, tk, stages, wg), ((4, 4), (2, 4), 32, 2, 128));
    assert!(plan.workgroup_bytes <= 32768);
    // A GPU with lavapipe's limits takes the GPU's one 64-element stage.
    let gpu = DeviceFacts {
        class: DeviceClass::NvidiaHopper,
        ..lavapipe()
    };
    let plan = planned(&problem(GgmlType::Q4_K, 300, 100, 512), &gpu, &Knobs::none());
    assert_eq!((sg_shape(&plan).3, sg_shape(&plan).4), (64, 1));
}

#[test]
fn workgroup_memory_never_exceeds_the_limit() {
    let configs = [
        (8, 8, 8),
        (16, 16, 16),
        (16, 8, 16),
        (16, 8, 8),
        (8, 16, 16),
        (32, 32, 16),
    ];
    for limit in [4096, 8192, 12288, 16384, 24576, 32768, 49152, 65536] {
        for &cfg in &configs {
            for f32_result in [false, true] {
                for sg in [4, 8, 16, 32, 64, 128] {
                    for n in [9, 33, 64, 65, 512] {
                        let mut d = nvidia(cfg);
                        d.max_workgroup_storage = limit;
                        d.subgroup_max_size = sg;
                        d.subgroup_min_size = sg;
                        d.subgroup_matrix.as_mut().unwrap().f32_result = f32_result;
                        let plan = planned(&problem(GgmlType::Q6_K, 777, n, 2048), &d, &Knobs::none());
                        assert!(plan.workgroup_bytes <= limit, "{cfg:?} {limit} {sg}: {plan}");
                        if let Choice::SubgroupMatrix(SubgroupMatrixPlan { wg_size, .. }) = plan.choice {
                            assert!(wg_size.is_multiple_of(sg) && wg_size <= 1024);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn small_n_runs_mat_vec_and_the_rest_picks_by_capability() {
    let d = nvidia((16, 16, 16));
    let t = Knobs::none();
    for n in 1..=8 {
        let plan = planned(&problem(GgmlType::Q4_0, 4096, n, 14336), &d, &t);
        let Choice::MatVec(MatVecPlan {
            rows,
            groups,
            cols,
            subgroups,
            ..
        }) = plan.choice
        else {
            panic!("{plan}")
        };
        assert_eq!(cols as u64, n);
        assert!(subgroups);
        assert_eq!(plan.tiles_m, 4096 / (rows * groups));
    }
    let no_sg = DeviceFacts {
        subgroup_matrix: None,
        ..d
    };
    let tiled = planned(&problem(GgmlType::F32, 100, 100, 100), &no_sg, &t);
    assert!(matches!(tiled.choice, Choice::Tiled(TiledPlan { .. })), "{tiled}");
    assert_eq!((tiled.tiles_m, tiled.tiles_n), (2, 2));
    // No subgroups at all: the workgroup-memory reduction.
    let bare = DeviceFacts {
        subgroups: false,
        ..no_sg
    };
    let v = planned(&problem(GgmlType::F16, 100, 3, 100), &bare, &t);
    assert!(
        matches!(v.choice, Choice::MatVec(MatVecPlan { subgroups: false, .. })),
        "{v}"
    );
    assert_eq!(v.workgroup_bytes, 4 * 256);
}

#[test]
fn mat_vec_groups_hold_whole_subgroups() {
    // The float kernel's knobs (the integer kernel off).
    let d = nvidia((16, 16, 16));
    let vec_shape = |t: &Knobs, n: u64| {
        let plan = planned(&problem(GgmlType::Q4_K, 4096, n, 14336), &d, t);
        let Choice::MatVec(MatVecPlan {
            wg_size, rows, groups, ..
        }) = plan.choice
        else {
            panic!("{plan}")
        };
        assert_eq!(plan.tiles_m, 4096 / (rows * groups), "{plan}");
        (wg_size, rows, groups)
    };
    let t = Knobs::parse("vec_int_max_n=0,vec_words=all,vec_rows_k=4/4,vec_groups=1/4").unwrap();
    assert_eq!(vec_shape(&t, 1), (256, 4, 1));
    assert_eq!(vec_shape(&t, 8), (256, 4, 4));
    // Groups of 16 threads cannot hold a subgroup of 32: halved to groups of 32.
    let small = Knobs::parse("vec_int_max_n=0,vec_words=all,vec_rows_k=4/4,vec_wg=64,vec_groups=1/4").unwrap();
    assert_eq!(vec_shape(&small, 8), (64, 4, 2));
    let tiny = Knobs::parse("vec_int_max_n=0,vec_words=all,vec_rows_k=4/4,vec_wg=16,vec_groups=8/1").unwrap();
    assert_eq!(vec_shape(&tiny, 1), (16, 4, 1));
    // Without subgroups any power-of-two group works (the tree reduction halves it).
    let bare = DeviceFacts {
        subgroups: false,
        subgroup_matrix: None,
        ..d
    };
    let plan = planned(&problem(GgmlType::Q4_0, 100, 8, 256), &bare, &small);
    assert!(
        matches!(
            plan.choice,
            Choice::MatVec(MatVecPlan {
                groups: 4,
                rows: 16,
                ..
            })
        ),
        "{plan}"
    );
    // Float weights cap their accumulators: half the rows in twice the groups.
    let f = planned(&problem(GgmlType::F16, 100, 8, 256), &bare, &small);
    assert!(
        matches!(f.choice, Choice::MatVec(MatVecPlan { groups: 8, rows: 8, .. })),
        "{f}"
    );
    let uncapped =
        Knobs::parse("vec_int_max_n=0,vec_words=all,vec_rows_k=4/4,vec_wg=64,vec_groups=1/4,vec_acc_max=4096/4096")
            .unwrap();
    let f = planned(&problem(GgmlType::F16, 100, 8, 256), &bare, &uncapped);
    assert!(
        matches!(
            f.choice,
            Choice::MatVec(MatVecPlan {
                groups: 4,
                rows: 16,
                ..
            })
        ),
        "{f}"
    );
    assert!(Knobs::parse("vec_groups=3/1").is_err());
    assert!(Knobs::parse("vec_int_max_n=0,vec_words=q9_K").is_err());
    // By default the whole-word kernel for q6_K only.
    let mixed = Knobs::parse("vec_int_max_n=0").unwrap();
    for (ty, words) in [(GgmlType::Q6_K, true), (GgmlType::Q4_K, false), (GgmlType::Q4_0, false)] {
        let plan = planned(&problem(ty, 4096, 1, 14336), &d, &mixed);
        assert!(
            matches!(plan.choice, Choice::MatVec(MatVecPlan { whole_words: w, .. }) if w == words),
            "{ty}: {plan}"
        );
    }
    assert!(Knobs::parse("vec_int_max_n=0,vec_words=none").is_ok());
}

#[test]
fn the_four_bit_levels_come_from_a_workgroup_table_on_gpus() {
    let table = |ty: GgmlType, d: &DeviceFacts, knobs: &str| {
        let t = Knobs::parse(knobs).unwrap();
        let plan = planned(&problem(ty, 4096, 1, 14336), d, &t);
        let Choice::MatVec(MatVecPlan { level_table, .. }) = plan.choice else {
            panic!("{plan}");
        };
        (level_table, plan.workgroup_bytes)
    };
    let gpu = nvidia((16, 16, 16));
    for ty in [GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4, GgmlType::NVFP4] {
        let (on, bytes) = table(ty, &gpu, "vec_int_fp4=1");
        let (off, bytes_off) = table(ty, &gpu, "vec_int_fp4=1,vec_int_lut=0");
        assert!(on && !off, "{ty}: on GPUs by default, off with 0");
        // The table's 256 words are counted against the workgroup memory limit.
        assert_eq!(bytes, bytes_off + 1024, "{ty}");
        assert!(
            !table(ty, &lavapipe(), "vec_int_fp4=1").0,
            "{ty}: not on CPU adapters by default"
        );
        assert!(table(ty, &lavapipe(), "vec_int_fp4=1,vec_int_lut=1").0, "{ty}");
    }
    // Formats without 4-bit levels, and those off the integer kernel, have none.
    assert!(!table(GgmlType::Q4_0, &gpu, "vec_int_lut=1").0);
    assert!(!table(GgmlType::IQ4_NL, &gpu, "vec_int_iq4nl=0,vec_int_lut=1").0);
}

#[test]
fn q8_0_at_n1_takes_one_row_groups_two_a_workgroup_where_its_knob_says() {
    let (gpu, cpu) = (nvidia((16, 16, 16)), lavapipe());
    let shape = |ty: GgmlType, n: u64, d: &DeviceFacts, knobs: &str| {
        let plan = planned(&problem(ty, 4096, n, 14336), d, &Knobs::parse(knobs).unwrap());
        let Choice::MatVec(MatVecPlan {
            rows,
            groups,
            int_dot: true,
            ..
        }) = plan.choice
        else {
            panic!("{plan}")
        };
        (rows, groups)
    };
    let usual = (2, 4);
    assert_eq!(shape(GgmlType::Q8_0, 1, &gpu, ""), (1, 2));
    assert_eq!(shape(GgmlType::Q8_0, 1, &cpu, ""), usual);
    // Not the other formats, nor q8_0 at n=2.
    assert_eq!(shape(GgmlType::Q8_0, 2, &gpu, ""), usual);
    assert_eq!(shape(GgmlType::Q4_0, 1, &gpu, ""), usual);
    assert_eq!(shape(GgmlType::Q5_1, 1, &gpu, ""), usual);
    for (value, d, on) in [(0, &gpu, false), (1, &gpu, true), (1, &cpu, true), (0, &cpu, false)] {
        let knobs = format!("vec_int_q8_0_n1={value}");
        let expected = if on { (1, 2) } else { usual };
        assert_eq!(shape(GgmlType::Q8_0, 1, d, &knobs), expected, "{knobs}");
    }
}

#[test]
fn integer_mat_vec_takes_the_formats_it_reads_when_it_can() {
    let int_dot = |p: &Problem, d: &DeviceFacts, t: &Knobs| {
        matches!(
            planned(p, d, t).choice,
            Choice::MatVec(MatVecPlan { int_dot: true, .. })
        )
    };
    let d = nvidia((16, 16, 16));
    let t = Knobs::none();
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q3_K,
        GgmlType::Q6_K,
    ] {
        for n in 1..=8 {
            assert!(int_dot(&problem(ty, 4096, n, 14336), &d, &t), "{ty} n={n}");
        }
        assert!(!int_dot(&problem(ty, 4096, 9, 14336), &d, &t), "{ty} n=9");
    }
    for ty in [GgmlType::F16, GgmlType::Q1_0] {
        assert!(!int_dot(&problem(ty, 4096, 1, 14336), &d, &t), "{ty}");
    }
    // A switch knob's values, on any device (value, device, on).
    let cpu = lavapipe();
    let switch = [(0, &d, false), (1, &d, true), (1, &cpu, true), (0, &cpu, false)];
    let gated_by = |knob: &str, p: &Problem| {
        for (value, dev, expected) in switch {
            let tuning = Knobs::parse(&format!("{knob}={value}")).unwrap();
            assert_eq!(int_dot(p, dev, &tuning), expected, "{knob}={value}");
        }
    };
    // iq4_nl by its knob, 1 (everywhere) by default.
    let iq4 = problem(GgmlType::IQ4_NL, 4096, 1, 14336);
    assert!(int_dot(&iq4, &d, &t) && int_dot(&iq4, &lavapipe(), &t));
    gated_by("vec_int_iq4nl", &iq4);
    // mxfp4 and nvfp4 by theirs, on in the GPU profiles, off on CPU adapters. mxfp4's rows at
    // any byte, nvfp4's at even ones.
    let mx = Problem {
        a_align: 1,
        ..problem(GgmlType::MXFP4, 4096, 1, 14336)
    };
    let nv = problem(GgmlType::NVFP4, 4096, 2, 14336);
    for p in [&mx, &nv] {
        assert!(int_dot(p, &d, &t) && !int_dot(p, &lavapipe(), &t));
        gated_by("vec_int_fp4", p);
    }
    // iq4_xs by its own, 1 (everywhere) by default; never in the K-quants' slot kernel.
    let xs = problem(GgmlType::IQ4_XS, 4096, 1, 14336);
    assert!(int_dot(&xs, &d, &t) && int_dot(&xs, &lavapipe(), &t));
    gated_by("vec_int_iq4xs", &xs);
    for n in 1..=8 {
        let plan = planned(&problem(GgmlType::IQ4_XS, 4096, n, 14336), &d, &t);
        assert!(
            matches!(
                plan.choice,
                Choice::MatVec(MatVecPlan {
                    int_dot: true,
                    int_slots: false,
                    ..
                })
            ),
            "n={n}: {plan}"
        );
    }
    let nv1 = problem(GgmlType::NVFP4, 4096, 1, 14336);
    assert!(int_dot(&nv1, &d, &t), "nvfp4 n=1 with the levels' table");
    assert!(int_dot(&nv1, &d, &Knobs::parse("vec_int_lut=0").unwrap()));
    assert!(int_dot(&nv1, &d, &Knobs::parse("vec_int_fp4=1,vec_int_lut=0").unwrap()));
    let odd_nv = Problem { a_align: 1, ..nv };
    assert!(!int_dot(&odd_nv, &d, &Knobs::parse("vec_int_fp4=1").unwrap()));
    // The prefetch where its table says: Hopper's for q4_0 at n=2 and 4, q4_1 at n=4 and q5_0
    // at n=1, 2, 4 and 5; `all` in every integer kernel but the slots; `none` nowhere.
    let prefetch = |p: &Problem, d: &DeviceFacts, t: &Knobs| {
        matches!(
            planned(p, d, t).choice,
            Choice::MatVec(MatVecPlan {
                int_dot: true,
                prefetch: true,
                ..
            })
        )
    };
    let always = Knobs::parse("vec_int_prefetch=all").unwrap();
    let never = Knobs::parse("vec_int_prefetch=none").unwrap();
    for n in 1..=8 {
        for (ty, on_gpu) in [
            (GgmlType::Q4_0, n == 2 || n == 4),
            (GgmlType::Q4_1, n == 4),
            (GgmlType::Q5_0, matches!(n, 1 | 2 | 4 | 5)),
            (GgmlType::Q5_1, false),
            (GgmlType::Q8_0, false),
            (GgmlType::IQ4_NL, false),
        ] {
            let p = problem(ty, 4096, n, 14336);
            assert_eq!(prefetch(&p, &d, &t), on_gpu, "{ty} n={n}");
            assert!(!prefetch(&p, &lavapipe(), &t), "{ty} n={n} on a CPU");
            assert!(
                prefetch(&p, &d, &always) && prefetch(&p, &lavapipe(), &always),
                "{ty} n={n}"
            );
            assert!(!prefetch(&p, &d, &never), "{ty} n={n}");
        }
    }
    // Odd rows, a switched-off knob and a scratch over the binding limit take the float kernel.
    let odd = Problem {
        a_align: 1,
        ..problem(GgmlType::Q4_0, 64, 1, 256)
    };
    assert!(!int_dot(&odd, &d, &t));
    let off = Knobs::parse("vec_int_max_n=0").unwrap();
    assert!(!int_dot(&problem(GgmlType::Q4_0, 64, 1, 256), &d, &off));
    let tight = DeviceFacts {
        max_storage_binding: 1 << 20,
        ..d
    };
    let big_batch = Problem {
        batches: 4096,
        ..problem(GgmlType::Q4_0, 64, 8, 256)
    };
    assert!(int_scratch_bytes(&big_batch) > tight.max_storage_binding);
    assert!(!int_dot(&big_batch, &tight, &t));
    // Super-block formats take their own rows and groups; the slot kernel from n=2, with
    // its own rows.
    let k = planned(&problem(GgmlType::Q4_K, 4096, 1, 14336), &d, &t);
    assert!(
        matches!(
            k.choice,
            Choice::MatVec(MatVecPlan {
                rows: 2,
                groups: 4,
                int_slots: false,
                ..
            })
        ),
        "{k}"
    );
    // q6_K's units kernel: a group per 32-lane subgroup on GPUs, `vec_int_groups_k` on CPU
    // adapters unless told.
    let q6 = problem(GgmlType::Q6_K, 4096, 1, 14336);
    let four = Knobs::parse("vec_int_groups_q6k=4").unwrap();
    for (dev, tuning, expected) in [(&d, &t, 8), (&lavapipe(), &t, 4), (&d, &four, 4)] {
        let k = planned(&q6, dev, tuning);
        assert!(
            matches!(k.choice, Choice::MatVec(MatVecPlan { rows: 2, groups, int_slots: false, .. }) if groups == expected),
            "{k}"
        );
    }
    assert!(Knobs::parse("vec_int_groups_q6k=3").is_err());
    for (n, rows) in [(2, 1), (3, 1), (4, 2), (8, 2)] {
        for ty in [
            GgmlType::Q2_K,
            GgmlType::Q3_K,
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
        ] {
            let signed_wide = n >= 8 && matches!(ty, GgmlType::Q3_K | GgmlType::Q6_K);
            let (rows, groups) = if signed_wide { (4, 4) } else { (rows, 8) };
            let k = planned(&problem(ty, 4096, n, 14336), &d, &t);
            assert!(
                matches!(k.choice, Choice::MatVec(MatVecPlan { int_slots: true, rows: r, groups: g, .. }) if r == rows && g == groups),
                "{ty} n={n}: {k}"
            );
        }
    }
    for ty in [GgmlType::Q4_0, GgmlType::Q8_0] {
        let k = planned(&problem(ty, 4096, 4, 14336), &d, &t);
        assert!(
            matches!(
                k.choice,
                Choice::MatVec(MatVecPlan {
                    int_dot: true,
                    int_slots: false,
                    ..
                })
            ),
            "{ty}: {k}"
        );
    }
    // The float mat-vec caps its accumulators per thread: 16 rows x 5 columns, but 8 rows
    // in twice the groups for 8 columns.
    for (n, rows, groups) in [(5, 16, 1), (8, 8, 2)] {
        let f = planned(&problem(GgmlType::F16, 4096, n, 14336), &d, &t);
        assert!(
            matches!(f.choice, Choice::MatVec(MatVecPlan { rows: r, groups: g, int_dot: false, .. }) if r == rows && g == groups),
            "n={n}: {f}"
        );
    }
    // Halves read as 16-byte words (rows at 16-byte offsets, on GPUs) cap them at
    // `vec_acc_max_halves`; f32 rows and CPU adapters keep `vec_acc_max`.
    let cases = [
        (GgmlType::F16, &d, [(5, 8, 2), (8, 4, 4)]),
        (GgmlType::BF16, &d, [(5, 8, 2), (8, 4, 4)]),
        (GgmlType::F32, &d, [(5, 16, 1), (8, 8, 2)]),
        (GgmlType::F16, &lavapipe(), [(5, 16, 1), (8, 8, 2)]),
    ];
    for (ty, dev, shapes) in cases {
        for (n, rows, groups) in shapes {
            let mut p = problem(ty, 4096, n, 14336);
            p.a_align = 16;
            let f = planned(&p, dev, &t);
            assert!(
                matches!(f.choice, Choice::MatVec(MatVecPlan { rows: r, groups: g, int_dot: false, .. }) if r == rows && g == groups),
                "{ty} n={n}: {f}"
            );
        }
    }
    // CPU adapters keep the units kernel up to n=3 unless told otherwise.
    let cpu = lavapipe();
    for (n, slots) in [(1, false), (2, false), (3, false), (4, true), (8, true)] {
        let k = planned(&problem(GgmlType::Q4_K, 4096, n, 14336), &cpu, &t);
        assert!(
            matches!(k.choice, Choice::MatVec(MatVecPlan { int_dot: true, int_slots: s, .. }) if s == slots),
            "n={n}: {k}"
        );
    }
    let from_two = Knobs::parse("vec_int_slots_min_n=2").unwrap();
    let k = planned(&problem(GgmlType::Q4_K, 4096, 2, 14336), &cpu, &from_two);
    assert!(
        matches!(k.choice, Choice::MatVec(MatVecPlan { int_slots: true, .. })),
        "{k}"
    );
    let never = Knobs::parse("vec_int_slots_min_n=65").unwrap();
    let k = planned(&problem(GgmlType::Q6_K, 4096, 8, 14336), &d, &never);
    assert!(
        matches!(
            k.choice,
            Choice::MatVec(MatVecPlan {
                int_dot: true,
                int_slots: false,
                ..
            })
        ),
        "{k}"
    );
}

#[test]
fn any_alignment_is_fast_and_only_huge_sizes_are_simple() {
    let d = nvidia((16, 16, 16));
    for (ty, a_align, b_align) in [(GgmlType::F32, 2, 1), (GgmlType::F16, 1, 2), (GgmlType::Q4_0, 1, 4)] {
        let mut p = problem(ty, 64, 64, 65);
        p.a_align = a_align;
        p.b_align = b_align;
        assert!(matches!(
            planned(&p, &d, &Knobs::none()).choice,
            Choice::SubgroupMatrix(SubgroupMatrixPlan { .. })
        ));
    }
    let huge = problem(GgmlType::Q4_0, 1 << 17, 1 << 16, 64);
    let plan = planned(&huge, &d, &Knobs::none());
    assert!(matches!(plan.choice, Choice::Simple(_)), "{plan}");
    assert!(plan.to_string().contains("32-bit"));
}

#[test]
fn mat_vecs_read_16_byte_words_where_the_knobs_and_rows_allow() {
    let d = nvidia((16, 16, 16));
    let on = Knobs::parse("vec_float_vec4=1,vec_int_a_vec4=all").unwrap();
    let case = |a_type, n, a_align| Problem {
        a_type,
        b_type: GgmlType::F32,
        m: 4096,
        n,
        k: 14336,
        batches: 1,
        a_batches: 1,
        a_align,
        b_align: 16,
        b_contiguous: true,
        dst_bytes: 4096 * n * 4,
        b_prologue: BPrologue::None,
        dst_epilogue: DstEpilogue::None,
    };
    for (a_type, n, a_align, expected) in [
        (GgmlType::F16, 1, 16, true),
        (GgmlType::F32, 8, 16, true),
        (GgmlType::BF16, 4, 16, true),
        (GgmlType::F16, 1, 4, false),
        (GgmlType::Q4_K, 1, 16, true),
        (GgmlType::Q5_K, 1, 16, true),
        (GgmlType::Q4_K, 1, 4, false),
        // The slot kernel and other formats keep 4-byte reads.
        (GgmlType::Q4_K, 2, 16, false),
        (GgmlType::Q4_0, 1, 16, true),
        (GgmlType::Q8_0, 1, 16, true),
        (GgmlType::Q8_0, 1, 4, false),
        (GgmlType::Q6_K, 1, 16, true),
        (GgmlType::Q6_K, 1, 4, false),
    ] {
        let p = case(a_type, n, a_align);
        let q = planned(&p, &d, &on);
        assert!(matches!(q.choice, Choice::MatVec(MatVecPlan { .. })), "{q}");
        assert_eq!(q.a_vec4, expected, "{a_type} n={n} a_align={a_align}: {q}");
        // The float kernel's 16-byte steps read b by words too.
        if expected && !a_type.is_quantized() {
            assert!(q.b_vec4, "{q}");
        }
        // The default (2): on GPUs only, and of the quantized formats the K-quants only
        // (q4_0 and q8_0 measured slower in units of 8 blocks).
        let by_device = expected && !matches!(a_type, GgmlType::Q4_0 | GgmlType::Q8_0);
        assert_eq!(planned(&p, &d, &Knobs::none()).a_vec4, by_device, "{a_type} n={n}");
        assert!(!planned(&p, &lavapipe(), &Knobs::none()).a_vec4);
        let off = Knobs::parse("vec_float_vec4=0,vec_int_a_vec4=none").unwrap();
        assert!(!planned(&p, &d, &off).a_vec4);
    }
    // q6_K rows are whole 16-byte words only when k is a multiple of 2048 (8 blocks).
    let q6 = Problem {
        k: 14336 - 256,
        ..case(GgmlType::Q6_K, 1, 16)
    };
    assert!(!planned(&q6, &d, &on).a_vec4);
}

#[test]
fn large_grids_split_in_two_dimensions() {
    let d = nvidia((16, 16, 16));
    let mut p = problem(GgmlType::F16, 16416, 1, 128);
    p.batches = 32;
    let plan = planned(&p, &d, &Knobs::none());
    let groups = 16416u32.div_ceil(4) * 32;
    assert!(groups > 65535);
    let [x, y, z] = plan.grid;
    assert!(x <= 65535 && y > 1 && z == 1 && x * y >= groups, "{plan}");
}

#[test]
fn overrides_apply_on_the_profile_and_nonsense_is_refused_naming_the_knob() {
    let mut t = profiles::mul_mat(DeviceClass::NvidiaHopper);
    t.apply("vec_rows=8/16, sg_tk=32").unwrap();
    assert_eq!((t.vec_rows, t.sg_tk), (Pair(8, 16), 32));
    let round = {
        let mut r = profiles::mul_mat(DeviceClass::Cpu);
        r.apply(&t.to_string()).unwrap();
        r
    };
    assert_eq!(round, t);
    for (bad, name) in [
        ("tiled_wg=4294967295/1", "tiled_wg"),
        ("vec_rows=100000/1", "vec_rows"),
        ("vec_max_n=100000", "vec_max_n"),
        ("sg_counts=100000/1", "sg_counts"),
        ("sg_tk=4294967295", "sg_tk"),
        ("sg_tk=0", "sg_tk"),
        ("sg_acc_f16=2", "sg_acc_f16"),
        ("tiled_thread=1000/1", "tiled_thread"),
        ("tiled_tk=1024", "tiled_tk"),
        ("tiled_tk=24", "tiled_tk"),
        ("vec_groups=2048/1", "vec_groups"),
        ("vec_wg=100", "vec_wg"),
        ("sg_pad=4", "sg_pad"),
        ("sg_stages=3", "sg_stages"),
        ("sg_prefetch=3", "sg_prefetch"),
        ("sg_a_f16_min_n=1048577", "sg_a_f16_min_n"),
        ("sg_b_f16_min_n=0", "sg_b_f16_min_n"),
        ("b_vec4=2", "b_vec4"),
        ("vec_int_a_vec4=q9_K", "vec_int_a_vec4"),
        ("vec_int_prefetch=q4_0@0", "vec_int_prefetch"),
        ("vec_int_groups_q6k=6", "vec_int_groups_q6k"),
        ("vec_int_slots_min_n=0", "vec_int_slots_min_n"),
        ("vec_acc_max=80/0", "vec_acc_max"),
        ("sg_scratch_max=0", "sg_scratch_max"),
        ("vec_int_b_wg_max_values=0", "vec_int_b_wg_max_values"),
        ("vec_int_b_wg_max_values=4294967296", "vec_int_b_wg_max_values"),
        ("vec_rope_set_rows=maybe", "vec_rope_set_rows"),
        ("vec_int_pass_rms_norm=2", "vec_int_pass_rms_norm"),
        ("nope=1", "known: vec_max_n"),
        ("vec_rows=1/1,vec_rows=2/2", "twice"),
    ] {
        let err = Knobs::parse(bad).unwrap_err();
        assert!(err.contains(name), "{bad}: {err}");
    }
    // No probe knobs without the feature.
    #[cfg(not(feature = "probes"))]
    assert!(!MulMatTuning::NAMES.iter().any(|n| n.contains("probe")));
}

/// Every knob at its extremes plans without a panic, on every kind of device.
#[test]
fn knobs_at_their_extremes_plan_without_overflow() {
    for extremes in [
        "vec_max_n=0,vec_wg=1,vec_rows=1/1,vec_rows_k=1/1,vec_groups=1/1,vec_acc_max=1/1,vec_int_max_n=0,\
         vec_int_rows=1/1,vec_int_groups=1/1,vec_int_groups_q6k=1,vec_int_slots_min_n=1,vec_int_slot_rows=1/1,\
         vec_int_slot_rows_q36=1,vec_int_slot_groups=1/1,small_n_max=0,sg_counts=1/1,sg_tile=1/1,sg_small=1/1,\
         sg_tk=1,sg_pad=0,sg_stages=1,sg_prefetch=0,sg_a_f16_min_n=1,sg_b_f16_min_n=1,sg_acc_regs=1,\
         sg_scratch_max=1,tiled_wg=1/1,tiled_thread=1/1,tiled_tk=8,tiled_pad=0,vec_int_b_wg_max_values=1",
        "vec_max_n=64,vec_wg=1024,vec_rows=64/64,vec_rows_k=64/64,vec_groups=1024/1024,vec_acc_max=4096/4096,\
         vec_int_max_n=64,vec_int_rows=64/64,vec_int_groups=1024/1024,vec_int_groups_q6k=1024,\
         vec_int_slots_min_n=65,vec_int_slot_rows=64/64,vec_int_slot_rows_q36=64,vec_int_slot_groups=1024/1024,\
         small_n_max=1024,sg_counts=64/64,sg_tile=1024/1024,sg_small=64/64,sg_tk=512,sg_pad=64,sg_stages=2,\
         sg_prefetch=2,sg_a_f16_min_n=1048576,sg_b_f16_min_n=1048576,sg_acc_regs=1024,sg_scratch_max=1024,\
         tiled_wg=1024/1024,tiled_thread=16/16,tiled_tk=256,tiled_pad=64,vec_words=all,vec_int_a_vec4=all,\
         vec_int_prefetch=all,b_vec4=always,vec_int_b_wg_max_k=4096,vec_int_b_wg_max_values=4294967295",
    ] {
        let k = Knobs::parse(extremes).unwrap();
        for d in [
            nvidia((16, 16, 16)),
            lavapipe(),
            presets::without_subgroup_matrix(lavapipe()),
            presets::apple(),
        ] {
            for n in [1, 8, 64, 300] {
                let _ = planned(&problem(GgmlType::Q4_K, 4096, n, 4096), &d, &k);
                let _ = planned(&problem(GgmlType::F16, 1000, n, 999), &d, &k);
            }
        }
    }
}

/// The ops fused into the integer mat-vec's b: in its workgroups where it quantizes b there,
/// else in its quantize pass, where the knobs, b's type and the norm's reduction allow.
#[test]
fn prologues_go_to_the_workgroups_or_the_pass() {
    let d = presets::h100();
    let reduce = NormReduce {
        group: 256,
        vec4: true,
        subgroups: true,
    };
    let norm = BPrologue::RmsNorm { residual: true, reduce };
    let with = |p: Problem, b_prologue| Problem { b_prologue, ..p };
    // SmolLM2's k: in the workgroups, no pass.
    let small = planned(&with(problem(GgmlType::Q4_1, 960, 1, 576), norm), &d, &Knobs::none());
    assert!(small.prologue_in_workgroup() && small.quantize_b.is_none(), "{small}");
    // Llama-3-8B's k: the pass applies it, the mat-vec reads its blocks.
    let large = planned(&with(problem(GgmlType::Q4_0, 6144, 1, 4096), norm), &d, &Knobs::none());
    assert!(large.applies_prologue() && !large.prologue_in_workgroup(), "{large}");
    let q = large.quantize_b.expect("a quantize pass");
    assert!(q.prologue && q.wg_size == 256 && q.grid[0] * q.grid[1] == 1, "{large}");
    assert!(
        large.to_string().contains("after the residual ADD and RMS_NORM"),
        "{large}"
    );
    // The SWIGLU in the pass keeps a thread a block.
    let swiglu = planned(
        &with(problem(GgmlType::Q4_0, 4096, 1, 14336), BPrologue::Swiglu),
        &d,
        &Knobs::none(),
    );
    let q = swiglu.quantize_b.expect("a quantize pass");
    assert!(q.prologue && q.wg_size == QUANTIZE_WG, "{swiglu}");
    // Not applied: the knobs off, an f16 b, a norm over several batches or with a group past
    // the device's threads, a subgroup reduction on a device without subgroups.
    let off = Knobs::parse("vec_int_pass_swiglu=false,vec_int_pass_rms_norm=false").unwrap();
    for (what, p, dev, knobs) in [
        ("knobs off", with(problem(GgmlType::Q4_0, 6144, 1, 4096), norm), d, &off),
        (
            "f16 b",
            Problem {
                b_type: GgmlType::F16,
                ..with(problem(GgmlType::Q4_0, 6144, 1, 4096), norm)
            },
            d,
            &Knobs::none(),
        ),
        (
            "two batches",
            Problem {
                batches: 2,
                ..with(problem(GgmlType::Q4_0, 6144, 1, 4096), norm)
            },
            d,
            &Knobs::none(),
        ),
        (
            "a group of 4096 threads",
            with(
                problem(GgmlType::Q4_0, 6144, 1, 4096),
                BPrologue::RmsNorm {
                    residual: false,
                    reduce: NormReduce { group: 4096, ..reduce },
                },
            ),
            d,
            &Knobs::none(),
        ),
        (
            "no subgroups",
            with(problem(GgmlType::Q4_0, 6144, 1, 4096), norm),
            DeviceFacts {
                subgroups: false,
                subgroup_matrix: None,
                ..d
            },
            &Knobs::none(),
        ),
    ] {
        let plan = planned(&p, &dev, knobs);
        assert!(!plan.applies_prologue(), "{what}: {plan}");
        assert!(
            plan.quantize_b.is_none_or(|q| !q.prologue && q.wg_size == QUANTIZE_WG),
            "{what}: {plan}"
        );
    }
}

/// The ROPE and KV write after the mat-vec: where its workgroups' rows pair up, m is even and
/// there is one batch, with the knob on; never on the other kernels.
#[test]
fn the_rope_epilogue_needs_paired_rows() {
    let d = presets::h100();
    let epilogue = DstEpilogue::RopeSetRows {
        freq_factors: false,
        cache_f16: true,
    };
    let with = |p: Problem| Problem {
        dst_epilogue: epilogue,
        ..p
    };
    let qkv = planned(&with(problem(GgmlType::Q4_1, 960, 1, 576)), &d, &Knobs::none());
    assert!(qkv.applies_epilogue(), "{qkv}");
    assert!(qkv.to_string().contains("ROPE and the KV-cache write"), "{qkv}");
    let one_row = Knobs::parse("vec_int_rows=1/1,vec_int_groups=1/1").unwrap();
    for (what, p, knobs) in [
        (
            "knob off",
            with(problem(GgmlType::Q4_1, 960, 1, 576)),
            Knobs::parse("vec_rope_set_rows=false").unwrap(),
        ),
        ("odd m", with(problem(GgmlType::Q4_1, 961, 1, 576)), Knobs::none()),
        (
            "two batches",
            Problem {
                batches: 2,
                ..with(problem(GgmlType::Q4_1, 960, 1, 576))
            },
            Knobs::none(),
        ),
        ("a row a workgroup", with(problem(GgmlType::Q4_1, 960, 1, 576)), one_row),
        ("the GEMM", with(problem(GgmlType::Q4_1, 960, 512, 576)), Knobs::none()),
    ] {
        let plan = planned(&p, &d, &knobs);
        assert!(!plan.applies_epilogue(), "{what}: {plan}");
    }
}

/// The bound on the values the grid quantizes again: Llama-3-8B's q/k/v (768 workgroups of
/// 8 rows at k = 4096) within 4M values quantize b in their workgroups, its gate and up (3584
/// workgroups) keep the pass.
#[test]
fn a_tall_matrix_keeps_its_quantize_pass_under_a_bound() {
    let d = presets::h100();
    let k = Knobs::parse("vec_int_b_wg_max_k=4096,vec_int_b_wg_max_values=4194304").unwrap();
    let in_wg = |m| match planned(&problem(GgmlType::Q4_0, m, 1, 4096), &d, &k).choice {
        Choice::MatVec(v) => v.int_b_in_workgroup,
        other => panic!("{other:?}"),
    };
    assert!(in_wg(6144));
    assert!(!in_wg(28672));
    // No bound: both in the workgroups.
    let unbounded = Knobs::parse("vec_int_b_wg_max_k=4096").unwrap();
    let plan = planned(&problem(GgmlType::Q4_0, 28672, 1, 4096), &d, &unbounded);
    assert!(
        matches!(&plan.choice, Choice::MatVec(v) if v.int_b_in_workgroup),
        "{plan}"
    );
}
