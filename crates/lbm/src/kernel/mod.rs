//! The WGSL generator: one fused stream-collide kernel per (storage, streaming phase, collision, force, flags),
//! and a matching kernel that only gathers and writes ρ and u. Sizes and rates are baked in as literals.
// Direction indices address several tables (C, W, OPP) at once.
#![allow(clippy::needless_range_loop)]

use std::fmt::Write as _;

use bespoke_gpu::GRID_WGSL;

use crate::config::{Collision, Layout, Storage};
use crate::d2q9::{C, OPP};

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
    /// Emulate a driver that removes the round trip through f16 by which the in-place stash is rounded
    /// (`bespoke_gpu::Quirks::folds_f16_round_trip`): the stash then keeps the unrounded f32, as NVIDIA's
    /// driver 580 made it. Set from the device by `prepare_launch`; false elsewhere.
    pub folded_f16: bool,
    /// Invocations per workgroup ([`WG`] unless the lattice's launch shape says otherwise: step kernels).
    pub wg: u32,
    /// Cells (or paired words) per invocation: each workgroup takes `cells` consecutive blocks of `wg`, an
    /// invocation the same lane of each, so every block's loads stay coalesced (1 unless the lattice's launch
    /// shape says otherwise: step kernels over the whole lattice).
    pub cells: u32,
    /// A cost taken out of the step to measure it (`bespoke lab`); the results are then not the physics.
    pub ablation: Option<Ablation>,
    /// 0: each direction is its own binding (`a0`…`a8`). Otherwise the nine directions share one buffer, this
    /// many u32 words apart, bound once (`a`, and `b` for the two-lattice step) and indexed `a[i·S + k]`.
    pub one_buffer: usize,
}

/// A part of the step left out, to measure what it costs (the lab's ablations; never in a simulation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Ablation {
    /// No collision: each cell stores the populations it gathered (streaming alone, the memory traffic).
    NoCollision,
    /// The periodic wrap by a mask instead of compares and selects: the same neighbours on a lattice whose
    /// sides are powers of two (checked by the lattice), so the results stay exact there.
    MaskWrap,
    /// Every population read from and written to the cell's own slots (no neighbour offsets, no fold swaps):
    /// the step's loads and stores all aligned and coalesced, so its gap to the full step is what the pulls'
    /// offsets cost. Cells collide where they are and nothing streams.
    NoPull,
}

impl Ablation {
    pub fn name(self) -> &'static str {
        match self {
            Self::NoCollision => "no-collision",
            Self::MaskWrap => "mask-wrap",
            Self::NoPull => "no-pull",
        }
    }
}

/// An f32 literal exactly as Rust rounds `v` to f32 (the one literal formatter, [`DType::literal`]), negative
/// ones in parentheses so they can follow an operator.
fn lit(v: f64) -> String {
    let s = bespoke_gpu::DType::F32.literal(v);
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
            + &if self.wg == WG {
                String::new()
            } else {
                format!("-wg{}", self.wg)
            }
            + &if self.per_invocation() == 1 {
                String::new()
            } else {
                format!("-c{}", self.cells)
            }
            + &self
                .ablation
                .map_or(String::new(), |a| format!("-ablate-{}", a.name()))
            + if self.one_buffer > 0 { "-1buf" } else { "" }
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
        let sets = match (self.phase, self.mode) {
            (Phase::Ab, Mode::Step) => 2,
            _ => 1,
        };
        let pops = if self.one_buffer > 0 { sets } else { 9 * sets };
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

    /// Element `index` of direction `i` of population set `set` (`a`, or `b` the two-lattice step writes).
    fn pop(&self, set: &str, i: usize, index: &str) -> String {
        if self.one_buffer == 0 {
            return format!("{set}{i}[{index}]");
        }
        // The stride in elements of the array's type (f16 elements: two per word).
        let per_word = if self.layout() == Layout::F16Single {
            2
        } else {
            1
        };
        match i * self.one_buffer * per_word {
            0 => format!("{set}[{index}]"),
            start => format!("{set}[{start}u + {index}]"),
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

    /// Cells per invocation as generated: `cells` for a step kernel over every cell, 1 otherwise (a region's
    /// rectangles, macro and probe kernels take one each).
    pub fn per_invocation(&self) -> u32 {
        match (self.region, self.mode) {
            (Region::All, Mode::Step) => self.cells.max(1),
            _ => 1,
        }
    }

    /// Invocations to launch: [`invocations`](Self::invocations) over the cells each takes.
    pub fn launched(&self) -> usize {
        self.invocations().div_ceil(self.per_invocation() as usize)
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
            // A stashed value must equal what a load of the stored element would return. A driver may drop this
            // round trip (`folded_f16`): checkpoints save the stash, so a restart does not depend on it.
            let body = match self.layout() {
                Layout::F32 => "v",
                _ if self.folded_f16 => "v",
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
            format!(
                "    let idx = bespoke_workgroup_linear(wid) * {wg}u + lid;\n    if idx >= {} {{ return; }}\n",
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
                "    let k = bespoke_workgroup_linear(wid) * {wg}u + lid;
    if k >= arrayLength(&probe_in) {{ return; }}
    let pin = probe_in[k];
{cell}"
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
    let first = bespoke_workgroup_linear(wid) * {cells}u;
    for (var j = 0u; j < {cells}u; j++) {{
        let idx = (first + j) * {wg}u + lid;
        if idx >= {n} {{ return; }}
        update(idx);
    }}
}}

fn update(idx: u32) {{
    let x = idx % NX;
    let y0 = idx - x;
",
                n = if self.paired() { "NH" } else { "N" }
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

mod cell;
mod collide;
#[cfg(test)]
mod tests;
