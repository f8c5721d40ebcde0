//! Weights from GGUF files straight into device tensors: each tensor's bytes go from the file
//! (or a file in memory) to a device buffer as they are, in their own type, one tensor's worth
//! of host memory at a time. Tensors share buffers up to the device's buffer size, each at a
//! binding-aligned offset.

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use crate::context::GpuContext;
use crate::error::{BackendError, Result};
use crate::gguf::{GgufFile, GgufHeader, Metadata, TensorInfo};
use crate::memory::{self, Arena, DeviceTensor};
use crate::tensor::Layout;

/// The tensors of a GGUF file on the device, by name, with the file's metadata.
#[derive(Debug, Clone)]
pub struct Weights {
    metadata: Metadata,
    tensors: BTreeMap<String, DeviceTensor>,
}

impl Weights {
    /// The file's metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Tensor `name`, if the file has it.
    pub fn get(&self, name: &str) -> Option<&DeviceTensor> {
        self.tensors.get(name)
    }

    /// Tensor `name`, or an error naming it.
    pub fn tensor(&self, name: &str) -> Result<&DeviceTensor> {
        self.get(name)
            .ok_or_else(|| BackendError::InvalidOperands(format!("the weights have no tensor `{name}`")))
    }

    /// The tensors' names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    /// How many tensors there are.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
}

/// Where each tensor goes, (buffer index, offset in it), and each buffer's size.
type Places = (Vec<(usize, u64)>, Vec<u64>);

/// Places the tensors, in order, in as few buffers as the device's buffer size allows.
fn place(ctx: &GpuContext, infos: &[(String, Layout, u64)]) -> Result<Places> {
    let limits = &ctx.capabilities().limits;
    let align = u64::from(limits.min_storage_buffer_offset_alignment);
    let mut places = Vec::with_capacity(infos.len());
    let mut sizes = Vec::new();
    let mut arena = Arena::new(align);
    for (name, _, bytes) in infos {
        let over = |limit: u64, limit_name: &'static str| BackendError::TooLarge {
            what: format!("GGUF tensor `{name}`"),
            bytes: *bytes,
            limit,
            limit_name,
        };
        if *bytes > limits.max_storage_buffer_binding_size {
            return Err(over(
                limits.max_storage_buffer_binding_size,
                "maxStorageBufferBindingSize",
            ));
        }
        if *bytes > limits.max_buffer_size {
            return Err(over(limits.max_buffer_size, "maxBufferSize"));
        }
        let mut offset = arena.reserve(*bytes);
        if arena.total() > limits.max_buffer_size {
            sizes.push(offset);
            arena = Arena::new(align);
            offset = arena.reserve(*bytes);
        }
        places.push((sizes.len(), offset));
    }
    sizes.push(arena.total());
    Ok((places, sizes))
}

/// The layout and byte count of each tensor; an error for a type this crate does not know.
fn layouts(infos: &[TensorInfo]) -> Result<Vec<(String, Layout, u64)>> {
    infos
        .iter()
        .map(|info| {
            let layout = info.layout()?;
            Ok((info.name.clone(), layout, layout.end_bytes()? as u64))
        })
        .collect()
}

/// Uploads tensors whose bytes `read(i, buf)` fills, tensor by tensor.
fn upload(
    ctx: &GpuContext,
    metadata: Metadata,
    infos: Vec<(String, Layout, u64)>,
    mut read: impl FnMut(usize, &mut Vec<u8>) -> Result<()>,
) -> Result<Weights> {
    let (places, sizes) = place(ctx, &infos)?;
    let buffers = sizes
        .iter()
        .map(|&size| memory::create_storage(&ctx.device, "GGUF weights", size))
        .collect::<Result<Vec<_>>>()?;
    let mut tensors = BTreeMap::new();
    let mut bytes = Vec::new();
    for (i, ((name, layout, len), (buffer, offset))) in infos.into_iter().zip(places).enumerate() {
        read(i, &mut bytes)?;
        // Whole 4-byte words for the copy; the padding lies inside the tensor's reservation.
        bytes.resize(bytes.len().next_multiple_of(4), 0);
        ctx.device.write_buffer(&buffers[buffer], offset, &bytes)?;
        let tensor = DeviceTensor::new(layout, buffers[buffer].clone(), offset, len)?;
        tensors.insert(name, tensor);
    }
    Ok(Weights { metadata, tensors })
}

