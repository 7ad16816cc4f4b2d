//! The WGSL generator: one fused stream-collide kernel per (storage, streaming phase, collision, force, flags),
//! and a matching kernel that only gathers and writes ρ and u. Sizes and rates are baked in as literals. Here:
//! what a kernel depends on (`KernelSpec`) and what follows from it; the text is made in `generate.rs` (the
//! kernel's frame) and `cell.rs` / `collide.rs` (one cell's update).

use crate::config::{Collision, Layout, Storage};

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
    /// For each entry (cell, link mask) of the `probe` buffer: ρ and u at the cell as `Macro` computes them, and
    /// the momentum exchanged on the links whose bits are set (bit i: the link to the solid pull source x − c_i),
    /// Σ c_d (f_d* + f_d̄) with d = ī and f_d̄ the population the next step returns, five f32 per entry. One u32
    /// buffer holds both, so the kernel binds one buffer past the lattice's (an adapter may allow only four): its
    /// E entries as pairs of words, then the 5·E values as f32 bits. Paired layouts take the cell index and update
    /// the word that holds it.
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
    /// Round each f16 value to its nearest f16 (ties to even) before the conversion stores it, on a device whose
    /// own conversion rounds otherwise (`bespoke_gpu::Gpu::rounds_f16_to_nearest_even`; a pack toward zero, as
    /// AMD's hardware has, which WGSL allows): the conversion is then exact, and the stored bits those of
    /// `half`'s conversion. Set from the device by `prepare_launch` (or forced by the lab's `exact-f16` shape);
    /// false elsewhere.
    pub exact_f16: bool,
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
    /// The macroscopic kernel writes ρ, u_x and u_y into one buffer (`macros`: every cell's ρ, then every u_x,
    /// then every u_y) instead of three, where the adapter allows too few storage buffers per kernel for three
    /// (wgpu's downlevel limits allow 4: GL ES, WebGPU compatibility, older mobile drivers). Three otherwise: one
    /// buffer of 3 values a cell reaches the binding limit at a third of the lattice.
    pub packed_macros: bool,
    /// The in-place stash of interpolated links lies in the boundary table's buffer, after the table (the table's
    /// E vec2 entries, then the stash's 2·E f32, as E more vec2: element m of the stash is component m mod 2 of
    /// entry E + m div 2), instead of a buffer of its own: where the adapter allows too few storage buffers per
    /// kernel for both (an in-place step with wall distances binds 4 with one buffer for the populations, the
    /// macroscopic kernel 5). The table is then bound read-write by the step.
    pub packed_stash: bool,
    /// The workgroups take their blocks of cells in descending order: workgroup 0 the last block (a step
    /// kernel over every cell; ignored elsewhere). A lattice whose shape alternates
    /// (`StepShape::alternate`) runs every other step so, and the step begins where the one before ended: a
    /// GPU runs its workgroups about in id order, so the first blocks it reads are the last the step before
    /// wrote, still in its L2 cache (50 MB on an H100 or H200: up to two thirds of a 2048² f16 lattice's reads a step).
    /// Each cell's update is the same: the bits do not change.
    pub descending: bool,
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
            + if self.exact_f16 && self.storage == Storage::F16 {
                "-exactf16"
            } else {
                ""
            }
            + if self.packed_macros && self.mode == Mode::Macro {
                "-packed"
            } else {
                ""
            }
            + if self.packed_stash && self.stashed() {
                "-tablestash"
            } else {
                ""
            }
            + if self.walks_descending() { "-desc" } else { "" }
    }

    /// Whether the generated kernel takes its blocks in descending order ([`KernelSpec::descending`]): a step
    /// kernel over every cell.
    pub fn walks_descending(&self) -> bool {
        self.descending && self.region == Region::All && self.mode == Mode::Step
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
            + usize::from(self.stashed() && !self.packed_stash)
            + match self.mode {
                Mode::Step => 0,
                Mode::Macro if self.packed_macros => 1,
                Mode::Macro => 3,
                Mode::Probe => 1,
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
}

/// Stash element of pull direction i (1–8) of the cell whose table index is k: two per table entry, as the
/// entry holds the q of two directions.
pub(crate) fn stash_index(k: usize, i: usize) -> usize {
    2 * k + i - 1
}

impl KernelSpec {
    /// `stash_index(qk, i)` in WGSL: in the stash's own buffer, or after the table in its buffer
    /// ([`packed_stash`](Self::packed_stash); `arrayLength` is then twice the table's entries).
    fn stash_elem(&self, i: usize) -> String {
        if self.packed_stash {
            let m = i - 1;
            format!(
                "bval[arrayLength(&bval) / 2u + qk + {}u].{}",
                m / 2,
                ["x", "y"][m % 2]
            )
        } else {
            format!("stash[2u * qk + {}u]", i - 1)
        }
    }
}

/// The vector component of a paired word's half.
fn half(c: &str) -> &'static str {
    if c == "a" { "x" } else { "y" }
}

mod cell;
mod collide;
mod generate;
pub use generate::F16_ROUND_TRIP_WGSL;
#[cfg(test)]
mod tests;
