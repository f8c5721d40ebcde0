//! The decoder on the GPU against the CPU decoder, step by step (a prompt, then single tokens),
//! on a tiny synthetic llama with heads of 64: each step's logits within NMSE 5e-4.

mod common;

use ggml_dawn::reference::metric;
use ggml_dawn::tuning::Overrides;
use ggml_dawn::{ContextOptions, GgmlType, GpuContext};
use ggml_dawn_llm::synth::{ModelShape, WeightType};
use ggml_dawn_llm::{Architecture, CpuOps, Decoder, GpuOps, Model, Ops, Session};

use common::{TempDir, WTYPE, synth_bytes};

fn tiny_shape(architecture: Architecture) -> ModelShape {
    ModelShape {
        name: "tiny-64".into(),
        architecture,
        n_vocab: 300,
        n_ctx_train: 256,
        n_embd: 128,
        n_layer: 2,
        n_ff: 160,
        n_head: 2,
        n_head_kv: 1,
        rope_freq_base: 10000.0,
        rms_norm_eps: 1e-5,
        tied_output: true,
    }
}

fn tiny_model(dir: &TempDir, architecture: Architecture, wtype: WeightType) -> Model {
    let path = dir.path().join(format!("tiny-{}-{}.gguf", architecture.name(), wtype));
    std::fs::write(&path, synth_bytes(&tiny_shape(architecture), wtype, 5)).unwrap();
    Model::open(&path).unwrap()
}

fn gpu_decoder(model: &Model) -> Decoder<GpuOps> {
    let ctx = GpuContext::new(ContextOptions::default()).expect("a GPU adapter (lavapipe in CI)");
    Decoder::load(model, GpuOps::new(ctx)).unwrap()
}

/// Llama (no biases, normal rope) and Qwen 2 (q/k/v biases, NeoX rope): both with the stacked
/// q/k/v and gate/up projections.
#[test]
fn gpu_logits_follow_the_cpu_decoder() {
    for architecture in [Architecture::Llama, Architecture::Qwen2] {
        gpu_logits_follow_the_cpu_decoder_for(architecture, WTYPE, GgmlType::F16);
    }
}

/// A q4_K_M mixture, whose last layer's V has more bits than its Q and K (so that layer's
/// projections stay separate MUL_MATs and its keys and values go to the cache apart), with an
/// f16 and a q8_0 cache.
#[test]
fn gpu_logits_follow_the_cpu_decoder_with_separate_projections_and_a_q8_0_cache() {
    for cache in [GgmlType::F16, GgmlType::Q8_0] {
        gpu_logits_follow_the_cpu_decoder_for(Architecture::Llama, WeightType::Q4KM, cache);
    }
}

fn gpu_logits_follow_the_cpu_decoder_for(architecture: Architecture, wtype: WeightType, cache: GgmlType) {
    let dir = TempDir::new("gpu-decoder");
    let model = tiny_model(&dir, architecture, wtype);
    let types = |name: &str| model.tensors().iter().find(|t| t.name == name).map(|t| t.ty);
    if wtype == WeightType::Q4KM {
        assert_ne!(types("blk.1.attn_q.weight"), types("blk.1.attn_v.weight"));
    }
    let gpu = gpu_decoder(&model);
    let cpu = Decoder::load(&model, CpuOps).unwrap();
    let mut on_gpu = Session::new(&gpu, 32, cache).unwrap();
    let mut on_cpu = Session::new(&cpu, 32, cache).unwrap();
    let prompt = [298, 17, 101, 5, 250, 64];
    let mut input = prompt.to_vec();
    for step in 0..4 {
        let want = on_cpu.eval(&input).unwrap();
        let got = on_gpu.eval(&input).unwrap();
        let nmse = metric::nmse(&want, &got);
        assert!(
            nmse <= 5e-4,
            "{} {} cache {cache}: step {step}: NMSE {nmse}",
            architecture.name(),
            wtype
        );
        // Both follow the CPU's greedy choice, so the caches hold the same tokens.
        input = vec![ggml_dawn_llm::sampling::argmax(&want).unwrap()];
    }
    // The greedy read (only the argmax comes back) agrees with the logits.
    let next = on_gpu.eval_greedy(&input).unwrap();
    let want = on_cpu.eval(&input).unwrap();
    assert_eq!(Some(next), ggml_dawn_llm::sampling::argmax(&want));
}

