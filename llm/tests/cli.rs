//! The `dawn-llm` command: tokenization of a small model's vocabulary, exit status 2 with one
//! line for bad input, generation and perplexity on a tiny synthetic model with the CPU decoder,
//! and `bench` on the GPU.

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
fn bench_reports_llama_bench_fields_per_test() {
    let dir = TempDir::new("cli-bench");
    let model = tiny_model(dir.path());
    let args = [
        "bench", "-m", &model, "-p", "16", "-n", "4", "-d", "0,8", "-r", "2", "-o", "jsonl", "-v",
    ];
    let out = dawn_llm(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // pp16 and tg4, at depths 0 and 8.
    let tests: Vec<(u64, u64, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["n_prompt"].as_u64().unwrap(),
                r["n_gen"].as_u64().unwrap(),
                r["n_depth"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(tests, [(16, 0, 0), (0, 4, 0), (16, 0, 8), (0, 4, 8)]);
    for r in &rows {
        let samples = r["samples_ts"].as_array().unwrap();
        assert_eq!(samples.len(), 2);
        assert!(r["avg_ts"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["stddev_ts"].as_f64().unwrap() >= 0.0, "{r}");
        assert!(r["host_us_per_token"].as_f64().unwrap() > 0.0, "{r}");
    }
    // A prompt of 16 in micro-batches of 4 takes four steps; generation one a token.
    let out = dawn_llm(&[
        "bench",
        "-m",
        &model,
        "-p",
        "16",
        "-n",
        "0",
        "-r",
        "1",
        "--ubatch-size",
        "4",
        "-o",
        "jsonl",
    ]);
    let row: serde_json::Value = serde_json::from_str(String::from_utf8(out.stdout).unwrap().trim()).unwrap();
    assert_eq!(row["steps"], 4);

    let out = dawn_llm(&["bench", "-m", &model, "-p", "16", "-n", "4", "-r", "1"]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.starts_with("| model | size | params | backend | type_k | test | t/s |"),
        "{table}"
    );
    assert!(table.contains("| pp16 |") && table.contains("| tg4 |"), "{table}");

    assert_refused(
        &dawn_llm(&["bench", "-m", &model, "-p", "0", "-n", "0"]),
        "nothing to measure",
    );
    assert_refused(&dawn_llm(&["bench", "-m", &model, "-r", "0"]), "nothing to measure");
    assert_refused(
        &dawn_llm(&["bench", "-m", &model, "--ubatch-size", "0"]),
        "batch size 0",
    );
    assert_refused(
        &dawn_llm(&["bench", "-m", &model, "--cache-type", "q5_9"]),
        "cache type",
    );
}

/// `bench`'s GPU flags: submit sizes and tuning from the environment refused with one line when
/// wrong; `--profile submits` and `-v`'s device memory in the JSON row.
#[test]
fn bench_takes_submit_sizes_tuning_and_profiling() {
    let dir = TempDir::new("cli-bench-gpu");
    let model = tiny_model(dir.path());
    let bench = |extra: &[&str]| {
        let mut args = vec!["bench", "-m", model.as_str(), "-p", "0", "-n", "2", "-r", "1"];
        args.extend_from_slice(extra);
        dawn_llm(&args)
    };
    assert_refused(&bench(&["--submit-dispatches", "8"]), "--submit-dispatches 8");
    assert_refused(&bench(&["--submit-dispatches", "8,x"]), "--submit-dispatches 8,x");
    assert_refused(&bench(&["--submit-dispatches", "64,8"]), "submit policy");
    let env_refused = Command::new(env!("CARGO_BIN_EXE_dawn-llm"))
        .args(["bench", "-m", &model, "-p", "0", "-n", "2", "-r", "1"])
        .env("GGML_DAWN_MUL_MAT", "no_such_knob=1")
        .output()
        .unwrap();
    assert_refused(&env_refused, "GGML_DAWN_MUL_MAT");
    // The fusion switch: on and off run (the same ids either way), anything else is refused.
    let with_fusion = |value: &str| {
        Command::new(env!("CARGO_BIN_EXE_dawn-llm"))
            .args([
                "generate", "-m", &model, "-p", "a b", "-n", "4", "--temp", "0", "-o", "json",
            ])
            .env("DAWN_LLM_FUSION", value)
            .output()
            .unwrap()
    };
    assert_refused(&with_fusion("maybe"), "DAWN_LLM_FUSION=maybe");
    let (on, off) = (with_fusion("on"), with_fusion("off"));
    assert!(on.status.success() && off.status.success(), "{on:?} {off:?}");
    assert_eq!(on.stdout, off.stdout);

    let out = bench(&[
        "--submit-dispatches",
        "2,4",
        "--profile",
        "submits",
        "-o",
        "jsonl",
        "-v",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let row: serde_json::Value = serde_json::from_str(String::from_utf8(out.stdout).unwrap().trim()).unwrap();
    let memory = &row["device_bytes"];
    assert!(
        memory["pool"].as_u64().unwrap() > 0 && memory["kv_cache"].as_u64().unwrap() > 0,
        "{row}"
    );
    // lavapipe has timestamp queries; an adapter without them leaves `profile` out.
    if !row["profile"].is_null() {
        assert!(row["profile"]["submits_per_token"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["profile"]["kernels"].as_object().unwrap().is_empty(), "{row}");
    }
}

/// The text the perplexity tests read: ordinary English, some 600 tokens of the tiny vocabulary.
fn ppl_text(dir: &Path) -> String {
    let text = "the quick brown fox jumps over the lazy dog while the cat sleeps. ".repeat(12);
    let path = dir.join("text.txt");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn generate_prints_one_json_line_and_stops_at_n() {
    let dir = TempDir::new("cli-generate");
    let model = tiny_model(dir.path());
    let args = [
        "generate",
        "-m",
        &model,
        "-p",
        "hello world",
        "-n",
        "5",
        "--temp",
        "0",
        "-c",
        "64",
        "-o",
        "json",
        "--backend",
        "cpu",
    ];
    let out = dawn_llm(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let line = String::from_utf8(out.stdout).unwrap();
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(line.starts_with("{\"prompt\": [298,"), "{line}");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    let prompt = v["prompt"].as_array().unwrap();
    let generated = v["generated"].as_array().unwrap();
    assert_eq!(prompt[0], 298, "BOS first");
    // Five tokens unless an end-of-generation token came first (it is not printed).
    assert!(!generated.is_empty() && generated.len() <= 5, "{line}");
    assert!(v["text"].is_string());
    // Greedy decoding is deterministic: the same ids again, and with another batch size.
    let again = dawn_llm(&[&args[..], &["-b", "1"]].concat());
    assert_eq!(String::from_utf8(again.stdout).unwrap(), line);
    // Sampled with a seed: repeatable too.
    let sampled = [
        "generate", "-m", &model, "-p", "hello", "-n", "4", "--seed", "7", "-c", "64", "-o", "json",
    ];
    let a = dawn_llm(&sampled);
    assert!(a.status.success(), "{}", stderr(&a));
    assert_eq!(a.stdout, dawn_llm(&sampled).stdout);
}

#[test]
fn perplexity_prints_llama_cpps_final_estimate() {
    let dir = TempDir::new("cli-perplexity");
    let model = tiny_model(dir.path());
    let text = ppl_text(dir.path());
    let base = dir.path().join("base.kld").display().to_string();
    let out = dawn_llm(&[
        "perplexity",
        "-m",
        &model,
        "-f",
        &text,
        "-c",
        "32",
        "--chunks",
        "2",
        "--kl-divergence-base",
        &base,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let ppl: f64 = stdout
        .split("Final estimate: PPL = ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    // Random weights over a 300-token vocabulary: near-uniform predictions.
    assert!(ppl > 30.0 && ppl < 3000.0, "{ppl}");
    assert!(stdout.contains("[1]") && stdout.contains("[2]"), "{stdout}");
    // The same model against its own base file: no divergence, the same top token everywhere.
    let out = dawn_llm(&[
        "perplexity",
        "-m",
        &model,
        "--kl-divergence-base",
        &base,
        "--kl-divergence",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let kld: f64 = stdout
        .split("Mean    KLD:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(kld.abs() < 1e-4, "{stdout}");
    assert!(stdout.contains("Same top p: 100.000"), "{stdout}");
}

#[test]
fn bad_decoder_input_exits_2_with_one_line() {
    let dir = TempDir::new("cli-decoder-errors");
    let model = tiny_model(dir.path());
    let text = ppl_text(dir.path());
    let long_prompt = "word ".repeat(40);
    for (args, needle) in [
        (
            vec!["generate", "-m", &model, "-p", &long_prompt, "-c", "16"],
            "raise -c",
        ),
        (
            vec!["generate", "-m", &model, "-p", "hi", "--cache-type", "q5_9"],
            "cache type",
        ),
        (
            vec!["perplexity", "-m", &model, "-f", &text, "-c", "4096"],
            "at least 8192",
        ),
        (
            vec![
                "perplexity",
                "-m",
                &model,
                "--kl-divergence-base",
                &text,
                "--kl-divergence",
            ],
            "_logits_",
        ),
        (
            vec!["perplexity", "-m", &model, "-f", "/nonexistent/t.txt"],
            "/nonexistent/t.txt",
        ),
    ] {
        assert_refused(&dawn_llm(&args), needle);
    }
}
