//! The tokenizer on small vocabularies built here: BPE (`gpt2`) with merges and pre-tokenizers,
//! SentencePiece (`llama`) with scores and byte fallback, special tokens, BOS/EOS, refusals.

mod common;

use ggml_dawn::gguf::{GgufWriter, Value};
use ggml_dawn_llm::Tokenizer;
use ggml_dawn_llm::tokenizer::TokenType;

use common::{TempDir, bpe_vocab, spm_vocab};

const HELLO: u32 = 259;
const WORLD: u32 = 264;
const THE: u32 = 267;
const UNREACHED: u32 = 268;
const EOT: u32 = 269;

#[test]
fn bpe_merges_by_rank_into_whole_words() {
    let tok = Tokenizer::from_metadata(&bpe_vocab("gpt-2", &[])).unwrap();
    assert!(tok.is_bpe());
    assert_eq!(tok.encode("Hello world the", false, true).unwrap(), [HELLO, WORLD, THE]);
    // A word no merge covers falls apart into its byte-level characters (id = byte here).
    assert_eq!(
        tok.encode("Hi!", false, true).unwrap(),
        [b'H' as u32, b'i' as u32, b'!' as u32]
    );
}

#[test]
fn bpe_special_tokens_are_cut_out_only_when_parsing_them() {
    let tok = Tokenizer::from_metadata(&bpe_vocab("gpt-2", &[])).unwrap();
    assert_eq!(
        tok.encode("Hello<|endoftext|> world", false, true).unwrap(),
        [HELLO, EOT, WORLD]
    );
    let plain = tok.encode("Hello<|endoftext|>", false, false).unwrap();
    assert_eq!(plain[0], HELLO);
    assert!(!plain.contains(&EOT));
    assert_eq!(tok.decode(&plain, false), "Hello<|endoftext|>");
    // The end-of-text token ends generation (found by its spelling, as llama.cpp does).
    assert!(tok.is_end_of_generation(EOT));
    assert!(!tok.is_end_of_generation(HELLO));
}

#[test]
fn bpe_decoding_gives_back_any_text() {
    let tok = Tokenizer::from_metadata(&bpe_vocab("gpt-2", &[])).unwrap();
    for text in ["Hello world", "  tabs\tand\nnewlines\r\n", "Größe 東京 🙂👨‍👩‍👧 42.5%", ""] {
        let ids = tok.encode(text, false, true).unwrap();
        assert_eq!(tok.decode(&ids, true), text);
    }
}

#[test]
fn bpe_adds_bos_and_eos_as_the_file_says() {
    let plain = Tokenizer::from_metadata(&bpe_vocab("gpt-2", &[])).unwrap();
    assert!(!plain.adds_bos());
    assert_eq!(plain.encode("Hello", true, true).unwrap(), [HELLO]);
    let both = Tokenizer::from_metadata(&bpe_vocab(
        "gpt-2",
        &[
            ("tokenizer.ggml.add_bos_token", Value::Bool(true)),
            ("tokenizer.ggml.add_eos_token", Value::Bool(true)),
        ],
    ))
    .unwrap();
    assert_eq!(both.encode("Hello", true, true).unwrap(), [EOT, HELLO, EOT]);
    assert_eq!(both.encode("Hello", false, true).unwrap(), [HELLO]);
    // Llama 3's pre-tokenizer adds BOS unless the file says otherwise.
    let llama3 = Tokenizer::from_metadata(&bpe_vocab("llama-bpe", &[])).unwrap();
    assert!(llama3.adds_bos());
}

#[test]
fn llama3_takes_a_word_that_is_a_token_whole() {
    let llama3 = Tokenizer::from_metadata(&bpe_vocab("llama-bpe", &[])).unwrap();
    assert_eq!(llama3.encode(" unreached", false, true).unwrap(), [UNREACHED]);
    let gpt2 = Tokenizer::from_metadata(&bpe_vocab("gpt-2", &[])).unwrap();
    let ids = gpt2.encode(" unreached", false, true).unwrap();
    assert!(!ids.contains(&UNREACHED) && ids.len() > 1, "{ids:?}");
}

#[test]
fn the_pre_tokenizer_decides_how_digits_split() {
    // smollm isolates every digit; llama3 groups them in threes. Both vocabularies have only
    // single-character digit tokens, so the ids show the split through the number of tokens.
    let smollm = Tokenizer::from_metadata(&bpe_vocab("smollm", &[])).unwrap();
    assert_eq!(smollm.encode("12345", false, true).unwrap().len(), 5);
    let qwen2 = Tokenizer::from_metadata(&bpe_vocab("qwen2", &[])).unwrap();
    assert_eq!(qwen2.encode("12345", false, true).unwrap().len(), 5);
}

