//! Checks on the real model, SmolLM2-135M-Instruct (Q4_1), where it is cached
//! (`cargo xtask model smollm2`; `DAWN_LLM_MODEL` names another path): its configuration, and
//! tokenization identical to llama.cpp's `llama-tokenize` over a varied text. Skipped, with the
//! reason printed, where the model is not there.

mod common;

use ggml_dawn::GgmlType;
use ggml_dawn::gguf::Value;
use ggml_dawn_llm::{Architecture, Model, Tokenizer};

fn model() -> Option<Model> {
    match common::real_model() {
        Ok(path) => Some(Model::open(&path).unwrap()),
        Err(why) => {
            eprintln!("skipped: {why}");
            None
        }
    }
}

#[test]
fn smollm2_configuration() {
    let Some(model) = model() else { return };
    let c = &model.config;
    assert_eq!(c.architecture, Architecture::Llama);
    assert_eq!((c.n_layer, c.n_embd, c.n_ff, c.n_vocab), (30, 576, 1536, 49152));
    assert_eq!((c.n_head, c.n_head_kv, c.head_dim), (9, 3, 64));
    assert!(model.tied_output());
    assert_eq!(model.tensors().len(), 272);
    assert_eq!(
        model.tensor("token_embd.weight").unwrap().ggml_type(),
        Some(GgmlType::Q8_0)
    );
    assert_eq!(
        model.tensor("blk.0.attn_q.weight").unwrap().ggml_type(),
        Some(GgmlType::Q4_1)
    );
}

/// The ids llama.cpp's `llama-tokenize -m MODEL -f tokenizer-text.txt --ids --no-escape` prints
/// (`tests/data/smollm2-tokenizer-ids.txt`, made by `tests/data/make-expected-ids.sh`).
#[test]
fn smollm2_tokenizes_as_llama_cpp() {
    let Some(model) = model() else { return };
    let tok = Tokenizer::from_metadata(model.metadata()).unwrap();
    let text = common::fixture_text();
    let got = tok.encode(&text, tok.adds_bos(), true).unwrap();
    common::assert_same_ids(&tok, &got, &common::read_ids("smollm2-tokenizer-ids.txt"), "smollm");
    assert_eq!(tok.decode(&got, true), text);
}

/// SmolLM2's vocabulary under other pre-tokenizers, against llama-tokenize on the same files
/// (`tests/data/smollm2-vocab-<pre>-ids.txt`, made by `make-vocab-fixtures.py`).
#[test]
fn other_pre_tokenizers_split_as_llama_cpp() {
    let Some(model) = model() else { return };
    for pre in ["llama-bpe", "qwen2", "gpt-2", "default", "falcon"] {
        let mut meta = model.metadata().clone();
        meta.insert("tokenizer.ggml.pre", Value::String(pre.into()));
        let tok = Tokenizer::from_metadata(&meta).unwrap();
        let got = tok.encode(&common::fixture_text(), tok.adds_bos(), true).unwrap();
        common::assert_same_ids(
            &tok,
            &got,
            &common::read_ids(&format!("smollm2-vocab-{pre}-ids.txt")),
            pre,
        );
    }
}
