//! Parsing: the header (metadata, tensor infos, their placement) and the data section, from any
//! reader, with every count and length from the file checked before it sizes an allocation.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read};

use super::{
    Array, ExpectedOffset, GgufError, GgufFile, GgufHeader, MAGIC, Metadata, Result, TensorInfo, Value, ValueType,
    bad_tensor,
};

/// Deepest nesting of arrays accepted (ggml itself reads no nested arrays at all).
const MAX_ARRAY_DEPTH: usize = 8;
/// Upper bound on capacity reserved from a count found in a file of unknown length, before its
/// items are read.
const MAX_PREALLOC: usize = 1024;
/// Bytes of fixed-size array elements read at a time.
const CHUNK: usize = 64 * 1024;
/// The fewest bytes a metadata entry takes: key length, empty key, type, a one-byte value.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// The fewest bytes a tensor info takes: name length, empty name, no dimensions, type, offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;
/// The fewest bytes an element of an array of strings or of arrays takes (a length; a type and
/// a length).
const MIN_STRING_BYTES: u64 = 8;
const MIN_ARRAY_BYTES: u64 = 4 + 8;

/// A little-endian reader that counts its position (for error messages and the data offset) and,
/// when it knows it, the input's length (so that no count or length read from the input reserves
/// memory for more than the input holds).
pub(super) struct Reader<R> {
    inner: R,
    pos: u64,
    len: Option<u64>,
}

impl<R: Read> Reader<R> {
    /// A reader of `inner`, which holds `len` bytes if known.
    pub(super) fn new(inner: R, len: Option<u64>) -> Reader<R> {
        Reader { inner, pos: 0, len }
    }

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

    /// The capacity to reserve for `n` items that take at least `min_bytes` each in the input:
    /// all of them where the input's length is known, after checking that what is left of it can
    /// hold them (the error comes before anything is allocated); a bounded number otherwise.
    fn capacity(&self, n: u64, min_bytes: u64, what: &'static str) -> Result<usize> {
        let truncated = || GgufError::Truncated { what, offset: self.pos };
        match self.len {
            Some(len) => {
                let left = len.saturating_sub(self.pos);
                match n.checked_mul(min_bytes) {
                    Some(need) if need <= left => usize::try_from(n).map_err(|_| truncated()),
                    _ => Err(truncated()),
                }
            }
            None => Ok(usize::try_from(n).unwrap_or(usize::MAX).min(MAX_PREALLOC)),
        }
    }

    fn string(&mut self, what: &'static str) -> Result<String> {
        let len = self.u64(what)?;
        let mut buf = Vec::with_capacity(self.capacity(len, 1, what)?);
        // `take` reads what is there, so a huge length in a short input allocates nothing large.
        let got = (&mut self.inner).take(len).read_to_end(&mut buf)?;
        self.pos += got as u64;
        if (got as u64) < len {
            return Err(GgufError::Truncated { what, offset: self.pos });
        }
        String::from_utf8(buf).map_err(|_| GgufError::InvalidUtf8(what))
    }

    /// `n` elements of `N` bytes each, decoded in chunks (so that the elements take their own
    /// size in memory, not twice it), and held in a vector of exactly their number.
    fn fixed<T, const N: usize>(
        &mut self,
        n: u64,
        what: &'static str,
        decode: impl Fn([u8; N]) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::with_capacity(self.capacity(n, N as u64, what)?);
        let per_chunk = CHUNK / N;
        let mut buf = vec![0u8; N * per_chunk.min(usize::try_from(n).unwrap_or(usize::MAX))];
        let mut left = n;
        while left > 0 {
            let items = per_chunk.min(usize::try_from(left).unwrap_or(usize::MAX));
            let bytes = &mut buf[..items * N];
            self.exact(bytes, what)?;
            for word in bytes.as_chunks::<N>().0 {
                out.push(decode(*word)?);
            }
            left -= items as u64;
        }
        // Only where the input's length was unknown can the vector have grown past its length.
        out.shrink_to_fit();
        Ok(out)
    }

    fn value(&mut self, ty: ValueType, depth: usize) -> Result<Value> {
        macro_rules! scalar {
            ($($variant:ident($ty:ty) = $id:literal, $what:literal, $as_slice:ident;)*) => {
                match ty {
                    $(ValueType::$variant => Value::$variant(<$ty>::from_le_bytes(self.bytes($what)?)),)*
                    ValueType::Bool => Value::Bool(bool_byte(self.bytes::<1>("a bool value")?)?),
                    ValueType::String => Value::String(self.string("a string value")?),
                    ValueType::Array => Value::Array(self.array(depth)?),
                }
            };
        }
        Ok(fixed_types!(scalar))
    }

