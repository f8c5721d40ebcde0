//! `DAWN_SOURCE_DIR=DIR cargo xtask msl-check`: every shader variant the planners produce for
//! Apple GPUs, translated to MSL by Tint built from the same Dawn checkout.
//!
//! The Dawn build that `webgpu-dawn-sys` makes for a source checkout under xtask also builds
//! Tint's command-line tool with the MSL writer (`DAWN_SYS_TINT_CMD`), so one build serves the
//! library and the check. `backend-ops shaders` writes the variants (`ggml_dawn::variants`, the
//! same functions the encoders build their kernels with) into `<cache>/msl-check/wgsl/` with an
//! index; each is translated into `msl/`, its output and exit status kept in `log/`. Any failure
//! is reported with its variant key.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::dawn_source::SourceDawn;
use crate::sandbox::{self, Mount};
use crate::{owned, sysroot};

/// One line of `index.tsv` and how its translation went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub file: String,
    pub device: String,
    pub op: String,
    pub path: String,
    pub key: String,
    /// `None`: translated. `Some(text)`: what went wrong (Tint's messages, or a missing status).
    pub failure: Option<String>,
}

/// Reads `index.tsv` (header, then `file device op path key` per line) and asks `status` for the
/// exit status and output of each file's translation (`None`: never ran).
pub fn judge(index: &str, status: impl Fn(&str) -> Option<(i32, String)>) -> Result<Vec<Outcome>> {
    let mut lines = index.lines();
    match lines.next() {
        Some("file\tdevice\top\tpath\tvariant") => {}
        other => bail!("index.tsv: unexpected header {other:?}"),
    }
    let mut outcomes = Vec::new();
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.is_empty()) {
        let fields: Vec<&str> = line.splitn(5, '\t').collect();
        let [file, device, op, path, key] = fields[..] else {
            bail!("index.tsv line {}: expected 5 tab-separated fields: {line:?}", i + 2);
        };
        let failure = match status(file) {
            None => Some("not translated (no exit status)".to_owned()),
            Some((0, _)) => None,
            Some((rc, output)) => Some(format!("tint exited with {rc}: {}", output.trim())),
        };
        outcomes.push(Outcome {
            file: file.to_owned(),
            device: device.to_owned(),
            op: op.to_owned(),
            path: path.to_owned(),
            key: key.to_owned(),
            failure,
        });
    }
    if outcomes.is_empty() {
        bail!("index.tsv lists no shader variant");
    }
    Ok(outcomes)
}

/// The report: a count per op and path, then every failure with its variant key.
pub fn report(outcomes: &[Outcome]) -> String {
    let mut per_path: std::collections::BTreeMap<(&str, &str), (usize, usize)> = Default::default();
    for o in outcomes {
        let e = per_path.entry((&o.op, &o.path)).or_default();
        e.0 += 1;
        e.1 += usize::from(o.failure.is_some());
    }
    let failed = outcomes.iter().filter(|o| o.failure.is_some()).count();
    let mut text = String::new();
    for ((op, path), (n, bad)) in &per_path {
        let _ = writeln!(text, "  {op:<15} {path:<16} {n:>5} variants, {bad} failed");
    }
    for o in outcomes.iter().filter(|o| o.failure.is_some()) {
        let _ = writeln!(
            text,
            "FAIL {} ({}, {}): {}",
            o.key,
            o.device,
            o.file,
            o.failure.as_deref().unwrap_or_default()
        );
    }
    let _ = writeln!(
        text,
        "msl-check: {} variants, {} translated to MSL, {failed} failed",
        outcomes.len(),
        outcomes.len() - failed
    );
    text
}

/// The shell script, run in the root, that translates every `wgsl/*.wgsl` of `work` with `tint`
/// on all cores: `msl/NAME.metal`, and `log/NAME.txt` (Tint's output) and `log/NAME.rc`.
pub fn translate_script(work: &Path, tint: &Path) -> String {
    let w = crate::host::sh_quote(&work.display().to_string());
    let t = crate::host::sh_quote(&tint.display().to_string());
    format!(
        "set -e\ncd {w}\nmkdir -p msl log\n\
         ls wgsl | grep '\\.wgsl$' | xargs -P \"$(nproc)\" -n 1 sh -c '\
         n=${{1%.wgsl}}; \"$0\" --format msl -o \"msl/$n.metal\" \"wgsl/$1\" >\"log/$n.txt\" 2>&1; \
         echo $? >\"log/$n.rc\"' {t}\n"
    )
}

