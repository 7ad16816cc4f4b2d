//! The WGSL generator: one fused stream-collide kernel per (storage, streaming phase, collision, force, flags),
//! and a matching kernel that only gathers and writes ρ and u. Sizes and rates are baked in as literals.
// Direction indices address several tables (C, W, OPP) at once.
#![allow(clippy::needless_range_loop)]

use std::fmt::Write as _;

use bespoke_gpu::GRID_WGSL;

use crate::config::{Collision, Layout, Storage};
use crate::d2q9::{C, OPP, W};
use crate::flags::{INDEX_SHIFT, MASK_SHIFT, TYPE_FLUID, TYPE_INLET, TYPE_MASK, TYPE_SOLID};

/// Populations are stored as (f − w)·SCALE in f16 so that deviations from rest use the normal range.
pub const F16_SCALE: f64 = 16384.0;
/// Invocations per workgroup (one cell each, or one pair of cells with f16 storage).
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
    /// For each entry (cell, link mask) of `probe_in`: ρ and u at the cell as `Macro` computes them, and the
    /// momentum exchanged on the links whose bits are set (bit i: the link to the solid pull source x − c_i),
    /// Σ c_d (f_d* + f_d̄) with d = ī and f_d̄ the population the next step returns, five f32 per entry in
    /// `probe_out`. Paired layouts take the cell index and update the word that holds it.
    Probe,
}

/// f32 values per probe entry: ρ, u_x, u_y, F_x, F_y.
pub const PROBE_VALUES: usize = 5;

/// Where the domain's edges lie in a lattice's own coordinates, for the open cells' normals: the whole domain
/// has them at 0, nx − 1 and 0; a block of a distributed lattice only where its block touches the edge
/// ([`Edges::NONE`] elsewhere).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Edges {
    pub x0: u32,
    pub x1: u32,
    pub y0: u32,
}

impl Edges {
    /// No such edge in this lattice.
    pub const NONE: u32 = u32::MAX;
    /// The edges of a whole nx × ny domain.
    pub fn whole(nx: usize, ny: usize) -> Self {
        let _ = ny;
        Self {
            x0: 0,
            x1: nx as u32 - 1,
            y0: 0,
        }
    }
}

/// Which invocations a step kernel runs: all of them, or up to four rectangles `[x0, y0, w, h]` of the invocation
/// grid (nx across; ny rows up, or ny/2 word rows in the paired layout) — the inner cells of a block and the
/// ring around them, which a distributed step runs before and after its halos arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Region {
    All,
    Rects {
        count: usize,
        rects: [[u32; 4]; 4],
        tag: &'static str,
    },
}

