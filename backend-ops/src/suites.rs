//! The named benchmark suites: which cases a measurement runs, and how long it times each, as
//! data (`backend-ops perf --suite NAME`, listed by `backend-ops suites`).
//!
//! A suite names cases only. Tuning settings stay out of it: a sweep gives them per run in the
//! environment (`GGML_DAWN_MUL_MAT`, `GGML_DAWN_FA`), so the same suite measures the defaults and
//! every setting alike.

use regex::Regex;

use crate::case_lists;
use crate::cases::{Case, CaseError};

/// Where a suite's cases come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// One case string (fields left out take upstream's defaults).
    Case(&'static str),
    /// Upstream's perf cases ([`case_lists::perf_cases`]) of this op whose full case string
    /// matches this regular expression.
    Perf { op: &'static str, pattern: &'static str },
}

/// A named set of cases and the time each needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Suite {
    pub name: &'static str,
    /// What the suite measures, one line.
    pub description: &'static str,
    /// Seconds `perf` repeats each case when `--min-time` is not given: long enough that the
    /// spread between runs stays within about 1% on an H100 / H200.
    pub min_time: f64,
    pub sources: &'static [Source],
}

/// An error in a suite's data or its name.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("unknown suite `{0}` (known: {known})", known = names().join(", "))]
    Unknown(String),
    #[error("suite {suite}: case `{spec}`: {source}")]
    Case {
        suite: &'static str,
        spec: &'static str,
        source: Box<CaseError>,
    },
    #[error("suite {suite}: pattern `{pattern}`: {source}")]
    Pattern {
        suite: &'static str,
        pattern: &'static str,
        source: Box<regex::Error>,
    },
    #[error("suite {suite}: `{pattern}` matches no perf case of {op}")]
    Empty {
        suite: &'static str,
        op: &'static str,
        pattern: &'static str,
    },
}

use Source::{Case as C, Perf};

/// The decode shapes of the targets: the five weight types at n = 1 and 8.
const TARGET_MUL_MAT: &str = r"^MUL_MAT\(type_a=(f16|q4_0|q8_0|q4_K|q6_K),type_b=f32,m=4096,n=[18],k=14336,";

