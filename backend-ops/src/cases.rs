//! Upstream's test cases as typed values: the `OP(name=value,…)` strings that ggml's
//! `test-backend-ops` prints, parsed and printed back byte for byte, and the tensors each case
//! builds (their layouts), shared by the GPU test harness and the CPU reference.
//!
//! ```text
//! MUL_MAT(type_a=q4_0,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0)
//! FLASH_ATTN_EXT(hsk=64,hsv=64,nh=8,nr23=[4,1],kv=1024,nb=32,mask=1,sinks=0,max_bias=0.000000,
//!                logit_softcap=0.000000,prec=f32,type_K=f16,type_V=f16,permute=[0,1,2,3],kv_view=1,v_is_view_of_k=0)
//! ```
//!
//! Printing follows upstream's `var_to_str`: booleans as `0`/`1`, floats as C's `%f` (six decimals),
//! arrays as `[a,b]`, types by ggml name, precision as `f32` or `def`. Parsing takes the fields in
//! any order; fields left out take upstream's defaults (see [`MulMatCase`] and [`FlashAttnCase`]).

use std::fmt;
use std::str::FromStr;

use ggml_dawn::format::FormatError;
use ggml_dawn::ggml_type::GgmlType;
use ggml_dawn::tensor::{HostTensor, Layout, LayoutError};

pub mod decoder;

pub use decoder::DecoderCase;

/// Types upstream names in its case lists that [`GgmlType`] does not (yet) list.
const UPSTREAM_ONLY_TYPES: &[&str] = &["q1_0", "q2_0", "nvfp4"];

/// An element type as named in a case string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaseType {
    /// A type this crate knows.
    Known(GgmlType),
    /// A type upstream knows but [`GgmlType`] does not (`q1_0`, `q2_0`, `nvfp4`): such a case parses
    /// and prints, but cannot build tensors here ([`CaseError::UnsupportedType`]).
    Upstream(&'static str),
}

impl CaseType {
    /// The type as a [`GgmlType`], when this crate knows it.
    pub fn ggml(self) -> Option<GgmlType> {
        match self {
            CaseType::Known(t) => Some(t),
            CaseType::Upstream(_) => None,
        }
    }

    /// ggml's name of the type.
    pub fn name(self) -> &'static str {
        match self {
            CaseType::Known(t) => t.name(),
            CaseType::Upstream(name) => name,
        }
    }
}

impl From<GgmlType> for CaseType {
    fn from(t: GgmlType) -> CaseType {
        CaseType::Known(t)
    }
}

impl fmt::Display for CaseType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CaseType {
    type Err = ggml_dawn::ggml_type::UnknownType;

    fn from_str(s: &str) -> Result<CaseType, Self::Err> {
        match s.parse::<GgmlType>() {
            Ok(t) => Ok(CaseType::Known(t)),
            Err(e) => UPSTREAM_ONLY_TYPES
                .iter()
                .find(|&&name| name == s)
                .map(|&name| CaseType::Upstream(name))
                .ok_or(e),
        }
    }
}

/// ggml's `ggml_prec` as FLASH_ATTN_EXT cases print it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// `GGML_PREC_F32` (`f32`), upstream's default in the test cases.
    #[default]
    F32,
    /// `GGML_PREC_DEFAULT` (`def`).
    Default,
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::Default => "def",
        })
    }
}

