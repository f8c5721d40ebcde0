//! GGUF, the file format of ggml and llama.cpp: reading (versions 2 and 3) and writing (version 3).
//!
//! Our own code rather than a crate, because none of the candidates on crates.io does what this
//! project needs (checked 0.5.1 / 0.3.3 / 0.1.2): `ggus` reads only version 3 and reads the tensor
//! type id straight into a `#[repr(u32)]` enum that ends at id 33 (undefined behaviour for tq1_0,
//! mxfp4 and newer); `gguf-rs-lib` rejects version 2 and any type id it does not list, and keeps
//! metadata in a `HashMap`, losing file order; `gguf` only reads and has an outdated type table.
//! The golden files already use ids newer than [`GgmlType`] (40 nvfp4, 41 q1_0), so this module
//! keeps the raw `u32` id of every tensor and resolves it with [`GgmlType::from_gguf_id`] on use.
//!
//! Conventions, the same as ggml's `gguf.cpp`:
//! - Dimensions are in ggml's `ne` order (innermost first), as GGUF stores them; missing ones are 1.
//! - Tensor offsets count from the data section, which starts where the header ends, rounded up to
//!   `general.alignment` (a `u32` power of two, 32 when absent); each offset is a multiple of it.
//!   The writer pads every tensor, the last one included, to the alignment with zeros.
//! - Metadata and tensor infos keep file order; a key or a tensor name appears only once.
//! - Malformed input gives a [`GgufError`], never a panic: counts and lengths read from the file
//!   never size an allocation before the bytes behind them have been read.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::path::Path;

use crate::ggml_type::GgmlType;
use crate::tensor::{HostTensor, Layout, LayoutError};

/// The four bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// The version [`GgufWriter`] writes.
pub const VERSION: u32 = 3;
/// The alignment used when the file has no `general.alignment`.
pub const DEFAULT_ALIGNMENT: usize = 32;
/// The metadata key holding the alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";
/// Deepest nesting of arrays accepted (ggml itself reads no nested arrays at all).
const MAX_ARRAY_DEPTH: usize = 8;
/// Upper bound on capacity reserved from a count found in a file, before its items are read.
const MAX_PREALLOC: usize = 1024;

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

type Result<T, E = GgufError> = std::result::Result<T, E>;

fn bad_tensor(name: &str, reason: impl Into<String>) -> GgufError {
    GgufError::BadTensor {
        name: name.to_owned(),
        reason: reason.into(),
    }
}

macro_rules! value_types {
    ($($variant:ident($ty:ty) = $id:literal, $what:literal;)*) => {
        /// The type of a metadata value, with its GGUF id.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ValueType { $($variant,)* Bool, String, Array }

        impl ValueType {
            /// The GGUF id of the type.
            pub fn id(self) -> u32 {
                match self {
                    $(ValueType::$variant => $id,)*
                    ValueType::Bool => 7,
                    ValueType::String => 8,
                    ValueType::Array => 9,
                }
            }

            /// The type with this GGUF id.
            pub fn from_id(id: u32) -> Option<ValueType> {
                match id {
                    $($id => Some(ValueType::$variant),)*
                    7 => Some(ValueType::Bool),
                    8 => Some(ValueType::String),
                    9 => Some(ValueType::Array),
                    _ => None,
                }
            }
        }

        /// A metadata value. An array records its element type, so that an empty one keeps it.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Value { $($variant($ty),)* Bool(bool), String(String), Array(ValueType, Vec<Value>) }

        impl Value {
            /// The value's type.
            pub fn ty(&self) -> ValueType {
                match self {
                    $(Value::$variant(_) => ValueType::$variant,)*
                    Value::Bool(_) => ValueType::Bool,
                    Value::String(_) => ValueType::String,
                    Value::Array(..) => ValueType::Array,
                }
            }
        }

        impl<R: Read> Reader<R> {
            fn value(&mut self, ty: ValueType, depth: usize) -> Result<Value> {
                Ok(match ty {
                    $(ValueType::$variant => Value::$variant(<$ty>::from_le_bytes(self.bytes($what)?)),)*
                    ValueType::Bool => match self.bytes::<1>("a bool value")? {
                        [0] => Value::Bool(false),
                        [1] => Value::Bool(true),
                        [b] => return Err(GgufError::BadValue(format!("bool byte {b}"))),
                    },
                    ValueType::String => Value::String(self.string("a string value")?),
                    ValueType::Array => self.array(depth)?,
                })
            }
        }

        fn write_value(w: &mut impl Write, value: &Value) -> Result<()> {
            match value {
                $(Value::$variant(v) => w.write_all(&v.to_le_bytes())?,)*
                Value::Bool(b) => w.write_all(&[u8::from(*b)])?,
                Value::String(s) => write_string(w, s)?,
                Value::Array(ty, values) => {
                    w.write_all(&ty.id().to_le_bytes())?;
                    w.write_all(&(values.len() as u64).to_le_bytes())?;
                    for v in values {
                        if v.ty() != *ty {
                            return Err(GgufError::BadValue(format!("a {:?} in an array of {ty:?}", v.ty())));
                        }
                        write_value(w, v)?;
                    }
                }
            }
            Ok(())
        }
    };
}

value_types! {
    U8(u8) = 0, "a u8 value";
    I8(i8) = 1, "an i8 value";
    U16(u16) = 2, "a u16 value";
    I16(i16) = 3, "an i16 value";
    U32(u32) = 4, "a u32 value";
    I32(i32) = 5, "an i32 value";
    F32(f32) = 6, "an f32 value";
    U64(u64) = 10, "a u64 value";
    I64(i64) = 11, "an i64 value";
    F64(f64) = 12, "an f64 value";
}

