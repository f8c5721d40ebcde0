//! Tensors in device memory: many tensors per buffer at aligned offsets, host↔device copies,
//! and the binding of a tensor (bound at an aligned offset, with the remainder passed to the
//! shader, since views may start anywhere).

use dawn::{Buffer, BufferDescriptor, BufferUsage, Device};

use crate::error::{BackendError, Result};
use crate::tensor::{HostTensor, Layout};

/// A tensor on the device: a layout over bytes of a buffer starting at `base`.
#[derive(Debug, Clone)]
pub struct DeviceTensor {
    pub layout: Layout,
    pub buffer: Buffer,
    /// Byte offset of the tensor's storage in `buffer` (the layout's own offset comes on top).
    pub base: u64,
    /// Bytes of storage the layout may address (from `base`).
    pub storage_bytes: u64,
}

/// How a shader sees a tensor: a binding range and the tensor's start inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding {
    pub offset: u64,
    pub size: u64,
    /// Bytes from the binding's start to element (0,0,0,0).
    pub start_byte: u64,
}

impl DeviceTensor {
    /// The same storage seen through another layout (a view, a permutation).
    pub fn view(&self, layout: Layout) -> Result<DeviceTensor> {
        layout.check_fits(self.storage_bytes as usize)?;
        Ok(DeviceTensor { layout, ..self.clone() })
    }

    /// The binding covering the tensor: it starts at the tensor's first byte rounded down to
    /// `alignment` and is rounded up to 4 bytes, capped at the buffer's end.
    pub fn binding(&self, alignment: u64, max_binding: u64) -> Result<Binding> {
        let first = self.base + self.layout.offset as u64;
        let offset = first / alignment * alignment;
        let start_byte = first - offset;
        let span = self.layout.span_bytes() as u64;
        let size = (start_byte + span)
            .next_multiple_of(4)
            .min(self.buffer.size() - offset)
            .max(4);
        if size > max_binding {
            return Err(BackendError::TooLarge {
                what: format!("a {} tensor of {:?} elements", self.layout.ty, self.layout.ne),
                bytes: size,
                limit: max_binding,
                limit_name: "maxStorageBufferBindingSize",
            });
        }
        Ok(Binding {
            offset,
            size,
            start_byte,
        })
    }
}

/// Places tensors in one buffer, each at an offset aligned for binding.
#[derive(Debug)]
pub struct Arena {
    alignment: u64,
    sizes: Vec<u64>,
}

impl Arena {
    pub fn new(alignment: u64) -> Self {
        Arena {
            alignment: alignment.max(4),
            sizes: Vec::new(),
        }
    }

    /// Reserves `bytes`; returns the offset the tensor will have.
    pub fn reserve(&mut self, bytes: u64) -> u64 {
        let offset = self.total();
        self.sizes.push(bytes.max(4).next_multiple_of(self.alignment));
        offset
    }

    /// Bytes of buffer needed so far.
    pub fn total(&self) -> u64 {
        self.sizes.iter().sum()
    }
}

/// Creates a storage buffer of `bytes`, failing cleanly over the device's limits.
pub fn create_storage(device: &Device, label: &str, bytes: u64) -> Result<Buffer> {
    let limits = device.limits();
    let size = bytes.max(4).next_multiple_of(4);
    if size > limits.max_buffer_size {
        return Err(BackendError::TooLarge {
            what: label.to_owned(),
            bytes: size,
            limit: limits.max_buffer_size,
            limit_name: "maxBufferSize",
        });
    }
    Ok(device.create_buffer(&BufferDescriptor {
        label: Some(label),
        size,
        usage: BufferUsage::STORAGE | BufferUsage::COPY_SRC | BufferUsage::COPY_DST,
    })?)
}

/// Copies host tensors into one new buffer; returns them as device tensors, in order.
pub fn upload(device: &Device, tensors: &[&HostTensor]) -> Result<Vec<DeviceTensor>> {
    let alignment = u64::from(device.limits().min_storage_buffer_offset_alignment);
    let mut arena = Arena::new(alignment);
    let bases: Vec<u64> = tensors.iter().map(|t| arena.reserve(t.data.len() as u64)).collect();
    let buffer = create_storage(device, "tensors", arena.total())?;
    let mut out = Vec::with_capacity(tensors.len());
    for (t, &base) in tensors.iter().zip(&bases) {
        t.layout.check_fits(t.data.len())?;
        // write_buffer wants whole 4-byte words.
        let mut bytes = t.data.clone();
        bytes.resize(bytes.len().next_multiple_of(4), 0);
        device.write_buffer(&buffer, base, &bytes)?;
        out.push(DeviceTensor {
            layout: t.layout,
            buffer: buffer.clone(),
            base,
            storage_bytes: t.data.len() as u64,
        });
    }
    Ok(out)
}

/// A new device tensor of `layout` whose every byte is `poison`, so that elements a kernel
/// fails to write stand out (0xFF bytes read as NaN in f32 and f16).
pub fn poisoned(device: &Device, layout: Layout, poison: u8) -> Result<DeviceTensor> {
    let bytes = layout.offset + layout.span_bytes();
    let data = vec![poison; bytes.next_multiple_of(4)];
    let buffer = create_storage(device, "output", data.len() as u64)?;
    device.write_buffer(&buffer, 0, &data)?;
    Ok(DeviceTensor {
        layout,
        buffer,
        base: 0,
        storage_bytes: bytes as u64,
    })
}

/// Reads a device tensor's storage back (all of it, from `base`).
pub fn download(device: &Device, tensor: &DeviceTensor) -> Result<HostTensor> {
    let start = tensor.base / 8 * 8;
    let skip = (tensor.base - start) as usize;
    let len = (skip as u64 + tensor.storage_bytes).next_multiple_of(4);
    let bytes: Vec<u8> = device.read_buffer(&tensor.buffer, start, len)?;
    Ok(HostTensor {
        layout: tensor.layout,
        data: bytes[skip..skip + tensor.storage_bytes as usize].to_vec(),
    })
}