/// Why a case string or a case is not acceptable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CaseError {
    #[error("`{0}` is not a case string: expected OP(name=value,...)")]
    Syntax(String),
    #[error("unknown op `{0}` (known: MUL_MAT, FLASH_ATTN_EXT and the decoder ops of `cases::decoder::OPS`)")]
    UnknownOp(String),
    #[error("{op}: `{part}` is not name=value")]
    BadField { op: &'static str, part: String },
    #[error("{op}: unknown field `{field}`")]
    UnknownField { op: &'static str, field: String },
    #[error("{op}: field `{field}` is given twice")]
    DuplicateField { op: &'static str, field: String },
    #[error("{op}: missing required field `{field}`")]
    MissingField { op: &'static str, field: &'static str },
    #[error("{op}: {field}=`{value}` is not {expected}")]
    BadValue {
        op: &'static str,
        field: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("{op}: {field}=`{value}` is not a ggml type name")]
    BadType {
        op: &'static str,
        field: &'static str,
        value: String,
    },
    #[error("{op}: {field}={name} is an upstream type this crate does not implement")]
    UnsupportedType {
        op: &'static str,
        field: &'static str,
        name: &'static str,
    },
    #[error("{op}: {reason}")]
    Invalid { op: &'static str, reason: String },
    #[error("{op}: {source}")]
    Layout {
        op: &'static str,
        #[source]
        source: LayoutError,
    },
}

const MUL_MAT: &str = "MUL_MAT";
const FLASH_ATTN_EXT: &str = "FLASH_ATTN_EXT";

/// One case of upstream's `test-backend-ops`.
#[derive(Debug, Clone, PartialEq)]
pub enum Case {
    MulMat(MulMatCase),
    FlashAttnExt(FlashAttnCase),
    /// GET_ROWS, RMS_NORM, binary ops, ROPE, GLUs, SET_ROWS, CPY, SCALE, SOFT_MAX, ARGMAX.
    Decoder(DecoderCase),
}

impl Case {
    /// ggml's op name (`MUL_MAT`, `FLASH_ATTN_EXT`), as it starts the case string.
    pub fn op_name(&self) -> &'static str {
        match self {
            Case::MulMat(_) => MUL_MAT,
            Case::FlashAttnExt(_) => FLASH_ATTN_EXT,
            Case::Decoder(c) => c.op_name(),
        }
    }

    /// Floating-point operations of one run, by upstream's perf formulas (`op_flops`).
    pub fn flops(&self) -> u64 {
        match self {
            Case::MulMat(c) => c.flops(),
            Case::FlashAttnExt(c) => c.flops(),
            Case::Decoder(c) => c.flops(),
        }
    }

    /// Upstream's NMSE threshold for the case (`max_nmse_err`): 5e-4 for both ops.
    pub fn max_nmse(&self) -> f64 {
        match self {
            Case::MulMat(_) => ggml_dawn::reference::metric::MUL_MAT_MAX_NMSE,
            Case::FlashAttnExt(_) => ggml_dawn::reference::metric::FLASH_ATTN_EXT_MAX_NMSE,
            Case::Decoder(c) => c.max_nmse(),
        }
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Case::MulMat(c) => c.fmt(f),
            Case::FlashAttnExt(c) => c.fmt(f),
            Case::Decoder(c) => c.fmt(f),
        }
    }
}

impl FromStr for Case {
    type Err = CaseError;

    fn from_str(s: &str) -> Result<Case, CaseError> {
        // Upstream prints the split form of the GLUs with a bare `split` last.
        let trimmed = s.trim();
        let (s, split) = match trimmed.strip_suffix(",split)") {
            Some(head) => (format!("{head})"), true),
            None => (trimmed.to_owned(), false),
        };
        let (op, fields) = split_case(&s)?;
        if decoder::op_name(op).is_some() {
            return DecoderCase::parse(op, &fields, split).map(Case::Decoder);
        }
        if split {
            return Err(CaseError::BadField {
                op,
                part: "split".into(),
            });
        }
        match op {
            MUL_MAT => MulMatCase::from_fields(&fields).map(Case::MulMat),
            _ => FlashAttnCase::from_fields(&fields).map(Case::FlashAttnExt),
        }
    }
}

impl FromStr for MulMatCase {
    type Err = CaseError;

    fn from_str(s: &str) -> Result<MulMatCase, CaseError> {
        match s.parse::<Case>()? {
            Case::MulMat(c) => Ok(c),
            other => Err(CaseError::Invalid {
                op: other.op_name(),
                reason: "expected a MUL_MAT case".into(),
            }),
        }
    }
}

impl FromStr for FlashAttnCase {
    type Err = CaseError;

    fn from_str(s: &str) -> Result<FlashAttnCase, CaseError> {
        match s.parse::<Case>()? {
            Case::FlashAttnExt(c) => Ok(c),
            other => Err(CaseError::Invalid {
                op: other.op_name(),
                reason: "expected a FLASH_ATTN_EXT case".into(),
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// MUL_MAT

/// `MUL_MAT(type_a, type_b, m, n, k, bs, nr, per, k_v, o, src_overlap)`: dst = a·bᵀ per batch.
///
/// Required fields: `type_a`, `type_b`, `m`, `n`, `k`. Defaults for the others: `bs=[1,1]`,
/// `nr=[1,1]`, `per=[0,1,2,3]`, `k_v=0`, `o=1`, `src_overlap=0`. (Upstream's C++ constructor
/// defaults to `bs={10,10}`, `nr={2,2}`, but its case strings always print every field, so the
/// default only matters for hand-written specs, where unit batches are the useful choice.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MulMatCase {
    /// src0's type (the weights).
    pub type_a: CaseType,
    /// src1's type (the activations).
    pub type_b: CaseType,
    /// Rows of src0 = dst.ne0.
    pub m: usize,
    /// Rows of src1 = dst.ne1.
    pub n: usize,
    /// The reduced dimension (row length of both sources).
    pub k: usize,
    /// src0's batch extents in dims 2 and 3.
    pub bs: [usize; 2],
    /// src1 repeats src0's batches this many times in dims 2 and 3 (broadcast).
    pub nr: [usize; 2],
    /// Both sources are created with their extents permuted by `per`, then `ggml_permute`d back,
    /// so the op sees the logical shapes over non-contiguous data.
    pub per: [usize; 4],
    /// When non-zero, the sources are views of tensors with rows of `k_v > k` elements.
    pub k_v: usize,
    /// Number of outputs: upstream builds `o` identical MUL_MATs and sums them with ADD, so the
    /// graph's result is `o · (a·b)` (and it compares the whole graph when `o > 1`).
    pub o: usize,
    /// src1 shares src0's storage (see [`MulMatCase::tensors`]).
    pub src_overlap: bool,
}

impl MulMatCase {
    /// A case with the default batching and layout.
    pub fn new(type_a: GgmlType, type_b: GgmlType, m: usize, n: usize, k: usize) -> MulMatCase {
        MulMatCase {
            type_a: type_a.into(),
            type_b: type_b.into(),
            m,
            n,
            k,
            bs: [1, 1],
            nr: [1, 1],
            per: [0, 1, 2, 3],
            k_v: 0,
            o: 1,
            src_overlap: false,
        }
    }

    /// `2·m·n·k·bs0·nr0·bs1·nr1`, upstream's `op_flops`.
    pub fn flops(&self) -> u64 {
        [
            2, self.m, self.n, self.k, self.bs[0], self.nr[0], self.bs[1], self.nr[1],
        ]
        .iter()
        .fold(1u64, |acc, &x| acc.saturating_mul(x as u64))
    }

    /// dst's extents `[m, n, bs0·nr0, bs1·nr1]` (saturated at `usize::MAX`, which no layout
    /// accepts, when a product overflows).
    pub fn dst_ne(&self) -> [usize; 4] {
        [
            self.m,
            self.n,
            self.bs[0].saturating_mul(self.nr[0]),
            self.bs[1].saturating_mul(self.nr[1]),
        ]
    }

    fn from_fields(fields: &[(&str, &str)]) -> Result<MulMatCase, CaseError> {
        let op = MUL_MAT;
        let mut p = Fields::new(op, fields);
        let case = MulMatCase {
            type_a: p.required("type_a", parse_type)?,
            type_b: p.required("type_b", parse_type)?,
            m: p.required("m", parse_usize)?,
            n: p.required("n", parse_usize)?,
            k: p.required("k", parse_usize)?,
            bs: p.optional("bs", parse_array::<2>, [1, 1])?,
            nr: p.optional("nr", parse_array::<2>, [1, 1])?,
            per: p.optional("per", parse_array::<4>, [0, 1, 2, 3])?,
            k_v: p.optional("k_v", parse_usize, 0)?,
            o: p.optional("o", parse_usize, 1)?,
            src_overlap: p.optional("src_overlap", parse_bool, false)?,
        };
        // Newer upstreams' fields, the same case at their default.
        p.zero_only("m_v", "a view of a whose batches are strided")?;
        p.zero_only("pad", "padding after a's rows in each batch")?;
        p.finish()?;
        Ok(case)
    }

    /// The tensors the case builds, as `test_mul_mat::build_graph` does:
    ///
    /// - no permutation, `k_v = 0`: a = contiguous `[k, m, bs0, bs1]` in `type_a`, b = contiguous
    ///   `[k, n, bs0·nr0, bs1·nr1]` in `type_b`;
    /// - `per` ≠ identity: each is allocated with extents `ne[per[i]]` and viewed through
    ///   `ggml_permute(per)`, which gives back the logical extents over permuted strides
    ///   (upstream requires exactly two moved axes, `k_v = 0`, and `per[0] = 0` for quantized types);
    /// - `k_v > k`: each is allocated with rows of `k_v` elements and viewed with `k` of them;
    /// - `src_overlap` (an assumption: upstream's source for this flag was not at hand): b is a view
    ///   of a's storage, `[k, n, bs0·nr0, bs1·nr1]` with a's strides at offset 0 (the first `n` rows
    ///   of each of a's matrices), so both bindings cover the same bytes. This needs
    ///   `type_a = type_b`, `n ≤ m` and `nr = [1,1]`.
    ///
    /// dst is contiguous f32 `[m, n, bs0·nr0, bs1·nr1]`.
    pub fn tensors(&self) -> Result<MulMatTensors, CaseError> {
        let op = MUL_MAT;
        let invalid = |reason: String| CaseError::Invalid { op, reason };
        let layout = |source| CaseError::Layout { op, source };
        let type_a = known_type(op, "type_a", self.type_a)?;
        let type_b = known_type(op, "type_b", self.type_b)?;
        let ne_a = [self.k, self.m, self.bs[0], self.bs[1]];
        let ne_b = [
            self.k,
            self.n,
            self.bs[0].checked_mul(self.nr[0]).unwrap_or(0),
            self.bs[1].checked_mul(self.nr[1]).unwrap_or(0),
        ];
        if ne_a.contains(&0) || self.nr.contains(&0) || self.o == 0 {
            return Err(invalid("extents and o must be positive".into()));
        }
        if ne_b.contains(&0) {
            return Err(invalid(format!("bs={:?} times nr={:?} overflows", self.bs, self.nr)));
        }
        let moved = (0..4).filter(|&i| self.per[i] != i).count();
        let (a, b) = if moved > 0 {
            if moved != 2 {
                return Err(invalid(format!("per={:?} must swap exactly two axes", self.per)));
            }
            if self.k_v != 0 {
                return Err(invalid("k_v views cannot be combined with a permutation".into()));
            }
            if self.per[0] != 0 && (type_a.is_quantized() || type_b.is_quantized()) {
                return Err(invalid("quantized sources cannot permute dimension 0".into()));
            }
            let permuted = |ty, ne: [usize; 4]| -> Result<CaseTensor, CaseError> {
                let mut ne_p = [0; 4];
                for (slot, &axis) in ne_p.iter_mut().zip(&self.per) {
                    *slot = *ne
                        .get(axis)
                        .ok_or_else(|| layout(LayoutError::BadPermutation(self.per)))?;
                }
                let storage = Layout::contiguous(ty, ne_p).map_err(layout)?;
                let view = storage.permute(self.per).map_err(layout)?;
                Ok(CaseTensor { storage, view })
            };
            (permuted(type_a, ne_a)?, permuted(type_b, ne_b)?)
        } else if self.k_v != 0 {
            if self.k_v <= self.k {
                return Err(invalid(format!("k_v={} must exceed k={}", self.k_v, self.k)));
            }
            let viewed = |ty, ne: [usize; 4]| -> Result<CaseTensor, CaseError> {
                Layout::contiguous(ty, ne).map_err(layout)?;
                let storage = Layout::contiguous(ty, [self.k_v, ne[1], ne[2], ne[3]]).map_err(layout)?;
                Ok(CaseTensor {
                    storage,
                    view: Layout { ne, ..storage },
                })
            };
            (viewed(type_a, ne_a)?, viewed(type_b, ne_b)?)
        } else {
            let plain = |ty, ne| -> Result<CaseTensor, CaseError> {
                let storage = Layout::contiguous(ty, ne).map_err(layout)?;
                Ok(CaseTensor { storage, view: storage })
            };
            (plain(type_a, ne_a)?, plain(type_b, ne_b)?)
        };
        let b = if self.src_overlap {
            if type_a != type_b || self.n > self.m || self.nr != [1, 1] {
                return Err(invalid(
                    "src_overlap needs type_a = type_b, n <= m and nr = [1,1]".into(),
                ));
            }
            CaseTensor {
                storage: a.storage,
                view: Layout { ne: ne_b, ..a.view },
            }
        } else {
            b
        };
        let dst = Layout::contiguous(GgmlType::F32, self.dst_ne()).map_err(layout)?;
        Ok(MulMatTensors {
            a,
            b,
            b_aliases_a: self.src_overlap,
            dst,
            outputs: self.o,
        })
    }
}

impl fmt::Display for MulMatCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MUL_MAT(type_a={},type_b={},m={},n={},k={},bs={},nr={},per={},k_v={},o={},src_overlap={})",
            self.type_a,
            self.type_b,
            self.m,
            self.n,
            self.k,
            Array(&self.bs),
            Array(&self.nr),
            Array(&self.per),
            self.k_v,
            self.o,
            u8::from(self.src_overlap),
        )
    }
}

/// One input tensor of a case: what test-backend-ops allocates, and the view of it the op reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseTensor {
    /// The allocation: a contiguous tensor whose every element gets input data (upstream fills
    /// the allocated tensors, uniform in [-1, 1], and never the views).
    pub storage: Layout,
    /// What the op sees: `storage` itself, a view of it with longer rows, or a permutation.
    /// Its offset counts from the start of `storage`.
    pub view: Layout,
}

impl CaseTensor {
    /// A host tensor over `values` (all of `storage`'s elements, in its logical order), converted
    /// to the storage type and seen through the view.
    pub fn host(&self, values: &[f32]) -> Result<HostTensor, FormatError> {
        let storage = HostTensor::from_f32(self.storage.ty, self.storage.ne, values)?;
        Ok(HostTensor {
            layout: self.view,
            data: storage.data,
        })
    }
}

/// The tensors of a [`MulMatCase`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MulMatTensors {
    /// src0 `[k, m, bs0, bs1]`.
    pub a: CaseTensor,
    /// src1 `[k, n, bs0·nr0, bs1·nr1]`.
    pub b: CaseTensor,
    /// b's storage is a's storage (`src_overlap`): both must be given the same bytes.
    pub b_aliases_a: bool,
    /// Contiguous f32 `[m, n, bs0·nr0, bs1·nr1]`.
    pub dst: Layout,
    /// The graph's result is this many MUL_MATs summed (`o`).
    pub outputs: usize,
}

