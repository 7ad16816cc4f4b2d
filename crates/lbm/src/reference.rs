//! Plain-Rust reference of one step, in f64, with the same boundary rules as the kernels. The state is the
//! post-collision populations S_i(x) (what the two-lattice scheme stores), direction-major: `s[i * n + cell]`.

use crate::config::{Collision, Config};
use crate::d2q9::{C, OPP, W, equilibrium};
use crate::flags::{Cell, Flags};

/// Pre-collision populations of cell (x, y) pulled from `s`, with bounce-back from solid sources (interpolated
/// where the link has a wall distance).
pub fn gather(flags: &Flags, s: &[f64], x: usize, y: usize) -> [f64; 9] {
    let (nx, ny) = (flags.nx(), flags.ny());
    let n = nx * ny;
    let idx = y * nx + x;
    std::array::from_fn(|i| {
        let o = OPP[i];
        let (sx, sy) = flags.neighbour(x, y, o);
        match flags.get(sx, sy) {
            wall @ (Cell::Wall | Cell::MovingWall(_)) => {
                // Ladd's moving-wall term, whole in every rule (Bouzidi et al.'s, divided by 2q for q ≥ 1/2).
                let ladd = match wall {
                    Cell::MovingWall(u) => {
                        6.0 * W[i] * (f64::from(C[i][0]) * u[0] + f64::from(C[i][1]) * u[1])
                    }
                    _ => 0.0,
                };
                let bounced = s[o * n + idx] + ladd;
                match flags.wall_distance(x, y, o) {
                    // Bouzidi, Firdaouss & Lallemand: the wall q of the way along the link.
                    Some(q) if flags.get(x, y) == Cell::Fluid => {
                        if q < 0.5 {
                            let (fx, fy) = flags.neighbour(x, y, i);
                            let far = if flags.get(fx, fy).is_solid() {
                                bounced
                            } else {
                                s[o * n + fy * nx + fx] + ladd
                            };
                            2.0 * q * bounced + (1.0 - 2.0 * q) * far
                        } else {
                            (bounced + (2.0 * q - 1.0) * s[i * n + idx]) / (2.0 * q)
                        }
                    }
                    _ => bounced,
                }
            }
            _ => s[i * n + sy * nx + sx],
        }
    })
}

/// Density and velocity as the next collision sees them (with half the body force; open boundaries by
/// Zou/He's balance). Solid cells report ρ = 1 and their wall velocity.
fn macro_of(cfg: &Config, flags: &Flags, f: &[f64; 9], x: usize, y: usize) -> (f64, [f64; 2]) {
    let rho: f64 = f.iter().sum();
    let mut j = [0.0; 2];
    for i in 0..9 {
        j[0] += f64::from(C[i][0]) * f[i];
        j[1] += f64::from(C[i][1]) * f[i];
    }
    let mut u = [
        (j[0] + 0.5 * cfg.force[0]) / rho,
        (j[1] + 0.5 * cfg.force[1]) / rho,
    ];
    let mut rho = rho;
    let cell = flags.get(x, y);
    if let Cell::Inlet(_) | Cell::Outlet(_) = cell {
        let nrm =
            Flags::edge_normal(flags.nx(), flags.ny(), x, y).expect("open cells lie on an edge");
        let (mut s0, mut sp) = (0.0, 0.0);
        for i in 0..9 {
            let d = C[i][0] * nrm[0] + C[i][1] * nrm[1];
            if d == 0 {
                s0 += f[i];
            } else if d > 0 {
                sp += f[i];
            }
        }
        let nf = [f64::from(nrm[0]), f64::from(nrm[1])];
        match cell {
            Cell::Inlet(ui) => {
                u = ui;
                rho = (s0 + 2.0 * sp) / (1.0 + ui[0] * nf[0] + ui[1] * nf[1]);
            }
            Cell::Outlet(ro) => {
                rho = ro;
                let un = (s0 + 2.0 * sp) / ro - 1.0;
                u = [un * nf[0], un * nf[1]];
            }
            _ => unreachable!(),
        }
    }
    (rho, u)
}

