//! A synthetic byte-level BPE vocabulary of any size: the 256 byte-encoder characters, words
//! over a 27-letter alphabet (`Ġ` and `a`–`z`) built by merges one letter at a time, shortest
//! first, and two control tokens (BOS and EOS) at the end. Every merge's result is a token, so
//! llama.cpp and this crate's tokenizer accept it as they accept a real one.

use ggml_dawn::gguf::Value;

use crate::meta;
use crate::tokenizer::TokenType;
use crate::tokenizer::bpe;

/// The beginning-of-text token's text.
pub const BOS_TEXT: &str = "<|begin_of_text|>";
/// The end-of-text token's text.
pub const EOS_TEXT: &str = "<|end_of_text|>";

/// The vocabulary's metadata entries (`tokenizer.ggml.*`), for `n_vocab` tokens (at least 258).
pub fn metadata(n_vocab: usize) -> Vec<(&'static str, Value)> {
    let n_vocab = n_vocab.max(258);
    let mut tokens: Vec<String> = (0..=255u8).map(|b| bpe::encode_bytes_one(b).to_string()).collect();
    let alphabet: Vec<char> = std::iter::once('Ġ').chain('a'..='z').collect();
    let n_words = n_vocab - 256 - 2;
    let mut merges = Vec::with_capacity(n_words);
    // Breadth first: all words of length 2, then of length 3, …, each a shorter word plus a letter.
    let mut level: Vec<String> = alphabet.iter().map(|c| c.to_string()).collect();
    'outer: loop {
        let mut next_level = Vec::with_capacity(level.len() * alphabet.len());
        for prefix in &level {
            for &c in &alphabet {
                if merges.len() == n_words {
                    break 'outer;
                }
                let word = format!("{prefix}{c}");
                merges.push(format!("{prefix} {c}"));
                tokens.push(word.clone());
                next_level.push(word);
            }
        }
        level = next_level;
    }
    let bos = tokens.len() as u32;
    tokens.push(BOS_TEXT.into());
    tokens.push(EOS_TEXT.into());
    let mut types = vec![TokenType::Normal.id(); tokens.len()];
    types[bos as usize] = TokenType::Control.id();
    types[bos as usize + 1] = TokenType::Control.id();
    vec![
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.pre", Value::String("gpt-2".into())),
        ("tokenizer.ggml.tokens", meta::str_array(tokens)),
        ("tokenizer.ggml.token_type", meta::i32_array(&types)),
        ("tokenizer.ggml.merges", meta::str_array(merges)),
        ("tokenizer.ggml.bos_token_id", Value::U32(bos)),
        ("tokenizer.ggml.eos_token_id", Value::U32(bos + 1)),
        ("tokenizer.ggml.add_bos_token", Value::Bool(true)),
    ]
}