impl GpuContext {
    /// Reads the GGUF file at `path` and uploads its tensors, reading each tensor's bytes from
    /// the file into its device buffer in turn (the whole file is never in memory). A tensor
    /// whose bytes pass the end of the file is an error before anything is allocated.
    pub fn load_gguf(&self, path: impl AsRef<Path>) -> Result<Weights> {
        let path = path.as_ref();
        let gguf_error = |e: crate::gguf::GgufError| BackendError::Gguf(format!("{}: {e}", path.display()));
        let io_error = |e: std::io::Error| BackendError::Gguf(format!("{}: {e}", path.display()));
        // A regular file only: a FIFO's `open` would wait for a writer forever.
        let mut file =
            BufReader::new(crate::input_file::open_regular(path).map_err(|e| BackendError::Gguf(e.to_string()))?);
        // The file's length bounds every count and length in the header before it is allocated.
        let header = GgufHeader::read_seekable(&mut file).map_err(gguf_error)?;
        let infos = layouts(header.tensors()).map_err(|e| BackendError::Gguf(format!("{}: {e}", path.display())))?;
        if header.data_offset as u64 > u64::MAX / 2 {
            return Err(BackendError::Gguf(format!(
                "{}: a data section past any file",
                path.display()
            )));
        }
        let starts: Vec<u64> = header
            .tensors()
            .iter()
            .map(|t| (header.data_offset as u64).saturating_add(t.offset as u64))
            .collect();
        let lens: Vec<u64> = infos.iter().map(|(_, _, len)| *len).collect();
        // Judged from the header, before any device memory is taken: the header reader has
        // refused tensors that share bytes or lie out of order (each tensor's data start where
        // the one before ends, as in ggml), and here every tensor must lie inside the file. So
        // what the upload allocates is the file's data, plus at most one binding alignment per
        // tensor (each of which takes at least 24 bytes of header).
        let file_len = file.get_ref().metadata().map_err(io_error)?.len();
        for ((name, _, _), (&start, &len)) in infos.iter().zip(starts.iter().zip(&lens)) {
            if start.checked_add(len).is_none_or(|end| end > file_len) {
                return Err(BackendError::Gguf(format!(
                    "{}: tensor `{name}` is cut short: its {len} bytes at {start} pass the end of the \
                     {file_len}-byte file",
                    path.display()
                )));
            }
        }
        upload(self, header.metadata.clone(), infos, |i, bytes| {
            file.seek(SeekFrom::Start(starts[i])).map_err(io_error)?;
            bytes.clear();
            let read = (&mut file).take(lens[i]).read_to_end(bytes).map_err(io_error)?;
            if read as u64 != lens[i] {
                return Err(BackendError::Gguf(format!(
                    "{}: tensor {i} is cut short ({read} of {} bytes)",
                    path.display(),
                    lens[i]
                )));
            }
            Ok(())
        })
    }

    /// Uploads the tensors of a GGUF file read into memory (whose reader has checked, as for
    /// [`GpuContext::load_gguf`], that the tensors lie one after another inside it).
    pub fn upload_gguf(&self, file: &GgufFile) -> Result<Weights> {
        let infos = layouts(file.tensors())?;
        let names: Vec<String> = infos.iter().map(|(name, _, _)| name.clone()).collect();
        upload(self, file.metadata().clone(), infos, |i, bytes| {
            let data = file.tensor_data(&names[i])?;
            bytes.clear();
            bytes.extend_from_slice(data);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::context::{ContextOptions, GpuContext};

    /// A file of two 8-element f32 tensors, `a` then `b`, with `b`'s data at `b_offset`.
    fn two_tensors(b_offset: u64) -> Vec<u8> {
        let mut bytes = b"GGUF".to_vec();
        for v in [
            3u32.to_le_bytes().to_vec(),
            2u64.to_le_bytes().to_vec(),
            0u64.to_le_bytes().to_vec(),
        ] {
            bytes.extend(v);
        }
        for (name, offset) in [("a", 0u64), ("b", b_offset)] {
            bytes.extend(1u64.to_le_bytes());
            bytes.extend(name.as_bytes());
            bytes.extend(1u32.to_le_bytes());
            bytes.extend(8u64.to_le_bytes());
            bytes.extend(0u32.to_le_bytes());
            bytes.extend(offset.to_le_bytes());
        }
        bytes.resize(bytes.len().next_multiple_of(32), 0);
        bytes.extend((0..16).flat_map(|i| (i as f32).to_le_bytes()));
        bytes
    }

    #[test]
    fn tensors_sharing_data_are_refused() {
        let ctx = GpuContext::new(ContextOptions::default()).unwrap();
        let path = std::env::temp_dir().join(format!("weights-overlap-{}.gguf", std::process::id()));
        std::fs::write(&path, two_tensors(0)).unwrap();
        let shared = ctx.load_gguf(&path);
        std::fs::write(&path, two_tensors(32)).unwrap();
        let valid = ctx.load_gguf(&path);
        std::fs::remove_file(&path).unwrap();
        let err = shared.unwrap_err().to_string();
        assert!(
            err.contains("weights-overlap") && err.contains("tensor `b` has data offset 0, expected 32"),
            "{err}"
        );
        let weights = valid.unwrap();
        let b = ctx.read_f32(weights.tensor("b").unwrap()).unwrap();
        assert_eq!(b, (8..16).map(|i| i as f32).collect::<Vec<_>>());
        // In memory, the same file is refused when it is parsed.
        assert!(crate::gguf::parse(&two_tensors(0)).is_err());
        let file = crate::gguf::parse(&two_tensors(32)).unwrap();
        assert_eq!(ctx.upload_gguf(&file).unwrap().len(), 2);
    }
}
