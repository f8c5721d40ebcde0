//! Tensors in device memory: many tensors per buffer at aligned offsets, host↔device copies,
//! and the binding of a tensor (bound at an aligned offset, with the remainder passed to the
//! shader, since views may start anywhere).

use dawn::{Buffer, BufferDescriptor, BufferUsage, Device};

use crate::error::{BackendError, Result};
use crate::tensor::{HostTensor, Layout};

/// A tensor on the device: a layout over bytes of a buffer starting at `base`.
///
/// Its fields are private: [`DeviceTensor::new`] and [`DeviceTensor::view`] check that the
/// storage lies inside the buffer and the layout inside the storage, so every tensor that
/// reaches a kernel addresses only bytes of its own buffer (Dawn's validation and robustness
/// are off: nothing else would stop it). Code outside the crate cannot change them:
///
/// ```compile_fail
/// fn widen(t: &mut ggml_dawn::DeviceTensor) {
///     t.storage_bytes = u64::MAX;
/// }
/// ```
///
/// ```compile_fail
/// fn forge(t: &ggml_dawn::DeviceTensor, layout: ggml_dawn::Layout) -> ggml_dawn::DeviceTensor {
///     ggml_dawn::DeviceTensor { layout, ..t.clone() }
/// }
/// ```
#[derive(Debug, Clone)]
pub struct DeviceTensor {
    layout: Layout,
    buffer: Buffer,
    /// Byte offset of the tensor's storage in `buffer` (the layout's own offset comes on top).
    base: u64,
    /// Bytes of storage the layout may address (from `base`).
    storage_bytes: u64,
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
    /// A tensor of `layout` over `storage_bytes` bytes of `buffer` from `base`; an error unless
    /// those bytes lie inside the buffer and the layout (offset, extents, strides) inside them.
    pub fn new(layout: Layout, buffer: Buffer, base: u64, storage_bytes: u64) -> Result<DeviceTensor> {
        if base.checked_add(storage_bytes).is_none_or(|end| end > buffer.size()) {
            return Err(BackendError::OutOfBounds(format!(
                "storage of {storage_bytes} bytes at {base} does not fit a buffer of {} bytes",
                buffer.size()
            )));
        }
        let available = usize::try_from(storage_bytes).map_err(|_| {
            BackendError::InvalidOperands(format!("storage of {storage_bytes} bytes is not addressable"))
        })?;
        layout.check_fits(available)?;
        Ok(DeviceTensor {
            layout,
            buffer,
            base,
            storage_bytes,
        })
    }

    /// The tensor's layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The buffer holding the tensor (not public: whoever holds a buffer of the backend's
    /// device could destroy it under recorded work, which nothing checks without validation).
    pub(crate) fn buffer(&self) -> &Buffer {
        &self.buffer
    }

    /// The buffer holding the tensor.
    ///
    /// # Safety
    ///
    /// The buffer may belong to a device without Dawn's validation (see
    /// [`GpuContext::device`](crate::GpuContext::device)): the caller must not destroy it while
    /// work that uses it is recorded or in flight, nor use it in ways that device's toggles leave
    /// unchecked.
    pub unsafe fn raw_buffer(&self) -> &Buffer {
        &self.buffer
    }

    /// Byte offset of the tensor's storage in its buffer.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Bytes of storage the layout may address, from [`DeviceTensor::base`].
    pub fn storage_bytes(&self) -> u64 {
        self.storage_bytes
    }

    /// The same storage seen through another layout (a view, a permutation); checked like
    /// [`DeviceTensor::new`]. No bytes are copied.
    pub fn view(&self, layout: Layout) -> Result<DeviceTensor> {
        DeviceTensor::new(layout, self.buffer.clone(), self.base, self.storage_bytes)
    }

    /// The tensor with its dimensions reordered as ggml's `ggml_permute(t, axes…)` does: source
    /// dimension `i` becomes dimension `axes[i]`. A view: no bytes are copied.
    pub fn permute(&self, axes: [usize; 4]) -> Result<DeviceTensor> {
        self.view(self.layout.permute(axes)?)
    }

    /// A contiguous tensor seen with other extents of the same element count (ggml's
    /// `ggml_reshape`). A view: no bytes are copied.
    pub fn reshape(&self, ne: [usize; 4]) -> Result<DeviceTensor> {
        self.view(self.layout.reshape(ne)?)
    }

    /// Elements `start..start + len` of dimension `dim` (ggml's `ggml_view` along one
    /// dimension; whole blocks along dimension 0 of a quantized type). A view: no bytes are
    /// copied.
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<DeviceTensor> {
        self.view(self.layout.narrow(dim, start, len)?)
    }

