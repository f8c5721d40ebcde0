//! BPE pre-tokenization: the text is cut into words by a sequence of regular expressions, the
//! ones llama.cpp uses for the `tokenizer.ggml.pre` value the file names. Each expression cuts
//! every piece the previous one left: its matches become pieces, and so does the text between
//! matches (Hugging Face's `Split` with `Isolated` behaviour).

use fancy_regex::Regex;

use crate::error::{LlmError, Result};

/// GPT-2's pattern.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
/// Llama 3's pattern (case-insensitive contractions spelled out), digits in threes.
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen 2's pattern: Llama 3's with single digits.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// What a `tokenizer.ggml.pre` value means for tokenization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreTokenizerKind {
    /// The expressions, applied in order.
    pub patterns: &'static [&'static str],
    /// A word that is itself a token is emitted whole, without merges (Llama 3).
    pub ignore_merges: bool,
    /// The BOS default when the file does not say (`tokenizer.ggml.add_bos_token`).
    pub add_bos: bool,
}

impl PreTokenizerKind {
    /// The kind for `pre` (`None` or `default` for llama.cpp's default), or an error naming it.
    pub fn for_name(pre: Option<&str>) -> Result<PreTokenizerKind> {
        let kind = |patterns, ignore_merges, add_bos| PreTokenizerKind {
            patterns,
            ignore_merges,
            add_bos,
        };
        Ok(match pre.unwrap_or("default") {
            "default" => kind(
                &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"],
                false,
                false,
            ),
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "pixtral" => kind(&[LLAMA3], true, true),
            "dbrx" | "smaug-bpe" | "chatglm-bpe" => kind(&[LLAMA3], false, false),
            "qwen2" | "deepseek-r1-qwen" => kind(&[QWEN2], false, false),
            "gpt-2" | "phi-2" | "mpt" | "olmo" | "jais" => kind(&[GPT2], false, false),
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva-7b" => {
                kind(&[r"\p{N}", GPT2], false, false)
            }
            "falcon" => kind(&[r"[\p{P}\$\+<=>\^~\|`]+", GPT2, "[0-9][0-9][0-9]"], false, false),
            other => {
                return Err(LlmError::Vocab(format!(
                    "pre-tokenizer `{other}` is not supported (supported: default, llama3, llama-bpe, \
                     qwen2, gpt-2, smollm, starcoder, falcon, dbrx, …)"
                )));
            }
        })
    }
}

/// Compiled pre-tokenizer expressions.
#[derive(Debug, Clone)]
pub struct PreTokenizer {
    regexes: Vec<Regex>,
}

impl PreTokenizer {
    /// Compiles `kind`'s expressions.
    pub fn new(kind: &PreTokenizerKind) -> Result<PreTokenizer> {
        let regexes = kind
            .patterns
            .iter()
            .map(|p| Regex::new(p).map_err(|e| LlmError::Vocab(format!("pre-tokenizer pattern `{p}`: {e}"))))
            .collect::<Result<_>>()?;
        Ok(PreTokenizer { regexes })
    }

    /// Cuts `text` into words.
    pub fn split<'a>(&self, text: &'a str) -> Result<Vec<&'a str>> {
        let mut pieces = vec![text];
        for re in &self.regexes {
            let mut next = Vec::with_capacity(pieces.len() * 2);
            for piece in pieces {
                let mut last = 0;
                for m in re.find_iter(piece) {
                    let m = m.map_err(|e| LlmError::Tokenize(format!("pre-tokenizer: {e}")))?;
                    if m.start() == m.end() {
                        continue;
                    }
                    if m.start() > last {
                        next.push(&piece[last..m.start()]);
                    }
                    next.push(m.as_str());
                    last = m.end();
                }
                if last < piece.len() {
                    next.push(&piece[last..]);
                }
            }
            pieces = next;
        }
        Ok(pieces)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pre: &str, text: &str) -> Vec<String> {
        let kind = PreTokenizerKind::for_name(Some(pre)).unwrap();
        PreTokenizer::new(&kind)
            .unwrap()
            .split(text)
            .unwrap()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn smollm_isolates_every_digit_and_keeps_gpt2_words() {
        assert_eq!(
            split("smollm", "I'm 12 ok  x"),
            ["I", "'m", " ", "1", "2", " ok", " ", " x"]
        );
    }

    #[test]
    fn llama3_groups_digits_in_threes_and_keeps_newline_runs() {
        assert_eq!(split("llama-bpe", "12345 a\n\n b"), ["123", "45", " a", "\n\n", " b"]);
    }

    #[test]
    fn every_piece_of_the_text_is_kept_in_order() {
        for pre in ["default", "llama3", "qwen2", "gpt-2", "smollm", "falcon"] {
            let text = "Ünïcode — 東京 42.5%\t\n  x 🙂🙂 it's";
            assert_eq!(split(pre, text).concat(), text, "{pre}");
        }
    }

    #[test]
    fn an_unknown_pre_tokenizer_is_named() {
        let err = PreTokenizerKind::for_name(Some("klingon")).unwrap_err().to_string();
        assert!(err.contains("klingon"), "{err}");
    }
}
