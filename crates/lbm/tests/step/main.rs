//! GPU steps against the f64 CPU reference on random states, for every storage × streaming × collision, with and
//! without flags (walls, a moving wall, an obstacle, an inlet and an outlet) and a body force; probes (points and
//! the force on wall links) against the same reference.

mod init;
mod probes;

use bespoke_gpu::Gpu;
use bespoke_gpu::testing::{fresh_seed, skipped, test_gpu};
use bespoke_lbm::{
    Cell, Collision, Config, Flags, Lattice, LbmError, Storage, Streaming, check_storage, d2q9,
    reference,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A random but physical state: equilibria at random ρ ≈ 1 and |u| < 0.1, each population perturbed by ±5 %.
fn random_state(rng: &mut StdRng, nx: usize, ny: usize) -> Vec<f64> {
    let n = nx * ny;
    let mut s = vec![0.0; 9 * n];
    for c in 0..n {
        let rho = 1.0 + rng.random_range(-0.05..0.05);
        let u = [rng.random_range(-0.07..0.07), rng.random_range(-0.07..0.07)];
        let e = d2q9::equilibrium(rho, u);
        for i in 0..9 {
            s[i * n + c] = e[i] * (1.0 + rng.random_range(-0.05..0.05));
        }
    }
    s
}

fn obstacle_flags(nx: usize, ny: usize) -> Flags {
    let mut f = Flags::fluid(nx, ny);
    for x in 0..nx {
        f.set(x, 0, Cell::Wall);
        f.set(x, ny - 1, Cell::MovingWall([0.05, 0.0]));
    }
    for y in 1..ny - 1 {
        f.set(0, y, Cell::Inlet([0.04, 0.01 * (y as f64 / ny as f64)]));
        f.set(nx - 1, y, Cell::Outlet(1.01));
    }
    for (x, y) in [(5, 4), (6, 4), (5, 5), (9, 7)] {
        f.set(x, y, Cell::Wall);
    }
    f
}

fn max_diff(flags: &Flags, a: &[f64], b: &[f64], per_cell: usize) -> (f64, usize) {
    let n = flags.nx() * flags.ny();
    let mut worst = (0.0, 0);
    for k in 0..per_cell * n {
        if flags.cell(k % n).is_solid() {
            continue;
        }
        let d = (a[k] - b[k]).abs();
        if d.is_nan() || d > worst.0 {
            worst = (if d.is_nan() { f64::INFINITY } else { d }, k);
        }
    }
    worst
}

/// Size, layout and streaming of a configuration, for failure messages.
fn describe(cfg: &Config) -> String {
    format!(
        "{}x{} {:?} {}",
        cfg.nx,
        cfg.ny,
        cfg.layout(),
        cfg.streaming.name()
    )
}

/// Whether `cfg`'s storage layout runs on `gpu` (`check_storage`: one f16 per cell, an odd ny, needs
/// SHADER_F16); where not, the case is skipped with the library's reason.
fn layout_runs(gpu: &Gpu, cfg: &Config) -> bool {
    match check_storage(gpu, cfg) {
        Ok(()) => true,
        Err(e) => {
            skipped(&format!("{}: {e}", describe(cfg)));
            false
        }
    }
}

/// Two steps of `cfg` on `flags` from a random state against the reference; false (skipped by name) where the
/// adapter cannot store `cfg`'s layout.
fn check_against_reference(gpu: &Gpu, cfg: Config, flags: Flags, seed: u64) -> bool {
    if !layout_runs(gpu, &cfg) {
        return false;
    }
    let label = format!(
        "{} {} C_s={} force={:?} flags={}",
        describe(&cfg),
        cfg.collision.name(),
        cfg.smagorinsky,
        cfg.force,
        !flags.all_fluid()
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let s0 = random_state(&mut rng, cfg.nx, cfg.ny);
    let mut lat =
        Lattice::new(gpu, cfg.clone(), flags.clone()).unwrap_or_else(|e| panic!("{label}: {e}"));
    lat.set_populations(&s0).expect("set");
    // Start the reference from the stored (possibly rounded) state.
    let s0 = lat.populations().expect("read back");
    let (pop_tol, rho_tol) = match cfg.storage {
        Storage::F32 => (2e-6, 2e-6),
        Storage::F16 => (1.5e-4, 1e-3),
    };
    let s1 = reference::step(&cfg, &flags, &s0);
    let s2 = reference::step(&cfg, &flags, &s1);

    lat.poison_spare().expect("poison");
    lat.step(1).expect("step 1");
    let m = lat.macroscopic().expect("macroscopic after 1 step");
    let want = reference::macroscopic(&cfg, &flags, &s1);
    for (k, (got, name)) in [(&m.rho, "rho"), (&m.ux, "ux"), (&m.uy, "uy")]
        .into_iter()
        .enumerate()
    {
        let got: Vec<f64> = got.iter().map(|v| f64::from(*v)).collect();
        let (d, at) = max_diff(&flags, &got, &want[k], 1);
        assert!(
            d <= rho_tol,
            "{label}: {name} off by {d} at cell {at} after 1 step"
        );
    }
    if cfg.streaming == Streaming::Ab {
        let (d, at) = max_diff(&flags, &lat.populations().expect("read"), &s1, 9);
        assert!(
            d <= pop_tol,
            "{label}: population {at} off by {d} after 1 step"
        );
    } else {
        assert!(
            matches!(lat.populations(), Err(LbmError::State(_))),
            "{label}: in-place state after an odd step must not pass for post-collision populations"
        );
    }
    lat.poison_spare().expect("poison");
    lat.step(1).expect("step 2");
    let got = lat.populations().expect("read after 2 steps");
    let (d, at) = max_diff(&flags, &got, &s2, 9);
    assert!(
        d <= 2.0 * pop_tol,
        "{label}: population {at} off by {d} after 2 steps"
    );
    assert_eq!(lat.steps_done(), 2);
    true
}

#[test]
fn every_variant_matches_the_cpu_reference() {
    let Some(gpu) = test_gpu() else { return };
    let seed = fresh_seed();
    // Odd nx; even ny (f16 pairs rows y and y + ny/2), with walls and obstacle cells on both sides of that fold;
    // and odd ny, where f16 stores one element per cell (an odd cell count: the last word is half used).
    let nx = 13;
    let (mut cases, mut skipped) = (0, 0);
    for (storage, ny) in [(Storage::F32, 10), (Storage::F16, 10), (Storage::F16, 9)] {
        for streaming in [Streaming::Ab, Streaming::InPlace] {
            // The random states' non-equilibrium parts make the Smagorinsky model's local rates differ from
            // ω by up to ~25 % (C_s 0.3), so a wrong |Π| or τ shows.
            for (collision, force, smagorinsky) in [
                (Collision::Bgk { omega: 1.7 }, [0.0, 0.0], 0.0),
                (Collision::trt(0.6), [2e-4, -1e-4], 0.0),
                (Collision::Bgk { omega: 1.9 }, [0.0, 0.0], 0.3),
                (Collision::trt(1.8), [2e-4, -1e-4], 0.3),
            ] {
                for flags in [Flags::fluid(nx, ny), obstacle_flags(nx, ny)] {
                    let cfg = Config {
                        storage,
                        streaming,
                        force,
                        smagorinsky,
                        ..Config::new(nx, ny, collision)
                    };
                    if check_against_reference(gpu, cfg, flags, seed) {
                        cases += 1;
                    } else {
                        skipped += 1;
                    }
                }
            }
        }
    }
    assert_eq!(cases + skipped, 48);
    // Only the odd ny's 16 cases may be skipped (without SHADER_F16).
    assert_eq!(skipped, if gpu.has_f16() { 0 } else { 16 });
}

/// A channel with an inlet and outlet, a circle with interpolated bounce-back across the f16 fold (rows 7 | 8),
/// links into the bottom wall with random distances, and one link whose far cell is solid (a one-cell gap);
/// the top wall moves, its links with random distances too. With `spin` ≠ 0 the circle rotates at that angular
/// velocity (each wall cell moving with its centre's velocity).
fn curved_flags(rng: &mut StdRng, nx: usize, ny: usize, spin: f64) -> Flags {
    let mut f = Flags::fluid(nx, ny);
    f.channel_walls();
    for x in 0..nx {
        f.set(x, ny - 1, Cell::MovingWall([0.03, -0.01]));
    }
    for x in 2..nx - 2 {
        // Direction 2 is (0, 1), 5 and 6 the upward diagonals.
        for d in [2, 5, 6] {
            f.set_wall_distance(x, ny - 2, d, rng.random_range(0.05..1.0))
                .expect("distance");
        }
    }
    for y in 1..ny - 1 {
        f.set(0, y, Cell::Inlet([0.04, 0.0]));
        f.set(nx - 1, y, Cell::Outlet(1.0));
    }
    let c = [8.3, 7.6];
    f.add_shape(
        |x, y| (x - c[0]).hypot(y - c[1]) - 3.1,
        |x, y| [-spin * (y - c[1]), spin * (x - c[0])],
        true,
    );
    f.set(15, 2, Cell::Wall);
    for x in 2..nx - 2 {
        // Direction 4 is (0, −1), 7 and 8 the downward diagonals.
        for d in [4, 7, 8] {
            f.set_wall_distance(x, 1, d, rng.random_range(0.05..1.0))
                .expect("distance");
        }
    }
    // (15, 1) sits between the bottom wall and the cell at (15, 2): q < 1/2 falls back to plain bounce-back.
    f.set_wall_distance(15, 1, 2, 0.2).expect("distance");
    f.set_wall_distance(15, 1, 4, 0.3).expect("distance");
    f
}

#[test]
fn interpolated_bounce_back_matches_the_cpu_reference() {
    let Some(gpu) = test_gpu() else { return };
    let seed = fresh_seed();
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    let (nx, ny) = (21, 16);
    let flags = curved_flags(&mut rng, nx, ny, 0.0);
    let odd = curved_flags(&mut rng, nx, ny - 1, 0.0);
    // The circle rotating (up to 0.012 at its surface).
    let spinning = curved_flags(&mut rng, nx, ny, 0.004);
    let (mut small, mut large) = (0, 0);
    for (_, q) in flags.wall_distances() {
        if q < 0.5 { small += 1 } else { large += 1 }
    }
    assert!(
        small > 5 && large > 5,
        "{small} links with q < 1/2, {large} with q ≥ 1/2"
    );
    // f32, paired f16, and f16 one per cell (odd ny); both streaming patterns (in place, the q ≥ 1/2 links
    // read their stash); a resting and a rotating circle.
    for (storage, flags) in [
        (Storage::F32, &flags),
        (Storage::F16, &flags),
        (Storage::F16, &odd),
        (Storage::F32, &spinning),
        (Storage::F16, &spinning),
    ] {
        for streaming in [Streaming::Ab, Streaming::InPlace] {
            for collision in [Collision::Bgk { omega: 1.7 }, Collision::trt(0.6)] {
                let cfg = Config {
                    storage,
                    streaming,
                    ..Config::new(nx, flags.ny(), collision)
                };
                check_against_reference(gpu, cfg, flags.clone(), seed);
            }
        }
    }
    // Links must end in walls.
    let cfg = Config::new(nx, ny, Collision::trt(0.6));
    let mut open = Flags::fluid(nx, ny);
    open.set_wall_distance(3, 3, 1, 0.4).expect("distance");
    let e = Lattice::new(gpu, cfg.clone(), open)
        .expect_err("a distance on a link into fluid accepted")
        .to_string();
    assert!(e.contains("a wall"), "{e}");
    let mut f = Flags::fluid(nx, ny);
    for (d, q) in [(1, 0.0), (1, 1.5), (1, f64::NAN), (0, 0.5), (9, 0.5)] {
        assert!(f.set_wall_distance(3, 3, d, q).is_err(), "d = {d}, q = {q}");
    }
}

#[test]
fn streaming_patterns_agree_over_many_steps_and_conserve_mass() {
    let Some(gpu) = test_gpu() else { return };
    let seed = fresh_seed();
    let (nx, ny) = (24, 17);
    let mut rng = StdRng::seed_from_u64(seed);
    let s0 = random_state(&mut rng, nx, ny);
    let mass = |s: &[f64]| s.iter().sum::<f64>();
    let mut results = Vec::new();
    for streaming in [Streaming::Ab, Streaming::InPlace] {
        let cfg = Config {
            streaming,
            ..Config::new(nx, ny, Collision::trt(1.2))
        };
        let mut lat = Lattice::new(gpu, cfg, Flags::fluid(nx, ny)).expect("lattice");
        lat.set_populations(&s0).expect("set");
        lat.step(200).expect("steps");
        let s = lat.populations().expect("read");
        let drift = (mass(&s) - mass(&s0)).abs() / mass(&s0);
        assert!(
            drift < 1e-6,
            "{}: mass drifted by {drift:e}",
            streaming.name()
        );
        results.push(s);
    }
    let d = results[0]
        .iter()
        .zip(&results[1])
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(d < 1e-6, "AB and in-place differ by {d} after 200 steps");
}

#[test]
fn bad_inputs_are_errors() {
    let Some(gpu) = test_gpu() else { return };
    let cfg = Config::new(8, 8, Collision::Bgk { omega: 1.0 });
    let bad = Config::new(8, 8, Collision::Bgk { omega: 2.1 });
    assert!(matches!(
        Lattice::new(gpu, bad, Flags::fluid(8, 8)),
        Err(LbmError::Param { .. })
    ));
    assert!(matches!(
        Lattice::new(gpu, cfg.clone(), Flags::fluid(9, 8)),
        Err(LbmError::Shape(_))
    ));
    // An odd ny stores one f16 per cell, which needs SHADER_F16.
    let odd = Config {
        storage: Storage::F16,
        ..Config::new(8, 7, Collision::Bgk { omega: 1.0 })
    };
    match Lattice::new(gpu, odd, Flags::fluid(8, 7)) {
        Ok(lat) => assert!(
            gpu.has_f16(),
            "{:?} without SHADER_F16",
            lat.config().layout()
        ),
        Err(e) => assert!(
            !gpu.has_f16() && e.to_string().contains("SHADER_F16"),
            "{e}"
        ),
    }
    let mut lat = Lattice::new(gpu, cfg, Flags::fluid(8, 8)).expect("lattice");
    assert!(lat.set_populations(&[1.0; 10]).is_err());
    let mut s = vec![0.1; 9 * 64];
    s[77] = f64::NAN;
    let e = lat
        .set_populations(&s)
        .expect_err("NaN accepted")
        .to_string();
    assert!(e.contains("not finite"), "{e}");
    let e = lat
        .init_equilibrium(|_, _| (1.0, [0.3, 0.0]))
        .expect_err("Mach 0.52 accepted")
        .to_string();
    assert!(e.contains("Mach"), "{e}");
    assert!(lat.init_equilibrium(|_, _| (-1.0, [0.0, 0.0])).is_err());
    assert!(matches!(
        lat.init_from_fields(&[1.0; 64], &[0.0; 64], &[0.0; 63]),
        Err(LbmError::Shape(_))
    ));
    // The fields' equilibria, pulled by the macroscopic pass, as the CPU reference sees them.
    let ux: Vec<f64> = (0..64).map(|i| 0.001 * i as f64).collect();
    let rho: Vec<f64> = (0..64).map(|i| 1.0 + 0.002 * (i % 5) as f64).collect();
    lat.init_from_fields(&rho, &ux, &[0.02; 64])
        .expect("fields");
    let mut s = vec![0.0; 9 * 64];
    for c in 0..64 {
        let e = d2q9::equilibrium(rho[c], [ux[c], 0.02]);
        for i in 0..9 {
            s[i * 64 + c] = e[i];
        }
    }
    let want = reference::macroscopic(lat.config(), &Flags::fluid(8, 8), &s);
    let m = lat.macroscopic().expect("macroscopic");
    let got = m
        .rho
        .iter()
        .zip(&m.ux)
        .map(|(r, u)| (f64::from(*r), f64::from(*u)));
    for (c, ((r, u), (wr, wu))) in got.zip(want[0].iter().zip(&want[1])).enumerate() {
        assert!((r - wr).abs() < 1e-6, "ρ[{c}] = {r} vs {wr}");
        assert!((u - wu).abs() < 1e-6, "u_x[{c}] = {u} vs {wu}");
    }
}

/// A bad initial state is refused naming its first offending cell (row-major), found on every core: a density
/// that is not positive, then a velocity past the Mach limit further on; a good state is taken.
#[test]
fn a_bad_initial_state_names_its_first_cell() {
    let Some(gpu) = test_gpu() else { return };
    // Past the 16 384-cell chunks the search splits into, so the offenders sit in different chunks.
    let (nx, ny) = (256, 160);
    let cfg = Config::new(nx, ny, Collision::Bgk { omega: 1.0 });
    let mut lat = Lattice::new(gpu, cfg, Flags::fluid(nx, ny)).unwrap();
    let err = lat
        .init_equilibrium(|x, y| match (x, y) {
            (7, 100) => (-1.0, [0.0, 0.0]),
            (3, 30) => (1.0, [0.5, 0.0]),
            _ => (1.0, [0.01, 0.0]),
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("initial velocity") && err.contains("0.5"),
        "{err}"
    );
    let err = lat
        .init_equilibrium(|x, y| match (x, y) {
            (7, 100) => (f64::NAN, [0.0, 0.0]),
            (9, 140) => (1.0, [0.5, 0.0]),
            _ => (1.0, [0.01, 0.0]),
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("initial density") && err.contains("(7, 100)"),
        "{err}"
    );
    lat.init_equilibrium(|_, _| (1.0, [0.01, 0.0])).unwrap();
}

/// The in-place f16 stash's explicit rounding (`F16_ROUND_TRIP_WGSL`) is the f16 conversion's, bit for bit: every
/// finite f16 value, every tie between two neighbours and the f32s on either side of each tie, both signs, zeros,
/// the subnormals and the overflow past 65504, against the `half` crate's conversion (round to nearest, ties to
/// even, subnormals kept). Beside it, the device's own `pack2x16float` (how the populations are stored), whose
/// rounding WGSL leaves to the implementation between the two neighbours (AMD's pack instruction rounds toward zero): every f16
/// value must come back exact, and the log says how the device rounds the rest, ties and not.
#[test]
fn the_explicit_f16_rounding_is_the_conversions() {
    use bespoke_gpu::{Grid, Kernel};
    let Some(gpu) = test_gpu() else { return };
    let mut xs = Vec::new();
    for h in 0u16..0x7c00 {
        let a = half::f16::from_bits(h).to_f32();
        let b = half::f16::from_bits(h + 1).to_f32();
        let tie = 0.5 * (a + b);
        for x in [
            a,
            tie,
            f32::from_bits(tie.to_bits() - 1),
            f32::from_bits(tie.to_bits() + 1),
        ] {
            if x.is_finite() {
                xs.extend([x, -x]);
            }
        }
    }
    xs.extend([65519.0f32, 65520.0, 1e6, f32::MIN_POSITIVE, 1e-40]);
    // Pairs (the pack takes a value and its neighbour's).
    if xs.len() % 2 == 1 {
        xs.push(1e-30);
    }
    let n = xs.len();
    let src = gpu.upload(&xs).unwrap();
    let dst = gpu.alloc_filled::<f32>(n, f32::NAN).unwrap();
    let packed = gpu.alloc_filled::<u32>(n, 0xdead_beef).unwrap();
    let k = Kernel::new(
        "f16-round-trip-check",
        format!(
            "{}
@group(0) @binding(0) var<storage, read> xs: array<f32>;
@group(0) @binding(1) var<storage, read_write> ys: array<f32>;
@group(0) @binding(2) var<storage, read_write> packed: array<u32>;
@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) g: vec3<u32>) {{
    let i = g.x + g.y * 65535u * 256u;
    if i < arrayLength(&xs) {{
        ys[i] = to_f16_and_back(xs[i]);
        // As the step stores a word: the value and its neighbour's, one of them negated.
        packed[i] = pack2x16float(vec2<f32>(xs[i], -xs[i ^ 1u]));
    }}
}}",
            bespoke_lbm::kernel::F16_ROUND_TRIP_WGSL
        ),
    );
    let groups = n.div_ceil(256) as u32;
    let launch = gpu
        .prepare(
            &k,
            &[src.arg(), dst.arg(), packed.arg()],
            Grid::d2(groups.min(65535), groups.div_ceil(65535)),
        )
        .unwrap();
    gpu.run(&[&launch]).unwrap();
    let ys = gpu.read(&dst).unwrap();
    let wrong: Vec<_> = xs
        .iter()
        .zip(&ys)
        .filter(|(x, y)| half::f16::from_f32(**x).to_f32().to_bits() != y.to_bits())
        .take(5)
        .map(|(x, y)| {
            format!(
                "{x:e} → {y:e} (want {:e})",
                half::f16::from_f32(*x).to_f32()
            )
        })
        .collect();
    assert!(wrong.is_empty(), "{} values: {wrong:?}", wrong.len());

    // The device's pack: each half's magnitude against the f16s on either side of |x| (`lo` ≤ |x| < `hi`).
    let (mut nearest, mut toward_zero, mut away, mut other) = (0, 0, 0, Vec::new());
    let (mut even_ties, mut odd_ties) = (0, 0);
    let mut inexact_f16 = Vec::new();
    let packed = gpu.read(&packed).unwrap();
    for (i, w) in packed.iter().enumerate() {
        for (x, bits) in [(xs[i], *w as u16), (-xs[i ^ 1], (*w >> 16) as u16)] {
            let m = x.abs();
            let want = half::f16::from_f32(m).to_bits();
            let got = bits & 0x7fff;
            if m > 65504.0 {
                continue; // past f16's range: WGSL leaves it indeterminate
            }
            if half::f16::from_bits(want).to_f32() == m {
                if got != want && inexact_f16.len() < 5 {
                    inexact_f16.push(format!("{x:e} → {:e}", half::f16::from_bits(bits).to_f32()));
                }
                continue;
            }
            let lo = if half::f16::from_bits(want).to_f32() < m {
                want
            } else {
                want - 1
            };
            let hi = lo + 1;
            let tie = {
                let (l, h) = (
                    half::f16::from_bits(lo).to_f32(),
                    half::f16::from_bits(hi).to_f32(),
                );
                (f64::from(l) + f64::from(h)) / 2.0 == f64::from(m)
            };
            let sign_ok = got == 0 || (bits >> 15 == 1) == x.is_sign_negative();
            if got == want && sign_ok {
                nearest += 1;
                even_ties += usize::from(tie);
            } else if got == lo && sign_ok {
                toward_zero += 1;
                odd_ties += usize::from(tie);
            } else if got == hi && sign_ok {
                away += 1;
                odd_ties += usize::from(tie);
            } else if other.len() < 5 {
                other.push(format!("{x:e} → {:e}", half::f16::from_bits(bits).to_f32()));
            }
        }
    }
    eprintln!(
        "pack2x16float on {}: of values between two f16s, {nearest} rounded as to nearest even \
         ({even_ties} of them ties), {toward_zero} toward zero, {away} away from zero ({odd_ties} ties the \
         other way)",
        gpu.adapter_name()
    );
    assert!(
        inexact_f16.is_empty(),
        "f16 values packed to others: {inexact_f16:?}"
    );
    assert!(other.is_empty(), "packed past both neighbours: {other:?}");
}