    /// The bytes of its buffer the tensor's elements span: from its first element's byte to
    /// past its last (a strided view's gaps included).
    pub fn byte_span(&self) -> Result<std::ops::Range<u64>> {
        let first = self.base.checked_add(self.layout.offset as u64);
        let span = self.layout.span_bytes()? as u64;
        let end = first.and_then(|f| f.checked_add(span));
        match (first, end) {
            (Some(first), Some(end)) => Ok(first..end),
            _ => Err(BackendError::InvalidOperands(format!(
                "the bytes of {:?} at {} overflow",
                self.layout, self.base
            ))),
        }
    }

    /// Whether `other` is this tensor: the same bytes of the same buffer seen through the same
    /// layout (ggml's in-place form of an op, dst = src).
    pub fn is_same_view(&self, other: &DeviceTensor) -> bool {
        self.buffer.as_raw() == other.buffer.as_raw() && self.base == other.base && self.layout == other.layout
    }

    /// Whether the two tensors' spans ([`DeviceTensor::byte_span`]) share bytes of one buffer.
    /// Whether `other` views the same storage (the same bytes of the same buffer) as this
    /// tensor, as two views of one tensor do.
    pub fn same_storage(&self, other: &DeviceTensor) -> bool {
        self.buffer.as_raw() == other.buffer.as_raw()
            && self.base == other.base
            && self.storage_bytes == other.storage_bytes
    }

    pub fn overlaps(&self, other: &DeviceTensor) -> Result<bool> {
        if self.buffer.as_raw() != other.buffer.as_raw() {
            return Ok(false);
        }
        let (a, b) = (self.byte_span()?, other.byte_span()?);
        Ok(!a.is_empty() && !b.is_empty() && a.start < b.end && b.start < a.end)
    }

    /// The binding covering the tensor: it starts at the tensor's first byte rounded down to
    /// `alignment` and is rounded up to 4 bytes. A binding that would pass the buffer's end or
    /// `max_binding` is an error, never cut short.
    pub fn binding(&self, alignment: u64, max_binding: u64) -> Result<Binding> {
        // Re-checked here: the binding is what the kernel may touch.
        let available = usize::try_from(self.storage_bytes)
            .map_err(|_| BackendError::InvalidOperands("storage not addressable".into()))?;
        self.layout.check_fits(available)?;
        let alignment = alignment.max(4);
        let overflow = || BackendError::InvalidOperands(format!("a binding of {:?} overflows", self.layout));
        let first = self.base.checked_add(self.layout.offset as u64).ok_or_else(overflow)?;
        let offset = first / alignment * alignment;
        let start_byte = first - offset;
        let span = self.layout.span_bytes()? as u64;
        let size = start_byte
            .checked_add(span)
            .and_then(|s| s.checked_next_multiple_of(4))
            .ok_or_else(overflow)?
            .max(4);
        if size > max_binding {
            return Err(BackendError::TooLarge {
                what: format!("a {} tensor of {:?} elements", self.layout.ty, self.layout.ne),
                bytes: size,
                limit: max_binding,
                limit_name: "maxStorageBufferBindingSize",
            });
        }
        if offset.checked_add(size).is_none_or(|end| end > self.buffer.size()) {
            return Err(BackendError::OutOfBounds(format!(
                "a binding of {size} bytes at {offset} passes the end of its {}-byte buffer",
                self.buffer.size()
            )));
        }
        Ok(Binding {
            offset,
            size,
            start_byte,
        })
    }

    /// [`DeviceTensor::binding`] stretched to the end of the tensor's storage, where that stays
    /// within `max_binding` and the buffer: a view that grows step by step (a KV cache's first
    /// cells) keeps one binding, so the stream's cached bind group serves every step. The kernel
    /// still reads only the view's bytes; the binding merely covers storage the tensor owns.
    pub fn binding_to_storage_end(&self, alignment: u64, max_binding: u64) -> Result<Binding> {
        let b = self.binding(alignment, max_binding)?;
        let Some(end) = self.base.checked_add(self.storage_bytes) else {
            return Ok(b);
        };
        let size = (end - b.offset.min(end)) / 4 * 4;
        if size > b.size && size <= max_binding && b.offset + size <= self.buffer.size() {
            Ok(Binding { size, ..b })
        } else {
            Ok(b)
        }
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
        self.sizes.push(
            bytes
                .max(4)
                .checked_next_multiple_of(self.alignment)
                .unwrap_or(u64::MAX),
        );
        offset
    }

