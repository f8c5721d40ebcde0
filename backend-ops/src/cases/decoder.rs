//! Upstream's cases of a decoder's other ops (issue #38): GET_ROWS, RMS_NORM, RMS_NORM_MUL_ADD,
//! ADD/SUB/MUL/DIV, ROPE, the GLU family, SET_ROWS, CPY, SCALE, SOFT_MAX and ARGMAX. Each is
//! parsed from and printed as upstream's `vars()` prints it, and says which tensors it allocates
//! and how upstream fills them (`test-backend-ops.cpp`'s `build_graph` and
//! `initialize_tensors`).
//!
//! ```text
//! GET_ROWS(type=q4_0,n=256,m=5,r=4,be1=7,be2=1,v=1)
//! ROPE(type=f32,ne_a=[128,32,2,1],n_dims=128,mode=0,n_ctx=512,fs=1.000000,ef=0.000000,af=1.000000,ff=0,v=0,inplace=0,n_offs=0)
//! SWIGLU(type=f16,ne_a=[5,7,11,13],v=1,split)
//! ```

use std::fmt;

use super::{
    Array, CaseError, CaseTensor, CaseType, Fields, known_type, parse_array, parse_bool, parse_f32, parse_type,
    parse_usize,
};
use ggml_dawn::ggml_type::GgmlType;
use ggml_dawn::reference::metric;
use ggml_dawn::reference::{BinaryOp, GluOp, RopeMode, RopeParams};
use ggml_dawn::tensor::{Layout, LayoutError};

/// The ops of this module, as their case strings start.
pub const OPS: &[&str] = &[
    "GET_ROWS",
    "RMS_NORM",
    "RMS_NORM_MUL_ADD",
    "ADD",
    "SUB",
    "MUL",
    "DIV",
    "ROPE",
    "ROPE_SET_ROWS",
    "REGLU",
    "GEGLU",
    "SWIGLU",
    "SWIGLU_OAI",
    "GEGLU_ERF",
    "GEGLU_QUICK",
    "SET_ROWS",
    "CPY",
    "SCALE",
    "SOFT_MAX",
    "ARGMAX",
];

/// The `&'static str` of an op name of this module.
pub(super) fn op_name(op: &str) -> Option<&'static str> {
    OPS.iter().copied().find(|&o| o == op)
}

/// One case of a decoder op.
#[derive(Debug, Clone, PartialEq)]
pub enum DecoderCase {
    GetRows(GetRowsCase),
    RmsNorm(RmsNormCase),
    RmsNormMulAdd(RmsNormMulAddCase),
    Binary(BinaryCase),
    Rope(RopeCase),
    RopeSetRows(RopeSetRowsCase),
    Glu(GluCase),
    SetRows(SetRowsCase),
    Cpy(CpyCase),
    Scale(ScaleCase),
    SoftMax(SoftMaxCase),
    Argmax(ArgmaxCase),
}

/// How upstream fills an allocated tensor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fill {
    /// Uniform in `[lo, hi)`, converted (quantized) to the tensor's type.
    Uniform(f32, f32),
    /// i32 row ids `rand() % rows` (GET_ROWS).
    RowIds { rows: usize },
    /// For each row of ids, a shuffled subset of `0..rows` (SET_ROWS: no id twice in a row).
    DistinctRowIds { rows: usize },
    /// i32 positions `rand() % n_ctx` (ROPE).
    Positions { n_ctx: usize },
    /// Each row a shuffle of `0, 1, …, ne0 − 1` (ARGMAX: no ties).
    Shuffled,
    /// Small i32 values (an i32 source; upstream writes float bits there).
    Integers,
}

/// One allocation of a case: what upstream creates and fills.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Storage {
    pub name: &'static str,
    pub layout: Layout,
    pub fill: Fill,
}

/// One operand of the op: a view of one of the storages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operand {
    pub name: &'static str,
    /// Index into [`DecoderTensors::storages`].
    pub storage: usize,
    /// The view, its offset from the storage's start.
    pub view: Layout,
}

impl Operand {
    /// The operand as a [`CaseTensor`] over its storage.
    pub fn case_tensor(&self, storages: &[Storage]) -> CaseTensor {
        CaseTensor {
            storage: storages[self.storage].layout,
            view: self.view,
        }
    }
}

/// The tensors of a [`DecoderCase`].
#[derive(Debug, Clone, PartialEq)]
pub struct DecoderTensors {
    /// Every allocation, filled as [`Fill`] says.
    pub storages: Vec<Storage>,
    /// The op's operands, in the op's order (see each case).
    pub operands: Vec<Operand>,
    /// The layout of the result upstream compares (for SET_ROWS and CPY a view of an input
    /// storage, written in place).
    pub dst: Layout,
}

struct Builder {
    op: &'static str,
    storages: Vec<Storage>,
    operands: Vec<Operand>,
}

impl Builder {
    fn new(op: &'static str) -> Builder {
        Builder {
            op,
            storages: Vec::new(),
            operands: Vec::new(),
        }
    }

    fn layout(&self, ty: GgmlType, ne: [usize; 4]) -> Result<Layout, CaseError> {
        if ne.contains(&0) {
            return Err(CaseError::Invalid {
                op: self.op,
                reason: format!("extents {ne:?} must be positive"),
            });
        }
        Layout::contiguous(ty, ne).map_err(|source| CaseError::Layout { op: self.op, source })
    }

    /// A new storage; returns its index.
    fn storage(&mut self, name: &'static str, ty: GgmlType, ne: [usize; 4], fill: Fill) -> Result<usize, CaseError> {
        let layout = self.layout(ty, ne)?;
        self.storages.push(Storage { name, layout, fill });
        Ok(self.storages.len() - 1)
    }

    /// An operand that is its storage.
    fn whole(&mut self, name: &'static str, ty: GgmlType, ne: [usize; 4], fill: Fill) -> Result<usize, CaseError> {
        let s = self.storage(name, ty, ne, fill)?;
        self.view(name, s, self.storages[s].layout)
    }

    /// An operand viewing storage `s`.
    fn view(&mut self, name: &'static str, storage: usize, view: Layout) -> Result<usize, CaseError> {
        view.check_fits(self.storages[storage].layout.end_bytes().unwrap_or(0))
            .map_err(|source| CaseError::Layout { op: self.op, source })?;
        self.operands.push(Operand { name, storage, view });
        Ok(self.operands.len() - 1)
    }