#[test]
fn spm_merges_by_score_with_a_space_prefix_and_bos() {
    let tok = Tokenizer::from_metadata(&spm_vocab()).unwrap();
    assert!(!tok.is_bpe());
    assert!(tok.adds_bos());
    let id = |t: &str| tok.token_id(t).unwrap();
    assert_eq!(
        tok.encode("hello world", true, true).unwrap(),
        [1, id("▁hello"), id("▁world")]
    );
    assert_eq!(tok.encode("hello", false, true).unwrap(), [id("▁hello")]);
    assert_eq!(
        tok.decode(&tok.encode("hello world", true, true).unwrap(), false),
        "hello world"
    );
}

#[test]
fn spm_falls_back_to_byte_tokens() {
    let tok = Tokenizer::from_metadata(&spm_vocab()).unwrap();
    let ids = tok.encode("hé🙂", false, true).unwrap();
    let id = |t: &str| tok.token_id(t).unwrap();
    // "▁h", then é's two bytes and the emoji's four.
    assert_eq!(ids[0], id("▁h"));
    assert_eq!(&ids[1..3], [id("<0xC3>"), id("<0xA9>")]);
    assert_eq!(ids.len(), 7);
    assert!(ids[1..].iter().all(|&i| tok.token(i).unwrap().ty == TokenType::Byte));
    assert_eq!(tok.decode(&ids, false), "hé🙂");
}

#[test]
fn spm_special_tokens_in_the_text() {
    let tok = Tokenizer::from_metadata(&spm_vocab()).unwrap();
    let id = |t: &str| tok.token_id(t).unwrap();
    // After a special token the next text gets the space prefix again.
    assert_eq!(
        tok.encode("hello</s>world", false, true).unwrap(),
        [id("▁hello"), 2, id("▁world")]
    );
}

#[test]
fn from_gguf_reads_the_file_header() {
    let dir = TempDir::new("vocab");
    let mut w = GgufWriter::new();
    for (k, v) in bpe_vocab("gpt-2", &[]).iter() {
        w.set(k, v.clone());
    }
    let path = dir.path().join("vocab.gguf");
    std::fs::write(&path, w.to_bytes().unwrap()).unwrap();
    let tok = Tokenizer::from_gguf(&path).unwrap();
    assert_eq!(tok.encode("Hello world", false, true).unwrap(), [HELLO, WORLD]);
    let missing = Tokenizer::from_gguf(dir.path().join("nope.gguf"))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("nope.gguf"), "{missing}");
}

#[test]
fn vocabularies_this_crate_cannot_run_are_refused_by_name() {
    let mut m = bpe_vocab("gpt-2", &[]);
    m.insert("tokenizer.ggml.model", Value::String("bert".into()));
    let err = Tokenizer::from_metadata(&m).unwrap_err().to_string();
    assert!(err.contains("bert"), "{err}");

    let err = Tokenizer::from_metadata(&bpe_vocab("klingon", &[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("klingon"), "{err}");

    let mut m = bpe_vocab("gpt-2", &[]);
    let tokens: Vec<String> = vec!["a".into(), "a".into()];
    m.insert("tokenizer.ggml.tokens", ggml_dawn_llm::meta::str_array(tokens));
    m.insert("tokenizer.ggml.token_type", ggml_dawn_llm::meta::i32_array(&[1, 1]));
    let err = Tokenizer::from_metadata(&m).unwrap_err().to_string();
    assert!(err.contains("twice"), "{err}");

    let m = common::metadata(vec![("tokenizer.ggml.model", Value::String("gpt2".into()))]);
    let err = Tokenizer::from_metadata(&m).unwrap_err().to_string();
    assert!(err.contains("tokenizer.ggml.tokens"), "{err}");
}

/// A SentencePiece vocabulary grown from the varied text (`tests/data/spm-vocab.gguf`), and the
/// ids llama.cpp's `llama-tokenize` gives for that text with it (`make-vocab-fixtures.py`).
#[test]
fn spm_tokenizes_the_varied_text_as_llama_cpp() {
    let tok = Tokenizer::from_gguf(common::data_dir().join("spm-vocab.gguf")).unwrap();
    let got = tok.encode(&common::fixture_text(), tok.adds_bos(), true).unwrap();
    common::assert_same_ids(&tok, &got, &common::read_ids("spm-vocab-ids.txt"), "spm");
    // Decoding gives the text back (BOS left out, the control token kept), but for the space
    // prefix SentencePiece puts before text that follows a special token.
    assert_eq!(got[0], tok.special().bos.unwrap());
    let expected = common::fixture_text().replace("<|im_start|>", "<|im_start|> ");
    assert_eq!(tok.decode(&got[1..], true), expected);
}
