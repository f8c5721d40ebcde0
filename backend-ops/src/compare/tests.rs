use std::path::{Path, PathBuf};

use super::upstream::{self, UpstreamCommand};
use super::*;

fn data(path: &str) -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data").join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// Lines of upstream's output that report a case: `OP(…):` somewhere in the line (counted with a
/// regular expression, independently of the parser).
fn result_lines(text: &str) -> usize {
    let case = regex::Regex::new(r"(^|[^A-Za-z0-9_])[A-Z][A-Z0-9_]*\([^()]*\):").unwrap();
    upstream::strip_ansi(text).lines().filter(|l| case.is_match(l)).count()
}

const MM_UP: &str = "upstream/h200-2026-12-03-upstream-webgpu-mul_mat-perf.txt";
const FA_UP: &str = "upstream/h200-2026-12-03-upstream-webgpu-flash_attn_ext-perf.txt";

#[test]
fn upstream_mul_mat_perf_parses_completely() {
    let text = data(MM_UP);
    let report = upstream::parse(&text).unwrap();
    assert!(report.unrecognised.is_empty(), "{:?}", report.unrecognised);
    assert_eq!(result_lines(&text), 15);
    assert_eq!(report.entries.len(), 15);
    assert!(
        report
            .entries
            .iter()
            .all(|e| e.op == "MUL_MAT" && e.backend.as_deref() == Some("WebGPU"))
    );
    assert!(report.entries.iter().all(|e| e.outcome.us_per_run().is_some()));
    let first = &report.entries[1];
    assert_eq!(
        first.case,
        "MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=14336,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0)"
    );
    assert_eq!(
        first.outcome,
        Outcome::Timed {
            runs: 31524,
            us_per_run: 32.42
        }
    );
    // Every case string is one our parser reads (so it normalises to itself).
    for e in &report.entries {
        assert!(e.case.parse::<Case>().is_ok(), "{}", e.case);
    }
}

#[test]
fn upstream_flash_attn_perf_parses_completely() {
    let text = data(FA_UP);
    let report = upstream::parse(&text).unwrap();
    assert!(report.unrecognised.is_empty(), "{:?}", report.unrecognised);
    assert_eq!(result_lines(&text), 32);
    assert_eq!(report.entries.len(), 32);
    let unsupported = report
        .entries
        .iter()
        .filter(|e| matches!(e.outcome, Outcome::Unsupported(_)))
        .count();
    let timed = report
        .entries
        .iter()
        .filter(|e| e.outcome.us_per_run().is_some())
        .count();
    assert_eq!((timed, unsupported), (23, 9));
    let prefill = &report.entries[0];
    assert!(
        prefill
            .case
            .starts_with("FLASH_ATTN_EXT(hsk=72,hsv=72,nh=16,nr23=[1,1],kv=5776,nb=5776,mask=0,")
    );
    assert_eq!(prefill.outcome.us_per_run(), Some(22312.24));
    for e in &report.entries {
        assert!(e.case.parse::<Case>().is_ok(), "{}", e.case);
    }
}

#[test]
fn upstream_test_mode_lines() {
    let text = data("compare/upstream-test-sample.txt");
    let report = upstream::parse(&text).unwrap();
    assert!(report.unrecognised.is_empty(), "{:?}", report.unrecognised);
    assert_eq!(result_lines(&text), 7);
    let outcomes: Vec<&Outcome> = report.entries.iter().map(|e| &e.outcome).collect();
    assert_eq!(outcomes.len(), 7);
    assert_eq!(outcomes[0], &Outcome::Ok);
    assert_eq!(outcomes[1], &Outcome::Ok);
    assert_eq!(
        outcomes[2],
        &Outcome::Fail("[MUL_MAT] NMSE = 0.003150127 > 0.000500000".into())
    );
    // The newer layout: the message comes before the case.
    assert_eq!(
        outcomes[3],
        &Outcome::Fail("[MUL_MAT] NaN at index 3 (WebGPU=nan CPU=0.125000)".into())
    );
    assert!(report.entries[3].case.contains("type_a=q6_K"));
    assert_eq!(outcomes[4], &Outcome::Unsupported("WebGPU".into()));
    assert_eq!(report.entries[5].op, "FLASH_ATTN_EXT");
    assert_eq!(outcomes[5], &Outcome::Unsupported("WebGPU".into()));
    // The output stops inside the last case: the program died there.
    assert!(matches!(outcomes[6], Outcome::Crash(_)), "{:?}", outcomes[6]);
}

