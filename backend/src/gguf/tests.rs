use super::*;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::ggml_type::GgmlType;
use crate::tensor::{HostTensor, Layout};

fn golden_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "gguf") {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/golden");
    let mut out = Vec::new();
    walk(&root, &mut out);
    out.sort();
    out
}

/// The value of `key=` in an upstream case string such as `MUL_MAT(type_a=q4_0,…)`.
fn case_param<'a>(case: &'a str, key: &str) -> Option<&'a str> {
    let start = case.find(&format!("{key}="))? + key.len() + 1;
    case[start..].split([',', ')']).next()
}

#[test]
fn reads_every_golden_file() {
    let files = golden_files();
    assert!(files.len() >= 100, "only {} golden files found", files.len());
    let mut unknown = std::collections::BTreeSet::new();
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        let f = GgufFile::from_bytes(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let op = f.metadata().get_str("golden.op").expect("golden.op");
        let case = f.metadata().get_str("golden.case").expect("golden.case");
        // The tensor whose type the case names, and that name.
        let (typed, type_name) = match op {
            "QUANT" => ("quantized", Some(case)),
            "MUL_MAT" => ("src0", case_param(case, "type_a")),
            "FLASH_ATTN_EXT" => ("k", case_param(case, "type_K")),
            _ => panic!("{}: unknown op {op}", path.display()),
        };
        assert_eq!(f.header.version, 3);
        assert!(!f.tensors().is_empty());
        for info in f.tensors() {
            let range = f.header.tensor_range(info, f.data().len()).unwrap();
            assert!(
                f.header.data_offset + range.end <= bytes.len(),
                "{}: {}",
                path.display(),
                info.name
            );
            let data = f.tensor_data(&info.name).unwrap();
            match info.ggml_type() {
                Some(ty) => {
                    assert_eq!(Some(data.len()), info.nbytes());
                    let t = f.tensor(&info.name).unwrap();
                    assert_eq!(t.layout, Layout::contiguous(ty, info.ne).unwrap());
                    assert_eq!(t.data, data);
                }
                None => {
                    let err = f.tensor(&info.name);
                    assert!(matches!(err, Err(GgufError::UnknownTensorType { id, .. }) if id == info.ty));
                    unknown.insert((info.ty, type_name.unwrap_or("?").to_owned()));
                }
            }
        }
        // The type named by the case must be the type stored.
        if let Some(ty) = type_name.and_then(|n| n.parse::<GgmlType>().ok()) {
            assert_eq!(
                f.header.tensor_info(typed).unwrap().ty,
                ty.gguf_id(),
                "{}",
                path.display()
            );
        }
        // The files were written by ggml's writer, whose layout ours reproduces byte for byte.
        let again = GgufWriter::from_file(&f).unwrap().to_bytes().unwrap();
        assert!(again == bytes, "{}: rewrite differs", path.display());
    }
    eprintln!("type ids unknown to GgmlType in the golden files: {unknown:?}");
}

#[test]
fn quant_files_hold_f32_input_and_output() {
    for path in golden_files()
        .iter()
        .filter(|p| p.parent().is_some_and(|d| d.ends_with("quant")))
    {
        let f = GgufFile::open(path).unwrap();
        for name in ["input", "dequantized"] {
            let t = f.tensor(name).unwrap();
            assert_eq!((t.layout.ty, t.layout.ne), (GgmlType::F32, [1024, 4, 1, 1]));
        }
        let q = f.header.tensor_info("quantized").unwrap();
        assert_eq!((q.n_dims, q.ne), (2, [1024, 4, 1, 1]));
    }
}