/// (Π_xx, Π_xy, Π_yy) of Σ k_i c_i c_i (f_i − e_i).
fn neq_flux(f: &[f64; 9], e: &[f64; 9], k: impl Fn(usize) -> f64) -> [f64; 3] {
    let mut p = [0.0; 3];
    for i in 0..9 {
        let (cx, cy) = (f64::from(C[i][0]), f64::from(C[i][1]));
        let q = k(i) * (f[i] - e[i]);
        p[0] += cx * cx * q;
        p[1] += cx * cy * q;
        p[2] += cy * cy * q;
    }
    p
}

/// The non-equilibrium part an open cell relaxes (Latt et al.'s regularised boundary): the unknown populations'
/// f − f_eq taken as their opposites' (so Π_neq = Σ k_i c_i c_i (f_i − e_i), k_i = 1 along the edge, 2 leaving,
/// 0 entering), projected onto the second-order Hermite basis: w_i 9/2 Q_i : Π_neq, Q_i = c_i c_i − I/3.
pub fn regularized_neq(flags: &Flags, f: &[f64; 9], e: &[f64; 9], x: usize, y: usize) -> [f64; 9] {
    let nrm = Flags::edge_normal(flags.nx(), flags.ny(), x, y).expect("open cells lie on an edge");
    let p = neq_flux(f, e, |i| match C[i][0] * nrm[0] + C[i][1] * nrm[1] {
        0 => 1.0,
        d if d > 0 => 2.0,
        _ => 0.0,
    });
    std::array::from_fn(|i| {
        let (cx, cy) = (f64::from(C[i][0]), f64::from(C[i][1]));
        4.5 * W[i]
            * ((cx * cx - 1.0 / 3.0) * p[0] + 2.0 * cx * cy * p[1] + (cy * cy - 1.0 / 3.0) * p[2])
    })
}

/// The Smagorinsky model's local (ω⁺, ω⁻): τ solves c_s²(τ − τ₀) = C_s² |S| with |S| = √2 |Π| / (2ρ c_s² τ),
/// Π = Σ c c (f − f_eq); ω⁻ keeps TRT's Λ.
pub fn subgrid_rates(cfg: &Config, f: &[f64; 9], e: &[f64; 9], rho: f64) -> (f64, f64) {
    let p = neq_flux(f, e, |_| 1.0);
    let norm = (p[0] * p[0] + p[2] * p[2] + 2.0 * p[1] * p[1]).sqrt();
    let tau0 = 1.0 / cfg.collision.omega();
    let c2 = cfg.smagorinsky * cfg.smagorinsky;
    let tau =
        0.5 * (tau0 + (tau0 * tau0 + 18.0 * std::f64::consts::SQRT_2 * c2 * norm / rho).sqrt());
    let om = match cfg.collision {
        Collision::Bgk { .. } => 1.0 / tau,
        Collision::Trt { lambda, .. } => 1.0 / (lambda / (tau - 0.5) + 0.5),
    };
    (1.0 / tau, om)
}