    /// `ggml_view_4d(storage, ne, storage's nb1..3, offset)`.
    fn sub_view(
        &mut self,
        name: &'static str,
        storage: usize,
        ne: [usize; 4],
        offset: usize,
    ) -> Result<usize, CaseError> {
        let l = self.storages[storage].layout;
        self.view(name, storage, Layout { ne, offset, ..l })
    }

    fn finish(self, dst: Layout) -> DecoderTensors {
        DecoderTensors {
            storages: self.storages,
            operands: self.operands,
            dst,
        }
    }
}

fn scaled(op: &'static str, ne: [usize; 4], by: [usize; 4]) -> Result<[usize; 4], CaseError> {
    let mut out = [0; 4];
    for i in 0..4 {
        out[i] = ne[i].checked_mul(by[i]).ok_or_else(|| CaseError::Invalid {
            op,
            reason: "extents overflow".into(),
        })?;
    }
    Ok(out)
}

fn invalid(op: &'static str, reason: impl Into<String>) -> CaseError {
    CaseError::Invalid {
        op,
        reason: reason.into(),
    }
}

/// Upstream's WebGPU threshold rule: an op's own threshold, raised to 1e-6 when any tensor of the
/// case is f16 (`test_case::max_nmse_err(backend)`).
fn webgpu_threshold(own: f64, any_f16: bool) -> f64 {
    if any_f16 {
        own.max(metric::DEFAULT_MAX_NMSE_F16)
    } else {
        own
    }
}

