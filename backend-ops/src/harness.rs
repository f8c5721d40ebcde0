//! Running upstream's test cases: random inputs, the op on the GPU, the CPU reference, NMSE;
//! and timing them as upstream's `test-backend-ops perf` does.

use std::time::{Duration, Instant};

use crate::cases::{Case, CaseTensor, FlashAttnCase, MulMatCase};
use ggml_dawn::context::GpuContext;
use ggml_dawn::error::{BackendError, Result};
use ggml_dawn::exec::Stream;
use ggml_dawn::ggml_type::GgmlType;
use ggml_dawn::memory::DeviceTensor;
use ggml_dawn::ops::flash_attn::{FlashAttnOperands, FlashAttnParams};
use ggml_dawn::ops::{flash_attn, mul_mat};
use ggml_dawn::profile::ProfileMode;
use ggml_dawn::reference::{self, metric};
use ggml_dawn::tensor::{HostTensor, Layout};

pub mod decoder;

/// How long a wait for the GPU may take before it counts as a hang.
pub const TIMEOUT: Duration = Duration::from_secs(600);

/// What running one case found.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Agrees with the CPU reference.
    Ok { nmse: f64 },
    /// Disagrees (or failed to run); the text says how.
    Fail { reason: String },
    /// Not supported by this backend on this device (an upstream type this crate lacks, or a
    /// shape no kernel handles).
    Unsupported { reason: String },
    /// Not a valid case: `k` not a whole number of blocks, a zero extent, extents whose
    /// product overflows. Bad input, judged before anything is allocated.
    Invalid { reason: String },
    /// Larger than this device takes (one binding, one buffer) or than the harness's host
    /// budget [`MAX_HOST_BYTES`]; judged before anything is allocated.
    TooLarge { reason: String },
}

impl Status {
    /// Whether the case was refused as bad input ([`Status::Invalid`], [`Status::TooLarge`]).
    pub fn is_bad_input(&self) -> bool {
        matches!(self, Status::Invalid { .. } | Status::TooLarge { .. })
    }
}

