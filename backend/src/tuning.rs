//! The planners' knobs, one set per context ([`crate::ContextOptions::tuning`]): MUL_MAT's
//! [`MulMatTuning`] and FLASH_ATTN_EXT's [`FlashAttnKnobs`]. Defaults are what measured best;
//! other values serve sweeps. Nothing here reads the environment: a program that wants
//! `GGML_DAWN_MUL_MAT` / `GGML_DAWN_FA` (as `backend-ops` does) reads them and calls
//! [`Tuning::parse`].

use crate::error::{BackendError, Result};

pub use crate::ops::flash_attn::Knobs as FlashAttnKnobs;
pub use crate::ops::mul_mat::Tuning as MulMatTuning;

/// The environment variable `backend-ops` reads MUL_MAT's knobs from (`name=value,…`).
pub const MUL_MAT_ENV: &str = "GGML_DAWN_MUL_MAT";
/// The environment variable `backend-ops` reads FLASH_ATTN_EXT's knobs from (`key=value,…`).
pub const FLASH_ATTN_ENV: &str = "GGML_DAWN_FA";

/// Both ops' knobs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Tuning {
    pub mul_mat: MulMatTuning,
    pub flash_attn: FlashAttnKnobs,
}

impl Tuning {
    /// The defaults with the overrides in each text (MUL_MAT's `name=value,…` as
    /// [`MulMatTuning::parse`] reads it, FLASH_ATTN_EXT's `key=value,…` as
    /// [`crate::ops::flash_attn::parse_knobs`] does); an empty text keeps the defaults. A value
    /// out of its knob's range is an error naming the knob (and the variable it came from).
    pub fn parse(mul_mat: &str, flash_attn: &str) -> Result<Tuning> {
        Ok(Tuning {
            mul_mat: MulMatTuning::parse(mul_mat).map_err(|message| BackendError::Config {
                name: MUL_MAT_ENV,
                message,
            })?,
            flash_attn: crate::ops::flash_attn::parse_knobs(flash_attn).map_err(|message| BackendError::Config {
                name: FLASH_ATTN_ENV,
                message,
            })?,
        })
    }

    /// Checks every knob against its range (knobs built in code, not parsed).
    pub fn validate(&self) -> Result<()> {
        self.mul_mat.validate().map_err(|message| BackendError::Config {
            name: MUL_MAT_ENV,
            message,
        })?;
        crate::ops::flash_attn::validate_knobs(&self.flash_attn).map_err(|message| BackendError::Config {
            name: FLASH_ATTN_ENV,
            message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_texts_parse_and_errors_name_their_variable() {
        let t = Tuning::parse("vec_rows=8", "path=tile,split=4").unwrap();
        assert_eq!(t.mul_mat.vec_rows, 8);
        assert_eq!(t.flash_attn.split, Some(4));
        assert_eq!(Tuning::parse("", "").unwrap(), Tuning::default());
        let e = Tuning::parse("vec_wg=100", "").unwrap_err().to_string();
        assert!(e.contains(MUL_MAT_ENV) && e.contains("vec_wg"), "{e}");
        let e = Tuning::parse("", "tile_kv=7").unwrap_err().to_string();
        assert!(e.contains(FLASH_ATTN_ENV) && e.contains("tile_kv"), "{e}");
        let built = Tuning {
            flash_attn: FlashAttnKnobs {
                tile_threads: Some(u32::MAX),
                ..FlashAttnKnobs::default()
            },
            ..Tuning::default()
        };
        assert!(built.validate().is_err());
        assert!(Tuning::default().validate().is_ok());
    }
}