impl Value {
    /// The string, for a string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a `u64`, for any non-negative integer value.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => v.try_into().ok(),
            Value::I16(v) => v.try_into().ok(),
            Value::I32(v) => v.try_into().ok(),
            Value::I64(v) => v.try_into().ok(),
            _ => None,
        }
    }

    /// The value as an `f64`, for a float value.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a bool, for a bool value.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The element type and elements, for an array value.
    pub fn as_array(&self) -> Option<(ValueType, &[Value])> {
        match self {
            Value::Array(ty, values) => Some((*ty, values)),
            _ => None,
        }
    }
}

/// Metadata: key-value pairs in file order, keys unique.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    entries: Vec<(String, Value)>,
}

impl Metadata {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The string value of `key`, if it is a string.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// Sets `key`, in place if present (keeping its position), else at the end. Returns the old value.
    pub fn insert(&mut self, key: impl Into<String>, value: Value) -> Option<Value> {
        let key = key.into();
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => Some(std::mem::replace(v, value)),
            None => {
                self.entries.push((key, value));
                None
            }
        }
    }

    /// The pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The alignment `general.alignment` asks for, or [`DEFAULT_ALIGNMENT`].
    pub fn alignment(&self) -> Result<usize> {
        match self.get(ALIGNMENT_KEY) {
            None => Ok(DEFAULT_ALIGNMENT),
            Some(&Value::U32(a)) if a.is_power_of_two() => Ok(a as usize),
            Some(other) => Err(GgufError::BadAlignment(format!("{other:?}"))),
        }
    }
}

/// A tensor's description in the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// How many dimensions the file lists (0 to 4); `ne` holds 1 past them.
    pub n_dims: u32,
    /// Extents in ggml's order, innermost first.
    pub ne: [usize; 4],
    /// The raw `ggml_type` id, which may be one [`GgmlType`] does not know.
    pub ty: u32,
    /// Byte offset of the data from the start of the data section.
    pub offset: usize,
}

impl TensorInfo {
    /// The type, if this crate knows its id.
    pub fn ggml_type(&self) -> Option<GgmlType> {
        GgmlType::from_gguf_id(self.ty)
    }

    /// Number of elements.
    pub fn elements(&self) -> usize {
        self.ne.iter().product()
    }

    /// Bytes of data; `None` for an unknown type, a partial block or an overflow (the reader
    /// rejects the last two for known types).
    pub fn nbytes(&self) -> Option<usize> {
        let ty = self.ggml_type()?;
        if !self.ne[0].is_multiple_of(ty.block_size()) {
            return None;
        }
        let row = (self.ne[0] / ty.block_size()).checked_mul(ty.type_size())?;
        self.ne[1..].iter().try_fold(row, |acc, &n| acc.checked_mul(n))
    }

    /// The contiguous layout of the tensor (offset 0).
    pub fn layout(&self) -> Result<Layout> {
        let ty = self.ggml_type().ok_or_else(|| GgufError::UnknownTensorType {
            name: self.name.clone(),
            id: self.ty,
        })?;
        Ok(Layout::contiguous(ty, self.ne)?)
    }
}

/// The header of a GGUF file: everything but the tensor data. Reading only this is enough to
/// read tensors lazily: tensor `t` lies at byte `data_offset + t.offset` of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufHeader {
    pub version: u32,
    pub metadata: Metadata,
    tensors: Vec<TensorInfo>,
    index: HashMap<String, usize>,
    /// The alignment of the data section and of every tensor in it.
    pub alignment: usize,
    /// Byte offset of the data section in the file.
    pub data_offset: usize,
}

impl GgufHeader {
    /// Reads the header from the start of a GGUF file, leaving `reader` at the end of the header
    /// (before the padding that leads to the data section).
    pub fn read<R: Read>(reader: R) -> Result<GgufHeader> {
        Reader { inner: reader, pos: 0 }.header()
    }

    /// The tensor infos, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The info of the tensor `name`.
    pub fn tensor_info(&self, name: &str) -> Result<&TensorInfo> {
        self.index
            .get(name)
            .map(|&i| &self.tensors[i])
            .ok_or_else(|| GgufError::NoTensor(name.to_owned()))
    }

    /// The byte range of the tensor's data within the data section: exact for a known type; for an
    /// unknown one, up to the next tensor's offset or `data_len` (so it may include padding).
    pub fn tensor_range(&self, info: &TensorInfo, data_len: usize) -> Result<std::ops::Range<usize>> {
        let end = match info.nbytes() {
            Some(n) => info.offset.checked_add(n),
            None => Some(
                self.tensors
                    .iter()
                    .map(|t| t.offset)
                    .filter(|&o| o > info.offset)
                    .min()
                    .unwrap_or(data_len)
                    .min(data_len),
            ),
        };
        match end {
            Some(end) if info.offset <= end && end <= data_len => Ok(info.offset..end),
            _ => Err(GgufError::OutOfBounds {
                name: info.name.clone(),
                start: info.offset,
                end: end.unwrap_or(usize::MAX),
                available: data_len,
            }),
        }
    }
}

/// A whole GGUF file in memory: its header and its data section.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufFile {
    pub header: GgufHeader,
    data: Vec<u8>,
}

