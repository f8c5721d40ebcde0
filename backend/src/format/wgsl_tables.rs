//! `backend/shaders/common/format_tables.wgsl`, ggml's lookup tables for the GPU's
//! `formats.wgsl`, is generated from this module's CPU tables: the test here renders the WGSL
//! text and checks the file against it, or rewrites the file when `UPDATE_WGSL_TABLES=1` is set.
//!
//! Each table sits in an `#if` block keyed on the `FMT_TYPE`s that read it, so that a shader
//! variant compiles only the tables of its type. WGSL has no byte arrays, and a `const` array that
//! is indexed at run time is copied into a function variable at every such index (lavapipe's
//! compile time grows faster than its length: 13 s for 4096 u32 against 2 s for 1024; on the
//! H200 an iq2_xxs mat-vec took 838 us against upstream's 281). So tables of at most 16 byte
//! values are one `vec4<u32>` constant of packed bytes, read with `fmt_kv(TABLE, i)` (a
//! vector's dynamic index copies nothing), and longer ones are module-scope `var<private>`
//! arrays. Those still cost each invocation its own copy on the H200 (iq2_xxs 783 us at n=1,
//! BENCHMARKS.md): the grids want a read-only storage buffer instead. The 8-byte grids, whose bytes take 3 values, are stored as 2-bit
//! codes: 16 bits per entry, entry `e` in bits `16 * (e % 2)..` of word `e / 2`, byte `j` the code
//! at bit `2 * j` of that, decoded by a levels table (`fmt_kv(*_LEVELS, code)`). The 4-byte iq3
//! grids are plain u32 (byte `j` of entry `e` is byte `j` of word `e`).

use std::fmt::Write as _;
use std::path::PathBuf;

use super::{fp4, iquants};

/// One WGSL `const` array.
struct Table {
    /// The WGSL name.
    name: &'static str,
    /// What the table is in ggml.
    doc: &'static str,
    /// The `TYPE_*` ids of the formats that read it.
    users: &'static [&'static str],
    /// `"u32"` or `"i32"`.
    elem: &'static str,
    /// The entries as WGSL literals.
    values: Vec<String>,
    /// Entries per line.
    per_line: usize,
}

impl Table {
    /// The entries as signed bytes, when there are at most 16 and each fits one.
    fn packed_bytes(&self) -> Option<Vec<u8>> {
        if self.values.len() > 16 {
            return None;
        }
        self.values
            .iter()
            .map(|v| {
                let v: i64 = v.trim_end_matches('u').parse().ok()?;
                i8::try_from(v).ok().map(|b| b as u8)
            })
            .collect()
    }
}

fn hex_u32(v: u32) -> String {
    format!("0x{v:08x}u")
}

/// The values of the bytes of 8-byte grid entries, sorted (as i8 when `signed`).
fn grid_levels(grids: &[&[u64]], signed: bool) -> Vec<i32> {
    let mut levels: Vec<i32> = grids
        .iter()
        .flat_map(|g| g.iter())
        .flat_map(|&e| (0..8).map(move |j| (e >> (8 * j)) as u8))
        .map(|b| if signed { i32::from(b as i8) } else { i32::from(b) })
        .collect();
    levels.sort_unstable();
    levels.dedup();
    assert!(levels.len() <= 4, "{levels:?}: more than 2 bits per byte");
    levels
}

/// 8-byte grid entries as 2-bit codes into `levels`, two entries per u32 (see the module doc).
fn pack_grid(entries: &[u64], levels: &[i32], signed: bool) -> Vec<u32> {
    let code = |b: u8| {
        let v = if signed { i32::from(b as i8) } else { i32::from(b) };
        levels.iter().position(|&l| l == v).expect("byte outside the levels") as u32
    };
    let half = |e: u64| (0..8).map(|j| code((e >> (8 * j)) as u8) << (2 * j)).sum::<u32>();
    assert_eq!(entries.len() % 2, 0);
    entries
        .chunks_exact(2)
        .map(|p| half(p[0]) | (half(p[1]) << 16))
        .collect()
}

/// Byte `j` of entry `e` of a grid packed by [`pack_grid`], as the shaders decode it.
fn unpack_grid(words: &[u32], levels: &[i32], e: usize, j: usize) -> i32 {
    levels[((words[e / 2] >> (16 * (e % 2) + 2 * j)) & 3) as usize]
}

fn iq2_grids() -> [&'static [u64]; 3] {
    [&iquants::IQ2XXS_GRID, &iquants::IQ2XS_GRID, &iquants::IQ2S_GRID]
}