impl DecoderCase {
    /// ggml's op name, as the case string starts.
    pub fn op_name(&self) -> &'static str {
        match self {
            DecoderCase::GetRows(_) => "GET_ROWS",
            DecoderCase::RmsNorm(_) => "RMS_NORM",
            DecoderCase::RmsNormMulAdd(_) => "RMS_NORM_MUL_ADD",
            DecoderCase::Binary(c) => c.op.name(),
            DecoderCase::Rope(_) => "ROPE",
            DecoderCase::RopeSetRows(_) => "ROPE_SET_ROWS",
            DecoderCase::Glu(c) => c.op.name(),
            DecoderCase::SetRows(_) => "SET_ROWS",
            DecoderCase::Cpy(_) => "CPY",
            DecoderCase::Scale(_) => "SCALE",
            DecoderCase::SoftMax(_) => "SOFT_MAX",
            DecoderCase::Argmax(_) => "ARGMAX",
        }
    }

    /// Upstream's perf "flops" for these ops: none (it reports memory traffic instead); 0.
    pub fn flops(&self) -> u64 {
        0
    }

    /// Bytes the op moves, as upstream's `op_size` counts them: every operand's bytes and dst's
    /// (0 when the case is malformed).
    pub fn bytes(&self) -> u64 {
        let Ok(t) = self.tensors() else { return 0 };
        let size = |l: &Layout| (l.elements() / l.ty.block_size() * l.ty.type_size()) as u64;
        t.operands.iter().map(|o| size(&o.view)).sum::<u64>() + size(&t.dst)
    }

    /// The case's tensors, as upstream's `build_graph` makes them.
    pub fn tensors(&self) -> Result<DecoderTensors, CaseError> {
        match self {
            DecoderCase::GetRows(c) => c.tensors(),
            DecoderCase::RmsNorm(c) => c.tensors(),
            DecoderCase::RmsNormMulAdd(c) => c.tensors(),
            DecoderCase::Binary(c) => c.tensors(),
            DecoderCase::Rope(c) => c.tensors(),
            DecoderCase::RopeSetRows(c) => c.tensors(),
            DecoderCase::Glu(c) => c.tensors(),
            DecoderCase::SetRows(c) => c.tensors(),
            DecoderCase::Cpy(c) => c.tensors(),
            DecoderCase::Scale(c) => c.tensors(),
            DecoderCase::SoftMax(c) => c.tensors(),
            DecoderCase::Argmax(c) => c.tensors(),
        }
    }

    /// Upstream's NMSE threshold on its WebGPU backend (`max_nmse_err(backend)`): 1e-7 by
    /// default, SOFT_MAX 1e-6, ARGMAX 0, SET_ROWS and CPY to quantized types by their error
    /// estimates, CPY between equal types 0, other CPYs 1e-6; raised to 1e-6 when any tensor is
    /// f16 (and SET_ROWS into q8_0 to at least 2e-7).
    pub fn max_nmse(&self) -> f64 {
        let any_f16 = self
            .tensors()
            .map(|t| t.storages.iter().any(|s| s.layout.ty == GgmlType::F16))
            .unwrap_or(false);
        let own = match self {
            DecoderCase::SoftMax(_) => 1e-6,
            DecoderCase::Argmax(_) => 0.0,
            DecoderCase::SetRows(c) => {
                let own = c.own_max_nmse();
                if c.type_dst == CaseType::Known(GgmlType::Q8_0) {
                    return webgpu_threshold(own, any_f16).max(2e-7);
                }
                own
            }
            DecoderCase::Cpy(c) => c.own_max_nmse(),
            _ => metric::DEFAULT_MAX_NMSE,
        };
        webgpu_threshold(own, any_f16)
    }

    /// Parses the fields of `op` (one of [`OPS`]); `split` when the string ended in `,split`.
    pub(super) fn parse(op: &'static str, fields: &[(&str, &str)], split: bool) -> Result<DecoderCase, CaseError> {
        let mut p = Fields::new(op, fields);
        let case = match op {
            "GET_ROWS" => DecoderCase::GetRows(GetRowsCase {
                ty: p.optional("type", parse_type, GgmlType::F32.into())?,
                n: p.optional("n", parse_usize, 10)?,
                m: p.optional("m", parse_usize, 5)?,
                r: p.optional("r", parse_usize, 3)?,
                be1: p.optional("be1", parse_usize, 1)?,
                be2: p.optional("be2", parse_usize, 1)?,
                v: p.optional("v", parse_bool, false)?,
            }),
            "RMS_NORM" => DecoderCase::RmsNorm(RmsNormCase {
                ty: p.optional("type", parse_type, GgmlType::F32.into())?,
                ne: p.optional("ne", parse_array::<4>, [64, 5, 4, 3])?,
                v: p.optional("v", parse_bool, false)?,
                eps: p.optional("eps", parse_f32, 1e-6)?,
                inplace: p.optional("inplace", parse_bool, false)?,
            }),
            "RMS_NORM_MUL_ADD" => DecoderCase::RmsNormMulAdd(RmsNormMulAddCase {
                ty: p.optional("type", parse_type, GgmlType::F32.into())?,
                ne: p.optional("ne", parse_array::<4>, [64, 5, 4, 3])?,
                eps: p.optional("eps", parse_f32, 1e-6)?,
                broadcast: p.optional("broadcast", parse_bool, false)?,
                multi_add: p.optional("multi_add", parse_bool, false)?,
            }),
            "ADD" | "SUB" | "MUL" | "DIV" => DecoderCase::Binary(BinaryCase {
                op: BinaryOp::ALL.into_iter().find(|b| b.name() == op).expect("a binary op"),
                ty: p.optional("type", parse_type, GgmlType::F32.into())?,
                ne: p.optional("ne", parse_array::<4>, [10, 10, 1, 1])?,
                nr: p.optional("nr", parse_array::<4>, [1, 2, 1, 1])?,
                nf: p.optional("nf", parse_usize, 1)?,
                perm1: p.optional("perm1", parse_bool, false)?,
                src_overlap: p.optional("src_overlap", parse_bool, false)?,
            }),
            "ROPE" => DecoderCase::Rope(RopeCase {
                ty: p.optional("type", parse_type, GgmlType::F32.into())?,
                ne_a: p.optional("ne_a", parse_array::<4>, [10, 5, 3, 1])?,
                n_dims: p.optional("n_dims", parse_usize, 10)?,
                mode: p.optional("mode", parse_rope_mode, RopeMode::Normal)?,
                n_ctx: p.optional("n_ctx", parse_usize, 512)?,
                fs: p.optional("fs", parse_f32, 1.0)?,
                ef: p.optional("ef", parse_f32, 0.0)?,
                af: p.optional("af", parse_f32, 0.0)?,
                ff: p.optional("ff", parse_bool, false)?,
                v: p.optional("v", parse_usize, 0)?,
                inplace: p.optional("inplace", parse_bool, false)?,
                n_offs: p.optional("n_offs", parse_usize, 0)?,
            }),
            "ROPE_SET_ROWS" => DecoderCase::RopeSetRows(RopeSetRowsCase {
                ty: p.required("type", parse_type)?,
                type_idx: p.required("type_idx", parse_type)?,
                ne_a: p.required("ne_a", parse_array::<4>)?,
                mode: p.required("mode", parse_rope_mode)?,
            }),
            "SET_ROWS" => DecoderCase::SetRows(SetRowsCase {
                type_src: p.required("type_src", parse_type)?,
                type_dst: p.required("type_dst", parse_type)?,
                type_idx: p.required("type_idx", parse_type)?,
                ne: p.required("ne", parse_array::<4>)?,
                nr23: p.required("nr23", parse_array::<2>)?,
                r: p.required("r", parse_usize)?,
                v: p.optional("v", parse_bool, false)?,
            }),
            "CPY" => DecoderCase::Cpy(CpyCase {
                type_src: p.optional("type_src", parse_type, GgmlType::F32.into())?,
                type_dst: p.optional("type_dst", parse_type, GgmlType::F32.into())?,
                ne_src: p.optional("ne_src", parse_array::<4>, [10, 10, 10, 1])?,
                ne_dst: p.optional("ne_dst", |s| parse_array::<4>(s).map(Some), None)?,
                permute_src: p.optional("permute_src", parse_array::<4>, [0; 4])?,
                permute_dst: p.optional("permute_dst", parse_array::<4>, [0; 4])?,
                src_transpose: p.optional("_src_transpose", parse_bool, false)?,
                dst_alloc: p.optional("dst_alloc", |s| parse_array::<4>(s).map(Some), None)?,
            }),
            "SCALE" => DecoderCase::Scale(ScaleCase {
                ty: p.optional("type", parse_type, GgmlType::F32.into())?,
                ne: p.optional("ne", parse_array::<4>, [10, 10, 10, 10])?,
                scale: p.optional("scale", parse_f32, 2.0)?,
                bias: p.optional("bias", parse_f32, 0.0)?,
                inplace: p.optional("inplace", parse_bool, false)?,
            }),
            "SOFT_MAX" => DecoderCase::SoftMax(SoftMaxCase {
                ty: p.optional("type", parse_type, GgmlType::F32.into())?,
                ne: p.optional("ne", parse_array::<4>, [10, 5, 4, 3])?,
                mask: p.optional("mask", parse_bool, false)?,
                sinks: p.optional("sinks", parse_bool, false)?,
                m_prec: p.optional("m_prec", parse_type, GgmlType::F32.into())?,
                nr23: p.optional("nr23", parse_array::<2>, [1, 1])?,
                scale: p.optional("scale", parse_f32, 1.0)?,
                max_bias: p.optional("max_bias", parse_f32, 0.0)?,
                inplace: p.optional("inplace", parse_bool, false)?,
            }),
            "ARGMAX" => DecoderCase::Argmax(ArgmaxCase {
                ty: p.optional("type", parse_type, GgmlType::F32.into())?,
                ne: p.optional("ne", parse_array::<4>, [10, 100, 1, 1])?,
            }),
            glu => {
                let op = GluOp::ALL.into_iter().find(|g| g.name() == glu).expect("a GLU op");
                let oai = op == GluOp::SwigluOai;
                DecoderCase::Glu(GluCase {
                    op,
                    ty: p.optional("type", parse_type, GgmlType::F32.into())?,
                    ne_a: p.optional("ne_a", parse_array::<4>, [128, 2, 2, 2])?,
                    v: p.optional("v", parse_usize, 0)?,
                    swapped: if oai || split {
                        false
                    } else {
                        p.optional("swapped", parse_bool, false)?
                    },
                    split: split || oai,
                    alpha: if oai {
                        p.optional("alpha", parse_f32, 1.702)?
                    } else {
                        1.702
                    },
                    limit: if oai { p.optional("limit", parse_f32, 7.0)? } else { 7.0 },
                })
            }
        };
        p.finish()?;
        if split && !matches!(&case, DecoderCase::Glu(g) if g.op != GluOp::SwigluOai) {
            return Err(CaseError::BadField {
                op,
                part: "split".into(),
            });
        }
        Ok(case)
    }
}

fn parse_rope_mode(s: &str) -> Result<RopeMode, &'static str> {
    s.parse::<i32>()
        .ok()
        .and_then(RopeMode::from_ggml)
        .ok_or("a rope mode (0, 2, 8, 24 or 40)")
}

fn f6(v: f32) -> String {
    format!("{v:.6}")
}

