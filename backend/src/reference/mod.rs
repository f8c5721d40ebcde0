//! The CPU reference: ggml's op semantics computed plainly, with f64 accumulation, from
//! [`HostTensor`]s of any layout. It is the ground truth every GPU result is compared with (by
//! [`metric::check`], upstream's NMSE rules).
//!
//! - [`mul_mat()`]: `dst[m, n, i2, i3] = Σ_k a[k, m, i2/r2, i3/r3] · b[k, n, i2, i3]`.
//! - [`flash_attn_ext()`]: softmax(q·kᵀ·scale (+ softcap, ALiBi mask, sinks)) · v.
//!
//! A decoder's other ops, each as ggml's CPU computes it:
//!
//! - [`get_rows()`]: rows gathered by id, dequantized;
//! - [`rms_norm()`] and the fused [`rms_norm_mul_add()`];
//! - [`binary()`]: ADD, SUB, MUL, DIV with `b` repeated over `a`;
//! - [`rope()`]: rotary embedding, normal/NeoX/multi-section, YaRN, frequency factors;
//! - [`glu()`]: REGLU, GEGLU, SWIGLU, SWIGLU_OAI, GEGLU_ERF, GEGLU_QUICK, fused or split;
//! - [`set_rows()`]: rows scattered into any type (the KV cache), and [`cpy()`] between types
//!   and views;
//! - [`scale()`]: `x·s + b`;
//! - [`soft_max()`]: with mask, sinks and ALiBi;
//! - [`argmax()`]: the index of each row's maximum.

pub mod argmax;
pub mod binary;
pub mod copy;
mod cpu_quant;
mod elements;
pub mod flash_attn;
pub mod get_rows;
pub mod glu;
pub mod metric;
pub mod mul_mat;
pub mod norm;
pub mod rope;
pub mod rows;
pub mod scale;
pub mod soft_max;

pub use flash_attn::flash_attn_ext;
pub use metric::{Mismatch, check, nmse};
pub use mul_mat::mul_mat;

pub use argmax::argmax;
pub use binary::{BinaryOp, binary};
pub use copy::cpy;
pub use get_rows::get_rows;
pub use glu::{GluOp, GluParams, glu};
pub use norm::{RmsNormParams, rms_norm, rms_norm_mul_add};
pub use rope::{RopeMode, RopeParams, rope};
pub use rows::set_rows;
pub use scale::{ScaleParams, scale};
pub use soft_max::{SoftMaxParams, soft_max};

use crate::format::FormatError;
use crate::tensor::HostTensor;

/// Why a reference computation could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error("{op}: {reason}")]
    Shape { op: &'static str, reason: String },
    #[error("{op}: reading {tensor}: {source}")]
    Format {
        op: &'static str,
        tensor: &'static str,
        #[source]
        source: FormatError,
    },
}

/// The result of a reference computation.
pub type Result<T> = std::result::Result<T, ReferenceError>;

fn shape_error<T>(op: &'static str, reason: impl Into<String>) -> Result<T> {
    Err(ReferenceError::Shape {
        op,
        reason: reason.into(),
    })
}

/// Row `(i1, i2, i3)` of `t` as f32, with errors naming the op and the tensor.
fn row(op: &'static str, tensor: &'static str, t: &HostTensor, i1: usize, i2: usize, i3: usize) -> Result<Vec<f32>> {
    t.row_f32(i1, i2, i3)
        .map_err(|source| ReferenceError::Format { op, tensor, source })
}

/// Rows `0..ne1` of `t` at `(i2, i3)`, concatenated.
fn matrix(op: &'static str, tensor: &'static str, t: &HostTensor, i2: usize, i3: usize) -> Result<Vec<f32>> {
    let mut out = Vec::with_capacity(t.layout.ne[0] * t.layout.ne[1]);
    for i1 in 0..t.layout.ne[1] {
        out.extend(row(op, tensor, t, i1, i2, i3)?);
    }
    Ok(out)
}