/// Everything a generated kernel depends on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelSpec {
    pub nx: usize,
    pub ny: usize,
    pub storage: Storage,
    pub collision: Collision,
    pub force: [f64; 2],
    /// Smagorinsky constant C_s of the subgrid model (0: none).
    pub smagorinsky: f64,
    /// Whether the lattice has a flag field (false: every cell fluid and periodic, no flag reads).
    pub flags: bool,
    /// Whether some links use interpolated bounce-back (wall distances in the boundary table).
    pub curved: bool,
    pub phase: Phase,
    pub mode: Mode,
    /// Where the domain's edges are (open cells' normals).
    pub edges: Edges,
    /// Which invocations run (step kernels of distributed blocks; `Region::All` otherwise).
    pub region: Region,
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
            "lbm-{:?}-{:?}-{}-{}{}{}{}{}{}",
            self.phase,
            self.mode,
            match self.layout() {
                Layout::F16Single => "f16-single",
                _ => self.storage.name(),
            },
            self.collision.name(),
            if self.smagorinsky > 0.0 { "-les" } else { "" },
            if self.force != [0.0, 0.0] {
                "-force"
            } else {
                ""
            },
            if self.flags { "-flags" } else { "" },
            if self.curved { "-curved" } else { "" },
            match self.region {
                Region::All => "",
                Region::Rects { tag, .. } => tag,
            }
        )
        .to_lowercase()
    }

    /// Interpolated bounce-back is generated for lattices with wall distances.
    fn interpolated(&self) -> bool {
        self.curved && self.flags
    }

    /// In-place interpolated kernels keep each interpolated link's f_i*(x), the cell's own last post-collision
    /// population away from the wall, in a `stash` binding (f32, index 2·k + i − 1 for the cell's table index k):
    /// in the AA pattern the slot holding it between steps belongs to the neighbour x + c_i during the next step,
    /// which overwrites it. Two-lattice kernels read it from the source lattice.
    pub fn stashed(&self) -> bool {
        self.interpolated() && self.phase != Phase::Ab
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
        pops + if self.flags { 2 } else { 0 }
            + usize::from(self.stashed())
            + match self.mode {
                Mode::Step => 0,
                Mode::Macro => 3,
                Mode::Probe => 2,
            }
    }

    pub fn layout(&self) -> Layout {
        Layout::of(self.storage, self.ny)
    }

    /// f16 storage with an even ny packs two cells into each u32 word: word w holds cell w in its low half and
    /// cell w + N/2 (the same column, ny/2 rows up) in its high half, and one invocation updates both. Every
    /// population access is then one whole word, so no two invocations share a word, pulls stay aligned (a pull
    /// across the fold swaps the halves) and no 16-bit storage (`SHADER_F16`) is needed. An odd ny has no
    /// partner row for every row: one invocation per cell then reads and writes WGSL `f16` elements.
    pub fn paired(&self) -> bool {
        self.layout() == Layout::F16Paired
    }

    /// A population element read as f32 (f16 elements are stored scaled).
    fn load(&self, elem: String) -> String {
        match self.layout() {
            Layout::F16Single => format!("ld1({elem})"),
            _ => elem,
        }
    }

    /// An f32 value converted for storing into one element.
    fn store(&self, value: String) -> String {
        match self.layout() {
            Layout::F16Single => format!("st1({value})"),
            _ => value,
        }
    }

    /// Invocations per launch: one per cell, or one per pair of cells.
    pub fn invocations(&self) -> usize {
        if let Region::Rects { count, rects, .. } = self.region {
            return rects[..count].iter().map(|r| (r[2] * r[3]) as usize).sum();
        }
        let n = self.nx * self.ny;
        if self.paired() { n / 2 } else { n }
    }

    /// Index expression of the cell (or word) at x − c_i (the pull source of direction i).
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

    /// Paired layout: whether the pull source of direction i lies across the fold (halves swapped).
    fn swapped(i: usize) -> &'static str {
        match C[i][1] {
            1 => "wm",
            0 => "false",
            _ => "wp",
        }
    }

    /// `s{i}`, or `idx` for the rest direction.
    fn src_or_idx(i: usize) -> String {
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
        if self.paired() {
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
    return pack2x16float(select(v, v.yx, swap) * {scale});
}}
",
                hr = self.ny / 2,
                nh = self.nx * self.ny / 2,
                inv = lit(1.0 / F16_SCALE),
                scale = lit(F16_SCALE)
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
    return f16(v * {scale});
}}
",
                inv = lit(1.0 / F16_SCALE),
                scale = lit(F16_SCALE)
            );
        }
        if self.stashed() {
            // A stashed value must equal what a load of the stored element would return.
            let body = match self.layout() {
                Layout::F32 => "v",
                Layout::F16Paired => "ld(st(vec2<f32>(v, 0.0), false), false).x",
                Layout::F16Single => "ld1(st1(v))",
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
        if self.stashed() {
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
            for name in ["rho_out", "ux_out", "uy_out"] {
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
                "@group(0) @binding({binding}) var<storage, read> probe_in: array<vec2<u32>>;\n\
                 @group(0) @binding({}) var<storage, read_write> probe_out: array<f32>;",
                binding + 1
            );
        }

        let entry = if let Region::Rects { count, rects, .. } = self.region {
            // Invocation k of the region → the cell (or word) index of its rectangle.
            let mut e = format!(
                "    let k = bespoke_workgroup_linear(wid) * {WG}u + lid;\n    var idx = 0u;\n    "
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
            format!(
                "    let idx = bespoke_workgroup_linear(wid) * {WG}u + lid;\n    if idx >= {} {{ return; }}\n",
                if self.paired() { "NH" } else { "N" }
            )
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
                "    let k = bespoke_workgroup_linear(wid) * {WG}u + lid;
    if k >= arrayLength(&probe_in) {{ return; }}
    let pin = probe_in[k];
{cell}"
            )
        };
        let _ = write!(
            s,
            "
@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
{entry}    let x = idx % NX;
    let y0 = idx - x;
    let xm = select(x - 1u, NX - 1u, x == 0u);
    let xp = select(x + 1u, 0u, x == NX - 1u);
"
        );
        if self.paired() {
            s.push_str(
                "    let r = idx / NX;
    // Rows r − 1 and r + 1 of the folded lattice; a pull across the fold reads the other half of the word.
    let ym = select(r - 1u, HR - 1u, r == 0u) * NX;
    let yp = select(r + 1u, 0u, r == HR - 1u) * NX;
    let wm = r == 0u;
    let wp = r == HR - 1u;
",
            );
        } else {
            s.push_str(
                "    let y = idx / NX;
    let ym = select(y - 1u, NY - 1u, y == 0u) * NX;
    let yp = select(y + 1u, 0u, y == NY - 1u) * NX;
",
            );
        }
        for i in 1..9 {
            let _ = writeln!(s, "    let s{i} = {};", Self::source(i));
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
                Phase::Ab => (format!("a{i}[{}]", Self::src_or_idx(i)), Self::swapped(i)),
                Phase::AaEven => (format!("a{i}[idx]"), "false"),
                Phase::AaOdd => (format!("a{o}[{}]", Self::src_or_idx(i)), Self::swapped(i)),
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
                    Phase::Ab => writeln!(s, "    b{i}[idx] = st({v}, false);"),
                    Phase::AaEven => writeln!(s, "    a{o}[idx] = st({v}, false);"),
                    Phase::AaOdd if i == 0 => writeln!(s, "    a0[idx] = st({v}, false);"),
                    Phase::AaOdd => {
                        writeln!(s, "    a{i}[s{o}] = st({v}, {});", Self::swapped(o))
                    }
                };
            }
        }
        s.push_str("}\n");
        s
    }

    /// One cell's update. `pair` is None for one cell per invocation (f32), or the half of the word ("a" low,
    /// "b" high) in the paired layout, where the loaded words are `g0`..`g8` and results go to `q{pair}{i}`.
    fn cell(&self, s: &mut String, pair: Option<&str>) {
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
                let _ = writeln!(w, "probe_out[k * {PROBE_VALUES}u + {j}u] = {v};");
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
                let _ = writeln!(
                    s,
                    "{ind}    rho_out[{cidx}] = 1.0;\n{ind}    ux_out[{cidx}] = uw.x;\n{ind}    uy_out[{cidx}] = uw.y;"
                );
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
                                format!("ld(a{i}[s{o}], {}).{}", Self::swapped(o), half(c))
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
                    Phase::Ab => format!("a{i}[{}]", Self::src_or_idx(i)),
                    Phase::AaEven => format!("a{i}[idx]"),
                    Phase::AaOdd => format!("a{}[{}]", OPP[i], Self::src_or_idx(i)),
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
                Phase::Ab => read(format!("a{o}[idx]"), "false"),
                Phase::AaOdd => read(format!("a{i}[idx]"), "false"),
                Phase::AaEven => read(format!("a{o}[s{i}]"), Self::swapped(i)),
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
                stash_elem(i)
            } else {
                read(format!("a{i}[idx]"), "false")
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
            let _ = writeln!(
                b,
                "rho_out[{cidx}] = rho;\nux_out[{cidx}] = ux;\nuy_out[{cidx}] = uy;"
            );
        } else if self.mode == Mode::Probe {
            b.push_str(&probe_store(["rho", "ux", "uy", "fx", "fy"]));
        } else {
            self.collide(&mut b);
            if self.stashed() {
                b.push_str("// Keep the own population of each interpolated link for the next step.\nif qk != 0u {\n");
                for i in 1..9 {
                    let bit = 1u32 << (MASK_SHIFT as usize + i);
                    let _ = writeln!(
                        b,
                        "    if (fl & {bit}u) != 0u {{ {} = rt(o{i}); }}",
                        stash_elem(i)
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
                    (None, Phase::Ab) => writeln!(b, "b{i}[idx] = {v};"),
                    (None, Phase::AaEven) => writeln!(b, "a{o}[idx] = {v};"),
                    (None, Phase::AaOdd) if i == 0 => writeln!(b, "a0[idx] = {v};"),
                    // Into slot i of x + c_i, also when that cell is solid (see the gather above).
                    (None, Phase::AaOdd) => writeln!(b, "a{i}[s{o}] = {v};"),
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

    /// Equilibrium, collision and forcing: f0..f8, rho, rd, ux, uy → o0..o8.
    ///
    /// Written per opposite pair (i, ī): the shifted equilibria are w (sym ± anti) with sym = ρ − 1 +
    /// ρ (9/2 (c·u)² − 3/2 u·u) and anti = 3ρ c·u, so TRT's even and odd parts need no e_i at all. Half the
    /// arithmetic of the per-direction form, which matters where two cells share an invocation.
    fn collide(&self, s: &mut String) {
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

/// Stash element of pull direction i (1–8) of the cell whose table index is k: two per table entry, as the
/// entry holds the q of two directions.
pub(crate) fn stash_index(k: usize, i: usize) -> usize {
    2 * k + i - 1
}

/// `stash_index(qk, i)` in WGSL.
fn stash_elem(i: usize) -> String {
    format!("stash[2u * qk + {}u]", i - 1)
}

/// The vector component of a paired word's half.
fn half(c: &str) -> &'static str {
    if c == "a" { "x" } else { "y" }
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
        // ny 6 pairs f16 rows; ny 7 stores one f16 per cell (and needs SHADER_F16).
        for (storage, ny) in [(Storage::F32, 6), (Storage::F16, 6), (Storage::F16, 7)] {
            for collision in [Collision::Bgk { omega: 1.3 }, Collision::trt(0.7)] {
                for (force, smagorinsky) in [
                    ([0.0, 0.0], 0.0),
                    ([1e-5, -2e-6], 0.0),
                    ([1e-5, -2e-6], 0.17),
                ] {
                    for (flags, curved) in [(false, false), (true, false), (true, true)] {
                        for phase in [Phase::Ab, Phase::AaEven, Phase::AaOdd] {
                            for mode in [Mode::Step, Mode::Macro, Mode::Probe] {
                                let spec = KernelSpec {
                                    nx: 37,
                                    ny,
                                    storage,
                                    collision,
                                    force,
                                    smagorinsky,
                                    flags,
                                    curved,
                                    phase,
                                    mode,
                                    edges: Edges::whole(37, ny),
                                    region: Region::All,
                                };
                                let src = spec.generate();
                                let f16 = spec.layout() == Layout::F16Single;
                                validate_wgsl(&src, caps_for(false, f16))
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
        assert_eq!(n, 486);
    }

    #[test]
    fn cu_expressions() {
        assert_eq!(cu_expr(0, "ux", "uy"), "0.0");
        assert_eq!(cu_expr(1, "ux", "uy"), "(ux)");
        assert_eq!(cu_expr(7, "ux", "uy"), "(- ux - uy)");
        assert_eq!(cu_expr(8, "ux", "uy"), "(ux - uy)");
    }
}