/// Every suite.
pub const SUITES: &[Suite] = &[
    Suite {
        name: "quick",
        description: "a first look at a new machine or bundle: f16 and q4_0 at n = 1 and 512, attention decode at kv=16384",
        min_time: 0.5,
        sources: &[
            C("MUL_MAT(type_a=f16,type_b=f32,m=4096,n=1,k=14336)"),
            C("MUL_MAT(type_a=f16,type_b=f32,m=4096,n=512,k=14336)"),
            C("MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=1,k=14336)"),
            C("MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=512,k=14336)"),
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1)"),
        ],
    },
    Suite {
        name: "decode-targets",
        description: "the decode targets (BENCHMARKS.md): MUL_MAT f16/q4_0/q8_0/q4_K/q6_K at n = 1 and 8, attention decode of f16, q8_0 and q4_0 caches",
        min_time: 0.4,
        sources: &[
            Perf {
                op: "MUL_MAT",
                pattern: TARGET_MUL_MAT,
            },
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1)"),
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[1,1],kv=4096,nb=1)"),
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q8_0,type_V=q8_0)"),
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q4_0,type_V=q4_0)"),
        ],
    },
    Suite {
        name: "decode-misses",
        description: "the cases that tell what limits a missed decode target (run under the probe settings): q6_K, q8_0 and f16 at n = 1 and 8, attention decode at three KV lengths and its quantized caches",
        min_time: 0.3,
        sources: &[
            Perf {
                op: "MUL_MAT",
                pattern: r"^MUL_MAT\(type_a=(q6_K|q8_0|f16),type_b=f32,m=4096,n=[18],k=14336,",
            },
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=256,nb=1)"),
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1)"),
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=32768,nb=1)"),
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q8_0,type_V=q8_0)"),
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q4_0,type_V=q4_0)"),
        ],
    },
    Suite {
        name: "decode-fixed",
        description: "what an op costs beside its memory stream: tiny ops (one and two dispatches) beside the n=1 decode cases; `perf -v` adds the host's part",
        min_time: 0.2,
        sources: &[
            C("MUL_MAT(type_a=f16,type_b=f32,m=64,n=1,k=256)"),
            C("MUL_MAT(type_a=q4_0,type_b=f32,m=64,n=1,k=256)"),
            C("MUL_MAT(type_a=q4_K,type_b=f32,m=64,n=1,k=256)"),
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[1,1],kv=256,nb=1,type_K=f16,type_V=f16)"),
            Perf {
                op: "MUL_MAT",
                pattern: r"^MUL_MAT\(type_a=(f16|q4_0|q8_0|q4_K|q6_K),type_b=f32,m=4096,n=1,k=14336,",
            },
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[1,1],kv=4096,nb=1)"),
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1)"),
        ],
    },
    Suite {
        name: "decode",
        description: "decode over every type: upstream's MUL_MAT perf cases at n = 1-5 and 8, its attention perf cases with nb <= 4",
        min_time: 0.3,
        sources: &[
            Perf {
                op: "MUL_MAT",
                pattern: r"^MUL_MAT\(type_a=[^,]+,type_b=f32,m=4096,n=[1-58],k=14336,",
            },
            Perf {
                op: "FLASH_ATTN_EXT",
                pattern: r",nb=[1-4],",
            },
        ],
    },
    Suite {
        name: "prefill",
        description: "prefill: MUL_MAT f16/q4_0/q8_0/q4_K/q6_K at n=512, upstream's attention perf cases with nb >= 5",
        min_time: 0.3,
        sources: &[
            Perf {
                op: "MUL_MAT",
                pattern: r"^MUL_MAT\(type_a=(f16|q4_0|q8_0|q4_K|q6_K),type_b=f32,m=4096,n=512,k=14336,",
            },
            Perf {
                op: "FLASH_ATTN_EXT",
                pattern: r",nb=([5-9]|[1-9][0-9]+),",
            },
        ],
    },
    Suite {
        name: "prefill-all",
        description: "prefill over every type: upstream's MUL_MAT perf cases at n=512",
        min_time: 0.3,
        sources: &[Perf {
            op: "MUL_MAT",
            pattern: r"^MUL_MAT\(type_a=[^,]+,type_b=f32,m=4096,n=512,k=14336,",
        }],
    },
    Suite {
        name: "upstream-perf",
        description: "all of upstream's perf cases of MUL_MAT and FLASH_ATTN_EXT (the side-by-side lists; before and after a change)",
        min_time: 0.2,
        sources: &[
            Perf {
                op: "MUL_MAT",
                pattern: ".",
            },
            Perf {
                op: "FLASH_ATTN_EXT",
                pattern: ".",
            },
        ],
    },
    Suite {
        name: "attention",
        description: "the attention set: decode of f16/q8_0/q4_0 caches at head sizes 64 and 128, the prefill cases (5776 and 512 rows), head size 256",
        min_time: 0.5,
        sources: &[
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1)"),
            C("FLASH_ATTN_EXT(hsk=64,hsv=64,nh=8,nr23=[4,1],kv=16384,nb=1)"),
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q8_0,type_V=q8_0)"),
            C("FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q4_0,type_V=q4_0)"),
            C("FLASH_ATTN_EXT(hsk=72,hsv=72,nh=16,nr23=[1,1],kv=5776,nb=5776,mask=0)"),
            C("FLASH_ATTN_EXT(hsk=64,hsv=64,nh=8,nr23=[8,1],kv=7680,nb=512,type_K=q4_0,type_V=q4_0)"),
            C("FLASH_ATTN_EXT(hsk=64,hsv=64,nh=8,nr23=[8,1],kv=7680,nb=512,type_K=q8_0,type_V=q8_0)"),
            C("FLASH_ATTN_EXT(hsk=256,hsv=256,nh=2,nr23=[16,1],kv=20000,nb=1)"),
            C("FLASH_ATTN_EXT(hsk=256,hsv=256,nh=2,nr23=[16,1],kv=20000,nb=512)"),
        ],
    },
    Suite {
        name: "rows",
        description: "the memory-bound decoder ops in GB/s: RMS_NORM (and fused) over 4096x512 and 4096x4096 f32 and one decode row, ADD and a broadcast MUL over 4096x512, SOFT_MAX, ARGMAX over a vocabulary, SCALE, CPY of 4096x4096 (converting, transposed, quantizing), GET_ROWS of 4096 rows of a 32000-row table, SET_ROWS into a cache, ROPE of a 4096-token prefill and one decode token",
        min_time: 0.5,
        sources: &[
            C("RMS_NORM(type=f32,ne=[4096,512,1,1],v=0,eps=0.000001,inplace=0)"),
            C("RMS_NORM(type=f32,ne=[4096,4096,1,1],v=0,eps=0.000001,inplace=0)"),
            C("RMS_NORM(type=f32,ne=[4096,1,1,1],v=0,eps=0.000001,inplace=0)"),
            C("RMS_NORM_MUL_ADD(type=f32,ne=[4096,512,1,1],eps=0.000001,broadcast=0,multi_add=0)"),
            C("ADD(type=f32,ne=[4096,512,1,1],nr=[1,1,1,1],nf=1,perm1=0,src_overlap=0)"),
            C("MUL(type=f32,ne=[4096,1,1,1],nr=[1,512,1,1],nf=1,perm1=0,src_overlap=0)"),
            C(
                "SOFT_MAX(type=f32,ne=[4096,512,1,1],mask=0,sinks=0,m_prec=f32,nr23=[1,1],scale=1.000000,max_bias=0.000000,inplace=0)",
            ),
            C(
                "SOFT_MAX(type=f32,ne=[4096,512,8,1],mask=1,sinks=1,m_prec=f16,nr23=[1,1],scale=0.100000,max_bias=0.000000,inplace=0)",
            ),
            C("ARGMAX(type=f32,ne=[32000,512,1,1])"),
            C("ARGMAX(type=f32,ne=[151936,1,1,1])"),
            C("SCALE(type=f32,ne=[4096,512,1,1],scale=2.000000,bias=1.000000,inplace=0)"),
            C("SCALE(type=f32,ne=[4096,4096,4,1],scale=2.000000,bias=1.000000,inplace=0)"),
            C(
                "CPY(type_src=f32,type_dst=f32,ne_src=[4096,4096,1,1],permute_src=[0,0,0,0],permute_dst=[0,0,0,0],_src_transpose=0)",
            ),
            C(
                "CPY(type_src=f32,type_dst=f16,ne_src=[4096,4096,1,1],permute_src=[0,0,0,0],permute_dst=[0,0,0,0],_src_transpose=0)",
            ),
            C(
                "CPY(type_src=f16,type_dst=f32,ne_src=[4096,4096,1,1],permute_src=[0,0,0,0],permute_dst=[0,0,0,0],_src_transpose=0)",
            ),
            C(
                "CPY(type_src=f16,type_dst=f16,ne_src=[4096,4096,1,1],permute_src=[0,0,0,0],permute_dst=[0,0,0,0],_src_transpose=0)",
            ),
            C(
                "CPY(type_src=f32,type_dst=f32,ne_src=[4096,4096,1,1],permute_src=[1,0,2,3],permute_dst=[0,0,0,0],_src_transpose=0)",
            ),
            C(
                "CPY(type_src=f32,type_dst=q8_0,ne_src=[4096,4096,1,1],permute_src=[0,0,0,0],permute_dst=[0,0,0,0],_src_transpose=0)",
            ),
            C(
                "CPY(type_src=f32,type_dst=q4_0,ne_src=[4096,4096,1,1],permute_src=[0,0,0,0],permute_dst=[0,0,0,0],_src_transpose=0)",
            ),
            C("GET_ROWS(type=f32,n=4096,m=32000,r=4096,be1=1,be2=1,v=0)"),
            C("GET_ROWS(type=f16,n=4096,m=32000,r=4096,be1=1,be2=1,v=0)"),
            C("GET_ROWS(type=q8_0,n=4096,m=32000,r=4096,be1=1,be2=1,v=0)"),
            C("GET_ROWS(type=q4_K,n=4096,m=32000,r=4096,be1=1,be2=1,v=0)"),
            C("SET_ROWS(type_src=f32,type_dst=f16,type_idx=i64,ne=[1024,8192,1,1],nr23=[1,1],r=4096,v=0)"),
            C("SET_ROWS(type_src=f32,type_dst=f32,type_idx=i64,ne=[1024,8192,1,1],nr23=[1,1],r=4096,v=0)"),
            C("SET_ROWS(type_src=f32,type_dst=q8_0,type_idx=i64,ne=[1024,8192,1,1],nr23=[1,1],r=4096,v=0)"),
            C(
                "ROPE(type=f32,ne_a=[128,32,4096,1],n_dims=128,mode=2,n_ctx=4096,fs=1.000000,ef=0.000000,af=1.000000,ff=0,v=0,inplace=0,n_offs=0)",
            ),
            C(
                "ROPE(type=f32,ne_a=[128,32,4096,1],n_dims=128,mode=0,n_ctx=4096,fs=1.000000,ef=0.000000,af=1.000000,ff=0,v=0,inplace=0,n_offs=0)",
            ),
            C(
                "ROPE(type=f16,ne_a=[128,32,4096,1],n_dims=128,mode=2,n_ctx=4096,fs=1.000000,ef=0.000000,af=1.000000,ff=0,v=0,inplace=0,n_offs=0)",
            ),
            C(
                "ROPE(type=f32,ne_a=[128,32,1,1],n_dims=128,mode=2,n_ctx=4096,fs=1.000000,ef=0.000000,af=1.000000,ff=0,v=0,inplace=0,n_offs=0)",
            ),
            C("SET_ROWS(type_src=f32,type_dst=f16,type_idx=i64,ne=[1024,4096,1,1],nr23=[1,1],r=1,v=0)"),
        ],
    },
];