/// A deterministic source of test data (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * unit
    }

    pub fn fill(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// Elements quantized at a time for a timing-only input: a whole number of every format's blocks.
const TIMING_CHUNK: usize = 1 << 16;

/// Inputs uniform in [-1, 1] for a case tensor's whole storage, converted to its type. Types
/// the CPU cannot quantize to (the grid i-quants) get random blocks instead, with sane scales.
/// When only timed (`exact` false), a large quantized tensor repeats one quantized chunk: the
/// kernels' speed does not depend on the values, and quantizing 58M elements of a K-quant on
/// the CPU takes seconds per case.
fn input(rng: &mut Rng, t: &CaseTensor, exact: bool) -> Result<HostTensor> {
    let ty = t.storage.ty;
    let elements = t.storage.elements();
    if ggml_dawn::format::can_quantize(ty) {
        let quantized = ty.block_size() > 1;
        if exact || !quantized || elements <= TIMING_CHUNK || !elements.is_multiple_of(TIMING_CHUNK) {
            return Ok(t.host(&rng.fill(elements, -1.0, 1.0))?);
        }
        let chunk = HostTensor::from_f32(ty, [TIMING_CHUNK, 1, 1, 1], &rng.fill(TIMING_CHUNK, -1.0, 1.0))?;
        let bytes = elements / ty.block_size() * ty.type_size();
        let data: Vec<u8> = chunk.data.iter().copied().cycle().take(bytes).collect();
        return Ok(HostTensor { layout: t.view, data });
    }
    let blocks = t.storage.elements() / ty.block_size();
    let mut data: Vec<u8> = (0..blocks * ty.type_size()).map(|_| rng.next_u64() as u8).collect();
    for block in data.chunks_exact_mut(ty.type_size()) {
        let scale = half::f16::from_f32(rng.uniform(0.01, 0.1)).to_bits();
        match ty {
            // The f16 scale is spread over the top nibbles of the last four u16 words.
            GgmlType::IQ1_M => {
                let n = block.len();
                for (i, word) in block[n - 8..].chunks_exact_mut(2).enumerate() {
                    let nibble = (scale >> (4 * i)) & 0xf;
                    let w = (u16::from_le_bytes([word[0], word[1]]) & 0x0fff) | (nibble << 12);
                    word.copy_from_slice(&w.to_le_bytes());
                }
            }
            // Every other such format starts with its f16 scale.
            _ => block[..2].copy_from_slice(&scale.to_le_bytes()),
        }
    }
    Ok(HostTensor { layout: t.view, data })
}

/// A mask as upstream makes them: values in [-1, 1], with about 20% of blocks of 64 keys × 16
/// rows set to -inf and 10% to 0.
fn mask(rng: &mut Rng, layout: Layout) -> Result<HostTensor> {
    let [kv, rows, _, seqs] = layout.ne;
    let mut values = rng.fill(layout.elements(), -1.0, 1.0);
    for s in 0..seqs {
        for r0 in (0..rows).step_by(16) {
            for j0 in (0..kv).step_by(64) {
                let roll = rng.uniform(0.0, 1.0);
                let fill = if roll < 0.2 {
                    f32::NEG_INFINITY
                } else if roll < 0.3 {
                    0.0
                } else {
                    continue;
                };
                for r in r0..(r0 + 16).min(rows) {
                    for j in j0..(j0 + 64).min(kv) {
                        values[(s * rows + r) * kv + j] = fill;
                    }
                }
            }
        }
    }
    Ok(HostTensor::from_f32(GgmlType::F16, layout.ne, &values)?)
}

/// Which op a prepared case runs.
enum Op {
    MulMat,
    FlashAttn {
        has_mask: bool,
        has_sinks: bool,
        params: FlashAttnParams,
    },
    /// A decoder op (issue #38), checked when prepared: its operands as [`decoder::gpu_operands`]
    /// lays them out.
    Decoder(decoder::GpuOp),
}

/// One case's operands on the device (dst last), and the CPU reference, ready to run.
struct Prepared {
    op: Op,
    tensors: Vec<DeviceTensor>,
    reference: Vec<f32>,
}

impl Prepared {
    fn dst(&self) -> &DeviceTensor {
        self.tensors.last().expect("dst is last")
    }

    fn record(&self, ctx: &GpuContext, stream: &mut Stream) -> Result<OpPlan> {
        let missing = || BackendError::InvalidOperands("operands missing".into());
        match &self.op {
            Op::MulMat => {
                let [a, b, dst] = self.tensors.as_slice() else {
                    return Err(missing());
                };
                let (la, lb) = (a.layout(), b.layout());
                let plan = mul_mat::mul_mat(&ctx.env(), stream, a, b, dst)?;
                Ok(OpPlan::MulMat(la.ty, lb.ty, plan))
            }
            Op::FlashAttn {
                has_mask,
                has_sinks,
                params,
            } => {
                let mut it = self.tensors.iter();
                let (q, k, v) = (it.next(), it.next(), it.next());
                let mask = if *has_mask { it.next() } else { None };
                let sinks = if *has_sinks { it.next() } else { None };
                let (Some(q), Some(k), Some(v), Some(dst)) = (q, k, v, it.next()) else {
                    return Err(missing());
                };
                flash_attn::flash_attn_ext(
                    &ctx.env(),
                    stream,
                    &FlashAttnOperands {
                        q,
                        k,
                        v,
                        mask,
                        sinks,
                        dst,
                    },
                    *params,
                )
                .map(OpPlan::FlashAttn)
            }
            Op::Decoder(op) => decoder::gpu_record(ctx, stream, op, &self.tensors).map(OpPlan::Decoder),
        }
    }
}

/// Host memory one case may take: its inputs, their f32 values, the reference and the result
/// read back. A case past it is refused before anything is allocated.
pub const MAX_HOST_BYTES: u64 = 32 << 30;

/// A case that cannot be built: an upstream type this crate lacks is not supported, anything
/// else is an invalid case.
fn case_error(e: crate::cases::CaseError) -> BackendError {
    match e {
        e @ crate::cases::CaseError::UnsupportedType { .. } => BackendError::Unsupported(e.to_string()),
        e => BackendError::InvalidOperands(e.to_string()),
    }
}

/// What a case allocates: each input's storage, then dst.
fn allocations(case: &Case) -> std::result::Result<Vec<(&'static str, Layout)>, crate::cases::CaseError> {
    Ok(match case {
        Case::MulMat(c) => {
            let t = c.tensors()?;
            let mut out = vec![("src0", t.a.storage)];
            if !t.b_aliases_a {
                out.push(("src1", t.b.storage));
            }
            out.push(("dst", t.dst));
            out
        }
        Case::FlashAttnExt(c) => {
            let t = c.tensors()?;
            let mut out = vec![("q", t.q.storage), ("k", t.k.storage)];
            if !t.v_aliases_k {
                out.push(("v", t.v.storage));
            }
            out.extend(t.mask.map(|m| ("mask", m)));
            out.extend(t.sinks.map(|s| ("sinks", s)));
            out.push(("dst", t.dst));
            out
        }
        Case::Decoder(c) => decoder::allocations(c)?,
    })
}

/// Whether `case`'s tensors fit the device (each one binding, the inputs one buffer) and the
/// host budget [`MAX_HOST_BYTES`], judged from the layouts alone: nothing is allocated. A
/// malformed case is [`BackendError::InvalidOperands`] (or a layout error), one too large
/// [`BackendError::TooLarge`], one of a type this crate lacks [`BackendError::Unsupported`].
pub fn check_sizes(ctx: &GpuContext, case: &Case) -> Result<()> {
    let allocations = allocations(case).map_err(case_error)?;
    let limits = &ctx.capabilities().limits;
    let align = u64::from(limits.min_storage_buffer_offset_alignment.max(4));
    let too_large = |what: String, bytes: u64, limit: u64, limit_name: &'static str| {
        Err(BackendError::TooLarge {
            what,
            bytes,
            limit,
            limit_name,
        })
    };
    let (mut arena, mut host) = (0u64, 0u64);
    for (what, l) in allocations {
        let bytes = l.end_bytes()? as u64;
        if bytes > limits.max_storage_buffer_binding_size {
            return too_large(
                format!("{} {what}", case.op_name()),
                bytes,
                limits.max_storage_buffer_binding_size,
                "maxStorageBufferBindingSize",
            );
        }
        let values = (l.elements() as u64).saturating_mul(4);
        if what == "dst" {
            // The reference and the read-back.
            host = host.saturating_add(values.saturating_mul(2)).saturating_add(bytes);
        } else {
            arena = arena.saturating_add(bytes.max(4).next_multiple_of(align));
            host = host.saturating_add(values).saturating_add(bytes);
        }
    }
    if arena > limits.max_buffer_size {
        return too_large(
            format!("the inputs of {}", case.op_name()),
            arena,
            limits.max_buffer_size,
            "maxBufferSize",
        );
    }
    if host > MAX_HOST_BYTES {
        return too_large(
            format!("{} on the host", case.op_name()),
            host,
            MAX_HOST_BYTES,
            "the harness's host memory budget",
        );
    }
    Ok(())
}