fn every_value() -> Vec<(&'static str, Value)> {
    vec![
        ("t.u8", Value::U8(200)),
        ("t.i8", Value::I8(-100)),
        ("t.u16", Value::U16(60000)),
        ("t.i16", Value::I16(-30000)),
        ("t.u32", Value::U32(4_000_000_000)),
        ("t.i32", Value::I32(-2_000_000_000)),
        ("t.f32", Value::F32(-1.5e-7)),
        ("t.bool", Value::Bool(true)),
        ("t.string", Value::String("héllo, GGUF".into())),
        ("t.empty", Value::String(String::new())),
        ("t.u64", Value::U64(u64::MAX)),
        ("t.i64", Value::I64(i64::MIN)),
        ("t.f64", Value::F64(std::f64::consts::PI)),
        ("t.arr_i32", Value::Array(Array::I32(vec![1, -2]))),
        ("t.arr_str", Value::Array(Array::String(vec!["a".into(), "".into()]))),
        ("t.arr_empty", Value::Array(Array::empty(ValueType::F64))),
        (
            "t.arr_nested",
            Value::Array(Array::Array(vec![Array::Bool(vec![false]), Array::U16(vec![7, 8])])),
        ),
    ]
}

fn sample_writer() -> GgufWriter {
    let mut w = GgufWriter::new();
    w.set("general.architecture", Value::String("test".into()));
    w.set_alignment(64).unwrap();
    for (k, v) in every_value() {
        w.set(k, v);
    }
    let f32s: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
    w.add_tensor("a", GgmlType::F32, [3, 2, 1, 1], f32s).unwrap();
    w.add_tensor("b", GgmlType::Q4_0, [64, 1, 2, 1], (0..72).collect())
        .unwrap();
    w.add_tensor("scalar", GgmlType::F32, [1, 1, 1, 1], 7f32.to_le_bytes().to_vec())
        .unwrap();
    w.add_tensor("c", GgmlType::F16, [2, 1, 1, 3], vec![1; 12]).unwrap();
    w
}

#[test]
fn write_then_read_preserves_everything() {
    let mut w = sample_writer();
    // An id this crate does not know keeps its bytes (then zero padding, since the size is unknown).
    w.add_raw_tensor("unknown", 41, 2, [128, 3, 1, 1], (100..154).collect())
        .unwrap();
    let bytes = w.to_bytes().unwrap();
    let f = GgufFile::from_bytes(&bytes).unwrap();
    assert_eq!(f.header.version, 3);
    assert_eq!(f.header.alignment, 64);
    assert_eq!(f.header.data_offset % 64, 0);
    assert_eq!(f.metadata(), &w.metadata);
    let keys: Vec<&str> = f.metadata().iter().map(|(k, _)| k).collect();
    assert_eq!(keys[..2], ["general.architecture", ALIGNMENT_KEY]);
    let names: Vec<&str> = f.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "scalar", "c", "unknown"]);
    for (info, data) in &w.tensors {
        let read = f.header.tensor_info(&info.name).unwrap();
        assert_eq!((read.n_dims, read.ne, read.ty), (info.n_dims, info.ne, info.ty));
        assert_eq!(read.offset % 64, 0);
        let got = f.tensor_data(&info.name).unwrap();
        if info.ggml_type().is_some() {
            assert_eq!(got, &data[..]);
        } else {
            assert_eq!(&got[..data.len()], &data[..]);
            assert!(got[data.len()..].iter().all(|&b| b == 0) && got.len() == 64);
        }
    }
    assert_eq!(f.header.tensor_info("scalar").unwrap().n_dims, 1);
    assert_eq!(f.header.tensor_info("c").unwrap().n_dims, 4);
    assert_eq!(f.tensor("a").unwrap().to_f32().unwrap(), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    // Reading and writing again gives the same bytes.
    assert_eq!(GgufWriter::from_file(&f).unwrap().to_bytes().unwrap(), bytes);
}

#[test]
fn host_tensors_round_trip() {
    let t = HostTensor::from_f32(GgmlType::F32, [4, 2, 1, 1], &[1., 2., 3., 4., 5., 6., 7., 8.]).unwrap();
    let mut w = GgufWriter::new();
    w.add_host_tensor("t", &t).unwrap();
    let f = GgufFile::from_bytes(&w.to_bytes().unwrap()).unwrap();
    assert_eq!(f.tensor("t").unwrap(), t);
    assert_eq!(f.header.alignment, DEFAULT_ALIGNMENT);
    assert!(matches!(f.tensor("nope"), Err(GgufError::NoTensor(_))));
    let view = HostTensor {
        layout: t.layout.permute([1, 0, 2, 3]).unwrap(),
        data: t.data.clone(),
    };
    assert!(w.add_host_tensor("v", &view).is_err());
}

