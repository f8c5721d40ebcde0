//! The library as a program uses it: contexts from defaults, an adapter or its own device;
//! tensors made, viewed and read back; weights from GGUF files.

use std::time::Duration;

use dawn::{DeviceDescriptor, Instance, InstanceDescriptor, RequestAdapterOptions};
use ggml_dawn::error::BackendError;
use ggml_dawn::gguf::{GgufFile, GgufHeader, GgufWriter};
use ggml_dawn::reference::{self, metric};
use ggml_dawn::{ContextOptions, GgmlType, GpuContext, HostTensor};

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 13 + seed * 7) % 29) as f32 - 14.0) / 16.0)
        .collect()
}

#[test]
fn tensors_are_made_viewed_and_read_back() {
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let v = values(8 * 6 * 2, 1);
    let t = ctx.from_f32(GgmlType::F32, [8, 6, 2, 1], &v).unwrap();
    assert_eq!(ctx.read_f32(&t).unwrap(), v);
    assert!(
        ctx.read_f32(&ctx.zeros(GgmlType::F16, [4, 4, 1, 1]).unwrap())
            .unwrap()
            .iter()
            .all(|&x| x == 0.0)
    );
    assert!(
        ctx.read_f32(&ctx.empty(GgmlType::F32, [4, 4, 1, 1]).unwrap())
            .unwrap()
            .iter()
            .all(|&x| x == 0.0)
    );
    // Views read back through their own layout, over the same bytes.
    let rows = t.narrow(1, 2, 3).unwrap();
    assert_eq!(ctx.read_f32(&rows).unwrap()[..8], v[16..24]);
    let p = t.permute([1, 0, 2, 3]).unwrap();
    assert_eq!(p.layout().ne, [6, 8, 2, 1]);
    assert_eq!(ctx.read_f32(&p).unwrap()[1], v[8]);
    let r = t.reshape([16, 3, 2, 1]).unwrap();
    assert_eq!(ctx.read_f32(&r).unwrap(), v);
    assert!(t.reshape([5, 5, 1, 1]).is_err());
    assert!(p.reshape([96, 1, 1, 1]).is_err(), "a permuted view is not contiguous");
    assert!(t.narrow(1, 4, 3).is_err());
    // Quantized: whole blocks along dimension 0.
    let q = ctx.from_f32(GgmlType::Q4_0, [64, 2, 1, 1], &values(128, 2)).unwrap();
    assert!(q.narrow(0, 32, 32).is_ok());
    assert!(q.narrow(0, 16, 32).is_err());
}

#[test]
fn ops_batch_until_synchronize_and_match_the_reference() {
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let a_host = HostTensor::from_f32(GgmlType::Q8_0, [128, 32, 1, 1], &values(128 * 32, 3)).unwrap();
    let b_host = HostTensor::from_f32(GgmlType::F32, [128, 3, 1, 1], &values(128 * 3, 4)).unwrap();
    let (a, b) = (ctx.upload(&a_host).unwrap(), ctx.upload(&b_host).unwrap());
    let outputs: Vec<_> = (0..5).map(|_| ctx.mul_mat(&a, &b).unwrap()).collect();
    ctx.synchronize_timeout(Duration::from_secs(120)).unwrap();
    let expected = reference::mul_mat(&a_host, &b_host).unwrap();
    for y in &outputs {
        let got = ctx.read_f32(y).unwrap();
        assert!(metric::nmse(&expected, &got) < metric::MUL_MAT_MAX_NMSE);
    }
    // Mismatched operands are refused before anything is recorded.
    let err = ctx.mul_mat(&a, &a).unwrap_err();
    assert!(
        matches!(err, BackendError::Unsupported(_) | BackendError::InvalidOperands(_)),
        "{err}"
    );
}

