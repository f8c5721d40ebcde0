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
    let out = backend_ops(&["test", "-o", "CONV_2D"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A decoder op with GPU kernels runs its upstream list: every case supported, and passes.
#[test]
fn decoder_ops_run_their_lists() {
    let out = backend_ops(&["support", "-o", "RMS_NORM"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.contains("RMS_NORM(type=f32,ne=[64,5,4,3],v=0,eps=0.000001,inplace=0): supported"),
        "{text}"
    );
    assert!(text.contains("51 supported, 0 not supported"), "{text}");
    let out = backend_ops(&["test", "-o", "RMS_NORM"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("51 passed, 0 failed"), "{}", stdout(&out));
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

/// `--gpu-time` adds the GPU's own time a run (timestamps around each submit) and its GB/s, in
/// text and in JSON, for a memory-bound op.
#[test]
fn perf_gpu_time_reports_the_gpus_own_time() {
    let case = "RMS_NORM(type=f32,ne=[256,4,1,1],v=0,eps=0.000001,inplace=0)";
    let args = [
        "perf",
        "--gpu-time",
        "--min-time",
        "0",
        "--max-repeats",
        "4",
        "--case",
        case,
    ];
    let out = backend_ops(&args);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    let gpu = text.lines().find(|l| l.contains("gpu ")).expect("a gpu line");
    assert!(gpu.contains(" us/run, ") && gpu.ends_with(" GB/s"), "{gpu}");
    let json: Vec<&str> = ["--output", "json"].into_iter().chain(args).collect();
    let out = backend_ops(&json);
    let row = stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["case"] == case)
        .expect("the case's line");
    let us = row["gpu_us_per_run"].as_f64().expect("gpu_us_per_run");
    assert!(us > 0.0 && row["gpu_gbps"].as_f64().is_some_and(|g| g > 0.0), "{row}");
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

/// Malformed or invalid input is exit 2 with a message naming it, before any GPU work.
#[test]
fn bad_values_are_exit_2_with_a_message() {
    let q4 = "MUL_MAT(type_a=q4_0,type_b=f32,m=4,n=1,k=48)";
    let zero = "MUL_MAT(type_a=f32,type_b=f32,m=0,n=1,k=32)";
    let huge = "MUL_MAT(type_a=f32,type_b=f32,m=1,n=1,k=32,bs=[4294967296,4294967296],nr=[4294967296,4294967296])";
    let fa = "FLASH_ATTN_EXT(hsk=18446744073709551615,hsv=64,nh=1,kv=1,nb=1)";
    for (args, needle) in [
        (vec!["test", "--case", q4], "48"),
        (vec!["test", "--case", zero], "positive"),
        (vec!["test", "--case", huge], "overflow"),
        (vec!["test", "--case", fa], "overflow"),
        (
            vec!["support", "--case", "MUL_MAT(type_a=f32,type_b=f32,m=-1,n=1,k=32)"],
            "m",
        ),
        (vec!["perf", "--min-time", "nan"], "nan"),
        (vec!["perf", "--min-time", "inf"], "inf"),
        (vec!["perf", "--min-time", "-1"], "-1"),
        (vec!["perf", "--min-time", "1e300"], "1e300"),
        (vec!["perf", "--max-repeats", "0"], "0"),
        (vec!["test", "--cases-file", "/dev/zero"], "regular file"),
        (vec!["test", "--cases-file", "/nonexistent/cases.txt"], "cases.txt"),
        (
            vec!["compare", "--upstream-bin", "/bin/true", "--upstream-timeout", "inf"],
            "inf",
        ),
    ] {
        let out = backend_ops(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // A cases file over the size limit.
    let big = std::env::temp_dir().join(format!("backend-ops-big-{}.txt", std::process::id()));
    std::fs::write(&big, vec![b'#'; (16 << 20) + 1]).unwrap();
    let out = backend_ops(&["test", "--cases-file", big.to_str().unwrap()]);
    std::fs::remove_file(&big).unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Invalid tuning knobs in the environment are exit 2, naming the variable and the knob.
#[test]
fn bad_knobs_in_the_environment_are_exit_2() {
    for (var, value, needle) in [
        ("GGML_DAWN_MUL_MAT", "tiled_wg_m=4294967295", "tiled_wg_m"),
        ("GGML_DAWN_MUL_MAT", "bogus=1", "bogus"),
        ("GGML_DAWN_FA", "tile_kv=7", "tile_kv"),
        ("GGML_DAWN_FA", "tau=nan", "tau"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_backend-ops"))
            .args(["test", "--case", MM])
            .env(var, value)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{var}={value}: {err}");
        assert!(err.contains(var) && err.contains(needle), "{var}={value}: {err}");
    }
}

/// A case too large for the device is judged before any host memory is taken and reported as
/// invalid input; the rest of the list goes on, and the run ends with exit 2.
#[test]
fn a_case_too_large_is_invalid_and_does_not_end_the_run() {
    let large = "MUL_MAT(type_a=f32,type_b=f32,m=1000000,n=1000000,k=4096)";
    for mode in [
        &["test"][..],
        &["perf", "--min-time", "0", "--max-repeats", "2"],
        &["support"],
    ] {
        let mut args = mode.to_vec();
        args.extend([
            "--case",
            large,
            "--case",
            "MUL_MAT(type_a=f32,type_b=f32,m=16,n=3,k=32)",
        ]);
        let out = backend_ops(&args);
        let text = stdout(&out);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{mode:?}: {text}{err}");
        assert!(
            text.contains("m=1000000,n=1000000,k=4096,") && text.contains(": invalid (too large for this device: "),
            "{mode:?}: {text}"
        );
        assert!(
            err.contains("m=1000000,n=1000000,k=4096,") && err.contains("maxStorageBufferBindingSize"),
            "{err}"
        );
        assert!(err.contains("1 of 2 cases"), "{err}");
        // The other case ran.
        let other = match mode[0] {
            "test" => "1 passed, 0 failed, 0 not supported, 1 invalid",
            "perf" => " us/run - ",
            _ => "1 supported, 0 not supported, 1 invalid",
        };
        assert!(text.contains(other), "{mode:?}: {text}");
    }
}

/// One bad case in a list ends nothing: a line that does not parse and a case that makes no
/// sense for its types are each reported (on standard output in the run, and on standard error
/// with what is wrong), the other cases run, and the run ends with exit 2; a failure does not
/// hide them.
#[test]
fn bad_cases_in_a_list_are_reported_and_the_rest_run() {
    let file = std::env::temp_dir().join(format!("backend-ops-mixed-{}.txt", std::process::id()));
    std::fs::write(
        &file,
        format!(
            "# a list with two bad cases\nMUL_MAT(type_a=q4_0,type_b=f32,m=4,n=1,k=48)\n{MM}\nMUL_MAT(type_a=f32\n\n\
             MUL_MAT(type_a=f32,type_b=f32,m=16,n=3,k=32)\n"
        ),
    )
    .unwrap();
    let out = backend_ops(&["test", "--cases-file", file.to_str().unwrap()]);
    let json = backend_ops(&["--output", "json", "test", "--cases-file", file.to_str().unwrap()]);
    std::fs::remove_file(&file).unwrap();
    let text = stdout(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{text}{err}");
    assert!(text.contains(&format!("  {MM}: OK")), "{text}");
    assert!(
        text.contains("2 passed, 0 failed, 0 not supported, 2 invalid"),
        "{text}"
    );
    assert!(text.contains("MUL_MAT(type_a=f32: invalid ("), "{text}");
    assert!(text.contains("k=48,") && text.contains(": invalid ("), "{text}");
    assert!(err.contains("48") && err.contains("MUL_MAT(type_a=f32"), "{err}");
    assert!(err.contains("2 of 4 cases"), "{err}");
    assert_eq!(json.status.code(), Some(2));
    let statuses: Vec<String> = stdout(&json)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["status"].to_string())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| *s == "\"invalid\"").count(),
        2,
        "{statuses:?}"
    );
    assert_eq!(statuses.iter().filter(|s| *s == "\"ok\"").count(), 2, "{statuses:?}");
}

/// Upstream's lists, which the tool runs by default (and CI in part), hold no case that is
/// malformed or invalid, and none too large for this device: `support` over all of them ends
/// with exit 0. (On a device with smaller limits, a default-list case too large for it is
/// reported as not supported, as upstream does, not as invalid input.)
#[test]
fn the_default_lists_hold_no_invalid_case() {
    let out = backend_ops(&["support"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!text.contains(": invalid ("), "{text}");
    // Upstream's decoder-op lists hold a few cases past lavapipe's 128 MiB binding (GET_ROWS of
    // 80000 rows, ROPE of 8192 tokens viewed in a larger tensor): those are not supported here.
    let too_large: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("over the device limit"))
        .filter(|l| !(l.starts_with("  GET_ROWS(") || l.starts_with("  ROPE(")))
        .collect();
    assert!(too_large.is_empty(), "{too_large:?}");
}

/// A `--toggle` / `--no-toggle` name Dawn does not know (Dawn would ignore it without a word)
/// is exit 2, naming it, before any adapter is requested.
#[test]
fn unknown_toggle_names_are_exit_2() {
    for (flag, name) in [
        ("--toggle", "dump_shaderz"),
        ("--no-toggle", "timestamp_quantisation"),
        ("--toggle", "SKIP_VALIDATION"),
    ] {
        let out = backend_ops(&[flag, name, "test", "--case", MM]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {name}: {err}");
        assert!(err.contains(&format!("unknown Dawn toggle `{name}`")), "{err}");
    }
    let out = backend_ops(&["--toggle", "dump_shaders", "support", "--case", MM]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Golden folders with links that loop are walked once; a corrupt file is one failure among
/// the others.
#[test]
fn golden_folders_with_loops_and_corrupt_files() {
    let dir = std::env::temp_dir().join(format!("backend-ops-golden-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::os::unix::fs::symlink(&dir, dir.join("sub/loop")).unwrap();
    std::fs::write(dir.join("corrupt.gguf"), b"GGUF\x03\0\0\0\xff\xff").unwrap();
    let golden = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/golden/mul_mat");
    let one = std::fs::read_dir(golden)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "gguf"))
        .unwrap();
    std::fs::copy(&one, dir.join("sub/good.gguf")).unwrap();
    let out = backend_ops(&["golden", dir.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("1 passed, 1 failed"), "{text}");
}

/// Golden files whose `dst` is not as long as the op's result, or whose shapes are degenerate
/// (zero query heads), are failures with a message, judged before anything is allocated; the
/// other files of the folder still run.
#[test]
fn golden_files_with_bad_shapes_fail_cleanly() {
    use ggml_dawn::gguf::{GgufWriter, Value};
    use ggml_dawn::{GgmlType, HostTensor};
    let dir = std::env::temp_dir().join(format!("backend-ops-golden-shapes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let host = |ty: GgmlType, ne: [usize; 4]| HostTensor::from_f32(ty, ne, &vec![0.5; ne.iter().product()]).unwrap();
    let golden = |op: &str, case: &str| {
        let mut w = GgufWriter::new();
        w.set("golden.op", Value::String(op.into()));
        w.set("golden.case", Value::String(case.into()));
        w
    };
    // MUL_MAT: 12 values in `dst` where the op gives 4 x 2.
    let mut w = golden("MUL_MAT", "MUL_MAT(type_a=f32,type_b=f32,m=4,n=2,k=32)");
    w.add_host_tensor("src0", &host(GgmlType::F32, [32, 4, 1, 1])).unwrap();
    w.add_host_tensor("src1", &host(GgmlType::F32, [32, 2, 1, 1])).unwrap();
    w.add_host_tensor("dst", &host(GgmlType::F32, [4, 3, 1, 1])).unwrap();
    std::fs::write(dir.join("long_dst.gguf"), w.to_bytes().unwrap()).unwrap();
    // FLASH_ATTN_EXT with no query heads (and so an empty `dst`).
    let mut w = golden("FLASH_ATTN_EXT", "FLASH_ATTN_EXT(hsk=64,hsv=64,nh=1,kv=32,nb=1)");
    w.add_raw_tensor("q", GgmlType::F32.gguf_id(), 4, [64, 1, 0, 1], Vec::new())
        .unwrap();
    w.add_host_tensor("k", &host(GgmlType::F16, [64, 32, 1, 1])).unwrap();
    w.add_host_tensor("v", &host(GgmlType::F16, [64, 32, 1, 1])).unwrap();
    w.add_raw_tensor("dst", GgmlType::F32.gguf_id(), 4, [64, 0, 1, 1], Vec::new())
        .unwrap();
    std::fs::write(dir.join("zero_heads.gguf"), w.to_bytes().unwrap()).unwrap();
    let good = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/golden/quant/q4_0.gguf");
    std::fs::copy(good, dir.join("q4_0.gguf")).unwrap();

    let out = backend_ops(&["golden", dir.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("1 passed, 2 failed"), "{text}");
    assert!(!text.contains("panic"), "{text}");
    assert!(text.contains("`dst` has 12 elements"), "{text}");
    assert!(text.contains("degenerate shapes"), "{text}");
}

/// Runs backend-ops with `env` set, and kills it after `limit`: a run that waits forever fails
/// the test instead of hanging it.
fn backend_ops_within(args: &[&str], env: &[(&str, &str)], limit: std::time::Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_backend-ops"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("backend-ops runs");
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{args:?}: still running after {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A FIFO nobody writes to, given where a file is read: refused at once (exit 2), never waited on.
#[test]
fn fifos_given_as_input_files_are_refused_not_waited_on() {
    let dir = std::env::temp_dir().join(format!("backend-ops-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("input.gguf");
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c_path` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let fifo = fifo.to_str().unwrap();
    let saved = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/compare/ours-test-sample.jsonl"
    );
    for args in [
        vec!["test", "--cases-file", fifo],
        vec!["compare", "--upstream", fifo, "--ours", saved],
        vec!["compare", "--upstream", saved, "--ours", fifo],
        vec!["golden", fifo],
    ] {
        let out = backend_ops_within(&args, &[], std::time::Duration::from_secs(60));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.contains("FIFO") || stdout(&out).contains("FIFO"), "{args:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Saved output with no case, or a timing that is not a finite positive number: exit 2 naming
/// the file (and the line).
#[test]
fn compare_refuses_empty_inputs_and_bad_timings() {
    let dir = std::env::temp_dir().join(format!("backend-ops-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let case = "MUL_MAT(type_a=f16,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0)";
    let up = file(
        "up.txt",
        &format!("  {case}:  100 runs -  2.50 us/run - 1 MFLOP/run - 1 TFLOPS\n"),
    );
    let ours = file(
        "ours.jsonl",
        &format!("{{\"mode\":\"perf\",\"case\":\"{case}\",\"runs\":9,\"us_per_run\":1.25}}\n"),
    );
    let empty = file("empty.txt", "");
    let noise = file("noise.txt", "Testing 2 devices\n\n");
    let inf_up = file(
        "inf.txt",
        &format!("Backend 1/2: WebGPU\n  {case}:  100 runs -  inf us/run\n"),
    );
    let neg_ours = file(
        "neg.jsonl",
        &format!("\n{{\"mode\":\"perf\",\"case\":\"{case}\",\"runs\":9,\"us_per_run\":-1}}\n"),
    );
    let tiny_ours = file(
        "tiny.jsonl",
        &format!("{{\"mode\":\"perf\",\"case\":\"{case}\",\"runs\":9,\"us_per_run\":1e-310}}\n"),
    );
    let svg = dir.join("chart.svg");
    for (upstream, ours, needles) in [
        (&empty, &ours, vec!["no cases in --upstream", "empty.txt"]),
        (&noise, &ours, vec!["no cases in --upstream", "noise.txt"]),
        (&up, &empty, vec!["no cases in --ours", "empty.txt"]),
        (&inf_up, &ours, vec!["inf.txt", "line 2", "`inf`"]),
        (&up, &neg_ours, vec!["neg.jsonl", "line 2", "`-1`"]),
        (&up, &tiny_ours, vec!["tiny.jsonl", "line 1", "finite positive"]),
    ] {
        let args = [
            "compare",
            "--upstream",
            upstream,
            "--ours",
            ours,
            "--plot",
            svg.to_str().unwrap(),
        ];
        let out = backend_ops_within(&args, &[], std::time::Duration::from_secs(60));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        for needle in needles {
            assert!(err.contains(needle), "{args:?}: `{needle}` not in {err}");
        }
    }
    // A selection that leaves nothing is not "0 cases", exit 0.
    let out = backend_ops_within(
        &["compare", "--upstream", &up, "--ours", &ours, "-p", "no-such-case"],
        &[],
        std::time::Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no cases"));
    // The good pair compares: ratio 2.
    let out = backend_ops_within(
        &["compare", "--upstream", &up, "--ours", &ours],
        &[],
        std::time::Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout(&out).contains("geometric mean ratio 2.00"), "{}", stdout(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Without a Vulkan driver, Dawn's default adapter is its Null backend, which computes nothing:
/// every mode that runs cases refuses it (exit 2) instead of timing or judging nothing, unless it
/// is asked for by name. The CPU's Vulkan (lavapipe) is used, and said to be the CPU.
#[test]
fn the_null_backend_is_never_taken_for_a_gpu() {
    let no_driver = [
        ("VK_DRIVER_FILES", "/nonexistent/icd.json"),
        ("VK_ICD_FILENAMES", "/nonexistent/icd.json"),
    ];
    let limit = std::time::Duration::from_secs(120);
    for args in [
        vec!["perf", "--min-time", "0", "--max-repeats", "1", "--case", MM],
        vec!["support", "--case", MM],
        vec!["test", "--case", MM],
        vec!["info"],
        vec!["compare", "--upstream-bin", "/bin/true", "--case", MM],
    ] {
        let out = backend_ops_within(&args, &no_driver, limit);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}\n{}", stdout(&out));
        assert!(err.contains("Null backend"), "{args:?}: {err}");
    }
    // Named, it is used (support judges without running anything).
    let out = backend_ops_within(&["--dawn-backend", "null", "support", "--case", MM], &no_driver, limit);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("Null backend") && err.contains("computes nothing"),
        "{err}"
    );
    // lavapipe, as CI runs: accepted with no flag, and said to be the CPU.
    let out = backend_ops_within(&["support", "--case", MM], &[], limit);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let info = backend_ops(&["--output", "json", "info"]);
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    if info["adapter"]["adapter_type"] == "Cpu" {
        assert!(err.contains("a CPU implementation of Vulkan, not a GPU"), "{err}");
    }
}

/// `suites` lists every suite; `suites NAME` prints its cases as `--cases-file` reads them; an
/// unknown name is exit 2 naming the known ones, in `suites` and in `perf --suite`.
#[test]
fn suites_are_listed_and_unknown_ones_refused() {
    let out = backend_ops(&["suites"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    for name in ["quick", "decode-targets", "decode", "prefill", "attention"] {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{name}: {text}"
        );
    }
    let out = backend_ops(&["suites", "decode-targets"]);
    let cases = stdout(&out);
    assert!(out.status.success());
    assert_eq!(cases.lines().count(), 14, "{cases}");
    assert!(
        cases
            .lines()
            .all(|l| l.starts_with("MUL_MAT(") || l.starts_with("FLASH_ATTN_EXT("))
    );
    for args in [&["suites", "nonesuch"][..], &["perf", "--suite", "nonesuch"]] {
        let out = backend_ops(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("nonesuch") && err.contains("decode-targets"),
            "{args:?}: {err}"
        );
    }
}

/// `perf --suite` runs the suite's cases narrowed by `-p`; its JSON starts with a header line
/// naming the adapter and the suite.
#[test]
fn perf_runs_a_suite_narrowed_by_a_pattern() {
    let out = backend_ops(&[
        "--output",
        "json",
        "perf",
        "--suite",
        "decode-fixed",
        "-p",
        r"^MUL_MAT\(type_a=f16,type_b=f32,m=64,",
        "--min-time",
        "0",
        "--max-repeats",
        "2",
    ]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["mode"], "header");
    assert_eq!(lines[0]["suite"], "decode-fixed");
    assert!(lines[0]["adapter"].as_str().is_some_and(|a| !a.is_empty()), "{text}");
    assert!(
        lines[1]["case"]
            .as_str()
            .unwrap()
            .starts_with("MUL_MAT(type_a=f16,type_b=f32,m=64,n=1,k=256,"),
        "{text}"
    );
    assert!(lines[1]["us_per_run"].as_f64().is_some_and(|us| us > 0.0), "{text}");
}

/// `compare --base BEFORE --ours AFTER` reads two saved runs (no GPU needed): the table of
/// after, before and their ratio, the geometric mean, exit 0; a file with no timing is exit 2.
#[test]
fn compare_base_and_ours_gives_before_after_ratios() {
    let dir = std::env::temp_dir().join(format!("backend-ops-before-after-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let line = |case: &str, us: f64| {
        format!(r#"{{"mode":"perf","op":"MUL_MAT","case":"{case}","runs":100,"us_per_run":{us},"path":"mat-vec"}}"#)
    };
    let (q4, f16) = (
        "MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=14336)",
        "MUL_MAT(type_a=f16,type_b=f32,m=4096,n=1,k=14336)",
    );
    let before = dir.join("before.jsonl");
    let after = dir.join("after.jsonl");
    let empty = dir.join("empty.jsonl");
    std::fs::write(&before, format!("{}\n{}\n", line(q4, 30.0), line(f16, 40.0))).unwrap();
    std::fs::write(&after, format!("{}\n{}\n", line(q4, 15.0), line(f16, 40.0))).unwrap();
    std::fs::write(&empty, "{\"mode\":\"header\"}\n").unwrap();
    let (b, a, e) = (
        before.to_str().unwrap(),
        after.to_str().unwrap(),
        empty.to_str().unwrap(),
    );
    let out = backend_ops(&["compare", "--base", b, "--ours", a]);
    let json = backend_ops(&["--output", "json", "compare", "--base", b, "--ours", a, "-p", "q4_0"]);
    let bad = backend_ops(&["compare", "--base", e, "--ours", a]);
    std::fs::remove_dir_all(&dir).unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("| case ") && text.contains("after us/run") && text.contains("before us/run"),
        "{text}"
    );
    assert!(
        text.contains(&format!("| {q4} |")) && text.contains("2.000 |") && text.contains("1.000 |"),
        "{text}"
    );
    assert!(text.contains("geometric mean ratio 1.414"), "{text}");
    assert!(json.status.success());
    let rows: Vec<serde_json::Value> = stdout(&json)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["ratio"], 2.0);
    assert_eq!(rows[0]["before"]["us_per_run"], 30.0);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no perf result"));
}