#[test]
fn writer_rejects_bad_input() {
    let mut w = GgufWriter::new();
    assert!(w.add_tensor("x", GgmlType::F32, [2, 1, 1, 1], vec![0; 7]).is_err());
    assert!(w.add_tensor("x", GgmlType::Q4_0, [48, 1, 1, 1], vec![0; 27]).is_err());
    assert!(w.add_raw_tensor("x", 99, 1, [2, 2, 1, 1], vec![]).is_err());
    assert!(w.add_raw_tensor("x", 99, 5, [2, 2, 1, 1], vec![]).is_err());
    w.add_tensor("x", GgmlType::F32, [1, 1, 1, 1], vec![0; 4]).unwrap();
    assert!(matches!(
        w.add_raw_tensor("x", 99, 1, [1, 1, 1, 1], vec![]),
        Err(GgufError::DuplicateTensor(_))
    ));
    assert!(w.set_alignment(48).is_err());
    w.set("m", Value::U8(1));
    w.set(ALIGNMENT_KEY, Value::U64(32));
    assert!(matches!(w.to_bytes(), Err(GgufError::BadAlignment(_))));
}

#[test]
fn reads_version_2_and_rejects_others() {
    let mut bytes = sample_writer().to_bytes().unwrap();
    let v3 = GgufFile::from_bytes(&bytes).unwrap();
    bytes[4] = 2;
    let v2 = GgufFile::from_bytes(&bytes).unwrap();
    assert_eq!(v2.header.version, 2);
    assert_eq!(
        (v2.metadata(), v2.tensors(), v2.data()),
        (v3.metadata(), v3.tensors(), v3.data())
    );
    for v in [0u32, 1, 4, 0x0300_0000] {
        bytes[4..8].copy_from_slice(&v.to_le_bytes());
        assert!(matches!(GgufFile::from_bytes(&bytes), Err(GgufError::UnsupportedVersion(x)) if x == v));
    }
}

#[test]
fn empty_file_without_padding_reads() {
    let mut bytes = GgufWriter::new().to_bytes().unwrap();
    assert_eq!(bytes.len(), 32);
    bytes.truncate(24);
    let f = GgufFile::from_bytes(&bytes).unwrap();
    assert!(f.tensors().is_empty() && f.metadata().is_empty() && f.data().is_empty());
}

/// Hand-built headers, for inputs the writer refuses to make.
struct Raw(Vec<u8>);