fn tables() -> Vec<Table> {
    let ints = |t: &[i32]| t.iter().map(|v| v.to_string()).collect::<Vec<_>>();
    let hex = |t: &[u32]| t.iter().map(|&v| hex_u32(v)).collect::<Vec<_>>();
    let widen = |t: &[i8]| t.iter().map(|&v| i32::from(v)).collect::<Vec<_>>();
    let iq2_levels = grid_levels(&iq2_grids(), false);
    let iq1_levels = grid_levels(&[&iquants::IQ1S_GRID], true);
    vec![
        Table {
            name: "KVALUES_IQ4NL",
            doc: "kvalues_iq4nl: the 16 levels of iq4_nl and iq4_xs.",
            users: &["TYPE_IQ4_NL", "TYPE_IQ4_XS"],
            elem: "i32",
            values: ints(&widen(&iquants::KVALUES_IQ4NL)),
            per_line: 16,
        },
        Table {
            name: "KVALUES_MXFP4",
            doc: "kvalues_mxfp4: the E2M1 levels doubled, by 4-bit code (bit 3 = sign).",
            users: &["TYPE_MXFP4", "TYPE_NVFP4"],
            elem: "i32",
            values: ints(&widen(&fp4::KVALUES_MXFP4)),
            per_line: 16,
        },
        Table {
            name: "KSIGNS_IQ2XS",
            doc: "ksigns_iq2xs: a 7-bit index to 8 sign bits.",
            users: &["TYPE_IQ2_XXS", "TYPE_IQ2_XS", "TYPE_IQ3_XXS"],
            elem: "u32",
            values: iquants::KSIGNS_IQ2XS.iter().map(|v| format!("{v}u")).collect(),
            per_line: 16,
        },
        Table {
            name: "IQ2_GRID_LEVELS",
            doc: "The byte values of the iq2 grids, by 2-bit code.",
            users: &["TYPE_IQ2_XXS", "TYPE_IQ2_XS", "TYPE_IQ2_S"],
            elem: "u32",
            values: iq2_levels.iter().map(|v| format!("{v}u")).collect(),
            per_line: 16,
        },
        Table {
            name: "IQ2XXS_GRID",
            doc: "iq2xxs_grid: 256 entries of 8 bytes, as codes into IQ2_GRID_LEVELS.",
            users: &["TYPE_IQ2_XXS"],
            elem: "u32",
            values: hex(&pack_grid(&iquants::IQ2XXS_GRID, &iq2_levels, false)),
            per_line: 8,
        },
        Table {
            name: "IQ2XS_GRID",
            doc: "iq2xs_grid: 512 entries of 8 bytes, as codes into IQ2_GRID_LEVELS.",
            users: &["TYPE_IQ2_XS"],
            elem: "u32",
            values: hex(&pack_grid(&iquants::IQ2XS_GRID, &iq2_levels, false)),
            per_line: 8,
        },
        Table {
            name: "IQ2S_GRID",
            doc: "iq2s_grid: 1024 entries of 8 bytes, as codes into IQ2_GRID_LEVELS.",
            users: &["TYPE_IQ2_S"],
            elem: "u32",
            values: hex(&pack_grid(&iquants::IQ2S_GRID, &iq2_levels, false)),
            per_line: 8,
        },
        Table {
            name: "IQ3XXS_GRID",
            doc: "iq3xxs_grid: 256 entries of 4 bytes.",
            users: &["TYPE_IQ3_XXS"],
            elem: "u32",
            values: hex(&iquants::IQ3XXS_GRID),
            per_line: 8,
        },
        Table {
            name: "IQ3S_GRID",
            doc: "iq3s_grid: 512 entries of 4 bytes.",
            users: &["TYPE_IQ3_S"],
            elem: "u32",
            values: hex(&iquants::IQ3S_GRID),
            per_line: 8,
        },
        Table {
            name: "IQ1S_GRID_LEVELS",
            doc: "The values of the int8 bytes of iq1s_grid, by 2-bit code.",
            users: &["TYPE_IQ1_S", "TYPE_IQ1_M"],
            elem: "i32",
            values: ints(&iq1_levels),
            per_line: 16,
        },
        Table {
            name: "IQ1S_GRID",
            doc: "iq1s_grid: 2048 entries of 8 int8 bytes, as codes into IQ1S_GRID_LEVELS.",
            users: &["TYPE_IQ1_S", "TYPE_IQ1_M"],
            elem: "u32",
            values: hex(&pack_grid(&iquants::IQ1S_GRID, &iq1_levels, true)),
            per_line: 8,
        },
    ]
}

