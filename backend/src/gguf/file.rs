//! A GGUF file in memory: the header (metadata and tensor infos) and the data section, and where
//! each tensor's bytes lie in it.

use std::collections::HashMap;
use std::io::{self, Read, Seek};
use std::path::Path;

use super::read::Reader;
use super::{GgufError, Metadata, Result};
use crate::ggml_type::GgmlType;
use crate::tensor::{HostTensor, Layout};

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
    pub(super) tensors: Vec<TensorInfo>,
    pub(super) index: HashMap<String, usize>,
    /// The alignment of the data section and of every tensor in it.
    pub alignment: usize,
    /// Byte offset of the data section in the file.
    pub data_offset: usize,
}

impl GgufHeader {
    /// Reads the header from the start of a GGUF file, leaving `reader` at the end of the header
    /// (before the padding that leads to the data section).
    pub fn read<R: Read>(reader: R) -> Result<GgufHeader> {
        Reader::new(reader, None).header()
    }

    /// As [`GgufHeader::read`], from the current position of a seekable reader, whose length
    /// bounds every count and length in the header before anything is allocated for it.
    pub fn read_seekable<R: Read + Seek>(mut reader: R) -> Result<GgufHeader> {
        let len = remaining_len(&mut reader)?;
        Reader::new(reader, Some(len)).header()
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

/// The bytes from `reader`'s position to its end (its position is kept).
fn remaining_len<R: Seek>(reader: &mut R) -> io::Result<u64> {
    let here = reader.stream_position()?;
    let end = reader.seek(io::SeekFrom::End(0))?;
    reader.seek(io::SeekFrom::Start(here))?;
    Ok(end.saturating_sub(here))
}

/// A whole GGUF file in memory: its header and its data section.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufFile {
    pub header: GgufHeader,
    pub(super) data: Vec<u8>,
}

impl GgufFile {
    /// Reads a whole file from `reader`, checking that every tensor's data lies inside it.
    pub fn read<R: Read>(reader: R) -> Result<GgufFile> {
        Reader::new(reader, None).file()
    }

    /// As [`GgufFile::read`], from the current position of a seekable reader, whose length bounds
    /// every count and length in the file before anything is allocated for it.
    pub fn read_seekable<R: Read + Seek>(mut reader: R) -> Result<GgufFile> {
        let len = remaining_len(&mut reader)?;
        Reader::new(reader, Some(len)).file()
    }

    /// Reads a file from memory.
    pub fn from_bytes(bytes: &[u8]) -> Result<GgufFile> {
        Reader::new(bytes, Some(bytes.len() as u64)).file()
    }

    /// Reads the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let file = crate::input_file::open_regular(path.as_ref()).map_err(io::Error::other)?;
        GgufFile::read_seekable(io::BufReader::new(file))
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
