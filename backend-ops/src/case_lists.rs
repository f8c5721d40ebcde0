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

/// Upstream's lists of the decoder ops (issue #38), as its WebGPU backend reports them on
/// lavapipe: `(op, supported, unsupported)`, one pair of files per op in `tests/data/cases/`;
/// and llama.cpp's list of the rotary embedding fused with the KV-cache write (ROPE_SET_ROWS).
pub const DECODER_LISTS: &[(&str, &str, &str)] = &[
    (
        "GET_ROWS",
        include_str!("../../tests/data/cases/upstream-get_rows-supported.txt"),
        include_str!("../../tests/data/cases/upstream-get_rows-unsupported.txt"),
    ),
    (
        "RMS_NORM",
        include_str!("../../tests/data/cases/upstream-rms_norm-supported.txt"),
        include_str!("../../tests/data/cases/upstream-rms_norm-unsupported.txt"),
    ),
    (
        "RMS_NORM_MUL_ADD",
        include_str!("../../tests/data/cases/upstream-rms_norm_mul_add-supported.txt"),
        include_str!("../../tests/data/cases/upstream-rms_norm_mul_add-unsupported.txt"),
    ),
    (
        "ADD",
        include_str!("../../tests/data/cases/upstream-add-supported.txt"),
        include_str!("../../tests/data/cases/upstream-add-unsupported.txt"),
    ),
    (
        "SUB",
        include_str!("../../tests/data/cases/upstream-sub-supported.txt"),
        include_str!("../../tests/data/cases/upstream-sub-unsupported.txt"),
    ),
    (
        "MUL",
        include_str!("../../tests/data/cases/upstream-mul-supported.txt"),
        include_str!("../../tests/data/cases/upstream-mul-unsupported.txt"),
    ),
    (
        "DIV",
        include_str!("../../tests/data/cases/upstream-div-supported.txt"),
        include_str!("../../tests/data/cases/upstream-div-unsupported.txt"),
    ),
    (
        "ROPE",
        include_str!("../../tests/data/cases/upstream-rope-supported.txt"),
        include_str!("../../tests/data/cases/upstream-rope-unsupported.txt"),
    ),
    (
        "REGLU",
        include_str!("../../tests/data/cases/upstream-reglu-supported.txt"),
        include_str!("../../tests/data/cases/upstream-reglu-unsupported.txt"),
    ),
    (
        "GEGLU",
        include_str!("../../tests/data/cases/upstream-geglu-supported.txt"),
        include_str!("../../tests/data/cases/upstream-geglu-unsupported.txt"),
    ),
    (
        "SWIGLU",
        include_str!("../../tests/data/cases/upstream-swiglu-supported.txt"),
        include_str!("../../tests/data/cases/upstream-swiglu-unsupported.txt"),
    ),
    (
        "SWIGLU_OAI",
        include_str!("../../tests/data/cases/upstream-swiglu_oai-supported.txt"),
        include_str!("../../tests/data/cases/upstream-swiglu_oai-unsupported.txt"),
    ),
    (
        "GEGLU_ERF",
        include_str!("../../tests/data/cases/upstream-geglu_erf-supported.txt"),
        include_str!("../../tests/data/cases/upstream-geglu_erf-unsupported.txt"),
    ),
    (
        "GEGLU_QUICK",
        include_str!("../../tests/data/cases/upstream-geglu_quick-supported.txt"),
        include_str!("../../tests/data/cases/upstream-geglu_quick-unsupported.txt"),
    ),
    (
        "SET_ROWS",
        include_str!("../../tests/data/cases/upstream-set_rows-supported.txt"),
        include_str!("../../tests/data/cases/upstream-set_rows-unsupported.txt"),
    ),
    (
        "CPY",
        include_str!("../../tests/data/cases/upstream-cpy-supported.txt"),
        include_str!("../../tests/data/cases/upstream-cpy-unsupported.txt"),
    ),
    (
        "SCALE",
        include_str!("../../tests/data/cases/upstream-scale-supported.txt"),
        include_str!("../../tests/data/cases/upstream-scale-unsupported.txt"),
    ),
    (
        "SOFT_MAX",
        include_str!("../../tests/data/cases/upstream-soft_max-supported.txt"),
        include_str!("../../tests/data/cases/upstream-soft_max-unsupported.txt"),
    ),
    (
        "ARGMAX",
        include_str!("../../tests/data/cases/upstream-argmax-supported.txt"),
        include_str!("../../tests/data/cases/upstream-argmax-unsupported.txt"),
    ),
    (
        // llama.cpp's list (upstream's has no case of the fusion): every case is ours to pass.
        "ROPE_SET_ROWS",
        include_str!("../../tests/data/cases/llama-rope_set_rows.txt"),
        "",
    ),
];

/// The cases of every decoder op's supported list, and with `with_unsupported` its unsupported
/// list too.
pub fn decoder_cases(with_unsupported: bool) -> Result<Vec<Case>, CaseError> {
    let mut cases = Vec::new();
    for &(_, supported, unsupported) in DECODER_LISTS {
        cases.extend(parse_list(supported)?);
        if with_unsupported {
            cases.extend(parse_list(unsupported)?);
        }
    }
    Ok(cases)
}

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

/// The default correctness cases: the upstream-supported lists of MUL_MAT, FLASH_ATTN_EXT and
/// the decoder ops.
pub fn test_cases() -> Result<Vec<Case>, CaseError> {
    let mut cases = parse_list(MUL_MAT_SUPPORTED)?;
    cases.extend(parse_list(FLASH_ATTN_SUPPORTED)?);
    cases.extend(decoder_cases(false)?);
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

    /// Every line of the decoder lists parses to its op, prints back byte for byte and builds
    /// its tensors (or names an upstream type this crate lacks).
    #[test]
    fn decoder_lists_round_trip_and_build() {
        let mut total = 0;
        for &(op, supported, unsupported) in DECODER_LISTS {
            let lines: Vec<&str> = list_lines(supported).chain(list_lines(unsupported)).collect();
            assert!(!lines.is_empty(), "{op}");
            for line in lines {
                let case: Case = line.parse().unwrap_or_else(|e| panic!("{line}: {e}"));
                assert_eq!(case.op_name(), op);
                assert_eq!(case.to_string(), line);
                let Case::Decoder(c) = &case else {
                    panic!("{line} is not a decoder case");
                };
                match c.tensors() {
                    Ok(_) | Err(CaseError::UnsupportedType { .. }) => total += 1,
                    Err(e) => panic!("{line}: {e}"),
                }
            }
        }
        assert!(total > 2500, "{total}");
    }
}