/// The dot product of two equally long f32 slices, accumulated in f64.
fn dot(a: &[f32], b: &[f32]) -> f64 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0.0f64; 4];
    let (mut ca, mut cb) = (a.chunks_exact(4), b.chunks_exact(4));
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..4 {
            acc[i] += f64::from(x[i]) * f64::from(y[i]);
        }
    }
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// `f(0..n)` on all cores, results in order; the first error (by index) wins.
fn parallel_map<T: Send>(n: usize, f: impl Fn(usize) -> Result<T> + Sync) -> Result<Vec<T>> {
    let threads = std::thread::available_parallelism().map_or(1, |p| p.get()).min(n);
    if threads <= 1 {
        return (0..n).map(f).collect();
    }
    let f = &f;
    let per_thread: Vec<Vec<Result<T>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| s.spawn(move || (t..n).step_by(threads).map(f).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    let mut iters: Vec<_> = per_thread.into_iter().map(Vec::into_iter).collect();
    (0..n)
        .map(|i| iters[i % threads].next().expect("each index was computed once"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_accumulates_in_f64() {
        let a = [1e8f32, 1.0, -1e8, 1.0, 0.5];
        let b = [1.0f32; 5];
        assert_eq!(dot(&a, &b), 2.5);
    }

    mod props {
        use super::super::*;
        use crate::ggml_type::GgmlType;
        use crate::tensor::Layout;
        use proptest::prelude::*;

        /// A tensor of a random type and extents, with random strides and offset over random
        /// bytes: often a layout its data does not hold.
        fn any_tensor() -> impl Strategy<Value = HostTensor> {
            (
                prop::sample::select(vec![
                    GgmlType::F32,
                    GgmlType::F16,
                    GgmlType::I32,
                    GgmlType::I64,
                    GgmlType::Q4_0,
                ]),
                prop::array::uniform4(0usize..5),
                prop::option::of(prop::array::uniform4(0usize..64)),
                0usize..16,
                0usize..300,
            )
                .prop_map(|(ty, mut ne, nb, offset, bytes)| {
                    if ty == GgmlType::Q4_0 {
                        ne[0] *= 32;
                    }
                    let mut layout = Layout::contiguous(ty, ne).unwrap();
                    if let Some(nb) = nb {
                        layout.nb = nb;
                        layout.offset = offset;
                    }
                    HostTensor {
                        layout,
                        data: (0..bytes).map(|i| (i * 37 % 251) as u8).collect(),
                    }
                })
        }

        fn any_f32() -> impl Strategy<Value = f32> {
            prop_oneof![-4.0f32..4.0, Just(f32::NAN), Just(f32::INFINITY), Just(0.0)]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            /// Whatever the tensors and parameters, every reference answers a value or an error.
            #[test]
            fn references_never_panic(
                a in any_tensor(),
                b in any_tensor(),
                c in any_tensor(),
                x in any_f32(),
                y in any_f32(),
                n_dims in 0usize..8,
                mode in prop::sample::select(vec![0, 2, 8, 24, 40]),
                sections in prop::array::uniform4(0usize..3),
                n_offs in 0usize..4,
                swapped in any::<bool>(),
            ) {
                let _ = get_rows(&a, &b);
                let _ = rms_norm(&a, RmsNormParams { eps: x });
                let _ = rms_norm_mul_add(&a, Some(&b), Some(&c), RmsNormParams { eps: x });
                for op in BinaryOp::ALL {
                    let _ = binary(op, &a, &b);
                }
                let mut p = RopeParams::new(n_dims, RopeMode::from_ggml(mode).unwrap());
                p.sections = sections;
                p.n_offs = n_offs;
                p.ext_factor = y;
                let _ = rope(&a, &b, Some(&c), &p);
                for op in GluOp::ALL {
                    let g = GluParams { swapped, limit: y, ..GluParams::new(op) };
                    let _ = glu(&a, None, &g);
                    let _ = glu(&a, Some(&b), &g);
                }
                let _ = set_rows(&a, &b, &c);
                let _ = cpy(&a, &b);
                let _ = scale(&a, ScaleParams { scale: x, bias: y });
                let _ = soft_max(&a, Some(&b), Some(&c), SoftMaxParams { scale: x, max_bias: y });
                let _ = argmax(&a);
            }
        }
    }

    #[test]
    fn parallel_map_keeps_order_and_errors() {
        let v = parallel_map(100, |i| Ok(i * 2)).unwrap();
        assert_eq!(v, (0..100).map(|i| i * 2).collect::<Vec<_>>());
        let e = parallel_map(10, |i| {
            if i >= 3 {
                shape_error("X", format!("{i}"))
            } else {
                Ok(i)
            }
        });
        assert_eq!(
            e,
            Err(ReferenceError::Shape {
                op: "X",
                reason: "3".into()
            })
        );
    }
}
