//! Checking against ggml's own results, stored as GGUF files (`tests/data/golden/README.md`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use ggml_dawn::context::GpuContext;
use ggml_dawn::error::{BackendError, Result};
use ggml_dawn::exec::Stream;
use ggml_dawn::format;
use ggml_dawn::ggml_type::GgmlType;
use ggml_dawn::gguf::GgufFile;
use ggml_dawn::ops;
use ggml_dawn::tensor::{HostTensor, Layout};

/// What checking one file found.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Matches; the text says how closely.
    Pass(String),
    /// Does not match; the text says where.
    Fail(String),
    /// This backend or device cannot run it; the text says why.
    Unsupported(String),
}

/// The outcome for one golden file.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub path: PathBuf,
    /// `golden.op` of the file.
    pub op: String,
    /// `golden.case`: upstream's case string (or the type name for QUANT).
    pub case: String,
    pub verdict: Verdict,
}

/// Every `.gguf` file under each path (files are taken as they are), sorted. Folders are
/// walked once each (by device and inode), so links that loop are followed at most once.
pub fn collect(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    use std::collections::HashSet;
    use std::os::unix::fs::MetadataExt;
    let mut files = Vec::new();
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    for path in paths {
        if path.is_dir() {
            let mut stack = vec![path.clone()];
            while let Some(dir) = stack.pop() {
                let meta = std::fs::metadata(&dir)?;
                if !seen.insert((meta.dev(), meta.ino())) {
                    continue;
                }
                for entry in std::fs::read_dir(&dir)? {
                    let p = entry?.path();
                    if p.is_dir() {
                        stack.push(p);
                    } else if p.extension().is_some_and(|e| e == "gguf") {
                        files.push(p);
                    }
                }
            }
        } else {
            files.push(path.clone());
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// The largest golden file read (the checked-in ones are a few MB).
pub const MAX_GOLDEN_BYTES: u64 = 1 << 30;

/// Reads a golden file: a regular file (never a FIFO or device, which could block or never end)
/// of at most [`MAX_GOLDEN_BYTES`] bytes, parsed with memory bounded by its size.
pub fn load(path: &Path) -> Result<GgufFile> {
    let bytes = crate::input_file::read_bytes(path, MAX_GOLDEN_BYTES)
        .map_err(|e| BackendError::InvalidOperands(format!("cannot read {e}")))?;
    GgufFile::from_bytes(&bytes).map_err(|e| BackendError::InvalidOperands(format!("{}: {e}", path.display())))
}

fn text(file: &GgufFile, key: &str) -> Result<String> {
    file.metadata()
        .get_str(key)
        .map(str::to_owned)
        .ok_or_else(|| BackendError::InvalidOperands(format!("the file has no string `{key}`")))
}

/// Checks one golden file on `ctx`'s GPU (and, for QUANT files, on the CPU too).
pub fn check_file(ctx: &GpuContext, path: &Path) -> Outcome {
    let loaded = load(path);
    let (op, case, verdict) = match loaded {
        Err(e) => (String::new(), path.display().to_string(), Verdict::Fail(e.to_string())),
        Ok(file) => {
            let op = text(&file, "golden.op").unwrap_or_default();
            let case = text(&file, "golden.case").unwrap_or_else(|_| path.display().to_string());
            let verdict = match op.as_str() {
                "QUANT" => check_quant(ctx, &file),
                "MUL_MAT" => check_mul_mat(ctx, &file),
                "FLASH_ATTN_EXT" => check_flash_attn(ctx, &file, &case),
                other => Ok(Verdict::Unsupported(format!(
                    "golden op `{other}` is not run by this backend yet"
                ))),
            };
            (op, case, verdict.unwrap_or_else(|e| Verdict::Fail(e.to_string())))
        }
    };
    Outcome {
        path: path.to_owned(),
        op,
        case,
        verdict,
    }
}

/// QUANT: dequantizing `quantized` must give `dequantized` bit for bit, on the CPU and on the
/// GPU; quantizing `input` on the CPU must give `quantized` byte for byte where the CPU
/// quantizer implements ggml's.
fn check_quant(ctx: &GpuContext, file: &GgufFile) -> Result<Verdict> {
    let tensor = |name: &str| {
        file.tensor(name)
            .map_err(|e| BackendError::InvalidOperands(e.to_string()))
    };
    let quantized = tensor("quantized")?;
    let expected = tensor("dequantized")?.to_f32()?;
    let ty = quantized.layout.ty;

    let cpu = quantized.to_f32()?;
    if cpu.len() != expected.len() {
        return Ok(Verdict::Fail(format!(
            "`quantized` has {} elements, `dequantized` {}",
            cpu.len(),
            expected.len()
        )));
    }
    if let Some(i) = first_bit_difference(&cpu, &expected) {
        return Ok(Verdict::Fail(format!(
            "CPU dequantization differs at element {i}: {} vs {}",
            cpu[i], expected[i]
        )));
    }
    let mut notes = vec!["CPU dequantization bit-exact".to_owned()];
    if format::can_quantize(ty) {
        let input = tensor("input")?.to_f32()?;
        if input.len() != expected.len() {
            return Ok(Verdict::Fail(format!(
                "`input` has {} elements, `dequantized` {}",
                input.len(),
                expected.len()
            )));
        }
        if format::quantize(ty, &input)? != quantized.data {
            return Ok(Verdict::Fail("CPU quantization differs from ggml's bytes".into()));
        }
        notes.push("CPU quantization byte-exact".into());
    }
    if !ops::dequantize::supports(ty) {
        notes.push(format!("GPU dequantization of {ty} not supported"));
        return Ok(Verdict::Pass(notes.join(", ")));
    }
    let gpu = gpu_dequantize(ctx, &quantized)?;
    if gpu.len() != expected.len() {
        return Ok(Verdict::Fail(format!(
            "GPU dequantization gave {} elements, expected {}",
            gpu.len(),
            expected.len()
        )));
    }
    if let Some(i) = first_bit_difference(&gpu, &expected) {
        return Ok(Verdict::Fail(format!(
            "GPU dequantization differs at element {i}: {} vs {}",
            gpu[i], expected[i]
        )));
    }
    notes.push("GPU dequantization bit-exact".into());
    Ok(Verdict::Pass(notes.join(", ")))
}

/// MUL_MAT: `src0 × src1` on the GPU against the file's `dst`, by NMSE.
fn check_mul_mat(ctx: &GpuContext, file: &GgufFile) -> Result<Verdict> {
    let tensor = |name: &str| file.tensor(name).map_err(tensor_error);
    let (a, b) = (tensor("src0")?, tensor("src1")?);
    let expected = tensor("dst")?.to_f32()?;
    let dst_layout = Layout::contiguous(
        GgmlType::F32,
        [a.layout.ne[1], b.layout.ne[1], b.layout.ne[2], b.layout.ne[3]],
    )?;
    // Judged before anything is allocated: the operands' shapes, and a result as long as the
    // file's (so the device and host memory taken stay bounded by the file's size).
    if let Some(fail) = result_length(&dst_layout, &expected) {
        return Ok(fail);
    }
    if let Some(verdict) = not_runnable(ops::mul_mat::check(&a.layout, &b.layout, &dst_layout)) {
        return verdict;
    }
    let up = ctx.upload_all(&[&a, &b])?;
    let dst = ctx.filled(dst_layout, 0xff)?;
    let run = |stream: &mut Stream| ops::mul_mat::mul_mat(ctx, stream, &up[0], &up[1], &dst).map(|_| ());
    compare(
        ctx,
        run,
        &dst,
        &expected,
        ggml_dawn::reference::metric::MUL_MAT_MAX_NMSE,
    )
}

/// What to return when an op's check of its operands refuses them: not supported (this backend
/// or device cannot run them) or the error (the file is malformed); `None` when they may run.
fn not_runnable(check: Result<()>) -> Option<Result<Verdict>> {
    match check {
        Ok(()) => None,
        Err(BackendError::Unsupported(reason)) => Some(Ok(Verdict::Unsupported(reason))),
        Err(e) => Some(Err(e)),
    }
}

/// A failure when the op's result (of `layout`) and the file's `dst` differ in length.
fn result_length(layout: &Layout, expected: &[f32]) -> Option<Verdict> {
    (layout.checked_elements() != Some(expected.len())).then(|| {
        Verdict::Fail(format!(
            "`dst` has {} elements, the op's result {:?} has {}",
            expected.len(),
            layout.ne,
            layout.elements()
        ))
    })
}

/// A tensor the file lacks or holds malformed is a failure; one of a type this crate does not
/// know is only not supported.
fn tensor_error(e: ggml_dawn::gguf::GgufError) -> BackendError {
    match e {
        ggml_dawn::gguf::GgufError::UnknownTensorType { .. } => BackendError::Unsupported(e.to_string()),
        e => BackendError::InvalidOperands(e.to_string()),
    }
}

/// FLASH_ATTN_EXT: the op on the GPU against the file's `dst`, by NMSE.
fn check_flash_attn(ctx: &GpuContext, file: &GgufFile, case: &str) -> Result<Verdict> {
    let case: crate::cases::FlashAttnCase = case
        .parse()
        .map_err(|e: crate::cases::CaseError| BackendError::InvalidOperands(e.to_string()))?;
    let tensor = |name: &str| file.tensor(name).map_err(tensor_error);
    let optional = |name: &str| {
        file.tensors()
            .iter()
            .any(|t| t.name == name)
            .then(|| tensor(name))
            .transpose()
    };
    let (q, k, v) = (tensor("q")?, tensor("k")?, tensor("v")?);
    let (mask, sinks) = (optional("mask")?, optional("sinks")?);
    let expected = tensor("dst")?.to_f32()?;
    let dst_layout = Layout::contiguous(
        GgmlType::F32,
        [v.layout.ne[0], q.layout.ne[2], q.layout.ne[1], q.layout.ne[3]],
    )?;
    // Judged before anything is allocated, as for MUL_MAT.
    if let Some(fail) = result_length(&dst_layout, &expected) {
        return Ok(fail);
    }
    let layouts = ops::flash_attn::FlashAttnLayouts {
        q: q.layout,
        k: k.layout,
        v: v.layout,
        mask: mask.as_ref().map(|m| m.layout),
        sinks: sinks.as_ref().map(|s| s.layout),
        dst: dst_layout,
    };
    if let Some(verdict) = not_runnable(ops::flash_attn::check(&layouts)) {
        return verdict;
    }
    let mut hosts = vec![&q, &k, &v];
    hosts.extend(mask.iter());
    hosts.extend(sinks.iter());
    let up = ctx.upload_all(&hosts)?;
    let dst = ctx.filled(dst_layout, 0xff)?;
    let mut rest = up[3..].iter();
    let mask_t = mask.as_ref().and_then(|_| rest.next());
    let sinks_t = sinks.as_ref().and_then(|_| rest.next());
    let operands = ops::flash_attn::FlashAttnOperands {
        q: &up[0],
        k: &up[1],
        v: &up[2],
        mask: mask_t,
        sinks: sinks_t,
        dst: &dst,
    };
    let params = ops::flash_attn::FlashAttnParams {
        scale: 1.0 / (q.layout.ne[0] as f32).sqrt(),
        max_bias: case.max_bias,
        logit_softcap: case.logit_softcap,
    };
    let run = |stream: &mut Stream| ops::flash_attn::flash_attn_ext(ctx, stream, &operands, params).map(|_| ());
    compare(
        ctx,
        run,
        &dst,
        &expected,
        ggml_dawn::reference::metric::FLASH_ATTN_EXT_MAX_NMSE,
    )
}

/// Runs `record` on a fresh stream and compares `dst` with `expected` by NMSE.
fn compare(
    ctx: &GpuContext,
    record: impl FnOnce(&mut Stream) -> Result<()>,
    dst: &ggml_dawn::DeviceTensor,
    expected: &[f32],
    max_nmse: f64,
) -> Result<Verdict> {
    let mut stream = ctx.stream()?;
    match record(&mut stream) {
        Err(BackendError::Unsupported(reason)) => return Ok(Verdict::Unsupported(reason)),
        other => other?,
    }
    stream.synchronize(Duration::from_secs(600))?;
    let actual = ctx.read_f32(dst)?;
    Ok(match ggml_dawn::reference::metric::check(expected, &actual, max_nmse) {
        Ok(nmse) => Verdict::Pass(format!("nmse={nmse:.3e}")),
        Err(mismatch) => Verdict::Fail(mismatch.to_string()),
    })
}

/// Dequantizes a contiguous tensor on the GPU into a poisoned f32 tensor and reads it back.
pub fn gpu_dequantize(ctx: &GpuContext, src: &HostTensor) -> Result<Vec<f32>> {
    let uploaded = ctx.upload(src)?;
    let out_layout = Layout::contiguous(GgmlType::F32, src.layout.ne)?;
    let out = ctx.filled(out_layout, 0xff)?;
    let mut stream = ctx.stream()?;
    ops::dequantize::dequantize(ctx, &mut stream, &uploaded, &out)?;
    stream.synchronize(Duration::from_secs(60))?;
    ctx.read_f32(&out)
}

fn first_bit_difference(a: &[f32], b: &[f32]) -> Option<usize> {
    if a.len() != b.len() {
        return Some(a.len().min(b.len()));
    }
    a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_refuses_what_is_not_a_bounded_regular_file() {
        // A device that never ends, a folder, a missing file: errors, not hangs.
        for path in ["/dev/zero", "/", "/nonexistent/x.gguf"] {
            assert!(load(Path::new(path)).is_err(), "{path}");
        }
        let dir = std::env::temp_dir().join(format!("golden-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A FIFO nobody writes to: refused at once, not waited on (checked in a thread, so that
        // a regression fails the test instead of hanging it).
        let fifo = dir.join("fifo.gguf");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c_path` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(load(&reader).err().map(|e| e.to_string()));
        });
        let err = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("load returns instead of waiting for a writer")
            .expect("a FIFO is an error");
        assert!(err.contains("FIFO"), "{err}");
        std::fs::remove_file(&fifo).unwrap();
        let truncated = dir.join("t.gguf");
        std::fs::write(&truncated, b"GGUF\x03\0\0\0\x01").unwrap();
        let err = load(&truncated).unwrap_err();
        assert!(err.to_string().contains("t.gguf"), "{err}");
        // A link that loops back to the folder is walked once.
        std::os::unix::fs::symlink(&dir, dir.join("loop")).unwrap();
        let files = collect(std::slice::from_ref(&dir)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(files.len(), 1, "{files:?}");
    }
}
