//! Open boundaries: Poiseuille flow driven through a channel by a parabolic velocity inlet and a pressure
//! outlet, against the exact profile and pressure gradient everywhere, the boundary cells included. An
//! equilibrium at the open cells drops the shear stress the profile carries there, an error of first order in
//! τ − ½ that viscosity does not hide; the regularised boundaries keep it.

use bespoke_gpu::testing::test_gpu;
use bespoke_lbm::{Cell, Collision, Config, Flags, Lattice, Streaming};

struct Errors {
    /// max |ρu_x − ρ_in u_exact| / (ρ_in u_max) over every non-solid cell.
    jx: f64,
    /// max |u_y| / u_max.
    uy: f64,
    /// Relative error of dρ/dx between the quarter and three-quarter columns.
    gradient: f64,
}

/// A channel 4h long, fluid rows 1..=h between walls half-way to rows 0 and h + 1, the parabola at u_max 0.01
/// (Mach 0.017) coming in at x = 0, ρ = 1 at x = nx − 1.
fn open_channel(
    gpu: &bespoke_gpu::Gpu,
    h: usize,
    collision: Collision,
    streaming: Streaming,
) -> Errors {
    let (nx, ny) = (4 * h, h + 2);
    let u_max = 0.01;
    let exact = |y: usize| {
        let s = y as f64 - 0.5;
        4.0 * u_max * s * (h as f64 - s) / (h * h) as f64
    };
    let mut flags = Flags::fluid(nx, ny);
    flags.channel_walls();
    for y in 1..=h {
        flags.set(0, y, Cell::Inlet([exact(y), 0.0]));
        flags.set(nx - 1, y, Cell::Outlet(1.0));
    }
    let cfg = Config {
        streaming,
        ..Config::new(nx, ny, collision)
    };
    let nu = collision.viscosity();
    let mut lat = Lattice::new(gpu, cfg, flags).expect("lattice");
    // Eight diffusion times across the channel and twenty sound crossings along it.
    let steps = (8.0 * (h * h) as f64 / nu + 20.0 * nx as f64).ceil() as u64;
    lat.step(steps + steps % 2).expect("steps");
    let f = lat.macroscopic().expect("fields");
    // Weakly compressible: ρ falls along the channel (0.2 % here) and u grows as 1/ρ, but the mass flux ρu and,
    // as μ = ρν, the pressure gradient stay uniform; so compare ρu with the inlet's density times the parabola.
    let column = |x: usize| (1..=h).map(|y| f64::from(f.rho[y * nx + x])).sum::<f64>() / h as f64;
    let rho_in = column(0);
    let (mut jx, mut uy) = (0.0f64, 0.0f64);
    for y in 1..=h {
        for x in 0..nx {
            let i = y * nx + x;
            let j = f64::from(f.rho[i]) * f64::from(f.ux[i]);
            jx = jx.max((j - rho_in * exact(y)).abs() / (rho_in * u_max));
            uy = uy.max(f64::from(f.uy[i]).abs() / u_max);
        }
    }
    let (a, b) = (nx / 4, 3 * nx / 4);
    let measured = (column(b) - column(a)) / (b - a) as f64;
    // ∂p/∂x = −8 μ u_max / H², p = ρ/3, μ u_max = ν ρ u_max.
    let want = -24.0 * nu * rho_in * u_max / (h * h) as f64;
    Errors {
        jx: if jx.is_nan() { f64::INFINITY } else { jx },
        uy: if uy.is_nan() { f64::INFINITY } else { uy },
        gradient: (measured - want).abs() / want.abs(),
    }
}

#[test]
fn velocity_inlet_and_pressure_outlet_carry_the_parabola() {
    let Some(gpu) = test_gpu() else { return };
    // TRT with Λ = 3/16 is exact in the bulk and at the half-way walls, so what remains is the open boundaries'.
    // Measured (H = 8 and 16): regularised ≤ 3.1e-3 in ρu, ≤ 1.8e-3 in u_y, ≤ 2.3e-4 in dρ/dx; equilibrium
    // boundaries 4.3e-2 / 2.9e-2 at ω 1.4 and 1.3e-1 / 7.7e-2 at ω 1.8 in ρu (they coincide at ω = 1).
    for omega in [1.0, 1.4, 1.8] {
        let collision = Collision::trt(omega);
        for h in [8, 16] {
            let ab = open_channel(gpu, h, collision, Streaming::Ab);
            let inplace = open_channel(gpu, h, collision, Streaming::InPlace);
            let label = format!("TRT ω {omega} H = {h}");
            eprintln!(
                "{label}: ρu_x {:.3e}, u_y {:.3e}, dρ/dx {:.3e}",
                ab.jx, ab.uy, ab.gradient
            );
            assert!(
                (ab.jx - inplace.jx).abs() < 1e-5,
                "{label}: two-lattice {} vs in-place {}",
                ab.jx,
                inplace.jx
            );
            assert!(
                ab.jx < 5e-3,
                "{label}: ρu_x off the parabola by {:e}",
                ab.jx
            );
            assert!(ab.uy < 3e-3, "{label}: u_y {:e}", ab.uy);
            assert!(
                ab.gradient < 1e-3,
                "{label}: dρ/dx off by {:e}",
                ab.gradient
            );
        }
    }
}