/// Single-token steps reuse the first step's activation buffers and bind groups: after one step
/// of that size, a step allocates no device memory and makes no bind group (attention binds the
/// cache to its end and a single token needs no mask, so its bindings do not grow with the
/// cache).
#[test]
fn decode_steps_reuse_the_activation_pool() {
    let dir = TempDir::new("gpu-decoder-pool");
    let model = tiny_model(&dir, Architecture::Llama, WTYPE);
    let gpu = gpu_decoder(&model);
    let mut session = Session::new(&gpu, 32, GgmlType::F16).unwrap();
    let mut token = session.eval_greedy(&[298, 17, 101]).unwrap();
    token = session.eval_greedy(&[token]).unwrap();
    let pool = gpu.ops().pool_bytes();
    let groups = gpu.ops().context().cached_bind_groups();
    assert!(pool > 0 && groups > 0);
    for _ in 0..6 {
        token = session.eval_greedy(&[token]).unwrap();
        assert_eq!(gpu.ops().pool_bytes(), pool, "a decode step allocated");
        assert_eq!(
            gpu.ops().context().cached_bind_groups(),
            groups,
            "a decode step made bind groups"
        );
    }
    // What `bench -v` reports: the pool holds the weights (and the activations), the cache is
    // one row of keys and values a cell per layer, in f16.
    let bytes = gpu.ops().device_bytes().unwrap();
    assert_eq!(bytes.pool, pool);
    assert!(bytes.pool >= model.weight_bytes() as u64);
    let shape = tiny_shape(Architecture::Llama);
    let e_kv = shape.n_embd / shape.n_head * shape.n_head_kv;
    assert_eq!(bytes.zeroed, (shape.n_layer * 2 * e_kv * 32 * 2) as u64);
}

/// Where the integer mat-vec quantizes b, in its workgroup (the GPUs' default at small k; forced
/// here on lavapipe, whose profile runs the pass) or in its quantize pass, the norms run inside
/// the projections after them (two a layer and the output's) and each layer's SWIGLU inside its
/// down projection: a dispatch fewer each, and the same logits to the bit.
#[test]
fn the_fused_norms_and_swiglus_change_no_logit() {
    let dir = TempDir::new("gpu-decoder-fusions");
    let model = tiny_model(&dir, Architecture::Llama, WTYPE);
    let run = |knobs: &str| -> (Vec<Vec<f32>>, u64) {
        let options = ContextOptions {
            tuning: Overrides::parse(knobs, "").expect("knobs parse"),
            ..Default::default()
        };
        let ctx = GpuContext::new(options).expect("a GPU adapter (lavapipe in CI)");
        let decoder = Decoder::load(&model, GpuOps::new(ctx)).unwrap();
        let mut session = Session::new(&decoder, 32, GgmlType::F16).unwrap();
        let mut logits = vec![session.eval(&[298, 17, 101]).unwrap()];
        let before = decoder.ops().dispatches().unwrap();
        logits.push(session.eval(&[5]).unwrap());
        (logits, decoder.ops().dispatches().unwrap() - before)
    };
    let bits = |l: &[Vec<f32>]| l.iter().flatten().map(|x| x.to_bits()).collect::<Vec<_>>();
    let layers = tiny_shape(Architecture::Llama).n_layer as u64;
    let (fused, fused_dispatches) = run("vec_int_b_wg_max_k=2048");
    // The rotary embedding and KV-cache write inside the q/k/v projection: the two dispatches
    // they take apart, a layer (ROPE and SET_ROWS: three heads a token are too few for
    // `GpuContext::rope_set_rows`'s one kernel).
    let base = "vec_int_b_wg_max_k=2048,vec_rope_set_rows=false";
    let (rope_apart, base_dispatches) = run(base);
    assert!(
        bits(&fused) == bits(&rope_apart),
        "the rotary embedding's fusion changed a logit"
    );
    assert_eq!(
        base_dispatches - fused_dispatches,
        2 * layers,
        "the rotary embedding's fusion"
    );
    for (what, knobs, fewer) in [
        (
            "the SWIGLU's fusion",
            "vec_int_b_swiglu=false,vec_int_pass_swiglu=false",
            layers,
        ),
        (
            "the norms' fusion",
            "vec_int_b_rms_norm=false,vec_int_pass_rms_norm=false",
            2 * layers + 1,
        ),
    ] {
        let (apart, dispatches) = run(&format!("{base},{knobs}"));
        assert!(bits(&fused) == bits(&apart), "{what} changed a logit");
        assert_eq!(dispatches - base_dispatches, fewer, "{what}");
    }
    // The same ops in the quantize pass: the pass's dispatches stay, the ops' go.
    let (in_pass, pass_dispatches) = run("vec_int_b_wg_max_k=0");
    let (apart, apart_dispatches) =
        run("vec_int_b_wg_max_k=0,vec_int_pass_swiglu=false,vec_int_pass_rms_norm=false,vec_rope_set_rows=false");
    assert!(
        bits(&fused) == bits(&in_pass),
        "the fusions in the pass changed a logit"
    );
    assert!(bits(&fused) == bits(&apart), "b quantized by a pass changed a logit");
    assert_eq!(apart_dispatches - pass_dispatches, 5 * layers + 1);
}
