//! Its own test binary (so its own process): writing a storage texture changes how llvmpipe's timestamps behave
//! for the rest of the process, which would disturb the timing tests beside it.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use bespoke_gpu::testing::test_gpu;
use bespoke_gpu::{Grid, Kernel};

/// The pass the sizing loop aims at: twice the 10 ms past which the timing layer checks timestamps against the wall
/// clock, so a pass sized on one lucky-slow run still passes 10 ms when timed (one sized at 10 ms ran 6 ms when
/// timed on lavapipe, and its broken timestamps went unchecked: a flaky failure, 2026-11-28).
const PASS_SECONDS: f64 = 0.02;

#[test]
fn timings_agree_with_the_wall_clock_after_a_storage_texture_write() {
    let Some(gpu) = test_gpu() else { return };
    // llvmpipe's timestamps go wrong for the rest of the process once a kernel writes a storage texture; the
    // timing layer must notice and fall back to the wall clock.
    let t = gpu
        .alloc_storage_texture(bespoke_gpu::wgpu::TextureFormat::R32Float, 64, 1, 1)
        .unwrap();
    let k = Kernel::new(
        "storage-texture-write",
        "@group(0) @binding(0) var o: texture_storage_2d<r32float, write>;
@compute @workgroup_size(64) fn main(@builtin(local_invocation_index) i: u32) {
    textureStore(o, vec2<u32>(i, 0u), vec4<f32>(1.0));
}",
    );
    gpu.run(&[&gpu.prepare(&k, &[t.arg()], Grid::d1(1)).unwrap()])
        .unwrap();
    // 64 MiB, and 64 KiB (as short on lavapipe as 64 MiB on a GPU: the sizing loop runs here too).
    for start in [4 << 20, 4 << 10] {
        // A pass of at least 10 ms wherever it runs (sized at PASS_SECONDS): one 64 MiB copy takes ~70 ms on
        // lavapipe and ~30 µs on an H200, below the fixed cost of a submission and its wait that the wall clock
        // includes (the test failed there). The copy grows first (to 256 MiB), then goes back to back in one
        // submission, as many times as a 10 ms pass needs: a pass of thousands of small copies is bound by the
        // host's recording of them, not by the device (on the H200 on 2026-11-28, 2048 copies of 64 KiB: 5.9 ms on
        // the device, 12.4 by the wall). Each size is run once before it is measured: a first run on fresh buffers
        // (lazy zero-initialisation, on GL a first bind) can take 10 ms alone.
        let mut n: usize = start;
        let mut copies = 1;
        let (launches, copies) = loop {
            let launches = bespoke_gpu::testing::copy_of_ones(gpu, n);
            gpu.run(&launches.iter().collect::<Vec<_>>()).unwrap();
            let pass_seconds = |copies: usize| {
                let refs: Vec<_> = launches
                    .iter()
                    .cycle()
                    .take(copies * launches.len())
                    .collect();
                let t = std::time::Instant::now();
                gpu.run(&refs).unwrap();
                t.elapsed().as_secs_f64()
            };
            if n < 16 << 20 {
                if pass_seconds(1) >= PASS_SECONDS {
                    break (launches, copies);
                }
                n *= 2;
                continue;
            }
            while pass_seconds(copies) < PASS_SECONDS && copies < 1 << 10 {
                copies *= 2;
            }
            break (launches, copies);
        };
        let refs: Vec<_> = launches
            .iter()
            .cycle()
            .take(copies * launches.len())
            .collect();
        let timed = gpu.time(&refs, 1, 3).unwrap();
        let wall = std::time::Instant::now();
        gpu.run_n(&refs, 3).unwrap();
        let wall = wall.elapsed().as_secs_f64() / 3.0;
        assert!(
            timed.median() >= 0.5 * wall,
            "{:?} says {:.3} ms per pass of {copies} copies of {n} vec4s, the wall clock {:.3} ms",
            timed.source,
            timed.median() * 1e3,
            wall * 1e3
        );
    }
}
