//! GGUF, the file format of ggml and llama.cpp: reading (versions 2 and 3) and writing (version 3).
//!
//! Our own code rather than a crate, because none of the candidates on crates.io does what this
//! project needs (checked 0.5.1 / 0.3.3 / 0.1.2): `ggus` reads only version 3 and reads the tensor
//! type id straight into a `#[repr(u32)]` enum that ends at id 33 (undefined behaviour for tq1_0,
//! mxfp4 and newer); `gguf-rs-lib` rejects version 2 and any type id it does not list, and keeps
//! metadata in a `HashMap`, losing file order; `gguf` only reads and has an outdated type table.
//! The golden files already use ids newer than [`GgmlType`](crate::GgmlType) (40 nvfp4, 41 q1_0),
//! so this module keeps the raw `u32` id of every tensor and resolves it on use.
//!
//! Conventions, the same as ggml's `gguf.cpp`:
//! - Dimensions are in ggml's `ne` order (innermost first), as GGUF stores them; missing ones are 1.
//! - Tensor offsets count from the data section, which starts where the header ends, rounded up to
//!   `general.alignment` (a `u32` power of two, 32 when absent); each offset is a multiple of it.
//!   The writer pads every tensor, the last one included, to the alignment with zeros.
//! - Tensor data lie in file order, each tensor's where the one before ends, rounded up to the
//!   alignment: the reader refuses any other placement ([`GgufError::MisplacedTensor`]), so no two
//!   tensors share bytes and loading a file never takes more memory than its data.
//! - Metadata and tensor infos keep file order; a key or a tensor name appears only once.
//! - Malformed input gives a [`GgufError`], never a panic: counts and lengths read from the file
//!   never size an allocation before the bytes behind them have been read, or, where the input's
//!   length is known ([`parse`], [`parse_reader`], [`GgufFile::open`]), checked to be there.
//! - Metadata arrays are held as typed vectors ([`Array`]), within a small factor of their bytes
//!   in the file (exactly their bytes for numbers and bools).
//!
//! Modules: `value` (metadata values), `file` (the header and file in memory, tensor bounds),
//! `read` (parsing), `write` ([`GgufWriter`]).

use std::io::{self, Read, Seek};

use crate::tensor::LayoutError;

/// Calls `$m!` with every fixed-size metadata type: variant, Rust type, GGUF id, what the reader
/// names it in errors, and the [`Array`] accessor of its elements.
macro_rules! fixed_types {
    ($m:ident) => {
        $m! {
            U8(u8) = 0, "a u8 value", as_u8_slice;
            I8(i8) = 1, "an i8 value", as_i8_slice;
            U16(u16) = 2, "a u16 value", as_u16_slice;
            I16(i16) = 3, "an i16 value", as_i16_slice;
            U32(u32) = 4, "a u32 value", as_u32_slice;
            I32(i32) = 5, "an i32 value", as_i32_slice;
            F32(f32) = 6, "an f32 value", as_f32_slice;
            U64(u64) = 10, "a u64 value", as_u64_slice;
            I64(i64) = 11, "an i64 value", as_i64_slice;
            F64(f64) = 12, "an f64 value", as_f64_slice;
        }
    };
}

mod file;
mod read;
#[cfg(test)]
mod tests;
mod value;
mod write;

pub use file::{GgufFile, GgufHeader, TensorInfo};
pub use value::{Array, Metadata, Value, ValueType};
pub use write::{GgufWriter, MAX_WRITE_ALIGNMENT};

/// The four bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// The version [`GgufWriter`] writes.
pub const VERSION: u32 = 3;
/// The alignment used when the file has no `general.alignment`.
pub const DEFAULT_ALIGNMENT: usize = 32;
/// The metadata key holding the alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// Why a GGUF file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    #[error("not a GGUF file: magic {0:02x?}")]
    BadMagic([u8; 4]),
    #[error("GGUF version {0} is not supported (2 and 3 are)")]
    UnsupportedVersion(u32),
    #[error("file truncated at byte {offset} while reading {what}")]
    Truncated { what: &'static str, offset: u64 },
    #[error("duplicate metadata key `{0}`")]
    DuplicateKey(String),
    #[error("duplicate tensor `{0}`")]
    DuplicateTensor(String),
    #[error("unknown metadata value type {0}")]
    UnknownValueType(u32),
    #[error("invalid metadata: {0}")]
    BadValue(String),
    #[error("invalid UTF-8 in {0}")]
    InvalidUtf8(&'static str),
    #[error("`general.alignment` must be a non-zero power of two of type u32, got {0}")]
    BadAlignment(String),
    #[error("tensor `{name}`: {reason}")]
    BadTensor { name: String, reason: String },
    #[error(
        "tensor `{name}` has data offset {offset}, expected {expected}: tensor data must lie in file \
         order, each where the one before ends (rounded up to the alignment), as ggml requires"
    )]
    MisplacedTensor {
        name: String,
        offset: usize,
        expected: ExpectedOffset,
    },
    #[error("tensor `{name}` has ggml type id {id}, which this crate does not know")]
    UnknownTensorType { name: String, id: u32 },
    #[error("no tensor named `{0}`")]
    NoTensor(String),
    #[error("tensor `{name}`: bytes {start}..{end} lie outside the {available}-byte data section")]
    OutOfBounds {
        name: String,
        start: usize,
        end: usize,
        available: usize,
    },
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

/// Where a tensor's data must start, from the tensors before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectedOffset {
    /// Where the previous tensor's data end, rounded up to the alignment.
    Exactly(usize),
    /// Past the previous tensor, whose type (and so size) this crate does not know.
    AtLeast(usize),
}

impl std::fmt::Display for ExpectedOffset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExpectedOffset::Exactly(n) => write!(f, "{n}"),
            ExpectedOffset::AtLeast(n) => write!(f, "at least {n}"),
        }
    }
}

type Result<T, E = GgufError> = std::result::Result<T, E>;

fn bad_tensor(name: &str, reason: impl Into<String>) -> GgufError {
    GgufError::BadTensor {
        name: name.to_owned(),
        reason: reason.into(),
    }
}

/// Parses a whole GGUF file held in memory, with every check the readers make (header, metadata,
/// tensor placement and bounds). Needs no device; what [`GgufFile::from_bytes`] does.
pub fn parse(bytes: &[u8]) -> Result<GgufFile> {
    GgufFile::from_bytes(bytes)
}

/// Parses a whole GGUF file from its current position in `reader` (a file, a cursor), measuring
/// its length first so that no count or length in the file sizes an allocation the file cannot
/// fill. Needs no device; what [`GgufFile::read_seekable`] does.
pub fn parse_reader<R: Read + Seek>(reader: R) -> Result<GgufFile> {
    GgufFile::read_seekable(reader)
}
