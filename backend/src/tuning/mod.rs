//! The planners' tuning: for each op a struct of knobs declared once with [`knobs!`](crate::knobs)
//! ([`knob`]), whose values come from the device's profile ([`profiles`], the measured defaults
//! per [`DeviceClass`](crate::facts::DeviceClass)) with a context's [`Overrides`] on top.
//! Nothing here reads the environment: a program that wants `GGML_DAWN_MUL_MAT` /
//! `GGML_DAWN_FA` (as `backend-ops` does) reads them and calls [`Overrides::parse`].

pub mod knob;
pub mod profiles;
pub mod values;

use crate::error::{BackendError, Result};
use crate::facts::DeviceFacts;

pub use crate::ops::flash_attn::tuning::FlashAttnTuning;
pub use crate::ops::mul_mat::tuning::MulMatTuning;

/// The environment variable programs read MUL_MAT's tuning overrides from (`name=value,…`;
/// [`Overrides::from_env`]).
pub const MUL_MAT_ENV: &str = "GGML_DAWN_MUL_MAT";
/// The environment variable programs read FLASH_ATTN_EXT's tuning overrides from.
pub const FLASH_ATTN_ENV: &str = "GGML_DAWN_FA";

/// What a MUL_MAT knob's error names (the library reads no environment: a program passes the
/// overrides' text, from wherever it takes it).
pub const MUL_MAT_SETTING: &str = "MUL_MAT tuning";
/// What a FLASH_ATTN_EXT knob's error names.
pub const FLASH_ATTN_SETTING: &str = "FLASH_ATTN_EXT tuning";

/// Both ops' tuning for one device: its profile with any overrides applied.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuning {
    pub mul_mat: MulMatTuning,
    pub flash_attn: FlashAttnTuning,
}

impl Tuning {
    /// The measured defaults for `facts`' class of device.
    pub fn for_device(facts: &DeviceFacts) -> Tuning {
        Tuning {
            mul_mat: profiles::mul_mat(facts.class),
            flash_attn: profiles::flash_attn(facts.class),
        }
    }

    /// The defaults for `facts`' class with `overrides` on top.
    pub fn with_overrides(facts: &DeviceFacts, overrides: &Overrides) -> Result<Tuning> {
        let mut t = Tuning::for_device(facts);
        overrides.apply(&mut t)?;
        Ok(t)
    }

    /// Checks every knob against its range (values built in code, not parsed).
    pub fn validate(&self) -> Result<()> {
        self.mul_mat.validate().map_err(|message| BackendError::Config {
            name: MUL_MAT_SETTING,
            message,
        })?;
        self.flash_attn.validate().map_err(|message| BackendError::Config {
            name: FLASH_ATTN_SETTING,
            message,
        })
    }
}

/// Changes to the profile's knobs, as text (`name=value,…`, one text per op), checked when
/// parsed and applied when a context is made for a device ([`crate::ContextOptions::tuning`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    mul_mat: String,
    flash_attn: String,
}

impl Overrides {
    /// No overrides: the profile as it is.
    pub fn none() -> Overrides {
        Overrides::default()
    }

    /// The overrides in the environment variables [`MUL_MAT_ENV`] and [`FLASH_ATTN_ENV`]
    /// (unset: none), for programs that take their tuning from there (`backend-ops`,
    /// `dawn-llm`); an error names the variable whose text is wrong.
    pub fn from_env() -> std::result::Result<Overrides, String> {
        let var = |name: &str| match std::env::var(name) {
            Ok(text) => Ok(text),
            Err(std::env::VarError::NotPresent) => Ok(String::new()),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!("{name}: the value is not UTF-8")),
        };
        let (mul_mat, flash_attn) = (var(MUL_MAT_ENV)?, var(FLASH_ATTN_ENV)?);
        // Each text checked alone first, so that the error names the variable it came from.
        Overrides::parse(&mul_mat, "").map_err(|e| format!("{MUL_MAT_ENV}: {e}"))?;
        Overrides::parse("", &flash_attn).map_err(|e| format!("{FLASH_ATTN_ENV}: {e}"))?;
        Overrides::parse(&mul_mat, &flash_attn).map_err(|e| e.to_string())
    }

    /// Overrides of MUL_MAT's knobs (as [`MulMatTuning::apply`] reads them) and of
    /// FLASH_ATTN_EXT's (as [`FlashAttnTuning::apply`] does); an empty text changes
    /// nothing. An unknown knob, a knob given twice, or a value out of its knob's range is an
    /// error naming the knob and the variable it would come from.
    pub fn parse(mul_mat: &str, flash_attn: &str) -> Result<Overrides> {
        let o = Overrides {
            mul_mat: mul_mat.to_owned(),
            flash_attn: flash_attn.to_owned(),
        };
        // Every knob's range is its own, so any device's profile checks the texts.
        let mut t = Tuning::for_device(&crate::facts::presets::h100());
        o.apply(&mut t)?;
        Ok(o)
    }

    /// MUL_MAT's overrides as given.
    pub fn mul_mat(&self) -> &str {
        &self.mul_mat
    }

    /// FLASH_ATTN_EXT's overrides as given.
    pub fn flash_attn(&self) -> &str {
        &self.flash_attn
    }

    /// Applies the overrides to `tuning`.
    pub fn apply(&self, tuning: &mut Tuning) -> Result<()> {
        tuning
            .mul_mat
            .apply(&self.mul_mat)
            .map_err(|message| BackendError::Config {
                name: MUL_MAT_SETTING,
                message,
            })?;
        tuning
            .flash_attn
            .apply(&self.flash_attn)
            .map_err(|message| BackendError::Config {
                name: FLASH_ATTN_SETTING,
                message,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::presets;

    #[test]
    fn overrides_parse_apply_and_errors_name_their_variable() {
        let o = Overrides::parse("vec_rows=8/16", "kernel=tile,split=4").unwrap();
        let t = Tuning::with_overrides(&presets::h100(), &o).unwrap();
        assert_eq!(t.mul_mat.vec_rows, values::Pair(8, 16));
        assert_eq!(t.flash_attn.split, Some(4));
        let base = Tuning::for_device(&presets::h100());
        assert_eq!(
            Tuning::with_overrides(&presets::h100(), &Overrides::none()).unwrap(),
            base
        );
        assert_eq!(t.mul_mat.vec_wg, base.mul_mat.vec_wg);
        let e = Overrides::parse("vec_wg=100", "").unwrap_err().to_string();
        assert!(e.contains(MUL_MAT_SETTING) && e.contains("vec_wg"), "{e}");
        let e = Overrides::parse("", "tile_kv=7").unwrap_err().to_string();
        assert!(e.contains(FLASH_ATTN_SETTING) && e.contains("tile_kv"), "{e}");
        let built = Tuning {
            flash_attn: FlashAttnTuning {
                tile_threads: u32::MAX,
                ..base.flash_attn
            },
            ..base
        };
        assert!(built.validate().is_err());
        for d in [presets::h100(), presets::lavapipe(), presets::apple()] {
            Tuning::for_device(&d).validate().unwrap();
        }
    }
}