impl GgufFile {
    /// Reads a whole file from `reader`, checking that every tensor's data lies inside it.
    pub fn read<R: Read>(reader: R) -> Result<GgufFile> {
        let mut r = Reader { inner: reader, pos: 0 };
        let header = r.header()?;
        let mut rest = Vec::new();
        r.inner.read_to_end(&mut rest)?;
        // The padding before the data section may be missing when there is no data at all.
        let padding = header.data_offset - r.pos as usize;
        let data = if rest.len() >= padding {
            rest.split_off(padding)
        } else {
            Vec::new()
        };
        for info in &header.tensors {
            header.tensor_range(info, data.len())?;
        }
        Ok(GgufFile { header, data })
    }

    /// Reads a file from memory.
    pub fn from_bytes(bytes: &[u8]) -> Result<GgufFile> {
        GgufFile::read(bytes)
    }

    /// Reads the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        GgufFile::read(io::BufReader::new(std::fs::File::open(path)?))
    }

    /// The metadata, in file order.
    pub fn metadata(&self) -> &Metadata {
        &self.header.metadata
    }

    /// The tensor infos, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.header.tensors
    }

    /// The data section (from the first tensor's aligned start to the end of the file).
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The bytes of tensor `name` (see [`GgufHeader::tensor_range`] for unknown types).
    pub fn tensor_data(&self, name: &str) -> Result<&[u8]> {
        let info = self.header.tensor_info(name)?;
        let range = self.header.tensor_range(info, self.data.len())?;
        Ok(&self.data[range])
    }

    /// Tensor `name` as a contiguous host tensor; an error for a type this crate does not know.
    pub fn tensor(&self, name: &str) -> Result<HostTensor> {
        let info = self.header.tensor_info(name)?;
        let layout = info.layout()?;
        let data = self.tensor_data(name)?.to_vec();
        Ok(HostTensor { layout, data })
    }
}

/// A little-endian reader that counts its position, for error messages and the data offset.
struct Reader<R> {
    inner: R,
    pos: u64,
}

impl<R: Read> Reader<R> {
    fn bytes<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let mut buf = [0; N];
        self.exact(&mut buf, what)?;
        Ok(buf)
    }

    fn exact(&mut self, buf: &mut [u8], what: &'static str) -> Result<()> {
        match self.inner.read_exact(buf) {
            Ok(()) => {
                self.pos += buf.len() as u64;
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(GgufError::Truncated { what, offset: self.pos }),
            Err(e) => Err(e.into()),
        }
    }

    fn u32(&mut self, what: &'static str) -> Result<u32> {
        self.bytes(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &'static str) -> Result<u64> {
        self.bytes(what).map(u64::from_le_bytes)
    }

    fn string(&mut self, what: &'static str) -> Result<String> {
        let len = self.u64(what)?;
        let mut buf = Vec::new();
        // `take` reads what is there, so a huge length in a short file allocates nothing large.
        let got = (&mut self.inner).take(len).read_to_end(&mut buf)?;
        self.pos += got as u64;
        if (got as u64) < len {
            return Err(GgufError::Truncated { what, offset: self.pos });
        }
        String::from_utf8(buf).map_err(|_| GgufError::InvalidUtf8(what))
    }

    fn array(&mut self, depth: usize) -> Result<Value> {
        if depth >= MAX_ARRAY_DEPTH {
            return Err(GgufError::BadValue(format!(
                "arrays nested deeper than {MAX_ARRAY_DEPTH}"
            )));
        }
        let id = self.u32("an array's element type")?;
        let ty = ValueType::from_id(id).ok_or(GgufError::UnknownValueType(id))?;
        let n = self.u64("an array's length")?;
        let mut values = Vec::with_capacity(prealloc(n));
        for _ in 0..n {
            values.push(self.value(ty, depth + 1)?);
        }
        Ok(Value::Array(ty, values))
    }

    fn header(&mut self) -> Result<GgufHeader> {
        let magic = self.bytes("the magic")?;
        if magic != MAGIC {
            return Err(GgufError::BadMagic(magic));
        }
        let version = self.u32("the version")?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::UnsupportedVersion(version));
        }
        let n_tensors = self.u64("the tensor count")?;
        let n_kv = self.u64("the metadata count")?;

        let mut metadata = Metadata::default();
        let mut keys = HashSet::new();
        for _ in 0..n_kv {
            let key = self.string("a metadata key")?;
            let id = self.u32("a metadata value type")?;
            let ty = ValueType::from_id(id).ok_or(GgufError::UnknownValueType(id))?;
            let value = self.value(ty, 0)?;
            if !keys.insert(key.clone()) {
                return Err(GgufError::DuplicateKey(key));
            }
            metadata.entries.push((key, value));
        }
        let alignment = metadata.alignment()?;

        let mut tensors = Vec::with_capacity(prealloc(n_tensors));
        let mut index = HashMap::with_capacity(prealloc(n_tensors));
        for _ in 0..n_tensors {
            let info = self.tensor_info(alignment)?;
            if index.insert(info.name.clone(), tensors.len()).is_some() {
                return Err(GgufError::DuplicateTensor(info.name));
            }
            tensors.push(info);
        }
        let data_offset = usize::try_from(self.pos)
            .ok()
            .and_then(|p| p.checked_next_multiple_of(alignment))
            .ok_or_else(|| GgufError::BadValue("header too large".into()))?;
        Ok(GgufHeader {
            version,
            metadata,
            tensors,
            index,
            alignment,
            data_offset,
        })
    }

    fn tensor_info(&mut self, alignment: usize) -> Result<TensorInfo> {
        let name = self.string("a tensor name")?;
        let n_dims = self.u32("a tensor's dimension count")?;
        if n_dims > 4 {
            return Err(bad_tensor(&name, format!("{n_dims} dimensions (at most 4)")));
        }
        let mut ne = [1usize; 4];
        for n in ne.iter_mut().take(n_dims as usize) {
            let v = self.u64("a tensor's extents")?;
            *n = usize::try_from(v)
                .ok()
                .filter(|_| i64::try_from(v).is_ok())
                .ok_or_else(|| bad_tensor(&name, format!("extent {v} is too large")))?;
        }
        let ty = self.u32("a tensor's type")?;
        let offset = self.u64("a tensor's offset")?;
        let offset = usize::try_from(offset).map_err(|_| bad_tensor(&name, "offset too large"))?;
        if !offset.is_multiple_of(alignment) {
            return Err(bad_tensor(
                &name,
                format!("offset {offset} is not a multiple of {alignment}"),
            ));
        }
        if ne.iter().try_fold(1usize, |acc, &n| acc.checked_mul(n)).is_none() {
            return Err(bad_tensor(&name, format!("{ne:?} overflows the element count")));
        }
        let info = TensorInfo {
            name,
            n_dims,
            ne,
            ty,
            offset,
        };
        if let Some(t) = info.ggml_type()
            && info.nbytes().is_none()
        {
            return Err(bad_tensor(
                &info.name,
                format!(
                    "{t} extents {ne:?} are not whole blocks of {} or overflow",
                    t.block_size()
                ),
            ));
        }
        Ok(info)
    }
}

