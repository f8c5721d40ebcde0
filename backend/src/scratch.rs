//! Scratch memory of one context: a storage buffer that ops use between two of their own
//! dispatches (b quantized for the integer mat-vec, flash attention's split partials), grown on
//! demand. Dispatches of one queue run in order and each op records its producer and consumer
//! back to back, so every op can reuse the same buffer; it belongs to the context that made
//! it and goes with it.

use dawn::{Buffer, Device};
use parking_lot::Mutex;

use crate::error::Result;
use crate::memory;

/// One growable scratch buffer per purpose (`label`), per context.
#[derive(Debug, Default)]
pub struct Scratch {
    buffers: Mutex<Vec<(&'static str, Buffer)>>,
}

impl Scratch {
    /// A buffer of at least `bytes` for `label`: the one held, or a new one of at least twice
    /// its size (capped at the largest binding) that replaces it.
    pub fn get(&self, device: &Device, label: &'static str, bytes: u64) -> Result<Buffer> {
        let mut buffers = self.buffers.lock();
        let held = buffers.iter().position(|(l, _)| *l == label);
        if let Some(i) = held
            && buffers[i].1.size() >= bytes
        {
            return Ok(buffers[i].1.clone());
        }
        let max = device.limits().max_storage_buffer_binding_size.max(bytes);
        let size = held
            .map_or(bytes, |i| bytes.max(buffers[i].1.size().saturating_mul(2)))
            .checked_next_multiple_of(256)
            .unwrap_or(u64::MAX)
            // Never below `bytes`: `max` is at least that (the growth is capped, not the request).
            .min(max);
        let buffer = memory::create_storage(device, label, size)?;
        match held {
            Some(i) => buffers[i].1 = buffer.clone(),
            None => buffers.push((label, buffer.clone())),
        }
        Ok(buffer)
    }
}