impl Raw {
    fn new(n_tensors: u64, n_kv: u64) -> Raw {
        let mut r = Raw(b"GGUF".to_vec());
        r.u32(3).u64(n_tensors).u64(n_kv);
        r
    }
    fn u32(&mut self, v: u32) -> &mut Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Raw {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    fn tensor(&mut self, name: &str, ne: &[u64], ty: u32, offset: u64) -> &mut Raw {
        self.str(name).u32(ne.len() as u32);
        for &n in ne {
            self.u64(n);
        }
        self.u32(ty).u64(offset)
    }
    fn data(&mut self, n: usize) -> Vec<u8> {
        let mut out = self.0.clone();
        out.resize(out.len().next_multiple_of(32) + n, 0);
        out
    }
    fn exact(&mut self) -> Result<GgufFile> {
        GgufFile::from_bytes(&self.0)
    }
    fn read(&mut self, data: usize) -> Result<GgufFile> {
        GgufFile::from_bytes(&self.data(data))
    }
}

#[test]
fn malformed_headers_are_errors() {
    use GgufError as E;
    assert!(matches!(GgufFile::from_bytes(b"GGUE\x03\0\0\0"), Err(E::BadMagic(_))));
    assert!(matches!(GgufFile::from_bytes(b""), Err(E::Truncated { .. })));
    // Counts and lengths far beyond the file.
    assert!(matches!(Raw::new(u64::MAX, 0).read(0), Err(E::Truncated { .. })));
    assert!(matches!(Raw::new(0, u64::MAX).read(0), Err(E::Truncated { .. })));
    assert!(matches!(Raw::new(0, 1).u64(u64::MAX).read(0), Err(E::Truncated { .. })));
    assert!(matches!(
        Raw::new(0, 1).str("k").u32(8).u64(u64::MAX).read(64),
        Err(E::Truncated { .. })
    ));
    assert!(matches!(
        Raw::new(0, 1).str("k").u32(9).u32(0).u64(u64::MAX).read(64),
        Err(E::Truncated { .. })
    ));
    assert!(matches!(
        Raw::new(1, 0).str("t").u32(4).u64(u64::MAX).read(64),
        Err(E::BadTensor { .. })
    ));
    // Bad values.
    assert!(matches!(
        Raw::new(0, 1).str("k").u32(13).read(8),
        Err(E::UnknownValueType(13))
    ));
    assert!(matches!(
        Raw::new(0, 1).str("k").u32(9).u32(77).u64(0).read(0),
        Err(E::UnknownValueType(77))
    ));
    assert!(matches!(
        Raw::new(0, 1).str("k").u32(7).exact(),
        Err(E::Truncated { .. })
    ));
    let mut bad_bool = Raw::new(0, 1);
    bad_bool.str("k").u32(7).0.push(2);
    assert!(matches!(bad_bool.read(0), Err(E::BadValue(_))));
    let mut deep = Raw::new(0, 1);
    deep.str("k").u32(9);
    for _ in 0..100 {
        deep.u32(9).u64(1);
    }
    assert!(matches!(deep.read(0), Err(E::BadValue(_))));
    let mut bad_utf8 = Raw::new(0, 1);
    bad_utf8.u64(2).0.extend_from_slice(&[0xff, 0xfe]);
    assert!(matches!(bad_utf8.u32(4).u32(0).read(0), Err(E::InvalidUtf8(_))));
    assert!(matches!(
        Raw::new(0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2).read(0),
        Err(E::DuplicateKey(_))
    ));
    for align in [
        Raw::new(0, 1).str(ALIGNMENT_KEY).u32(4).u32(0).read(0),
        Raw::new(0, 1).str(ALIGNMENT_KEY).u32(4).u32(24).read(0),
        Raw::new(0, 1).str(ALIGNMENT_KEY).u32(10).u64(32).read(0),
    ] {
        assert!(matches!(align, Err(E::BadAlignment(_))));
    }
}

#[test]
fn malformed_tensor_infos_are_errors() {
    use GgufError as E;
    let q4_0 = GgmlType::Q4_0.gguf_id();
    assert!(Raw::new(1, 0).tensor("t", &[32, 2], q4_0, 0).read(36).is_ok());
    assert!(Raw::new(1, 0).tensor("t", &[], 0, 0).read(4).is_ok());
    assert!(matches!(
        Raw::new(1, 0).tensor("t", &[32, 2], q4_0, 0).read(35),
        Err(E::OutOfBounds { .. })
    ));
    assert!(matches!(
        Raw::new(1, 0).tensor("t", &[32, 2], q4_0, 0).read(0),
        Err(E::OutOfBounds { .. })
    ));
    assert!(matches!(
        Raw::new(1, 0).tensor("t", &[32, 2], q4_0, 64).read(100),
        Err(E::MisplacedTensor {
            offset: 64,
            expected: ExpectedOffset::Exactly(0),
            ..
        })
    ));
    assert!(matches!(
        Raw::new(1, 0).tensor("t", &[4], 0, u64::MAX - 31).read(16),
        Err(E::MisplacedTensor { .. })
    ));
    assert!(matches!(
        Raw::new(1, 0).tensor("t", &[48], q4_0, 0).read(64),
        Err(E::BadTensor { .. })
    ));
    assert!(matches!(
        Raw::new(1, 0).tensor("t", &[1; 5], 0, 0).read(4),
        Err(E::BadTensor { .. })
    ));
    assert!(matches!(
        Raw::new(1, 0).tensor("t", &[1], 0, 4).read(8),
        Err(E::BadTensor { .. })
    ));
    let huge = [1 << 31, 1 << 31, 1 << 31, 1 << 31];
    assert!(matches!(
        Raw::new(1, 0).tensor("t", &huge, 99, 0).read(0),
        Err(E::BadTensor { .. })
    ));
    assert!(matches!(
        Raw::new(1, 0).tensor("t", &[1 << 62], 0, 0).read(0),
        Err(E::BadTensor { .. })
    ));
    assert!(matches!(
        Raw::new(1, 0).tensor("t", &[1 << 40], 0, 0).read(0),
        Err(E::OutOfBounds { .. })
    ));
    assert!(matches!(
        Raw::new(1, 0).tensor("t", &[u64::MAX], 0, 0).read(0),
        Err(E::BadTensor { .. })
    ));
    assert!(matches!(
        Raw::new(2, 0).tensor("t", &[1], 0, 0).tensor("t", &[1], 0, 32).read(64),
        Err(E::DuplicateTensor(_))
    ));
    // An unknown type is fine; its data runs to the next tensor or the end.
    let f = Raw::new(2, 0)
        .tensor("u", &[7], 99, 0)
        .tensor("v", &[1], 0, 64)
        .read(68)
        .unwrap();
    assert_eq!(f.tensor_data("u").unwrap().len(), 64);
    assert!(matches!(f.tensor("u"), Err(E::UnknownTensorType { id: 99, .. })));
    assert!(matches!(
        Raw::new(2, 0)
            .tensor("u", &[7], 99, 0)
            .tensor("v", &[1], 0, 64)
            .read(32),
        Err(E::OutOfBounds { .. })
    ));
}

#[test]
fn truncated_and_corrupted_files_do_not_panic() {
    let bytes = sample_writer().to_bytes().unwrap();
    let f = GgufFile::from_bytes(&bytes).unwrap();
    let needed = f
        .tensors()
        .iter()
        .map(|t| f.header.data_offset + t.offset + t.nbytes().unwrap())
        .max()
        .unwrap();
    for len in 0..bytes.len() {
        let r = GgufFile::from_bytes(&bytes[..len]);
        assert_eq!(r.is_ok(), len >= needed, "prefix of {len} bytes: {r:?}");
    }
    // Random byte changes: any result but a panic.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let mut b = bytes.clone();
        for _ in 0..1 + next() % 4 {
            let i = (next() % b.len() as u64) as usize;
            b[i] = next() as u8;
        }
        let _ = GgufFile::from_bytes(&b).map(|f| {
            for t in f.tensors() {
                let _ = f.tensor(&t.name);
            }
        });
    }
}

