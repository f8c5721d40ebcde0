//! Scratch memory of one context: a storage buffer that ops use between two of their own
//! dispatches (b quantized for the integer mat-vec, flash attention's split partials), grown on
//! demand. Dispatches of one queue run in order and each op records its producer and consumer
//! back to back, so every op can reuse the same buffer; it belongs to the context that made
//! it and goes with it.

use dawn::{Buffer, Device};
use parking_lot::Mutex;

use crate::error::{BackendError, Result};
use crate::memory;

/// One growable scratch buffer per purpose (`label`), per context, within a budget.
#[derive(Debug, Default)]
pub struct Scratch {
    buffers: Mutex<Vec<(&'static str, Buffer)>>,
    /// Bytes all the buffers together may hold at most (`None`: each up to the largest binding).
    budget: Option<u64>,
}

impl Scratch {
    /// Scratch whose buffers together hold at most `budget` bytes (`None`: no budget beyond the
    /// device's binding limit per buffer).
    pub fn with_budget(budget: Option<u64>) -> Scratch {
        Scratch {
            buffers: Mutex::default(),
            budget,
        }
    }

    /// A buffer of at least `bytes` for `label`: the one held, or a new one of at least twice
    /// its size (capped at the largest binding and at what the budget leaves) that replaces it.
    /// A request the budget cannot hold is an error naming the budget.
    pub fn get(&self, device: &Device, label: &'static str, bytes: u64) -> Result<Buffer> {
        let mut buffers = self.buffers.lock();
        let held = buffers.iter().position(|(l, _)| *l == label);
        if let Some(i) = held
            && buffers[i].1.size() >= bytes
        {
            return Ok(buffers[i].1.clone());
        }
        // What the other labels' buffers leave of the budget.
        let others: u64 = buffers.iter().filter(|(l, _)| *l != label).map(|(_, b)| b.size()).sum();
        let left = self.budget.map(|b| b.saturating_sub(others));
        if let Some(left) = left
            && bytes > left
        {
            return Err(BackendError::TooLarge {
                what: format!("scratch for {label} ({others} bytes held for other purposes)"),
                bytes,
                limit: self.budget.unwrap_or(0),
                limit_name: "ContextOptions::scratch_budget",
            });
        }
        let max = device
            .limits()
            .max_storage_buffer_binding_size
            .min(left.unwrap_or(u64::MAX))
            .max(bytes);
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

    /// Bytes of the buffers held now.
    pub fn held_bytes(&self) -> u64 {
        self.buffers.lock().iter().map(|(_, b)| b.size()).sum()
    }

    /// Lets go of every buffer held. Work already recorded or submitted keeps what it binds
    /// alive (its bind groups hold the buffers) until it is done; later ops allocate anew.
    pub fn release(&self) {
        self.buffers.lock().clear();
    }
}
