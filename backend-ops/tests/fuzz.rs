//! Fuzzing the readers of untrusted input: GGUF files, case strings, upstream's console output
//! and `backend-ops --output json` lines.
//!
//! Each target mutates the seeds of its corpus (`tests/fuzz-corpus/TARGET/`, one input a file)
//! with a seeded generator, for a fixed time, and checks every input: no panic, a bounded time,
//! and a result that round-trips or is an error value. The time is `DAWN_COMPUTE_FUZZ_SECS`
//! seconds over all four targets (default 20, as CI runs it); the seed `DAWN_COMPUTE_FUZZ_SEED`
//! (default fixed, so a run is reproducible). A failure prints the seed and the input, and
//! writes the input to the system's temporary folder to add to the corpus once fixed.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ggml_dawn::gguf::{GgufFile, GgufWriter};
use ggml_dawn_bench::cases::Case;
use ggml_dawn_bench::compare::{self, Entry, Outcome};

/// The four targets share this many seconds by default.
const DEFAULT_SECS: f64 = 20.0;

/// The most one input may take (they are at most a few KB: linear parsers take microseconds).
const PER_INPUT: Duration = Duration::from_secs(2);

/// GGUF files declaring a larger alignment are read but not written back (see the target).
const MAX_ROUND_TRIP_ALIGNMENT: usize = 1 << 16;

/// Inputs grow to at most this many bytes.
const MAX_INPUT: usize = 64 << 10;

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One random change to `input`: a byte flipped, set to an edge value, inserted or removed; a
/// range removed or repeated; a token of the target's syntax inserted; or a splice with another
/// seed.
fn mutate(rng: &mut Rng, input: &mut Vec<u8>, tokens: &[&[u8]], seeds: &[Vec<u8>]) {
    let len = input.len();
    let at = rng.below(len + 1);
    match rng.below(8) {
        0 if len > 0 => input[at.min(len - 1)] ^= 1 << rng.below(8),
        1 if len > 0 => input[at.min(len - 1)] = [0, 0xff, 0x7f, 0x80, b'0', b'9'][rng.below(6)],
        2 => input.insert(at, rng.next() as u8),
        3 if len > 0 => {
            let end = (at + 1 + rng.below(16)).min(len);
            input.drain(at.min(len - 1)..end);
        }
        4 if len > 0 => {
            let start = at.min(len - 1);
            let end = (start + 1 + rng.below(64)).min(len);
            let piece = input[start..end].to_vec();
            for _ in 0..1 + rng.below(4) {
                input.splice(start..start, piece.iter().copied());
            }
        }
        5 | 6 => {
            let token = tokens[rng.below(tokens.len())];
            input.splice(at..at, token.iter().copied());
        }
        _ => {
            let other = &seeds[rng.below(seeds.len())];
            let from = rng.below(other.len() + 1);
            input.truncate(at);
            input.extend_from_slice(&other[from..]);
        }
    }
    input.truncate(MAX_INPUT);
}

/// The seed inputs of `target`, one a file, sorted by name.
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz-corpus")
        .join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let seeds: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!seeds.is_empty(), "{}: no seeds", dir.display());
    seeds
}

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Runs `check` on every seed, then on mutations of them for this target's share of the time.
/// `check` returns a description of a broken property, if any.
fn fuzz(target: &str, tokens: &[&[u8]], check: impl Fn(&[u8]) -> Result<(), String>) {
    let seeds = corpus(target);
    let budget = Duration::from_secs_f64(env_f64("DAWN_COMPUTE_FUZZ_SECS", DEFAULT_SECS).max(0.0) / 4.0);
    let seed: u64 = std::env::var("DAWN_COMPUTE_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed);
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ target.len() as u64 | 1);
    let run = |input: &[u8], round: u64| {
        let start = Instant::now();
        let verdict = catch_unwind(AssertUnwindSafe(|| check(input)));
        let took = start.elapsed();
        let problem = match verdict {
            Err(_) => Some("panicked".to_owned()),
            Ok(Err(why)) => Some(why),
            Ok(Ok(())) if took > PER_INPUT => Some(format!("took {took:?}")),
            Ok(Ok(())) => None,
        };
        if let Some(problem) = problem {
            let saved = std::env::temp_dir().join(format!("fuzz-{target}-{seed}-{round}"));
            let _ = std::fs::write(&saved, input);
            panic!(
                "{target}, seed {seed}, round {round}: {problem}; input ({} bytes, saved to {}): {:?}",
                input.len(),
                saved.display(),
                String::from_utf8_lossy(&input[..input.len().min(2000)])
            );
        }
    };
    for seed_input in &seeds {
        run(seed_input, 0);
    }
    let start = Instant::now();
    let mut round = 0u64;
    while start.elapsed() < budget {
        round += 1;
        let mut input = seeds[rng.below(seeds.len())].clone();
        for _ in 0..1 + rng.below(8) {
            mutate(&mut rng, &mut input, tokens, &seeds);
        }
        run(&input, round);
    }
    eprintln!(
        "{target}: {round} mutated inputs in {:?} (seed {seed})",
        start.elapsed()
    );
}

