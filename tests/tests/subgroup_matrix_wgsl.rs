//! The subgroup-matrix WGSL the shaders use, against the linked Dawn.
//!
//! Dawn's WGSL for subgroup matrices changed during 2026: the load and store forms that took the
//! majorness as a `bool` argument were deprecated, then replaced, by forms that take it as a
//! template parameter (`row_major` / `col_major`). The shaders use only the new forms, which
//! Debian's Dawn and the submodule's pin both accept. These tests compile the forms the shaders
//! use, and every subgroup-matrix variant the planners produce for this device, and fail on any
//! error or deprecation warning: a Dawn that drops or deprecates a form the shaders rely on shows
//! up here (the static check of the removed forms is in `ggml_dawn::variants`' tests).

use dawn::{Device, MessageKind};
use ggml_dawn::variants;
use ggml_dawn::{ContextOptions, GpuContext};

/// The backend's context, when its device has subgroup matrices (lavapipe does).
fn context() -> Option<GpuContext> {
    let ctx = GpuContext::new(ContextOptions::default()).expect("context");
    if ctx.facts().subgroup_matrix.is_none() {
        eprintln!("skipped: the adapter has no f16 subgroup matrices");
        return None;
    }
    Some(ctx)
}

/// Compiles `wgsl`; fails on errors and on deprecation warnings.
fn compile_cleanly(device: &Device, label: &str, wgsl: &str) {
    let module = device
        .create_shader_module(Some(label), wgsl)
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let messages = module.compilation_messages(device).expect("compilation messages");
    let bad: Vec<String> = messages
        .iter()
        .filter(|m| m.kind == MessageKind::Error || m.message.contains("deprecated"))
        .map(|m| format!("{}:{}: {}", m.line, m.column, m.message))
        .collect();
    assert!(bad.is_empty(), "{label}: {bad:#?}");
}

/// Every form the shaders use: loads of left and right matrices from an f16 storage array and
/// from 16-byte chunks of workgroup memory, row- and column-major; stores of f32 results to
/// scalar and vector arrays in storage and workgroup memory; a result loaded back.
fn forms(m: u32, n: u32, k: u32) -> String {
    format!(
        "enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
alias L = subgroup_matrix_left<f16, {k}, {m}>;
alias R = subgroup_matrix_right<f16, {n}, {k}>;
alias S = subgroup_matrix_result<f32, {n}, {m}>;
@group(0) @binding(0) var<storage, read> a: array<f16>;
@group(0) @binding(1) var<storage, read_write> d: array<f32>;
@group(0) @binding(2) var<storage, read_write> d4: array<vec4<f32>>;
var<workgroup> chunks: array<vec4<u32>, 256>;
var<workgroup> scratch: array<f32, 1024>;
@compute @workgroup_size(64)
fn main() {{
    let l0 = subgroupMatrixLoad<L, row_major>(&a, 0u, {k}u);
    let l1 = subgroupMatrixLoad<L, row_major>(&chunks, 0u, {kc}u);
    let r0 = subgroupMatrixLoad<R, col_major>(&chunks, 64u, {kc}u);
    let r1 = subgroupMatrixLoad<R, row_major>(&a, 512u, {n}u);
    var acc = subgroupMatrixMultiplyAccumulate(l0, r0, S());
    acc = subgroupMatrixMultiplyAccumulate(l1, r1, acc);
    subgroupMatrixStore<col_major>(&d, 0u, acc, {m}u);
    subgroupMatrixStore<col_major>(&scratch, 0u, acc, {m}u);
    subgroupMatrixStore<row_major>(&d4, 0u, acc, {nc}u);
    workgroupBarrier();
    let back = subgroupMatrixLoad<S, row_major>(&d4, 0u, {nc}u);
    subgroupMatrixStore<row_major>(&d4, 64u, back, {nc}u);
    d[1000] = scratch[0];
}}",
        kc = (k / 8).max(1),
        nc = (n / 4).max(1),
    )
}

#[test]
fn the_subgroup_matrix_forms_the_shaders_use_compile_without_deprecations() {
    let Some(ctx) = context() else { return };
    let c = ctx.facts().subgroup_matrix.unwrap();
    // SAFETY: only compiles shader modules; nothing is dispatched.
    let device = unsafe { ctx.device() };
    compile_cleanly(device, "forms", &forms(c.m, c.n, c.k));
}

#[test]
fn the_removed_bool_forms_are_no_longer_clean() {
    // The check above would see the old forms: Dawn rejects them or calls them deprecated.
    let Some(ctx) = context() else { return };
    let c = ctx.facts().subgroup_matrix.unwrap();
    let old = format!(
        "enable f16;
enable chromium_experimental_subgroup_matrix;
@group(0) @binding(0) var<storage, read_write> d: array<f32>;
@group(0) @binding(1) var<storage, read> a: array<f16>;
@compute @workgroup_size(64)
fn main() {{
    let l = subgroupMatrixLoad<subgroup_matrix_left<f16, {k}, {m}>>(&a, 0u, false, {k}u);
    let r = subgroupMatrixLoad<subgroup_matrix_right<f16, {n}, {k}>>(&a, 0u, true, {k}u);
    let acc = subgroupMatrixMultiply<f32>(l, r);
    subgroupMatrixStore(&d, 0u, acc, true, {m}u);
}}",
        m = c.m,
        n = c.n,
        k = c.k
    );
    // SAFETY: only compiles shader modules.
    let device = unsafe { ctx.device() };
    let flagged = match device.create_shader_module(Some("old forms"), &old) {
        Err(_) => true,
        Ok(module) => module
            .compilation_messages(device)
            .unwrap()
            .iter()
            .any(|m| m.kind == MessageKind::Error || m.message.contains("deprecated")),
    };
    assert!(
        flagged,
        "this Dawn accepts the bool forms silently: the drift check cannot tell them apart"
    );
}

/// The defines that change how the subgroup-matrix kernels load, multiply and store matrices
/// (the rest change sizes and operand decoding, which the op tests cover).
const MATRIX_DEFINES: &[&str] = &[
    "ACC_F32",
    "DIRECT_STORE",
    "A_VEC4",
    "B_F16",
    "STAGES",
    "Q_REGS",
    "K_VEC",
    "V_VEC",
    "HAS_MASK",
];

#[test]
fn the_subgroup_matrix_kernels_for_this_device_compile_without_deprecations() {
    let Some(ctx) = context() else { return };
    // SAFETY: only compiles shader modules.
    let device = unsafe { ctx.device() };
    // One variant per kernel and combination of the matrix defines, from what the planners
    // produce for this device.
    let mut seen = std::collections::BTreeSet::new();
    for (variant, e) in variants::enumerate(&ctx.facts()) {
        if !matches!(e.path, "subgroup_matrix" | "mma") {
            continue;
        }
        let key: Vec<Option<&String>> = MATRIX_DEFINES.iter().map(|d| variant.defines.get(*d)).collect();
        if !seen.insert((variant.file, format!("{key:?}"))) {
            continue;
        }
        compile_cleanly(device, &variant.to_string(), &variant.render().unwrap());
    }
    assert!(
        !seen.is_empty(),
        "no subgroup-matrix variant for a device that has subgroup matrices"
    );
    eprintln!("{} subgroup-matrix variants compiled", seen.len());
}
