//! The kernels' parameter blocks (uniforms): each WGSL `struct Params` has a `#[repr(C)]` twin here, declared
//! once with `kernel_params!`, which also records the field names and types so that a test can
//! hold each twin against its WGSL source (same fields, same order, same types).

use bytemuck::{Pod, Zeroable};

/// A parameter block, uploaded as the kernel's uniform `params`.
pub trait KernelParams: Pod {
    /// The shader file declaring the WGSL `struct Params` this mirrors.
    const SHADER: &'static str;
    /// Field names and WGSL scalar types, in declaration order.
    const FIELDS: &'static [(&'static str, &'static str)];

    /// The block as the 32-bit words the dispatch uploads.
    fn words(&self) -> &[u32] {
        bytemuck::cast_slice(bytemuck::bytes_of(self))
    }
}

/// Declares a parameter block: `Name in "file.wgsl" { field: u32, … }` (u32, i32 or f32 fields).
macro_rules! kernel_params {
    ($(#[$doc:meta])* $name:ident in $file:literal { $($(#[$fdoc:meta])* $field:ident: $ty:ident),* $(,)? }) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $ty,)*
        }

        impl KernelParams for $name {
            const SHADER: &'static str = $file;
            const FIELDS: &'static [(&'static str, &'static str)] = &[$((stringify!($field), stringify!($ty))),*];
        }
    };
}

kernel_params! {
    /// `mul_mat_operands.wgsl`: the mat-vec, register-tiled and subgroup-matrix MUL_MAT kernels
    /// and the pass that quantizes b.
    MulMatUniforms in "mul_mat_operands.wgsl" {
        /// Bytes from a's binding to a[0, 0, 0, 0]; b likewise.
        a_start: u32,
        b_start: u32,
        /// Elements (words for the quantize pass) from dst's binding to its start.
        dst_start: u32,
        m: u32,
        n: u32,
        k: u32,
        /// Byte strides.
        a_nb1: u32,
        a_nb2: u32,
        a_nb3: u32,
        b_nb0: u32,
        b_nb1: u32,
        b_nb2: u32,
        b_nb3: u32,
        /// b's batches per a matrix along dims 2 and 3.
        r2: u32,
        r3: u32,
        b_ne2: u32,
        batches: u32,
        tiles_m: u32,
        tiles_n: u32,
        /// Workgroups per grid row (grids may be split in 2-D).
        grid_x: u32,
        /// The RMS_NORM applied to b (`B_RMS_NORM`): eps, and elements from each norm binding
        /// to its operand's start, with the residual's and the sum's column strides.
        norm_eps: f32,
        norm_w_start: u32,
        norm_r_start: u32,
        norm_r_nb1: u32,
        norm_sum_start: u32,
        norm_sum_nb1: u32,
        /// The ROPE and KV-cache write of the mat-vec's result (`DST_ROPE`): rows [0,
        /// rope_rows) of each column are heads of rope_d rows, the first rope_n_dims of each
        /// roped in pairs of adjacent rows at the column's position (`pos_start` elements into
        /// its binding; frequency factors from `ff_start`), with ROPE's angle parameters.
        rope_rows: u32,
        rope_d: u32,
        rope_n_dims: u32,
        pos_start: u32,
        ff_start: u32,
        theta_scale: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        corr0: f32,
        corr1: f32,
        mscale_ext: f32,
        /// Rows [kv_start, kv_end) of column c go to the cache row its id names (ids from
        /// `ids_start` elements; the cache's row 0 `cache_start` words into its binding, rows
        /// `cache_nb1` words apart, `cache_rows` of them).
        kv_start: u32,
        kv_end: u32,
        ids_start: u32,
        cache_start: u32,
        cache_nb1: u32,
        cache_rows: u32,
    }
}

kernel_params! {
    /// `mul_mat_simple.wgsl`: one thread per output.
    MulMatSimpleUniforms in "mul_mat_simple.wgsl" {
        a_start: u32,
        b_start: u32,
        dst_start: u32,
        m: u32,
        n: u32,
        k: u32,
        a_nb1: u32,
        a_nb2: u32,
        a_nb3: u32,
        b_nb0: u32,
        b_nb1: u32,
        b_nb2: u32,
        b_nb3: u32,
        a_ne2: u32,
        a_ne3: u32,
        b_ne2: u32,
        b_ne3: u32,
        /// Threads per grid row.
        row_stride: u32,
    }
}

kernel_params! {
    /// `dequantize.wgsl`: any format to f32.
    DequantizeUniforms in "dequantize.wgsl" {
        src_start: u32,
        dst_start: u32,
        count: u32,
        row_stride: u32,
        ne0: u32,
        ne1: u32,
        ne2: u32,
        nb1: u32,
        nb2: u32,
        nb3: u32,
    }
}