// ---------------------------------------------------------------------------------------------
// FLASH_ATTN_EXT

/// `FLASH_ATTN_EXT(hsk, hsv, nh, nr23, kv, nb, mask, sinks, max_bias, logit_softcap, prec, type_K,
/// type_V, permute, kv_view, v_is_view_of_k)`: attention of `nb` queries over `kv` keys.
///
/// Required fields: `hsk`, `hsv`, `nh`, `kv`, `nb`. Defaults (upstream's constructor):
/// `nr23=[1,1]`, `mask=1`, `sinks=0`, `max_bias=0`, `logit_softcap=0`, `prec=f32`, `type_K=f16`,
/// `type_V=f16` (not type_K's value), `permute=[0,1,2,3]`, `kv_view=1`, `v_is_view_of_k=0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlashAttnCase {
    /// K head size (and Q's).
    pub hsk: usize,
    /// V head size (and dst's).
    pub hsv: usize,
    /// KV heads.
    pub nh: usize,
    /// Query heads per KV head (GQA) and the dim-3 batch.
    pub nr23: [usize; 2],
    /// KV length.
    pub kv: usize,
    /// Queries (the batch of tokens).
    pub nb: usize,
    /// A f16 mask `[kv, nb, 1, nr3]` is added to the scores.
    pub mask: bool,
    /// Per-head sink logits (f32 `[nh·nr2]`) join the softmax.
    pub sinks: bool,
    /// ALiBi bias (0: none).
    pub max_bias: f32,
    /// Gemma-2 logit softcap (0: none).
    pub logit_softcap: f32,
    pub prec: Precision,
    #[doc(alias = "type_K")]
    pub type_k: CaseType,
    #[doc(alias = "type_V")]
    pub type_v: CaseType,
    /// Q, K and V are allocated with permuted extents and `ggml_permute`d back.
    pub permute: [usize; 4],
    /// K and V are views of tensors with twice as many KV rows (a KV cache), so their row strides
    /// are not contiguous.
    pub kv_view: bool,
    /// V is a view of K (the first `hsv` elements of each K row), as MLA models do.
    pub v_is_view_of_k: bool,
}

