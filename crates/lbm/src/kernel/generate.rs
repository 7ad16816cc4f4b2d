//! The WGSL text of a lattice kernel: constants and storage helpers, bindings, the entry (all cells, a region's
//! rectangles or probe entries; one or several cells per invocation), neighbours, then each cell's update
//! (`cell.rs`) and, for paired f16 words, the word's loads and stores.
// Direction indices address several tables (C, OPP) at once.
#![allow(clippy::needless_range_loop)]

use std::fmt::Write as _;

use bespoke_gpu::GRID_WGSL;

use super::{Ablation, F16_SCALE, KernelSpec, Mode, PROBE_VALUES, Phase, Region, lit};
use crate::config::Layout;
use crate::d2q9::{C, OPP};

impl KernelSpec {
    /// Index expression of the cell (or word) at x − c_i (the pull source of direction i).
    pub(super) fn source(i: usize) -> String {
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

    /// Paired layout: whether the pull source of direction i lies across the fold (halves swapped).
    pub(super) fn swapped(i: usize) -> &'static str {
        match C[i][1] {
            1 => "wm",
            0 => "false",
            _ => "wp",
        }
    }

    /// `s{i}`, or `idx` for the rest direction.
    pub(super) fn src_or_idx(i: usize) -> String {
        if i == 0 {
            "idx".into()
        } else {
            format!("s{i}")
        }
    }

