//! Helpers shared by the tests: temporary files, small vocabularies and synthetic models.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use ggml_dawn::gguf::{GgufFile, GgufWriter, Metadata, Value};
use ggml_dawn_llm::Architecture;
use ggml_dawn_llm::meta;
use ggml_dawn_llm::synth::{self, ModelShape, WeightType};
use ggml_dawn_llm::tokenizer::TokenType;
use ggml_dawn_llm::tokenizer::bpe;

/// A fresh folder under the system's temporary folder, removed when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("dawn-llm-test-{}-{name}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A small shape of `arch`: 2 layers, width 64, 4 query heads over 2 KV heads.
pub fn tiny_shape(arch: Architecture, tied: bool) -> ModelShape {
    ModelShape {
        name: format!("tiny-{arch}"),
        architecture: arch,
        n_vocab: 300,
        n_ctx_train: 256,
        n_embd: 64,
        n_layer: 2,
        n_ff: 96,
        n_head: 4,
        n_head_kv: 2,
        rope_freq_base: 10000.0,
        rms_norm_eps: 1e-5,
        tied_output: tied,
    }
}

/// The bytes of a synthetic model.
pub fn synth_bytes(shape: &ModelShape, wtype: WeightType, seed: u64) -> Vec<u8> {
    let mut out = Vec::new();
    synth::write_model(shape, wtype, seed, &mut out, |_, _| {}).unwrap();
    out
}

/// Rewrites a GGUF file with its metadata changed by `edit_meta` and its tensors filtered and
/// changed by `edit_tensor` (return `None` to drop one).
pub fn rewrite(
    bytes: &[u8],
    edit_meta: impl Fn(&mut Metadata),
    edit_tensor: impl Fn(&str, u32, [usize; 4], &[u8]) -> Option<(String, u32, [usize; 4], Vec<u8>)>,
) -> Vec<u8> {
    let file = GgufFile::from_bytes(bytes).unwrap();
    let mut meta = file.metadata().clone();
    edit_meta(&mut meta);
    let mut w = GgufWriter::new();
    for (k, v) in meta.iter() {
        w.set(k, v.clone());
    }
    for t in file.tensors() {
        if let Some((name, ty, ne, data)) = edit_tensor(&t.name, t.ty, t.ne, file.tensor_data(&t.name).unwrap()) {
            let n_dims = ne.iter().rposition(|&n| n > 1).map_or(1, |i| i + 1) as u32;
            w.add_raw_tensor(&name, ty, n_dims, ne, data).unwrap();
        }
    }
    w.to_bytes().unwrap()
}

/// A tensor passed through unchanged by [`rewrite`].
pub fn keep(name: &str, ty: u32, ne: [usize; 4], data: &[u8]) -> Option<(String, u32, [usize; 4], Vec<u8>)> {
    Some((name.to_owned(), ty, ne, data.to_vec()))
}

/// Metadata holding only `entries`.
pub fn metadata(entries: Vec<(&str, Value)>) -> Metadata {
    let mut m = Metadata::default();
    for (k, v) in entries {
        m.insert(k, v);
    }
    m
}

/// A small `gpt2` vocabulary: the 256 byte-encoder characters (id = byte), then the merges'
/// results in merge order, then `<|endoftext|>` (control). Words: "Hello", "Ġworld", "Ġthe".
pub fn bpe_vocab(pre: &str, extra: &[(&str, Value)]) -> Metadata {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| bpe::encode_bytes_one(b).to_string()).collect();
    let merges = [
        "H e", "l l", "He ll", "Hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "Ġ t", "h e", "Ġt he",
    ];
    for m in merges {
        tokens.push(m.replace(' ', ""));
    }
    // A token no merge reaches: only whole-word lookup (Llama 3's ignore_merges) finds it.
    tokens.push("Ġunreached".into());
    tokens.push("<|endoftext|>".into());
    let mut types = vec![TokenType::Normal.id(); tokens.len()];
    *types.last_mut().unwrap() = TokenType::Control.id();
    let eot = tokens.len() as u32 - 1;
    let mut entries = vec![
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.pre", Value::String(pre.into())),
        ("tokenizer.ggml.tokens", meta::str_array(tokens)),
        ("tokenizer.ggml.token_type", meta::i32_array(&types)),
        (
            "tokenizer.ggml.merges",
            meta::str_array(merges.iter().map(|s| s.to_string()).collect()),
        ),
        ("tokenizer.ggml.bos_token_id", Value::U32(eot)),
        ("tokenizer.ggml.eos_token_id", Value::U32(eot)),
    ];
    entries.extend(extra.iter().cloned());
    metadata(entries)
}

