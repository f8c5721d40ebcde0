//! Generating the Rust bindings from the `webgpu.h` of the Dawn being linked.
//!
//! Enum values differ between Dawn snapshots, so the bindings always come from the exact header
//! that matches the library. The checked-in copy (`src/pregenerated.rs`) only serves builds
//! without Dawn (documentation builds); `DAWN_SYS_UPDATE_BINDINGS=1` refreshes it.

use std::path::Path;

use crate::Dawn;

const PREGENERATED: &str = "src/pregenerated.rs";

/// Drops the C prefix from enum constants: `WGPUFeatureName_ShaderF16` becomes
/// `WGPUFeatureName::ShaderF16` (a leading digit keeps an underscore: `_2D`).
#[derive(Debug)]
struct ShortVariantNames;

impl bindgen::callbacks::ParseCallbacks for ShortVariantNames {
    fn enum_variant_name(
        &self,
        enum_name: Option<&str>,
        original: &str,
        _value: bindgen::callbacks::EnumVariantValue,
    ) -> Option<String> {
        let enum_name = enum_name?.trim_start_matches("enum ");
        let short = original.strip_prefix(enum_name)?.strip_prefix('_')?;
        Some(if short.starts_with(|c: char| c.is_ascii_digit()) {
            format!("_{short}")
        } else {
            short.to_owned()
        })
    }
}

pub fn generate(dawn: &Dawn, manifest_dir: &Path, out_dir: &Path) {
    let header = dawn.include_dir.join("webgpu/webgpu.h");
    println!("cargo:rerun-if-changed={}", header.display());
    let bindings = bindgen::Builder::default()
        .header(header.display().to_string())
        .clang_arg(format!("-I{}", dawn.include_dir.display()))
        .allowlist_function("wgpu.*")
        .allowlist_type("WGPU.*")
        .allowlist_var("WGPU.*")
        // `SIZE_MAX`/`UINT64_MAX` macros come out with the wrong type; src/lib.rs defines them.
        .blocklist_item("WGPU_(STRLEN|WHOLE_MAP_SIZE|WHOLE_SIZE|LIMIT_U64_UNDEFINED)")
        .parse_callbacks(Box::new(ShortVariantNames))
        // Enums as `#[repr(transparent)]` newtypes with associated constants
        // (`WGPUFeatureName::ShaderF16`): readable, and values Dawn adds later stay representable.
        .newtype_enum("WGPU.*")
        .prepend_enum_name(false)
        .derive_default(true)
        .derive_debug(true)
        .derive_copy(true)
        .generate_comments(true)
        .layout_tests(true)
        .formatter(bindgen::Formatter::Prettyplease)
        .generate()
        .unwrap_or_else(|e| {
            eprintln!(
                "webgpu-dawn-sys: bindgen could not parse {}: {e}\n(bindgen needs libclang: install \
                 libclang-dev, or set LIBCLANG_PATH)",
                header.display()
            );
            std::process::exit(1);
        });
    let out = out_dir.join("bindings.rs");
    let mut text = bindings.to_string();
    text.push_str(&feature_names(&header));
    std::fs::write(&out, text).expect("writing the bindings into OUT_DIR");
    if crate::env_flag("DAWN_SYS_UPDATE_BINDINGS") {
        let target = manifest_dir.join(PREGENERATED);
        std::fs::copy(&out, &target).expect("refreshing the checked-in bindings");
        println!("cargo:warning=webgpu-dawn-sys: refreshed {}", target.display());
    }
}

/// A `feature_name` function mapping each `WGPUFeatureName` value to its name, read from the
/// header's enum (`    WGPUFeatureName_ShaderF16 = 0x0000000B,`).
fn feature_names(header: &std::path::Path) -> String {
    // The API header proper is the one `webgpu/webgpu.h` includes (Dawn's `dawn/webgpu.h`).
    let dir = header
        .parent()
        .and_then(|d| d.parent())
        .expect("header inside include/webgpu");
    let text = [dir.join("dawn/webgpu.h"), header.to_path_buf()]
        .iter()
        .find_map(|p| {
            std::fs::read_to_string(p)
                .ok()
                .filter(|t| t.contains("WGPUFeatureName_"))
        })
        .unwrap_or_default();
    let mut arms = String::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("WGPUFeatureName_") else {
            continue;
        };
        let Some((name, value)) = rest.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_end_matches(',');
        let (name, value) = (name.trim(), value.trim());
        if name == "Force32" || !value.starts_with("0x") {
            continue;
        }
        arms.push_str(&format!("        {value} => Some(\"{name}\"),\n"));
    }
    format!(
        "\n/// The name of a `WGPUFeatureName` value, as the header spells it (`ShaderF16`).\n\
         pub fn feature_name(value: u32) -> Option<&'static str> {{\n    match value {{\n{arms}        _ => None,\n    }}\n}}\n"
    )
}

/// Documentation builds: no Dawn to bind against, so the checked-in bindings stand in.
pub fn use_pregenerated(manifest_dir: &Path, out_dir: &Path) {
    std::fs::copy(manifest_dir.join(PREGENERATED), out_dir.join("bindings.rs"))
        .expect("copying the checked-in bindings");
}
