//! Equilibrium, collision (BGK, TRT, with the Smagorinsky subgrid model), Guo forcing and the regularisation of
//! open cells, written per opposite pair of directions.
// Direction indices address several tables (C, W, OPP) at once.
#![allow(clippy::needless_range_loop)]

use std::fmt::Write as _;

use super::{KernelSpec, lit};
use crate::config::Collision;
use crate::d2q9::{C, OPP, W};

impl KernelSpec {
    /// Equilibrium, collision and forcing: f0..f8, rho, rd, ux, uy → o0..o8.
    ///
    /// Written per opposite pair (i, ī): the shifted equilibria are w (sym ± anti) with sym = ρ − 1 +
    /// ρ (9/2 (c·u)² − 3/2 u·u) and anti = 3ρ c·u, so TRT's even and odd parts need no e_i at all. Half the
    /// arithmetic of the per-direction form, which matters where two cells share an invocation.
    pub(super) fn collide(&self, s: &mut String) {
        let (op, om) = self.collision.rates();
        let les = self.smagorinsky > 0.0;
        // The rates: literals, or with a subgrid model the cell's own `op`, `om` computed below.
        let (ops, oms) = if les {
            ("op".to_owned(), "om".to_owned())
        } else {
            (lit(op), lit(om))
        };
        // (1 − ω/2)·k for Guo's terms, folded into one literal when the rate is.
        let half_rate = |plus: bool, k: f64| -> String {
            let rate = if plus { op } else { om };
            if les {
                format!(
                    "(1.0 - 0.5 * {}) * {}",
                    if plus { "op" } else { "om" },
                    lit(k)
                )
            } else {
                lit((1.0 - 0.5 * rate) * k)
            }
        };
        s.push_str("let uu = 1.5 * (ux * ux + uy * uy);\n");
        // Guo forcing: F_i = w_i (3 c·F + 9 (c·u)(c·F) − 3 u·F), split into its even and odd parts for TRT.
        if self.has_force() {
            let _ = writeln!(
                s,
                "let uf = ux * {} + uy * {};",
                lit(self.force[0]),
                lit(self.force[1])
            );
        }
        let cf = |i: usize| f64::from(C[i][0]) * self.force[0] + f64::from(C[i][1]) * self.force[1];
        let _ = writeln!(s, "// Collide ({}).", self.collision.name());
        for i in [1usize, 2, 5, 6] {
            let j = OPP[i];
            let w = lit(W[i]);
            let _ = writeln!(
                s,
                "let cu{i} = {};\nlet sy{i} = rd + rho * (4.5 * cu{i} * cu{i} - uu);\nlet an{i} = 3.0 * rho * cu{i};",
                cu_expr(i, "ux", "uy")
            );
            if self.flags {
                // Open boundaries start from the equilibrium itself.
                let _ = writeln!(
                    s,
                    "let e{i} = {w} * (sy{i} + an{i});\nlet e{j} = {w} * (sy{i} - an{i});"
                );
            }
            let _ = writeln!(
                s,
                "let p{i} = 0.5 * (f{i} + f{j}) - {w} * sy{i};\nlet m{i} = 0.5 * (f{i} - f{j}) - {w} * an{i};"
            );
        }
        if les {
            // Smagorinsky (Hou et al. 1996): ν = ν₀ + (C_s Δ)² |S|, |S| from the non-equilibrium momentum flux
            // Π = Σ c c (f − f_eq), which only the even parts p_i carry: Π = 2 Σ_pairs c_i c_i p_i. With
            // |S| = √2 |Π| / (2 ρ c_s² τ), ν = c_s² (τ − ½) is a quadratic in τ.
            let tau0 = 1.0 / op;
            let _ = writeln!(
                s,
                "let sxx = 2.0 * (p1 + p5 + p6);
let syy = 2.0 * (p2 + p5 + p6);
let sxy = 2.0 * (p5 - p6);
let tau = 0.5 * ({t0} + sqrt({t0sq} + {k} * sqrt(sxx * sxx + syy * syy + 2.0 * sxy * sxy) / rho));
let op = 1.0 / tau;",
                t0 = lit(tau0),
                t0sq = lit(tau0 * tau0),
                k = lit(18.0 * std::f64::consts::SQRT_2 * self.smagorinsky * self.smagorinsky),
            );
            match self.collision {
                Collision::Bgk { .. } => s.push_str("let om = op;\n"),
                // Λ = (τ − ½)(1/ω⁻ − ½) held at its configured value.
                Collision::Trt { lambda, .. } => {
                    let _ = writeln!(s, "let om = 1.0 / ({} / (tau - 0.5) + 0.5);", lit(lambda));
                }
            }
        }
        let e0 = format!("{} * (rd - rho * uu)", lit(W[0]));
        let f0 = if self.has_force() {
            format!(" + {} * uf", half_rate(true, -3.0 * W[0]))
        } else {
            String::new()
        };
        if self.flags {
            let _ = writeln!(s, "let e0 = {e0};");
            let _ = writeln!(s, "var o0 = f0 - {ops} * (f0 - e0){f0};");
        } else {
            let _ = writeln!(s, "var o0 = f0 - {ops} * (f0 - {e0}){f0};");
        }
        for i in [1usize, 2, 5, 6] {
            let j = OPP[i];
            let (fp, fm) = if self.has_force() {
                (
                    format!(
                        " + {} * (9.0 * cu{i} * {} - 3.0 * uf)",
                        half_rate(true, W[i]),
                        lit(cf(i))
                    ),
                    half_rate(false, 3.0 * W[i] * cf(i)),
                )
            } else {
                (String::new(), String::new())
            };
            let (plus, minus) = if fm.is_empty() {
                (String::new(), String::new())
            } else {
                (format!(" + {fm}"), format!(" - {fm}"))
            };
            let _ = writeln!(
                s,
                "var o{i} = f{i} - {ops} * p{i} - {oms} * m{i}{fp}{plus};\nvar o{j} = f{j} - {ops} * p{i} + {oms} * m{i}{fp}{minus};",
            );
        }
        if self.flags {
            // Regularised open boundary (Latt et al. 2008): the equilibrium plus the relaxed non-equilibrium part,
            // rebuilt from Π_neq of the known populations (the unknown ones' f − f_eq taken as their opposites'),
            // so the cell carries the shear stress an equilibrium alone drops. No body force at open cells.
            s.push_str(
                "if open {
    var pxx = 0.0;
    var pxy = 0.0;
    var pyy = 0.0;
",
            );
            for i in 1..9 {
                let (cx, cy) = (C[i][0], C[i][1]);
                let _ = writeln!(
                    s,
                    "    let dn{i} = {} * nn.x + {} * nn.y;\n    let q{i} = select(select(0.0, 2.0, dn{i} > 0.0), 1.0, dn{i} == 0.0) * (f{i} - e{i});",
                    lit(f64::from(cx)),
                    lit(f64::from(cy))
                );
                if cx != 0 {
                    let _ = writeln!(s, "    pxx += q{i};");
                }
                if cx * cy != 0 {
                    let _ = writeln!(s, "    pxy += {} * q{i};", lit(f64::from(cx * cy)));
                }
                if cy != 0 {
                    let _ = writeln!(s, "    pyy += q{i};");
                }
            }
            for i in 0..9 {
                let (cx, cy) = (f64::from(C[i][0]), f64::from(C[i][1]));
                let _ = write!(s, "    o{i} = e{i}");
                for (coef, p) in [
                    (cx * cx - 1.0 / 3.0, "pxx"),
                    (2.0 * cx * cy, "pxy"),
                    (cy * cy - 1.0 / 3.0, "pyy"),
                ] {
                    if coef != 0.0 {
                        let a = 4.5 * W[i] * coef;
                        let a = if les {
                            format!("(1.0 - op) * {}", lit(a))
                        } else {
                            lit((1.0 - op) * a)
                        };
                        let _ = write!(s, " + {a} * {p}");
                    }
                }
                s.push_str(";\n");
            }
            s.push_str("}\n");
        }
    }
}

/// c_i · u as WGSL text.
pub(super) fn cu_expr(i: usize, ux: &str, uy: &str) -> String {
    let term = |c: i32, u: &str| match c {
        1 => format!("+ {u}"),
        -1 => format!("- {u}"),
        _ => String::new(),
    };
    let t = format!("{} {}", term(C[i][0], ux), term(C[i][1], uy));
    let t = t.trim().trim_start_matches('+').trim().to_owned();
    if t.is_empty() {
        "0.0".into()
    } else {
        format!("({t})")
    }
}