impl fmt::Display for DecoderCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecoderCase::GetRows(c) => write!(
                f,
                "GET_ROWS(type={},n={},m={},r={},be1={},be2={},v={})",
                c.ty,
                c.n,
                c.m,
                c.r,
                c.be1,
                c.be2,
                u8::from(c.v)
            ),
            DecoderCase::RmsNorm(c) => write!(
                f,
                "RMS_NORM(type={},ne={},v={},eps={},inplace={})",
                c.ty,
                Array(&c.ne),
                u8::from(c.v),
                f6(c.eps),
                u8::from(c.inplace)
            ),
            DecoderCase::RmsNormMulAdd(c) => write!(
                f,
                "RMS_NORM_MUL_ADD(type={},ne={},eps={},broadcast={},multi_add={})",
                c.ty,
                Array(&c.ne),
                f6(c.eps),
                u8::from(c.broadcast),
                u8::from(c.multi_add)
            ),
            DecoderCase::Binary(c) => write!(
                f,
                "{}(type={},ne={},nr={},nf={},perm1={},src_overlap={})",
                c.op,
                c.ty,
                Array(&c.ne),
                Array(&c.nr),
                c.nf,
                u8::from(c.perm1),
                u8::from(c.src_overlap)
            ),
            DecoderCase::RopeSetRows(c) => write!(
                f,
                "ROPE_SET_ROWS(type={},type_idx={},ne_a={},mode={})",
                c.ty,
                c.type_idx,
                Array(&c.ne_a),
                c.mode.ggml()
            ),
            DecoderCase::Rope(c) => write!(
                f,
                "ROPE(type={},ne_a={},n_dims={},mode={},n_ctx={},fs={},ef={},af={},ff={},v={},inplace={},n_offs={})",
                c.ty,
                Array(&c.ne_a),
                c.n_dims,
                c.mode.ggml(),
                c.n_ctx,
                f6(c.fs),
                f6(c.ef),
                f6(c.af),
                u8::from(c.ff),
                c.v,
                u8::from(c.inplace),
                c.n_offs
            ),
            DecoderCase::Glu(c) if c.op == GluOp::SwigluOai => write!(
                f,
                "SWIGLU_OAI(type={},ne_a={},v={},alpha={},limit={})",
                c.ty,
                Array(&c.ne_a),
                c.v,
                f6(c.alpha),
                f6(c.limit)
            ),
            DecoderCase::Glu(c) if c.split => {
                write!(f, "{}(type={},ne_a={},v={},split)", c.op, c.ty, Array(&c.ne_a), c.v)
            }
            DecoderCase::Glu(c) => write!(
                f,
                "{}(type={},ne_a={},v={},swapped={})",
                c.op,
                c.ty,
                Array(&c.ne_a),
                c.v,
                u8::from(c.swapped)
            ),
            DecoderCase::SetRows(c) => write!(
                f,
                "SET_ROWS(type_src={},type_dst={},type_idx={},ne={},nr23={},r={},v={})",
                c.type_src,
                c.type_dst,
                c.type_idx,
                Array(&c.ne),
                Array(&c.nr23),
                c.r,
                u8::from(c.v)
            ),
            DecoderCase::Cpy(c) => {
                write!(
                    f,
                    "CPY(type_src={},type_dst={},ne_src={}",
                    c.type_src,
                    c.type_dst,
                    Array(&c.ne_src)
                )?;
                if let Some(ne_dst) = &c.ne_dst {
                    write!(f, ",ne_dst={}", Array(ne_dst))?;
                }
                write!(
                    f,
                    ",permute_src={},permute_dst={},_src_transpose={}",
                    Array(&c.permute_src),
                    Array(&c.permute_dst),
                    u8::from(c.src_transpose)
                )?;
                if let Some(alloc) = &c.dst_alloc {
                    write!(f, ",dst_alloc={}", Array(alloc))?;
                }
                f.write_str(")")
            }
            DecoderCase::Scale(c) => write!(
                f,
                "SCALE(type={},ne={},scale={},bias={},inplace={})",
                c.ty,
                Array(&c.ne),
                f6(c.scale),
                f6(c.bias),
                u8::from(c.inplace)
            ),
            DecoderCase::SoftMax(c) => write!(
                f,
                "SOFT_MAX(type={},ne={},mask={},sinks={},m_prec={},nr23={},scale={},max_bias={},inplace={})",
                c.ty,
                Array(&c.ne),
                u8::from(c.mask),
                u8::from(c.sinks),
                c.m_prec,
                Array(&c.nr23),
                f6(c.scale),
                f6(c.max_bias),
                u8::from(c.inplace)
            ),
            DecoderCase::Argmax(c) => write!(f, "ARGMAX(type={},ne={})", c.ty, Array(&c.ne)),
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// `GET_ROWS(type, n, m, r, be1, be2, v)`: `r` of `m` rows of `n` elements, per batch.
///
/// Operands: `src` `[n, m, be1, be2]` of `type` (uniform in [-1, 1]; small integers for i32),
/// `ids` i32 `[r, be1, be2]` (`rand() % m`; with `v`, a view of the first `r/2` of each row).
/// dst f32 `[n, r (or r/2), be1, be2]`. Defaults: f32, 10, 5, 3, 1, 1, 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetRowsCase {
    pub ty: CaseType,
    pub n: usize,
    pub m: usize,
    pub r: usize,
    pub be1: usize,
    pub be2: usize,
    pub v: bool,
}

impl GetRowsCase {
    fn tensors(&self) -> Result<DecoderTensors, CaseError> {
        let op = "GET_ROWS";
        let ty = known_type(op, "type", self.ty)?;
        let mut b = Builder::new(op);
        let fill = if ty == GgmlType::I32 {
            Fill::Integers
        } else {
            Fill::Uniform(-1.0, 1.0)
        };
        b.whole("src", ty, [self.n, self.m, self.be1, self.be2], fill)?;
        let ids = b.storage(
            "ids",
            GgmlType::I32,
            [self.r, self.be1, self.be2, 1],
            Fill::RowIds { rows: self.m },
        )?;
        // With `v` and r = 1 the view holds no ids, and dst no rows.
        let r = if self.v { self.r / 2 } else { self.r };
        b.sub_view("ids", ids, [r, self.be1, self.be2, 1], 0)?;
        let out_ty = if ty == GgmlType::I32 {
            GgmlType::I32
        } else {
            GgmlType::F32
        };
        let dst = Layout::contiguous(out_ty, [self.n, r, self.be1, self.be2])
            .map_err(|source| CaseError::Layout { op, source })?;
        Ok(b.finish(dst))
    }
}