#[test]
fn ansi_codes_are_stripped() {
    assert_eq!(
        upstream::strip_ansi("a \x1b[1;34m  3.00 TFLOPS\x1b[0m b"),
        "a   3.00 TFLOPS b"
    );
}

#[test]
fn case_strings_normalise_and_shorten() {
    let full =
        "MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=14336,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0)";
    assert_eq!(
        normalise_case("MUL_MAT(type_a=q4_0, type_b=f32, m=4096, n=1, k=14336)"),
        full
    );
    assert_eq!(normalise_case(full), full);
    assert_eq!(short_case(full), "MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=14336)");
    let fa = normalise_case("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q8_0,type_V=q8_0)");
    assert_eq!(
        short_case(&fa),
        "FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q8_0,type_V=q8_0)"
    );
    // An op this crate does not know is kept as printed, less white space.
    assert!("CONV_2D(type=f32,ne=[10,5,4,3])".parse::<crate::cases::Case>().is_err());
    assert_eq!(
        normalise_case("CONV_2D(type=f32, ne=[10,5,4,3])"),
        "CONV_2D(type=f32,ne=[10,5,4,3])"
    );
    assert_eq!(
        short_case("CONV_2D(type=f32,ne=[10,5,4,3])"),
        "CONV_2D(type=f32,ne=[10,5,4,3])"
    );
}

#[test]
fn newer_upstream_fields_at_zero_normalise_away() {
    let ours = "MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=14336,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)";
    let newer = "MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=14336,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0,m_v=0,pad=0)";
    assert_eq!(normalise_case(newer), normalise_case(ours));
    // Not at zero: another case, left as it came.
    let other = newer.replace("src_overlap=0", "src_overlap=1");
    assert_ne!(normalise_case(&other), normalise_case(ours));
}

#[test]
fn exact_patterns_escape_upstream_vars() {
    let case = "FLASH_ATTN_EXT(hsk=64,hsv=64,nh=8,nr23=[8,1],kv=7680,nb=1,mask=1,sinks=0,max_bias=0.000000,logit_softcap=0.000000,prec=f32,type_K=f16,type_V=f16,permute=[0,1,2,3],kv_view=1,v_is_view_of_k=0)";
    let vars = upstream::vars(case);
    assert!(vars.starts_with("hsk=64,") && vars.ends_with("v_is_view_of_k=0"));
    let pattern = upstream::exact_pattern(vars);
    assert!(pattern.starts_with("^hsk=64,hsv=64,nh=8,nr23=\\[8,1\\],"));
    assert!(pattern.contains("max_bias=0\\.000000"));
    // The pattern matches the vars and nothing longer (ECMAScript and Rust agree on these escapes).
    let re = regex::Regex::new(&pattern).unwrap();
    assert!(re.is_match(vars));
    assert!(!re.is_match(&format!("{vars},x=1")));
    // A newer upstream's fields the lists predate, at zero: the same case.
    assert!(re.is_match(&format!("{vars},src_overlap=0,m_v=0")));
    assert!(!re.is_match(&format!("{vars},src_overlap=1")));
    assert!(!re.is_match(&vars.replace("nb=1,", "nb=16,")));
    let cmd = UpstreamCommand {
        program: PathBuf::from("run-upstream"),
        pre_args: vec!["gpu-bundle".into()],
        backend: Some("WebGPU".into()),
        extra_args: vec![],
        timeout: None,
    };
    assert_eq!(
        cmd.args(Mode::Perf, case),
        vec![
            "gpu-bundle",
            "perf",
            "-o",
            "FLASH_ATTN_EXT",
            "-p",
            pattern.as_str(),
            "-b",
            "WebGPU"
        ]
    );
}

