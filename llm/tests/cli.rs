//! The `dawn-llm` command: tokenization of a small model's vocabulary, and exit status 2 with one
//! line for bad input and for what needs the GPU decoder.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use ggml_dawn::gguf::Value;
use ggml_dawn_llm::Architecture;

use common::{TempDir, WTYPE, keep, rewrite, synth_bytes, tiny_shape};

fn dawn_llm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dawn-llm"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exit status 2 and a single line on standard error holding `needle`.
fn assert_refused(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "wanted `{needle}` in: {err}");
}

fn tiny_model(dir: &Path) -> String {
    let path = dir.join("tiny.gguf");
    std::fs::write(&path, synth_bytes(&tiny_shape(Architecture::Llama, true), WTYPE, 1)).unwrap();
    path.display().to_string()
}

#[test]
fn tokenize_prints_ids_as_llama_tokenize_does() {
    let dir = TempDir::new("cli-tokenize");
    let model = tiny_model(dir.path());
    let out = dawn_llm(&["tokenize", "-m", &model, "-p", "hello world", "--ids"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with('[') && text.ends_with("]\n"), "{text:?}");
    let ids: Vec<u32> = text
        .trim()
        .trim_matches(['[', ']'])
        .split(", ")
        .map(|s| s.parse().unwrap())
        .collect();
    // BOS (the synthetic vocabulary's second-to-last token), then the words.
    assert_eq!(ids[0], 298);
    assert!(ids.len() > 2);

    let out = dawn_llm(&["tokenize", "-m", &model, "-p", "hello", "--no-bos", "--show-count"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("-> 'h") && text.contains("Total number of tokens:"),
        "{text}"
    );
    assert!(!text.contains("begin_of_text"), "{text}");
}

#[test]
fn missing_and_corrupt_files_exit_2_with_one_line() {
    let dir = TempDir::new("cli-bad-files");
    let missing = dir.path().join("missing.gguf").display().to_string();
    assert_refused(&dawn_llm(&["tokenize", "-m", &missing, "-p", "x"]), "missing.gguf");
    let corrupt = dir.path().join("corrupt.gguf");
    std::fs::write(&corrupt, b"GGUF\x03\x00\x00\x00garbage").unwrap();
    assert_refused(&dawn_llm(&["bench", "-m", corrupt.to_str().unwrap()]), "truncated");
}

#[test]
fn an_unsupported_architecture_exits_2_naming_it() {
    let dir = TempDir::new("cli-arch");
    let bytes = synth_bytes(&tiny_shape(Architecture::Llama, true), WTYPE, 2);
    let bert = rewrite(
        &bytes,
        |m| {
            m.insert("general.architecture", Value::String("bert".into()));
        },
        keep,
    );
    let path = dir.path().join("bert.gguf");
    std::fs::write(&path, bert).unwrap();
    assert_refused(
        &dawn_llm(&["generate", "-m", path.to_str().unwrap(), "-p", "hi"]),
        "architecture `bert`",
    );
}

#[test]
fn bad_flags_exit_2() {
    let out = dawn_llm(&["generate", "--frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    let out = dawn_llm(&[
        "synth",
        "--like",
        "gpt-9",
        "--type",
        "q4_0",
        "-o",
        "/nonexistent/x.gguf",
    ]);
    assert_refused(&out, "gpt-9");
    let out = dawn_llm(&[
        "synth",
        "--like",
        "smollm2-135m",
        "--type",
        "q3_k",
        "-o",
        "/nonexistent/x.gguf",
    ]);
    assert_refused(&out, "q3_k");
    let out = dawn_llm(&["generate", "-m", "m.gguf", "-p", "hi", "--top-p", "2"]);
    assert_refused(&out, "top-p");
}

#[test]
fn the_decoder_commands_say_they_are_not_implemented_yet() {
    let dir = TempDir::new("cli-not-yet");
    let model = tiny_model(dir.path());
    let text = dir.path().join("text.txt");
    std::fs::write(&text, "some text").unwrap();
    let text = text.to_str().unwrap();
    for args in [
        vec!["generate", "-m", &model, "-p", "hello", "-n", "4", "--temp", "0"],
        vec!["perplexity", "-m", &model, "-f", text, "-c", "128"],
        vec!["bench", "-m", &model, "-p", "16", "-n", "4", "-r", "1"],
    ] {
        assert_refused(&dawn_llm(&args), "not yet implemented: needs the GPU decoder ops");
    }
}
