//! MUL_MAT as ggml defines it: `dst[m, n, i2, i3] = Σ_k a[k, m, i2/r2, i3/r3] · b[k, n, i2, i3]`,
//! with src0 (`a`) of any supported type broadcast over dims 2 and 3, src1 (`b`) f32 or f16
//! (any strides), and a contiguous f32 `dst`.
//!
//! [`plan`] picks the kernel and its tiles from the shapes and the device (mat-vec for a few
//! columns, subgroup matrices or register tiles for the rest, the simple kernel for what those
//! cannot address); [`encode`] binds and dispatches it. The planner's knobs can be overridden
//! through the environment variable `GGML_DAWN_MUL_MAT` (`name=value,…`, see
//! [`plan::Tuning`]), read once per process.

pub mod encode;
pub mod plan;

use std::sync::OnceLock;

use dawn::ComponentType;

use crate::context::GpuContext;
use crate::error::{BackendError, Result};
use crate::exec::Stream;
use crate::ggml_type::GgmlType;
use crate::memory::DeviceTensor;
use crate::ops::dequantize;
use crate::tensor::Layout;

pub use plan::{DeviceFacts, MatrixConfig, MulMatPlan, Path, Problem, Tuning};

/// The environment variable with knob overrides.
pub const TUNING_ENV: &str = "GGML_DAWN_MUL_MAT";

/// Why `a × b` cannot run here, if it cannot (from the layouts alone).
pub fn check(la: &Layout, lb: &Layout, ld: &Layout) -> Result<()> {
    if !dequantize::supports(la.ty) {
        return Err(BackendError::Unsupported(format!(
            "MUL_MAT with src0 of type {}",
            la.ty
        )));
    }
    if !matches!(lb.ty, GgmlType::F32 | GgmlType::F16) {
        return Err(BackendError::Unsupported(format!(
            "MUL_MAT with src1 of type {}",
            lb.ty
        )));
    }
    if la.ne[0] != lb.ne[0] {
        return Err(BackendError::InvalidOperands(format!(
            "MUL_MAT: src0 has k={}, src1 k={}",
            la.ne[0], lb.ne[0]
        )));
    }
    if la.ne[2] == 0 || la.ne[3] == 0 || !lb.ne[2].is_multiple_of(la.ne[2]) || !lb.ne[3].is_multiple_of(la.ne[3]) {
        return Err(BackendError::InvalidOperands(format!(
            "MUL_MAT: src1 batch {:?} is not a multiple of src0 batch {:?}",
            &lb.ne[2..],
            &la.ne[2..]
        )));
    }
    if !la.has_contiguous_rows() {
        return Err(BackendError::Unsupported(
            "MUL_MAT with src0 rows that are not contiguous".into(),
        ));
    }
    let want = [la.ne[1], lb.ne[1], lb.ne[2], lb.ne[3]];
    if ld.ty != GgmlType::F32 || !ld.is_contiguous() || ld.ne != want {
        return Err(BackendError::InvalidOperands(format!(
            "MUL_MAT: dst must be contiguous f32 {want:?}, is {ld:?}"
        )));
    }
    Ok(())
}

/// Records `dst = a × b`.
pub fn mul_mat(
    ctx: &GpuContext,
    stream: &mut Stream,
    a: &DeviceTensor,
    b: &DeviceTensor,
    dst: &DeviceTensor,
) -> Result<()> {
    let tuning = env_tuning()?;
    mul_mat_with(ctx, stream, a, b, dst, &device_facts(ctx), tuning)
}

/// [`mul_mat`] planned for other device facts or knobs than `ctx`'s own: a device with fewer
/// capabilities (no subgroups, less workgroup memory, no subgroup matrices) or other tiles.
/// The facts must not claim more than the device has.
pub fn mul_mat_with(
    ctx: &GpuContext,
    stream: &mut Stream,
    a: &DeviceTensor,
    b: &DeviceTensor,
    dst: &DeviceTensor,
    facts: &DeviceFacts,
    tuning: &Tuning,
) -> Result<()> {
    check(a.layout(), b.layout(), dst.layout())?;
    if dst.layout().elements() == 0 {
        return Ok(());
    }
    let bound = encode::Bindings::new(ctx, a, b, dst)?;
    let problem = problem(a.layout(), b.layout(), bound.a.start_byte, bound.b.start_byte);
    let plan = plan::plan(&problem, facts, tuning);
    encode::encode(ctx, stream, a, b, dst, &bound, &problem, &plan)
}