/// Whether `case` may run on `ctx`'s device at all, judged from its layouts and the device's
/// limits before anything is allocated: [`Status::Unsupported`] for an upstream type this crate
/// lacks, [`Status::Invalid`] for a case that makes no sense for its types,
/// [`Status::TooLarge`] for one over the device's limits or the host budget.
pub fn admit(ctx: &GpuContext, case: &Case) -> std::result::Result<(), Status> {
    match check_sizes(ctx, case) {
        Ok(()) => Ok(()),
        Err(BackendError::Unsupported(reason)) => Err(Status::Unsupported { reason }),
        Err(e @ BackendError::TooLarge { .. }) => Err(Status::TooLarge { reason: e.to_string() }),
        Err(BackendError::InvalidOperands(reason)) => Err(Status::Invalid { reason }),
        Err(e) => Err(Status::Invalid { reason: e.to_string() }),
    }
}

fn prepare(ctx: &GpuContext, case: &Case, seed: u64, with_reference: bool) -> Result<Prepared> {
    let mut rng = Rng::new(seed);
    // Judged before any host data is allocated.
    check_sizes(ctx, case)?;
    match case {
        Case::MulMat(c) => prepare_mul_mat(ctx, c, &mut rng, with_reference, case_error),
        Case::FlashAttnExt(c) => prepare_flash_attn(ctx, c, &mut rng, with_reference, case_error),
        Case::Decoder(c) => {
            // The GPU kernels of issue #38 plug in at `decoder::gpu_plan` (the op's checks, and
            // the op to run), `gpu_operands` and `gpu_record`.
            let op = decoder::gpu_plan(c).map_err(BackendError::Unsupported)?;
            let run = decoder::host_run(c, seed)?;
            let tensors = decoder::gpu_operands(ctx, &run)?;
            Ok(Prepared {
                op: Op::Decoder(op),
                tensors,
                reference: if with_reference { run.reference } else { Vec::new() },
            })
        }
    }
}