kernel_params! {
    /// `flash_attn_common.wgsl`: the tile, subgroup-matrix and decode FLASH_ATTN_EXT kernels.
    FlashAttnUniforms in "flash_attn_common.wgsl" {
        /// q in elements and element strides; k, v and the mask in bytes.
        q_start: u32,
        q_nb1: u32,
        q_nb2: u32,
        q_nb3: u32,
        k_start: u32,
        k_nb1: u32,
        k_nb2: u32,
        k_nb3: u32,
        v_start: u32,
        v_nb1: u32,
        v_nb2: u32,
        v_nb3: u32,
        mask_start: u32,
        mask_nb1: u32,
        mask_nb3: u32,
        mask_ne3: u32,
        sinks_start: u32,
        has_sinks: u32,
        /// dst's start in elements (one split), or 0 into the split scratch.
        out_start: u32,
        stats_start: u32,
        n_q: u32,
        n_heads: u32,
        kv_heads: u32,
        n_seq: u32,
        kv: u32,
        r2: u32,
        row_blocks: u32,
        n_split: u32,
        split_len: u32,
        /// Divided by the softcap when there is one.
        scale: f32,
        softcap: f32,
        max_bias: f32,
        n_head_log2: u32,
        m0: f32,
        m1: f32,
        groups_x: u32,
        n_rows: u32,
        tau: f32,
    }
}

kernel_params! {
    /// `flash_attn_reduce.wgsl`: merges the split partials.
    FlashAttnReduceUniforms in "flash_attn_reduce.wgsl" {
        n_rows: u32,
        n_heads: u32,
        n_split: u32,
        dst_start: u32,
        sinks_start: u32,
        has_sinks: u32,
        groups_x: u32,
    }
}

kernel_params! {
    /// `flash_attn_simple.wgsl`: the fallback, one workgroup per query row.
    FlashAttnSimpleUniforms in "flash_attn_simple.wgsl" {
        q_start: u32,
        q_nb1: u32,
        q_nb2: u32,
        q_nb3: u32,
        k_start: u32,
        v_start: u32,
        mask_start: u32,
        mask_nb1: u32,
        mask_nb3: u32,
        mask_ne3: u32,
        sinks_start: u32,
        has_sinks: u32,
        dst_start: u32,
        hsk: u32,
        hsv: u32,
        kv: u32,
        n_queries: u32,
        n_heads: u32,
        kv_heads: u32,
        n_seq: u32,
        scale: f32,
        softcap: f32,
        max_bias: f32,
        n_head_log2: u32,
        m0: f32,
        m1: f32,
        groups_x: u32,
    }
}

kernel_params! {
    /// `rms_norm.wgsl`: RMS_NORM with the fused weight and bias. Starts and strides in units
    /// (elements, or 16-byte vectors on the vector path).
    RmsNormUniforms in "rms_norm.wgsl" {
        x_start: u32,
        x_nb0: u32,
        x_nb1: u32,
        x_nb2: u32,
        x_nb3: u32,
        dst_start: u32,
        dst_nb0: u32,
        dst_nb1: u32,
        dst_nb2: u32,
        dst_nb3: u32,
        w_start: u32,
        w_ne0: u32,
        w_ne1: u32,
        w_ne2: u32,
        w_ne3: u32,
        w_nb1: u32,
        w_nb2: u32,
        w_nb3: u32,
        b_start: u32,
        b_ne0: u32,
        b_ne1: u32,
        b_ne2: u32,
        b_ne3: u32,
        b_nb1: u32,
        b_nb2: u32,
        b_nb3: u32,
        ne0: u32,
        n_elements: u32,
        ne1: u32,
        ne2: u32,
        n_rows: u32,
        groups_x: u32,
        r_start: u32,
        r_nb0: u32,
        r_nb1: u32,
        r_nb2: u32,
        r_nb3: u32,
        sum_start: u32,
        sum_nb0: u32,
        sum_nb1: u32,
        sum_nb2: u32,
        sum_nb3: u32,
        eps: f32,
    }
}

kernel_params! {
    /// `soft_max.wgsl`: SOFT_MAX with mask, sinks and ALiBi. Starts and strides in units.
    SoftMaxUniforms in "soft_max.wgsl" {
        x_start: u32,
        x_nb0: u32,
        x_nb1: u32,
        x_nb2: u32,
        x_nb3: u32,
        dst_start: u32,
        dst_nb0: u32,
        dst_nb1: u32,
        dst_nb2: u32,
        dst_nb3: u32,
        mask_start: u32,
        mask_nb1: u32,
        mask_nb2: u32,
        mask_nb3: u32,
        mask_ne2: u32,
        mask_ne3: u32,
        sinks_start: u32,
        ne0: u32,
        ne1: u32,
        ne2: u32,
        n_rows: u32,
        groups_x: u32,
        scale: f32,
        max_bias: f32,
        n_head_log2: u32,
        m0: f32,
        m1: f32,
    }
}

