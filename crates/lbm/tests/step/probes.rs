//! Probes (points and the force on wall links) against the CPU reference, in every layout.

use bespoke_gpu::Gpu;
use bespoke_gpu::testing::{fresh_seed, test_gpu};
use bespoke_lbm::{Collision, Config, Flags, Lattice, LbmError, Storage, Streaming, reference};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::{curved_flags, describe, layout_runs, obstacle_flags, random_state};

/// A probe's points and link force against the reference, at parity 0 (from the lattice's own state), after one
/// step (from the reference step of that state) and after a second.
fn check_probe(gpu: &Gpu, cfg: Config, flags: Flags, seed: u64) {
    if !layout_runs(gpu, &cfg) {
        return;
    }
    let label = describe(&cfg);
    let (nx, ny) = (cfg.nx, cfg.ny);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut lat =
        Lattice::new(gpu, cfg.clone(), flags.clone()).unwrap_or_else(|e| panic!("{label}: {e}"));
    lat.set_populations(&random_state(&mut rng, nx, ny))
        .expect("set");
    // Both halves of the f16 fold, an open cell, a solid cell (it reports the wall's ρ = 1 and velocity).
    let points = [(3, 2), (7, ny - 2), (0, ny / 2), (nx - 1, ny - 1), (5, 4)];
    // Every solid link, and only the bottom wall's: over a whole object the weights' share of the momentum
    // (2 w_d c_d per link) cancels, over a part it does not.
    let all = flags.links_into(|_, _| true);
    let bottom: Vec<_> = all
        .iter()
        .copied()
        .filter(|&(x, y, d)| flags.neighbour(x, y, d).1 == 0)
        .collect();
    assert!(
        all.len() > 20 && bottom.len() > 10,
        "{label}: {} links",
        all.len()
    );
    let probes = [&all, &bottom].map(|links| (lat.probe(&points, links).expect("probe"), links));
    assert_eq!(probes[0].0.points(), points.len());
    // Force tolerance per link: f32 arithmetic on the same state, or one step's f16 rounding.
    let per_link = match cfg.storage {
        Storage::F32 => 1e-6,
        Storage::F16 => 2e-4,
    };
    let mut state = lat.populations().expect("read");
    for k in 0..3 {
        let (exact, tol) = if lat.populations_readable() {
            state = lat.populations().expect("read");
            (true, 1e-6)
        } else {
            (false, per_link)
        };
        for (probe, links) in &probes {
            let got = lat.read_probe(probe).expect("read probe");
            let want = reference::link_force(&flags, &state, links);
            for (c, (g, w)) in got.force.iter().zip(want).enumerate() {
                assert!(
                    (g - w).abs() <= tol * links.len() as f64,
                    "{label} step {k} (exact state {exact}): force[{c}] {g} vs {w} over {} links",
                    links.len()
                );
            }
        }
        let got = lat.read_probe(&probes[0].0).expect("read probe");
        let m = reference::macroscopic(&cfg, &flags, &state);
        for (j, &(x, y)) in points.iter().enumerate() {
            let (rho, u) = got.points[j];
            let cell = y * nx + x;
            let want = [m[0][cell], m[1][cell], m[2][cell]];
            let d = [rho, u[0], u[1]]
                .iter()
                .zip(want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(
                d <= 10.0 * tol.max(2e-6),
                "{label} step {k}: point ({x}, {y}) {:?} vs {want:?}",
                got.points[j]
            );
        }
        lat.step(1).expect("step");
        state = reference::step(&cfg, &flags, &state);
    }
}

/// 13-wide TRT lattices in every layout (f32 and paired f16 at ny 10, one f16 per cell at ny 9) × streaming.
fn every_layout() -> Vec<Config> {
    let mut out = Vec::new();
    for (storage, ny) in [(Storage::F32, 10), (Storage::F16, 10), (Storage::F16, 9)] {
        for streaming in [Streaming::Ab, Streaming::InPlace] {
            out.push(Config {
                storage,
                streaming,
                ..Config::new(13, ny, Collision::trt(0.8))
            });
        }
    }
    out
}

#[test]
fn probes_match_the_reference_force_and_fields() {
    let Some(gpu) = test_gpu() else { return };
    let seed = fresh_seed();
    let mut rng = StdRng::seed_from_u64(seed ^ 0x9e0b);
    for cfg in every_layout() {
        let ny = cfg.ny;
        let (storage, streaming) = (cfg.storage, cfg.streaming);
        check_probe(gpu, cfg, obstacle_flags(13, ny), seed);
        // Interpolated bounce-back on a circle and the bottom wall.
        let flags = curved_flags(&mut rng, 21, ny + 6, 0.004);
        let cfg = Config {
            storage,
            streaming,
            ..Config::new(21, ny + 6, Collision::Bgk { omega: 1.7 })
        };
        check_probe(gpu, cfg, flags, seed);
    }

    // A lattice without flags (its kernels read none): points only, every layout, both in-place parities.
    for cfg in every_layout() {
        if !layout_runs(gpu, &cfg) {
            continue;
        }
        let ny = cfg.ny;
        let flags = Flags::fluid(13, ny);
        let mut lat = Lattice::new(gpu, cfg.clone(), flags.clone()).expect("lattice");
        lat.set_populations(&random_state(&mut rng, 13, ny))
            .expect("set");
        let points = [(0, 0), (12, ny - 1), (6, ny / 2), (3, 1)];
        let probe = lat.probe(&points, &[]).expect("probe");
        for _ in 0..2 {
            let m = lat.macroscopic().expect("fields");
            let got = lat.read_probe(&probe).expect("read probe");
            assert_eq!(got.force, [0.0, 0.0]);
            for (j, &(x, y)) in points.iter().enumerate() {
                let (rho, u) = m.at(x, y);
                let (prho, pu) = got.points[j];
                let d = (rho - prho)
                    .abs()
                    .max((u[0] - pu[0]).abs())
                    .max((u[1] - pu[1]).abs());
                assert!(
                    d < 1e-6,
                    "{} ({x}, {y}): probe {:?} vs fields {:?}",
                    describe(&cfg),
                    got.points[j],
                    (rho, u)
                );
            }
            lat.step(1).expect("step");
        }
    }

    // Links must run from a non-solid cell into a solid one; points lie inside; a probe serves its own lattice.
    let (nx, ny) = (13, 10);
    let flags = obstacle_flags(nx, ny);
    let lat = Lattice::new(gpu, Config::new(nx, ny, Collision::trt(0.8)), flags.clone())
        .expect("lattice");
    for (points, links, needle) in [
        (&[][..], &[(3, 3, 1)][..], "does not end in a solid"),
        (&[][..], &[(5, 4, 1)][..], "starts in a solid"),
        (&[][..], &[(3, 3, 9)][..], "1..=8"),
        (&[(13, 0)][..], &[][..], "outside"),
        (&[][..], &[][..], "at least one"),
    ] {
        let e = lat.probe(points, links).expect_err(needle).to_string();
        assert!(e.contains(needle), "{e}");
    }
    let other =
        Lattice::new(gpu, Config::new(nx, ny, Collision::trt(0.8)), flags).expect("lattice");
    let p = other.probe(&[(1, 1)], &[]).expect("probe");
    assert!(matches!(lat.read_probe(&p), Err(LbmError::State(_))));
}
