//! Timing: device times, the warm-up before a timing, the copy probe's walk.

use super::*;

#[test]
fn timing_gives_positive_times() {
    let Some(gpu) = test_gpu() else { return };
    let n = 1 << 18;
    let src = gpu.alloc_filled(n, [1.0f32; 4]).unwrap();
    let dst = gpu.alloc(n).unwrap();
    let launches = gpu
        .copy_launches(&src, &dst, CopyVariant::CANDIDATES[0])
        .unwrap();
    let t = gpu
        .time(&launches.iter().collect::<Vec<_>>(), 1, 5)
        .unwrap();
    assert_eq!(t.samples.len(), 5);
    assert!(
        t.samples.iter().all(|s| *s > 0.0 && s.is_finite()),
        "{:?}",
        t.samples
    );
    if gpu.has_timestamps() {
        assert_eq!(t.source, TimingSource::GpuTimestamps);
    }
    let p = gpu
        .copy_bandwidth(&ProbeOptions {
            bytes: 8 << 20,
            warmup: 1,
            reps: 3,
        })
        .unwrap();
    assert!(p.gbps > 0.0 && p.gbps.is_finite(), "{p:?}");
    assert_eq!(p.bytes, 8 << 20);
}

/// A device without TIMESTAMP_QUERY (or without any optional feature: `GpuOptions::without_features`) times by
/// the wall clock and says so; what it lacks keys its tuned choices apart from the adapter's own, and an option
/// that takes away nothing the adapter has keys nothing.
#[test]
fn a_device_without_timestamps_times_by_the_clock() {
    use bespoke_gpu::wgpu::Features;
    let Some(shared) = test_gpu() else { return };
    let off = Features::SHADER_F64 | Features::SHADER_F16 | Features::TIMESTAMP_QUERY;
    let bare = emulating(
        shared,
        GpuOptions {
            without_features: off,
            ..Default::default()
        },
    );
    assert!(!bare.has_timestamps() && !bare.has_f64() && !bare.has_f16());
    assert!(!bare.features().intersects(off));
    assert_eq!(bare.features(), shared.features() - off);
    let key = |g: &Gpu| g.adapter_key();
    if shared.features().intersects(off) {
        assert_ne!(key(&bare), key(shared));
    }
    let plain = emulating(shared, GpuOptions::default());
    let none_taken = emulating(
        shared,
        GpuOptions {
            without_features: Features::all() - shared.features(),
            ..Default::default()
        },
    );
    assert_eq!(key(&none_taken), key(&plain));
    let n = 1 << 16;
    let src = bare.alloc_filled(n, [1.0f32; 4]).unwrap();
    let dst = bare.alloc(n).unwrap();
    let launches = bare
        .copy_launches(&src, &dst, CopyVariant::CANDIDATES[0])
        .unwrap();
    let t = bare
        .time(&launches.iter().collect::<Vec<_>>(), 1, 3)
        .unwrap();
    assert_eq!(t.source, TimingSource::WallClock);
    assert!(t.samples.iter().all(|s| *s > 0.0 && s.is_finite()));
    assert_eq!(bare.read(&dst).unwrap()[n - 1], [1.0f32; 4]);
}

/// Timings in turn: one per group and round, every group run (its output written), each positive.
#[test]
fn timings_in_turn_give_one_per_group_and_round() {
    let Some(gpu) = test_gpu() else { return };
    let (big, small) = (1 << 18, 1 << 10);
    let src = gpu.alloc_filled(big, [2.5f32; 4]).unwrap();
    let (d1, d2) = (gpu.alloc(big).unwrap(), gpu.alloc(small).unwrap());
    let part = gpu.alloc_filled(small, [-1.0f32; 4]).unwrap();
    let variant = CopyVariant::CANDIDATES[0];
    let l1 = gpu.copy_launches(&src, &d1, variant).unwrap();
    let l2 = gpu.copy_launches(&part, &d2, variant).unwrap();
    let (g1, g2): (Vec<_>, Vec<_>) = (l1.iter().collect(), l2.iter().collect());
    let t = gpu.time_in_turn(&[&g1, &g2], 1, 3).unwrap();
    assert_eq!(t.len(), 3, "{t:?}");
    assert!(
        t.iter()
            .all(|r| r.len() == 2 && r.iter().all(|s| *s > 0.0 && s.is_finite())),
        "{t:?}"
    );
    assert!(gpu.read(&d1).unwrap().iter().all(|v| *v == [2.5; 4]));
    assert!(gpu.read(&d2).unwrap().iter().all(|v| *v == [-1.0; 4]));
}