fn prepare_mul_mat(
    ctx: &GpuContext,
    c: &MulMatCase,
    rng: &mut Rng,
    with_reference: bool,
    case_error: impl Fn(crate::cases::CaseError) -> BackendError,
) -> Result<Prepared> {
    let t = c.tensors().map_err(case_error)?;
    let a = input(rng, &t.a, with_reference)?;
    let b = if t.b_aliases_a {
        HostTensor {
            layout: t.b.view,
            data: a.data.clone(),
        }
    } else {
        input(rng, &t.b, with_reference)?
    };
    let reference = if with_reference {
        reference::mul_mat::mul_mat(&a, &b)?
    } else {
        Vec::new()
    };
    let (da, db) = if t.b_aliases_a {
        let da = ctx.upload(&a)?;
        let db = da.view(t.b.view)?;
        (da, db)
    } else {
        let mut up = ctx.upload_all(&[&a, &b])?;
        let db = up.remove(1);
        (up.remove(0), db)
    };
    let dst = ctx.filled(t.dst, 0xff)?;
    Ok(Prepared {
        op: Op::MulMat,
        tensors: vec![da, db, dst],
        reference,
    })
}

fn prepare_flash_attn(
    ctx: &GpuContext,
    c: &FlashAttnCase,
    rng: &mut Rng,
    with_reference: bool,
    case_error: impl Fn(crate::cases::CaseError) -> BackendError,
) -> Result<Prepared> {
    let t = c.tensors().map_err(case_error)?;
    let q = input(rng, &t.q, with_reference)?;
    let k = input(rng, &t.k, with_reference)?;
    let v = if t.v_aliases_k {
        HostTensor {
            layout: t.v.view,
            data: k.data.clone(),
        }
    } else {
        input(rng, &t.v, with_reference)?
    };
    let mask = t.mask.map(|l| mask(rng, l)).transpose()?;
    let sinks = t
        .sinks
        .map(|l| HostTensor::from_f32(GgmlType::F32, l.ne, &rng.fill(l.elements(), -10.0, 10.0)))
        .transpose()?;
    let params = FlashAttnParams {
        scale: c.scale(),
        max_bias: c.max_bias,
        logit_softcap: c.logit_softcap,
    };
    let reference = if with_reference {
        reference::flash_attn::flash_attn_ext(
            &q,
            &k,
            &v,
            mask.as_ref(),
            sinks.as_ref(),
            params.scale,
            params.max_bias,
            params.logit_softcap,
        )?
    } else {
        Vec::new()
    };
    let mut hosts: Vec<&HostTensor> = vec![&q, &k];
    if !t.v_aliases_k {
        hosts.push(&v);
    }
    hosts.extend(mask.iter());
    hosts.extend(sinks.iter());
    let mut up = ctx.upload_all(&hosts)?.into_iter();
    let dq = up.next().expect("q");
    let dk = up.next().expect("k");
    let dv = if t.v_aliases_k {
        dk.view(t.v.view)?
    } else {
        up.next().expect("v")
    };
    let mut tensors = vec![dq, dk, dv];
    tensors.extend(up);
    tensors.push(ctx.filled(t.dst, 0xff)?);
    let op = Op::FlashAttn {
        has_mask: mask.is_some(),
        has_sinks: sinks.is_some(),
        params,
    };
    Ok(Prepared { op, tensors, reference })
}

