//! The WGSL generator: one fused stream-collide kernel per (storage, streaming phase, collision, force, flags),
//! and a matching kernel that only gathers and writes ρ and u. Sizes and rates are baked in as literals.
// Direction indices address several tables (C, W, OPP) at once.
#![allow(clippy::needless_range_loop)]

use std::fmt::Write as _;

use bespoke_gpu::GRID_WGSL;

use crate::config::{Collision, Storage};
use crate::d2q9::{C, OPP, W};
use crate::flags::{INDEX_SHIFT, MASK_SHIFT, TYPE_INLET, TYPE_SOLID};

/// Populations are stored as (f − w)·SCALE in f16 so that deviations from rest use the normal range.
pub const F16_SCALE: f64 = 16384.0;
/// Invocations per workgroup (one cell each).
pub const WG: u32 = 64;

/// Which streaming step a kernel performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Two lattices: pull from `a`, write the cell in `b`.
    Ab,
    /// AA pattern, even step: read slot i of the cell, write the result into its slot ī.
    AaEven,
    /// AA pattern, odd step: read slot ī of the pull source x − c_i, write slot i of x + c_i.
    AaOdd,
}

/// What the kernel writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Stream, collide, store populations.
    Step,
    /// Stream and compute ρ and u (as the next collision would see them); store those, leave populations.
    Macro,
}

/// Everything a generated kernel depends on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelSpec {
    pub nx: usize,
    pub ny: usize,
    pub storage: Storage,
    pub collision: Collision,
    pub force: [f64; 2],
    /// Whether the lattice has a flag field (false: every cell fluid and periodic, no flag reads).
    pub flags: bool,
    pub phase: Phase,
    pub mode: Mode,
}

/// An f32 literal exactly as Rust rounds `v` to f32 (shortest round-trip text).
fn lit(v: f64) -> String {
    let s = format!("{:?}", v as f32);
    if s.starts_with('-') {
        format!("({s})")
    } else {
        s
    }
}

impl KernelSpec {
    pub fn name(&self) -> String {
        format!(
            "lbm-{:?}-{:?}-{}-{}{}{}",
            self.phase,
            self.mode,
            self.storage.name(),
            self.collision.name(),
            if self.force != [0.0, 0.0] {
                "-force"
            } else {
                ""
            },
            if self.flags { "-flags" } else { "" }
        )
        .to_lowercase()
    }

    fn has_force(&self) -> bool {
        self.force != [0.0, 0.0]
    }

    /// Storage bindings the kernel declares.
    pub fn storage_bindings(&self) -> usize {
        let pops = match (self.phase, self.mode) {
            (Phase::Ab, Mode::Step) => 18,
            _ => 9,
        };
        pops + if self.flags { 2 } else { 0 } + if self.mode == Mode::Macro { 3 } else { 0 }
    }

    fn load(&self, expr: &str) -> String {
        match self.storage {
            Storage::F32 => expr.to_owned(),
            Storage::F16 => format!("(f32({expr}) * {})", lit(1.0 / F16_SCALE)),
        }
    }

    fn store(&self, expr: &str) -> String {
        match self.storage {
            Storage::F32 => expr.to_owned(),
            Storage::F16 => format!("f16({expr} * {})", lit(F16_SCALE)),
        }
    }

    /// Index expression of the cell at x − c_i (the pull source of direction i).
    fn source(i: usize) -> String {
        let col = match C[i][0] {
            1 => "xm",
            0 => "x",
            _ => "xp",
        };
        let row = match C[i][1] {
            1 => "ym",
            0 => "y0",
            _ => "yp",
        };
        format!("{row} + {col}")
    }