    fn array(&mut self, depth: usize) -> Result<Array> {
        if depth >= MAX_ARRAY_DEPTH {
            return Err(GgufError::BadValue(format!(
                "arrays nested deeper than {MAX_ARRAY_DEPTH}"
            )));
        }
        let id = self.u32("an array's element type")?;
        let ty = ValueType::from_id(id).ok_or(GgufError::UnknownValueType(id))?;
        let n = self.u64("an array's length")?;
        macro_rules! elements {
            ($($variant:ident($ty:ty) = $id:literal, $what:literal, $as_slice:ident;)*) => {
                match ty {
                    $(ValueType::$variant => Array::$variant(self.fixed(n, $what, |b| Ok(<$ty>::from_le_bytes(b)))?),)*
                    ValueType::Bool => Array::Bool(self.fixed(n, "a bool value", bool_byte)?),
                    ValueType::String => {
                        let mut v = Vec::with_capacity(self.capacity(n, MIN_STRING_BYTES, "an array of strings")?);
                        for _ in 0..n {
                            v.push(self.string("a string in an array")?);
                        }
                        Array::String(v)
                    }
                    ValueType::Array => {
                        let mut v = Vec::with_capacity(self.capacity(n, MIN_ARRAY_BYTES, "an array of arrays")?);
                        for _ in 0..n {
                            v.push(self.array(depth + 1)?);
                        }
                        Array::Array(v)
                    }
                }
            };
        }
        Ok(fixed_types!(elements))
    }

    pub(super) fn header(&mut self) -> Result<GgufHeader> {
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

        let mut metadata = Metadata {
            entries: Vec::with_capacity(self.capacity(n_kv, MIN_KV_BYTES, "the metadata")?),
        };
        let mut keys = HashSet::with_capacity(metadata.entries.capacity());
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

        let capacity = self.capacity(n_tensors, MIN_TENSOR_INFO_BYTES, "the tensor infos")?;
        let mut tensors = Vec::with_capacity(capacity);
        let mut index = HashMap::with_capacity(capacity);
        for _ in 0..n_tensors {
            let info = self.tensor_info(alignment)?;
            if index.insert(info.name.clone(), tensors.len()).is_some() {
                return Err(GgufError::DuplicateTensor(info.name));
            }
            tensors.push(info);
        }
        check_placement(&tensors, alignment)?;
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

    /// The header, then the data section (the rest of the input), checking that every tensor's
    /// data lies inside it.
    pub(super) fn file(mut self) -> Result<GgufFile> {
        let header = self.header()?;
        // The padding before the data section may be missing when there is no data at all.
        let padding = header.data_offset as u64 - self.pos;
        let skipped = io::copy(&mut (&mut self.inner).take(padding), &mut io::sink())?;
        self.pos += skipped;
        let mut data = Vec::new();
        if skipped == padding {
            if let Some(len) = self.len {
                data.reserve_exact(usize::try_from(len.saturating_sub(self.pos)).unwrap_or(0));
            }
            self.inner.read_to_end(&mut data)?;
        }
        for info in &header.tensors {
            header.tensor_range(info, data.len())?;
        }
        Ok(GgufFile { header, data })
    }
}

fn bool_byte([b]: [u8; 1]) -> Result<bool> {
    match b {
        0 => Ok(false),
        1 => Ok(true),
        b => Err(GgufError::BadValue(format!("bool byte {b}"))),
    }
}

/// ggml's rule (`gguf.cpp` refuses a tensor whose offset is not the running size): tensor data
/// lie in file order, each tensor's where the one before ends, rounded up to the alignment. So
/// no two tensors share bytes and the data section holds nothing but tensors and their padding.
/// After a tensor of a type this crate does not know (nor its size), the next need only start
/// past it.
fn check_placement(tensors: &[TensorInfo], alignment: usize) -> Result<()> {
    let mut expected = ExpectedOffset::Exactly(0);
    for t in tensors {
        let placed = match expected {
            ExpectedOffset::Exactly(at) => t.offset == at,
            ExpectedOffset::AtLeast(at) => t.offset >= at,
        };
        if !placed {
            return Err(GgufError::MisplacedTensor {
                name: t.name.clone(),
                offset: t.offset,
                expected,
            });
        }
        let overflow = || bad_tensor(&t.name, "its data end past any file");
        expected = match t.nbytes() {
            Some(n) => ExpectedOffset::Exactly(
                n.checked_next_multiple_of(alignment)
                    .and_then(|padded| t.offset.checked_add(padded))
                    .ok_or_else(overflow)?,
            ),
            // An unknown type's data take at least a byte when it has elements, so its padded
            // size is at least the alignment.
            None => {
                let least = if t.elements() > 0 { alignment } else { 0 };
                ExpectedOffset::AtLeast(t.offset.checked_add(least).ok_or_else(overflow)?)
            }
        };
    }
    Ok(())
}