/// The plan [`mul_mat`] would follow for tensors of these layouts (views placed at their
/// layout's offset from a binding-aligned base, as `memory::upload` places tensors).
pub fn plan_for(ctx: &GpuContext, la: &Layout, lb: &Layout, ld: &Layout) -> Result<MulMatPlan> {
    check(la, lb, ld)?;
    let align = u64::from(ctx.capabilities.limits.min_storage_buffer_offset_alignment.max(1));
    let p = problem(la, lb, la.offset as u64 % align, lb.offset as u64 % align);
    Ok(plan::plan(&p, &device_facts(ctx), tuning()))
}

/// The path and tiles [`mul_mat`] chooses for these layouts, in words (for `backend-ops test -v`).
pub fn describe(ctx: &GpuContext, a: &Layout, b: &Layout, dst: &Layout) -> String {
    match plan_for(ctx, a, b, dst) {
        Ok(plan) => format!("MUL_MAT {}x{}: {plan}", a.ty, b.ty),
        Err(e) => format!("MUL_MAT not run: {e}"),
    }
}

/// The device as the planner sees it. The accumulators are f32 where the adapter offers the
/// chosen f16 shape with f32 results too.
pub fn device_facts(ctx: &GpuContext) -> DeviceFacts {
    let caps = &ctx.capabilities;
    let limits = &caps.limits;
    let offers =
        |c: &dawn::SubgroupMatrixConfig, result: ComponentType| {
            c.result == result
                || caps.info.subgroup_matrix_configs.iter().any(|o| {
                    (o.m, o.n, o.k) == (c.m, c.n, c.k) && o.component == ComponentType::F16 && o.result == result
                })
        };
    let subgroup_matrix = caps.subgroup_matrix.map(|c| MatrixConfig {
        m: c.m,
        n: c.n,
        k: c.k,
        f32_result: offers(&c, ComponentType::F32) && !(tuning().sg_acc_f16 == 1 && offers(&c, ComponentType::F16)),
    });
    DeviceFacts {
        shader_f16: caps.shader_f16,
        subgroups: caps.subgroups,
        subgroup_min_size: caps.info.subgroup_min_size,
        subgroup_max_size: caps.info.subgroup_max_size,
        subgroup_matrix,
        max_workgroup_storage: limits.max_compute_workgroup_storage_size,
        max_invocations: limits.max_compute_invocations_per_workgroup,
        max_workgroup_size_x: limits.max_compute_workgroup_size_x,
        max_workgroups_per_dim: limits.max_compute_workgroups_per_dimension,
        max_storage_binding: limits.max_storage_buffer_binding_size,
    }
}

/// The knobs: defaults, with the overrides of [`TUNING_ENV`]; the defaults when its value is
/// invalid ([`env_tuning`] says why, and [`mul_mat`] refuses to run then).
pub fn tuning() -> &'static Tuning {
    static DEFAULT: OnceLock<Tuning> = OnceLock::new();
    env_tuning().unwrap_or_else(|_| DEFAULT.get_or_init(Tuning::default))
}

/// The knobs of [`TUNING_ENV`] (read once per process), or why its value is invalid.
pub fn env_tuning() -> Result<&'static Tuning> {
    static TUNING: OnceLock<std::result::Result<Tuning, String>> = OnceLock::new();
    TUNING
        .get_or_init(|| match std::env::var(TUNING_ENV) {
            Ok(text) => Tuning::parse(&text),
            Err(std::env::VarError::NotPresent) => Ok(Tuning::default()),
            Err(std::env::VarError::NotUnicode(_)) => Err("the value is not UTF-8".into()),
        })
        .as_ref()
        .map_err(|message| BackendError::Config {
            name: TUNING_ENV,
            message: message.clone(),
        })
}

/// The planner's view of one MUL_MAT whose operands start `a_start` and `b_start` bytes into
/// their bindings.
pub fn problem(la: &Layout, lb: &Layout, a_start: u64, b_start: u64) -> Problem {
    let align = |start: u64, strides: &[usize]| {
        let all = strides.iter().fold(start, |acc, &s| acc | s as u64);
        if all % 16 == 0 {
            16
        } else if all % 4 == 0 {
            4
        } else if all % 2 == 0 {
            2
        } else {
            1
        }
    };
    Problem {
        a_type: la.ty,
        b_type: lb.ty,
        m: la.ne[1] as u64,
        n: lb.ne[1] as u64,
        k: la.ne[0] as u64,
        batches: (lb.ne[2] as u64).saturating_mul(lb.ne[3] as u64),
        a_align: align(a_start, &la.nb[1..]),
        b_align: align(b_start, &lb.nb),
        b_contiguous: lb.nb[0] == lb.ty.type_size(),
    }
}