impl FlashAttnCase {
    /// A case with upstream's defaults for everything but the sizes.
    pub fn new(hsk: usize, hsv: usize, nh: usize, kv: usize, nb: usize) -> FlashAttnCase {
        FlashAttnCase {
            hsk,
            hsv,
            nh,
            nr23: [1, 1],
            kv,
            nb,
            mask: true,
            sinks: false,
            max_bias: 0.0,
            logit_softcap: 0.0,
            prec: Precision::F32,
            type_k: GgmlType::F16.into(),
            type_v: GgmlType::F16.into(),
            permute: [0, 1, 2, 3],
            kv_view: true,
            v_is_view_of_k: false,
        }
    }

    /// `2·nh·nr2·nb·(hsk+hsv)·kv·nr3`, upstream's `op_flops` (Q·Kᵀ and P·V only).
    pub fn flops(&self) -> u64 {
        let [nr2, nr3] = self.nr23.map(|x| x as u64);
        let heads = (self.hsk as u64).saturating_add(self.hsv as u64);
        [2, self.nh as u64, nr2, self.nb as u64, heads, self.kv as u64, nr3]
            .iter()
            .fold(1u64, |acc, &x| acc.saturating_mul(x))
    }

    /// The softmax scale upstream passes: `1/sqrt(hsk)` in f32 (the unpadded head size).
    pub fn scale(&self) -> f32 {
        1.0 / (self.hsk as f32).sqrt()
    }

    /// Query heads, `nh·nr2`.
    pub fn n_heads(&self) -> usize {
        self.nh.saturating_mul(self.nr23[0])
    }

    fn from_fields(fields: &[(&str, &str)]) -> Result<FlashAttnCase, CaseError> {
        let op = FLASH_ATTN_EXT;
        let mut p = Fields::new(op, fields);
        let f16 = CaseType::Known(GgmlType::F16);
        let case = FlashAttnCase {
            hsk: p.required("hsk", parse_usize)?,
            hsv: p.required("hsv", parse_usize)?,
            nh: p.required("nh", parse_usize)?,
            nr23: p.optional("nr23", parse_array::<2>, [1, 1])?,
            kv: p.required("kv", parse_usize)?,
            nb: p.required("nb", parse_usize)?,
            mask: p.optional("mask", parse_bool, true)?,
            sinks: p.optional("sinks", parse_bool, false)?,
            max_bias: p.optional("max_bias", parse_f32, 0.0)?,
            logit_softcap: p.optional("logit_softcap", parse_f32, 0.0)?,
            prec: p.optional("prec", parse_prec, Precision::F32)?,
            type_k: p.optional("type_K", parse_type, f16)?,
            type_v: p.optional("type_V", parse_type, f16)?,
            permute: p.optional("permute", parse_array::<4>, [0, 1, 2, 3])?,
            kv_view: p.optional("kv_view", parse_bool, true)?,
            v_is_view_of_k: p.optional("v_is_view_of_k", parse_bool, false)?,
        };
        // A newer upstream's field, the same case at its default.
        p.zero_only("n_kv_max", "sparse attention's bound on the keys a query sees")?;
        p.finish()?;
        Ok(case)
    }

    /// The tensors the case builds, as `test_flash_attn_ext::build_graph` does. Head sizes are
    /// padded to whole blocks of K's and V's types (`hsk_p`, `hsv_p`; the scale still uses `hsk`).
    ///
    /// - q: f32 `[hsk_p, nb, nh·nr2, nr3]`;
    /// - k: `type_K` `[hsk_p, kv, nh, nr3]`, v: `type_V` `[hsv_p, kv, nh, nr3]`. With `kv_view`
    ///   each is a view of an allocation with `2·kv` rows (in the allocated order), offset 0;
    /// - `permute` ≠ identity: q, k and v are allocated with extents `ne_p[permute[i]] = ne[i]`
    ///   and viewed through `ggml_permute(permute)` (this gives back the logical extents for the
    ///   swaps upstream uses; other permutations are rejected);
    /// - `v_is_view_of_k`: v is `ggml_view_4d(k, hsv_p, kv, nh, nr3, k.nb1, k.nb2, k.nb3, 0)`, over
    ///   k's storage (needs `type_K = type_V` and `hsv_p ≤ hsk_p`);
    /// - mask: f16 `[kv, nb, 1, nr3]` (no padding of nb); sinks: f32 `[nh·nr2]`;
    /// - dst: contiguous f32 `[hsv_p, nh·nr2, nb, nr3]` (ggml's permuted output).
    pub fn tensors(&self) -> Result<FlashAttnTensors, CaseError> {
        let op = FLASH_ATTN_EXT;
        let invalid = |reason: String| CaseError::Invalid { op, reason };
        let layout = |source| CaseError::Layout { op, source };
        let type_k = known_type(op, "type_K", self.type_k)?;
        let type_v = known_type(op, "type_V", self.type_v)?;
        let [nr2, nr3] = self.nr23;
        if [self.hsk, self.hsv, self.nh, nr2, nr3, self.kv, self.nb].contains(&0) {
            return Err(invalid("sizes must be positive".into()));
        }
        let too_large = || invalid("sizes overflow".into());
        let hsk_p = self
            .hsk
            .checked_next_multiple_of(type_k.block_size())
            .ok_or_else(too_large)?;
        let hsv_p = self
            .hsv
            .checked_next_multiple_of(type_v.block_size())
            .ok_or_else(too_large)?;
        if self.nh.checked_mul(nr2).is_none() {
            return Err(too_large());
        }
        let identity = self.permute == [0, 1, 2, 3];
        let create = |ty, ne: [usize; 4], is_view: bool| -> Result<CaseTensor, CaseError> {
            let mut ne_p = [0; 4];
            for (&axis, &extent) in self.permute.iter().zip(&ne) {
                *ne_p
                    .get_mut(axis)
                    .ok_or_else(|| layout(LayoutError::BadPermutation(self.permute)))? = extent;
            }
            let (storage, mut view) = if is_view {
                let rows = ne_p[1].checked_mul(2).ok_or_else(too_large)?;
                let storage = Layout::contiguous(ty, [ne_p[0], rows, ne_p[2], ne_p[3]]).map_err(layout)?;
                (storage, Layout { ne: ne_p, ..storage })
            } else {
                let storage = Layout::contiguous(ty, ne_p).map_err(layout)?;
                (storage, storage)
            };
            if !identity {
                view = view.permute(self.permute).map_err(layout)?;
            }
            if view.ne != ne {
                return Err(invalid(format!(
                    "permute={:?} does not give back the logical extents (upstream only swaps axes)",
                    self.permute
                )));
            }
            Ok(CaseTensor { storage, view })
        };
        let heads = self.n_heads();
        let q = create(GgmlType::F32, [hsk_p, self.nb, heads, nr3], false)?;
        let k = create(type_k, [hsk_p, self.kv, self.nh, nr3], self.kv_view)?;
        let v = if self.v_is_view_of_k {
            if type_k != type_v || hsv_p > hsk_p {
                return Err(invalid("v_is_view_of_k needs type_K = type_V and hsv <= hsk".into()));
            }
            let kv = k.view;
            CaseTensor {
                storage: k.storage,
                view: Layout {
                    ne: [hsv_p, self.kv, self.nh, nr3],
                    nb: [type_k.type_size(), kv.nb[1], kv.nb[2], kv.nb[3]],
                    ..kv
                },
            }
        } else {
            create(type_v, [hsv_p, self.kv, self.nh, nr3], self.kv_view)?
        };
        let mask = self
            .mask
            .then(|| Layout::contiguous(GgmlType::F16, [self.kv, self.nb, 1, nr3]))
            .transpose()
            .map_err(layout)?;
        let sinks = self
            .sinks
            .then(|| Layout::contiguous(GgmlType::F32, [heads, 1, 1, 1]))
            .transpose()
            .map_err(layout)?;
        let dst = Layout::contiguous(GgmlType::F32, [hsv_p, heads, self.nb, nr3]).map_err(layout)?;
        Ok(FlashAttnTensors {
            q,
            k,
            v,
            v_aliases_k: self.v_is_view_of_k,
            mask,
            sinks,
            dst,
        })
    }
}