/// The suites' names, in table order.
pub fn names() -> Vec<&'static str> {
    SUITES.iter().map(|s| s.name).collect()
}

/// The suite called `name`.
pub fn find(name: &str) -> Result<&'static Suite, SuiteError> {
    SUITES
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| SuiteError::Unknown(name.to_owned()))
}

impl Suite {
    /// The suite's cases, in the order of its sources (a case named twice runs once).
    pub fn cases(&self) -> Result<Vec<Case>, SuiteError> {
        let perf = case_lists::perf_cases();
        let mut cases: Vec<Case> = Vec::new();
        for source in self.sources {
            let found = match *source {
                Source::Case(spec) => vec![spec.parse::<Case>().map_err(|source| SuiteError::Case {
                    suite: self.name,
                    spec,
                    source: Box::new(source),
                })?],
                Source::Perf { op, pattern } => {
                    let re = Regex::new(pattern).map_err(|source| SuiteError::Pattern {
                        suite: self.name,
                        pattern,
                        source: Box::new(source),
                    })?;
                    let found: Vec<Case> = perf
                        .iter()
                        .filter(|c| c.op_name() == op && re.is_match(&c.to_string()))
                        .cloned()
                        .collect();
                    if found.is_empty() {
                        return Err(SuiteError::Empty {
                            suite: self.name,
                            op,
                            pattern,
                        });
                    }
                    found
                }
            };
            for case in found {
                if !cases.contains(&case) {
                    cases.push(case);
                }
            }
        }
        Ok(cases)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_suite_parses_into_cases() {
        let mut names = names();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SUITES.len(), "suite names are unique");
        for suite in SUITES {
            let cases = suite.cases().unwrap_or_else(|e| panic!("{e}"));
            assert!(!cases.is_empty(), "{}", suite.name);
            assert!(suite.min_time > 0.0 && suite.min_time <= 2.0, "{}", suite.name);
            assert!(!suite.description.is_empty(), "{}", suite.name);
            // Each explicit case string is one case, kept in its place.
            for source in suite.sources {
                if let Source::Case(spec) = source {
                    let case: Case = spec.parse().unwrap();
                    assert!(cases.contains(&case), "{}: {spec}", suite.name);
                }
            }
            // No tuning settings in suite data: a knob sweep gives them in the environment.
            for source in suite.sources {
                let text = format!("{source:?}");
                assert!(!text.contains("GGML_DAWN"), "{}: {text}", suite.name);
            }
        }
    }

