//! One cell's update: the gather (pull, bounce-back, interpolated bounce-back), the moments, the open
//! boundaries (Zou/He with the regularisation), then the macroscopic or probe outputs or the collision and store.
// Direction indices address several tables (C, W, OPP) at once.
#![allow(clippy::needless_range_loop)]

use std::fmt::Write as _;

use super::{Edges, KernelSpec, Mode, PROBE_VALUES, Phase, half, lit};
use crate::d2q9::{C, OPP, W};
use crate::flags::{INDEX_SHIFT, MASK_SHIFT, TYPE_FLUID, TYPE_INLET, TYPE_MASK, TYPE_SOLID};

impl KernelSpec {
    /// One cell's update. `pair` is None for one cell per invocation (f32), or the half of the word ("a" low,
    /// "b" high) in the paired layout, where the loaded words are `g0`..`g8` and results go to `q{pair}{i}`.
    pub(super) fn cell(&self, s: &mut String, pair: Option<&str>) {
        let ind = if pair.is_some() { "        " } else { "    " };
        // This cell's index into flags and the macroscopic outputs.
        let cidx = match pair {
            Some("b") => "(idx + NH)",
            _ => "idx",
        };
        if let Some(c) = pair {
            let _ = writeln!(s, "{ind}let y = r{};", if c == "b" { " + HR" } else { "" });
        }
        // Cell index of the pull source of direction i (for its flag).
        let src_cell = |i: usize| -> String {
            match pair {
                None => format!("s{i}"),
                Some(c) => {
                    let (same, across) = if c == "a" { ("0u", "NH") } else { ("NH", "0u") };
                    format!("(s{i} + select({same}, {across}, {}))", Self::swapped(i))
                }
            }
        };
        // A population read as f32: direct in f32 storage, one half of a word in the paired layout.
        let read = |word: String, swap: &str| -> String {
            match pair {
                None => self.load(word),
                Some(c) => format!("ld({word}, {swap}).{}", half(c)),
            }
        };
        // A probe entry's five values, written by the cell the entry names (in the paired layout, one of the two).
        let probe_store = |vals: [&str; PROBE_VALUES]| -> String {
            let mut w = String::new();
            if let Some(c) = pair {
                let _ = writeln!(w, "if hsel == {} {{", c == "b");
            }
            for (j, v) in vals.iter().enumerate() {
                let _ = writeln!(
                    w,
                    "probe[2u * probe_count + k * {PROBE_VALUES}u + {j}u] = bitcast<u32>({v});"
                );
            }
            if pair.is_some() {
                w.push_str("}\n");
            }
            w
        };
        let mut close = "";
        if self.flags {
            let _ = writeln!(
                s,
                "{ind}let fl = flags[{cidx}];\n{ind}let ty = fl & {TYPE_MASK}u;"
            );
            if self.interpolated() {
                // A fluid cell's table index, when not 0, points at the wall distances of its links.
                let _ = writeln!(
                    s,
                    "{ind}let qk = select(0u, fl >> {INDEX_SHIFT}u, ty == {TYPE_FLUID}u);"
                );
            }
            let _ = writeln!(s, "{ind}if ty == {TYPE_SOLID}u {{");
            // A solid cell reports ρ = 1 and the wall's velocity.
            if self.mode != Mode::Step {
                let _ = writeln!(s, "{ind}    let uw = bval[fl >> {INDEX_SHIFT}u];");
            }
            if self.mode == Mode::Macro {
                for line in self.macro_store(cidx, ["1.0", "uw.x", "uw.y"]).lines() {
                    let _ = writeln!(s, "{ind}    {line}");
                }
            }
            if self.mode == Mode::Probe {
                for line in probe_store(["1.0", "uw.x", "uw.y", "0.0", "0.0"]).lines() {
                    let _ = writeln!(s, "{ind}    {line}");
                }
            }
            if let Some(c) = pair {
                // The other cell of the word still needs its update: no early return. The word store writes this
                // half too, so in-place steps write back the bits it holds: the even step's slots may hold
                // populations bounced into the solid cell, and an odd step's destination slot at x + c_i is
                // where that fluid cell keeps the population it bounces in this same step. A concurrent reader
                // of the half sees the same bits before and after the store. (Two-lattice solid slots are never
                // read.)
                if self.mode == Mode::Step {
                    for i in 0..9 {
                        let o = OPP[i];
                        let keep = match self.phase {
                            Phase::Ab => continue,
                            Phase::AaEven => format!("g{o}.{}", half(c)),
                            Phase::AaOdd if i == 0 => format!("g0.{}", half(c)),
                            Phase::AaOdd => {
                                format!(
                                    "ld({}, {}).{}",
                                    self.pop("a", i, &format!("s{o}")),
                                    Self::swapped(o),
                                    half(c)
                                )
                            }
                        };
                        let _ = writeln!(s, "{ind}    q{c}{i} = {keep};");
                    }
                }
                let _ = writeln!(s, "{ind}}} else {{");
                close = "}";
            } else {
                let _ = writeln!(s, "{ind}    return;\n{ind}}}");
            }
        }
        let ind2 = if close.is_empty() {
            ind.to_owned()
        } else {
            format!("{ind}    ")
        };
        let mut b = String::new();

        // Gather.
        b.push_str("// Stream (pull).\n");
        // Per direction i with flags: the population S_ī the cell sent towards a solid source (for probes).
        let mut outgoing = vec![String::new(); 9];
        // The population streaming in along direction i (from x − c_i).
        let pulled = |i: usize| -> String {
            match pair {
                Some(c) => format!("g{i}.{}", half(c)),
                None => self.load(match self.phase {
                    Phase::Ab => self.pop("a", i, &Self::src_or_idx(i)),
                    Phase::AaEven => self.pop("a", i, "idx"),
                    Phase::AaOdd => self.pop("a", OPP[i], &Self::src_or_idx(i)),
                }),
            }
        };
        for i in 0..9 {
            let o = OPP[i];
            let normal = pulled(i);
            if i == 0 || !self.flags {
                let _ = writeln!(b, "var f{i} = {normal};");
                continue;
            }
            // Bounce-back from a solid source: the cell's own outgoing population ī, plus Ladd's moving-wall
            // term. Two-lattice and odd in-place steps find it in the cell's own slot; an odd step wrote it into
            // slot ī of the solid source itself (every odd-step write goes to x + c_i, so a paired word is
            // always written whole), which is where the even step reads it.
            let bounced = match self.phase {
                Phase::Ab => read(self.pop("a", o, "idx"), "false"),
                Phase::AaOdd => read(self.pop("a", i, "idx"), "false"),
                Phase::AaEven => read(self.pop("a", o, &format!("s{i}")), Self::swapped(i)),
            };
            outgoing[i] = bounced.clone();
            let wall = format!(
                "{} * dot(vec2<f32>({}, {}), bval[flags[{}] >> {INDEX_SHIFT}u])",
                lit(6.0 * W[i]),
                lit(f64::from(C[i][0])),
                lit(f64::from(C[i][1])),
                src_cell(i)
            );
            let bit = 1u32 << (MASK_SHIFT as usize + i);
            if !self.interpolated() {
                let _ = writeln!(
                    b,
                    "var f{i}: f32;\nif (fl & {bit}u) != 0u {{ f{i} = {bounced} + {wall}; }} else {{ f{i} = {normal}; }}"
                );
                continue;
            }
            // Interpolated bounce-back (Bouzidi, Firdaouss & Lallemand): with the wall q of the way along the
            // link, q < 1/2 mixes in f_ī* one cell further from the wall (the pull of ī, unless that is solid
            // too), q ≥ 1/2 the cell's own f_i*, from the stash in place. A moving wall's Ladd term stays whole
            // for q < 1/2 and is divided by 2q for q ≥ 1/2 (Bouzidi et al.'s moving-boundary rule).
            let far = pulled(o);
            let own = if self.stashed() {
                self.stash_elem(i)
            } else {
                read(self.pop("a", i, "idx"), "false")
            };
            let obit = 1u32 << (MASK_SHIFT as usize + o);
            let _ = writeln!(
                b,
                "var f{i}: f32;
if (fl & {bit}u) != 0u {{
    let wl = {wall};
    f{i} = {bounced} + wl;
    if qk != 0u {{
        let q = bval[qk + {k}u].{comp};
        if q < 0.5 {{
            f{i} = 2.0 * q * f{i} + (1.0 - 2.0 * q) * select({far} + wl, f{i}, (fl & {obit}u) != 0u);
        }} else {{
            f{i} = (f{i} + (2.0 * q - 1.0) * {own}) / (2.0 * q);
        }}
    }}
}} else {{ f{i} = {normal}; }}",
                k = (i - 1) / 2,
                comp = if i % 2 == 1 { "x" } else { "y" },
            );
        }

        if self.mode == Mode::Probe {
            // Momentum exchange on the entry's links: c_d (f_d* + f_d̄) for d = ī, from stored values shifted by
            // w_d = w_ī, so 2w_ī goes back in.
            b.push_str("var fx = 0.0;\nvar fy = 0.0;\n");
            for i in 1..9 {
                if !self.flags {
                    break;
                }
                let (cx, cy) = (-C[i][0], -C[i][1]);
                let _ = writeln!(
                    b,
                    "if (pin.y & {}u) != 0u {{\n    let p = {} + f{i} + {};\n    fx += {} * p;\n    fy += {} * p;\n}}",
                    1u32 << i,
                    outgoing[i],
                    lit(2.0 * W[i]),
                    lit(f64::from(cx)),
                    lit(f64::from(cy)),
                );
            }
        }
        // Moments. Stored values are f − w, so Σ f̃ = ρ − 1 and Σ c f̃ = ρu.
        b.push_str("var rd = f0 + f1 + f2 + f3 + f4 + f5 + f6 + f7 + f8;\nvar rho = 1.0 + rd;\n");
        b.push_str(
            "let jx = f1 - f3 + f5 - f6 - f7 + f8;\nlet jy = f2 - f4 + f5 + f6 - f7 - f8;\n",
        );
        if self.has_force() {
            let _ = writeln!(
                b,
                "let ir = 1.0 / rho;\nvar ux = (jx + {}) * ir;\nvar uy = (jy + {}) * ir;",
                lit(0.5 * self.force[0]),
                lit(0.5 * self.force[1])
            );
        } else {
            b.push_str("let ir = 1.0 / rho;\nvar ux = jx * ir;\nvar uy = jy * ir;\n");
        }
        if self.flags {
            // The outward normal, kept for the regularisation after the collision.
            b.push_str("let open = ty >= 2u;\nvar nn = vec2<f32>(0.0, 1.0);\nif open {\n");
            let (x0, x1, y0) = if self.edges == Edges::whole(self.nx, self.ny) {
                ("0u".to_owned(), "NX - 1u".to_owned(), "0u".to_owned())
            } else {
                (
                    format!("{}u", self.edges.x0),
                    format!("{}u", self.edges.x1),
                    format!("{}u", self.edges.y0),
                )
            };
            let _ = write!(
                b,
                "    if x == {x0} {{ nn = vec2<f32>(-1.0, 0.0); }} else if x == {x1} {{ nn = vec2<f32>(1.0, 0.0); }}
    else if y == {y0} {{ nn = vec2<f32>(0.0, -1.0); }}
    // Zou/He: populations along the edge count once, those leaving through it twice.
    var s0 = 0.0;
    var sp = 0.0;
",
            );
            for i in 0..9 {
                let _ = writeln!(
                    b,
                    "    let d{i} = {} * nn.x + {} * nn.y;\n    s0 += select(0.0, f{i} + {w}, d{i} == 0.0);\n    sp += select(0.0, f{i} + {w}, d{i} > 0.0);",
                    lit(f64::from(C[i][0])),
                    lit(f64::from(C[i][1])),
                    w = lit(W[i])
                );
            }
            let _ = write!(
                b,
                "    let bv = bval[fl >> {INDEX_SHIFT}u];
    if ty == {TYPE_INLET}u {{
        ux = bv.x;
        uy = bv.y;
        rho = (s0 + 2.0 * sp) / (1.0 + dot(bv, nn));
    }} else {{
        rho = bv.x;
        let un = (s0 + 2.0 * sp) / rho - 1.0;
        ux = un * nn.x;
        uy = un * nn.y;
    }}
    rd = rho - 1.0;
}}
"
            );
        }
        if self.mode == Mode::Macro {
            b.push_str(&self.macro_store(cidx, ["rho", "ux", "uy"]));
        } else if self.mode == Mode::Probe {
            b.push_str(&probe_store(["rho", "ux", "uy", "fx", "fy"]));
        } else {
            if self.ablation == Some(super::Ablation::NoCollision) {
                for i in 0..9 {
                    let _ = writeln!(b, "var o{i} = f{i};");
                }
            } else {
                self.collide(&mut b);
            }
            if self.stashed() {
                b.push_str("// Keep the own population of each interpolated link for the next step.\nif qk != 0u {\n");
                for i in 1..9 {
                    let bit = 1u32 << (MASK_SHIFT as usize + i);
                    let _ = writeln!(
                        b,
                        "    if (fl & {bit}u) != 0u {{ {} = rt(o{i}); }}",
                        self.stash_elem(i)
                    );
                }
                b.push_str("}\n");
            }
            b.push_str("// Store.\n");
            for i in 0..9 {
                let o = OPP[i];
                let v = self.store(format!("o{i}"));
                let _ = match (pair, self.phase) {
                    (Some(c), _) => writeln!(b, "q{c}{i} = o{i};"),
                    (None, Phase::Ab) => writeln!(b, "{} = {v};", self.pop("b", i, "idx")),
                    (None, Phase::AaEven) => writeln!(b, "{} = {v};", self.pop("a", o, "idx")),
                    (None, Phase::AaOdd) if i == 0 => {
                        writeln!(b, "{} = {v};", self.pop("a", 0, "idx"))
                    }
                    // Into slot i of x + c_i, also when that cell is solid (see the gather above).
                    (None, Phase::AaOdd) => {
                        writeln!(b, "{} = {v};", self.pop("a", i, &format!("s{o}")))
                    }
                };
            }
        }
        for line in b.lines() {
            let _ = writeln!(s, "{ind2}{line}");
        }
        if !close.is_empty() {
            let _ = writeln!(s, "{ind}{close}");
        }
    }

    /// The macroscopic kernel's stores of ρ, u_x and u_y (`vals`) for the cell at `cidx`: three buffers, or one
    /// holding every cell's ρ, then every u_x, then every u_y ([`KernelSpec::packed_macros`]).
    fn macro_store(&self, cidx: &str, vals: [&str; 3]) -> String {
        let [rho, ux, uy] = vals;
        if self.packed_macros {
            format!(
                "macros[{cidx}] = {rho};\nmacros[N + {cidx}] = {ux};\nmacros[2u * N + {cidx}] = {uy};\n"
            )
        } else {
            format!("rho_out[{cidx}] = {rho};\nux_out[{cidx}] = {ux};\nuy_out[{cidx}] = {uy};\n")
        }
    }
}
