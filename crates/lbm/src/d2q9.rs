//! The D2Q9 velocity set and its equilibrium, shared by the WGSL generator and the CPU reference.
// Direction indices address several tables (C, W, OPP) at once.
#![allow(clippy::needless_range_loop)]

/// Lattice velocities: rest, the four axis directions, then the four diagonals.
pub const C: [[i32; 2]; 9] = [
    [0, 0],
    [1, 0],
    [0, 1],
    [-1, 0],
    [0, -1],
    [1, 1],
    [-1, 1],
    [-1, -1],
    [1, -1],
];

/// Weights w_i (sum to 1).
pub const W: [f64; 9] = [
    4.0 / 9.0,
    1.0 / 9.0,
    1.0 / 9.0,
    1.0 / 9.0,
    1.0 / 9.0,
    1.0 / 36.0,
    1.0 / 36.0,
    1.0 / 36.0,
    1.0 / 36.0,
];

/// Index of the opposite direction: `C[OPP[i]] = −C[i]`.
pub const OPP: [usize; 9] = [0, 3, 4, 1, 2, 7, 8, 5, 6];

/// Second-order equilibrium f_eq,i(ρ, u) = w_i ρ (1 + 3 c·u + 9/2 (c·u)² − 3/2 u·u).
pub fn equilibrium(rho: f64, u: [f64; 2]) -> [f64; 9] {
    std::array::from_fn(|i| equilibrium_component(i, rho, u))
}

/// Direction i of [`equilibrium`], the same operations in the same order (so the same bits).
pub fn equilibrium_component(i: usize, rho: f64, u: [f64; 2]) -> f64 {
    let uu = u[0] * u[0] + u[1] * u[1];
    let cu = f64::from(C[i][0]) * u[0] + f64::from(C[i][1]) * u[1];
    W[i] * rho * (1.0 + 3.0 * cu + 4.5 * cu * cu - 1.5 * uu)
}

/// Density and momentum Σ f, Σ c f of one cell's populations.
pub fn moments(f: &[f64; 9]) -> (f64, [f64; 2]) {
    let mut rho = 0.0;
    let mut j = [0.0; 2];
    for i in 0..9 {
        rho += f[i];
        j[0] += f64::from(C[i][0]) * f[i];
        j[1] += f64::from(C[i][1]) * f[i];
    }
    (rho, j)
}

/// Kinematic viscosity ν = (1/ω − ½)/3 of relaxation rate ω (lattice units).
pub fn viscosity(omega: f64) -> f64 {
    (1.0 / omega - 0.5) / 3.0
}

/// Relaxation rate ω for viscosity ν.
pub fn omega_for(nu: f64) -> f64 {
    1.0 / (3.0 * nu + 0.5)
}

/// TRT's second rate ω⁻ from the magic parameter Λ = (1/ω⁺ − ½)(1/ω⁻ − ½).
pub fn trt_omega_minus(omega: f64, lambda: f64) -> f64 {
    (4.0 - 2.0 * omega) / (4.0 * lambda * omega + 2.0 - omega)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn velocity_set_is_consistent() {
        assert!((W.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        for i in 0..9 {
            assert_eq!(C[OPP[i]], [-C[i][0], -C[i][1]]);
            assert_eq!(OPP[OPP[i]], i);
        }
        // Second moment Σ w c_a c_b = δ_ab / 3.
        for a in 0..2 {
            for b in 0..2 {
                let s: f64 = (0..9).map(|i| W[i] * f64::from(C[i][a] * C[i][b])).sum();
                let want = if a == b { 1.0 / 3.0 } else { 0.0 };
                assert!((s - want).abs() < 1e-15);
            }
        }
    }

    #[test]
    fn equilibrium_has_the_right_moments() {
        let (rho, j) = moments(&equilibrium(1.07, [0.03, -0.05]));
        assert!((rho - 1.07).abs() < 1e-14);
        assert!((j[0] - 1.07 * 0.03).abs() < 1e-14 && (j[1] + 1.07 * 0.05).abs() < 1e-14);
    }

    #[test]
    fn trt_magic_parameter_round_trips() {
        for omega in [0.3, 1.0, 1.7] {
            let om = trt_omega_minus(omega, 3.0 / 16.0);
            let lambda = (1.0 / omega - 0.5) * (1.0 / om - 0.5);
            assert!(
                (lambda - 3.0 / 16.0).abs() < 1e-14,
                "ω = {omega}: Λ = {lambda}"
            );
        }
    }
}
