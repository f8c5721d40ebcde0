//! The case lists `backend-ops` runs by default: upstream's correctness cases (as its WebGPU
//! backend reports them on lavapipe, in `tests/data/cases/`) and upstream's perf cases.

use crate::cases::{Case, CaseError, FlashAttnCase, MulMatCase};
use ggml_dawn::ggml_type::GgmlType;

/// Upstream's MUL_MAT cases that its WebGPU backend supports.
pub const MUL_MAT_SUPPORTED: &str = include_str!("../../tests/data/cases/upstream-mul_mat-supported.txt");
/// Upstream's MUL_MAT cases that its WebGPU backend refuses.
pub const MUL_MAT_UNSUPPORTED: &str = include_str!("../../tests/data/cases/upstream-mul_mat-unsupported.txt");
/// Upstream's FLASH_ATTN_EXT cases that its WebGPU backend supports.
pub const FLASH_ATTN_SUPPORTED: &str = include_str!("../../tests/data/cases/upstream-flash_attn_ext-supported.txt");
/// Upstream's FLASH_ATTN_EXT cases that its WebGPU backend refuses.
pub const FLASH_ATTN_UNSUPPORTED: &str = include_str!("../../tests/data/cases/upstream-flash_attn_ext-unsupported.txt");

/// The case strings of a list: one a line, trimmed; blank lines and `#` comments skipped.
pub fn list_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// Parses a list: one case string a line; blank lines and `#` comments are skipped.
pub fn parse_list(text: &str) -> Result<Vec<Case>, CaseError> {
    list_lines(text).map(str::parse).collect()
}

/// The default correctness cases: both upstream-supported lists.
pub fn test_cases() -> Result<Vec<Case>, CaseError> {
    let mut cases = parse_list(MUL_MAT_SUPPORTED)?;
    cases.extend(parse_list(FLASH_ATTN_SUPPORTED)?);
    Ok(cases)
}

/// Weight types of the MUL_MAT perf cases.
const PERF_TYPES: &[GgmlType] = &[
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::IQ2_XXS,
    GgmlType::IQ2_XS,
    GgmlType::IQ2_S,
    GgmlType::IQ3_XXS,
    GgmlType::IQ3_S,
    GgmlType::IQ1_S,
    GgmlType::IQ1_M,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
    GgmlType::MXFP4,
    GgmlType::NVFP4,
    GgmlType::Q1_0,
];

/// Upstream's perf cases for MUL_MAT and FLASH_ATTN_EXT (`test-backend-ops perf`).
pub fn perf_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for &ty in PERF_TYPES {
        for n in [1, 2, 3, 4, 5, 8, 512] {
            cases.push(Case::MulMat(MulMatCase::new(ty, GgmlType::F32, 4096, n, 14336)));
        }
    }
    let mut broadcast = MulMatCase::new(GgmlType::F16, GgmlType::F32, 16416, 1, 128);
    broadcast.bs = [8, 1];
    broadcast.nr = [4, 1];
    broadcast.per = [0, 2, 1, 3];
    cases.push(Case::MulMat(broadcast));
    let mut strided = MulMatCase::new(GgmlType::F16, GgmlType::F32, 128, 1, 16416);
    strided.k_v = 32832;
    cases.push(Case::MulMat(strided));

    let fa = |hs: usize, nh: usize, nr2: usize, kv: usize, nb: usize, ty: GgmlType, mask: bool| {
        let mut c = FlashAttnCase::new(hs, hs, nh, kv, nb);
        c.nr23 = [nr2, 1];
        c.mask = mask;
        c.type_k = ty.into();
        c.type_v = ty.into();
        Case::FlashAttnExt(c)
    };
    cases.push(fa(72, 16, 1, 5776, 5776, GgmlType::F16, false));
    for ty in [GgmlType::F16, GgmlType::Q4_0, GgmlType::Q8_0] {
        for nb in [1, 4, 512] {
            cases.push(fa(64, 8, 8, 7680, nb, ty, true));
        }
    }
    for ty in [GgmlType::Q8_0, GgmlType::F16] {
        for kv in [128, 10000, 20000] {
            for nb in [1, 512] {
                cases.push(fa(256, 2, 16, kv, nb, ty, true));
            }
        }
    }
    for hs in [64, 128] {
        for nr2 in [1, 4] {
            for kv in [4096, 8192, 16384] {
                cases.push(fa(hs, 8, nr2, kv, 1, GgmlType::F16, true));
            }
        }
    }
    cases
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse() {
        assert!(test_cases().unwrap().len() > 4000);
        assert!(parse_list(MUL_MAT_UNSUPPORTED).unwrap().len() > 500);
        assert!(parse_list(FLASH_ATTN_UNSUPPORTED).unwrap().len() > 2000);
        let perf = perf_cases();
        let text: Vec<String> = perf.iter().map(|c| c.to_string()).collect();
        assert!(text.contains(&"MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=512,k=14336,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0)".to_owned()));
        assert!(
            text.iter()
                .any(|t| t.starts_with("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,mask=1"))
        );
        // Every perf case round-trips through its text.
        for t in &text {
            assert_eq!(&t.parse::<Case>().unwrap().to_string(), t);
        }
    }
}