    /// The WGSL source.
    pub fn generate(&self) -> String {
        let mut s = String::new();
        let ty = match self.storage {
            Storage::F32 => "f32",
            Storage::F16 => "f16",
        };
        if self.storage == Storage::F16 {
            s.push_str("enable f16;\n\n");
        }
        // Grids past 65 535 workgroups are split by the device layer; the prelude gives the logical id.
        s.push_str(GRID_WGSL);
        let _ = writeln!(
            s,
            "// bespoke-lbm D2Q9 {}: {}x{} cells, populations stored shifted by their weights.",
            self.name(),
            self.nx,
            self.ny
        );
        let _ = writeln!(
            s,
            "const NX: u32 = {}u;\nconst NY: u32 = {}u;\nconst N: u32 = {}u;\n",
            self.nx,
            self.ny,
            self.nx * self.ny
        );

        let mut binding = 0;
        let src_access = match (self.phase, self.mode) {
            (Phase::Ab, _) | (_, Mode::Macro) => "read",
            _ => "read_write",
        };
        for i in 0..9 {
            let _ = writeln!(
                s,
                "@group(0) @binding({binding}) var<storage, {src_access}> a{i}: array<{ty}>;"
            );
            binding += 1;
        }
        if self.phase == Phase::Ab && self.mode == Mode::Step {
            for i in 0..9 {
                let _ = writeln!(
                    s,
                    "@group(0) @binding({binding}) var<storage, read_write> b{i}: array<{ty}>;"
                );
                binding += 1;
            }
        }
        if self.flags {
            let _ = writeln!(
                s,
                "@group(0) @binding({binding}) var<storage, read> flags: array<u32>;"
            );
            let _ = writeln!(
                s,
                "@group(0) @binding({}) var<storage, read> bval: array<vec2<f32>>;",
                binding + 1
            );
            binding += 2;
        }
        if self.mode == Mode::Macro {
            for name in ["rho_out", "ux_out", "uy_out"] {
                let _ = writeln!(
                    s,
                    "@group(0) @binding({binding}) var<storage, read_write> {name}: array<f32>;"
                );
                binding += 1;
            }
        }

        let _ = write!(
            s,
            "
@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let idx = bespoke_workgroup_linear(wid) * {WG}u + lid;
    if idx >= N {{ return; }}
    let x = idx % NX;
    let y0 = idx - x;
    let y = idx / NX;
    let xm = select(x - 1u, NX - 1u, x == 0u);
    let xp = select(x + 1u, 0u, x == NX - 1u);
    let ym = select(y - 1u, NY - 1u, y == 0u) * NX;
    let yp = select(y + 1u, 0u, y == NY - 1u) * NX;
"
        );
        for i in 1..9 {
            let _ = writeln!(s, "    let s{i} = {};", Self::source(i));
        }
        if self.flags {
            let _ = writeln!(s, "    let fl = flags[idx];\n    let ty = fl & 15u;");
            let _ = writeln!(s, "    if ty == {TYPE_SOLID}u {{");
            if self.mode == Mode::Macro {
                s.push_str(
                    "        let uw = bval[fl >> 13u];\n        rho_out[idx] = 1.0;\n        ux_out[idx] = uw.x;\n        uy_out[idx] = uw.y;\n",
                );
            }
            s.push_str("        return;\n    }\n");
        }

        // Gather.
        s.push_str("    // Stream (pull).\n");
        for i in 0..9 {
            let o = OPP[i];
            let normal = match self.phase {
                Phase::Ab => format!(
                    "a{i}[{}]",
                    if i == 0 {
                        "idx".into()
                    } else {
                        format!("s{i}")
                    }
                ),
                Phase::AaEven => format!("a{i}[idx]"),
                Phase::AaOdd => format!(
                    "a{o}[{}]",
                    if i == 0 {
                        "idx".into()
                    } else {
                        format!("s{i}")
                    }
                ),
            };
            if i == 0 || !self.flags {
                let _ = writeln!(s, "    var f{i} = {};", self.load(&normal));
                continue;
            }
            // Bounce-back from a solid source: the cell's own outgoing population, plus Ladd's moving-wall term.
            let bounced = match self.phase {
                Phase::Ab => format!("a{o}[idx]"),
                Phase::AaEven => format!("a{i}[idx]"),
                Phase::AaOdd => format!("a{i}[idx]"),
            };
            let wall = format!(
                "{} * dot(vec2<f32>({}, {}), bval[flags[s{i}] >> {INDEX_SHIFT}u])",
                lit(6.0 * W[i]),
                lit(f64::from(C[i][0])),
                lit(f64::from(C[i][1]))
            );
            let bit = 1u32 << (MASK_SHIFT as usize + i);
            if self.phase == Phase::AaEven {
                let _ = writeln!(
                    s,
                    "    var f{i} = {};\n    if (fl & {bit}u) != 0u {{ f{i} += {wall}; }}",
                    self.load(&normal)
                );
            } else {
                let _ = writeln!(
                    s,
                    "    var f{i}: f32;\n    if (fl & {bit}u) != 0u {{ f{i} = {} + {wall}; }} else {{ f{i} = {}; }}",
                    self.load(&bounced),
                    self.load(&normal)
                );
            }
        }

        // Moments. Stored values are f − w, so Σ f̃ = ρ − 1 and Σ c f̃ = ρu.
        s.push_str(
            "    var rd = f0 + f1 + f2 + f3 + f4 + f5 + f6 + f7 + f8;\n    var rho = 1.0 + rd;\n",
        );
        s.push_str("    let jx = f1 - f3 + f5 - f6 - f7 + f8;\n    let jy = f2 - f4 + f5 + f6 - f7 - f8;\n");
        if self.has_force() {
            let _ = writeln!(
                s,
                "    var ux = (jx + {}) / rho;\n    var uy = (jy + {}) / rho;",
                lit(0.5 * self.force[0]),
                lit(0.5 * self.force[1])
            );
        } else {
            s.push_str("    var ux = jx / rho;\n    var uy = jy / rho;\n");
        }
        if self.flags {
            s.push_str("    let open = ty >= 2u;\n    if open {\n");
            s.push_str(
                "        var n = vec2<f32>(0.0, 1.0);
        if x == 0u { n = vec2<f32>(-1.0, 0.0); } else if x == NX - 1u { n = vec2<f32>(1.0, 0.0); }
        else if y == 0u { n = vec2<f32>(0.0, -1.0); }
        // Zou/He: populations along the edge count once, those leaving through it twice.
        var s0 = 0.0;
        var sp = 0.0;
",
            );
            for i in 0..9 {
                let _ = writeln!(
                    s,
                    "        let d{i} = {} * n.x + {} * n.y;\n        s0 += select(0.0, f{i} + {w}, d{i} == 0.0);\n        sp += select(0.0, f{i} + {w}, d{i} > 0.0);",
                    lit(f64::from(C[i][0])),
                    lit(f64::from(C[i][1])),
                    w = lit(W[i])
                );
            }
            let _ = write!(
                s,
                "        let bv = bval[fl >> {INDEX_SHIFT}u];
        if ty == {TYPE_INLET}u {{
            ux = bv.x;
            uy = bv.y;
            rho = (s0 + 2.0 * sp) / (1.0 + dot(bv, n));
        }} else {{
            rho = bv.x;
            let un = (s0 + 2.0 * sp) / rho - 1.0;
            ux = un * n.x;
            uy = un * n.y;
        }}
        rd = rho - 1.0;
    }}
"
            );
        }
        if self.mode == Mode::Macro {
            s.push_str(
                "    rho_out[idx] = rho;\n    ux_out[idx] = ux;\n    uy_out[idx] = uy;\n}\n",
            );
            return s;
        }

        // Equilibrium (shifted): w (ρ − 1 + ρ (3 c·u + 9/2 (c·u)² − 3/2 u·u)).
        s.push_str("    let uu = 1.5 * (ux * ux + uy * uy);\n");
        for i in 0..9 {
            let cu = cu_expr(i, "ux", "uy");
            if i == 0 {
                let _ = writeln!(s, "    let e0 = {} * (rd - rho * uu);", lit(W[0]));
            } else {
                let _ = writeln!(
                    s,
                    "    let cu{i} = {cu};\n    let e{i} = {} * (rd + rho * (3.0 * cu{i} + 4.5 * cu{i} * cu{i} - uu));",
                    lit(W[i])
                );
            }
        }
        let (op, om) = self.collision.rates();
        // Guo forcing: F_i = w_i (3 c·F + 9 (c·u)(c·F) − 3 u·F), split into its even and odd parts for TRT.
        if self.has_force() {
            let _ = writeln!(
                s,
                "    let uf = ux * {} + uy * {};",
                lit(self.force[0]),
                lit(self.force[1])
            );
        }
        let cf = |i: usize| f64::from(C[i][0]) * self.force[0] + f64::from(C[i][1]) * self.force[1];
        let fplus = |i: usize| -> String {
            if !self.has_force() {
                return String::new();
            }
            let sym = if i == 0 {
                format!("{} * uf", lit(-3.0 * W[0]))
            } else {
                format!("{} * (9.0 * cu{i} * {} - 3.0 * uf)", lit(W[i]), lit(cf(i)))
            };
            format!(" + {} * ({sym})", lit(1.0 - 0.5 * op))
        };
        let fminus = |i: usize| -> f64 {
            if !self.has_force() {
                return 0.0;
            }
            (1.0 - 0.5 * om) * 3.0 * W[i] * cf(i)
        };
        let _ = writeln!(s, "    // Collide ({}).", self.collision.name());
        let _ = writeln!(s, "    var o0 = f0 - {} * (f0 - e0){};", lit(op), fplus(0));
        for i in [1usize, 2, 5, 6] {
            let j = OPP[i];
            let _ = writeln!(
                s,
                "    let p{i} = 0.5 * ((f{i} + f{j}) - (e{i} + e{j}));\n    let m{i} = 0.5 * ((f{i} - f{j}) - (e{i} - e{j}));"
            );
            let _ = writeln!(
                s,
                "    var o{i} = f{i} - {op} * p{i} - {om} * m{i}{fp} + {fm};\n    var o{j} = f{j} - {op} * p{i} + {om} * m{i}{fp} - {fm};",
                op = lit(op),
                om = lit(om),
                fp = fplus(i),
                fm = lit(fminus(i)),
            );
        }
        if self.flags {
            s.push_str("    if open {\n");
            for i in 0..9 {
                let _ = writeln!(s, "        o{i} = e{i};");
            }
            s.push_str("    }\n");
        }

        s.push_str("    // Store.\n");
        for i in 0..9 {
            let o = OPP[i];
            let v = self.store(&format!("o{i}"));
            match self.phase {
                Phase::Ab => {
                    let _ = writeln!(s, "    b{i}[idx] = {v};");
                }
                Phase::AaEven => {
                    let _ = writeln!(s, "    a{o}[idx] = {v};");
                }
                Phase::AaOdd if i == 0 => {
                    let _ = writeln!(s, "    a0[idx] = {v};");
                }
                Phase::AaOdd => {
                    // Destination x + c_i is the pull source of ī; if it is solid, bounce into the cell's slot ī.
                    if self.flags {
                        let bit = 1u32 << (MASK_SHIFT as usize + o);
                        let _ = writeln!(
                            s,
                            "    if (fl & {bit}u) != 0u {{ a{o}[idx] = {v}; }} else {{ a{i}[s{o}] = {v}; }}"
                        );
                    } else {
                        let _ = writeln!(s, "    a{i}[s{o}] = {v};");
                    }
                }
            }
        }
        s.push_str("}\n");
        s
    }
}