/// `RMS_NORM(type, ne, v, eps, inplace)`. Operand: `x` `[ne]` f32 uniform in [-10, 10]; with `v`
/// a view `[ne/2]` (every extent halved) with the full strides. Defaults: f32, [64,5,4,3], 0,
/// 1e-6, 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RmsNormCase {
    pub ty: CaseType,
    pub ne: [usize; 4],
    pub v: bool,
    pub eps: f32,
    /// ggml's in-place variant: the same values.
    pub inplace: bool,
}

impl RmsNormCase {
    fn tensors(&self) -> Result<DecoderTensors, CaseError> {
        let op = "RMS_NORM";
        let ty = known_type(op, "type", self.ty)?;
        let mut b = Builder::new(op);
        let s = b.storage("x", ty, self.ne, Fill::Uniform(-10.0, 10.0))?;
        let ne = if self.v { self.ne.map(|n| n / 2) } else { self.ne };
        b.sub_view("x", s, ne, 0)?;
        let dst = b.layout(GgmlType::F32, ne)?;
        Ok(b.finish(dst))
    }
}

/// `RMS_NORM_MUL_ADD(type, ne, eps, broadcast, multi_add)`: the graph
/// `a' = (a + b) + c` (twice with `multi_add`), `out = rms_norm(a')·b + c`.
///
/// Operands: `a` (`[ne]`, or `[2·ne0, 3·ne1, 3·ne2, 4·ne3]` with `broadcast`), `b`, `c` `[ne]`,
/// all f32 uniform in [-10, 10]. Defaults: f32, [64,5,4,3], 1e-6, 0, 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RmsNormMulAddCase {
    pub ty: CaseType,
    pub ne: [usize; 4],
    pub eps: f32,
    pub broadcast: bool,
    pub multi_add: bool,
}

impl RmsNormMulAddCase {
    fn tensors(&self) -> Result<DecoderTensors, CaseError> {
        let op = "RMS_NORM_MUL_ADD";
        let ty = known_type(op, "type", self.ty)?;
        let mut b = Builder::new(op);
        let ne_a = if self.broadcast {
            scaled(op, self.ne, [2, 3, 3, 4])?
        } else {
            self.ne
        };
        let fill = Fill::Uniform(-10.0, 10.0);
        b.whole("a", ty, ne_a, fill)?;
        b.whole("b", ty, self.ne, fill)?;
        b.whole("c", ty, self.ne, fill)?;
        let dst = b.layout(GgmlType::F32, ne_a)?;
        Ok(b.finish(dst))
    }
}

/// `ADD|SUB|MUL|DIV(type, ne, nr, nf, perm1, src_overlap)`: `a` `[ne·nr]` op `b_0` op … op
/// `b_{nf−1}`, each `b` `[ne]` repeated over `a`.
///
/// - `perm1`: each `b` is allocated `[ne1, ne2, ne0, ne3]` and permuted by `(1, 2, 0, 3)` back to
///   `[ne]`;
/// - `src_overlap`: `a` and `b` are views `[ne0, ne1, ne2, 2·(ne3/3)]` of one `[ne]` storage, `a`
///   at its start and `b` `ne3/3` planes on;
/// - inputs uniform in [-1, 1] (MUL and DIV: [0.9, 1.1]).
///
/// Defaults: f32, [10,10,1,1], [1,2,1,1], 1, 0, 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinaryCase {
    pub op: BinaryOp,
    pub ty: CaseType,
    pub ne: [usize; 4],
    pub nr: [usize; 4],
    /// Chained ops (upstream's fusion tests): `b_0 … b_{nf−1}`.
    pub nf: usize,
    pub perm1: bool,
    pub src_overlap: bool,
}

impl BinaryCase {
    fn tensors(&self) -> Result<DecoderTensors, CaseError> {
        let op = self.op.name();
        let ty = known_type(op, "type", self.ty)?;
        if self.nf == 0 || self.nf > 16 {
            return Err(invalid(op, format!("nf = {} is not in 1..=16", self.nf)));
        }
        let fill = if matches!(self.op, BinaryOp::Mul | BinaryOp::Div) {
            Fill::Uniform(0.9, 1.1)
        } else {
            Fill::Uniform(-1.0, 1.0)
        };
        let mut b = Builder::new(op);
        let ne_a = scaled(op, self.ne, self.nr)?;
        let a = b.storage("a", ty, ne_a, fill)?;
        let dst_ne = if self.src_overlap {
            if self.nf != 1 || self.perm1 || self.nr != [1; 4] || self.ne[3] < 3 {
                return Err(invalid(
                    op,
                    "src_overlap needs nf = 1, perm1 = 0, nr = [1,1,1,1] and ne3 >= 3",
                ));
            }
            let ne = [self.ne[0], self.ne[1], self.ne[2], 2 * (self.ne[3] / 3)];
            b.sub_view("a", a, ne, 0)?;
            let plane = b.storages[a].layout.nb[3];
            b.sub_view("b0", a, ne, self.ne[3] / 3 * plane)?;
            ne
        } else {
            b.sub_view("a", a, ne_a, 0)?;
            for _ in 0..self.nf {
                if self.perm1 {
                    let p = [1, 2, 0, 3];
                    let stored = b.storage("b", ty, p.map(|i| self.ne[i]), fill)?;
                    let view = b.storages[stored]
                        .layout
                        .permute(p)
                        .map_err(|source| CaseError::Layout { op, source })?;
                    b.view("b", stored, view)?;
                } else {
                    b.whole("b", ty, self.ne, fill)?;
                }
            }
            ne_a
        };
        let dst = b.layout(ty, dst_ne)?;
        Ok(b.finish(dst))
    }
}

/// `ROPE(type, ne_a, n_dims, mode, n_ctx, fs, ef, af, ff, v, inplace, n_offs)` (forward).
///
/// Operands: `a` `[ne_a]` (uniform in [-1, 1]; `v = 1`: a view of a `[2·ne0, 4·ne1, 3·ne2, ne3]`
/// allocation; `v = 2`: the second half of `[2·ne0, …]` rows, offset `ne0` elements), `pos` i32
/// `[ne2]` (`[4·ne2]` for the multi-section modes) `rand() % n_ctx`, and with `ff` frequency
/// factors f32 `[n_dims/2]` uniform in [0.9, 1.1]. See [`RopeCase::params`] for the rest.
/// Defaults: f32, [10,5,3,1], 10, 0, 512, 1, 0, 0, 0, 0, 0, 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeCase {
    pub ty: CaseType,
    pub ne_a: [usize; 4],
    pub n_dims: usize,
    pub mode: RopeMode,
    /// Positions are drawn below this.
    pub n_ctx: usize,
    /// freq_scale.
    pub fs: f32,
    /// ext_factor.
    pub ef: f32,
    /// attn_factor.
    pub af: f32,
    /// With frequency factors.
    pub ff: bool,
    pub v: usize,
    pub inplace: bool,
    pub n_offs: usize,
}