#[test]
fn contexts_from_an_adapter_or_a_device_of_ones_own() {
    // SAFETY: the adapters go to `GpuContext::with_adapter` and to a device of the test's own
    // that only `GpuContext::from_device` uses: subgroup matrices are used only by the
    // backend's kernels, which keep the promise (`backend_instance` in `context.rs`).
    let instance = Instance::new(&unsafe { InstanceDescriptor::compute() }).unwrap();
    let adapter = instance
        .request_adapter(&RequestAdapterOptions::compute())
        .wait()
        .unwrap();
    let chosen = GpuContext::with_adapter(&adapter, ContextOptions::default()).unwrap();
    // A device made by the program, with Dawn's validation on (an adapter makes one device).
    let adapter = instance
        .request_adapter(&RequestAdapterOptions::compute())
        .wait()
        .unwrap();
    let device = adapter
        .request_device(&DeviceDescriptor::default().with_adapter_limits())
        .wait()
        .unwrap();
    let own = GpuContext::from_device(device, ContextOptions::default()).unwrap();
    for ctx in [&chosen, &own] {
        let a_host = HostTensor::from_f32(GgmlType::F16, [64, 16, 1, 1], &values(64 * 16, 5)).unwrap();
        let b_host = HostTensor::from_f32(GgmlType::F32, [64, 20, 1, 1], &values(64 * 20, 6)).unwrap();
        let y = ctx
            .mul_mat(&ctx.upload(&a_host).unwrap(), &ctx.upload(&b_host).unwrap())
            .unwrap();
        let expected = reference::mul_mat(&a_host, &b_host).unwrap();
        assert!(metric::nmse(&expected, &ctx.read_f32(&y).unwrap()) < metric::MUL_MAT_MAX_NMSE);
    }
    // The device's own features decide the paths: this one has no subgroup matrices.
    assert!(own.capabilities().subgroup_matrix.is_none());
}