/// A GGUF that parses writes back as a file that parses to the same bytes again.
#[test]
fn fuzz_gguf_reader() {
    let tokens: &[&[u8]] = &[
        b"GGUF",
        &[3, 0, 0, 0],
        &[0xff; 8],
        &[0, 0, 0, 0, 0, 0, 0, 0x80],
        &[8, 0, 0, 0],
        &[9, 0, 0, 0],
        b"general.alignment",
    ];
    fuzz("gguf", tokens, |bytes| {
        let Ok(file) = GgufFile::from_bytes(bytes) else {
            return Ok(());
        };
        // Writing back pads each tensor and the header to the file's alignment: a 57-byte input
        // declaring 64 MiB (the corpus' alignment-64MiB-no-tensors.gguf) writes and reads back
        // hundreds of MB, bounded but seconds long. The reading is what is fuzzed; such files
        // are only read.
        if file.metadata().alignment().is_ok_and(|a| a > MAX_ROUND_TRIP_ALIGNMENT) {
            return Ok(());
        }
        let Ok(writer) = GgufWriter::from_file(&file) else {
            return Ok(());
        };
        let mut first = Vec::new();
        writer.write_to(&mut first).map_err(|e| format!("writing back: {e}"))?;
        let again = GgufFile::from_bytes(&first).map_err(|e| format!("its own output does not parse: {e}"))?;
        let mut second = Vec::new();
        GgufWriter::from_file(&again)
            .and_then(|w| w.write_to(&mut second))
            .map_err(|e| format!("writing back twice: {e}"))?;
        if first != second {
            return Err("writing back is not stable".into());
        }
        Ok(())
    });
}

/// A case string that parses prints as one that parses and prints the same (a fixed point: the
/// print keeps 6 decimals of a float, as upstream's does, so `max_bias=0.0000004` prints as
/// `0.000000` and reads back as 0), and normalises to that print.
#[test]
fn fuzz_case_spec_parser() {
    let tokens: &[&[u8]] = &[
        b"(",
        b")",
        b"[",
        b"]",
        b",",
        b"=",
        b"-1",
        b"0",
        b"18446744073709551616",
        b"4294967296",
        b"q4_0",
        b"f16",
        b"type_a=",
        b"per=[",
        b"bs=[",
        b"nr=[",
        b"MUL_MAT(",
        b"FLASH_ATTN_EXT(",
        b"e+",
        b".5",
    ];
    fuzz("case-spec", tokens, |bytes| {
        let text = String::from_utf8_lossy(bytes);
        let Ok(case) = text.parse::<Case>() else {
            return Ok(());
        };
        let printed = case.to_string();
        match printed.parse::<Case>() {
            Ok(back) if back.to_string() == printed => {}
            other => return Err(format!("`{printed}` reads back as {other:?}")),
        }
        if compare::normalise_case(&text) != printed {
            return Err(format!("normalises to `{}`", compare::normalise_case(&text)));
        }
        Ok(())
    });
}

/// Upstream's output reads into entries whose timings are finite and positive, or an error
/// naming a line of the input.
#[test]
fn fuzz_upstream_output_parser() {
    let tokens: &[&[u8]] = &[
        b"(",
        b")",
        b"):",
        b" runs - ",
        b" us/run",
        b"inf",
        b"NaN",
        b"-",
        b"1e-310",
        b"0",
        b"\x1b[1;32m",
        b"\x1b[0m",
        b"\n",
        b"OK",
        b"FAIL",
        b"not supported",
        b"Backend 1/2: ",
        b"MUL_MAT(",
    ];
    fuzz("upstream-output", tokens, |bytes| {
        let text = String::from_utf8_lossy(bytes);
        match compare::upstream::parse(&text) {
            Ok(report) => check_entries(&report.entries),
            Err(bad) if (1..=text.lines().count()).contains(&bad.line) => Ok(()),
            Err(bad) => Err(format!("an error naming no line of the input: {bad}")),
        }
    });
}

