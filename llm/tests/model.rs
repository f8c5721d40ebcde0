//! Model loading on synthetic GGUF files the crate writes: a small llama and a small qwen2 are
//! read back with their hyperparameters and tensors; files this crate cannot run are refused
//! with an error naming the architecture, key or tensor.

mod common;

use ggml_dawn::GgmlType;
use ggml_dawn::gguf::{GgufFile, GgufWriter, Value};
use ggml_dawn_llm::synth::{self, WeightType};
use ggml_dawn_llm::{Architecture, LlmError, Model, RopeScaling, Tokenizer};

use common::{TempDir, WTYPE, keep, rewrite, synth_bytes, tiny_shape};

fn open_bytes(bytes: &[u8]) -> Result<Model, LlmError> {
    let dir = TempDir::new("model");
    let path = dir.path().join("m.gguf");
    std::fs::write(&path, bytes).unwrap();
    Model::open(&path)
}

#[test]
fn a_small_llama_reads_back_with_its_shape() {
    let shape = tiny_shape(Architecture::Llama, true);
    let model = open_bytes(&synth_bytes(&shape, WTYPE, 1)).unwrap();
    let c = &model.config;
    assert_eq!(c.architecture, Architecture::Llama);
    assert_eq!((c.n_vocab, c.n_embd, c.n_layer, c.n_ff), (300, 64, 2, 96));
    assert_eq!(
        (c.n_head, c.n_head_kv, c.head_dim, c.n_rot, c.n_gqa()),
        (4, 2, 16, 16, 2)
    );
    assert_eq!(c.rope_scaling, RopeScaling::None);
    assert_eq!(c.rope_freq_base, 10000.0);
    assert!(model.tied_output());
    assert_eq!(model.output_name(), "token_embd.weight");
    assert!(!model.has_qkv_bias());
    assert_eq!(model.tensor("blk.1.attn_k.weight").unwrap().ne, [64, 32, 1, 1]);
    assert_eq!(
        model.tensor("blk.1.ffn_down.weight").unwrap().ggml_type(),
        Some(GgmlType::Q8_0)
    );
    // 1 + 9 per layer + output_norm.
    assert_eq!(model.tensors().len(), 1 + 2 * 9 + 1);
    // The synthetic vocabulary tokenizes and gives the text back.
    let tok = Tokenizer::from_metadata(model.metadata()).unwrap();
    assert_eq!(tok.n_tokens(), 300);
    let ids = tok.encode("hello world", true, true).unwrap();
    assert_eq!(ids[0], tok.special().bos.unwrap());
    assert_eq!(tok.decode(&ids, false), "hello world");
}

#[test]
fn a_small_qwen2_has_qkv_biases_and_an_output_projection() {
    let shape = tiny_shape(Architecture::Qwen2, false);
    let model = open_bytes(&synth_bytes(&shape, WeightType::Q4_0, 2)).unwrap();
    assert_eq!(model.config.architecture, Architecture::Qwen2);
    assert!(model.has_qkv_bias());
    assert!(!model.tied_output());
    assert_eq!(model.output_name(), "output.weight");
    assert_eq!(
        model.tensor("blk.0.attn_q.bias").unwrap().ggml_type(),
        Some(GgmlType::F32)
    );
    assert_eq!(model.tensor("output.weight").unwrap().ggml_type(), Some(GgmlType::Q8_0)); // q6_K fallen back
}

#[test]
fn every_weight_type_loads() {
    for wtype in [WeightType::F16, WeightType::Q8_0, WeightType::Q4_0, WeightType::Q4KM] {
        let shape = tiny_shape(Architecture::Llama, false);
        let model = open_bytes(&synth_bytes(&shape, wtype, 3)).unwrap();
        assert_eq!(model.config.n_layer, 2, "{wtype}");
    }
}

#[test]
fn the_streamed_file_is_what_the_gguf_writer_writes() {
    let shape = tiny_shape(Architecture::Qwen2, false);
    let bytes = synth_bytes(&shape, WeightType::Q4KM, 4);
    let file = GgufFile::from_bytes(&bytes).unwrap();
    assert_eq!(GgufWriter::from_file(&file).unwrap().to_bytes().unwrap(), bytes);
    // Seeded: the same seed gives the same file, another seed other weights.
    assert_eq!(synth_bytes(&shape, WeightType::Q4KM, 4), bytes);
    let other = GgufFile::from_bytes(&synth_bytes(&shape, WeightType::Q4KM, 5)).unwrap();
    let name = "blk.0.attn_q.weight";
    assert_ne!(other.tensor_data(name).unwrap(), file.tensor_data(name).unwrap());
    assert_eq!(synth::tensor_plan(&shape, WeightType::Q4KM).len(), file.tensors().len());
}

