//! The CPU reference (`ggml_dawn::reference`) on what only the test bench has: the layouts
//! of upstream's cases, and ggml's own results stored as golden files.

#![cfg(test)]

use ggml_dawn::GgmlType;
use ggml_dawn::reference::{flash_attn_ext, mul_mat, nmse};
use ggml_dawn::tensor::HostTensor;

use crate::cases::{FlashAttnCase, MulMatCase};

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn f32_tensor(ne: [usize; 4], values: &[f32]) -> HostTensor {
    HostTensor::from_f32(GgmlType::F32, ne, values).unwrap()
}

mod mul_mat_layouts {
    use super::*;

    /// The naive definition over logical (contiguous-order) values.
    fn naive(a: &[f32], ane: [usize; 4], b: &[f32], bne: [usize; 4]) -> Vec<f32> {
        let [k, m, a2, a3] = ane;
        let [_, n, b2, b3] = bne;
        let mut out = Vec::new();
        for i3 in 0..b3 {
            for i2 in 0..b2 {
                for j in 0..n {
                    for i in 0..m {
                        let (ia2, ia3) = (i2 / (b2 / a2), i3 / (b3 / a3));
                        let mut s = 0.0f64;
                        for l in 0..k {
                            let av = a[((ia3 * a2 + ia2) * m + i) * k + l];
                            let bv = b[((i3 * b2 + i2) * n + j) * k + l];
                            s += f64::from(av) * f64::from(bv);
                        }
                        out.push(s as f32);
                    }
                }
            }
        }
        out
    }

    /// Every case layout (broadcast, permutation, k_v view, overlap) agrees with the naive
    /// computation over the logical values.
    #[test]
    fn case_layouts_agree_with_naive() {
        let specs = [
            "MUL_MAT(type_a=f32,type_b=f32,m=7,n=5,k=12,bs=[2,3],nr=[2,2])",
            "MUL_MAT(type_a=f16,type_b=f32,m=6,n=3,k=8,bs=[3,2],nr=[1,2],per=[0,2,1,3])",
            "MUL_MAT(type_a=f32,type_b=f16,m=4,n=9,k=16,bs=[2,3],nr=[2,1],per=[0,1,3,2])",
            "MUL_MAT(type_a=bf16,type_b=f32,m=5,n=2,k=6,bs=[3,2],per=[0,3,2,1])",
            "MUL_MAT(type_a=f32,type_b=f32,m=6,n=3,k=10,bs=[2,1],nr=[1,1],per=[1,0,2,3])",
            "MUL_MAT(type_a=f16,type_b=f32,m=4,n=1,k=33,bs=[2,1],k_v=66)",
            "MUL_MAT(type_a=f32,type_b=f32,m=8,n=4,k=16,bs=[3,2],src_overlap=1)",
        ];
        for (s, spec) in specs.iter().enumerate() {
            let case: MulMatCase = spec.parse().unwrap();
            let t = case.tensors().unwrap();
            let a_vals = values(t.a.storage.elements(), 2 * s as u64 + 1);
            let b_vals = values(t.b.storage.elements(), 2 * s as u64 + 2);
            let a = t.a.host(&a_vals).unwrap();
            let b = if t.b_aliases_a {
                t.b.host(&a_vals)
            } else {
                t.b.host(&b_vals)
            }
            .unwrap();
            if case.per != [0, 1, 2, 3] {
                assert!(!a.layout.is_contiguous(), "{spec}");
            }
            let got = mul_mat(&a, &b).unwrap();
            // The logical values, read back in contiguous order through the views.
            let want = naive(&a.to_f32().unwrap(), a.layout.ne, &b.to_f32().unwrap(), b.layout.ne);
            assert_eq!(got.len(), t.dst.elements(), "{spec}");
            assert_eq!(got, want, "{spec}");
        }
    }

    /// A permuted view gives the same product as the same logical values stored contiguously.
    #[test]
    fn permuted_equals_contiguous() {
        let case: MulMatCase = "MUL_MAT(type_a=f32,type_b=f32,m=5,n=4,k=6,bs=[3,2],nr=[2,1],per=[0,2,1,3])"
            .parse()
            .unwrap();
        let t = case.tensors().unwrap();
        let a = t.a.host(&values(t.a.storage.elements(), 7)).unwrap();
        let b = t.b.host(&values(t.b.storage.elements(), 8)).unwrap();
        let ac = HostTensor::from_f32(GgmlType::F32, a.layout.ne, &a.to_f32().unwrap()).unwrap();
        let bc = HostTensor::from_f32(GgmlType::F32, b.layout.ne, &b.to_f32().unwrap()).unwrap();
        assert_eq!(mul_mat(&a, &b).unwrap(), mul_mat(&ac, &bc).unwrap());
    }
}

mod flash_attn_layouts {
    use super::*;

