//! ggml's non-linear and lattice ("i-") quants and the ternary formats.
//!
//! Every function converts exactly one block (`GgmlType::block_size` values, `type_size` bytes).
//!
//! - iq4_nl (32 elements, 18 bytes): `d`, 16 bytes of nibbles indexing `KVALUES_IQ4NL` (element
//!   `j` low nibble of byte `j`, element `j+16` high nibble); value = d·kvalues[q].
//! - iq4_xs (256, 136): `d`, `scales_h` (u16: 2 high bits per 32-element sub-block), `scales_l[4]`
//!   (low nibbles), `qs[128]` (nibbles as iq4_nl per sub-block); value = d·(s − 32)·kvalues[q].
//! - tq1_0 (256, 54): `qs[48]` (5 ternary digits per byte, stored as a fixed-point fraction of
//!   3⁵), `qh[4]` (4 digits per byte), `d`; value = d·(t − 1).
//! - tq2_0 (256, 66): `qs[64]` (2 bits per element, 4 rows of 32 per 32 bytes), `d`; value =
//!   d·(q − 1).
//! - iq2_xxs (256, 66): `d`, then per 32 elements two u32: four 8-bit indices into
//!   `IQ2XXS_GRID`, and four 7-bit sign indices (`KSIGNS_IQ2XS`) plus a 4-bit scale.
//! - iq2_xs (256, 74): `d`, 32 u16 (9-bit `IQ2XS_GRID` index, 7-bit sign index), `scales[8]`.
//! - iq2_s (256, 82): `d`, `qs[32]` low index bits, `signs[32]`, `qh[8]` (2 high index bits per
//!   group of 8), `scales[8]`; grid `IQ2S_GRID` (10-bit index).
//! - iq3_xxs (256, 98): `d`, 64 indices into `IQ3XXS_GRID` (4 values each), 8 u32 of sign
//!   indices and 4-bit scales.
//! - iq3_s (256, 110): `d`, `qs[64]`, `qh[8]` (9th index bits), `signs[32]` (explicit sign bits),
//!   `scales[4]`; grid `IQ3S_GRID`.
//! - iq1_s (256, 50): `d`, `qs[32]`, `qh` 8 × u16 (3 high index bits per group, 3-bit scale,
//!   delta sign); grid `IQ1S_GRID` (values −1, 0, 1) shifted by ±1/8.
//! - iq1_m (256, 56): `qs[32]`, `qh[16]`, `scales[8]` (3-bit scales; the f16 super-scale is spread
//!   over the top nibbles of the four u16).
//!
//! The grid tables (`IQ2XXS_GRID` … `IQ1S_GRID`, `KSIGNS_IQ2XS`, `KVALUES_IQ4NL`) are ggml's
//! lookup tables from `ggml-common.h`: data that the formats are defined by (entries as ggml
//! prints them; the tests check their value sets and order, and the golden files their use).
//!
//! Quantization is provided for iq4_nl, iq4_xs, tq1_0 and tq2_0 (ggml's quantizers without an
//! importance matrix). The grid formats' quantizers (lattice searches over neighbour tables, and
//! for iq2_xxs/iq2_xs/iq1_s/iq1_m an importance matrix) are not implemented.
//!
//! One submodule per family: `iq4` (iq4_nl, iq4_xs), `ternary` (tq1_0, tq2_0), and the grid
//! formats with their grids, `iq2`, `iq3` and `iq1`. This module holds what they share.

mod iq1;
mod iq2;
mod iq3;
mod iq4;
mod ternary;

pub(super) use iq1::{IQ1S_GRID, dequantize_iq1_m, dequantize_iq1_s};
pub(super) use iq2::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, dequantize_iq2_s, dequantize_iq2_xs, dequantize_iq2_xxs};
pub(super) use iq3::{IQ3S_GRID, IQ3XXS_GRID, dequantize_iq3_s, dequantize_iq3_xxs};
// The levels go to the GPU tables, which only the tests generate.
#[cfg(test)]
pub(super) use iq4::KVALUES_IQ4NL;
pub(super) use iq4::{dequantize_iq4_nl, dequantize_iq4_xs, quantize_iq4_nl, quantize_iq4_xs};
pub(super) use ternary::{dequantize_tq1_0, dequantize_tq2_0, quantize_tq1_0, quantize_tq2_0};

