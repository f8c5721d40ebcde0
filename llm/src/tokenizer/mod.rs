//! The tokenizer a GGUF file describes (`tokenizer.ggml.*`), with llama.cpp's semantics: BPE
//! vocabularies (`gpt2`) with the pre-tokenizer named by `tokenizer.ggml.pre`, and SentencePiece
//! vocabularies (`llama`) with scores and byte fallback; special tokens are cut out of the text
//! first (when parsing them is asked for), BOS and EOS are added as the file says.
//!
//! [`Tokenizer::encode`] with `add_special = true, parse_special = true` gives what llama.cpp's
//! `llama-tokenize` prints for the same text (checked over `tests/data/tokenizer-text.txt`).
//!
//! Why the merge loops are written here rather than taken from a crate: on that text with
//! SmolLM2's vocabulary, Hugging Face's `tokenizers` (BPE + `Digits` + `ByteLevel`) and
//! `tiktoken` (ranks from the ids) both give llama.cpp's 1105 ids too, but neither covers what
//! matching llama.cpp needs besides merging: its per-`pre` sequences of split patterns
//! ([`pretokenize`], on `fancy-regex`), its special-token partition, its handling of symbols that
//! are not tokens, Llama 3's whole-word lookup, and its score-driven SentencePiece merges (which
//! neither crate implements). `tiktoken` merges by the rank of the merged bytes rather than by
//! the merge list llama.cpp uses, and `tokenizers` would bring some forty crates for the ~60-line
//! loop in [`bpe`].

pub mod bpe;
pub mod pretokenize;
pub mod spm;

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use ggml_dawn::gguf::{GgufHeader, Metadata};

use crate::error::{LlmError, Result};
use crate::meta;
use bpe::Merges;
use pretokenize::{PreTokenizer, PreTokenizerKind};

/// A token id.
pub type TokenId = u32;

/// A token's type (`tokenizer.ggml.token_type`), as llama.cpp numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenType {
    Undefined,
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

impl TokenType {
    /// The type with GGUF id `id` (an unknown id is `Undefined`, as llama.cpp reads it).
    pub fn from_id(id: i32) -> TokenType {
        match id {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }

    /// The GGUF id.
    pub fn id(self) -> i32 {
        match self {
            TokenType::Undefined => 0,
            TokenType::Normal => 1,
            TokenType::Unknown => 2,
            TokenType::Control => 3,
            TokenType::UserDefined => 4,
            TokenType::Unused => 5,
            TokenType::Byte => 6,
        }
    }
}

/// The tokenization algorithm (`tokenizer.ggml.model`).
#[derive(Debug, Clone)]
enum Algorithm {
    /// Byte-level BPE (`gpt2`).
    Bpe {
        merges: Merges,
        pre: PreTokenizer,
        ignore_merges: bool,
    },
    /// SentencePiece (`llama`).
    Spm,
}

/// One vocabulary entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub text: String,
    pub score: f32,
    pub ty: TokenType,
}

/// The special token ids the file names (or llama.cpp's defaults for its vocabulary type).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    pub bos: Option<TokenId>,
    pub eos: Option<TokenId>,
    /// End of turn: `tokenizer.ggml.eot_token_id`, else a token spelled like one
    /// (`<|eot_id|>`, `<|im_end|>`, …) as llama.cpp finds it.
    pub eot: Option<TokenId>,
    pub unk: Option<TokenId>,
    pub pad: Option<TokenId>,
}

/// Texts llama.cpp takes for an end-of-turn token when the file names none.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];

/// Texts llama.cpp takes for end-of-generation tokens (those of the architectures here).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "<|end_of_text|>",
    "<end_of_utterance>",
];

/// A tokenizer read from a GGUF vocabulary.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    algorithm: Algorithm,
    tokens: Vec<Token>,
    ids: HashMap<String, TokenId>,
    special: SpecialTokens,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    /// Control, user-defined and unknown tokens, longest text first: cut out of the text before
    /// tokenizing it.
    cut_first: Vec<TokenId>,
    /// Tokens that end generation.
    end_of_generation: Vec<TokenId>,
}

/// One part of the text: plain text, or a special token found in it.
enum Fragment<'a> {
    Text(&'a str),
    Token(TokenId),
}

