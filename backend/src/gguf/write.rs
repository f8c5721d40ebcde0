//! Writing: [`GgufWriter`] lays a file out as ggml's own writer does.

use std::collections::HashSet;
use std::io::{self, Write};

use super::{
    ALIGNMENT_KEY, Array, GgufError, GgufFile, MAGIC, Metadata, Result, TensorInfo, VERSION, Value, bad_tensor,
};
use crate::ggml_type::GgmlType;
use crate::tensor::HostTensor;

/// The largest alignment the writer pads to (ggml's files use 32).
pub const MAX_WRITE_ALIGNMENT: usize = 1 << 16;

fn write_string(w: &mut impl Write, s: &str) -> io::Result<()> {
    w.write_all(&(s.len() as u64).to_le_bytes())?;
    w.write_all(s.as_bytes())
}

macro_rules! define_writes {
    ($($variant:ident($ty:ty) = $id:literal, $what:literal, $as_slice:ident;)*) => {
        /// A value's bytes (its type id is written before it by the caller).
        fn write_value(w: &mut impl Write, value: &Value) -> io::Result<()> {
            match value {
                $(Value::$variant(v) => w.write_all(&v.to_le_bytes()),)*
                Value::Bool(b) => w.write_all(&[u8::from(*b)]),
                Value::String(s) => write_string(w, s),
                Value::Array(a) => write_array(w, a),
            }
        }

        /// An array: element type, length, elements.
        fn write_array(w: &mut impl Write, array: &Array) -> io::Result<()> {
            w.write_all(&array.element_type().id().to_le_bytes())?;
            w.write_all(&(array.len() as u64).to_le_bytes())?;
            match array {
                $(Array::$variant(v) => v.iter().try_for_each(|x| w.write_all(&x.to_le_bytes())),)*
                Array::Bool(v) => v.iter().try_for_each(|&b| w.write_all(&[u8::from(b)])),
                Array::String(v) => v.iter().try_for_each(|s| write_string(w, s)),
                Array::Array(v) => v.iter().try_for_each(|a| write_array(w, a)),
            }
        }
    };
}

fixed_types!(define_writes);

/// Builds a GGUF version 3 file: metadata, then tensor infos, then the tensor data, each tensor
/// padded to the alignment (`general.alignment`, 32 when unset), as ggml's own writer lays it out.
#[derive(Debug, Clone, Default)]
pub struct GgufWriter {
    pub(super) metadata: Metadata,
    pub(super) tensors: Vec<(TensorInfo, Vec<u8>)>,
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

    /// Sets `general.alignment` (a power of two, at most [`MAX_WRITE_ALIGNMENT`]).
    pub fn set_alignment(&mut self, alignment: u32) -> Result<&mut GgufWriter> {
        if !alignment.is_power_of_two() || alignment as usize > MAX_WRITE_ALIGNMENT {
            return Err(GgufError::BadAlignment(format!(
                "{alignment}: a power of two up to {MAX_WRITE_ALIGNMENT}"
            )));
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
        // A file may declare any power of two; writing one back pads every tensor to it, so a
        // 2 GiB alignment read from a few bytes would write gigabytes of zeros.
        if alignment > MAX_WRITE_ALIGNMENT {
            return Err(GgufError::BadAlignment(format!(
                "{alignment}: the writer pads to at most {MAX_WRITE_ALIGNMENT}"
            )));
        }
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