/// A small `llama` (SentencePiece) vocabulary: `<unk>`, `<s>`, `</s>`, the 256 byte tokens, then
/// pieces with scores (longer pieces score higher, as in real vocabularies).
pub fn spm_vocab() -> Metadata {
    let mut tokens = vec!["<unk>".to_string(), "<s>".into(), "</s>".into()];
    let mut scores = vec![0.0f32, 0.0, 0.0];
    let mut types = vec![
        TokenType::Unknown.id(),
        TokenType::Control.id(),
        TokenType::Control.id(),
    ];
    for b in 0..=255u32 {
        tokens.push(format!("<0x{b:02X}>"));
        scores.push(0.0);
        types.push(TokenType::Byte.id());
    }
    let pieces = [
        ("▁", -1.0),
        ("h", -2.0),
        ("e", -2.0),
        ("l", -2.0),
        ("o", -2.0),
        ("w", -2.0),
        ("r", -2.0),
        ("d", -2.0),
        ("▁h", -3.0),
        ("he", -3.5),
        ("ll", -3.0),
        ("▁he", -4.0),
        ("llo", -4.0),
        ("▁hello", -5.0),
        ("▁w", -3.0),
        ("or", -3.0),
        ("ld", -3.0),
        ("▁wor", -4.5),
        ("▁world", -5.5),
    ];
    for (p, s) in pieces {
        tokens.push(p.into());
        scores.push(s);
        types.push(TokenType::Normal.id());
    }
    metadata(vec![
        ("tokenizer.ggml.model", Value::String("llama".into())),
        ("tokenizer.ggml.tokens", meta::str_array(tokens)),
        ("tokenizer.ggml.scores", meta::f32_array(&scores)),
        ("tokenizer.ggml.token_type", meta::i32_array(&types)),
        ("tokenizer.ggml.bos_token_id", Value::U32(1)),
        ("tokenizer.ggml.eos_token_id", Value::U32(2)),
        ("tokenizer.ggml.unknown_token_id", Value::U32(0)),
    ])
}

/// Where the real model is cached, if it is: `DAWN_LLM_MODEL`, else
/// `<cache>/models/SmolLM2-135M-Instruct.Q4_1.gguf` (`cargo xtask model smollm2`).
pub fn real_model() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("DAWN_LLM_MODEL").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let cache = std::env::var_os("DAWN_COMPUTE_CACHE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/dawn-compute"));
    let path = cache.join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{} is not there (run `cargo xtask model smollm2`)",
            path.display()
        ))
    }
}

/// The type of the synthetic weights most tests use.
pub const WTYPE: WeightType = WeightType::Q8_0;

/// The test data folder.
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// The varied text the tokenizer fixtures were made from.
pub fn fixture_text() -> String {
    std::fs::read_to_string(data_dir().join("tokenizer-text.txt")).unwrap()
}

/// Ids as llama-tokenize --ids prints them: `[1, 2, 3]`.
pub fn read_ids(name: &str) -> Vec<u32> {
    let text = std::fs::read_to_string(data_dir().join(name)).unwrap();
    let inner = text.trim().trim_matches(['[', ']']);
    if inner.is_empty() {
        return Vec::new();
    }
    inner.split(", ").map(|s| s.parse().unwrap()).collect()
}

/// Panics at the first token where `got` and `expected` differ, showing both and the text
/// around it.
pub fn assert_same_ids(tok: &ggml_dawn_llm::Tokenizer, got: &[u32], expected: &[u32], what: &str) {
    let window = |ids: &[u32], i: usize| ids[i.min(ids.len())..(i + 5).min(ids.len())].to_vec();
    if let Some(i) = (0..got.len().min(expected.len())).find(|&i| got[i] != expected[i]) {
        panic!(
            "{what}: first difference at token {i}: got {:?} ({:?}), llama.cpp {:?} ({:?}), after {:?}",
            window(got, i),
            tok.decode(&window(got, i), true),
            window(expected, i),
            tok.decode(&window(expected, i), true),
            tok.decode(&got[i.saturating_sub(5)..i], true),
        );
    }
    assert_eq!(got.len(), expected.len(), "{what}: one list is a prefix of the other");
}