/// A GPU is kept busy with the heater for `WARM_SECONDS` before its first timing, and a later timing past
/// `STILL_WARM` runs the heater again (one short batch that finds the clocks up, or a whole warm-up where they
/// fell); a CPU adapter never is warmed. The GPU's class is emulated on lavapipe.
#[test]
fn a_gpu_is_warmed_before_a_timing_unless_one_just_ended() {
    use bespoke_gpu::{AdapterClass, STILL_WARM, WARM_SECONDS};
    let Some(shared) = test_gpu() else { return };
    let n = 1 << 12;
    let time_a_copy = |gpu: &Gpu| {
        let launches = bespoke_gpu::testing::copy_of_ones(gpu, n);
        let refs: Vec<_> = launches.iter().collect();
        gpu.time(&refs, 0, 3).unwrap()
    };
    let gpu = bespoke_gpu::testing::emulating_with_warm_up(
        shared,
        GpuOptions {
            adapter_class: Some(AdapterClass::Gpu),
            ..GpuOptions::default()
        },
    );
    let first = time_a_copy(&gpu);
    assert!(
        first.warmed_seconds >= WARM_SECONDS,
        "a first timing warmed for {} s",
        first.warmed_seconds
    );
    let ended = std::time::Instant::now();
    let next = time_a_copy(&gpu);
    if ended.elapsed() < STILL_WARM {
        assert_eq!(
            next.warmed_seconds, 0.0,
            "warmed again right after a timing"
        );
    }
    std::thread::sleep(STILL_WARM + std::time::Duration::from_millis(20));
    let later = time_a_copy(&gpu);
    assert!(
        later.warmed_seconds > 0.0,
        "after an idle spell the heater did not run"
    );
    if shared.is_cpu() {
        assert_eq!(
            time_a_copy(shared).warmed_seconds,
            0.0,
            "a CPU adapter was warmed"
        );
    }
    // A GPU opened to skip the warm-up (the shared test device is) times at once, and keys its choices apart.
    let unwarmed = bespoke_gpu::testing::emulating(
        shared,
        GpuOptions {
            adapter_class: Some(AdapterClass::Gpu),
            skip_warm_up: true,
            ..GpuOptions::default()
        },
    );
    std::thread::sleep(STILL_WARM + std::time::Duration::from_millis(20));
    assert_eq!(
        time_a_copy(&unwarmed).warmed_seconds,
        0.0,
        "warmed though asked not to"
    );
    assert!(!unwarmed.warms_up() && !shared.warms_up());
    assert!(unwarmed.adapter_key().contains("-nowarm") && shared.adapter_key().contains("-nowarm"));
    assert_ne!(unwarmed.adapter_key(), gpu.adapter_key());
    // A device emulating a condition skips it as the shared test device does, unless opened to warm.
    let inherited = bespoke_gpu::testing::emulating(
        shared,
        GpuOptions {
            adapter_class: Some(AdapterClass::Gpu),
            ..GpuOptions::default()
        },
    );
    assert!(shared.skips_warm_up() && inherited.skips_warm_up() && !inherited.warms_up());
    assert!(gpu.warms_up(), "emulating_with_warm_up keeps the warm-up");
}

/// The probe chooses its walk at its full default size on a GPU (a 64 MiB trial picked the slower walk on an
/// H200 twice) and at 64 MiB on a CPU adapter, where the full size costs seconds.
#[test]
fn the_copy_walk_is_chosen_at_full_size_on_a_gpu() {
    use bespoke_gpu::{AdapterClass, DEFAULT_PROBE_BYTES};
    let Some(shared) = test_gpu() else { return };
    for (class, want) in [
        (AdapterClass::Gpu, DEFAULT_PROBE_BYTES),
        (AdapterClass::Cpu, 64 << 20),
    ] {
        let gpu = bespoke_gpu::testing::emulating(
            shared,
            GpuOptions {
                adapter_class: Some(class),
                ..GpuOptions::default()
            },
        );
        assert_eq!(gpu.copy_walk_trial_bytes(), want, "{class:?}");
    }
}