impl RopeCase {
    /// The op's parameters as upstream passes them: `n_ctx_orig = 0`, base 10000, `fs`, `ef`,
    /// `af`, `beta_fast = beta_slow = 1`; M-RoPE and interleaved M-RoPE with sections
    /// `[n_dims/3; 3]`; vision with `n_dims/2` rotated dims and sections `[n_dims/4, n_dims/4]`.
    pub fn params(&self) -> RopeParams {
        let mut p = RopeParams::new(self.n_dims, self.mode);
        p.freq_scale = self.fs;
        p.ext_factor = self.ef;
        p.attn_factor = self.af;
        p.beta_fast = 1.0;
        p.beta_slow = 1.0;
        p.n_offs = self.n_offs;
        match self.mode {
            RopeMode::Vision => {
                p.n_dims = self.n_dims / 2;
                p.sections = [self.n_dims / 4, self.n_dims / 4, 0, 0];
            }
            RopeMode::Mrope | RopeMode::Imrope => p.sections = [self.n_dims / 3, self.n_dims / 3, self.n_dims / 3, 0],
            RopeMode::Normal | RopeMode::Neox => {}
        }
        p
    }

    fn tensors(&self) -> Result<DecoderTensors, CaseError> {
        let op = "ROPE";
        let ty = known_type(op, "type", self.ty)?;
        let mut b = Builder::new(op);
        let fill = Fill::Uniform(-1.0, 1.0);
        match self.v {
            0 => {
                b.whole("a", ty, self.ne_a, fill)?;
            }
            1 => {
                let s = b.storage("a", ty, scaled(op, self.ne_a, [2, 4, 3, 1])?, fill)?;
                b.sub_view("a", s, self.ne_a, 0)?;
            }
            2 => {
                let s = b.storage("a", ty, scaled(op, self.ne_a, [2, 1, 1, 1])?, fill)?;
                b.sub_view("a", s, self.ne_a, self.ne_a[0] * ty.type_size())?;
            }
            v => return Err(invalid(op, format!("v = {v} is not 0, 1 or 2"))),
        }
        let positions = if self.mode.is_multi() { 4 } else { 1 };
        if self.n_ctx == 0 {
            return Err(invalid(op, "n_ctx must be positive"));
        }
        b.whole(
            "pos",
            GgmlType::I32,
            [self.ne_a[2].saturating_mul(positions), 1, 1, 1],
            Fill::Positions { n_ctx: self.n_ctx },
        )?;
        if self.ff {
            b.whole(
                "freq_factors",
                GgmlType::F32,
                [self.n_dims / 2, 1, 1, 1],
                Fill::Uniform(0.9, 1.1),
            )?;
        }
        let dst = b.layout(ty, self.ne_a)?;
        Ok(b.finish(dst))
    }
}

/// `ROPE_SET_ROWS(type, type_idx, ne_a, mode)`: llama.cpp's case of a decoder's rotary embedding
/// and KV-cache write (upstream ggml's lists have none): ROPE of f32 `a` `[ne_a]` at positions
/// below 512 (`ggml_rope` with `ne_a[0]` dims in the normal and NeoX modes; the multi-section
/// modes as upstream's ROPE case with `n_dims` 128, fs 1.4245, ef 0.7465, af 1.4245), then
/// SET_ROWS of its first `[ne0·ne1, ne2]` rows (one row a token) into `dst` `[ne0·ne1, ne2·ne3]` of
/// `type` at `row_idxs` (`type_idx`, a permutation of `0..ne2`). `a` and dst uniform in [-1, 1].
/// The GPU runs it as `rope::rope_set_rows` (fused where it applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RopeSetRowsCase {
    pub ty: CaseType,
    pub type_idx: CaseType,
    pub ne_a: [usize; 4],
    pub mode: RopeMode,
}

impl RopeSetRowsCase {
    /// The ROPE part, as a ROPE case of the same tensor.
    pub fn rope(&self) -> RopeCase {
        let multi = self.mode.is_multi();
        let (fs, ef, af) = if multi {
            (1.4245, 0.7465, 1.4245)
        } else {
            (1.0, 0.0, 1.0)
        };
        RopeCase {
            ty: GgmlType::F32.into(),
            ne_a: self.ne_a,
            n_dims: if multi { 128 } else { self.ne_a[0] },
            mode: self.mode,
            n_ctx: 512,
            fs,
            ef,
            af,
            ff: false,
            v: 0,
            inplace: true,
            n_offs: 0,
        }
    }

    /// The rows SET_ROWS stores, over `a`'s storage: `[ne0·ne1, ne2]`, a token's heads a row.
    pub fn rows(a: &Layout) -> Layout {
        let [n0, n1, n2, _] = a.ne;
        Layout {
            ty: a.ty,
            ne: [n0 * n1, n2, 1, 1],
            nb: [a.nb[0], a.nb[2], a.nb[2] * n2, a.nb[2] * n2],
            offset: a.offset,
        }
    }

    fn tensors(&self) -> Result<DecoderTensors, CaseError> {
        let op = "ROPE_SET_ROWS";
        let ty = known_type(op, "type", self.ty)?;
        let idx = known_type(op, "type_idx", self.type_idx)?;
        let [n0, n1, n2, n3] = self.ne_a;
        let overflow = || invalid(op, "extents overflow");
        let row = n0.checked_mul(n1).ok_or_else(overflow)?;
        let cells = n2.checked_mul(n3).ok_or_else(overflow)?;
        let positions = if self.mode.is_multi() { 4 } else { 1 };
        let mut b = Builder::new(op);
        b.whole("dst", ty, [row, cells, 1, 1], Fill::Uniform(-1.0, 1.0))?;
        b.whole("a", GgmlType::F32, self.ne_a, Fill::Uniform(-1.0, 1.0))?;
        b.whole(
            "pos",
            GgmlType::I32,
            [n2.checked_mul(positions).ok_or_else(overflow)?, 1, 1, 1],
            Fill::Positions { n_ctx: 512 },
        )?;
        b.whole("row_idxs", idx, [n2, 1, 1, 1], Fill::DistinctRowIds { rows: n2 })?;
        let dst = b.storages[0].layout;
        Ok(b.finish(dst))
    }
}