/// One step: stream (pull), collide; returns the new post-collision state. Solid cells keep their values.
pub fn step(cfg: &Config, flags: &Flags, s: &[f64]) -> Vec<f64> {
    let (nx, ny) = (cfg.nx, cfg.ny);
    let n = nx * ny;
    let mut out = s.to_vec();
    let (op, om) = cfg.collision.rates();
    let force = cfg.force;
    for y in 0..ny {
        for x in 0..nx {
            let cell = flags.get(x, y);
            if cell.is_solid() {
                continue;
            }
            let f = gather(flags, s, x, y);
            let (rho, u) = macro_of(cfg, flags, &f, x, y);
            let e = equilibrium(rho, u);
            let idx = y * nx + x;
            let (op, om) = if cfg.smagorinsky > 0.0 {
                subgrid_rates(cfg, &f, &e, rho)
            } else {
                (op, om)
            };
            if let Cell::Inlet(_) | Cell::Outlet(_) = cell {
                let reg = regularized_neq(flags, &f, &e, x, y);
                for i in 0..9 {
                    out[i * n + idx] = e[i] + (1.0 - op) * reg[i];
                }
                continue;
            }
            let uf = u[0] * force[0] + u[1] * force[1];
            for i in 0..9 {
                let j = OPP[i];
                let plus = 0.5 * ((f[i] + f[j]) - (e[i] + e[j]));
                let minus = 0.5 * ((f[i] - f[j]) - (e[i] - e[j]));
                let c = [f64::from(C[i][0]), f64::from(C[i][1])];
                let cu = c[0] * u[0] + c[1] * u[1];
                let cf = c[0] * force[0] + c[1] * force[1];
                let f_sym = W[i] * (9.0 * cu * cf - 3.0 * uf);
                let f_anti = W[i] * 3.0 * cf;
                out[i * n + idx] = f[i] - op * plus - om * minus
                    + (1.0 - 0.5 * op) * f_sym
                    + (1.0 - 0.5 * om) * f_anti;
            }
        }
    }
    out
}

/// ρ, u_x, u_y of every cell as the kernels' macroscopic pass computes them from state `s`.
pub fn macroscopic(cfg: &Config, flags: &Flags, s: &[f64]) -> [Vec<f64>; 3] {
    let (nx, ny) = (cfg.nx, cfg.ny);
    let mut out = [vec![0.0; nx * ny], vec![0.0; nx * ny], vec![0.0; nx * ny]];
    for y in 0..ny {
        for x in 0..nx {
            let idx = y * nx + x;
            let (rho, u) = match flags.get(x, y) {
                Cell::Wall => (1.0, [0.0, 0.0]),
                Cell::MovingWall(u) => (1.0, u),
                _ => macro_of(cfg, flags, &gather(flags, s, x, y), x, y),
            };
            out[0][idx] = rho;
            out[1][idx] = u[0];
            out[2][idx] = u[1];
        }
    }
    out
}

/// Force on solid cells by momentum exchange over `links`, each (x, y, d) a link from fluid cell (x, y) along d
/// into a solid cell: Σ c_d (f_d* + f_d̄) with f_d* = `s`'s population d at the cell (post-collision,
/// direction-major) and f_d̄ the population the wall returns as the step computes it (`gather`).
pub fn link_force(flags: &Flags, s: &[f64], links: &[(usize, usize, usize)]) -> [f64; 2] {
    let n = flags.nx() * flags.ny();
    let mut f = [0.0; 2];
    for &(x, y, d) in links {
        let back = gather(flags, s, x, y)[OPP[d]];
        let p = s[d * n + y * flags.nx() + x] + back;
        f[0] += f64::from(C[d][0]) * p;
        f[1] += f64::from(C[d][1]) * p;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Collision;

    #[test]
    fn periodic_step_conserves_mass_and_momentum() {
        let cfg = Config::new(7, 5, Collision::trt(1.1));
        let flags = Flags::fluid(7, 5);
        let n = 35;
        let mut s = vec![0.0; 9 * n];
        for c in 0..n {
            let e = equilibrium(
                1.0 + 0.01 * (c as f64).sin(),
                [0.02 * (c as f64 * 0.7).cos(), 0.01],
            );
            for i in 0..9 {
                s[i * n + c] = e[i] * (1.0 + 0.05 * ((i * 31 + c * 7) as f64).sin());
            }
        }
        let totals = |s: &[f64]| {
            let mut m = [0.0; 3];
            for c in 0..n {
                let f: [f64; 9] = std::array::from_fn(|i| s[i * n + c]);
                let (r, j) = crate::d2q9::moments(&f);
                m[0] += r;
                m[1] += j[0];
                m[2] += j[1];
            }
            m
        };
        let before = totals(&s);
        let after = totals(&step(&cfg, &flags, &s));
        for k in 0..3 {
            assert!(
                (before[k] - after[k]).abs() < 1e-12,
                "{k}: {before:?} vs {after:?}"
            );
        }
    }
}