impl fmt::Display for FlashAttnCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "FLASH_ATTN_EXT(hsk={},hsv={},nh={},nr23={},kv={},nb={},mask={},sinks={},max_bias={:.6},\
             logit_softcap={:.6},prec={},type_K={},type_V={},permute={},kv_view={},v_is_view_of_k={})",
            self.hsk,
            self.hsv,
            self.nh,
            Array(&self.nr23),
            self.kv,
            self.nb,
            u8::from(self.mask),
            u8::from(self.sinks),
            self.max_bias,
            self.logit_softcap,
            self.prec,
            self.type_k,
            self.type_v,
            Array(&self.permute),
            u8::from(self.kv_view),
            u8::from(self.v_is_view_of_k),
        )
    }
}

/// The tensors of a [`FlashAttnCase`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlashAttnTensors {
    /// f32 `[hsk_p, nb, nh·nr2, nr3]`.
    pub q: CaseTensor,
    /// `[hsk_p, kv, nh, nr3]` in type_K.
    pub k: CaseTensor,
    /// `[hsv_p, kv, nh, nr3]` in type_V.
    pub v: CaseTensor,
    /// v's storage is k's storage (`v_is_view_of_k`): both must be given the same bytes.
    pub v_aliases_k: bool,
    /// f16 `[kv, nb, 1, nr3]`, contiguous.
    pub mask: Option<Layout>,
    /// f32 `[nh·nr2]`.
    pub sinks: Option<Layout>,
    /// Contiguous f32 `[hsv_p, nh·nr2, nb, nr3]`.
    pub dst: Layout,
}

// ---------------------------------------------------------------------------------------------
// Parsing and printing helpers

/// A case string split into its op and its `(name, value)` pairs.
type SplitCase<'a> = (&'static str, Vec<(&'a str, &'a str)>);

/// Splits `OP(a=1,b=[2,3])` into the op name and its `(name, value)` pairs.
fn split_case(s: &str) -> Result<SplitCase<'_>, CaseError> {
    let s = s.trim();
    let syntax = || CaseError::Syntax(s.to_owned());
    let (op, rest) = s.split_once('(').ok_or_else(syntax)?;
    let body = rest.strip_suffix(')').ok_or_else(syntax)?;
    let op = op.trim();
    if op.is_empty() || !op.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(syntax());
    }
    let op_static = match op {
        MUL_MAT => MUL_MAT,
        FLASH_ATTN_EXT => FLASH_ATTN_EXT,
        other => decoder::op_name(other).ok_or_else(|| CaseError::UnknownOp(other.to_owned()))?,
    };
    let mut fields = Vec::new();
    if body.trim().is_empty() {
        return Ok((op_static, fields));
    }
    let mut depth = 0i32;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in body.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(syntax());
        }
    }
    if depth != 0 {
        return Err(syntax());
    }
    parts.push(&body[start..]);
    for part in parts {
        let (name, value) = part.split_once('=').ok_or_else(|| CaseError::BadField {
            op: op_static,
            part: part.to_owned(),
        })?;
        fields.push((name.trim(), value.trim()));
    }
    Ok((op_static, fields))
}

/// The fields of one case, consumed by name.
struct Fields<'a> {
    op: &'static str,
    fields: Vec<(&'a str, &'a str, bool)>,
}

type ParseFn<T> = fn(&str) -> Result<T, &'static str>;

impl<'a> Fields<'a> {
    fn new(op: &'static str, fields: &[(&'a str, &'a str)]) -> Fields<'a> {
        Fields {
            op,
            fields: fields.iter().map(|&(n, v)| (n, v, false)).collect(),
        }
    }

    fn take(&mut self, name: &'static str) -> Result<Option<&'a str>, CaseError> {
        let mut found = None;
        for (n, v, used) in &mut self.fields {
            if *n == name {
                if found.is_some() {
                    return Err(CaseError::DuplicateField {
                        op: self.op,
                        field: name.to_owned(),
                    });
                }
                *used = true;
                found = Some(*v);
            }
        }
        Ok(found)
    }

    fn parse<T>(&self, name: &'static str, value: &str, parse: ParseFn<T>) -> Result<T, CaseError> {
        parse(value).map_err(|expected| {
            if expected == TYPE_NAME {
                CaseError::BadType {
                    op: self.op,
                    field: name,
                    value: value.to_owned(),
                }
            } else {
                CaseError::BadValue {
                    op: self.op,
                    field: name,
                    value: value.to_owned(),
                    expected,
                }
            }
        })
    }

    fn required<T>(&mut self, name: &'static str, parse: ParseFn<T>) -> Result<T, CaseError> {
        match self.take(name)? {
            Some(value) => self.parse(name, value, parse),
            None => Err(CaseError::MissingField {
                op: self.op,
                field: name,
            }),
        }
    }

    fn optional<T>(&mut self, name: &'static str, parse: ParseFn<T>, default: T) -> Result<T, CaseError> {
        match self.take(name)? {
            Some(value) => self.parse(name, value, parse),
            None => Ok(default),
        }
    }

    /// A newer upstream's field that this crate reads only at 0, its default (the case is then
    /// the one it was before the field existed); another value is refused, naming `what` it asks.
    fn zero_only(&mut self, name: &'static str, what: &str) -> Result<(), CaseError> {
        match self.take(name)? {
            None => Ok(()),
            Some(value) if value.parse::<u64>() == Ok(0) => Ok(()),
            Some(value) => Err(CaseError::Invalid {
                op: self.op,
                reason: format!("{name}={value} ({what}) is not implemented here; only {name}=0"),
            }),
        }
    }

    /// Fails on the first field no parser asked for.
    fn finish(self) -> Result<(), CaseError> {
        match self.fields.iter().find(|(_, _, used)| !used) {
            Some((name, _, _)) => Err(CaseError::UnknownField {
                op: self.op,
                field: (*name).to_owned(),
            }),
            None => Ok(()),
        }
    }
}

const TYPE_NAME: &str = "a ggml type name";

fn parse_usize(s: &str) -> Result<usize, &'static str> {
    s.parse().map_err(|_| "a non-negative integer")
}

fn parse_bool(s: &str) -> Result<bool, &'static str> {
    match s {
        "0" | "false" => Ok(false),
        "1" | "true" => Ok(true),
        _ => Err("0 or 1"),
    }
}