/// The plan an op followed, put in words only when asked (the perf loop records thousands).
enum OpPlan {
    MulMat(GgmlType, GgmlType, mul_mat::MulMatPlan),
    FlashAttn(flash_attn::FlashAttnPlan),
    /// A decoder op's plans, in words.
    Decoder(String),
}

impl std::fmt::Display for OpPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpPlan::MulMat(a, b, plan) => write!(f, "MUL_MAT {a}x{b}: {plan}"),
            OpPlan::FlashAttn(plan) => plan.fmt(f),
            OpPlan::Decoder(plan) => f.write_str(plan),
        }
    }
}

/// Runs one case on the GPU and compares it with the CPU reference.
pub fn test_case(ctx: &GpuContext, case: &Case, seed: u64) -> Status {
    test_case_planned(ctx, case, seed).0
}

/// [`test_case`], with the plan the op followed, in words (when it ran).
pub fn test_case_planned(ctx: &GpuContext, case: &Case, seed: u64) -> (Status, Option<String>) {
    if let Err(refused) = admit(ctx, case) {
        return (refused, None);
    }
    let prepared = match prepare(ctx, case, seed, true) {
        Ok(p) => p,
        Err(BackendError::Unsupported(reason)) => return (Status::Unsupported { reason }, None),
        Err(e) => return (Status::Fail { reason: e.to_string() }, None),
    };
    let mut plan = None;
    let mut run = || -> Result<Vec<f32>> {
        let mut stream = ctx.stream()?;
        plan = Some(prepared.record(ctx, &mut stream)?.to_string());
        stream.synchronize(TIMEOUT)?;
        ctx.read_f32(prepared.dst())
    };
    let status = match run() {
        Ok(actual) => match metric::check(&prepared.reference, &actual, case.max_nmse()) {
            Ok(nmse) => Status::Ok { nmse },
            Err(mismatch) => Status::Fail {
                reason: mismatch.to_string(),
            },
        },
        Err(BackendError::Unsupported(reason)) => Status::Unsupported { reason },
        Err(e) => Status::Fail { reason: e.to_string() },
    };
    (status, plan)
}

/// How long [`device_unusable`] waits for the device to be idle again.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why `ctx`'s device can take no more cases, if it cannot: it was lost, or it is still busy
/// [`PROBE_TIMEOUT`] later (a case that timed out left it hung). Any other failure of a case
/// leaves the device usable. A list stops here instead of failing (or waiting out the timeout
/// of) every case after it.
pub fn device_unusable(ctx: &GpuContext) -> Option<String> {
    let probe = ctx.stream().and_then(|mut stream| stream.synchronize(PROBE_TIMEOUT));
    match probe {
        Err(BackendError::Dawn(e @ (dawn::Error::DeviceLost { .. } | dawn::Error::Timeout(_)))) => Some(e.to_string()),
        _ => None,
    }
}

/// The timing of one case.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    pub runs: u64,
    pub us_per_run: f64,
    /// Of `us_per_run`, the host's time recording and submitting the op (the backend's planning
    /// and Dawn's encoding; submits that wait for the oldest of too many in flight count too).
    /// Close to `us_per_run`, the host is the limit, not the GPU.
    pub host_us_per_run: f64,
    pub flops_per_run: u64,
    /// Bytes the op reads and writes once (its operands and dst; 0 where not counted): memory-bound
    /// ops are judged by bytes per second.
    pub bytes_per_run: u64,
    /// The plan the op followed, in words.
    pub plan: String,
    /// The GPU's own time a run, from timestamps around each submit ([`perf_case`]'s
    /// `gpu_time`): what the kernel takes whatever the host's pace (`None` unless asked for, or
    /// where the adapter has no timestamp queries).
    pub gpu_us_per_run: Option<f64>,
}