/// Builds what is needed, writes the variants, translates them and reports; fails on any failure.
pub fn run(root: &Path, source: &SourceDawn) -> Result<()> {
    let work = sysroot::cache_dir().join("msl-check");
    owned::fresh_dir(&work, owned::Kind::MslCheck)?;
    source.prepare()?;
    let mut extra = source.extra();
    extra.mounts.push(Mount {
        source: work.clone(),
        inside: work.clone(),
        read_only: false,
    });
    let wgsl = work.join("wgsl");
    eprintln!(
        "msl-check: building backend-ops and Dawn with Tint from {} (build folder {})",
        source.checkout.display(),
        source.build_dir.display()
    );
    let shaders: Vec<OsString> = [
        "cargo",
        "run",
        "--quiet",
        "--locked",
        "--profile",
        "test",
        "--package",
        "ggml-dawn-bench",
        "--bin",
        "backend-ops",
        "--",
        "shaders",
        "--out",
    ]
    .iter()
    .map(OsString::from)
    .chain([wgsl.clone().into_os_string()])
    .collect();
    sandbox::run_in_root_extra(root, &shaders, &extra, "fix the build error above")?;

    let tint = source.tint();
    if !tint.is_file() {
        bail!(
            "the Dawn build in {} made no Tint command-line tool at {} (built with \
             DAWN_SYS_TINT_CMD=1: TINT_BUILD_CMD_TOOLS and TINT_BUILD_MSL_WRITER on)",
            source.build_dir.display(),
            tint.display()
        );
    }
    let script = translate_script(&work, &tint);
    let command: Vec<OsString> = ["sh", "-c", &script].iter().map(OsString::from).collect();
    sandbox::run_in_root_extra(root, &command, &extra, "see the messages above")?;

    let index = std::fs::read_to_string(wgsl.join("index.tsv")).context("reading the variants' index.tsv")?;
    let log = work.join("log");
    let outcomes = judge(&index, |file| status(&log, file))?;
    let text = report(&outcomes);
    std::fs::write(work.join("report.txt"), &text).context("writing report.txt")?;
    print!("{text}");
    if outcomes.iter().any(|o| o.failure.is_some()) {
        bail!(
            "some shader variants do not translate to MSL (report: {})",
            work.join("report.txt").display()
        );
    }
    Ok(())
}

/// The exit status and output of one file's translation.
fn status(log: &Path, file: &str) -> Option<(i32, String)> {
    let stem = file.strip_suffix(".wgsl").unwrap_or(file);
    let rc: i32 = std::fs::read_to_string(log.join(format!("{stem}.rc")))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let output = std::fs::read_to_string(log.join(format!("{stem}.txt"))).unwrap_or_default();
    let output: String = output.lines().take(20).collect::<Vec<_>>().join("\n");
    Some((rc, output))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEX: &str = "file\tdevice\top\tpath\tvariant\n\
        00000.wgsl\tapple-8x8x8\tDEQUANTIZE\tdequantize\tdequantize,SRC_TYPE=0,WG_SIZE=256u\n\
        00001.wgsl\tapple-8x8x8\tMUL_MAT\tsubgroup_matrix\tmul_mat_subgroup_matrix,ACC_F32=1,SG_M=8u\n\
        00002.wgsl\tapple-no-subgroup-matrix\tFLASH_ATTN_EXT\ttile\tflash_attn_tile,HSK=64\n";

    #[test]
    fn a_failure_is_reported_with_its_variant_key_and_a_missing_status_is_a_failure() {
        let outcomes = judge(INDEX, |file| match file {
            "00000.wgsl" => Some((0, String::new())),
            "00001.wgsl" => Some((1, "error: subgroupMatrixLoad: no matching call\n".into())),
            _ => None,
        })
        .unwrap();
        assert_eq!(outcomes.len(), 3);
        assert_eq!(outcomes[0].failure, None);
        assert_eq!(
            outcomes[1].failure.as_deref(),
            Some("tint exited with 1: error: subgroupMatrixLoad: no matching call")
        );
        assert!(outcomes[2].failure.as_deref().unwrap().contains("not translated"));
        let text = report(&outcomes);
        assert!(
            text.contains("FAIL mul_mat_subgroup_matrix,ACC_F32=1,SG_M=8u (apple-8x8x8, 00001.wgsl)"),
            "{text}"
        );
        assert!(text.contains("FAIL flash_attn_tile,HSK=64"), "{text}");
        assert!(
            text.contains("msl-check: 3 variants, 1 translated to MSL, 2 failed"),
            "{text}"
        );
        assert!(
            text.contains("MUL_MAT         subgroup_matrix      1 variants, 1 failed"),
            "{text}"
        );
    }

    #[test]
    fn all_translated_is_a_pass() {
        let outcomes = judge(INDEX, |_| Some((0, String::new()))).unwrap();
        assert!(outcomes.iter().all(|o| o.failure.is_none()));
        assert!(report(&outcomes).ends_with("msl-check: 3 variants, 3 translated to MSL, 0 failed\n"));
    }

    #[test]
    fn a_malformed_or_empty_index_is_an_error() {
        assert!(judge("nonsense\n", |_| None).is_err());
        assert!(judge("file\tdevice\top\tpath\tvariant\n", |_| None).is_err());
        assert!(judge("file\tdevice\top\tpath\tvariant\n00000.wgsl\tx\n", |_| None).is_err());
    }

    #[test]
    fn the_script_translates_every_wgsl_file_to_msl_keeping_status_and_output() {
        let script = translate_script(Path::new("/c/msl-check"), Path::new("/c/dawn-build/x/build/tint"));
        assert!(script.contains("cd '/c/msl-check'"), "{script}");
        assert!(
            script.contains("\"$0\" --format msl -o \"msl/$n.metal\" \"wgsl/$1\""),
            "{script}"
        );
        assert!(script.ends_with("' '/c/dawn-build/x/build/tint'\n"), "{script}");
        assert!(script.contains("echo $? >\"log/$n.rc\""));
        assert!(script.contains("xargs -P \"$(nproc)\" -n 1"));
    }

    #[test]
    fn the_status_of_a_file_comes_from_its_rc_and_txt() {
        let tmp = owned::TempDir::new("msl-status");
        std::fs::write(tmp.path().join("00007.rc"), "3\n").unwrap();
        std::fs::write(tmp.path().join("00007.txt"), "bad\n").unwrap();
        assert_eq!(status(tmp.path(), "00007.wgsl"), Some((3, "bad".into())));
        assert_eq!(status(tmp.path(), "00008.wgsl"), None);
    }
}