/// Two tensors built by hand at the given offsets, each `n` f32s.
fn two_f32(a: (u64, u64), b: (u64, u64)) -> Result<GgufFile> {
    Raw::new(2, 0)
        .tensor("a", &[a.0], 0, a.1)
        .tensor("b", &[b.0], 0, b.1)
        .read(256)
}

#[test]
fn tensors_must_lie_where_ggml_puts_them() {
    use ExpectedOffset::{AtLeast, Exactly};
    let misplaced = |r: Result<GgufFile>| match r {
        Err(GgufError::MisplacedTensor { name, offset, expected }) => (name, offset, expected),
        other => panic!("not a misplaced tensor: {other:?}"),
    };
    // One after the other, each padded to the alignment: 36 bytes take 64.
    let f = two_f32((9, 0), (8, 64)).unwrap();
    assert_eq!(
        (f.tensor_data("a").unwrap().len(), f.tensor_data("b").unwrap().len()),
        (36, 32)
    );
    // Sharing data, wholly or in part.
    assert_eq!(misplaced(two_f32((8, 0), (8, 0))), ("b".into(), 0, Exactly(32)));
    assert_eq!(misplaced(two_f32((9, 0), (8, 32))), ("b".into(), 32, Exactly(64)));
    // Out of file order, or with a gap.
    assert_eq!(misplaced(two_f32((8, 32), (8, 0))), ("a".into(), 32, Exactly(0)));
    assert_eq!(misplaced(two_f32((8, 0), (8, 64))), ("b".into(), 64, Exactly(32)));
    // The error names the tensor and both offsets.
    let msg = two_f32((8, 0), (8, 0)).unwrap_err().to_string();
    assert!(msg.contains("`b`") && msg.contains("offset 0, expected 32"), "{msg}");
    // The header alone is refused, without the data.
    let bytes = Raw::new(2, 0).tensor("a", &[8], 0, 0).tensor("b", &[8], 0, 0).data(0);
    assert!(matches!(
        GgufHeader::read(&bytes[..]),
        Err(GgufError::MisplacedTensor { .. })
    ));
    // An empty tensor takes no room.
    assert!(two_f32((0, 0), (8, 0)).is_ok());
    assert_eq!(misplaced(two_f32((0, 0), (8, 32))), ("b".into(), 32, Exactly(0)));
    // After a type this crate does not know, the next tensor must only come later.
    let after_unknown = |at| {
        Raw::new(2, 0)
            .tensor("u", &[7], 99, 0)
            .tensor("v", &[1], 0, at)
            .read(256)
    };
    assert!(after_unknown(32).is_ok() && after_unknown(96).is_ok());
    assert_eq!(misplaced(after_unknown(0)), ("v".into(), 0, AtLeast(32)));
}

