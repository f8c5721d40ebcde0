//! `cargo xtask llm ARGS…`: `dawn-llm` built and run in the root. `-m NAME` names a model
//! `cargo xtask model` fetches (fetched first if it is not cached yet); `-m PATH` may be a file
//! anywhere on the host: its folder is mounted read-only at the same path in the root.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::model;
use crate::sandbox::Mount;

/// The cargo command that builds and runs `dawn-llm` with `args` (its help without any).
pub fn command(args: Vec<OsString>) -> Vec<OsString> {
    let mut command: Vec<OsString> = [
        "cargo",
        "run",
        "--quiet",
        "--release",
        "--locked",
        "--package",
        "ggml-dawn-llm",
        "--bin",
        "dawn-llm",
        "--",
    ]
    .map(OsString::from)
    .into();
    if args.is_empty() {
        command.push("--help".into());
    } else {
        command.extend(args);
    }
    command
}

/// `args` with each `-m`/`--model` value resolved: a model's name (`resolve_name`) becomes its
/// cached file, a host path its absolute path; and the read-only mounts those paths need where
/// `visible` (the folders the root sees anyway) does not hold them.
pub fn resolve_models(
    args: Vec<OsString>,
    resolve_name: impl Fn(&str) -> Option<Result<PathBuf>>,
    visible: &[PathBuf],
) -> Result<(Vec<OsString>, Vec<Mount>)> {
    let mut out = Vec::with_capacity(args.len());
    let mut mounts: Vec<Mount> = Vec::new();
    let mut resolve = |value: &OsString| -> Result<OsString> {
        let text = value.to_string_lossy();
        let path = match resolve_name(&text) {
            Some(cached) => cached?,
            None => {
                let p = Path::new(value);
                if !p.is_file() {
                    // dawn-llm says what is wrong with it.
                    return Ok(value.clone());
                }
                std::path::absolute(p).with_context(|| format!("the model path {}", p.display()))?
            }
        };
        if let Some(dir) = path.parent().filter(|d| !visible.iter().any(|v| d.starts_with(v)))
            && !mounts.iter().any(|m| m.source == dir)
        {
            mounts.push(Mount {
                source: dir.to_path_buf(),
                inside: dir.to_path_buf(),
                read_only: true,
            });
        }
        Ok(path.into_os_string())
    };
    let mut iter = args.into_iter();
    while let Some(arg) = iter.next() {
        let text = arg.to_string_lossy().into_owned();
        if text == "-m" || text == "--model" {
            out.push(arg);
            if let Some(value) = iter.next() {
                out.push(resolve(&value)?);
            }
        } else if let Some(value) = text.strip_prefix("--model=") {
            let resolved = resolve(&OsString::from(value))?;
            let mut joined = OsString::from("--model=");
            joined.push(resolved);
            out.push(joined);
        } else {
            out.push(arg);
        }
    }
    Ok((out, mounts))
}

/// A known model's cached file, fetched if needed; `None` for a name no model has.
pub fn fetch_named(name: &str) -> Option<Result<PathBuf>> {
    model::MODELS.iter().find(|m| m.name == name).map(model::fetch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn names_become_cached_files_and_outside_folders_are_mounted() {
        let dir = std::env::temp_dir().join(format!("xtask-llm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("m.gguf");
        std::fs::write(&file, b"GGUF").unwrap();
        let cache = PathBuf::from("/cache/models");
        let named = |n: &str| (n == "smollm2").then(|| Ok(cache.join("SmolLM2.gguf")));

        let (args, mounts) = resolve_models(
            os(&["generate", "-m", "smollm2", "-p", "hi"]),
            named,
            std::slice::from_ref(&cache),
        )
        .unwrap();
        assert_eq!(args, os(&["generate", "-m", "/cache/models/SmolLM2.gguf", "-p", "hi"]));
        assert!(mounts.is_empty(), "the cache is visible already");

        let (args, mounts) = resolve_models(
            os(&["bench", &format!("--model={}", file.display())]),
            named,
            std::slice::from_ref(&cache),
        )
        .unwrap();
        assert_eq!(args, os(&["bench", &format!("--model={}", file.display())]));
        assert_eq!(mounts.len(), 1);
        assert_eq!(mounts[0].source, dir);
        assert_eq!(mounts[0].inside, dir);
        assert!(mounts[0].read_only);

        // A path that is not a file is left for dawn-llm to refuse.
        let (args, mounts) = resolve_models(os(&["generate", "-m", "/no/such.gguf"]), named, &[]).unwrap();
        assert_eq!(args, os(&["generate", "-m", "/no/such.gguf"]));
        assert!(mounts.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_arguments_print_the_help() {
        assert_eq!(command(Vec::new()).last(), Some(&OsString::from("--help")));
        assert_eq!(command(os(&["tokenize"])).last(), Some(&OsString::from("tokenize")));
    }
}
