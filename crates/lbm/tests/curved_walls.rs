//! Interpolated bounce-back puts walls where their distances say: force-driven Poiseuille flow between flat walls
//! that lie off the half-way positions, against the parabola through the true walls, for both streaming
//! patterns (half-way bounce-back of the same lattice puts the walls in the wrong place: first order); Couette
//! flow under a moving wall off the half-way position, which linear interpolation carries exactly; and
//! Taylor–Couette flow between a rotating and a resting cylinder, second order against the staircase's first.

use bespoke_gpu::testing::test_gpu;
use bespoke_lbm::{Cell, Collision, Config, Flags, Lattice, Streaming};

/// A 2-wide periodic channel: fluid rows 1..=h between wall rows 0 and h + 1 (the top one `top`); with
/// `interpolate`, the bottom wall lies `qb` below row 1 and the top wall `qt` above row h, the same fraction along
/// every link, straight or diagonal (without, the walls are half-way).
fn channel(h: usize, (qb, qt): (f64, f64), interpolate: bool, top: Cell) -> Flags {
    let mut flags = Flags::fluid(2, h + 2);
    flags.channel_walls();
    for x in 0..2 {
        flags.set(x, h + 1, top);
        if interpolate {
            // Directions 4, 7, 8 point down; 2, 5, 6 up.
            for d in [4, 7, 8] {
                flags.set_wall_distance(x, 1, d, qb).expect("distance");
            }
            for d in [2, 5, 6] {
                flags.set_wall_distance(x, h, d, qt).expect("distance");
            }
        }
    }
    flags
}

/// Force-driven flow in `channel(h, q, interpolate, wall)` against the parabola through the walls at q: max
/// |u − u_exact| / u_max.
fn channel_error(
    gpu: &bespoke_gpu::Gpu,
    h: usize,
    (qb, qt): (f64, f64),
    interpolate: bool,
    collision: Collision,
    streaming: Streaming,
) -> f64 {
    let (nx, ny) = (2, h + 2);
    let (yb, yt) = (1.0 - qb, h as f64 + qt);
    let width = yt - yb;
    let nu = collision.viscosity();
    let u_max = 0.02;
    let g = 8.0 * nu * u_max / (width * width);
    let flags = channel(h, (qb, qt), interpolate, Cell::Wall);
    let cfg = Config {
        streaming,
        force: [g, 0.0],
        ..Config::new(nx, ny, collision)
    };
    let mut lat = Lattice::new(gpu, cfg, flags).expect("lattice");
    // Three diffusion times across the channel: the start-up transient decays as exp(−π² ν t / W²), to 1e-13.
    let steps = (3.0 * width * width / nu).ceil() as u64;
    lat.step(steps + steps % 2).expect("steps");
    let f = lat.macroscopic().expect("fields");
    (1..=h)
        .map(|y| {
            let u = (0..nx).map(|x| f64::from(f.ux[y * nx + x])).sum::<f64>() / nx as f64;
            let s = y as f64;
            let exact = g * (s - yb) * (yt - s) / (2.0 * nu);
            (u - exact).abs() / u_max
        })
        .fold(0.0, f64::max)
}

#[test]
fn walls_off_the_half_way_positions_give_the_true_parabola() {
    let Some(gpu) = test_gpu() else { return };
    // q < 1/2 below, q ≥ 1/2 above: both branches of the rule.
    let q = (0.3, 0.8);
    for collision in [
        Collision::trt(1.0),
        Collision::trt(1.7),
        Collision::Bgk { omega: 1.0 },
    ] {
        let (mut errors, mut half_way) = (Vec::new(), Vec::new());
        for h in [6, 12, 24] {
            let ab = channel_error(gpu, h, q, true, collision, Streaming::Ab);
            let inplace = channel_error(gpu, h, q, true, collision, Streaming::InPlace);
            let staircase = channel_error(gpu, h, q, false, collision, Streaming::Ab);
            eprintln!(
                "{} H = {h}: interpolated {ab:.3e} (in place {inplace:.3e}), half-way {staircase:.3e}",
                collision.name()
            );
            assert!(
                (ab - inplace).abs() <= 1e-6,
                "{} H = {h}: two-lattice {ab:e} vs in-place {inplace:e}",
                collision.name()
            );
            assert!(
                ab < 0.3 * staircase,
                "{} H = {h}: interpolated {ab:e} not well below half-way {staircase:e}",
                collision.name()
            );
            errors.push(ab);
            half_way.push(staircase);
        }
        // Over H = 6 → 24: second order with the distances, first without.
        let order = |e: &[f64]| (e[0] / e[2]).log2() / 2.0;
        let (o2, o1) = (order(&errors), order(&half_way));
        eprintln!("{}: order {o2:.2}, half-way {o1:.2}", collision.name());
        assert!(
            o2 > 1.7 && o1 < 1.2,
            "{}: errors {errors:?} converge at order {o2}, half-way {half_way:?} at {o1}",
            collision.name()
        );
    }
}

/// Couette flow: the bottom wall at rest `qb` below row 1, the top wall moving at `u` along x, `qt` above row h.
/// Returns max |u_x − u_exact| / u and max |u_y| / u.
fn couette_error(
    gpu: &bespoke_gpu::Gpu,
    h: usize,
    (qb, qt): (f64, f64),
    collision: Collision,
    streaming: Streaming,
) -> (f64, f64) {
    let (nx, ny) = (2, h + 2);
    let (yb, yt) = (1.0 - qb, h as f64 + qt);
    let u = 0.05;
    let flags = channel(h, (qb, qt), true, Cell::MovingWall([u, 0.0]));
    let cfg = Config {
        streaming,
        ..Config::new(nx, ny, collision)
    };
    let nu = collision.viscosity();
    let width = yt - yb;
    let mut lat = Lattice::new(gpu, cfg, flags).expect("lattice");
    let steps = (6.0 * width * width / nu).ceil() as u64;
    lat.step(steps + steps % 2).expect("steps");
    let f = lat.macroscopic().expect("fields");
    let (mut ex, mut ey) = (0.0f64, 0.0f64);
    for y in 1..=h {
        for x in 0..nx {
            let exact = u * (y as f64 - yb) / width;
            ex = ex.max((f64::from(f.ux[y * nx + x]) - exact).abs() / u);
            ey = ey.max(f64::from(f.uy[y * nx + x]).abs() / u);
        }
    }
    (ex, ey)
}