/// A GLU case: `OP(type, ne_a, v, swapped)` (fused), `OP(type, ne_a, v, split)` (two tensors)
/// or `SWIGLU_OAI(type, ne_a, v, alpha, limit)` (two tensors).
///
/// Operands: `a` `[ne_a]` and, split, `b` `[ne_a]`, uniform in [-150, 150]; `v = 1`: each a
/// view of a `[3·ne0, …]` allocation. dst `[ne0/2 (fused) or ne0, ne1, ne2, ne3]` of `type`.
/// Defaults: f32, [128,2,2,2], 0, 0; SWIGLU_OAI's alpha 1.702, limit 7.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GluCase {
    pub op: GluOp,
    pub ty: CaseType,
    pub ne_a: [usize; 4],
    pub v: usize,
    pub swapped: bool,
    /// Two tensors (always for SWIGLU_OAI).
    pub split: bool,
    pub alpha: f32,
    pub limit: f32,
}

impl GluCase {
    fn tensors(&self) -> Result<DecoderTensors, CaseError> {
        let op = self.op.name();
        let ty = known_type(op, "type", self.ty)?;
        let mut b = Builder::new(op);
        let fill = Fill::Uniform(-150.0, 150.0);
        let names: &[&'static str] = if self.split { &["a", "b"] } else { &["a"] };
        for &name in names {
            match self.v {
                0 => {
                    b.whole(name, ty, self.ne_a, fill)?;
                }
                1 => {
                    let s = b.storage(name, ty, scaled(op, self.ne_a, [3, 1, 1, 1])?, fill)?;
                    b.sub_view(name, s, self.ne_a, 0)?;
                }
                v => return Err(invalid(op, format!("v = {v} is not 0 or 1"))),
            }
        }
        let n = if self.split { self.ne_a[0] } else { self.ne_a[0] / 2 };
        let dst = b.layout(ty, [n, self.ne_a[1], self.ne_a[2], self.ne_a[3]])?;
        Ok(b.finish(dst))
    }
}

/// `SET_ROWS(type_src, type_dst, type_idx, ne, nr23, r, v)`: `r` rows of `src` written into
/// `dst` `[ne0, ne1, ne2·nr23₀, ne3·nr23₁]` at ids `[r, ne2, ne3]` broadcast over dims 2, 3.
///
/// Operands (in order): `dst` (uniform in [-1, 1], quantized to `type_dst`; written in place and
/// compared whole), `src` `[ne0, r, ne2·nr0, ne3·nr1]` uniform in [-1, 1], `ids` (each row a
/// shuffled subset of `0..ne1`); with `v`, `src` and `ids` are views of their first `r/2` rows.
/// Every field is required (upstream's constructor has no defaults but `v = 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetRowsCase {
    pub type_src: CaseType,
    pub type_dst: CaseType,
    pub type_idx: CaseType,
    pub ne: [usize; 4],
    pub nr23: [usize; 2],
    pub r: usize,
    pub v: bool,
}

impl SetRowsCase {
    /// `max_nmse_err()`: for a quantized `type_dst` the NMSE of one quantized value off by one
    /// step (`(1/8)²`, /4 for q5, /64 for q8, ×16 from f16 sources, over a quarter of the element
    /// count), else 1e-7.
    fn own_max_nmse(&self) -> f64 {
        use GgmlType as T;
        let dst = self.type_dst.ggml();
        if !matches!(dst, Some(T::Q4_0 | T::Q4_1 | T::IQ4_NL | T::Q5_0 | T::Q5_1 | T::Q8_0))
            && self.type_dst.name() != "q2_0"
        {
            return metric::DEFAULT_MAX_NMSE;
        }
        let f16_src = self.type_src == CaseType::Known(T::F16);
        let mut e = 1.0f64 / 8.0;
        if f16_src && self.type_dst.name() == "q2_0" {
            e *= 4.0;
        }
        if matches!(dst, Some(T::Q5_0 | T::Q5_1)) {
            e /= 2.0;
        }
        if dst == Some(T::Q8_0) {
            e /= 8.0;
        }
        e *= e;
        if f16_src {
            e *= 16.0;
        }
        let [n0, _, n2, n3] = self.ne;
        let elements = [n0, self.r, n2, self.nr23[0], n3, self.nr23[1]]
            .iter()
            .map(|&x| x as f64)
            .product::<f64>();
        e / (0.25 * elements)
    }

    fn tensors(&self) -> Result<DecoderTensors, CaseError> {
        let op = "SET_ROWS";
        let (ts, td, ti) = (
            known_type(op, "type_src", self.type_src)?,
            known_type(op, "type_dst", self.type_dst)?,
            known_type(op, "type_idx", self.type_idx)?,
        );
        let [n0, n1, n2, n3] = self.ne;
        let [nr2, nr3] = self.nr23;
        let b2 = n2.checked_mul(nr2).ok_or_else(|| invalid(op, "extents overflow"))?;
        let b3 = n3.checked_mul(nr3).ok_or_else(|| invalid(op, "extents overflow"))?;
        let mut b = Builder::new(op);
        b.whole("dst", td, [n0, n1, b2, b3], Fill::Uniform(-1.0, 1.0))?;
        let src = b.storage("src", ts, [n0, self.r, b2, b3], Fill::Uniform(-1.0, 1.0))?;
        let ids = b.storage("ids", ti, [self.r, n2, n3, 1], Fill::DistinctRowIds { rows: n1 })?;
        // Upstream's `v` with r = 1 views no rows at all: the op then leaves dst as it is.
        let r = if self.v { self.r / 2 } else { self.r };
        b.sub_view("src", src, [n0, r, b2, b3], 0)?;
        b.sub_view("ids", ids, [r, n2, n3, 1], 0)?;
        let dst = b.storages[0].layout;
        Ok(b.finish(dst))
    }
}