#[test]
fn ours_json_parses() {
    let ours = parse_ours(&data("compare/ours-mul_mat-perf.jsonl")).unwrap();
    assert_eq!(ours.len(), 16);
    assert!(
        ours.iter()
            .all(|e| e.outcome.us_per_run().is_some() && e.path.is_some())
    );
    let fa = parse_ours(&data("compare/ours-flash_attn_ext-perf.jsonl")).unwrap();
    assert_eq!(fa.len(), 7);
    assert!(matches!(fa[6].outcome, Outcome::Unsupported(_)));
    let test = parse_ours(&data("compare/ours-test-sample.jsonl")).unwrap();
    assert_eq!(test.len(), 7);
    assert_eq!(test[3].outcome, Outcome::Fail("NMSE 1.2e-2 > 5.0e-4".into()));
}

#[test]
fn ours_json_lines_as_backend_ops_prints_them() {
    // The shapes `backend-ops --output json` prints in perf and test mode (see backend-ops.rs).
    let text = r#"{"mode":"perf","op":"MUL_MAT","case":"MUL_MAT(type_a=f16,type_b=f32,m=64,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0)","runs":100,"us_per_run":12.5,"flops_per_run":32768,"tflops":0.0026,"path":"MUL_MAT f16xf32: mat-vec"}
{"mode":"perf","case":"MUL_MAT(type_a=iq1_m,type_b=f32,m=64,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0)","status":"unsupported","reason":"no kernel"}
{"mode":"perf","case":"MUL_MAT(type_a=q4_0,type_b=f32,m=64,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0)","status":"fail","reason":"device lost"}
not json
{"mode":"test","op":"MUL_MAT","case":"MUL_MAT(type_a=f16,type_b=f32,m=64,n=1,k=256)","status":"ok","detail":{"nmse":1e-9}}
{"mode":"support","op":"MUL_MAT","case":"MUL_MAT(type_a=f16,type_b=f32,m=64,n=1,k=256)","supported":true,"reason":null}
"#;
    let entries = parse_ours(text).unwrap();
    assert_eq!(entries.len(), 4);
    assert_eq!(entries[0].outcome.us_per_run(), Some(12.5));
    assert_eq!(entries[0].path.as_deref(), Some("MUL_MAT f16xf32: mat-vec"));
    assert_eq!(entries[1].outcome, Outcome::Unsupported("no kernel".into()));
    assert_eq!(entries[2].outcome, Outcome::Fail("device lost".into()));
    assert_eq!(entries[3].outcome, Outcome::Ok);
    assert!(entries[3].case.ends_with("src_overlap=0)"));
}

