//! The `backend-ops` tool as a user runs it: modes, case strings, exit codes, JSON output.

use std::process::{Command, Output};

fn backend_ops(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_backend-ops"))
        .args(args)
        .output()
        .expect("backend-ops runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const MM: &str =
    "MUL_MAT(type_a=q4_K,type_b=f32,m=33,n=5,k=256,bs=[2,1],nr=[1,2],per=[0,1,2,3],k_v=0,o=1,src_overlap=0)";

#[test]
fn test_mode_prints_upstream_lines() {
    let out = backend_ops(&[
        "test",
        "--case",
        MM,
        "--case",
        "FLASH_ATTN_EXT(hsk=64,hsv=64,nh=2,kv=100,nb=3)",
    ]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("  {MM}: OK")), "{text}");
    // Omitted parameters take upstream's defaults and are printed in full.
    assert!(
        text.contains("FLASH_ATTN_EXT(hsk=64,hsv=64,nh=2,nr23=[1,1],kv=100,nb=3,mask=1,sinks=0,"),
        "{text}"
    );
    assert!(text.contains("2 passed, 0 failed"), "{text}");
}

#[test]
fn malformed_specs_are_errors_naming_the_bad_part() {
    for (spec, part) in [
        ("MUL_MAT(type_a=q4_X,type_b=f32,m=1,n=1,k=32)", "q4_X"),
        ("MUL_MAT(type_a=f32,type_b=f32,m=1,n=1)", "k"),
        ("MUL_MAT(type_a=f32,type_b=f32,m=x,n=1,k=32)", "m"),
        ("SOFTMAX(x=1)", "SOFTMAX"),
        ("MUL_MAT(type_a=f32", "MUL_MAT(type_a=f32"),
    ] {
        let out = backend_ops(&["test", "--case", spec]);
        assert_eq!(out.status.code(), Some(2), "{spec}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(part), "{spec}: {err}");
    }
    let out = backend_ops(&["test", "-p", "(unclosed"]);
    assert_eq!(out.status.code(), Some(2));
    let out = backend_ops(&["test", "-o", "ADD"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn json_output_for_each_mode() {
    for args in [
        vec!["--output", "json", "info"],
        vec!["--output", "json", "test", "--case", MM],
        vec![
            "--output",
            "json",
            "perf",
            "--min-time",
            "0",
            "--max-repeats",
            "2",
            "--case",
            MM,
        ],
        vec!["--output", "json", "support", "--case", MM],
        vec![
            "--output",
            "json",
            "golden",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/golden/quant/q4_0.gguf"),
        ],
    ] {
        let out = backend_ops(&args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = stdout(&out);
        let line = text.lines().next().unwrap_or_default();
        let value: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{args:?}: {e}: {line}"));
        assert!(value.get("mode").is_some(), "{line}");
    }
}

#[test]
fn perf_mode_prints_timings() {
    let out = backend_ops(&["perf", "--min-time", "0", "--max-repeats", "3", "--case", MM]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    let line = text.lines().find(|l| l.contains(MM)).expect("a perf line");
    assert!(
        line.contains(" runs - ") && line.contains(" us/run - ") && line.contains("FLOPS"),
        "{line}"
    );
}

#[test]
fn support_mode_judges_without_running() {
    // A head size no path handles is reported, not run.
    let out = backend_ops(&[
        "support",
        "--case",
        MM,
        "--case",
        "FLASH_ATTN_EXT(hsk=64,hsv=64,nh=1,kv=32,nb=1,type_K=q2_0)",
    ]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("  {MM}: supported")), "{text}");
    assert!(text.contains("1 supported, 1 not supported"), "{text}");
}

#[test]
fn golden_mode_checks_files_and_folders() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/golden/quant");
    let out = backend_ops(&["golden", dir]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(
            "q6_K: OK (CPU dequantization bit-exact, CPU quantization byte-exact, GPU dequantization bit-exact)"
        ),
        "{text}"
    );
    let missing = backend_ops(&["golden", "/nonexistent/file.gguf"]);
    assert!(!missing.status.success());
}
