//! Arithmetic the ops' planners and encoders share.

use crate::error::{BackendError, Result};

/// The greatest common divisor.
pub fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The least common multiple (the other one where one is 0).
pub fn lcm(a: u32, b: u32) -> u32 {
    if a == 0 || b == 0 { a.max(b) } else { a / gcd(a, b) * b }
}

/// A size or stride as a 32-bit word of a kernel's parameters, or an error naming the op.
pub fn word(op: &str, v: impl TryInto<u32> + Copy + std::fmt::Display) -> Result<u32> {
    v.try_into()
        .map_err(|_| BackendError::Unsupported(format!("{op}: a size or stride of {v} (32-bit indexing)")))
}

/// [`word`] of a named quantity (`what`: "rows", "a row's length"), for messages that say which.
pub fn word_of(op: &str, what: &str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| BackendError::Unsupported(format!("{op}: {what} of {v} passes 32-bit indexing")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcd_lcm_and_words() {
        assert_eq!((gcd(12, 18), lcm(4, 6), lcm(16, 8), lcm(0, 8)), (6, 12, 16, 8));
        assert_eq!(word("MUL_MAT", 7u64).unwrap(), 7);
        let e = word("MUL_MAT", 1u64 << 32).unwrap_err().to_string();
        assert!(e.contains("MUL_MAT") && e.contains("4294967296"), "{e}");
    }
}