#[test]
fn a_moving_wall_off_the_half_way_position_gives_the_exact_couette_profile() {
    let Some(gpu) = test_gpu() else { return };
    // Linear interpolation carries a linear profile exactly: what is left is f32 rounding (≈ 2e-6 of U). A Ladd
    // term scaled by 2q for q < 1/2 puts it off by 0.59 at q = 0.2.
    for q in [(0.3, 0.8), (0.7, 0.2)] {
        for collision in [
            Collision::trt(1.0),
            Collision::trt(1.7),
            Collision::Bgk { omega: 0.8 },
        ] {
            for streaming in [Streaming::Ab, Streaming::InPlace] {
                let (ex, ey) = couette_error(gpu, 8, q, collision, streaming);
                let label = format!("walls {q:?} {} {}", collision.name(), streaming.name());
                eprintln!("{label}: u_x off by {ex:.2e}, u_y {ey:.2e} of U");
                assert!(
                    ex < 1e-5 && ey < 1e-6,
                    "{label}: u_x off by {ex:e}, u_y {ey:e} of U"
                );
            }
        }
    }
}

/// Taylor–Couette flow between a cylinder of radius `r1` rotating at Ω (surface speed 0.02) and a resting one of
/// radius 2.2·r1, the centre off the lattice's symmetry; u_θ = A r + B / r with A = −Ω r1² / (r2² − r1²),
/// B = Ω r1² r2² / (r2² − r1²). Returns the relative L2 error of u over the fluid cells.
fn taylor_couette_error(
    gpu: &bespoke_gpu::Gpu,
    r1: f64,
    interpolate: bool,
    streaming: Streaming,
) -> f64 {
    let r2 = 2.2 * r1;
    let n = (2.0 * r2).ceil() as usize + 4;
    let c = [n as f64 / 2.0 + 0.31, n as f64 / 2.0 - 0.17];
    let omega = 0.02 / r1;
    let mut flags = Flags::fluid(n, n);
    let radius = move |x: f64, y: f64| (x - c[0]).hypot(y - c[1]);
    flags.add_shape(
        |x, y| radius(x, y) - r1,
        |x, y| [-omega * (y - c[1]), omega * (x - c[0])],
        interpolate,
    );
    flags.add_shape(|x, y| r2 - radius(x, y), |_, _| [0.0, 0.0], interpolate);
    let collision = Collision::trt(1.0);
    let cfg = Config {
        streaming,
        ..Config::new(n, n, collision)
    };
    let nu = collision.viscosity();
    let mut lat = Lattice::new(gpu, cfg, flags.clone()).expect("lattice");
    let steps = (4.0 * (r2 - r1).powi(2) / nu).ceil() as u64;
    lat.step(steps + steps % 2).expect("steps");
    let f = lat.macroscopic().expect("fields");
    let (a, b) = {
        let k = omega * r1 * r1 / (r2 * r2 - r1 * r1);
        (-k, k * r2 * r2)
    };
    let (mut err, mut norm) = (0.0, 0.0);
    for y in 0..n {
        for x in 0..n {
            if flags.get(x, y) != Cell::Fluid {
                continue;
            }
            let (dx, dy) = (x as f64 - c[0], y as f64 - c[1]);
            let r = dx.hypot(dy);
            let ut = a * r + b / r;
            let exact = [-ut * dy / r, ut * dx / r];
            let got = [f64::from(f.ux[y * n + x]), f64::from(f.uy[y * n + x])];
            err += (got[0] - exact[0]).powi(2) + (got[1] - exact[1]).powi(2);
            norm += exact[0].powi(2) + exact[1].powi(2);
        }
    }
    (err / norm).sqrt()
}

#[test]
fn taylor_couette_between_rotating_curved_walls_converges_at_second_order() {
    let Some(gpu) = test_gpu() else { return };
    let mut orders = Vec::new();
    let mut finest = Vec::new();
    for interpolate in [true, false] {
        let mut errors = Vec::new();
        for r1 in [4.0, 8.0, 16.0] {
            let ab = taylor_couette_error(gpu, r1, interpolate, Streaming::Ab);
            let inplace = taylor_couette_error(gpu, r1, interpolate, Streaming::InPlace);
            eprintln!(
                "interpolated {interpolate}, r1 = {r1}: L2 error {ab:.3e} (in place {inplace:.3e})"
            );
            assert!(
                (ab - inplace).abs() <= 1e-6,
                "r1 = {r1}: two-lattice {ab:e} vs in-place {inplace:e}"
            );
            errors.push(ab);
        }
        let order = (errors[0] / errors[2]).log2() / 2.0;
        eprintln!("interpolated {interpolate}: order {order:.2}");
        orders.push(order);
        finest.push(errors[2]);
    }
    // Measured: 2.6e-2, 7.2e-3, 1.8e-3 (order 1.91) against staircase 7.7e-2, 3.8e-2, 1.8e-2 (1.07).
    assert!(
        orders[0] > 1.7 && orders[1] < 1.3 && finest[0] < 0.2 * finest[1],
        "orders {orders:?} (interpolated, staircase), finest errors {finest:?}"
    );
}