    #[test]
    fn suites_hold_the_cases_they_describe() {
        let text = |name: &str| -> Vec<String> {
            find(name)
                .unwrap()
                .cases()
                .unwrap()
                .iter()
                .map(|c| c.to_string())
                .collect()
        };
        let targets = text("decode-targets");
        // Five types at n = 1 and 8, and four attention cases.
        assert_eq!(targets.iter().filter(|c| c.starts_with("MUL_MAT(")).count(), 10);
        assert_eq!(targets.iter().filter(|c| c.starts_with("FLASH_ATTN_EXT(")).count(), 4);
        assert!(targets.contains(
            &"MUL_MAT(type_a=q6_K,type_b=f32,m=4096,n=8,k=14336,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0)"
                .to_owned()
        ));
        // Decode: 25 types at six n, no n=512; attention only with nb <= 4.
        let decode = text("decode");
        let mm: Vec<&String> = decode.iter().filter(|c| c.starts_with("MUL_MAT(")).collect();
        assert_eq!(mm.len(), 25 * 6);
        assert!(mm.iter().all(|c| !c.contains(",n=512,")));
        let nb = Regex::new(r",nb=([0-9]+),").unwrap();
        for c in decode.iter().filter(|c| c.starts_with("FLASH_ATTN_EXT(")) {
            let n: usize = nb.captures(c).unwrap()[1].parse().unwrap();
            assert!(n <= 4, "{c}");
        }
        // Prefill: n=512 and nb >= 5 only.
        for c in text("prefill") {
            match nb.captures(&c) {
                Some(m) => assert!(m[1].parse::<usize>().unwrap() >= 5, "{c}"),
                None => assert!(c.contains(",n=512,"), "{c}"),
            }
        }
    }

    #[test]
    fn an_unknown_suite_is_an_error_naming_the_known_ones() {
        let e = find("nonesuch").unwrap_err().to_string();
        assert!(
            e.contains("nonesuch") && e.contains("decode-targets") && e.contains("quick"),
            "{e}"
        );
    }
}
