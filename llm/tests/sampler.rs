//! The sampler chain: greedy is argmax; what top-k, top-p and min-p keep; seeded draws follow
//! the distribution and repeat with the seed.

use ggml_dawn_llm::sampling::{Candidate, argmax};
use ggml_dawn_llm::{Sampler, SamplerParams};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

fn random_logits(rng: &mut Xoshiro256PlusPlus, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random::<f32>() * 20.0 - 10.0).collect()
}

fn softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f64> = logits.iter().map(|&l| f64::from(l - max).exp()).collect();
    let sum: f64 = e.iter().sum();
    e.iter().map(|v| v / sum).collect()
}

/// Only one filter on: everything else off.
fn only(params: SamplerParams) -> SamplerParams {
    params
}

fn off() -> SamplerParams {
    SamplerParams {
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        temp: 1.0,
        min_keep: 0,
        seed: 7,
    }
}

#[test]
fn greedy_is_argmax() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    for _ in 0..50 {
        let logits = random_logits(&mut rng, 1000);
        let mut greedy = Sampler::new(SamplerParams::greedy()).unwrap();
        let best = argmax(&logits).unwrap();
        assert_eq!(greedy.sample(&logits).unwrap(), best);
        assert!(logits.iter().all(|&l| l <= logits[best as usize]));
    }
    // The first of equal logits.
    assert_eq!(argmax(&[1.0, 3.0, 3.0]), Some(1));
    assert_eq!(argmax(&[]), None);
}

#[test]
fn top_k_keeps_the_k_largest() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    let logits = random_logits(&mut rng, 500);
    let s = Sampler::new(only(SamplerParams { top_k: 10, ..off() })).unwrap();
    let kept = s.candidates(&logits);
    assert_eq!(kept.len(), 10);
    let mut sorted = logits.clone();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let threshold = sorted[9];
    assert!(kept.iter().all(|c| logits[c.id as usize] >= threshold));
    let sum: f32 = kept.iter().map(|c| c.p).sum();
    assert!((sum - 1.0).abs() < 1e-5);
}

#[test]
fn top_p_keeps_the_shortest_prefix_reaching_p() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    for p in [0.1f32, 0.5, 0.9, 0.99] {
        let logits: Vec<f32> = random_logits(&mut rng, 200).iter().map(|l| l / 3.0).collect();
        let probs = softmax(&logits);
        let s = Sampler::new(only(SamplerParams { top_p: p, ..off() })).unwrap();
        let kept: Vec<Candidate> = s.candidates(&logits);
        let mass: Vec<f64> = kept.iter().map(|c| probs[c.id as usize]).collect();
        let total: f64 = mass.iter().sum();
        let without_last: f64 = total - mass[mass.len() - 1];
        assert!(total >= f64::from(p) - 1e-5, "p {p}: kept mass {total}");
        assert!(
            without_last < f64::from(p) + 1e-5,
            "p {p}: the prefix without its last token already had {without_last}"
        );
        // The kept tokens are the most likely ones.
        let least_kept = mass.iter().copied().fold(f64::INFINITY, f64::min);
        let dropped_max = (0..logits.len())
            .filter(|i| !kept.iter().any(|c| c.id as usize == *i))
            .map(|i| probs[i])
            .fold(0.0, f64::max);
        assert!(dropped_max <= least_kept);
    }
}

#[test]
fn min_p_keeps_tokens_near_the_most_likely() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let logits: Vec<f32> = random_logits(&mut rng, 300).iter().map(|l| l / 2.0).collect();
    let probs = softmax(&logits);
    let p_max = probs.iter().copied().fold(0.0, f64::max);
    let s = Sampler::new(only(SamplerParams { min_p: 0.1, ..off() })).unwrap();
    let kept = s.candidates(&logits);
    for (i, &p) in probs.iter().enumerate() {
        let is_kept = kept.iter().any(|c| c.id as usize == i);
        assert_eq!(is_kept, p >= 0.1 * p_max - 1e-9, "token {i}: p {p}, max {p_max}");
    }
}

#[test]
fn draws_follow_the_distribution_and_stay_in_its_support() {
    let logits = [2.0f32, 1.0, 0.0, -1.0, -30.0];
    let probs = softmax(&logits);
    let mut s = Sampler::new(off()).unwrap();
    let n = 40_000;
    let mut counts = [0usize; 5];
    for _ in 0..n {
        counts[s.sample(&logits).unwrap() as usize] += 1;
    }
    for i in 0..4 {
        let freq = counts[i] as f64 / n as f64;
        assert!((freq - probs[i]).abs() < 0.01, "token {i}: {freq} vs {}", probs[i]);
    }
    // With top-k 2 only the two most likely are ever drawn.
    let mut s = Sampler::new(SamplerParams { top_k: 2, ..off() }).unwrap();
    for _ in 0..2000 {
        assert!(s.sample(&logits).unwrap() < 2);
    }
}

#[test]
fn the_seed_makes_draws_repeat() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let logits = random_logits(&mut rng, 100);
    let draw = |seed| {
        let mut s = Sampler::new(SamplerParams {
            seed,
            temp: 1.5,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..SamplerParams::default()
        })
        .unwrap();
        (0..64).map(|_| s.sample(&logits).unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(draw(11), draw(11));
    assert_ne!(draw(11), draw(12));
}

#[test]
fn bad_settings_are_refused() {
    for bad in [
        SamplerParams {
            top_p: 1.5,
            ..SamplerParams::default()
        },
        SamplerParams {
            min_p: -0.1,
            ..SamplerParams::default()
        },
        SamplerParams {
            temp: f32::NAN,
            ..SamplerParams::default()
        },
    ] {
        assert!(Sampler::new(bad).is_err(), "{bad:?}");
    }
    let mut s = Sampler::new(SamplerParams::default()).unwrap();
    assert!(s.sample(&[]).is_err());
}