/// `CPY(type_src, type_dst, ne_src, [ne_dst,] permute_src, permute_dst, _src_transpose
/// [, dst_alloc])`: `src` `[ne_src]` (permuted by `permute_src` unless all 0, then transposed
/// if asked) copied into `dst` of extents `ne_dst` (when printed) or the source's, permuted by
/// `permute_dst` unless all 0; with `dst_alloc`, dst is a view of a `[dst_alloc]` allocation.
/// Every tensor uniform in [-150, 150]. Defaults: f32, f32, [10,10,10,1], none, [0,0,0,0],
/// [0,0,0,0], 0, none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpyCase {
    pub type_src: CaseType,
    pub type_dst: CaseType,
    pub ne_src: [usize; 4],
    pub ne_dst: Option<[usize; 4]>,
    pub permute_src: [usize; 4],
    pub permute_dst: [usize; 4],
    pub src_transpose: bool,
    pub dst_alloc: Option<[usize; 4]>,
}

impl CpyCase {
    /// `max_nmse_err()`: 0 between equal types; to q4_0/q4_1/iq4_nl/q5/q8 the one-step error
    /// estimate for values in [-150, 150] (`(150/8)²` ×4 for iq4_nl, /4 for q5, /64 for q8, over
    /// `0.25·150²` times the element count); else 1e-6.
    fn own_max_nmse(&self) -> f64 {
        use GgmlType as T;
        if self.type_src == self.type_dst {
            return 0.0;
        }
        let dst = self.type_dst.ggml();
        if !matches!(dst, Some(T::Q4_0 | T::Q4_1 | T::IQ4_NL | T::Q5_0 | T::Q5_1 | T::Q8_0)) {
            return 1e-6;
        }
        let mut e = 150.0f64 / 8.0;
        if dst == Some(T::IQ4_NL) {
            e *= 2.0;
        }
        if matches!(dst, Some(T::Q5_0 | T::Q5_1)) {
            e /= 2.0;
        }
        if dst == Some(T::Q8_0) {
            e /= 8.0;
        }
        let elements = self.ne_src.iter().map(|&x| x as f64).product::<f64>();
        e * e / (150.0 * 150.0 * 0.25 * elements)
    }

    fn tensors(&self) -> Result<DecoderTensors, CaseError> {
        let op = "CPY";
        let ts = known_type(op, "type_src", self.type_src)?;
        let td = known_type(op, "type_dst", self.type_dst)?;
        let layout_err = |source: LayoutError| CaseError::Layout { op, source };
        let fill = Fill::Uniform(-150.0, 150.0);
        let mut b = Builder::new(op);
        let s = b.storage("src", ts, self.ne_src, fill)?;
        let mut src_view = b.storages[s].layout;
        if self.permute_src != [0; 4] {
            src_view = src_view.permute(self.permute_src).map_err(layout_err)?;
        }
        if self.src_transpose {
            src_view = src_view.permute([1, 0, 2, 3]).map_err(layout_err)?;
        }
        b.view("src", s, src_view)?;
        let dst_ne = self.ne_dst.unwrap_or(src_view.ne);
        let dst = if let Some(alloc) = self.dst_alloc {
            let d = b.storage("dst", td, alloc, fill)?;
            let o = b.sub_view("dst", d, dst_ne, 0)?;
            b.operands[o].view
        } else {
            let d = b.storage("dst", td, dst_ne, fill)?;
            let mut view = b.storages[d].layout;
            if self.permute_dst != [0; 4] {
                view = view.permute(self.permute_dst).map_err(layout_err)?;
            }
            let o = b.view("dst", d, view)?;
            b.operands[o].view
        };
        Ok(b.finish(dst))
    }
}

/// `SCALE(type, ne, scale, bias, inplace)`: `x·scale + bias`, `x` uniform in [-1, 1].
/// Defaults: f32, [10,10,10,10], 2, 0, 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleCase {
    pub ty: CaseType,
    pub ne: [usize; 4],
    pub scale: f32,
    pub bias: f32,
    pub inplace: bool,
}

impl ScaleCase {
    fn tensors(&self) -> Result<DecoderTensors, CaseError> {
        let op = "SCALE";
        let ty = known_type(op, "type", self.ty)?;
        let mut b = Builder::new(op);
        b.whole("x", ty, self.ne, Fill::Uniform(-1.0, 1.0))?;
        let dst = b.layout(ty, self.ne)?;
        Ok(b.finish(dst))
    }
}

/// `SOFT_MAX(type, ne, mask, sinks, m_prec, nr23, scale, max_bias, inplace)`.
///
/// Operands: `x` `[ne0, ne1, ne2·nr0, ne3·nr1]`, `mask` (with `mask`) `[ne]` of `m_prec`,
/// `sinks` (with `sinks`) f32 `[ne2·nr0]`; all uniform in [-1, 1]. Defaults: f32, [10,5,4,3],
/// 0, 0, f32, [1,1], 1, 0, 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoftMaxCase {
    pub ty: CaseType,
    pub ne: [usize; 4],
    pub mask: bool,
    pub sinks: bool,
    pub m_prec: CaseType,
    pub nr23: [usize; 2],
    pub scale: f32,
    pub max_bias: f32,
    pub inplace: bool,
}

impl SoftMaxCase {
    fn tensors(&self) -> Result<DecoderTensors, CaseError> {
        let op = "SOFT_MAX";
        let ty = known_type(op, "type", self.ty)?;
        let m_prec = known_type(op, "m_prec", self.m_prec)?;
        let ne_x = scaled(op, self.ne, [1, 1, self.nr23[0], self.nr23[1]])?;
        let fill = Fill::Uniform(-1.0, 1.0);
        let mut b = Builder::new(op);
        b.whole("x", ty, ne_x, fill)?;
        if self.mask {
            b.whole("mask", m_prec, self.ne, fill)?;
        }
        if self.sinks {
            b.whole("sinks", GgmlType::F32, [ne_x[2], 1, 1, 1], fill)?;
        }
        let dst = b.layout(GgmlType::F32, ne_x)?;
        Ok(b.finish(dst))
    }
}

/// `ARGMAX(type, ne)`: `x` `[ne]` with each row a shuffle of `0..ne0` (no ties); dst i32
/// `[ne1]`. Defaults: f32, [10,100,1,1].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgmaxCase {
    pub ty: CaseType,
    pub ne: [usize; 4],
}

impl ArgmaxCase {
    fn tensors(&self) -> Result<DecoderTensors, CaseError> {
        let op = "ARGMAX";
        let ty = known_type(op, "type", self.ty)?;
        let mut b = Builder::new(op);
        b.whole("x", ty, self.ne, Fill::Shuffled)?;
        let dst = b.layout(GgmlType::I32, [self.ne[1], 1, 1, 1])?;
        Ok(b.finish(dst))
    }
}