/// c_i · u as WGSL text.
fn cu_expr(i: usize, ux: &str, uy: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use bespoke_gpu::{caps_for, validate_wgsl};

    #[test]
    fn every_kernel_validates() {
        let mut n = 0;
        for storage in [Storage::F32, Storage::F16] {
            for collision in [Collision::Bgk { omega: 1.3 }, Collision::trt(0.7)] {
                for force in [[0.0, 0.0], [1e-5, -2e-6]] {
                    for flags in [false, true] {
                        for phase in [Phase::Ab, Phase::AaEven, Phase::AaOdd] {
                            for mode in [Mode::Step, Mode::Macro] {
                                let spec = KernelSpec {
                                    nx: 37,
                                    ny: 5,
                                    storage,
                                    collision,
                                    force,
                                    flags,
                                    phase,
                                    mode,
                                };
                                let src = spec.generate();
                                validate_wgsl(&src, caps_for(false, storage == Storage::F16))
                                    .unwrap_or_else(|e| panic!("{}: {e}\n{src}", spec.name()));
                                let decl = src.matches("@group(0) @binding(").count();
                                assert_eq!(decl, spec.storage_bindings(), "{}", spec.name());
                                n += 1;
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(n, 96);
    }

    #[test]
    fn cu_expressions() {
        assert_eq!(cu_expr(0, "ux", "uy"), "0.0");
        assert_eq!(cu_expr(1, "ux", "uy"), "(ux)");
        assert_eq!(cu_expr(7, "ux", "uy"), "(- ux - uy)");
        assert_eq!(cu_expr(8, "ux", "uy"), "(ux - uy)");
    }
}