#[test]
fn weights_load_from_gguf_files() {
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    let mut writer = GgufWriter::new();
    let tensors = [
        (
            "w.q4_k",
            HostTensor::from_f32(GgmlType::Q4_K, [256, 3, 1, 1], &values(768, 7)).unwrap(),
        ),
        (
            "w.f16",
            HostTensor::from_f32(GgmlType::F16, [5, 7, 1, 1], &values(35, 8)).unwrap(),
        ),
        (
            "w.f32",
            HostTensor::from_f32(GgmlType::F32, [3, 1, 1, 1], &values(3, 9)).unwrap(),
        ),
    ];
    for (name, t) in &tensors {
        writer.add_host_tensor(name, t).unwrap();
    }
    let bytes = writer.to_bytes().unwrap();
    let path = std::env::temp_dir().join(format!("weights-test-{}.gguf", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let from_file = ctx.load_gguf(&path);
    let from_memory = ctx.upload_gguf(&GgufFile::from_bytes(&bytes).unwrap()).unwrap();
    // A file cut short is an error naming it.
    std::fs::write(&path, &bytes[..bytes.len() - 100]).unwrap();
    let cut = ctx.load_gguf(&path);
    std::fs::remove_file(&path).unwrap();
    let from_file = from_file.unwrap();
    let err = cut.unwrap_err().to_string();
    assert!(err.contains("weights-test") && err.contains("cut short"), "{err}");
    assert!(ctx.load_gguf("/nonexistent/file.gguf").is_err());
    // A header whose tensors lie past the file's end is refused from the header alone (nothing
    // is allocated for them), naming the tensor.
    let header = GgufHeader::read(&bytes[..]).unwrap();
    std::fs::write(&path, &bytes[..header.data_offset]).unwrap();
    let headless = ctx.load_gguf(&path);
    std::fs::remove_file(&path).unwrap();
    let err = headless.unwrap_err().to_string();
    assert!(err.contains("`w.q4_k`") && err.contains("cut short"), "{err}");
    for weights in [&from_file, &from_memory] {
        assert_eq!(weights.len(), 3);
        for (name, t) in &tensors {
            let d = weights.tensor(name).unwrap();
            assert_eq!(*d.layout(), t.layout);
            assert_eq!(ctx.read(d).unwrap().data, t.data, "{name}");
        }
        assert!(weights.tensor("nope").is_err());
    }
}

/// `ContextOptions::submit`: the first submit holds `first` dispatches, each later one twice the
/// one before up to `max`; a read submits what is left and starts over. A policy outside
/// `1 <= first <= max <= 512` is refused when the context is made.
#[test]
fn the_submit_policy_sizes_the_submits_and_reads_see_every_recorded_op() {
    use ggml_dawn::exec::SubmitPolicy;
    let ctx = GpuContext::new(ContextOptions {
        submit: SubmitPolicy { first: 2, max: 4 },
        ..Default::default()
    })
    .unwrap();
    let x = ctx.from_f32(GgmlType::F32, [64, 1, 1, 1], &values(64, 3)).unwrap();
    let before = ctx.stream_counts();
    // 13 ops of one dispatch each: submits of 2, 4, 4 as they are recorded, 3 left for the read.
    let mut y = x.clone();
    for _ in 0..13 {
        y = ctx.scale(&y, 2.0, 0.0).unwrap();
    }
    let recorded = ctx.stream_counts();
    assert_eq!(recorded.dispatches - before.dispatches, 13);
    assert_eq!(recorded.submits - before.submits, 3);
    let want: Vec<f32> = values(64, 3).iter().map(|v| v * 8192.0).collect();
    assert_eq!(ctx.read_f32(&y).unwrap(), want);
    assert_eq!(ctx.stream_counts().submits - before.submits, 4);
    for bad in [
        SubmitPolicy { first: 0, max: 4 },
        SubmitPolicy { first: 8, max: 4 },
        SubmitPolicy { first: 8, max: 513 },
    ] {
        let made = GpuContext::new(ContextOptions {
            submit: bad,
            ..Default::default()
        });
        assert!(made.is_err(), "{bad:?} was accepted");
    }
}

/// Profiling times every dispatch on the GPU by kernel (where the adapter has timestamp
/// queries, as lavapipe does): as many timed dispatches as were recorded, under the kernels'
/// shader files, and a span at least as long as the kernels' time.
#[test]
fn profiling_times_each_dispatch_by_kernel() {
    use ggml_dawn::profile::ProfileMode;
    let ctx = GpuContext::new(ContextOptions::default()).unwrap();
    if !ctx.capabilities().timestamp_query {
        eprintln!("skipped: no timestamp queries");
        return;
    }
    let a = ctx
        .from_f32(GgmlType::F32, [64, 32, 1, 1], &values(64 * 32, 1))
        .unwrap();
    let b = ctx
        .from_f32(GgmlType::F32, [64, 16, 1, 1], &values(64 * 16, 2))
        .unwrap();
    ctx.start_profile(ProfileMode::Kernels).unwrap();
    let before = ctx.stream_counts().dispatches;
    let c = ctx.mul_mat(&a, &b).unwrap();
    let d = ctx.scale(&c, 0.5, 1.0).unwrap();
    let got = ctx.read_f32(&d).unwrap();
    let recorded = ctx.stream_counts().dispatches - before;
    let profile = ctx.finish_profile().unwrap();
    assert_eq!(profile.dispatches(), recorded, "{profile:?}");
    assert!(profile.kernels.keys().any(|k| k.starts_with("mul_mat")), "{profile:?}");
    assert!(profile.kernels.contains_key("scale.wgsl"), "{profile:?}");
    assert!(
        profile.submits >= 1 && profile.span >= profile.busy() / 2,
        "{profile:?}"
    );
    // The results are the ops' own, profiled or not.
    let want = ctx
        .read_f32(&ctx.scale(&ctx.mul_mat(&a, &b).unwrap(), 0.5, 1.0).unwrap())
        .unwrap();
    assert_eq!(got, want);
    // After finishing, nothing is timed.
    assert_eq!(ctx.finish_profile().unwrap().dispatches(), 0);
    // By submit: each submit's one pass, no kernels; the same results.
    ctx.start_profile(ProfileMode::Submits).unwrap();
    let again = ctx
        .read_f32(&ctx.scale(&ctx.mul_mat(&a, &b).unwrap(), 0.5, 1.0).unwrap())
        .unwrap();
    let spans = ctx.finish_profile().unwrap();
    assert_eq!(again, want);
    assert!(spans.kernels.is_empty() && spans.submits >= 1, "{spans:?}");
    assert!(spans.span > std::time::Duration::ZERO, "{spans:?}");
}