    /// Bytes of buffer needed so far (`u64::MAX` when that overflows: no device has it).
    pub fn total(&self) -> u64 {
        self.sizes
            .iter()
            .try_fold(0u64, |acc, &s| acc.checked_add(s))
            .unwrap_or(u64::MAX)
    }
}

/// Creates a storage buffer of `bytes`, failing cleanly over the device's limits.
pub fn create_storage(device: &Device, label: &str, bytes: u64) -> Result<Buffer> {
    let limits = device.limits();
    let size = bytes.max(4).checked_next_multiple_of(4).unwrap_or(u64::MAX);
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
    for t in tensors {
        t.layout.check_fits(t.data.len())?;
    }
    let alignment = u64::from(device.limits().min_storage_buffer_offset_alignment);
    let mut arena = Arena::new(alignment);
    let bases: Vec<u64> = tensors.iter().map(|t| arena.reserve(t.data.len() as u64)).collect();
    let buffer = create_storage(device, "tensors", arena.total())?;
    let mut out = Vec::with_capacity(tensors.len());
    for (t, &base) in tensors.iter().zip(&bases) {
        // write_buffer wants whole 4-byte words.
        let mut bytes = t.data.clone();
        bytes.resize(bytes.len().next_multiple_of(4), 0);
        device.write_buffer(&buffer, base, &bytes)?;
        out.push(DeviceTensor::new(t.layout, buffer.clone(), base, t.data.len() as u64)?);
    }
    Ok(out)
}

/// A new device tensor of `layout` whose every byte is `poison`, so that elements a kernel
/// fails to write stand out (0xFF bytes read as NaN in f32 and f16).
pub fn poisoned(device: &Device, layout: Layout, poison: u8) -> Result<DeviceTensor> {
    let bytes = layout.end_bytes()?;
    let padded = bytes
        .checked_next_multiple_of(4)
        .ok_or(crate::tensor::LayoutError::Overflow {
            ty: layout.ty,
            ne: layout.ne,
            nb: layout.nb,
            offset: layout.offset,
        })?;
    // The device's limit is checked before any host memory is taken.
    let buffer = create_storage(device, "output", padded as u64)?;
    let data = vec![poison; padded];
    device.write_buffer(&buffer, 0, &data)?;
    DeviceTensor::new(layout, buffer, 0, bytes as u64)
}

/// How long [`download`] waits for the device at most.
pub const DOWNLOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Reads a device tensor's storage back (all of it, from `base`), waiting at most
/// [`DOWNLOAD_TIMEOUT`].
pub fn download(device: &Device, tensor: &DeviceTensor) -> Result<HostTensor> {
    download_timeout(device, tensor, DOWNLOAD_TIMEOUT)
}

/// [`download`], waiting at most `timeout` for the device.
pub fn download_timeout(device: &Device, tensor: &DeviceTensor, timeout: std::time::Duration) -> Result<HostTensor> {
    download_staged(device, tensor, &mut None, timeout)
}

/// [`download_timeout`] through `staging`, a read-back buffer kept between calls
/// ([`Device::read_buffer_staged`]): a step that reads its logits back creates no buffer.
pub fn download_staged(
    device: &Device,
    tensor: &DeviceTensor,
    staging: &mut Option<dawn::Buffer>,
    timeout: std::time::Duration,
) -> Result<HostTensor> {
    // Whole words from an 8-byte boundary, as mapping wants; the tensor's bytes cut out after.
    let start = tensor.base / 8 * 8;
    let skip = (tensor.base - start) as usize;
    let len = (skip as u64 + tensor.storage_bytes).next_multiple_of(4);
    let mut bytes: Vec<u8> = device.read_buffer_staged(&tensor.buffer, start, len, staging, timeout)?;
    bytes.truncate(skip + tensor.storage_bytes as usize);
    bytes.drain(..skip);
    Ok(HostTensor {
        layout: tensor.layout,
        data: bytes,
    })
}

/// Fails, naming `op` and the operand, when `dst` shares bytes with one of `inputs` (by their
/// spans, [`DeviceTensor::byte_span`]): a kernel that writes what it reads gives garbage, and
/// without Dawn's validation nothing else refuses it.
pub fn check_output_disjoint(op: &str, dst: &DeviceTensor, inputs: &[(&str, &DeviceTensor)]) -> Result<()> {
    for (name, input) in inputs {
        if dst.overlaps(input)? {
            return Err(BackendError::Overlap(format!(
                "{op}: dst (bytes {:?}) overlaps {name} (bytes {:?}) in the same buffer; write into a \
                 tensor of its own",
                dst.byte_span()?,
                input.byte_span()?
            )));
        }
    }
    Ok(())
}