fn prealloc(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX).min(MAX_PREALLOC)
}

fn write_string(w: &mut impl Write, s: &str) -> io::Result<()> {
    w.write_all(&(s.len() as u64).to_le_bytes())?;
    w.write_all(s.as_bytes())
}

/// Builds a GGUF version 3 file: metadata, then tensor infos, then the tensor data, each tensor
/// padded to the alignment (`general.alignment`, 32 when unset), as ggml's own writer lays it out.
#[derive(Debug, Clone, Default)]
pub struct GgufWriter {
    metadata: Metadata,
    tensors: Vec<(TensorInfo, Vec<u8>)>,
    names: HashSet<String>,
}

impl GgufWriter {
    pub fn new() -> GgufWriter {
        GgufWriter::default()
    }

    /// A writer holding all of `file`'s metadata and tensors, in order (writing it back gives the
    /// same file when `file` was laid out as ggml writes).
    pub fn from_file(file: &GgufFile) -> Result<GgufWriter> {
        let mut w = GgufWriter {
            metadata: file.metadata().clone(),
            ..GgufWriter::default()
        };
        for info in file.tensors() {
            let data = file.tensor_data(&info.name)?.to_vec();
            w.add_raw_tensor(&info.name, info.ty, info.n_dims, info.ne, data)?;
        }
        Ok(w)
    }

    /// The metadata so far, to read or change.
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// Sets a metadata value (replacing, in place, one already set).
    pub fn set(&mut self, key: impl Into<String>, value: Value) -> &mut GgufWriter {
        self.metadata.insert(key, value);
        self
    }

    /// Sets `general.alignment`.
    pub fn set_alignment(&mut self, alignment: u32) -> Result<&mut GgufWriter> {
        if !alignment.is_power_of_two() {
            return Err(GgufError::BadAlignment(alignment.to_string()));
        }
        Ok(self.set(ALIGNMENT_KEY, Value::U32(alignment)))
    }

    /// Adds a tensor of a known type; `data` must hold exactly its contiguous bytes. Dimensions
    /// past the last extent above 1 are left out of the file, as ggml does.
    pub fn add_tensor(&mut self, name: &str, ty: GgmlType, ne: [usize; 4], data: Vec<u8>) -> Result<&mut GgufWriter> {
        let n_dims = ne.iter().rposition(|&n| n > 1).map_or(1, |i| i + 1) as u32;
        self.add_raw_tensor(name, ty.gguf_id(), n_dims, ne, data)
    }

    /// Adds a contiguous host tensor.
    pub fn add_host_tensor(&mut self, name: &str, tensor: &HostTensor) -> Result<&mut GgufWriter> {
        let l = &tensor.layout;
        let range = l.offset..l.end_bytes().unwrap_or(usize::MAX);
        match tensor.data.get(range) {
            Some(bytes) if l.is_contiguous() => self.add_tensor(name, l.ty, l.ne, bytes.to_vec()),
            _ => Err(bad_tensor(name, "not a contiguous tensor inside its buffer")),
        }
    }

    /// Adds a tensor by raw type id, which may be one this crate does not know (its data is then
    /// written as given). `ne` past `n_dims` must be 1.
    pub fn add_raw_tensor(
        &mut self,
        name: &str,
        ty: u32,
        n_dims: u32,
        ne: [usize; 4],
        data: Vec<u8>,
    ) -> Result<&mut GgufWriter> {
        if n_dims > 4 || ne[n_dims as usize..].iter().any(|&n| n != 1) {
            return Err(bad_tensor(name, format!("{n_dims} dimensions for extents {ne:?}")));
        }
        let info = TensorInfo {
            name: name.to_owned(),
            n_dims,
            ne,
            ty,
            offset: 0,
        };
        if let Some(t) = info.ggml_type() {
            match info.nbytes() {
                Some(n) if n == data.len() => {}
                need => {
                    return Err(bad_tensor(
                        name,
                        format!("{} bytes given, {t} {ne:?} needs {need:?}", data.len()),
                    ));
                }
            }
        }
        if !self.names.insert(info.name.clone()) {
            return Err(GgufError::DuplicateTensor(info.name));
        }
        self.tensors.push((info, data));
        Ok(self)
    }