kernel_params! {
    /// `argmax.wgsl`: ARGMAX of f32 rows into i32.
    ArgmaxUniforms in "argmax.wgsl" {
        x_start: u32,
        x_nb0: u32,
        x_nb1: u32,
        dst_start: u32,
        ne0: u32,
        n: u32,
        n_rows: u32,
        groups_x: u32,
    }
}

kernel_params! {
    /// `scale.wgsl`: SCALE (x·scale + bias).
    ScaleUniforms in "scale.wgsl" {
        x_start: u32,
        x_nb0: u32,
        x_nb1: u32,
        x_nb2: u32,
        x_nb3: u32,
        dst_start: u32,
        dst_nb0: u32,
        dst_nb1: u32,
        dst_nb2: u32,
        dst_nb3: u32,
        ne0: u32,
        ne1: u32,
        ne2: u32,
        n: u32,
        row_stride: u32,
        scale: f32,
        bias: f32,
    }
}

kernel_params! {
    /// `binary.wgsl`: ADD, SUB, MUL, DIV (starts, extents and strides in units of the plan's
    /// vector width).
    BinaryUniforms in "binary.wgsl" {
        a_start: u32,
        b_start: u32,
        dst_start: u32,
        count: u32,
        row_stride: u32,
        ne0: u32,
        ne1: u32,
        ne2: u32,
        ne3: u32,
        a_nb0: u32,
        a_nb1: u32,
        a_nb2: u32,
        a_nb3: u32,
        b_ne0: u32,
        b_ne1: u32,
        b_ne2: u32,
        b_ne3: u32,
        b_nb0: u32,
        b_nb1: u32,
        b_nb2: u32,
        b_nb3: u32,
        dst_nb0: u32,
        dst_nb1: u32,
        dst_nb2: u32,
        dst_nb3: u32,
    }
}

kernel_params! {
    /// `glu.wgsl`: the GLU family (starts and strides in elements).
    GluUniforms in "glu.wgsl" {
        x_start: u32,
        g_start: u32,
        dst_start: u32,
        count: u32,
        row_stride: u32,
        n: u32,
        ne1: u32,
        ne2: u32,
        x_nb1: u32,
        x_nb2: u32,
        x_nb3: u32,
        g_nb1: u32,
        g_nb2: u32,
        g_nb3: u32,
        dst_nb1: u32,
        dst_nb2: u32,
        dst_nb3: u32,
        alpha: f32,
        limit: f32,
    }
}

kernel_params! {
    /// `write.wgsl`: host bytes staged in an upload buffer, copied into a strided view.
    WriteUniforms in "write.wgsl" {
        dst_start: u32,
        count: u32,
        row_stride: u32,
        unit_bytes: u32,
        ne0: u32,
        ne1: u32,
        ne2: u32,
        nb0: u32,
        nb1: u32,
        nb2: u32,
        nb3: u32,
    }
}

/// ALiBi's two slope bases for `n_heads` heads and `max_bias` (ggml's formula): heads below the
/// largest power of two use m0, the rest m1. Returns (n_head_log2, m0, m1).
pub fn alibi_slopes(n_heads: u32, max_bias: f32) -> (u32, f32, f32) {
    let n_head_log2 = 1u32 << n_heads.max(1).ilog2();
    let m0 = 2f32.powf(-max_bias / n_head_log2 as f32);
    let m1 = 2f32.powf(-max_bias / 2.0 / n_head_log2 as f32);
    (n_head_log2, m0, m1)
}

kernel_params! {
    /// `rows.wgsl`: GET_ROWS, SET_ROWS and CPY, one thread per unit of the iteration.
    RowsUniforms in "rows.wgsl" {
        src_start: u32,
        ids_start: u32,
        dst_start: u32,
        units: u32,
        row_stride: u32,
        ne0: u32,
        ne1: u32,
        ne2: u32,
        src_ne0: u32,
        src_ne1: u32,
        src_ne2: u32,
        src_nb0: u32,
        src_nb1: u32,
        src_nb2: u32,
        src_nb3: u32,
        dst_nb0: u32,
        dst_nb1: u32,
        dst_nb2: u32,
        dst_nb3: u32,
        ids_nb0: u32,
        ids_nb1: u32,
        ids_nb2: u32,
        ids_ne1: u32,
        ids_ne2: u32,
        rows: u32,
        /// Always 0 (the kernels' barrier against fused multiply-adds).
        zero: u32,
    }
}