/// Our JSON lines read into entries that print back as lines reading the same.
#[test]
fn fuzz_ours_json_parser() {
    let tokens: &[&[u8]] = &[
        b"{",
        b"}",
        b"\"",
        b":",
        b",",
        b"\"us_per_run\":",
        b"-1",
        b"0",
        b"1e-310",
        b"1e400",
        b"null",
        b"\"status\":",
        b"\"mode\":\"perf\"",
        b"\"case\":",
        b"\n",
        b"\\u0000",
    ];
    fuzz("ours-json", tokens, |bytes| {
        let text = String::from_utf8_lossy(bytes);
        let entries = match compare::parse_ours(&text) {
            Ok(entries) => entries,
            Err(bad) if (1..=text.lines().count()).contains(&bad.line) => return Ok(()),
            Err(bad) => return Err(format!("an error naming no line of the input: {bad}")),
        };
        check_entries(&entries)?;
        let printed: String = entries.iter().map(ours_line).collect();
        let back = compare::parse_ours(&printed).map_err(|e| format!("printed entries do not read: {e}"))?;
        if back != entries {
            return Err(format!("entries read back as {back:?}, not {entries:?}"));
        }
        Ok(())
    });
}

/// Every timing in `entries` is a finite positive number: what ratios need.
fn check_entries(entries: &[Entry]) -> Result<(), String> {
    for e in entries {
        if let Some(us) = e.outcome.us_per_run()
            && !(us.is_normal() && us > 0.0)
        {
            return Err(format!("{}: a timing of {us} was accepted", e.case));
        }
    }
    Ok(())
}

/// `entry` as `backend-ops --output json` prints it.
fn ours_line(entry: &Entry) -> String {
    let mut obj = serde_json::json!({ "case": entry.case, "op": entry.op });
    match &entry.outcome {
        Outcome::Timed { runs, us_per_run } => {
            obj["mode"] = "perf".into();
            obj["runs"] = (*runs).into();
            obj["us_per_run"] = (*us_per_run).into();
        }
        other => {
            obj["mode"] = "test".into();
            obj["status"] = other.status().into();
            if let Outcome::Fail(r) | Outcome::Unsupported(r) | Outcome::Crash(r) = other {
                obj["reason"] = r.clone().into();
            }
        }
    }
    if let Some(path) = &entry.path {
        obj["path"] = path.clone().into();
    }
    format!("{obj}\n")
}

/// Writes the GGUF seeds with the crate's own writer (run once by hand:
/// `cargo test -p ggml-dawn-bench --test fuzz -- --ignored write_gguf_seeds`).
#[test]
#[ignore]
fn write_gguf_seeds() {
    use ggml_dawn::GgmlType;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus/gguf");
    std::fs::create_dir_all(&dir).unwrap();
    let f32s = |n: usize| {
        (0..n)
            .flat_map(|i| (i as f32 * 0.25 - 1.0).to_le_bytes())
            .collect::<Vec<u8>>()
    };
    let mut w = GgufWriter::new();
    w.add_tensor("a", GgmlType::F32, [4, 2, 1, 1], f32s(8)).unwrap();
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    std::fs::write(dir.join("f32-tensor.gguf"), &bytes).unwrap();

    let mut w = GgufWriter::new();
    w.set_alignment(64).unwrap();
    w.add_tensor("x", GgmlType::F16, [8, 1, 1, 1], vec![0x3c; 16]).unwrap();
    w.add_tensor("q", GgmlType::Q4_0, [32, 1, 1, 1], vec![0x11; 18])
        .unwrap();
    w.add_raw_tensor("unknown-type", 1000, 1, [3, 1, 1, 1], vec![1, 2, 3])
        .unwrap();
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    std::fs::write(dir.join("aligned-mixed-tensors.gguf"), &bytes).unwrap();

    // Metadata of every kind, as ggml writes it: the head of a golden file (cut inside its data).
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/golden/quant/q4_0.gguf");
    let file = GgufFile::from_bytes(&std::fs::read(golden).unwrap()).unwrap();
    let mut bytes = Vec::new();
    GgufWriter::from_file(&file).unwrap().write_to(&mut bytes).unwrap();
    bytes.truncate(bytes.len() - file.data().len() + 64);
    std::fs::write(dir.join("golden-q4_0-head.gguf"), &bytes).unwrap();
}