    /// Writes the file.
    pub fn write_to(&self, mut w: impl Write) -> Result<()> {
        let alignment = self.metadata.alignment()?;
        let mut header = Vec::new();
        header.extend_from_slice(&MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        header.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in self.metadata.iter() {
            write_string(&mut header, key)?;
            header.extend_from_slice(&value.ty().id().to_le_bytes());
            write_value(&mut header, value)?;
        }
        let mut offset = 0usize;
        for (info, data) in &self.tensors {
            write_string(&mut header, &info.name)?;
            header.extend_from_slice(&info.n_dims.to_le_bytes());
            for &n in &info.ne[..info.n_dims as usize] {
                header.extend_from_slice(&(n as u64).to_le_bytes());
            }
            header.extend_from_slice(&info.ty.to_le_bytes());
            header.extend_from_slice(&(offset as u64).to_le_bytes());
            offset += data.len().next_multiple_of(alignment);
        }
        header.resize(header.len().next_multiple_of(alignment), 0);
        w.write_all(&header)?;
        let zeros = vec![0u8; alignment];
        for (_, data) in &self.tensors {
            w.write_all(data)?;
            w.write_all(&zeros[..data.len().next_multiple_of(alignment) - data.len()])?;
        }
        Ok(())
    }

    /// The file as bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.write_to(&mut out)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn golden_files() -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| e == "gguf") {
                    out.push(path);
                }
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/golden");
        let mut out = Vec::new();
        walk(&root, &mut out);
        out.sort();
        out
    }

    /// The value of `key=` in an upstream case string such as `MUL_MAT(type_a=q4_0,…)`.
    fn case_param<'a>(case: &'a str, key: &str) -> Option<&'a str> {
        let start = case.find(&format!("{key}="))? + key.len() + 1;
        case[start..].split([',', ')']).next()
    }

    #[test]
    fn reads_every_golden_file() {
        let files = golden_files();
        assert!(files.len() >= 100, "only {} golden files found", files.len());
        let mut unknown = std::collections::BTreeSet::new();
        for path in &files {
            let bytes = std::fs::read(path).unwrap();
            let f = GgufFile::from_bytes(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let op = f.metadata().get_str("golden.op").expect("golden.op");
            let case = f.metadata().get_str("golden.case").expect("golden.case");
            // The tensor whose type the case names, and that name.
            let (typed, type_name) = match op {
                "QUANT" => ("quantized", Some(case)),
                "MUL_MAT" => ("src0", case_param(case, "type_a")),
                "FLASH_ATTN_EXT" => ("k", case_param(case, "type_K")),
                _ => panic!("{}: unknown op {op}", path.display()),
            };
            assert_eq!(f.header.version, 3);
            assert!(!f.tensors().is_empty());
            for info in f.tensors() {
                let range = f.header.tensor_range(info, f.data().len()).unwrap();
                assert!(
                    f.header.data_offset + range.end <= bytes.len(),
                    "{}: {}",
                    path.display(),
                    info.name
                );
                let data = f.tensor_data(&info.name).unwrap();
                match info.ggml_type() {
                    Some(ty) => {
                        assert_eq!(Some(data.len()), info.nbytes());
                        let t = f.tensor(&info.name).unwrap();
                        assert_eq!(t.layout, Layout::contiguous(ty, info.ne).unwrap());
                        assert_eq!(t.data, data);
                    }
                    None => {
                        let err = f.tensor(&info.name);
                        assert!(matches!(err, Err(GgufError::UnknownTensorType { id, .. }) if id == info.ty));
                        unknown.insert((info.ty, type_name.unwrap_or("?").to_owned()));
                    }
                }
            }
            // The type named by the case must be the type stored.
            if let Some(ty) = type_name.and_then(|n| n.parse::<GgmlType>().ok()) {
                assert_eq!(
                    f.header.tensor_info(typed).unwrap().ty,
                    ty.gguf_id(),
                    "{}",
                    path.display()
                );
            }
            // The files were written by ggml's writer, whose layout ours reproduces byte for byte.
            let again = GgufWriter::from_file(&f).unwrap().to_bytes().unwrap();
            assert!(again == bytes, "{}: rewrite differs", path.display());
        }
        eprintln!("type ids unknown to GgmlType in the golden files: {unknown:?}");
    }

    #[test]
    fn quant_files_hold_f32_input_and_output() {
        for path in golden_files()
            .iter()
            .filter(|p| p.parent().is_some_and(|d| d.ends_with("quant")))
        {
            let f = GgufFile::open(path).unwrap();
            for name in ["input", "dequantized"] {
                let t = f.tensor(name).unwrap();
                assert_eq!((t.layout.ty, t.layout.ne), (GgmlType::F32, [1024, 4, 1, 1]));
            }
            let q = f.header.tensor_info("quantized").unwrap();
            assert_eq!((q.n_dims, q.ne), (2, [1024, 4, 1, 1]));
        }
    }

    fn every_value() -> Vec<(&'static str, Value)> {
        vec![
            ("t.u8", Value::U8(200)),
            ("t.i8", Value::I8(-100)),
            ("t.u16", Value::U16(60000)),
            ("t.i16", Value::I16(-30000)),
            ("t.u32", Value::U32(4_000_000_000)),
            ("t.i32", Value::I32(-2_000_000_000)),
            ("t.f32", Value::F32(-1.5e-7)),
            ("t.bool", Value::Bool(true)),
            ("t.string", Value::String("héllo, GGUF".into())),
            ("t.empty", Value::String(String::new())),
            ("t.u64", Value::U64(u64::MAX)),
            ("t.i64", Value::I64(i64::MIN)),
            ("t.f64", Value::F64(std::f64::consts::PI)),
            (
                "t.arr_i32",
                Value::Array(ValueType::I32, vec![Value::I32(1), Value::I32(-2)]),
            ),
            (
                "t.arr_str",
                Value::Array(
                    ValueType::String,
                    vec![Value::String("a".into()), Value::String("".into())],
                ),
            ),
            ("t.arr_empty", Value::Array(ValueType::F64, vec![])),
            (
                "t.arr_nested",
                Value::Array(
                    ValueType::Array,
                    vec![Value::Array(ValueType::Bool, vec![Value::Bool(false)])],
                ),
            ),
        ]
    }

    fn sample_writer() -> GgufWriter {
        let mut w = GgufWriter::new();
        w.set("general.architecture", Value::String("test".into()));
        w.set_alignment(64).unwrap();
        for (k, v) in every_value() {
            w.set(k, v);
        }
        let f32s: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
        w.add_tensor("a", GgmlType::F32, [3, 2, 1, 1], f32s).unwrap();
        w.add_tensor("b", GgmlType::Q4_0, [64, 1, 2, 1], (0..72).collect())
            .unwrap();
        w.add_tensor("scalar", GgmlType::F32, [1, 1, 1, 1], 7f32.to_le_bytes().to_vec())
            .unwrap();
        w.add_tensor("c", GgmlType::F16, [2, 1, 1, 3], vec![1; 12]).unwrap();
        w
    }

    #[test]
    fn write_then_read_preserves_everything() {
        let mut w = sample_writer();
        // An id this crate does not know keeps its bytes (then zero padding, since the size is unknown).
        w.add_raw_tensor("unknown", 41, 2, [128, 3, 1, 1], (100..154).collect())
            .unwrap();
        let bytes = w.to_bytes().unwrap();
        let f = GgufFile::from_bytes(&bytes).unwrap();
        assert_eq!(f.header.version, 3);
        assert_eq!(f.header.alignment, 64);
        assert_eq!(f.header.data_offset % 64, 0);
        assert_eq!(f.metadata(), &w.metadata);
        let keys: Vec<&str> = f.metadata().iter().map(|(k, _)| k).collect();
        assert_eq!(keys[..2], ["general.architecture", ALIGNMENT_KEY]);
        let names: Vec<&str> = f.tensors().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "scalar", "c", "unknown"]);
        for (info, data) in &w.tensors {
            let read = f.header.tensor_info(&info.name).unwrap();
            assert_eq!((read.n_dims, read.ne, read.ty), (info.n_dims, info.ne, info.ty));
            assert_eq!(read.offset % 64, 0);
            let got = f.tensor_data(&info.name).unwrap();
            if info.ggml_type().is_some() {
                assert_eq!(got, &data[..]);
            } else {
                assert_eq!(&got[..data.len()], &data[..]);
                assert!(got[data.len()..].iter().all(|&b| b == 0) && got.len() == 64);
            }
        }
        assert_eq!(f.header.tensor_info("scalar").unwrap().n_dims, 1);
        assert_eq!(f.header.tensor_info("c").unwrap().n_dims, 4);
        assert_eq!(f.tensor("a").unwrap().to_f32().unwrap(), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        // Reading and writing again gives the same bytes.
        assert_eq!(GgufWriter::from_file(&f).unwrap().to_bytes().unwrap(), bytes);
    }

    #[test]
    fn host_tensors_round_trip() {
        let t = HostTensor::from_f32(GgmlType::F32, [4, 2, 1, 1], &[1., 2., 3., 4., 5., 6., 7., 8.]).unwrap();
        let mut w = GgufWriter::new();
        w.add_host_tensor("t", &t).unwrap();
        let f = GgufFile::from_bytes(&w.to_bytes().unwrap()).unwrap();
        assert_eq!(f.tensor("t").unwrap(), t);
        assert_eq!(f.header.alignment, DEFAULT_ALIGNMENT);
        assert!(matches!(f.tensor("nope"), Err(GgufError::NoTensor(_))));
        let view = HostTensor {
            layout: t.layout.permute([1, 0, 2, 3]).unwrap(),
            data: t.data.clone(),
        };
        assert!(w.add_host_tensor("v", &view).is_err());
    }

    #[test]
    fn writer_rejects_bad_input() {
        let mut w = GgufWriter::new();
        assert!(w.add_tensor("x", GgmlType::F32, [2, 1, 1, 1], vec![0; 7]).is_err());
        assert!(w.add_tensor("x", GgmlType::Q4_0, [48, 1, 1, 1], vec![0; 27]).is_err());
        assert!(w.add_raw_tensor("x", 99, 1, [2, 2, 1, 1], vec![]).is_err());
        assert!(w.add_raw_tensor("x", 99, 5, [2, 2, 1, 1], vec![]).is_err());
        w.add_tensor("x", GgmlType::F32, [1, 1, 1, 1], vec![0; 4]).unwrap();
        assert!(matches!(
            w.add_raw_tensor("x", 99, 1, [1, 1, 1, 1], vec![]),
            Err(GgufError::DuplicateTensor(_))
        ));
        assert!(w.set_alignment(48).is_err());
        w.set("m", Value::Array(ValueType::U8, vec![Value::I8(1)]));
        assert!(matches!(w.to_bytes(), Err(GgufError::BadValue(_))));
        w.set("m", Value::U8(1));
        w.set(ALIGNMENT_KEY, Value::U64(32));
        assert!(matches!(w.to_bytes(), Err(GgufError::BadAlignment(_))));
    }

    #[test]
    fn reads_version_2_and_rejects_others() {
        let mut bytes = sample_writer().to_bytes().unwrap();
        let v3 = GgufFile::from_bytes(&bytes).unwrap();
        bytes[4] = 2;
        let v2 = GgufFile::from_bytes(&bytes).unwrap();
        assert_eq!(v2.header.version, 2);
        assert_eq!(
            (v2.metadata(), v2.tensors(), v2.data()),
            (v3.metadata(), v3.tensors(), v3.data())
        );
        for v in [0u32, 1, 4, 0x0300_0000] {
            bytes[4..8].copy_from_slice(&v.to_le_bytes());
            assert!(matches!(GgufFile::from_bytes(&bytes), Err(GgufError::UnsupportedVersion(x)) if x == v));
        }
    }

    #[test]
    fn empty_file_without_padding_reads() {
        let mut bytes = GgufWriter::new().to_bytes().unwrap();
        assert_eq!(bytes.len(), 32);
        bytes.truncate(24);
        let f = GgufFile::from_bytes(&bytes).unwrap();
        assert!(f.tensors().is_empty() && f.metadata().is_empty() && f.data().is_empty());
    }

    /// Hand-built headers, for inputs the writer refuses to make.
    struct Raw(Vec<u8>);

    impl Raw {
        fn new(n_tensors: u64, n_kv: u64) -> Raw {
            let mut r = Raw(b"GGUF".to_vec());
            r.u32(3).u64(n_tensors).u64(n_kv);
            r
        }
        fn u32(&mut self, v: u32) -> &mut Raw {
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        fn u64(&mut self, v: u64) -> &mut Raw {
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        fn str(&mut self, s: &str) -> &mut Raw {
            self.u64(s.len() as u64);
            self.0.extend_from_slice(s.as_bytes());
            self
        }
        fn tensor(&mut self, name: &str, ne: &[u64], ty: u32, offset: u64) -> &mut Raw {
            self.str(name).u32(ne.len() as u32);
            for &n in ne {
                self.u64(n);
            }
            self.u32(ty).u64(offset)
        }
        fn data(&mut self, n: usize) -> Vec<u8> {
            let mut out = self.0.clone();
            out.resize(out.len().next_multiple_of(32) + n, 0);
            out
        }
        fn exact(&mut self) -> Result<GgufFile> {
            GgufFile::from_bytes(&self.0)
        }
        fn read(&mut self, data: usize) -> Result<GgufFile> {
            GgufFile::from_bytes(&self.data(data))
        }
    }

    #[test]
    fn malformed_headers_are_errors() {
        use GgufError as E;
        assert!(matches!(GgufFile::from_bytes(b"GGUE\x03\0\0\0"), Err(E::BadMagic(_))));
        assert!(matches!(GgufFile::from_bytes(b""), Err(E::Truncated { .. })));
        // Counts and lengths far beyond the file.
        assert!(matches!(Raw::new(u64::MAX, 0).read(0), Err(E::Truncated { .. })));
        assert!(matches!(Raw::new(0, u64::MAX).read(0), Err(E::Truncated { .. })));
        assert!(matches!(Raw::new(0, 1).u64(u64::MAX).read(0), Err(E::Truncated { .. })));
        assert!(matches!(
            Raw::new(0, 1).str("k").u32(8).u64(u64::MAX).read(64),
            Err(E::Truncated { .. })
        ));
        assert!(matches!(
            Raw::new(0, 1).str("k").u32(9).u32(0).u64(u64::MAX).read(64),
            Err(E::Truncated { .. })
        ));
        assert!(matches!(
            Raw::new(1, 0).str("t").u32(4).u64(u64::MAX).read(64),
            Err(E::BadTensor { .. })
        ));
        // Bad values.
        assert!(matches!(
            Raw::new(0, 1).str("k").u32(13).read(8),
            Err(E::UnknownValueType(13))
        ));
        assert!(matches!(
            Raw::new(0, 1).str("k").u32(9).u32(77).u64(0).read(0),
            Err(E::UnknownValueType(77))
        ));
        assert!(matches!(
            Raw::new(0, 1).str("k").u32(7).exact(),
            Err(E::Truncated { .. })
        ));
        let mut bad_bool = Raw::new(0, 1);
        bad_bool.str("k").u32(7).0.push(2);
        assert!(matches!(bad_bool.read(0), Err(E::BadValue(_))));
        let mut deep = Raw::new(0, 1);
        deep.str("k").u32(9);
        for _ in 0..100 {
            deep.u32(9).u64(1);
        }
        assert!(matches!(deep.read(0), Err(E::BadValue(_))));
        let mut bad_utf8 = Raw::new(0, 1);
        bad_utf8.u64(2).0.extend_from_slice(&[0xff, 0xfe]);
        assert!(matches!(bad_utf8.u32(4).u32(0).read(0), Err(E::InvalidUtf8(_))));
        assert!(matches!(
            Raw::new(0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2).read(0),
            Err(E::DuplicateKey(_))
        ));
        for align in [
            Raw::new(0, 1).str(ALIGNMENT_KEY).u32(4).u32(0).read(0),
            Raw::new(0, 1).str(ALIGNMENT_KEY).u32(4).u32(24).read(0),
            Raw::new(0, 1).str(ALIGNMENT_KEY).u32(10).u64(32).read(0),
        ] {
            assert!(matches!(align, Err(E::BadAlignment(_))));
        }
    }

    #[test]
    fn malformed_tensor_infos_are_errors() {
        use GgufError as E;
        let q4_0 = GgmlType::Q4_0.gguf_id();
        assert!(Raw::new(1, 0).tensor("t", &[32, 2], q4_0, 0).read(36).is_ok());
        assert!(Raw::new(1, 0).tensor("t", &[], 0, 0).read(4).is_ok());
        assert!(matches!(
            Raw::new(1, 0).tensor("t", &[32, 2], q4_0, 0).read(35),
            Err(E::OutOfBounds { .. })
        ));
        assert!(matches!(
            Raw::new(1, 0).tensor("t", &[32, 2], q4_0, 0).read(0),
            Err(E::OutOfBounds { .. })
        ));
        assert!(matches!(
            Raw::new(1, 0).tensor("t", &[32, 2], q4_0, 64).read(36),
            Err(E::OutOfBounds { .. })
        ));
        assert!(matches!(
            Raw::new(1, 0).tensor("t", &[4], 0, u64::MAX - 31).read(16),
            Err(E::OutOfBounds { .. })
        ));
        assert!(matches!(
            Raw::new(1, 0).tensor("t", &[48], q4_0, 0).read(64),
            Err(E::BadTensor { .. })
        ));
        assert!(matches!(
            Raw::new(1, 0).tensor("t", &[1; 5], 0, 0).read(4),
            Err(E::BadTensor { .. })
        ));
        assert!(matches!(
            Raw::new(1, 0).tensor("t", &[1], 0, 4).read(8),
            Err(E::BadTensor { .. })
        ));
        let huge = [1 << 31, 1 << 31, 1 << 31, 1 << 31];
        assert!(matches!(
            Raw::new(1, 0).tensor("t", &huge, 99, 0).read(0),
            Err(E::BadTensor { .. })
        ));
        assert!(matches!(
            Raw::new(1, 0).tensor("t", &[1 << 62], 0, 0).read(0),
            Err(E::BadTensor { .. })
        ));
        assert!(matches!(
            Raw::new(1, 0).tensor("t", &[1 << 40], 0, 0).read(0),
            Err(E::OutOfBounds { .. })
        ));
        assert!(matches!(
            Raw::new(1, 0).tensor("t", &[u64::MAX], 0, 0).read(0),
            Err(E::BadTensor { .. })
        ));
        assert!(matches!(
            Raw::new(2, 0).tensor("t", &[1], 0, 0).tensor("t", &[1], 0, 32).read(64),
            Err(E::DuplicateTensor(_))
        ));
        // An unknown type is fine; its data runs to the next tensor or the end.
        let f = Raw::new(2, 0)
            .tensor("u", &[7], 99, 0)
            .tensor("v", &[1], 0, 64)
            .read(68)
            .unwrap();
        assert_eq!(f.tensor_data("u").unwrap().len(), 64);
        assert!(matches!(f.tensor("u"), Err(E::UnknownTensorType { id: 99, .. })));
        assert!(matches!(
            Raw::new(1, 0).tensor("u", &[7], 99, 64).read(32),
            Err(E::OutOfBounds { .. })
        ));
    }

    #[test]
    fn truncated_and_corrupted_files_do_not_panic() {
        let bytes = sample_writer().to_bytes().unwrap();
        let f = GgufFile::from_bytes(&bytes).unwrap();
        let needed = f
            .tensors()
            .iter()
            .map(|t| f.header.data_offset + t.offset + t.nbytes().unwrap())
            .max()
            .unwrap();
        for len in 0..bytes.len() {
            let r = GgufFile::from_bytes(&bytes[..len]);
            assert_eq!(r.is_ok(), len >= needed, "prefix of {len} bytes: {r:?}");
        }
        // Random byte changes: any result but a panic.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..3000 {
            let mut b = bytes.clone();
            for _ in 0..1 + next() % 4 {
                let i = (next() % b.len() as u64) as usize;
                b[i] = next() as u8;
            }
            let _ = GgufFile::from_bytes(&b).map(|f| {
                for t in f.tensors() {
                    let _ = f.tensor(&t.name);
                }
            });
        }
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn check(bytes: &[u8]) {
            if let Ok(f) = GgufFile::from_bytes(bytes) {
                for info in f.tensors() {
                    let _ = f.tensor_data(&info.name);
                    if let Ok(t) = f.tensor(&info.name) {
                        let _ = t.to_f32();
                    }
                }
            }
            let _ = GgufHeader::read(bytes);
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn random_bytes_never_panic(tail in prop::collection::vec(any::<u8>(), 0..256)) {
                check(&tail);
                let mut bytes = b"GGUF\x03\0\0\0".to_vec();
                bytes.extend(&tail);
                check(&bytes);
            }

            /// A valid file with bytes overwritten (counts, lengths, types, extents, offsets),
            /// or cut short, never panics and never allocates past what the file holds.
            #[test]
            fn mutated_files_never_panic(
                edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
                wide in prop::option::of((any::<prop::sample::Index>(), prop_oneof![Just(u64::MAX), Just(1u64 << 62), any::<u64>()])),
                cut in prop::option::of(any::<prop::sample::Index>()),
            ) {
                let mut bytes = sample_writer().to_bytes().unwrap();
                for (at, b) in edits {
                    let i = at.index(bytes.len());
                    bytes[i] = b;
                }
                if let Some((at, v)) = wide {
                    let i = at.index(bytes.len() - 8);
                    bytes[i..i + 8].copy_from_slice(&v.to_le_bytes());
                }
                if let Some(at) = cut {
                    bytes.truncate(at.index(bytes.len()));
                }
                check(&bytes);
            }
        }
    }
}