/// A reader without a length, to read as from a pipe.
struct Unsized<'a>(&'a [u8]);

impl Read for Unsized<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

#[test]
fn arrays_take_the_memory_of_their_bytes() {
    const N: usize = 4 << 20;
    let mut w = GgufWriter::new();
    w.set("big.u8", Value::Array(Array::U8(vec![7; N])));
    w.set(
        "big.f32",
        Value::Array((0..N / 4).map(|i| i as f32).collect::<Vec<_>>().into()),
    );
    w.set("big.bool", Value::Array(Array::Bool(vec![true; N / 8])));
    let bytes = w.to_bytes().unwrap();
    assert!(bytes.len() < N * 5 / 2);
    let parsed = [
        parse(&bytes).unwrap(),
        parse_reader(io::Cursor::new(&bytes)).unwrap(),
        GgufFile::read(Unsized(&bytes)).unwrap(),
    ];
    for f in &parsed {
        assert_eq!(f.metadata(), &w.metadata);
        let Some(Value::Array(Array::U8(u8s))) = f.metadata().get("big.u8") else {
            panic!("big.u8")
        };
        assert_eq!((u8s.len(), u8s.capacity()), (N, N));
        let Some(Value::Array(Array::F32(f32s))) = f.metadata().get("big.f32") else {
            panic!("big.f32")
        };
        assert_eq!((f32s.len(), f32s.capacity()), (N / 4, N / 4));
        let Some(Value::Array(Array::Bool(bools))) = f.metadata().get("big.bool") else {
            panic!("big.bool")
        };
        assert_eq!((bools.len(), bools.capacity()), (N / 8, N / 8));
    }
}

#[test]
fn declared_lengths_past_the_input_fail_before_reading() {
    // Header (24 bytes), key "k" (9), value type (4), then the array's element type (4) and
    // length (8): a length the input cannot hold is refused where its elements would start.
    let array = |ty: u32, n: u64| {
        let mut raw = Raw::new(0, 1);
        raw.str("k").u32(9).u32(ty).u64(n);
        raw.data(1024)
    };
    let truncated_at = |r: Result<GgufFile>| match r {
        Err(GgufError::Truncated { offset, .. }) => offset,
        other => panic!("not truncated: {other:?}"),
    };
    for (ty, n) in [(0, 1 << 40), (0, 2000), (4, 500), (8, 200), (9, 100), (7, u64::MAX)] {
        let bytes = array(ty, n);
        assert_eq!(truncated_at(parse(&bytes)), 49, "type {ty}, {n} elements");
        assert_eq!(truncated_at(parse_reader(io::Cursor::new(&bytes))), 49);
        // Without a length to check against, the reader stops where the input does.
        assert!(truncated_at(GgufFile::read(Unsized(&bytes))) >= 49);
    }
    // Strings, and the counts of entries and tensors.
    let mut long_string = Raw::new(0, 1);
    long_string.str("k").u32(8).u64(1 << 40);
    assert_eq!(truncated_at(parse(&long_string.data(64))), 45);
    assert_eq!(truncated_at(parse(&Raw::new(1 << 20, 0).data(64))), 24);
    assert_eq!(truncated_at(parse(&Raw::new(0, 1 << 20).data(64))), 24);
}

