//! ggml's quantization results (tests/data/golden/quant): bit-exact dequantization on the CPU
//! and on the GPU, byte-exact quantization on the CPU.

use std::path::PathBuf;

use ggml_dawn::{ContextOptions, GpuContext};
use ggml_dawn_bench::golden::{self, Verdict};

#[test]
fn every_quant_file_matches_bit_for_bit() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/golden/quant");
    let files = golden::collect(&[dir]).unwrap();
    assert!(files.len() >= 20, "golden files missing: {files:?}");
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let mut gpu_checked = 0;
    for file in &files {
        let outcome = golden::check_file(&ctx, file);
        eprintln!("{}: {:?}", outcome.case, outcome.verdict);
        match &outcome.verdict {
            Verdict::Pass(detail) => gpu_checked += usize::from(detail.contains("GPU dequantization bit-exact")),
            other => panic!("{}: {other:?}", file.display()),
        }
    }
    // Every quant file: f16, bf16 and the 24 quantized types.
    assert!(gpu_checked >= 26, "only {gpu_checked} types checked on the GPU");
}

/// Random blocks (every grid index, scale, sign and code the files may miss, subnormal scales
/// included) dequantize on the GPU exactly as on the CPU, for every type the GPU reads.
#[test]
fn random_blocks_dequantize_as_on_the_cpu() {
    use ggml_dawn::{GgmlType, HostTensor, Layout, format, ops};

    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next_byte = move || {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
    };
    let n = 16384;
    let mut checked = Vec::new();
    for &ty in GgmlType::ALL
        .iter()
        .filter(|&&t| t != GgmlType::F32 && ops::dequantize::supports(t))
    {
        let (block, size) = (ty.block_size(), ty.type_size());
        let mut data = Vec::with_capacity(ty.row_bytes(n).unwrap());
        let mut expected = Vec::with_capacity(n);
        for _ in 0..n / block {
            // Random bytes, redrawn while a scale decodes to infinity or NaN, so that every
            // expected value is finite (the GPU's output buffer starts as NaNs).
            loop {
                let b: Vec<u8> = (0..size).map(|_| next_byte()).collect();
                let mut y = vec![0.0f32; block];
                format::dequantize(ty, &b, &mut y).unwrap();
                if y.iter().all(|v| v.is_finite()) {
                    data.extend(b);
                    expected.extend(y);
                    break;
                }
            }
        }
        let tensor = HostTensor {
            layout: Layout::contiguous(ty, [n, 1, 1, 1]).unwrap(),
            data,
        };
        let gpu = golden::gpu_dequantize(&ctx, &tensor).unwrap();
        if let Some(i) = (0..n).find(|&i| gpu[i].to_bits() != expected[i].to_bits()) {
            let (b, at) = (i / block, (i / block) * size);
            panic!(
                "{ty}: element {i}: GPU {:e} vs CPU {:e}; block {b}: {:02x?}",
                gpu[i],
                expected[i],
                &tensor.data[at..at + size]
            );
        }
        checked.push(ty.name());
    }
    eprintln!("random blocks bit-exact on the GPU: {}", checked.join(", "));
    assert!(checked.len() >= 25, "only {} types checked: {checked:?}", checked.len());
}

/// mxfp4 and nvfp4 with every scale byte (mxfp4's smallest scales are subnormal f32) and every
/// code, on the GPU exactly as on the CPU.
#[test]
fn fp4_every_scale_and_code() {
    use ggml_dawn::{GgmlType, HostTensor, Layout, format};

    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let codes: Vec<u8> = (0..16u8).map(|j| j | ((15 - j) << 4)).collect();
    // mxfp4: block b has scale byte b; nvfp4: block b has scale bytes 4b..4b + 4.
    let mxfp4: Vec<u8> = (0..=255u8)
        .flat_map(|e| [e].into_iter().chain(codes.iter().copied()))
        .collect();
    let nvfp4: Vec<u8> = (0..64u8)
        .flat_map(|b| {
            (0..4)
                .map(move |s| 4 * b + s)
                .chain(codes.iter().chain(&codes).copied())
        })
        .collect();
    for (ty, data) in [(GgmlType::MXFP4, mxfp4), (GgmlType::NVFP4, nvfp4)] {
        let n = data.len() / ty.type_size() * ty.block_size();
        let mut expected = vec![0.0f32; n];
        format::dequantize(ty, &data, &mut expected).unwrap();
        let tensor = HostTensor {
            layout: Layout::contiguous(ty, [n, 1, 1, 1]).unwrap(),
            data,
        };
        let gpu = golden::gpu_dequantize(&ctx, &tensor).unwrap();
        for i in 0..n {
            assert_eq!(
                gpu[i].to_bits(),
                expected[i].to_bits(),
                "{ty}: element {i} (block {}): GPU {:e} vs CPU {:e}",
                i / ty.block_size(),
                gpu[i],
                expected[i]
            );
        }
    }
}
