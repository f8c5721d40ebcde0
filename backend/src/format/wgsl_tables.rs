//! ggml's lookup tables for the GPU.
//!
//! The grids of the lattice formats (iq2_xxs … iq1_m, 256 to 2048 entries) live in one read-only
//! storage buffer that [`table_words`] fills and every kernel that reads them binds at
//! [`TABLES_BINDING`] (the stream binds it; see `exec.rs`). A WGSL array, `const` or
//! `var<private>`, indexed at run time costs every invocation its own copy of the table (on the
//! H200 an iq2_xxs mat-vec took 783 us against upstream's 281 that way); a buffer costs one
//! cached load per lookup. The tables of at most 16 byte values stay in the shader, packed in a
//! `vec4<u32>` constant read with `fmt_kv(TABLE, i)` (a vector's dynamic index copies
//! nothing). ggml's `ksigns_iq2xs` is not a table on the GPU: entry `i` is `i` with bit 7 set
//! to make the parity even, which `fmt_ksigns` computes.
//!
//! `backend/shaders/common/format_tables.wgsl` declares all of that. It is generated: the test
//! here renders the WGSL text and checks the file against it, or rewrites the file when
//! `UPDATE_WGSL_TABLES=1` is set. Each declaration sits in an `#if` block keyed on the
//! `FMT_TYPE`s that read it, so a shader variant compiles only what its types need (and binds
//! the buffer only then); a grid is declared as the `u32` word offset of its entries in the
//! buffer.
//!
//! The 8-byte grids, whose bytes take 3 values, are stored as 2-bit codes: 16 bits per entry,
//! entry `e` in bits `16 * (e % 2)..` of word `e / 2`, byte `j` the code at bit `2 * j` of that,
//! decoded by a levels table (`fmt_kv(*_LEVELS, code)`). The 4-byte iq3 grids are plain u32
//! (byte `j` of entry `e` is byte `j` of word `e`).

use super::iquants;

/// The binding (in group 0) of the table buffer, in every kernel that reads a grid: above any
/// kernel's storage and parameter bindings, which count up from 0.
pub(crate) const TABLES_BINDING: u32 = 15;

/// A grid in the table buffer (its name, doc and users are the generator's).
#[cfg_attr(not(test), allow(dead_code))]
struct Grid {
    /// The WGSL name (a `const` holding the grid's word offset).
    name: &'static str,
    /// What the grid is in ggml.
    doc: &'static str,
    /// The `TYPE_*` ids of the formats that read it.
    users: &'static [&'static str],
    /// The grid's words, packed as the shaders read them.
    words: Vec<u32>,
}

/// The byte values of the iq2 grids, by 2-bit code.
fn iq2_levels() -> Vec<i32> {
    grid_levels(&iq2_grids(), false)
}

