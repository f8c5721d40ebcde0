//! The CPU reference: ggml's op semantics computed plainly, with f64 accumulation, from
//! [`HostTensor`]s of any layout. It is the ground truth every GPU result is compared with (by
//! [`metric::check`], upstream's NMSE rules).
//!
//! - [`mul_mat()`]: `dst[m, n, i2, i3] = Σ_k a[k, m, i2/r2, i3/r3] · b[k, n, i2, i3]`.
//! - [`flash_attn_ext()`]: softmax(q·kᵀ·scale (+ softcap, ALiBi mask, sinks)) · v.

pub mod flash_attn;
pub mod metric;
pub mod mul_mat;

pub use flash_attn::flash_attn_ext;
pub use metric::{Mismatch, check, nmse};
pub use mul_mat::mul_mat;

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
mod golden_tests {
    //! The reference against ggml's own CPU results (the golden GGUF files).

    use super::*;
    use crate::cases::{Case, FlashAttnCase};
    use crate::format::FormatError;
    use crate::gguf::{GgufError, GgufFile};
    use std::path::{Path, PathBuf};

    const DIRS: &[&str] = &[
        concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/golden"),
        "/work/shared/golden",
    ];

    fn golden_files(op: &str) -> Option<Vec<PathBuf>> {
        let dir = DIRS.iter().map(|d| Path::new(d).join(op)).find(|d| d.is_dir());
        let Some(dir) = dir else {
            println!("note: no golden {op} folder in {DIRS:?}; skipping");
            return None;
        };
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no golden files in {}", dir.display());
        Some(files)
    }

    /// The reason to skip a golden file when the error is a type `crate::format` cannot convert
    /// yet; any other error fails the test.
    fn skip_or_panic(e: ReferenceError) -> String {
        match e {
            ReferenceError::Format {
                source: FormatError::Unsupported(ty),
                ..
            } => format!("{ty} is not supported by crate::format yet"),
            other => panic!("{other}"),
        }
    }

    fn tensor(file: &GgufFile, name: &str) -> std::result::Result<HostTensor, String> {
        file.tensor(name).map_err(|e| match e {
            GgufError::UnknownTensorType { id, .. } => format!("tensor `{name}` has type id {id}, unknown to GgmlType"),
            other => panic!("reading `{name}`: {other}"),
        })
    }

    fn optional_tensor(file: &GgufFile, name: &str) -> std::result::Result<Option<HostTensor>, String> {
        if file.header.tensor_info(name).is_err() {
            return Ok(None);
        }
        tensor(file, name).map(Some)
    }

    /// Runs `compute` on each golden file of `op` and checks the result against its `dst`.
    fn run_golden(op: &str, compute: impl Fn(&GgufFile, &Case) -> std::result::Result<Vec<f32>, String>) {
        let Some(files) = golden_files(op) else { return };
        let (mut checked, mut skipped) = (0, 0);
        let mut worst = 0.0f64;
        for path in &files {
            let name = path.file_name().unwrap().to_string_lossy();
            let file = GgufFile::open(path).unwrap_or_else(|e| panic!("{name}: {e}"));
            let case_str = file.metadata().get_str("golden.case").expect("golden.case");
            let case: Case = case_str.parse().unwrap_or_else(|e| panic!("{name}: {case_str}: {e}"));
            let got = match compute(&file, &case) {
                Ok(v) => v,
                Err(reason) => {
                    println!("note: skipping {name}: {reason}");
                    skipped += 1;
                    continue;
                }
            };
            let dst = file.tensor("dst").unwrap().to_f32().unwrap();
            let nmse = check(&dst, &got, 5e-4).unwrap_or_else(|e| panic!("{name} ({case_str}): {e}"));
            worst = worst.max(nmse);
            checked += 1;
        }
        println!("{op}: {checked} golden files match (worst NMSE {worst:.3e}), {skipped} skipped");
        assert!(checked > 0, "no {op} golden file could be checked");
    }

    #[test]
    fn mul_mat_matches_golden_files() {
        run_golden("mul_mat", |file, case| {
            assert!(matches!(case, Case::MulMat(_)));
            let a = tensor(file, "src0")?;
            let b = tensor(file, "src1")?;
            mul_mat(&a, &b).map_err(skip_or_panic)
        });
    }

    #[test]
    fn flash_attn_ext_matches_golden_files() {
        run_golden("flash_attn_ext", |file, case| {
            let Case::FlashAttnExt(c) = case else {
                panic!("not a FLASH_ATTN_EXT case: {case}")
            };
            let c: &FlashAttnCase = c;
            let q = tensor(file, "q")?;
            let k = tensor(file, "k")?;
            let v = tensor(file, "v")?;
            let mask = optional_tensor(file, "mask")?;
            let sinks = optional_tensor(file, "sinks")?;
            assert_eq!(mask.is_some(), c.mask);
            assert_eq!(sinks.is_some(), c.sinks);
            let (scale, max_bias, softcap) = (c.scale(), c.max_bias, c.logit_softcap);
            flash_attn_ext(&q, &k, &v, mask.as_ref(), sinks.as_ref(), scale, max_bias, softcap).map_err(skip_or_panic)
        });
    }
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