    /// The naive definition over logical values (contiguous order), for the layout tests.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        q: &[f32],
        qne: [usize; 4],
        k: &[f32],
        kne: [usize; 4],
        v: &[f32],
        vne: [usize; 4],
        mask: Option<(&[f32], [usize; 4])>,
        sinks: Option<&[f32]>,
        scale: f64,
    ) -> Vec<f64> {
        let [dk, nq, nh, ns] = qne;
        let [_, nkv, kh, _] = kne;
        let dv = vne[0];
        let mut out = vec![0.0; dv * nh * nq * ns];
        for i3 in 0..ns {
            for h in 0..nh {
                let hk = h / (nh / kh);
                for i1 in 0..nq {
                    let mut s = Vec::new();
                    for j in 0..nkv {
                        let mut d = 0.0;
                        for c in 0..dk {
                            d += f64::from(q[((i3 * nh + h) * nq + i1) * dk + c])
                                * f64::from(k[((i3 * kh + hk) * nkv + j) * dk + c]);
                        }
                        let m = mask.map_or(0.0, |(m, mne)| f64::from(m[(i3 * mne[1] + i1) * mne[0] + j]));
                        s.push(d * scale + m);
                    }
                    let sink = sinks.map(|x| f64::from(x[h]));
                    let max = s.iter().copied().chain(sink).fold(f64::NEG_INFINITY, f64::max);
                    if max == f64::NEG_INFINITY {
                        continue;
                    }
                    let p: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
                    let sum = p.iter().sum::<f64>() + sink.map_or(0.0, |x| (x - max).exp());
                    for c in 0..dv {
                        let acc: f64 = (0..nkv)
                            .map(|j| p[j] * f64::from(v[((i3 * kh + hk) * nkv + j) * dv + c]))
                            .sum();
                        out[((i3 * nq + i1) * nh + h) * dv + c] = acc / sum;
                    }
                }
            }
        }
        out
    }

    /// The layouts of upstream's cases (KV views, permutations, V as a view of K, GQA, dim-3
    /// batches) agree with the naive computation over the logical values.
    #[test]
    fn case_layouts_agree_with_naive() {
        let specs = [
            "FLASH_ATTN_EXT(hsk=8,hsv=8,nh=2,nr23=[3,2],kv=7,nb=3,mask=1,sinks=1,type_K=f32,type_V=f32)",
            "FLASH_ATTN_EXT(hsk=8,hsv=4,nh=2,nr23=[2,1],kv=5,nb=4,mask=1,permute=[0,2,1,3])",
            "FLASH_ATTN_EXT(hsk=12,hsv=8,nh=1,nr23=[4,1],kv=6,nb=2,mask=0,v_is_view_of_k=1)",
            "FLASH_ATTN_EXT(hsk=8,hsv=8,nh=3,nr23=[1,3],kv=9,nb=2,mask=1,sinks=1,kv_view=0,type_K=bf16,type_V=f16)",
            "FLASH_ATTN_EXT(hsk=8,hsv=8,nh=2,nr23=[2,1],kv=6,nb=3,mask=1,permute=[0,2,1,3],v_is_view_of_k=1)",
        ];
        for (s, spec) in specs.iter().enumerate() {
            let c: FlashAttnCase = spec.parse().unwrap();
            let t = c.tensors().unwrap();
            let seed = 10 * s as u64;
            let q = t.q.host(&values(t.q.storage.elements(), seed + 1)).unwrap();
            let k_vals = values(t.k.storage.elements(), seed + 2);
            let k = t.k.host(&k_vals).unwrap();
            let v = if t.v_aliases_k {
                t.v.host(&k_vals)
            } else {
                t.v.host(&values(t.v.storage.elements(), seed + 3))
            }
            .unwrap();
            let mask = t.mask.map(|l| {
                let mut m = values(l.elements(), seed + 4);
                m[1] = f32::NEG_INFINITY;
                m[2] = f32::NEG_INFINITY;
                HostTensor::from_f32(GgmlType::F16, l.ne, &m).unwrap()
            });
            let sinks = t.sinks.map(|l| f32_tensor(l.ne, &values(l.elements(), seed + 5)));
            let got = flash_attn_ext(&q, &k, &v, mask.as_ref(), sinks.as_ref(), c.scale(), 0.0, 0.0).unwrap();
            assert_eq!(got.len(), t.dst.elements(), "{spec}");
            let (qv, kv, vv) = (q.to_f32().unwrap(), k.to_f32().unwrap(), v.to_f32().unwrap());
            let mv = mask.as_ref().map(|m| m.to_f32().unwrap());
            let sv = sinks.as_ref().map(|x| x.to_f32().unwrap());
            let want = naive(
                &qv,
                q.layout.ne,
                &kv,
                k.layout.ne,
                &vv,
                v.layout.ne,
                mv.as_deref().zip(mask.as_ref().map(|m| m.layout.ne)),
                sv.as_deref(),
                f64::from(c.scale()),
            );
            let want32: Vec<f32> = want.iter().map(|&x| x as f32).collect();
            let e = nmse(&want32, &got);
            assert!(e < 1e-12, "{spec}: NMSE {e}");
            // The same values stored contiguously give the same result, bit for bit.
            let contiguous =
                |t: &HostTensor| HostTensor::from_f32(GgmlType::F32, t.layout.ne, &t.to_f32().unwrap()).unwrap();
            let again = flash_attn_ext(
                &contiguous(&q),
                &contiguous(&k),
                &contiguous(&v),
                mask.as_ref(),
                sinks.as_ref(),
                c.scale(),
                0.0,
                0.0,
            )
            .unwrap();
            assert_eq!(got, again, "{spec}");
        }
    }
}