/// ggml's `ksigns_iq2xs`: a 7-bit index to 8 sign bits (bit 7 makes the parity even).
#[rustfmt::skip]
pub(super) static KSIGNS_IQ2XS: [u8; 128] = [
    0, 129, 130, 3, 132, 5, 6, 135, 136, 9, 10, 139, 12, 141, 142, 15,
    144, 17, 18, 147, 20, 149, 150, 23, 24, 153, 154, 27, 156, 29, 30, 159,
    160, 33, 34, 163, 36, 165, 166, 39, 40, 169, 170, 43, 172, 45, 46, 175,
    48, 177, 178, 51, 180, 53, 54, 183, 184, 57, 58, 187, 60, 189, 190, 63,
    192, 65, 66, 195, 68, 197, 198, 71, 72, 201, 202, 75, 204, 77, 78, 207,
    80, 209, 210, 83, 212, 85, 86, 215, 216, 89, 90, 219, 92, 221, 222, 95,
    96, 225, 226, 99, 228, 101, 102, 231, 232, 105, 106, 235, 108, 237, 238, 111,
    240, 113, 114, 243, 116, 245, 246, 119, 120, 249, 250, 123, 252, 125, 126, 255,
];

/// Byte `j` of a grid entry (entries are stored little-endian, as ggml reads them).
fn grid_byte64(entry: u64, j: usize) -> u8 {
    (entry >> (8 * j)) as u8
}

fn grid_byte32(entry: u32, j: usize) -> u8 {
    (entry >> (8 * j)) as u8
}

fn sign(signs: u8, j: usize) -> f32 {
    if signs & (1 << j) != 0 { -1.0 } else { 1.0 }
}

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte of every entry is one of `levels`, and entries strictly increase (as in ggml's
    /// sorted tables, so a dropped or repeated entry shows).
    fn check_grid(name: &str, entries: &[u64], width: usize, levels: &[u8]) {
        for (i, &e) in entries.iter().enumerate() {
            for j in 0..width {
                let b = (e >> (8 * j)) as u8;
                assert!(levels.contains(&b), "{name}[{i}] = {e:#x}: byte {j} is {b:#x}");
            }
            if i > 0 {
                assert!(entries[i - 1] < e, "{name}[{i}] out of order");
            }
        }
    }

    #[test]
    fn grid_tables_are_well_formed() {
        let widen = |t: &[u32]| t.iter().map(|&v| v as u64).collect::<Vec<_>>();
        check_grid("iq2xxs_grid", &IQ2XXS_GRID, 8, &[0x08, 0x19, 0x2b]);
        check_grid("iq2xs_grid", &IQ2XS_GRID, 8, &[0x08, 0x19, 0x2b]);
        check_grid("iq2s_grid", &IQ2S_GRID, 8, &[0x08, 0x19, 0x2b]);
        check_grid("iq3xxs_grid", &widen(&IQ3XXS_GRID), 4, &[4, 12, 20, 28, 36, 44, 52, 62]);
        check_grid("iq3s_grid", &widen(&IQ3S_GRID), 4, &[1, 3, 5, 7, 9, 11, 13, 15]);
        // iq1s_grid holds int8 -1/0/1; as u64 its order is that of the bytes 0xff/0x00/0x01.
        let iq1 = IQ1S_GRID.map(|e| e ^ 0x8080_8080_8080_8080);
        check_grid("iq1s_grid", &iq1, 8, &[0x7f, 0x80, 0x81]);
    }

    #[test]
    fn ksigns_make_even_parity() {
        for (i, &s) in KSIGNS_IQ2XS.iter().enumerate() {
            assert_eq!(s & 0x7F, i as u8);
            assert_eq!(s.count_ones() % 2, 0, "ksigns[{i}]");
        }
    }
}