#[test]
fn rope_scaling_is_read() {
    let bytes = synth_bytes(&tiny_shape(Architecture::Llama, true), WTYPE, 6);
    let scaled = rewrite(
        &bytes,
        |m| {
            m.insert("llama.rope.scaling.type", Value::String("linear".into()));
            m.insert("llama.rope.scaling.factor", Value::F32(4.0));
        },
        keep,
    );
    assert_eq!(
        open_bytes(&scaled).unwrap().config.rope_scaling,
        RopeScaling::Linear { factor: 4.0 }
    );
    let longrope = rewrite(
        &bytes,
        |m| {
            m.insert("llama.rope.scaling.type", Value::String("longrope".into()));
        },
        keep,
    );
    let err = open_bytes(&longrope).unwrap_err().to_string();
    assert!(err.contains("longrope"), "{err}");
}

#[test]
fn llama3_frequency_factors_are_found() {
    let bytes = synth_bytes(&tiny_shape(Architecture::Llama, true), WTYPE, 7);
    let file = GgufFile::from_bytes(&bytes).unwrap();
    let mut w = GgufWriter::from_file(&file).unwrap();
    let factors: Vec<u8> = (0..8).flat_map(|_| 1.0f32.to_le_bytes()).collect();
    w.add_tensor("rope_freqs.weight", GgmlType::F32, [8, 1, 1, 1], factors)
        .unwrap();
    let model = open_bytes(&w.to_bytes().unwrap()).unwrap();
    assert!(model.has_rope_freqs());
}

fn refusal(bytes: &[u8]) -> String {
    open_bytes(bytes).unwrap_err().to_string()
}

#[test]
fn another_architecture_is_refused_by_name() {
    let bytes = synth_bytes(&tiny_shape(Architecture::Llama, true), WTYPE, 8);
    let mamba = rewrite(
        &bytes,
        |m| {
            m.insert("general.architecture", Value::String("mamba".into()));
        },
        keep,
    );
    let err = refusal(&mamba);
    assert!(err.contains("architecture `mamba` is not supported"), "{err}");
}

#[test]
fn a_missing_tensor_is_named() {
    let bytes = synth_bytes(&tiny_shape(Architecture::Llama, true), WTYPE, 9);
    let dropped = rewrite(
        &bytes,
        |_| {},
        |name, ty, ne, data| (name != "blk.1.ffn_up.weight").then(|| keep(name, ty, ne, data).unwrap()),
    );
    let err = refusal(&dropped);
    assert!(err.contains("blk.1.ffn_up.weight") && err.contains("missing"), "{err}");
}

#[test]
fn a_tensor_of_another_model_is_named() {
    let bytes = synth_bytes(&tiny_shape(Architecture::Llama, true), WTYPE, 10);
    let renamed = rewrite(
        &bytes,
        |_| {},
        |name, ty, ne, data| {
            let name = if name == "blk.0.ffn_gate.weight" {
                "blk.0.ffn_gate_exps.weight"
            } else {
                name
            };
            keep(name, ty, ne, data)
        },
    );
    let err = refusal(&renamed);
    assert!(err.contains("blk.0.ffn_gate_exps.weight"), "{err}");
}

#[test]
fn a_wrong_shape_or_type_is_named() {
    let bytes = synth_bytes(&tiny_shape(Architecture::Llama, true), WTYPE, 11);
    let norm_f16 = rewrite(
        &bytes,
        |_| {},
        |name, ty, ne, data| {
            if name == "blk.0.attn_norm.weight" {
                let halves: Vec<u8> = data.chunks(4).flat_map(|_| [0u8, 0x3c]).collect();
                Some((name.into(), GgmlType::F16.gguf_id(), ne, halves))
            } else {
                keep(name, ty, ne, data)
            }
        },
    );
    let err = refusal(&norm_f16);
    assert!(err.contains("blk.0.attn_norm.weight") && err.contains("f16"), "{err}");

    let wide = rewrite(
        &bytes,
        |m| {
            m.insert("llama.feed_forward_length", Value::U32(128));
        },
        keep,
    );
    let err = refusal(&wide);
    assert!(err.contains("ffn_gate.weight") && err.contains("shape"), "{err}");
}

#[test]
fn missing_or_bad_metadata_is_named() {
    let bytes = synth_bytes(&tiny_shape(Architecture::Llama, true), WTYPE, 12);
    let file = GgufFile::from_bytes(&bytes).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in file.metadata().iter().filter(|(k, _)| *k != "llama.block_count") {
        w.set(k, v.clone());
    }
    let err = refusal(&w.to_bytes().unwrap());
    assert!(err.contains("llama.block_count"), "{err}");

    let odd = rewrite(
        &bytes,
        |m| {
            m.insert("llama.attention.head_count_kv", Value::U32(3));
        },
        keep,
    );
    let err = refusal(&odd);
    assert!(err.contains("head_count_kv"), "{err}");

    let moe = rewrite(
        &bytes,
        |m| {
            m.insert("llama.expert_count", Value::U32(8));
        },
        keep,
    );
    let err = refusal(&moe);
    assert!(err.contains("expert"), "{err}");
}

#[test]
fn a_truncated_or_foreign_file_is_an_error() {
    let bytes = synth_bytes(&tiny_shape(Architecture::Llama, true), WTYPE, 13);
    let err = refusal(&bytes[..200]);
    assert!(err.contains("truncated"), "{err}");
    let err = refusal(b"PK\x03\x04 not a model at all");
    assert!(err.contains("not a GGUF file"), "{err}");
}