impl Tokenizer {
    /// Reads the vocabulary of the GGUF file at `path` (its header only).
    pub fn from_gguf(path: impl AsRef<Path>) -> Result<Tokenizer> {
        let path = path.as_ref();
        let file = File::open(path)
            .map_err(|e| LlmError::Io(std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))))?;
        let header = GgufHeader::read(BufReader::new(file))?;
        Tokenizer::from_metadata(&header.metadata)
    }

    /// Reads the vocabulary from metadata.
    pub fn from_metadata(meta: &Metadata) -> Result<Tokenizer> {
        let model = meta::get_str(meta, "tokenizer.ggml.model")?
            .ok_or_else(|| LlmError::MissingKey("tokenizer.ggml.model".into()))?;
        let texts = meta::get_str_array(meta, "tokenizer.ggml.tokens")?
            .ok_or_else(|| LlmError::MissingKey("tokenizer.ggml.tokens".into()))?;
        if texts.is_empty() || texts.len() > i32::MAX as usize {
            return Err(LlmError::Vocab(format!("{} tokens", texts.len())));
        }
        let n = texts.len();
        let scores = meta::get_f32_array(meta, "tokenizer.ggml.scores")?;
        let types = meta::get_i32_array(meta, "tokenizer.ggml.token_type")?;
        for (key, len) in [
            ("tokenizer.ggml.scores", scores.as_ref().map(Vec::len)),
            ("tokenizer.ggml.token_type", types.as_ref().map(Vec::len)),
        ] {
            if let Some(len) = len.filter(|&len| len < n) {
                return Err(LlmError::Metadata {
                    key: key.into(),
                    reason: format!("{len} entries for {n} tokens"),
                });
            }
        }
        let mut tokens: Vec<Token> = texts
            .into_iter()
            .enumerate()
            .map(|(i, text)| Token {
                // llama.cpp renames an empty token so that every text is unique.
                text: if text.is_empty() { format!("[EMPTY_{i}]") } else { text },
                score: scores.as_ref().map_or(0.0, |s| s[i]),
                ty: types.as_ref().map_or(TokenType::Normal, |t| TokenType::from_id(t[i])),
            })
            .collect();
        let mut ids = HashMap::with_capacity(n);
        for (i, t) in tokens.iter().enumerate() {
            if ids.insert(t.text.clone(), i as TokenId).is_some() {
                return Err(LlmError::Vocab(format!("token {i} `{}` appears twice", t.text)));
            }
        }

        let pre_name = meta::get_str(meta, "tokenizer.ggml.pre")?;
        let (algorithm, mut special, mut add_bos, mut add_space_prefix) = match model {
            "gpt2" => {
                let lines = meta::get_str_array(meta, "tokenizer.ggml.merges")?
                    .ok_or_else(|| LlmError::MissingKey("tokenizer.ggml.merges".into()))?;
                let kind = PreTokenizerKind::for_name(pre_name)?;
                let algorithm = Algorithm::Bpe {
                    merges: Merges::parse(&lines),
                    pre: PreTokenizer::new(&kind)?,
                    ignore_merges: kind.ignore_merges,
                };
                let defaults = SpecialTokens {
                    bos: Some(11),
                    eos: Some(11),
                    ..SpecialTokens::default()
                };
                (algorithm, defaults, kind.add_bos, false)
            }
            "llama" => {
                let defaults = SpecialTokens {
                    bos: Some(1),
                    eos: Some(2),
                    unk: Some(0),
                    ..SpecialTokens::default()
                };
                (Algorithm::Spm, defaults, true, true)
            }
            other => {
                return Err(LlmError::Vocab(format!(
                    "tokenizer model `{other}` is not supported (gpt2 and llama are)"
                )));
            }
        };
        let mut add_eos = false;
        if let Some(v) = meta::get_bool(meta, "tokenizer.ggml.add_space_prefix")? {
            add_space_prefix = v;
        }
        // A default id past the vocabulary is dropped; a named one past it keeps the default.
        for id in [&mut special.bos, &mut special.eos, &mut special.unk] {
            if id.is_some_and(|i| i as usize >= n) {
                *id = None;
            }
        }
        for (key, slot) in [
            ("tokenizer.ggml.bos_token_id", &mut special.bos),
            ("tokenizer.ggml.eos_token_id", &mut special.eos),
            ("tokenizer.ggml.eot_token_id", &mut special.eot),
            ("tokenizer.ggml.unknown_token_id", &mut special.unk),
            ("tokenizer.ggml.padding_token_id", &mut special.pad),
        ] {
            if let Some(id) = meta::get_u32(meta, key)?.filter(|&id| (id as usize) < n) {
                *slot = Some(id);
            }
        }
        if let Some(v) = meta::get_bool(meta, "tokenizer.ggml.add_bos_token")? {
            add_bos = v;
        }
        if let Some(v) = meta::get_bool(meta, "tokenizer.ggml.add_eos_token")? {
            add_eos = v;
        }
        if add_bos && special.bos.is_none() {
            return Err(LlmError::Vocab(
                "BOS is to be added but the vocabulary has no BOS token".into(),
            ));
        }
        if add_eos && special.eos.is_none() {
            return Err(LlmError::Vocab(
                "EOS is to be added but the vocabulary has no EOS token".into(),
            ));
        }
        if special.eot.is_none() {
            special.eot = EOT_TEXTS.iter().find_map(|t| ids.get(*t).copied());
        }
        // The end-of-generation set, as llama.cpp builds it: tokens spelled like an end of turn
        // (made control tokens when they are not), then EOS and EOT.
        let mut end_of_generation: Vec<TokenId> = EOG_TEXTS.iter().filter_map(|t| ids.get(*t).copied()).collect();
        for &id in &end_of_generation {
            tokens[id as usize].ty = TokenType::Control;
        }
        end_of_generation.extend(special.eos.iter().chain(special.eot.iter()));
        end_of_generation.sort_unstable();
        end_of_generation.dedup();

        let mut cut_first: Vec<TokenId> = (0..n as TokenId)
            .filter(|&i| {
                matches!(
                    tokens[i as usize].ty,
                    TokenType::Control | TokenType::UserDefined | TokenType::Unknown
                )
            })
            .collect();
        cut_first.sort_by_key(|&i| std::cmp::Reverse(tokens[i as usize].text.len()));

        Ok(Tokenizer {
            algorithm,
            tokens,
            ids,
            special,
            add_bos,
            add_eos,
            add_space_prefix,
            cut_first,
            end_of_generation,
        })
    }

    /// The number of tokens.
    pub fn n_tokens(&self) -> usize {
        self.tokens.len()
    }

    /// The vocabulary entry of `id`.
    pub fn token(&self, id: TokenId) -> Option<&Token> {
        self.tokens.get(id as usize)
    }

    /// The id of the token spelled `text` exactly.
    pub fn token_id(&self, text: &str) -> Option<TokenId> {
        self.ids.get(text).copied()
    }

    /// The special token ids.
    pub fn special(&self) -> &SpecialTokens {
        &self.special
    }

    /// Whether encoding with `add_special` starts with BOS.
    pub fn adds_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether encoding with `add_special` ends with EOS.
    pub fn adds_eos(&self) -> bool {
        self.add_eos
    }

    /// Whether generation stops at `id`: EOS, EOT, or a token spelled like an end of turn
    /// (llama.cpp's end-of-generation set).
    pub fn is_end_of_generation(&self, id: TokenId) -> bool {
        self.end_of_generation.binary_search(&id).is_ok()
    }

    /// Whether this is a BPE (`gpt2`) vocabulary rather than a SentencePiece one.
    pub fn is_bpe(&self) -> bool {
        matches!(self.algorithm, Algorithm::Bpe { .. })
    }

    /// Tokenizes `text`. With `add_special`, BOS and EOS are added where the vocabulary says;
    /// with `parse_special`, control tokens spelled in the text become those tokens
    /// (user-defined tokens always do), as llama.cpp's `llama_tokenize`.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<TokenId>> {
        let fragments = self.cut_special(text, parse_special);
        let mut out = Vec::new();
        if add_special && self.add_bos {
            out.extend(self.special.bos);
        }
        match &self.algorithm {
            Algorithm::Bpe {
                merges,
                pre,
                ignore_merges,
            } => {
                for fragment in fragments {
                    match fragment {
                        Fragment::Token(id) => out.push(id),
                        Fragment::Text(text) => self.encode_bpe(text, merges, pre, *ignore_merges, &mut out)?,
                    }
                }
            }
            Algorithm::Spm => {
                let mut prev_special = true;
                for fragment in fragments {
                    match fragment {
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                        Fragment::Text(text) => {
                            let prefix = if self.add_space_prefix && prev_special { " " } else { "" };
                            let escaped = format!("{prefix}{text}").replace(' ', "\u{2581}");
                            self.encode_spm(&escaped, &mut out)?;
                            prev_special = false;
                        }
                    }
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.special.eos);
        }
        Ok(out)
    }

    fn encode_bpe(
        &self,
        text: &str,
        merges: &Merges,
        pre: &PreTokenizer,
        ignore_merges: bool,
        out: &mut Vec<TokenId>,
    ) -> Result<()> {
        for word in pre.split(text)? {
            let encoded = bpe::encode_bytes(word);
            if ignore_merges && let Some(id) = self.token_id(&encoded) {
                out.push(id);
                continue;
            }
            for symbol in merges.apply(&encoded) {
                match self.token_id(symbol) {
                    Some(id) => out.push(id),
                    // As llama.cpp: each single byte of the symbol that is itself a token (only
                    // an ASCII character can be); the rest is dropped. A byte-level vocabulary
                    // holds every character of the byte encoder, so this is rare.
                    None => out.extend(
                        symbol
                            .chars()
                            .filter(char::is_ascii)
                            .filter_map(|c| self.token_id(c.encode_utf8(&mut [0; 4]))),
                    ),
                }
            }
        }
        Ok(())
    }

    fn encode_spm(&self, text: &str, out: &mut Vec<TokenId>) -> Result<()> {
        let symbols = spm::segment(text, |s| self.token_id(s).map(|id| self.tokens[id as usize].score));
        for symbol in symbols {
            if let Some(id) = self.token_id(symbol) {
                out.push(id);
                continue;
            }
            for b in symbol.bytes() {
                let byte_token = format!("<0x{b:02X}>");
                match self.token_id(&byte_token).or(self.special.unk) {
                    Some(id) => out.push(id),
                    None => {
                        return Err(LlmError::Tokenize(format!(
                            "no token for byte {b:#04x} (no `{byte_token}` and no unknown token)"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Cuts the special tokens out of `text`, longest first, as llama.cpp's partition does.
    fn cut_special<'a>(&self, text: &'a str, parse_special: bool) -> Vec<Fragment<'a>> {
        let mut fragments = if text.is_empty() {
            Vec::new()
        } else {
            vec![Fragment::Text(text)]
        };
        for &id in &self.cut_first {
            let token = &self.tokens[id as usize];
            if !parse_special && matches!(token.ty, TokenType::Control | TokenType::Unknown) {
                continue;
            }
            let needle = token.text.as_str();
            let mut next = Vec::with_capacity(fragments.len());
            for fragment in fragments {
                let Fragment::Text(mut rest) = fragment else {
                    next.push(fragment);
                    continue;
                };
                while let Some(at) = rest.find(needle) {
                    if at > 0 {
                        next.push(Fragment::Text(&rest[..at]));
                    }
                    next.push(Fragment::Token(id));
                    rest = &rest[at + needle.len()..];
                }
                if !rest.is_empty() {
                    next.push(Fragment::Text(rest));
                }
            }
            fragments = next;
        }
        fragments
    }

    /// The bytes `id` stands for in text (llama.cpp's `token_to_piece`); control and unknown
    /// tokens give their text only with `special`.
    pub fn token_to_piece(&self, id: TokenId, special: bool) -> Vec<u8> {
        let Some(token) = self.tokens.get(id as usize) else {
            return Vec::new();
        };
        match token.ty {
            TokenType::Control | TokenType::Unknown if !special => Vec::new(),
            TokenType::Control | TokenType::Unknown | TokenType::UserDefined => token.text.as_bytes().to_vec(),
            TokenType::Normal => match self.algorithm {
                Algorithm::Bpe { .. } => decode_byte_chars(&token.text),
                Algorithm::Spm => token.text.replace('\u{2581}', " ").into_bytes(),
            },
            TokenType::Byte => parse_byte_token(&token.text).map_or_else(Vec::new, |b| vec![b]),
            TokenType::Undefined | TokenType::Unused => Vec::new(),
        }
    }

    /// The text of `ids` (invalid UTF-8 replaced), as llama.cpp's detokenizer: without
    /// `special`, a leading BOS is dropped and control tokens give nothing; where the encoder adds
    /// a space prefix, the first piece loses one leading space.
    pub fn decode(&self, ids: &[TokenId], special: bool) -> String {
        let ids = match ids.split_first() {
            Some((&first, rest)) if !special && self.add_bos && Some(first) == self.special.bos => rest,
            _ => ids,
        };
        let mut bytes = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            let piece = self.token_to_piece(id, special);
            let strip = i == 0 && self.add_space_prefix && piece.first() == Some(&b' ');
            bytes.extend_from_slice(if strip { &piece[1..] } else { &piece });
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// A byte-level BPE token's bytes; a character outside the byte encoder is kept as its UTF-8.
fn decode_byte_chars(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match bpe::char_byte(c) {
            Some(b) => out.push(b),
            None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out
}

/// The byte of a `<0xXX>` token.
fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}