impl Timing {
    pub fn tflops(&self) -> f64 {
        self.flops_per_run as f64 / self.us_per_run / 1e6
    }

    /// Bytes read and written per second, in GB/s (0 where bytes are not counted).
    pub fn gbps(&self) -> f64 {
        self.bytes_per_run as f64 / self.us_per_run / 1e3
    }

    /// Bytes read and written per second of the GPU's own time, in GB/s.
    pub fn gpu_gbps(&self) -> Option<f64> {
        self.gpu_us_per_run.map(|us| self.bytes_per_run as f64 / us / 1e3)
    }
}

/// Times a case as upstream does: a graph repeating the op `min(8192, 100 GFLOP / flops) + 1`
/// times (capped by `max_repeats`), one warm-up graph, then graphs until `min_time` has passed;
/// wall time from submit to completion over the number of runs.
///
/// With `gpu_time`, the same graphs run again as long, each submit's pass timestamped at its
/// begin and end ([`ProfileMode::Submits`]): [`Timing::gpu_us_per_run`], the GPU's own time a
/// run, by which small ops whose wall-clock time is the host's (one dispatch recorded per run)
/// are judged. It stays `None` on an adapter without timestamp queries.
pub fn perf_case(
    ctx: &GpuContext,
    case: &Case,
    min_time: Duration,
    max_repeats: u64,
    gpu_time: bool,
) -> Result<Timing> {
    let prepared = prepare(ctx, case, 1, false)?;
    let flops = case.flops().max(1);
    // Upstream's count: by FLOPs, or for ops without any by bytes (32 GiB a graph on a GPU).
    let bytes = case_bytes(case);
    let per_graph = if case.flops() == 0 && bytes > 0 {
        (32u64 << 30) / bytes
    } else {
        100_000_000_000 / flops
    };
    let repeats = (per_graph.min(8191) + 1).min(max_repeats.max(1));
    let mut stream = ctx.stream()?;
    // One graph: the host's time until the last submit, then the wait for the GPU.
    let graph = |stream: &mut Stream| -> Result<(OpPlan, Duration)> {
        let start = Instant::now();
        let mut plan = prepared.record(ctx, stream)?;
        for _ in 1..repeats {
            plan = prepared.record(ctx, stream)?;
        }
        stream.flush()?;
        let host = start.elapsed();
        stream.synchronize(TIMEOUT)?;
        Ok((plan, host))
    };
    let (plan, _) = graph(&mut stream)?;
    let start = Instant::now();
    let mut runs = 0;
    let mut host = Duration::ZERO;
    while runs == 0 || start.elapsed() < min_time {
        host += graph(&mut stream)?.1;
        runs += repeats;
    }
    let wall = start.elapsed();
    let gpu_us_per_run = match gpu_time {
        false => None,
        true => match stream.start_profile(ProfileMode::Submits) {
            Err(BackendError::Unsupported(_)) => None,
            Err(e) => return Err(e),
            Ok(()) => {
                let start = Instant::now();
                let mut gpu_runs = 0;
                while gpu_runs == 0 || start.elapsed() < min_time {
                    graph(&mut stream)?;
                    gpu_runs += repeats;
                }
                let profile = stream.finish_profile()?;
                Some(profile.span.as_secs_f64() * 1e6 / gpu_runs as f64)
            }
        },
    };
    Ok(Timing {
        runs,
        us_per_run: wall.as_secs_f64() * 1e6 / runs as f64,
        host_us_per_run: host.as_secs_f64() * 1e6 / runs as f64,
        flops_per_run: flops,
        bytes_per_run: bytes,
        plan: plan.to_string(),
        gpu_us_per_run,
    })
}

/// The bytes a case's op reads and writes once, as upstream's `op_size` counts them (the decoder
/// ops; 0 for the others, judged by their FLOPs).
fn case_bytes(case: &Case) -> u64 {
    match case {
        Case::Decoder(c) => c.bytes(),
        _ => 0,
    }
}