/// The int8 values of iq1s_grid's bytes, by 2-bit code.
fn iq1_levels() -> Vec<i32> {
    grid_levels(&[&iquants::IQ1S_GRID], true)
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

fn iq2_grids() -> [&'static [u64]; 3] {
    [&iquants::IQ2XXS_GRID, &iquants::IQ2XS_GRID, &iquants::IQ2S_GRID]
}

/// The grids, in their order in the buffer.
fn grids() -> Vec<Grid> {
    let iq2 = iq2_levels();
    let iq1 = iq1_levels();
    vec![
        Grid {
            name: "IQ2XXS_GRID",
            doc: "iq2xxs_grid: 256 entries of 8 bytes, as codes into IQ2_GRID_LEVELS.",
            users: &["TYPE_IQ2_XXS"],
            words: pack_grid(&iquants::IQ2XXS_GRID, &iq2, false),
        },
        Grid {
            name: "IQ2XS_GRID",
            doc: "iq2xs_grid: 512 entries of 8 bytes, as codes into IQ2_GRID_LEVELS.",
            users: &["TYPE_IQ2_XS"],
            words: pack_grid(&iquants::IQ2XS_GRID, &iq2, false),
        },
        Grid {
            name: "IQ2S_GRID",
            doc: "iq2s_grid: 1024 entries of 8 bytes, as codes into IQ2_GRID_LEVELS.",
            users: &["TYPE_IQ2_S"],
            words: pack_grid(&iquants::IQ2S_GRID, &iq2, false),
        },
        Grid {
            name: "IQ3XXS_GRID",
            doc: "iq3xxs_grid: 256 entries of 4 bytes.",
            users: &["TYPE_IQ3_XXS"],
            words: iquants::IQ3XXS_GRID.to_vec(),
        },
        Grid {
            name: "IQ3S_GRID",
            doc: "iq3s_grid: 512 entries of 4 bytes.",
            users: &["TYPE_IQ3_S"],
            words: iquants::IQ3S_GRID.to_vec(),
        },
        Grid {
            name: "IQ1S_GRID",
            doc: "iq1s_grid: 2048 entries of 8 int8 bytes, as codes into IQ1S_GRID_LEVELS.",
            users: &["TYPE_IQ1_S", "TYPE_IQ1_M"],
            words: pack_grid(&iquants::IQ1S_GRID, &iq1, true),
        },
    ]
}

/// The contents of the table buffer: every grid's words, in [`grids`] order.
pub(crate) fn table_words() -> Vec<u32> {
    grids().into_iter().flat_map(|g| g.words).collect()
}

/// Whether a shader's WGSL reads the table buffer (and so needs it bound).
pub(crate) fn reads_tables(wgsl: &str) -> bool {
    wgsl.contains(TABLES_DECLARATION)
}

/// The buffer's declaration in the WGSL (after the binding attributes).
const TABLES_DECLARATION: &str = "var<storage, read> fmt_tables: array<u32>;";

#[cfg(test)]
mod generate {
    //! The generator of `format_tables.wgsl` and its checks.

    use std::fmt::Write as _;
    use std::path::PathBuf;

    use super::*;
    use crate::format::fp4;

    /// A table of at most 16 signed bytes, packed in a WGSL `vec4<u32>` constant.
    struct Packed {
        name: &'static str,
        doc: &'static str,
        users: &'static [&'static str],
        values: Vec<i32>,
    }

    impl Packed {
        fn words(&self) -> [u32; 4] {
            assert!(self.values.len() <= 16, "{}", self.name);
            let mut words = [0u32; 4];
            for (i, &v) in self.values.iter().enumerate() {
                let b = i8::try_from(v).unwrap_or_else(|_| panic!("{}: {v} is not a byte", self.name));
                words[i / 4] |= u32::from(b as u8) << (8 * (i % 4));
            }
            words
        }
    }

    fn packed() -> Vec<Packed> {
        let widen = |t: &[i8]| t.iter().map(|&v| i32::from(v)).collect::<Vec<_>>();
        vec![
            Packed {
                name: "KVALUES_IQ4NL",
                doc: "kvalues_iq4nl: the 16 levels of iq4_nl and iq4_xs.",
                users: &["TYPE_IQ4_NL", "TYPE_IQ4_XS"],
                values: widen(&iquants::KVALUES_IQ4NL),
            },
            Packed {
                name: "KVALUES_MXFP4",
                doc: "kvalues_mxfp4: the E2M1 levels doubled, by 4-bit code (bit 3 = sign).",
                users: &["TYPE_MXFP4", "TYPE_NVFP4"],
                values: widen(&fp4::KVALUES_MXFP4),
            },
            Packed {
                name: "IQ2_GRID_LEVELS",
                doc: "The byte values of the iq2 grids, by 2-bit code.",
                users: &["TYPE_IQ2_XXS", "TYPE_IQ2_XS", "TYPE_IQ2_S"],
                values: iq2_levels(),
            },
            Packed {
                name: "IQ1S_GRID_LEVELS",
                doc: "The values of the int8 bytes of iq1s_grid, by 2-bit code.",
                users: &["TYPE_IQ1_S", "TYPE_IQ1_M"],
                values: iq1_levels(),
            },
        ]
    }

    fn hex_u32(v: u32) -> String {
        format!("0x{v:08x}u")
    }

    fn condition(users: &[&str]) -> String {
        let c: Vec<String> = users.iter().map(|u| format!("FMT_TYPE == {u}")).collect();
        c.join(" || ")
    }

    /// The text of `backend/shaders/common/format_tables.wgsl`.
    pub(super) fn render() -> String {
        let mut out = String::from(
            "// ggml's lookup tables (ggml-common.h) for formats.wgsl, which includes this file in the\n\
             // branches of the formats that read them.\n\
             //\n\
             // GENERATED by backend/src/format/wgsl_tables.rs (which says why the tables are laid\n\
             // out so): do not edit. To regenerate:\n\
             // UPDATE_WGSL_TABLES=1 cargo test -p ggml-dawn --lib wgsl_tables\n\
             //\n\
             // Each declaration is compiled only into the variants whose FMT_TYPE reads it, once.\n\
             // Tables of at most 16 bytes are packed in a vec4<u32>, read with fmt_kv. The grids are\n\
             // in the storage buffer fmt_tables, each named by the word offset of its entries. The\n\
             // 8-byte grids are 2-bit codes into a levels table: byte j of entry e is\n\
             // fmt_kv(LEVELS, code), code the 2 bits at bit 16 * (e % 2) + 2 * j of word e / 2 (so\n\
             // an entry is the 16-bit half fmt_grid4 decodes 4 codes of). Byte j of an entry of the\n\
             // 4-byte iq3 grids is byte j of its word.\n\
             \n\
             #ifndef HAVE_FMT_KV\n\
             #define HAVE_FMT_KV 1\n\
             // Signed byte i of a table of packed bytes.\n\
             fn fmt_kv(table: vec4<u32>, i: u32) -> i32 {\n\
             \x20   return bitcast<i32>(table[i >> 2u] << (24u - 8u * (i & 3u))) >> 24u;\n\
             }\n\
             \n\
             // The levels of the 4 codes in the low byte of `codes`.\n\
             fn fmt_grid4(levels: vec4<u32>, codes: u32) -> vec4<f32> {\n\
             \x20   return vec4<f32>(f32(fmt_kv(levels, codes & 3u)), f32(fmt_kv(levels, (codes >> 2u) & 3u)),\n\
             \x20                    f32(fmt_kv(levels, (codes >> 4u) & 3u)), f32(fmt_kv(levels, (codes >> 6u) & 3u)));\n\
             }\n\
             \n\
             // The bytes of a word as 4 values.\n\
             fn fmt_bytes4(w: u32) -> vec4<f32> {\n\
             \x20   return vec4<f32>((vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u));\n\
             }\n\
             \n\
             // +1 or -1 for the low 4 bits of `signs` (a set bit is -1).\n\
             fn fmt_signs4(signs: u32) -> vec4<f32> {\n\
             \x20   return 1.0 - 2.0 * vec4<f32>((vec4<u32>(signs) >> vec4<u32>(0u, 1u, 2u, 3u)) & vec4<u32>(1u));\n\
             }\n\
             \n\
             // ggml's ksigns_iq2xs[i]: the 7 bits of i, and bit 7 set when they have odd parity.\n\
             fn fmt_ksigns(i: u32) -> u32 {\n\
             \x20   return i | ((countOneBits(i) & 1u) << 7u);\n\
             }\n\
             #endif\n",
        );
        for t in packed() {
            // The guard keeps a table single when two operands of one shader read it.
            writeln!(out, "\n#if ({}) && !defined(HAVE_{})", condition(t.users), t.name).unwrap();
            writeln!(out, "#define HAVE_{} 1", t.name).unwrap();
            writeln!(out, "// {}", t.doc).unwrap();
            let words: Vec<String> = t.words().iter().map(|&w| hex_u32(w)).collect();
            writeln!(out, "const {}: vec4<u32> = vec4<u32>({});", t.name, words.join(", ")).unwrap();
            out.push_str("#endif\n");
        }
        let grids = grids();
        let mut all_users: Vec<&str> = grids.iter().flat_map(|g| g.users.iter().copied()).collect();
        all_users.dedup();
        writeln!(out, "\n#if ({}) && !defined(HAVE_FMT_TABLES)", condition(&all_users)).unwrap();
        out.push_str("#define HAVE_FMT_TABLES 1\n");
        out.push_str("// The grids, one after another (bound by the stream).\n");
        writeln!(out, "@group(0) @binding({TABLES_BINDING}) {TABLES_DECLARATION}").unwrap();
        out.push_str("#endif\n");
        let mut offset = 0;
        for g in &grids {
            writeln!(out, "\n#if ({}) && !defined(HAVE_{})", condition(g.users), g.name).unwrap();
            writeln!(out, "#define HAVE_{} 1", g.name).unwrap();
            writeln!(
                out,
                "// {} Words {offset}..{} of fmt_tables.",
                g.doc,
                offset + g.words.len()
            )
            .unwrap();
            writeln!(out, "const {}: u32 = {offset}u;", g.name).unwrap();
            out.push_str("#endif\n");
            offset += g.words.len();
        }
        out
    }

    fn path() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("shaders/common/format_tables.wgsl")
    }

    /// Byte `j` of entry `e` of a grid packed by [`pack_grid`], as the shaders decode it.
    fn unpack_grid(words: &[u32], levels: &[i32], e: usize, j: usize) -> i32 {
        levels[((words[e / 2] >> (16 * (e % 2) + 2 * j)) & 3) as usize]
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
    fn declarations_are_guarded_by_type() {
        let text = render();
        let common = crate::shader_lib::source("common.wgsl").unwrap();
        let names = packed()
            .iter()
            .map(|t| (t.name, t.users))
            .chain(grids().iter().map(|g| (g.name, g.users)))
            .collect::<Vec<_>>();
        for (name, users) in names {
            assert_eq!(text.matches(&format!("const {name}:")).count(), 1, "{name}");
            assert!(text.contains(&format!("#define HAVE_{name} 1")), "{name}");
            for u in users {
                assert!(common.contains(&format!("#define {u} ")), "{u} is not in common.wgsl");
            }
        }
        assert_eq!(text.matches(TABLES_DECLARATION).count(), 1);
        assert!(reads_tables(&text));
    }

    #[test]
    fn ksigns_is_the_parity_bit() {
        for (i, &s) in iquants::KSIGNS_IQ2XS.iter().enumerate() {
            let i = i as u32;
            assert_eq!(u32::from(s), i | ((i.count_ones() & 1) << 7), "entry {i}");
        }
    }

    #[test]
    fn packed_grids_decode_to_the_cpu_tables() {
        let iq2 = iq2_levels();
        assert_eq!(iq2.len(), 3);
        for grid in iq2_grids() {
            let words = pack_grid(grid, &iq2, false);
            assert_eq!(words.len(), grid.len() / 2);
            for (e, &entry) in grid.iter().enumerate() {
                for j in 0..8 {
                    assert_eq!(unpack_grid(&words, &iq2, e, j), i32::from((entry >> (8 * j)) as u8));
                }
            }
        }
        let iq1 = iq1_levels();
        assert_eq!(iq1, [-1, 0, 1]);
        let words = pack_grid(&iquants::IQ1S_GRID, &iq1, true);
        for (e, &entry) in iquants::IQ1S_GRID.iter().enumerate() {
            for j in 0..8 {
                assert_eq!(
                    unpack_grid(&words, &iq1, e, j),
                    i32::from((entry >> (8 * j)) as u8 as i8)
                );
            }
        }
    }

    #[test]
    fn the_buffer_holds_every_grid_at_its_offset() {
        let words = table_words();
        let mut offset = 0;
        for g in grids() {
            assert_eq!(&words[offset..offset + g.words.len()], g.words.as_slice(), "{}", g.name);
            offset += g.words.len();
        }
        assert_eq!(offset, words.len());
        assert_eq!(
            &words[words.len() - 1024..],
            &pack_grid(&iquants::IQ1S_GRID, &iq1_levels(), true)[..]
        );
    }

    #[test]
    fn packed_tables_hold_their_bytes() {
        for t in packed() {
            let words = t.words();
            for (i, &v) in t.values.iter().enumerate() {
                let b = (words[i / 4] >> (8 * (i % 4))) as u8 as i8;
                assert_eq!(i32::from(b), v, "{} entry {i}", t.name);
            }
        }
    }
}