fn parse_f32(s: &str) -> Result<f32, &'static str> {
    s.parse::<f32>().ok().filter(|v| v.is_finite()).ok_or("a finite number")
}

fn parse_prec(s: &str) -> Result<Precision, &'static str> {
    match s {
        "f32" => Ok(Precision::F32),
        "def" => Ok(Precision::Default),
        _ => Err("a precision (f32 or def)"),
    }
}

fn parse_type(s: &str) -> Result<CaseType, &'static str> {
    s.parse().map_err(|_| TYPE_NAME)
}

fn parse_array<const N: usize>(s: &str) -> Result<[usize; N], &'static str> {
    let expected = match N {
        2 => "an array [a,b] of non-negative integers",
        _ => "an array [a,b,c,d] of non-negative integers",
    };
    let inner = s.strip_prefix('[').and_then(|s| s.strip_suffix(']')).ok_or(expected)?;
    let mut out = [0; N];
    let mut items = inner.split(',');
    for slot in &mut out {
        *slot = items.next().and_then(|x| x.trim().parse().ok()).ok_or(expected)?;
    }
    match items.next() {
        Some(_) => Err(expected),
        None => Ok(out),
    }
}

fn known_type(op: &'static str, field: &'static str, ty: CaseType) -> Result<GgmlType, CaseError> {
    match ty {
        CaseType::Known(t) => Ok(t),
        CaseType::Upstream(name) => Err(CaseError::UnsupportedType { op, field, name }),
    }
}

/// Prints `[a,b,…]` like upstream's `var_to_str` for arrays.
struct Array<'a>(&'a [usize]);