    /// The WGSL source.
    pub fn generate(&self) -> String {
        let mut s = String::new();
        let ty = match self.layout() {
            Layout::F32 => "f32",
            Layout::F16Paired => "u32",
            Layout::F16Single => "f16",
        };
        if self.layout() == Layout::F16Single {
            s.push_str("enable f16;\n\n");
        }
        // Grids past 65 535 workgroups are split by the device layer; the prelude gives the logical id.
        s.push_str(GRID_WGSL);
        let _ = writeln!(
            s,
            "// bespoke-lbm D2Q9 {}: {}x{} cells, populations stored shifted by their weights{}.",
            self.name(),
            self.nx,
            self.ny,
            match self.layout() {
                Layout::F32 => "",
                Layout::F16Paired => ", two cells (rows y and y + NY/2) per u32 word",
                Layout::F16Single => ", one f16 per cell",
            }
        );
        let _ = writeln!(
            s,
            "const NX: u32 = {}u;\nconst NY: u32 = {}u;\nconst N: u32 = {}u;",
            self.nx,
            self.ny,
            self.nx * self.ny
        );
        // Where the device's own f32 → f16 conversion does not round to nearest even (a pack toward zero, as
        // AMD's hardware has: `bespoke_gpu::Gpu::rounds_f16_to_nearest_even`), each stored value is rounded
        // first, explicitly, so that the conversion is exact. The rounding function once, for the stores and the
        // stash alike.
        let round_trip = matches!(self.layout(), Layout::F16Paired | Layout::F16Single)
            && (self.exact_f16 || (self.stashed() && !self.folded_f16));
        let (exact, exact_end) = if self.exact_f16 {
            ("to_f16_and_back(", ")")
        } else {
            ("", "")
        };
        if self.paired() {
            let stored = if self.exact_f16 {
                "let s = select(v, v.yx, swap) * {scale};\n    \
                 return pack2x16float(vec2<f32>(to_f16_and_back(s.x), to_f16_and_back(s.y)));"
            } else {
                "return pack2x16float(select(v, v.yx, swap) * {scale});"
            }
            .replace("{scale}", &lit(F16_SCALE));
            let _ = write!(
                s,
                "const HR: u32 = {hr}u;
const NH: u32 = {nh}u;

// Word → (low cell, high cell) values, swapped when the word was read across the fold.
fn ld(w: u32, swap: bool) -> vec2<f32> {{
    let v = unpack2x16float(w) * {inv};
    return select(v, v.yx, swap);
}}

fn st(v: vec2<f32>, swap: bool) -> u32 {{
    {stored}
}}
",
                hr = self.ny / 2,
                nh = self.nx * self.ny / 2,
                inv = lit(1.0 / F16_SCALE),
            );
        }
        if self.layout() == Layout::F16Single {
            let _ = write!(
                s,
                "
fn ld1(v: f16) -> f32 {{
    return f32(v) * {inv};
}}

fn st1(v: f32) -> f16 {{
    return f16({exact}v * {scale}{exact_end});
}}
",
                inv = lit(1.0 / F16_SCALE),
                scale = lit(F16_SCALE)
            );
        }
        if round_trip {
            s.push_str(F16_ROUND_TRIP_WGSL);
        }
        if self.stashed() {
            // A stashed value must equal what a load of the stored element would return. Written as a store and a
            // load (`ld(st(v))`), a driver may fold the round trip away, and NVIDIA's did in some launch shapes and
            // not others (an H200 on 2026-11-28: 3 cells per invocation gave other f16 in-place bits than 1), so it
            // is rounded explicitly: in integers for f16's normal range, by `round` (ties to even) for its
            // subnormals, neither of which a compiler may drop. `folded_f16` keeps the fold's behaviour for the
            // tests that emulate such a driver; checkpoints save the stash, so a restart does not depend on it.
            let body = match self.layout() {
                Layout::F32 => "v".to_string(),
                _ if self.folded_f16 => "v".to_string(),
                Layout::F16Paired | Layout::F16Single => format!(
                    "to_f16_and_back(v * {scale}) * {inv}",
                    inv = lit(1.0 / F16_SCALE),
                    scale = lit(F16_SCALE)
                ),
            };
            let _ = write!(
                s,
                "
// A population as storing and reloading it gives back.
fn rt(v: f32) -> f32 {{
    return {body};
}}
"
            );
        }
        s.push('\n');

        let mut binding = 0;
        let src_access = match (self.phase, self.mode) {
            (Phase::Ab, _) | (_, Mode::Macro | Mode::Probe) => "read",
            _ => "read_write",
        };
        let mut sets = vec![("a", src_access)];
        if self.phase == Phase::Ab && self.mode == Mode::Step {
            sets.push(("b", "read_write"));
        }
        for (set, access) in sets {
            let names: Vec<String> = if self.one_buffer > 0 {
                vec![set.to_owned()]
            } else {
                (0..9).map(|i| format!("{set}{i}")).collect()
            };
            for name in names {
                let _ = writeln!(
                    s,
                    "@group(0) @binding({binding}) var<storage, {access}> {name}: array<{ty}>;"
                );
                binding += 1;
            }
        }
        if self.flags {
            let _ = writeln!(
                s,
                "@group(0) @binding({binding}) var<storage, read> flags: array<u32>;"
            );
            // The step writes the stash where it lies after the table.
            let access = if self.stashed() && self.packed_stash && self.mode == Mode::Step {
                "read_write"
            } else {
                "read"
            };
            let _ = writeln!(
                s,
                "@group(0) @binding({}) var<storage, {access}> bval: array<vec2<f32>>;",
                binding + 1
            );
            binding += 2;
        }
        if self.stashed() && !self.packed_stash {
            let access = if self.mode == Mode::Step {
                "read_write"
            } else {
                "read"
            };
            let _ = writeln!(
                s,
                "@group(0) @binding({binding}) var<storage, {access}> stash: array<f32>;"
            );
            binding += 1;
        }
        if self.mode == Mode::Macro {
            let names: &[&str] = if self.packed_macros {
                &["macros"]
            } else {
                &["rho_out", "ux_out", "uy_out"]
            };
            for name in names {
                let _ = writeln!(
                    s,
                    "@group(0) @binding({binding}) var<storage, read_write> {name}: array<f32>;"
                );
                binding += 1;
            }
        }
        if self.mode == Mode::Probe {
            let _ = writeln!(
                s,
                "@group(0) @binding({binding}) var<storage, read_write> probe: array<u32>;"
            );
        }

        let wg = self.wg;
        let entry = if let Region::Rects { count, rects, .. } = self.region {
            // Invocation k of the region → the cell (or word) index of its rectangle.
            let mut e = format!(
                "    let k = bespoke_workgroup_linear(wid) * {wg}u + lid;\n    var idx = 0u;\n    "
            );
            let mut base = 0u32;
            for [x0, y0, w, h] in &rects[..count] {
                let _ = write!(
                    e,
                    "if k < {end}u {{\n        let j = k - {base}u;\n        idx = ({y0}u + j / {w}u) * NX + {x0}u + j % {w}u;\n    }} else ",
                    end = base + w * h
                );
                base += w * h;
            }
            e.push_str("{\n        return;\n    }\n");
            e
        } else if self.mode != Mode::Probe {
            let n = if self.paired() { "NH" } else { "N" };
            // Workgroup 0 takes the last block where the kernel walks backwards (`KernelSpec::descending`);
            // lanes stay ascending.
            let (pre, w) = bespoke_gpu::workgroup_block(
                self.walks_descending(),
                self.launched().div_ceil(wg as usize),
            );
            format!("    {pre}let idx = {w} * {wg}u + lid;\n    if idx >= {n} {{ return; }}\n")
        } else {
            let cell = if self.paired() {
                "    // The entry's cell is the high half of word pin.x − NH when pin.x ≥ NH.
    let hsel = pin.x >= NH;
    let idx = pin.x - select(0u, NH, hsel);
"
            } else {
                "    let idx = pin.x;\n"
            };
            format!(
                "    let k = bespoke_workgroup_linear(wid) * {wg}u + lid;
    let probe_count = arrayLength(&probe) / {words}u;
    if k >= probe_count {{ return; }}
    let pin = vec2<u32>(probe[2u * k], probe[2u * k + 1u]);
{cell}",
                words = 2 + PROBE_VALUES
            )
        };
        let cells = self.per_invocation();
        if cells == 1 {
            let _ = write!(
                s,
                "
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
{entry}    let x = idx % NX;
    let y0 = idx - x;
"
            );
        } else {
            // Several cells per invocation: the update is a function (its early returns end one cell's update),
            // called for the same lane of `cells` consecutive blocks of the workgroup size.
            let _ = write!(
                s,
                "
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
{first}    for (var j = 0u; j < {cells}u; j++) {{
        let idx = (first + j) * {wg}u + lid;
        if idx >= {n} {{ return; }}
        update(idx);
    }}
}}

fn update(idx: u32) {{
    let x = idx % NX;
    let y0 = idx - x;
",
                n = if self.paired() { "NH" } else { "N" },
                first = {
                    // Workgroup 0 takes the last group of blocks where the kernel walks backwards
                    // (`KernelSpec::descending`); within a group the blocks, and in each block the lanes, stay
                    // ascending.
                    let (pre, w) = bespoke_gpu::workgroup_block(
                        self.walks_descending(),
                        self.launched().div_ceil(wg as usize),
                    );
                    format!("    {pre}let first = {w} * {cells}u;\n")
                }
            );
        }
        if self.ablation == Some(Ablation::MaskWrap) {
            s.push_str("    let xm = (x - 1u) & (NX - 1u);\n    let xp = (x + 1u) & (NX - 1u);\n");
        } else {
            s.push_str(
                "    let xm = select(x - 1u, NX - 1u, x == 0u);\n    let xp = select(x + 1u, 0u, x == NX - 1u);\n",
            );
        }
        let mask = self.ablation == Some(Ablation::MaskWrap);
        let no_pull = self.ablation == Some(Ablation::NoPull);
        if self.paired() {
            let rows = if mask {
                "    let r = idx / NX;
    let ym = ((r - 1u) & (HR - 1u)) * NX;
    let yp = ((r + 1u) & (HR - 1u)) * NX;
    let wm = r == 0u;
    let wp = r == HR - 1u;
"
            } else {
                "    let r = idx / NX;
    // Rows r − 1 and r + 1 of the folded lattice; a pull across the fold reads the other half of the word.
    let ym = select(r - 1u, HR - 1u, r == 0u) * NX;
    let yp = select(r + 1u, 0u, r == HR - 1u) * NX;
    let wm = r == 0u;
    let wp = r == HR - 1u;
"
            };
            if no_pull {
                // The ablation pulls nothing, so nothing crosses the fold.
                s.push_str(
                    &rows
                        .replace("let wm = r == 0u;", "let wm = false;")
                        .replace("let wp = r == HR - 1u;", "let wp = false;"),
                );
            } else {
                s.push_str(rows);
            }
        } else {
            s.push_str(if mask {
                "    let y = idx / NX;
    let ym = ((y - 1u) & (NY - 1u)) * NX;
    let yp = ((y + 1u) & (NY - 1u)) * NX;
"
            } else {
                "    let y = idx / NX;
    let ym = select(y - 1u, NY - 1u, y == 0u) * NX;
    let yp = select(y + 1u, 0u, y == NY - 1u) * NX;
"
            });
        }
        for i in 1..9 {
            let src = if no_pull {
                "idx".to_owned()
            } else {
                Self::source(i)
            };
            let _ = writeln!(s, "    let s{i} = {src};");
        }

        if !self.paired() {
            self.cell(&mut s, None);
            s.push_str("}\n");
            return s;
        }

        // Paired: one word load per direction, then each cell of the pair in its own scope, then one word store.
        s.push_str("    // Stream (pull), both cells of the word.\n");
        for i in 0..9 {
            let o = OPP[i];
            let (word, swap) = match self.phase {
                Phase::Ab => (self.pop("a", i, &Self::src_or_idx(i)), Self::swapped(i)),
                Phase::AaEven => (self.pop("a", i, "idx"), "false"),
                Phase::AaOdd => (self.pop("a", o, &Self::src_or_idx(i)), Self::swapped(i)),
            };
            let _ = writeln!(s, "    let g{i} = ld({word}, {swap});");
        }
        if self.mode == Mode::Step {
            for c in ["a", "b"] {
                for i in 0..9 {
                    let _ = writeln!(s, "    var q{c}{i} = 0.0;");
                }
            }
        }
        for c in ["a", "b"] {
            let _ = writeln!(s, "    {{ // cell {c}");
            self.cell(&mut s, Some(c));
            s.push_str("    }\n");
        }
        if self.mode == Mode::Step {
            s.push_str("    // Store.\n");
            for i in 0..9 {
                let o = OPP[i];
                let v = format!("vec2<f32>(qa{i}, qb{i})");
                let _ = match self.phase {
                    Phase::Ab => writeln!(s, "    {} = st({v}, false);", self.pop("b", i, "idx")),
                    Phase::AaEven => {
                        writeln!(s, "    {} = st({v}, false);", self.pop("a", o, "idx"))
                    }
                    Phase::AaOdd if i == 0 => {
                        writeln!(s, "    {} = st({v}, false);", self.pop("a", 0, "idx"))
                    }
                    Phase::AaOdd => writeln!(
                        s,
                        "    {} = st({v}, {});",
                        self.pop("a", i, &format!("s{o}")),
                        Self::swapped(o)
                    ),
                };
            }
        }
        s.push_str("}\n");
        s
    }
}

/// f32 → the nearest f16 (ties to even) → f32 without a conversion a compiler could fold away: f16's normal range
/// (2^-14 ≤ |x| < 65520) drops 13 mantissa bits with round-to-nearest-even in integers, its subnormal range is a
/// multiple of 2^-24 rounded by `round` (ties to even); past 65504 it gives ±inf, as the conversion does. Checked
/// on the device against the `half` crate's conversion of every f16 value, every tie between two and the f32s
/// beside each tie (tests/step/main.rs).
pub const F16_ROUND_TRIP_WGSL: &str = "
fn to_f16_and_back(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let sign = b & 0x80000000u;
    let a = b & 0x7fffffffu;
    if a >= 0x477ff000u {
        // 65520 and up (and inf, NaN: not stored) round past f16's largest finite value.
        return bitcast<f32>(select(sign | 0x7f800000u, b, a > 0x7f800000u));
    }
    if a >= 0x38800000u {
        let r = (a + 0x0fffu + ((a >> 13u) & 1u)) & 0xffffe000u;
        return bitcast<f32>(sign | r);
    }
    let m = round(bitcast<f32>(a) * 16777216.0) * 5.9604644775390625e-8;
    return bitcast<f32>(sign | bitcast<u32>(m));
}
";
