//! Copies `shaders/` into OUT_DIR for the library to embed: as they are with the `probes`
//! feature (the benchmark tool's), and otherwise with the measurement-only probe branches
//! removed (`build/strip_probes.rs`), so the library holds no probe code.

use std::path::Path;
use std::{env, fs};

#[path = "build/strip_probes.rs"]
mod strip_probes;

fn copy(from: &Path, to: &Path, strip: bool) {
    fs::create_dir_all(to).expect("create the shader folder in OUT_DIR");
    let mut entries: Vec<_> = fs::read_dir(from)
        .expect("read a shader folder")
        .map(|e| e.expect("a shader folder entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let target = to.join(path.file_name().expect("a file name"));
        if path.is_dir() {
            copy(&path, &target, strip);
            continue;
        }
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let text = if strip {
            strip_probes::strip_probes(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        } else {
            text
        };
        // Rewritten only when changed, so that an unchanged shader does not rebuild the crate.
        if fs::read_to_string(&target).ok().as_deref() != Some(text.as_str()) {
            fs::write(&target, text).unwrap_or_else(|e| panic!("{}: {e}", target.display()));
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=shaders");
    println!("cargo:rerun-if-changed=build/strip_probes.rs");
    let out = env::var_os("OUT_DIR").expect("OUT_DIR");
    let strip = env::var_os("CARGO_FEATURE_PROBES").is_none();
    copy(Path::new("shaders"), &Path::new(&out).join("shaders"), strip);
}