#[test]
fn mul_mat_perf_table_and_chart() {
    let up = upstream::parse(&data(MM_UP)).unwrap().entries;
    let ours = parse_ours(&data("compare/ours-mul_mat-perf.jsonl")).unwrap();
    let rows = match_entries(&ours, &up);
    assert_eq!(rows.len(), 16);
    assert_eq!(mode_of(&rows), Mode::Perf);
    let q4_0 = rows
        .iter()
        .find(|r| r.case.contains("type_a=q4_0") && r.case.contains(",n=1,"))
        .unwrap();
    assert!((q4_0.ratio().unwrap() - 32.42 / 34.3).abs() < 1e-9);
    // f16 n=32 is ours only.
    assert_eq!(rows[15].upstream, Outcome::Missing);
    assert_eq!(rows.iter().filter(|r| r.ratio().is_some()).count(), 15);

    let table = render_table(&rows, Mode::Perf);
    println!("{table}");
    assert!(table.contains("ratio (upstream/ours, >1: ours faster)"));
    assert!(table.contains("| MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=14336) "));
    assert!(table.contains(" 34.30 |") && table.contains(" 32.42 |") && table.contains(" 0.95 |"));
    assert!(table.contains("mat-vec (8-element units)"));
    assert_eq!(table.lines().filter(|l| l.starts_with("| MUL_MAT(")).count(), 16);
    assert!(table.contains("16 cases, 15 timed by both"));
    assert!(table.contains("—: that program reported nothing for the case"));

    let json = render_json(&rows);
    assert_eq!(json.lines().count(), 16);
    let first: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    assert_eq!(first["mode"], "compare");
    assert_eq!(first["upstream"]["us_per_run"], 39.16);

    let dir = std::env::temp_dir().join(format!("ggml-dawn-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("mul_mat.svg");
    plot::plot_svg(&rows, &svg, "MUL_MAT, H200").unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.len() > 5000, "{} bytes", text.len());
    assert!(text.starts_with("<svg"));
    assert!(text.contains("MUL_MAT, H200"));
    assert!(text.contains("MUL_MAT q4_0: n=512"));
    assert!(text.contains("MUL_MAT q6_K: n=8"));
    assert!(text.contains("upstream time / ours"));
    assert!(text.matches("<rect").count() >= 15);
    // A .png is refused, as is a chart with nothing timed by both.
    assert!(matches!(
        plot::plot_svg(&rows, &dir.join("x.png"), "t"),
        Err(plot::PlotError::Format(_))
    ));
    assert!(matches!(
        plot::plot_svg(&[], &dir.join("y.svg"), "t"),
        Err(plot::PlotError::Empty)
    ));
    // A chart into a folder that is not there is refused before anything runs.
    assert!(matches!(
        plot::check_target(&dir.join("missing").join("z.svg")),
        Err(plot::PlotError::NoFolder(_))
    ));
    assert!(plot::check_target(&dir.join("z.svg")).is_ok());
    assert!(plot::check_target(Path::new("z.svg")).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn flash_attn_perf_table_and_chart() {
    let up = upstream::parse(&data(FA_UP)).unwrap().entries;
    let ours = parse_ours(&data("compare/ours-flash_attn_ext-perf.jsonl")).unwrap();
    let rows = match_entries(&ours, &up);
    // 7 of ours (upstream has them all), then upstream's other 25.
    assert_eq!(rows.len(), 32);
    let prefill = &rows[0];
    assert!((prefill.ratio().unwrap() - 22312.24 / 2714.0).abs() < 1e-9);
    // Ours timed, upstream does not support it.
    assert!(matches!(rows[5].upstream, Outcome::Unsupported(_)) && rows[5].ratio().is_none());
    let table = render_table(&rows, Mode::Perf);
    assert!(table.contains("| FLASH_ATTN_EXT(hsk=72,hsv=72,nh=16,kv=5776,nb=5776,mask=0) "));
    assert!(table.contains("not supported"));
    let dir = std::env::temp_dir().join(format!("ggml-dawn-compare-fa-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("fa.svg");
    plot::plot_svg(&rows, &svg, "FLASH_ATTN_EXT").unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("FLASH_ATTN_EXT q4_0"));
    assert!(text.contains("FLASH_ATTN_EXT f16"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn test_mode_table() {
    let up = upstream::parse(&data("compare/upstream-test-sample.txt"))
        .unwrap()
        .entries;
    let ours = parse_ours(&data("compare/ours-test-sample.jsonl")).unwrap();
    let rows = match_entries(&ours, &up);
    assert_eq!(rows.len(), 7);
    assert_eq!(mode_of(&rows), Mode::Test);
    let table = render_table(&rows, Mode::Test);
    println!("{table}");
    let cells = |needle: &str| -> Vec<String> {
        let line = table.lines().find(|l| l.contains(needle)).unwrap();
        line.split('|')
            .map(|c| c.trim().to_owned())
            .filter(|c| !c.is_empty())
            .collect()
    };
    let q4_k = cells("type_a=q4_K");
    assert_eq!(q4_k[0], "MUL_MAT(type_a=q4_K,type_b=f32,m=16,n=1,k=256)");
    assert_eq!(q4_k[1], "OK");
    assert_eq!(cells("type_a=q6_K")[1], "FAIL (NMSE 1.2e-2 > 5.0e-4)");
    assert_eq!(cells("type_a=iq1_m")[2], "not supported");
    assert!(table.contains("FAIL ([MUL_MAT] NMSE = 0.003150127 > 0.000500000)"));
    assert!(table.contains("crash (output ends in the case's line)"));
    assert!(table.contains(
        "7 cases; ours: 5 OK, 1 FAIL, 1 not supported, 0 crashed; upstream: 2 OK, 2 FAIL, 2 not supported, 1 crashed"
    ));
}

#[cfg(unix)]
#[test]
fn a_dying_upstream_is_a_crash_not_an_error() {
    use std::os::unix::process::ExitStatusExt;
    let case = normalise_case("MUL_MAT(type_a=q4_0,type_b=f32,m=16,n=1,k=256)");
    let line = format!("  {case}: ");
    // Killed by SIGABRT inside the case.
    let e = upstream::interpret(
        &case,
        &line,
        "GGML_ASSERT(x) failed\n",
        &std::process::ExitStatus::from_raw(6),
    )
    .unwrap();
    assert_eq!(e.outcome, Outcome::Crash("signal 6: GGML_ASSERT(x) failed".into()));
    // ggml's abort message, not the backtrace after it (as upstream died on lavapipe, where its
    // perf graph outlasted its 30 s queue wait).
    let stderr = "ggml_webgpu: adapter_info: vendor: mesa\n\
        /opt/ggml/src/ggml-webgpu/ggml-webgpu.cpp:491: ggml_webgpu: Queue wait timed out after 30000 ms\n\n\
        up/libggml-base.so.0(+0x17af4) [0x7f7a62593af4]\n\
        up/libggml-base.so.0(ggml_abort+0x11d) [0x7f7a6259410d]\n\
        up/test-backend-ops(+0x20151) [0x5625527be151]\n";
    let e = upstream::interpret(
        &case,
        "Testing 2 devices\n",
        stderr,
        &std::process::ExitStatus::from_raw(6),
    )
    .unwrap();
    assert_eq!(
        e.outcome,
        Outcome::Crash(
            "signal 6: /opt/ggml/src/ggml-webgpu/ggml-webgpu.cpp:491: ggml_webgpu: Queue wait timed out after 30000 ms"
                .into()
        )
    );
    // Exit 1 after reporting a failure is a failure.
    let fail = format!("  {case}: \x1b[1;31mFAIL\x1b[0m\n  1/2 backends passed\n");
    let e = upstream::interpret(&case, &fail, "", &std::process::ExitStatus::from_raw(1 << 8)).unwrap();
    assert_eq!(e.outcome, Outcome::Fail(String::new()));
    // A clean run that never mentions the case: not in upstream's list.
    let e = upstream::interpret(
        &case,
        "2/2 backends passed\n",
        "",
        &std::process::ExitStatus::from_raw(0),
    )
    .unwrap();
    assert_eq!(e.outcome, Outcome::Missing);
    // A program that cannot start is an error.
    let cmd = UpstreamCommand {
        program: PathBuf::from("/nonexistent/test-backend-ops"),
        pre_args: vec![],
        backend: None,
        extra_args: vec![],
        timeout: None,
    };
    assert!(cmd.run_case(Mode::Test, &case).is_err());
    // A real process that dies on a signal.
    let sh = UpstreamCommand {
        program: PathBuf::from("/bin/sh"),
        pre_args: vec!["-c".into(), "echo boom >&2; kill -9 $$".into()],
        backend: None,
        extra_args: vec![],
        timeout: None,
    };
    let e = sh.run_case(Mode::Perf, &case).unwrap();
    assert_eq!(e.outcome, Outcome::Crash("signal 9: boom".into()));
    // One that hangs is killed after its time.
    let hang = UpstreamCommand {
        program: PathBuf::from("/bin/sh"),
        pre_args: vec!["-c".into(), "echo '  MUL_MAT(type_a=f16): '; exec sleep 30".into()],
        backend: None,
        extra_args: vec![],
        timeout: Some(std::time::Duration::from_millis(300)),
    };
    let start = std::time::Instant::now();
    let e = hang.run_case(Mode::Perf, &case).unwrap();
    assert!(start.elapsed().as_secs() < 10);
    assert_eq!(e.outcome, Outcome::Crash("killed after 0.3 s without finishing".into()));
}

/// Runs `work` on a thread and waits for it at most `limit`: a hang or a slow path fails the
/// test (naming `what`) instead of hanging it.
fn within<T: Send + 'static>(what: &str, limit: std::time::Duration, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("{what}: not done after {limit:?}"))
}

const CASE: &str = "MUL_MAT(type_a=q4_0,type_b=f32,m=16,n=1,k=256)";

#[test]
fn timings_that_are_not_finite_positive_numbers_are_errors_naming_the_line() {
    let case = normalise_case(CASE);
    for bad in ["inf", "-1.00", "0.00", "NaN", "1e-310", "x"] {
        let text = format!("Backend 1/2: WebGPU\n  {case}: 10 runs - {bad} us/run - 1 MFLOP/run - 1 TFLOPS\n");
        let err = upstream::parse(&text).unwrap_err();
        assert_eq!(err.line, 2, "{bad}: {err}");
        assert!(err.to_string().contains(&format!("`{bad}`")), "{err}");
        assert!(err.to_string().starts_with("line 2: "), "{err}");
    }
    for bad in ["-1.0", "0", "0.0", "1e-310"] {
        let text = format!("\n{{\"mode\":\"perf\",\"case\":\"{case}\",\"runs\":3,\"us_per_run\":{bad}}}\n");
        let err = parse_ours(&text).unwrap_err();
        assert_eq!(err.line, 2, "{bad}: {err}");
        assert!(err.reason.contains("finite positive"), "{err}");
    }
    // Live: upstream printing such a timing ends the comparison with the same reason.
    let status = {
        use std::os::unix::process::ExitStatusExt;
        std::process::ExitStatus::from_raw(0)
    };
    let line = format!("  {case}: 10 runs - inf us/run\n");
    assert!(upstream::interpret(&case, &line, "", &status).is_err());
}

#[test]
fn infinite_or_absurd_ratios_are_not_drawn_and_never_hang_the_chart() {
    let case = normalise_case(CASE);
    let timed = |us| Outcome::Timed {
        runs: 1,
        us_per_run: us,
    };
    let row = |ours, up| Row {
        case: case.clone(),
        op: "MUL_MAT".into(),
        ours: timed(ours),
        path: None,
        upstream: timed(up),
    };
    // Rows as a caller may build them (the parsers refuse such timings): no ratio, no bar.
    for (ours, up) in [
        (1.0, f64::INFINITY),
        (1e-310, 1.0),
        (0.0, 1.0),
        (-2.0, 1.0),
        (1.0, f64::NAN),
        (1e-300, 1e300),
    ] {
        let r = row(ours, up);
        assert_eq!(r.ratio(), None, "{ours} {up}");
        assert_eq!(geometric_mean_ratio(std::slice::from_ref(&r)), None);
        assert!(!summary(std::slice::from_ref(&r), Mode::Perf).contains("NaN"));
    }
    let dir = std::env::temp_dir().join(format!("ggml-dawn-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("inf.svg");
    let (rows, target) = (vec![row(1.0, f64::INFINITY), row(1e-310, 1.0)], svg.clone());
    let drawn = within(
        "a chart of infinite ratios",
        std::time::Duration::from_secs(20),
        move || plot::plot_svg(&rows, &target, "t").map_err(|e| e.to_string()),
    );
    assert_eq!(drawn, Err(plot::PlotError::Empty.to_string()));
    // A finite ratio whose margin overflows: an error, not an endless axis.
    let (rows, target) = (vec![row(1e-10, f64::MAX / 1e-9)], svg.clone());
    let huge = within(
        "a chart of a huge ratio",
        std::time::Duration::from_secs(20),
        move || plot::plot_svg(&rows, &target, "t").map_err(|e| e.to_string()),
    );
    assert!(huge.is_err(), "{huge:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Seconds `parse` takes on one line of `n` bytes built by `line`.
fn parse_seconds(n: usize, line: fn(usize) -> String) -> f64 {
    let text = line(n);
    assert!(text.len() >= n);
    let start = std::time::Instant::now();
    let _ = upstream::parse(&text);
    start.elapsed().as_secs_f64()
}

#[test]
fn parsing_is_linear_in_the_line_length() {
    // Lines that made the case search quadratic: many `OP(` with no `):`, an op name with an
    // unclosed parenthesis, and a real case after a long run of them.
    let shapes: [fn(usize) -> String; 3] = [
        |n| "A(".repeat(n / 2),
        |n| format!("X({}", "Y(".repeat(n / 2)),
        |n| format!("{}  {CASE}: OK", "B(".repeat(n / 2)),
    ];
    for (i, shape) in shapes.into_iter().enumerate() {
        // 2 MB parsed well within a few seconds (quadratic: minutes), checked on a thread so a
        // regression fails rather than hangs.
        let big = within("a 2 MB line", std::time::Duration::from_secs(20), move || {
            parse_seconds(2 << 20, shape)
        });
        assert!(big < 5.0, "shape {i}: 2 MB in {big} s");
        // Linear: 8 times the bytes take nowhere near 64 times as long (quadratic: 9 s for
        // 200 KB). The floor of 10 ms keeps cache effects and noise on tiny times out of it.
        let fastest = |n| (0..3).map(|_| parse_seconds(n, shape)).fold(f64::MAX, f64::min);
        let (small, large) = (fastest(256 << 10), fastest(2 << 20));
        assert!(
            large < 30.0 * small.max(0.01),
            "shape {i}: 256 KB {small} s, 2 MB {large} s"
        );
    }
    // The real case after the run is still found.
    let text = format!("{}  {CASE}: OK", "B(".repeat(1000));
    let report = upstream::parse(&text).unwrap();
    assert_eq!(report.entries.len(), 1);
    assert_eq!(report.entries[0].case, normalise_case(CASE));
    assert_eq!(report.entries[0].outcome, Outcome::Ok);
}

/// The process's peak resident memory so far, in bytes (`VmHWM`).
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap();
    kb << 10
}

/// Upstream printing hundreds of MB (one endless line, and millions of lines that look like
/// results) is read to its end with bounded memory, and its result still found. Measured in a
/// process of its own (this test binary, running only `flooding_upstream_alone`): the peak of a
/// process running other tests at once would count their memory too.
#[test]
fn a_flooding_upstream_is_read_with_bounded_memory() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "compare::tests::flooding_upstream_alone",
            "--ignored",
            "--nocapture",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("1 passed"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "run alone by a_flooding_upstream_is_read_with_bounded_memory"]
fn flooding_upstream_alone() {
    let case = normalise_case(CASE);
    let script = format!(
        "head -c 300000000 /dev/zero | tr '\\0' x; echo; yes '  MUL_MAT(type_a=f16): 1 runs - 1.0 us/run' | head -c 60000000; echo; \
         echo '  {case}: 10 runs - 2.50 us/run - 1 MFLOP/run'; echo '1/1 backends passed'"
    );
    let flood = UpstreamCommand {
        program: PathBuf::from("/bin/sh"),
        pre_args: vec!["-c".into(), script],
        backend: None,
        extra_args: vec![],
        timeout: Some(std::time::Duration::from_secs(120)),
    };
    let before = peak_rss();
    let e = flood.run_case(Mode::Perf, &case).unwrap();
    let grown = peak_rss().saturating_sub(before);
    assert_eq!(
        e.outcome,
        Outcome::Timed {
            runs: 10,
            us_per_run: 2.5
        }
    );
    // Buffering it all would take 360 MB at least (twice that as text).
    assert!(grown < 100 << 20, "peak memory grew by {} MB", grown >> 20);
}
