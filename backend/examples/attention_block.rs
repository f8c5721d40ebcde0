//! One attention block of a transformer on the GPU, from weights in a GGUF file, checked
//! against the CPU reference.
//!
//! The example writes a small GGUF file itself (q4_0 projection weights, as a converted model
//! would hold them), loads it onto the device, then runs `Q = Wq·x`, `K = Wk·x`, `V = Wv·x`
//! (quantized mat-muls), causal flash attention with grouped KV heads over views of Q, K and V
//! (no copies), and `Wo·attention`; the result is compared with the CPU reference by NMSE.
//!
//! ```sh
//! cargo xtask shell -- cargo run -p ggml-dawn --example attention_block
//! ```

use std::time::{Duration, Instant};

use ggml_dawn::gguf::{GgufWriter, Value};
use ggml_dawn::ops::flash_attn::FlashAttnParams;
use ggml_dawn::reference::{self, metric};
use ggml_dawn::{ContextOptions, GgmlType, GpuContext, HostTensor};

/// Model width, heads, KV heads, head size and tokens.
const D_MODEL: usize = 256;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HEAD: usize = D_MODEL / HEADS;
const TOKENS: usize = 12;

/// Deterministic values in [-1, 1) (SplitMix64).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// The projections, as ggml stores them: `[inputs, outputs]`, quantized to q4_0.
fn weights() -> Result<Vec<(&'static str, HostTensor)>, Box<dyn std::error::Error>> {
    let scale = 1.0 / (D_MODEL as f32).sqrt();
    let mut out = Vec::new();
    for (i, (name, outputs)) in [
        ("blk.0.attn_q.weight", D_MODEL),
        ("blk.0.attn_k.weight", KV_HEADS * HEAD),
        ("blk.0.attn_v.weight", KV_HEADS * HEAD),
        ("blk.0.attn_output.weight", D_MODEL),
    ]
    .into_iter()
    .enumerate()
    {
        let w: Vec<f32> = values(D_MODEL * outputs, 10 + i as u64)
            .iter()
            .map(|v| v * scale)
            .collect();
        out.push((
            name,
            HostTensor::from_f32(GgmlType::Q4_0, [D_MODEL, outputs, 1, 1], &w)?,
        ));
    }
    Ok(out)
}

/// A causal mask: token `i` sees tokens `0..=i`.
fn causal_mask() -> Result<HostTensor, Box<dyn std::error::Error>> {
    let mut m = vec![0.0f32; TOKENS * TOKENS];
    for i in 0..TOKENS {
        for j in i + 1..TOKENS {
            m[i * TOKENS + j] = f32::NEG_INFINITY;
        }
    }
    Ok(HostTensor::from_f32(GgmlType::F16, [TOKENS, TOKENS, 1, 1], &m)?)
}

/// `[rows·heads, tokens]` f32 values seen as `[head, tokens, heads, 1]` (a permuted view).
fn heads_view(data: Vec<f32>, heads: usize) -> Result<HostTensor, Box<dyn std::error::Error>> {
    let t = HostTensor::from_f32(GgmlType::F32, [HEAD, heads, TOKENS, 1], &data)?;
    let layout = t.layout.permute([0, 2, 1, 3])?;
    Ok(HostTensor { layout, ..t })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let start = Instant::now();
    // 1. A GGUF file with the block's weights.
    let path = std::env::temp_dir().join(format!("attention_block-{}.gguf", std::process::id()));
    let host_weights = weights()?;
    let mut writer = GgufWriter::new();
    writer.set("general.architecture", Value::String("example".into()));
    writer.set("example.attention.head_count", Value::U32(HEADS as u32));
    writer.set("example.attention.head_count_kv", Value::U32(KV_HEADS as u32));
    for (name, tensor) in &host_weights {
        writer.add_host_tensor(name, tensor)?;
    }
    std::fs::write(&path, writer.to_bytes()?)?;

    // 2. The device, and the weights loaded straight onto it.
    let ctx = GpuContext::new(ContextOptions {
        timeout: Duration::from_secs(120),
        ..ContextOptions::default()
    })?;
    let loaded = ctx.load_gguf(&path);
    std::fs::remove_file(&path)?;
    let weights = loaded?;
    let heads = weights
        .metadata()
        .get("example.attention.head_count")
        .and_then(|v| v.as_u64());
    assert_eq!(heads, Some(HEADS as u64));

    // 3. The block: projections (quantized mat-muls), attention over views, output projection.
    let x_host = HostTensor::from_f32(GgmlType::F32, [D_MODEL, TOKENS, 1, 1], &values(D_MODEL * TOKENS, 1))?;
    let mask_host = causal_mask()?;
    let x = ctx.upload(&x_host)?;
    let mask = ctx.upload(&mask_host)?;
    let q = ctx.mul_mat(weights.tensor("blk.0.attn_q.weight")?, &x)?; // [D_MODEL, TOKENS]
    let k = ctx.mul_mat(weights.tensor("blk.0.attn_k.weight")?, &x)?;
    let v = ctx.mul_mat(weights.tensor("blk.0.attn_v.weight")?, &x)?;
    let by_head =
        |t: &ggml_dawn::DeviceTensor, heads: usize| t.reshape([HEAD, heads, TOKENS, 1])?.permute([0, 2, 1, 3]);
    let params = FlashAttnParams::scaled(1.0 / (HEAD as f32).sqrt());
    let attention = ctx.flash_attn_ext(
        &by_head(&q, HEADS)?,
        &by_head(&k, KV_HEADS)?,
        &by_head(&v, KV_HEADS)?,
        Some(&mask),
        None,
        params,
    )?; // [HEAD, HEADS, TOKENS, 1]: the heads of a token side by side
    let out = ctx.empty(GgmlType::F32, [D_MODEL, TOKENS, 1, 1])?;
    let plan = ctx.mul_mat_into(
        weights.tensor("blk.0.attn_output.weight")?,
        &attention.reshape([D_MODEL, TOKENS, 1, 1])?,
        &out,
    )?;
    let got = ctx.read_f32(&out)?; // runs everything recorded, then reads back

    // 4. The same on the CPU, from the same quantized weights.
    let w = |name: &str| {
        host_weights
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| t)
            .expect("written above")
    };
    let q = reference::mul_mat(w("blk.0.attn_q.weight"), &x_host)?;
    let k = reference::mul_mat(w("blk.0.attn_k.weight"), &x_host)?;
    let v = reference::mul_mat(w("blk.0.attn_v.weight"), &x_host)?;
    let attention = reference::flash_attn_ext(
        &heads_view(q, HEADS)?,
        &heads_view(k, KV_HEADS)?,
        &heads_view(v, KV_HEADS)?,
        Some(&mask_host),
        None,
        params.scale,
        params.max_bias,
        params.logit_softcap,
    )?;
    let attention = HostTensor::from_f32(GgmlType::F32, [D_MODEL, TOKENS, 1, 1], &attention)?;
    let expected = reference::mul_mat(w("blk.0.attn_output.weight"), &attention)?;

    let nmse = metric::nmse(&expected, &got);
    println!(
        "attention block: {D_MODEL} wide, {HEADS} heads over {KV_HEADS} KV heads, {TOKENS} tokens, q4_0 \
         projections: NMSE {nmse:.3e} against the CPU ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
    println!("the output projection's plan: {plan}");
    if nmse > metric::MUL_MAT_MAX_NMSE {
        return Err(format!("NMSE {nmse:.3e} over {:.0e}", metric::MUL_MAT_MAX_NMSE).into());
    }
    println!("OK");
    Ok(())
}