/// The text of `backend/shaders/common/format_tables.wgsl`.
fn render() -> String {
    let mut out = String::from(
        "// ggml's lookup tables (ggml-common.h) for formats.wgsl, which includes this file in the\n\
         // branches of the formats that read them.\n\
         //\n\
         // GENERATED from the CPU tables by backend/src/format/wgsl_tables.rs: do not edit. To\n\
         // regenerate: UPDATE_WGSL_TABLES=1 cargo test -p ggml-dawn --lib wgsl_tables\n\
         //\n\
         // Each table is compiled only into the variants whose FMT_TYPE reads it, once. Tables of at\n\
         // most 16 bytes are packed in a vec4<u32>, read with fmt_kv; longer ones are var<private>\n\
         // (a const array indexed at run time would be copied at every index). The 8-byte grids\n\
         // are 2-bit codes into a levels table: byte j of entry e is fmt_kv(LEVELS, code), code the\n\
         // 2 bits at bit 16 * (e % 2) + 2 * j of word e / 2. Byte j of an entry of the 4-byte iq3\n\
         // grids is byte j of its word.\n\
         \n\
         #ifndef HAVE_FMT_KV\n\
         #define HAVE_FMT_KV 1\n\
         // Signed byte i of a table of packed bytes.\n\
         fn fmt_kv(table: vec4<u32>, i: u32) -> i32 {\n\
         \x20   return bitcast<i32>(table[i >> 2u] << (24u - 8u * (i & 3u))) >> 24u;\n\
         }\n\
         #endif\n",
    );
    for t in tables() {
        let condition: Vec<String> = t.users.iter().map(|u| format!("FMT_TYPE == {u}")).collect();
        let n = t.values.len();
        // The guard keeps a table single when two operands of one shader read it.
        writeln!(out, "\n#if ({}) && !defined(HAVE_{})", condition.join(" || "), t.name).unwrap();
        writeln!(out, "#define HAVE_{} 1", t.name).unwrap();
        writeln!(out, "// {}", t.doc).unwrap();
        if let Some(bytes) = t.packed_bytes() {
            let mut words = [0u32; 4];
            for (i, b) in bytes.iter().enumerate() {
                words[i / 4] |= u32::from(*b) << (8 * (i % 4));
            }
            let words: Vec<String> = words.iter().map(|&w| hex_u32(w)).collect();
            writeln!(out, "const {}: vec4<u32> = vec4<u32>({});", t.name, words.join(", ")).unwrap();
            out.push_str("#endif\n");
            continue;
        }
        writeln!(
            out,
            "var<private> {}: array<{}, {n}> = array<{}, {n}>(",
            t.name, t.elem, t.elem
        )
        .unwrap();
        let lines: Vec<String> = t
            .values
            .chunks(t.per_line)
            .map(|c| format!("    {}", c.join(", ")))
            .collect();
        writeln!(out, "{}", lines.join(",\n")).unwrap();
        out.push_str(");\n#endif\n");
    }
    out
}

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("shaders/common/format_tables.wgsl")
}

#[test]
fn format_tables_wgsl_is_generated_from_the_cpu_tables() {
    let expected = render();
    let path = path();
    if std::env::var("UPDATE_WGSL_TABLES").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &expected).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        actual == expected,
        "{} is stale: regenerate it with UPDATE_WGSL_TABLES=1 cargo test -p ggml-dawn --lib wgsl_tables",
        path.display()
    );
    // The copy embedded in the shader library is the same file.
    assert_eq!(crate::shader_lib::source("format_tables.wgsl"), Some(expected.as_str()));
}

#[test]
fn tables_are_guarded_by_type() {
    let text = render();
    for t in tables() {
        // Every table is inside one #if block, and every user is a type id of common.wgsl.
        let declared = text.matches(&format!("const {}:", t.name)).count()
            + text.matches(&format!("var<private> {}:", t.name)).count();
        assert_eq!(declared, 1, "{}", t.name);
        let common = crate::shader_lib::source("common.wgsl").unwrap();
        for u in t.users {
            assert!(common.contains(&format!("#define {u} ")), "{u} is not in common.wgsl");
        }
    }
}

#[test]
fn packed_grids_decode_to_the_cpu_tables() {
    let iq2_levels = grid_levels(&iq2_grids(), false);
    assert_eq!(iq2_levels.len(), 3);
    for grid in iq2_grids() {
        let words = pack_grid(grid, &iq2_levels, false);
        assert_eq!(words.len(), grid.len() / 2);
        for (e, &entry) in grid.iter().enumerate() {
            for j in 0..8 {
                assert_eq!(
                    unpack_grid(&words, &iq2_levels, e, j),
                    i32::from((entry >> (8 * j)) as u8)
                );
            }
        }
    }
    let iq1_levels = grid_levels(&[&iquants::IQ1S_GRID], true);
    assert_eq!(iq1_levels, [-1, 0, 1]);
    let words = pack_grid(&iquants::IQ1S_GRID, &iq1_levels, true);
    for (e, &entry) in iquants::IQ1S_GRID.iter().enumerate() {
        for j in 0..8 {
            assert_eq!(
                unpack_grid(&words, &iq1_levels, e, j),
                i32::from((entry >> (8 * j)) as u8 as i8)
            );
        }
    }
}

#[test]
fn packed_tables_hold_their_bytes() {
    for t in tables() {
        let Some(bytes) = t.packed_bytes() else { continue };
        for (i, v) in t.values.iter().enumerate() {
            let v: i64 = v.trim_end_matches('u').parse().unwrap();
            assert_eq!(i64::from(bytes[i] as i8), v, "{} entry {i}", t.name);
        }
    }
    let names: Vec<&str> = tables()
        .iter()
        .filter(|t| t.packed_bytes().is_some())
        .map(|t| t.name)
        .collect();
    assert_eq!(
        names,
        ["KVALUES_IQ4NL", "KVALUES_MXFP4", "IQ2_GRID_LEVELS", "IQ1S_GRID_LEVELS"]
    );
}