#[cfg(test)]
mod golden_tests {
    //! The reference against ggml's own CPU results (the golden GGUF files).

    use super::*;
    use crate::cases::Case;
    use ggml_dawn::format::FormatError;
    use ggml_dawn::gguf::{GgufError, GgufFile};
    use ggml_dawn::reference::{ReferenceError, check};
    use std::path::{Path, PathBuf};

    const DIRS: &[&str] = &[
        concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/golden"),
        "/work/shared/golden",
    ];

    fn golden_files(op: &str) -> Option<Vec<PathBuf>> {
        let dir = DIRS.iter().map(|d| Path::new(d).join(op)).find(|d| d.is_dir());
        let Some(dir) = dir else {
            println!("note: no golden {op} folder in {DIRS:?}; skipping");
            return None;
        };
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no golden files in {}", dir.display());
        Some(files)
    }

    /// The reason to skip a golden file when the error is a type `ggml_dawn::format` cannot convert
    /// yet; any other error fails the test.
    fn skip_or_panic(e: ReferenceError) -> String {
        match e {
            ReferenceError::Format {
                source: FormatError::Unsupported(ty),
                ..
            } => format!("{ty} is not supported by ggml_dawn::format yet"),
            other => panic!("{other}"),
        }
    }

    fn tensor(file: &GgufFile, name: &str) -> std::result::Result<HostTensor, String> {
        file.tensor(name).map_err(|e| match e {
            GgufError::UnknownTensorType { id, .. } => format!("tensor `{name}` has type id {id}, unknown to GgmlType"),
            other => panic!("reading `{name}`: {other}"),
        })
    }

    fn optional_tensor(file: &GgufFile, name: &str) -> std::result::Result<Option<HostTensor>, String> {
        if file.header.tensor_info(name).is_err() {
            return Ok(None);
        }
        tensor(file, name).map(Some)
    }

    /// Runs `compute` on each golden file of `op` and checks the result against its `dst`.
    fn run_golden(op: &str, compute: impl Fn(&GgufFile, &Case) -> std::result::Result<Vec<f32>, String>) {
        let Some(files) = golden_files(op) else { return };
        let (mut checked, mut skipped) = (0, 0);
        let mut worst = 0.0f64;
        for path in &files {
            let name = path.file_name().unwrap().to_string_lossy();
            let file = GgufFile::open(path).unwrap_or_else(|e| panic!("{name}: {e}"));
            let case_str = file.metadata().get_str("golden.case").expect("golden.case");
            let case: Case = case_str.parse().unwrap_or_else(|e| panic!("{name}: {case_str}: {e}"));
            let got = match compute(&file, &case) {
                Ok(v) => v,
                Err(reason) => {
                    println!("note: skipping {name}: {reason}");
                    skipped += 1;
                    continue;
                }
            };
            let dst = file.tensor("dst").unwrap().to_f32().unwrap();
            let nmse = check(&dst, &got, 5e-4).unwrap_or_else(|e| panic!("{name} ({case_str}): {e}"));
            worst = worst.max(nmse);
            checked += 1;
        }
        println!("{op}: {checked} golden files match (worst NMSE {worst:.3e}), {skipped} skipped");
        assert!(checked > 0, "no {op} golden file could be checked");
    }

    #[test]
    fn mul_mat_matches_golden_files() {
        run_golden("mul_mat", |file, case| {
            assert!(matches!(case, Case::MulMat(_)));
            let a = tensor(file, "src0")?;
            let b = tensor(file, "src1")?;
            mul_mat(&a, &b).map_err(skip_or_panic)
        });
    }

    #[test]
    fn flash_attn_ext_matches_golden_files() {
        run_golden("flash_attn_ext", |file, case| {
            let Case::FlashAttnExt(c) = case else {
                panic!("not a FLASH_ATTN_EXT case: {case}")
            };
            let c: &FlashAttnCase = c;
            let q = tensor(file, "q")?;
            let k = tensor(file, "k")?;
            let v = tensor(file, "v")?;
            let mask = optional_tensor(file, "mask")?;
            let sinks = optional_tensor(file, "sinks")?;
            assert_eq!(mask.is_some(), c.mask);
            assert_eq!(sinks.is_some(), c.sinks);
            let (scale, max_bias, softcap) = (c.scale(), c.max_bias, c.logit_softcap);
            flash_attn_ext(&q, &k, &v, mask.as_ref(), sinks.as_ref(), scale, max_bias, softcap).map_err(skip_or_panic)
        });
    }
}