kernel_params! {
    /// `transpose.wgsl`: CPY of a dims-0/1-transposed source through 32×32 tiles. Bytes.
    TransposeUniforms in "transpose.wgsl" {
        src_start: u32,
        src_nb0: u32,
        src_nb2: u32,
        src_nb3: u32,
        dst_start: u32,
        dst_nb1: u32,
        dst_nb2: u32,
        dst_nb3: u32,
        ne0: u32,
        ne1: u32,
        ne2: u32,
        n_batches: u32,
        tiles0: u32,
        tiles1: u32,
        groups_x: u32,
    }
}

kernel_params! {
    /// `rope.wgsl`: one thread per rotated pair or copied element (or a workgroup per token).
    RopeUniforms in "rope.wgsl" {
        src_start: u32,
        dst_start: u32,
        pos_start: u32,
        ff_start: u32,
        units: u32,
        row_stride: u32,
        ne0: u32,
        ne1: u32,
        ne2: u32,
        row_units: u32,
        pairs: u32,
        n_dims: u32,
        n_offs: u32,
        src_nb0: u32,
        src_nb1: u32,
        src_nb2: u32,
        src_nb3: u32,
        dst_nb0: u32,
        dst_nb1: u32,
        dst_nb2: u32,
        dst_nb3: u32,
        s0: u32,
        s1: u32,
        s2: u32,
        s3: u32,
        theta_scale: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        corr0: f32,
        corr1: f32,
        mscale_ext: f32,
        tokens: u32,
        rows_start: u32,
        rows_nb1: u32,
        rows_n: u32,
        ids_start: u32,
        cache_start: u32,
        cache_nb1: u32,
        cache_rows: u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shader_lib;

    /// The fields of the WGSL `struct Params` in `file`: (name, type), in order.
    fn wgsl_fields(file: &str) -> Vec<(String, String)> {
        let source = shader_lib::source(file).unwrap_or_else(|| panic!("no shader {file}"));
        let start = source
            .find("struct Params {")
            .unwrap_or_else(|| panic!("{file} declares no struct Params"));
        let body = &source[start + "struct Params {".len()..];
        let body = &body[..body.find('}').expect("struct Params ends")];
        body.lines()
            .map(|l| l.split("//").next().unwrap_or("").trim())
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (name, ty) = l.trim_end_matches(',').split_once(':').expect("name: type");
                (name.trim().to_owned(), ty.trim().to_owned())
            })
            .collect()
    }

    fn agrees<P: KernelParams>() {
        let rust: Vec<(String, String)> = P::FIELDS.iter().map(|&(n, t)| (n.to_owned(), t.to_owned())).collect();
        assert_eq!(rust, wgsl_fields(P::SHADER), "{} drifted from its WGSL twin", P::SHADER);
        assert_eq!(std::mem::size_of::<P>(), 4 * P::FIELDS.len());
        assert!(std::mem::size_of::<P>() as u64 <= crate::kernel::PARAMS_BYTES);
    }

    #[test]
    fn every_parameter_block_matches_its_wgsl_twin() {
        agrees::<MulMatUniforms>();
        agrees::<MulMatSimpleUniforms>();
        agrees::<DequantizeUniforms>();
        agrees::<FlashAttnUniforms>();
        agrees::<FlashAttnReduceUniforms>();
        agrees::<FlashAttnSimpleUniforms>();
        agrees::<RowsUniforms>();
        agrees::<TransposeUniforms>();
        agrees::<RopeUniforms>();
        agrees::<RmsNormUniforms>();
        agrees::<SoftMaxUniforms>();
        agrees::<ArgmaxUniforms>();
        agrees::<ScaleUniforms>();
        agrees::<BinaryUniforms>();
        agrees::<GluUniforms>();
        agrees::<WriteUniforms>();
    }

    #[test]
    fn words_follow_the_declaration_order() {
        let p = FlashAttnReduceUniforms {
            n_rows: 1,
            n_heads: 2,
            n_split: 3,
            dst_start: 4,
            sinks_start: 5,
            has_sinks: 6,
            groups_x: 7,
        };
        assert_eq!(p.words(), &[1, 2, 3, 4, 5, 6, 7]);
        let f = FlashAttnSimpleUniforms {
            scale: 0.5,
            ..Default::default()
        };
        assert_eq!(f.words()[20], 0.5f32.to_bits());
    }

    #[test]
    fn alibi_slopes_follow_ggml() {
        assert_eq!(alibi_slopes(8, 0.0), (8, 1.0, 1.0));
        let (log2, m0, m1) = alibi_slopes(12, 8.0);
        assert_eq!(log2, 8);
        assert_eq!(m0, 2f32.powf(-1.0));
        assert_eq!(m1, 2f32.powf(-0.5));
    }
}