#[test]
fn array_accessors() {
    let a = Array::from(vec![3u32, 4]);
    assert_eq!((a.element_type(), a.len(), a.is_empty()), (ValueType::U32, 2, false));
    assert_eq!(a.as_u32_slice(), Some(&[3, 4][..]));
    assert_eq!(a.as_i32_slice(), None);
    assert_eq!(a.to_u64_vec(), Some(vec![3, 4]));
    assert_eq!(a.to_f64_vec(), None);
    assert_eq!((a.get(1), a.get(2)), (Some(Value::U32(4)), None));
    assert_eq!(Array::from(vec![1i8, -1]).to_u64_vec(), None);
    assert_eq!(Array::from(vec![1i64, 2]).to_u64_vec(), Some(vec![1, 2]));
    assert_eq!(Array::empty(ValueType::F32).to_u64_vec(), None);
    assert_eq!(Array::from(vec![0.5f32]).to_f64_vec(), Some(vec![0.5]));
    let s = Array::from(vec!["x".to_owned()]);
    assert_eq!(s.as_str_slice(), Some(&["x".to_owned()][..]));
    assert_eq!(s.get(0).as_ref().and_then(Value::as_str), Some("x"));
    assert_eq!(Array::empty(ValueType::Array).as_array_slice(), Some(&[][..]));
    let mut m = Metadata::default();
    m.insert("k", Value::from(Array::from(vec![true])));
    assert_eq!(m.get_array("k").and_then(Array::as_bool_slice), Some(&[true][..]));
    assert_eq!(m.get_array("nope"), None);
    assert_eq!(Value::from("s"), Value::String("s".into()));
    assert_eq!(Value::from(2u16).ty(), ValueType::U16);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn check(bytes: &[u8]) {
        if let Ok(f) = GgufFile::from_bytes(bytes) {
            for info in f.tensors() {
                let _ = f.tensor_data(&info.name);
                if let Ok(t) = f.tensor(&info.name) {
                    let _ = t.to_f32();
                }
            }
        }
        let _ = GgufHeader::read(bytes);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_bytes_never_panic(tail in prop::collection::vec(any::<u8>(), 0..256)) {
            check(&tail);
            let mut bytes = b"GGUF\x03\0\0\0".to_vec();
            bytes.extend(&tail);
            check(&bytes);
        }

        /// A valid file with bytes overwritten (counts, lengths, types, extents, offsets),
        /// or cut short, never panics and never allocates past what the file holds.
        #[test]
        fn mutated_files_never_panic(
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            wide in prop::option::of((any::<prop::sample::Index>(), prop_oneof![Just(u64::MAX), Just(1u64 << 62), any::<u64>()])),
            cut in prop::option::of(any::<prop::sample::Index>()),
        ) {
            let mut bytes = sample_writer().to_bytes().unwrap();
            for (at, b) in edits {
                let i = at.index(bytes.len());
                bytes[i] = b;
            }
            if let Some((at, v)) = wide {
                let i = at.index(bytes.len() - 8);
                bytes[i..i + 8].copy_from_slice(&v.to_le_bytes());
            }
            if let Some(at) = cut {
                bytes.truncate(at.index(bytes.len()));
            }
            check(&bytes);
        }
    }
}

#[test]
fn the_writer_refuses_alignments_it_would_pad_gigabytes_to() {
    let mut w = GgufWriter::new();
    assert!(w.set_alignment(1 << 17).is_err());
    assert!(w.set_alignment(64).is_ok());
    // A file that declares a 2 GiB alignment reads fast; writing it back is refused.
    let mut declared = GgufWriter::new();
    declared.set(ALIGNMENT_KEY, Value::U32(1 << 31));
    let err = declared.write_to(std::io::sink()).unwrap_err();
    assert!(matches!(err, GgufError::BadAlignment(_)), "{err}");
}

#[test]
fn a_fifo_is_refused_not_waited_on() {
    let dir = std::env::temp_dir().join(format!("gguf-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model.gguf");
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c_path` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let err = GgufFile::open(&path).unwrap_err().to_string();
    assert!(err.contains("FIFO"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