impl fmt::Display for Array<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, x) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{x}")?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const CASES_DIR: &str = "/work/shared/cases";

    fn case_lines() -> Option<Vec<(String, String)>> {
        let dir = Path::new(CASES_DIR);
        if !dir.is_dir() {
            println!("note: {CASES_DIR} is absent; skipping the upstream case-list test");
            return None;
        }
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "txt"))
            .collect();
        files.sort();
        let mut lines = Vec::new();
        for file in files {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            for line in std::fs::read_to_string(&file).unwrap().lines() {
                if !line.trim().is_empty() {
                    lines.push((name.clone(), line.to_owned()));
                }
            }
        }
        Some(lines)
    }

    #[test]
    fn every_upstream_case_round_trips_and_builds() {
        let Some(lines) = case_lines() else { return };
        assert!(lines.len() > 1000, "only {} case lines", lines.len());
        let (mut built, mut foreign) = (0, 0);
        for (file, line) in &lines {
            let case: Case = line.parse().unwrap_or_else(|e| panic!("{file}: {line}: {e}"));
            assert_eq!(&case.to_string(), line, "{file}");
            let result = match &case {
                Case::MulMat(c) => c.tensors().map(|_| ()),
                Case::FlashAttnExt(c) => c.tensors().map(|_| ()),
                Case::Decoder(c) => c.tensors().map(|_| ()),
            };
            match result {
                Ok(()) => built += 1,
                Err(CaseError::UnsupportedType { .. }) => foreign += 1,
                Err(e) => panic!("{file}: {line}: {e}"),
            }
        }
        println!(
            "{} cases: {built} build tensors, {foreign} name types this crate lacks",
            lines.len()
        );
    }

    /// llama.cpp's newer lists print fields this crate's lists predate: at 0 the same case
    /// (printed as before), any other value refused with the field's name.
    #[test]
    fn newer_fields_at_zero_are_the_same_case() {
        let newer = "MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=14336,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0,m_v=0,pad=0)";
        let case: Case = newer.parse().expect("parses");
        assert_eq!(
            case.to_string(),
            "MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=14336,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0)"
        );
        let e = newer.replace("m_v=0", "m_v=4100").parse::<Case>().expect_err("refused");
        assert!(e.to_string().contains("m_v=4100"), "{e}");
        let fa = "FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=4096,nb=1,mask=1,sinks=0,max_bias=0.000000,logit_softcap=0.000000,prec=f32,type_K=f16,type_V=f16,permute=[0,1,2,3],kv_view=1,v_is_view_of_k=0,n_kv_max=0)";
        assert!(fa.parse::<Case>().is_ok());
        let e = fa
            .replace("n_kv_max=0", "n_kv_max=512")
            .parse::<Case>()
            .expect_err("refused");
        assert!(e.to_string().contains("n_kv_max=512"), "{e}");
    }

    #[test]
    fn defaults_fill_left_out_fields() {
        let c: Case = "MUL_MAT(type_a=q4_0,type_b=f32,m=16,n=1,k=256)".parse().unwrap();
        assert_eq!(
            c.to_string(),
            "MUL_MAT(type_a=q4_0,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0)"
        );
        assert_eq!(
            c,
            Case::MulMat(MulMatCase::new(GgmlType::Q4_0, GgmlType::F32, 16, 1, 256))
        );
        let f: Case = "FLASH_ATTN_EXT(hsk=64,hsv=64,nh=8,kv=512,nb=1,max_bias=8)"
            .parse()
            .unwrap();
        assert_eq!(
            f.to_string(),
            "FLASH_ATTN_EXT(hsk=64,hsv=64,nh=8,nr23=[1,1],kv=512,nb=1,mask=1,sinks=0,max_bias=8.000000,\
             logit_softcap=0.000000,prec=f32,type_K=f16,type_V=f16,permute=[0,1,2,3],kv_view=1,v_is_view_of_k=0)"
        );
        // Field order and spaces do not matter.
        let g: Case = " MUL_MAT( k=256, m=16,type_b=f32 ,n=1,type_a=q4_0 ) ".parse().unwrap();
        assert_eq!(g, c);
    }

    #[test]
    fn malformed_specs_name_the_bad_part() {
        let err = |s: &str| s.parse::<Case>().unwrap_err();
        assert_eq!(err("CONV_2D(a=1)"), CaseError::UnknownOp("CONV_2D".into()));
        assert!(matches!(err("MUL_MAT"), CaseError::Syntax(_)));
        assert!(matches!(err("MUL_MAT(m=1"), CaseError::Syntax(_)));
        assert!(matches!(err("MUL_MAT(bs=[1,1)"), CaseError::Syntax(_)));
        let base = "type_a=f32,type_b=f32,m=16,n=1,k=256";
        assert_eq!(
            err(&format!("MUL_MAT({base},q=3)")),
            CaseError::UnknownField {
                op: "MUL_MAT",
                field: "q".into()
            }
        );
        assert_eq!(
            err(&format!("MUL_MAT({base},m=3)")),
            CaseError::DuplicateField {
                op: "MUL_MAT",
                field: "m".into()
            }
        );
        assert_eq!(
            err("MUL_MAT(type_a=f32,type_b=f32,m=16,n=1)"),
            CaseError::MissingField {
                op: "MUL_MAT",
                field: "k"
            }
        );
        assert!(matches!(
            err("MUL_MAT(type_a=f32,type_b=f32,m=16,n=x1,k=256)"),
            CaseError::BadValue { field: "n", .. }
        ));
        assert!(matches!(
            err(&format!("MUL_MAT({base},bs=[1,2,3])")),
            CaseError::BadValue { field: "bs", .. }
        ));
        assert!(matches!(
            err(&format!("MUL_MAT({base},src_overlap=2)")),
            CaseError::BadValue {
                field: "src_overlap",
                ..
            }
        ));
        assert!(matches!(
            err("MUL_MAT(type_a=q9_9,type_b=f32,m=16,n=1,k=256)"),
            CaseError::BadType { field: "type_a", .. }
        ));
        assert!(matches!(
            err("FLASH_ATTN_EXT(hsk=64,hsv=64,nh=1,kv=1,nb=1,max_bias=abc)"),
            CaseError::BadValue { field: "max_bias", .. }
        ));
        assert!(matches!(
            err("FLASH_ATTN_EXT(hsk=64,hsv=64,nh=1,kv=1,nb=1,prec=f16)"),
            CaseError::BadValue { field: "prec", .. }
        ));
        assert!(matches!(
            err(&format!("MUL_MAT({base},junk)")),
            CaseError::BadField { .. }
        ));
        // Messages say which part is wrong.
        assert!(
            err("MUL_MAT(type_a=f32,type_b=f32,m=16,n=x1,k=256)")
                .to_string()
                .contains("n=`x1`")
        );
    }

    #[test]
    fn flops_follow_upstream() {
        let c: Case = "MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=512,k=14336,bs=[2,1],nr=[3,1])"
            .parse()
            .unwrap();
        assert_eq!(c.flops(), 2 * 4096 * 512 * 14336 * 6);
        let f: Case = "FLASH_ATTN_EXT(hsk=192,hsv=128,nh=4,nr23=[2,3],kv=512,nb=3)"
            .parse()
            .unwrap();
        assert_eq!(f.flops(), 2 * 4 * 2 * 3 * (192 + 128) * 512 * 3);
        assert_eq!(c.op_name(), "MUL_MAT");
        assert_eq!(f.op_name(), "FLASH_ATTN_EXT");
    }

    #[test]
    fn mul_mat_layouts() {
        let mut c = MulMatCase::new(GgmlType::F32, GgmlType::F16, 5, 3, 8);
        c.bs = [2, 3];
        c.nr = [2, 1];
        let t = c.tensors().unwrap();
        assert_eq!(t.a.view.ne, [8, 5, 2, 3]);
        assert_eq!(t.b.view.ne, [8, 3, 4, 3]);
        assert!(t.a.view.is_contiguous() && t.b.view.is_contiguous());
        assert_eq!(t.dst.ne, [5, 3, 4, 3]);

        c.per = [0, 2, 1, 3];
        let t = c.tensors().unwrap();
        assert_eq!(t.a.storage.ne, [8, 2, 5, 3]);
        assert_eq!(t.a.view.ne, [8, 5, 2, 3]);
        assert_eq!(t.a.view.nb, [4, 64, 32, 320]);
        assert!(!t.b.view.is_contiguous());
        assert_eq!(t.b.view.ne, [8, 3, 4, 3]);

        c.per = [0, 1, 2, 3];
        c.k_v = 12;
        let t = c.tensors().unwrap();
        assert_eq!(t.a.view.ne, [8, 5, 2, 3]);
        assert_eq!(t.a.view.nb, [4, 48, 240, 480]);
        assert_eq!(t.a.storage.ne, [12, 5, 2, 3]);

        let mut q = MulMatCase::new(GgmlType::Q4_0, GgmlType::F32, 4, 2, 64);
        q.per = [1, 0, 2, 3];
        assert!(matches!(q.tensors(), Err(CaseError::Invalid { .. })));
        q.per = [0, 1, 2, 3];
        q.k = 48;
        assert!(matches!(q.tensors(), Err(CaseError::Layout { .. })));

        let o: MulMatCase = "MUL_MAT(type_a=f32,type_b=f32,m=32,n=4,k=96,bs=[3,2],src_overlap=1)"
            .parse()
            .unwrap();
        let t = o.tensors().unwrap();
        assert!(t.b_aliases_a);
        assert_eq!(t.b.storage, t.a.storage);
        assert_eq!(t.b.view.ne, [96, 4, 3, 2]);
        assert_eq!(t.b.view.nb, t.a.view.nb);
    }

    #[test]
    fn upstream_only_types_parse_print_and_refuse_tensors() {
        // The list shrinks as GgmlType learns upstream's newer types.
        for &name in UPSTREAM_ONLY_TYPES {
            let spec = format!("MUL_MAT(type_a={name},type_b=f32,m=16,n=1,k=256)");
            let case: MulMatCase = spec.parse().unwrap();
            assert_eq!(case.type_a.name(), name);
            match name.parse::<GgmlType>() {
                Ok(t) => assert_eq!(case.type_a, CaseType::Known(t)),
                Err(_) => {
                    assert_eq!(case.type_a, CaseType::Upstream(name));
                    assert!(matches!(
                        case.tensors(),
                        Err(CaseError::UnsupportedType { field: "type_a", name: n, .. }) if n == name
                    ));
                }
            }
        }
    }

    #[test]
    fn flash_attn_layouts() {
        let mut c = FlashAttnCase::new(72, 72, 2, 10, 3);
        c.nr23 = [4, 2];
        c.type_k = GgmlType::Q8_0.into();
        c.sinks = true;
        let t = c.tensors().unwrap();
        // Head sizes are padded to whole q8_0 blocks for K, not for f16 V.
        assert_eq!(t.q.view.ne, [96, 3, 8, 2]);
        assert_eq!(t.k.view.ne, [96, 10, 2, 2]);
        assert_eq!(t.k.storage.ne, [96, 20, 2, 2]);
        assert_eq!(t.k.view.nb[1], 102);
        assert_eq!(t.k.view.nb[2], 102 * 20);
        assert_eq!(t.v.view.ne, [72, 10, 2, 2]);
        assert_eq!(t.mask.unwrap().ne, [10, 3, 1, 2]);
        assert_eq!(t.sinks.unwrap().ne, [8, 1, 1, 1]);
        assert_eq!(t.dst.ne, [72, 8, 3, 2]);
        assert_eq!(c.scale(), 1.0 / 72f32.sqrt());

        let mut p = FlashAttnCase::new(64, 64, 4, 16, 5);
        p.permute = [0, 2, 1, 3];
        let t = p.tensors().unwrap();
        assert_eq!(t.q.storage.ne, [64, 4, 5, 1]);
        assert_eq!(t.q.view.ne, [64, 5, 4, 1]);
        assert_eq!(t.k.storage.ne, [64, 8, 16, 1]);
        assert_eq!(t.k.view.ne, [64, 16, 4, 1]);
        assert_eq!(t.k.view.nb, [2, 64 * 2 * 8, 128, 64 * 2 * 8 * 16]);
        p.permute = [0, 2, 3, 1];
        assert!(p.tensors().is_err());

        let mut m = FlashAttnCase::new(576, 512, 1, 32, 2);
        m.v_is_view_of_k = true;
        let t = m.tensors().unwrap();
        assert!(t.v_aliases_k);
        assert_eq!(t.v.storage, t.k.storage);
        assert_eq!(t.v.view.ne, [512, 32, 1, 1]);
        assert_eq!(t.v.view.nb[1..], t.k.view.nb[1..]);
        m.type_v = GgmlType::F32.into();
        assert!(m.tensors().is_err());
    }

    #[test]
    fn case_tensor_host_uses_the_view() {
        let mut c = MulMatCase::new(GgmlType::F32, GgmlType::F32, 2, 1, 2);
        c.k_v = 3;
        let t = c.tensors().unwrap();
        let a = t.a.host(&[1.0, 2.0, 9.0, 3.0, 4.0, 9.0]).unwrap();
        assert_eq!(a.to_f32().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn overflowing_extents_are_errors_not_panics() {
        for spec in [
            "MUL_MAT(type_a=f32,type_b=f32,m=1,n=1,k=32,bs=[4294967296,4294967296],nr=[4294967296,4294967296])",
            "MUL_MAT(type_a=f32,type_b=f32,m=18446744073709551615,n=18446744073709551615,k=32)",
            "MUL_MAT(type_a=q4_0,type_b=f32,m=1,n=1,k=18446744073709551615)",
            "FLASH_ATTN_EXT(hsk=18446744073709551615,hsv=64,nh=1,kv=1,nb=1,type_K=q4_0)",
            "FLASH_ATTN_EXT(hsk=64,hsv=64,nh=4294967296,nr23=[4294967296,1],kv=1,nb=1)",
            "FLASH_ATTN_EXT(hsk=64,hsv=64,nh=1,kv=9223372036854775808,nb=1)",
        ] {
            let case: Case = spec.parse().unwrap();
            let _ = case.flops();
            let built = match &case {
                Case::MulMat(c) => c.tensors().map(|_| ()),
                Case::FlashAttnExt(c) => c.tensors().map(|_| ()),
                Case::Decoder(c) => c.tensors().map(|_| ()),
            };
            assert!(built.is_err(), "{spec}");
        }
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        const SEEDS: &[&str] = &[
            "MUL_MAT(type_a=q4_K,type_b=f32,m=33,n=5,k=256,bs=[2,1],nr=[1,2],per=[0,2,1,3],k_v=0,o=1,src_overlap=0)",
            "FLASH_ATTN_EXT(hsk=64,hsv=64,nh=2,nr23=[4,1],kv=100,nb=3,mask=1,sinks=1,type_K=q8_0,permute=[0,2,1,3])",
            "SET_ROWS(type_src=f16,type_dst=q4_0,type_idx=i64,ne=[256,11,1,7],nr23=[2,3],r=7,v=1)",
            "CPY(type_src=f32,type_dst=f32,ne_src=[128,2,3,1],ne_dst=[128,2,3,1],permute_src=[0,0,0,0],permute_dst=[0,0,0,0],_src_transpose=0,dst_alloc=[128,4,3,1])",
            "ROPE(type=f16,ne_a=[128,32,2,1],n_dims=128,mode=24,n_ctx=512,fs=1.424500,ef=0.746500,af=1.424500,ff=1,v=2,inplace=0,n_offs=0)",
            "SWIGLU(type=f16,ne_a=[5,7,11,13],v=1,split)",
            "SOFT_MAX(type=f32,ne=[31,15,1,1],mask=1,sinks=1,m_prec=f16,nr23=[2,3],scale=0.100000,max_bias=8.000000,inplace=0)",
        ];

        fn build(case: &Case) {
            let _ = (case.to_string(), case.flops(), case.max_nmse());
            let _ = match case {
                Case::MulMat(c) => c.tensors().map(|_| ()),
                Case::FlashAttnExt(c) => c.tensors().map(|_| ()),
                Case::Decoder(c) => c.tensors().map(|_| ()),
            };
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn random_strings_never_panic(s in "\\PC{0,120}") {
                if let Ok(case) = s.parse::<Case>() {
                    build(&case);
                }
            }

            /// Valid specs with a piece replaced by another value: numbers from tiny to huge,
            /// other words, brackets.
            #[test]
            fn mutated_specs_never_panic(
                seed in 0..SEEDS.len(),
                at in any::<prop::sample::Index>(),
                len in 0usize..6,
                insert in prop_oneof![
                    Just("0".to_owned()),
                    Just("18446744073709551615".to_owned()),
                    Just("4294967296".to_owned()),
                    Just("-1".to_owned()),
                    Just("[".to_owned()),
                    Just(",".to_owned()),
                    Just("=".to_owned()),
                    "[0-9]{1,20}",
                    "[a-z_0-9=,\\[\\]()]{0,8}",
                ],
            ) {
                let spec = SEEDS[seed];
                let start = spec.char_indices().map(|(i, _)| i).nth(at.index(spec.len())).unwrap_or(0);
                let end = (start + len).min(spec.len());
                let mutated = format!("{}{}{}", &spec[..start], insert, &spec[end..]);
                if let Ok(case) = mutated.parse::<Case>() {
                    build(&case);
                }
            }

            #[test]
            fn any_extents_never_panic(
                m in prop_oneof![0usize..300, any::<usize>()],
                n in prop_oneof![0usize..300, any::<usize>()],
                k in prop_oneof![0usize..1024, any::<usize>()],
                bs in prop::array::uniform2(prop_oneof![0usize..4, any::<usize>()]),
                nr in prop::array::uniform2(prop_oneof![0usize..4, any::<usize>()]),
                k_v in prop_oneof![Just(0usize), any::<usize>()],
            ) {
                let mut c = MulMatCase::new(GgmlType::Q4_0, GgmlType::F32, m, n, k);
                c.bs = bs;
                c.nr = nr;
                c.k_v = k_v;
                build(&Case::MulMat(c));
                let f = FlashAttnCase::new(k, m, n, bs[0], bs[1]);
                build(&Case::FlashAttnExt(f));
            }
        }
    }
}