/// Whether this backend runs `case` on `ctx`'s device, judged from layouts and limits alone
/// (nothing is allocated); the error says why not.
pub fn supports(ctx: &GpuContext, case: &Case) -> std::result::Result<(), String> {
    check_sizes(ctx, case).map_err(|e| e.to_string())?;
    match case {
        Case::MulMat(c) => {
            let t = c.tensors().map_err(|e| e.to_string())?;
            mul_mat::check(&t.a.view, &t.b.view, &t.dst).map_err(|e| e.to_string())
        }
        Case::FlashAttnExt(c) => {
            let t = c.tensors().map_err(|e| e.to_string())?;
            let layouts = flash_attn::FlashAttnLayouts {
                q: t.q.view,
                k: t.k.view,
                v: t.v.view,
                mask: t.mask,
                sinks: t.sinks,
                dst: t.dst,
            };
            flash_attn::check(&layouts).map_err(|e| e.to_string())
        }
        Case::Decoder(c) => decoder::gpu_support(c),
    }
}

/// The path and tiles the backend picks for `case` on `ctx`'s device (for `backend-ops -v`).
pub fn describe(ctx: &GpuContext, case: &Case) -> String {
    match case {
        Case::MulMat(c) => match c.tensors() {
            Ok(t) => mul_mat::describe(&ctx.env(), &t.a.view, &t.b.view, &t.dst),
            Err(e) => format!("not run: {e}"),
        },
        Case::FlashAttnExt(c) => match c.tensors() {
            Ok(t) => flash_attn::describe(
                &ctx.env(),
                &flash_attn::FlashAttnLayouts {
                    q: t.q.view,
                    k: t.k.view,
                    v: t.v.view,
                    mask: t.mask,
                    sinks: t.sinks,
                    dst: t.dst,
                },
            ),
            Err(e) => format!("not run: {e}"),
        },
        Case::Decoder(c) => match decoder::gpu_support(c) {
            Ok(()) => format!("{} (the plan is printed when it runs)", c.op_name()),
            Err(e) => format!("not run: {e}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cases are judged before anything is allocated: a type this crate lacks is not
    /// supported, a case that makes no sense is invalid, one over the device's limits too
    /// large; the default lists (upstream's, and its perf cases) hold no invalid case.
    #[test]
    fn cases_are_admitted_refused_or_judged_too_large() {
        let ctx = GpuContext::new(ggml_dawn::ContextOptions::default()).unwrap();
        let judge = |spec: &str| admit(&ctx, &spec.parse::<Case>().unwrap());
        assert_eq!(judge("MUL_MAT(type_a=f32,type_b=f32,m=16,n=3,k=32)"), Ok(()));
        assert!(
            matches!(
                judge("MUL_MAT(type_a=q4_0,type_b=f32,m=4,n=1,k=48)"),
                Err(Status::Invalid { .. })
            ),
            "k=48 of q4_0"
        );
        assert!(matches!(
            judge("MUL_MAT(type_a=f32,type_b=f32,m=1000000,n=1000000,k=4096)"),
            Err(Status::TooLarge { .. })
        ));
        let mut lists = crate::case_lists::test_cases().unwrap();
        lists.extend(crate::case_lists::perf_cases());
        for case in &lists {
            let verdict = admit(&ctx, case);
            assert!(!matches!(verdict, Err(Status::Invalid { .. })), "{case}: {verdict:?}");
        }
    }

    /// A device that is idle is usable after a failed case; a lost one is not, and says why.
    #[test]
    fn a_lost_device_is_unusable() {
        let ctx = GpuContext::new(ggml_dawn::ContextOptions::default()).unwrap();
        assert_eq!(device_unusable(&ctx), None);
        // SAFETY: nothing is recorded on or submitted to the device; after the destroy only the
        // probe below uses it, and it fails before recording anything.
        unsafe { ctx.device() }.destroy().unwrap();
        let why = device_unusable(&ctx).expect("a lost device is unusable");
        assert!(why.contains("lost"), "{why}");
    }
}
