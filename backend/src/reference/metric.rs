//! How test-backend-ops compares a backend's output with the CPU's: NMSE against a threshold,
//! after rejecting NaNs and infinities that do not match.

/// MUL_MAT's (and MUL_MAT_ID's) threshold, whatever the backend.
pub const MUL_MAT_MAX_NMSE: f64 = 5e-4;
/// FLASH_ATTN_EXT's threshold.
pub const FLASH_ATTN_EXT_MAX_NMSE: f64 = 5e-4;
/// The threshold of ops that set none.
pub const DEFAULT_MAX_NMSE: f64 = 1e-7;
/// The default threshold on the WebGPU backend when any tensor of the case is f16 (a special case
/// in upstream's harness).
pub const DEFAULT_MAX_NMSE_F16: f64 = 1e-6;

/// The default threshold for a case on the WebGPU backend: 1e-6 when any tensor is f16, else 1e-7.
pub fn default_max_nmse(any_f16: bool) -> f64 {
    if any_f16 {
        DEFAULT_MAX_NMSE_F16
    } else {
        DEFAULT_MAX_NMSE
    }
}

/// Why an output fails the comparison.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Mismatch {
    #[error("{actual} values where the reference has {reference}")]
    Length { reference: usize, actual: usize },
    #[error("NaN at index {index} (reference {reference}, actual {actual})")]
    NaN { index: usize, reference: f32, actual: f32 },
    #[error("inf mismatch at index {index} (reference {reference}, actual {actual})")]
    Inf { index: usize, reference: f32, actual: f32 },
    #[error("inf sign mismatch at index {index} (reference {reference}, actual {actual})")]
    InfSign { index: usize, reference: f32, actual: f32 },
    #[error("NMSE = {nmse:.9} > {max:.9}")]
    Nmse { nmse: f64, max: f64 },
}

/// Normalized mean squared error `Σ(ref−act)² / Σref²`, accumulated in f64.
///
/// Gives 0 when both sums are 0, infinity when only the reference's is (or the lengths differ),
/// and NaN when infinities or NaNs are involved (use [`check`] for those).
pub fn nmse(reference: &[f32], actual: &[f32]) -> f64 {
    if reference.len() != actual.len() {
        return f64::INFINITY;
    }
    let (err, norm) = sums(reference.iter().copied().zip(actual.iter().copied()));
    ratio(err, norm)
}

/// Upstream's verdict on `actual` against `reference`: the NMSE when it is at most `max_nmse`.
///
/// As upstream, it fails on any NaN (in either), and on a value that is infinite (or ±`f32::MAX`)
/// in one but not the other, or infinite in both with different signs. Positions infinite with the
/// same sign in both agree and are left out of the NMSE sums (upstream would get a NaN NMSE there,
/// which its `err > max` test lets pass).
pub fn check(reference: &[f32], actual: &[f32], max_nmse: f64) -> Result<f64, Mismatch> {
    if reference.len() != actual.len() {
        return Err(Mismatch::Length {
            reference: reference.len(),
            actual: actual.len(),
        });
    }
    for (index, (&r, &a)) in reference.iter().zip(actual).enumerate() {
        if r.is_nan() || a.is_nan() {
            return Err(Mismatch::NaN {
                index,
                reference: r,
                actual: a,
            });
        }
        match (is_inf_or_max(r), is_inf_or_max(a)) {
            (true, true) if r.is_sign_negative() != a.is_sign_negative() => {
                return Err(Mismatch::InfSign {
                    index,
                    reference: r,
                    actual: a,
                });
            }
            (true, false) | (false, true) => {
                return Err(Mismatch::Inf {
                    index,
                    reference: r,
                    actual: a,
                });
            }
            _ => {}
        }
    }
    let pairs = reference
        .iter()
        .copied()
        .zip(actual.iter().copied())
        .filter(|&(r, _)| !is_inf_or_max(r));
    let (err, norm) = sums(pairs);
    let nmse = ratio(err, norm);
    // Written so that a NaN NMSE fails.
    if nmse <= max_nmse {
        Ok(nmse)
    } else {
        Err(Mismatch::Nmse { nmse, max: max_nmse })
    }
}

fn is_inf_or_max(x: f32) -> bool {
    x.is_infinite() || x == f32::MAX || x == -f32::MAX
}

fn sums(pairs: impl Iterator<Item = (f32, f32)>) -> (f64, f64) {
    pairs.fold((0.0, 0.0), |(err, norm), (r, a)| {
        let (r, a) = (f64::from(r), f64::from(a));
        (err + (r - a) * (r - a), norm + r * r)
    })
}

fn ratio(err: f64, norm: f64) -> f64 {
    match (err == 0.0, norm == 0.0) {
        (true, _) => 0.0,
        (false, true) => f64::INFINITY,
        (false, false) => err / norm,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nmse_is_relative_squared_error() {
        assert_eq!(nmse(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert!((nmse(&[3.0, 4.0], &[3.0, 5.0]) - 1.0 / 25.0).abs() < 1e-15);
        assert_eq!(nmse(&[0.0, 0.0], &[0.0, 0.0]), 0.0);
        assert_eq!(nmse(&[0.0], &[1.0]), f64::INFINITY);
        assert_eq!(nmse(&[1.0], &[1.0, 2.0]), f64::INFINITY);
    }

    #[test]
    fn check_applies_upstream_rules() {
        assert_eq!(check(&[1.0, 2.0], &[1.0, 2.0], 1e-7), Ok(0.0));
        assert!(check(&[3.0, 4.0], &[3.0, 4.01], 5e-4).is_ok());
        assert!(matches!(
            check(&[3.0, 4.0], &[3.0, 5.0], 5e-4),
            Err(Mismatch::Nmse { .. })
        ));
        assert!(matches!(
            check(&[1.0], &[f32::NAN], 1.0),
            Err(Mismatch::NaN { index: 0, .. })
        ));
        assert!(matches!(check(&[f32::NAN], &[1.0], 1.0), Err(Mismatch::NaN { .. })));
        assert!(matches!(
            check(&[1.0, f32::INFINITY], &[1.0, 1e30], 1.0),
            Err(Mismatch::Inf { index: 1, .. })
        ));
        assert!(matches!(check(&[1.0], &[f32::MAX], 1.0), Err(Mismatch::Inf { .. })));
        assert!(matches!(
            check(&[f32::NEG_INFINITY], &[f32::INFINITY], 1.0),
            Err(Mismatch::InfSign { .. })
        ));
        assert_eq!(check(&[1.0, f32::NEG_INFINITY], &[1.0, -f32::MAX], 1e-7), Ok(0.0));
        assert!(matches!(check(&[1.0], &[1.0, 2.0], 1.0), Err(Mismatch::Length { .. })));
    }

    #[test]
    fn thresholds() {
        assert_eq!(default_max_nmse(false), 1e-7);
        assert_eq!(default_max_nmse(true), 1e-6);
        assert_eq!(MUL_MAT_MAX_NMSE, 5e-4);
        assert_eq!(FLASH_ATTN_EXT_MAX_NMSE, 5e-4);
    }
}
