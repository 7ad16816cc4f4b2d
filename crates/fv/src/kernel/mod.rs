//! WGSL for one explicit Euler step of the ELLPACK operator, `y = x + Δt·Σ_s v_s (x[idx_s] − x)`: the gather kernel
//! (one invocation per tet, x from global memory) and the block-cached kernel (a workgroup loads its block of x
//! into workgroup memory and reads in-block neighbours from there).

pub use bespoke_gpu::DType;

mod d16;
mod wgsl;
mod x4;

pub use d16::{D16_FAR, D16_FAR_HALF, d16_far_tets, d16_indices, d16_quads};
pub use wgsl::{step_rows_wgsl, step_wgsl};

/// The two kernels of the study.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelKind {
    Gather,
    /// Workgroups own `block` consecutive tets (a multiple of the workgroup size).
    BlockCached {
        block: u32,
    },
}

impl KernelKind {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Gather => "gather",
            Self::BlockCached { .. } => "block-cached",
        }
    }
}

/// How the four slots are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Layout {
    /// value[s·n + i]: neighbouring invocations read neighbouring words (coalesced); one binding per slot.
    SlotMajor,
    /// value[4i + s] as one vec4 per tet: one 16-byte load per tet, strided across invocations.
    TetMajor,
    /// Slot-major with four consecutive tets per invocation: vec4 loads of values, indices, x and a vec4 store
    /// (tets padded to a multiple of 4; gather kernel only).
    SlotMajorX4,
    /// Tet-major values, and each neighbour as its signed 16-bit offset from the tet (`vec2<u32>` a tet: 8 bytes of
    /// indices where tet-major reads 16; the Dirichlet ghost at n is an offset like any other). A tet with any
    /// neighbour past ±32 767 holds [`D16_FAR`] in its first word and, in its second, its row in a table of full
    /// indices read instead. On a METIS-ordered mesh about 9 in 10 tets need no row there (docs/fv.md).
    TetMajorD16,
    /// The four-tet layout with each neighbour as its signed 16-bit offset from its tet: eight words for an
    /// invocation's four tets (two `vec4<u32>` loads: 32 bytes of indices where slot-major-x4 reads 64). A tet with
    /// a neighbour past ±32 767 holds −32 768 as its slot-0 offset and its row in a table of full indices in
    /// its slot-1 and slot-2 offsets; only that tet reads the row ([`d16_quads`]).
    SlotMajorX4D16,
    /// Tet-major, with the operator in two read-only 2-D textures (rgba32float values, rgba32uint indices)
    /// read with `textureLoad`; x and y stay storage buffers. f32 only (textures hold no f64).
    Texture,
}

/// Texels per row of the [`Layout::Texture`] operator for `n` tets: the smallest power of two (≥ 64) that keeps
/// the rows within 8192, the 2-D texture side every WebGPU adapter offers, so the source does not depend on the
/// adapter. Past 8192² tets there is none.
pub fn texture_width(n: usize) -> Option<u32> {
    (6..=13)
        .map(|p| 1u32 << p)
        .find(|&w| (n as u64).div_ceil(u64::from(w)) <= TEXTURE_SIDE)
}

/// The texture side [`texture_width`] keeps within: WebGPU's guaranteed 2-D texture side.
pub const TEXTURE_SIDE: u64 = 8192;

impl Layout {
    pub fn name(&self) -> &'static str {
        match self {
            Self::SlotMajor => "slot-major",
            Self::TetMajor => "tet-major",
            Self::TetMajorD16 => "tet-major-d16",
            Self::SlotMajorX4 => "slot-major-x4",
            Self::SlotMajorX4D16 => "slot-major-x4-d16",
            Self::Texture => "texture",
        }
    }

    /// Bytes of the largest storage binding a step of `n` tets with `size`-byte values binds in this layout
    /// (values, indices, x), to hold against the adapter's binding limit before anything is uploaded. The
    /// texture layout's operator is in textures; its x is the largest buffer.
    pub fn largest_binding(&self, n: usize, size: usize) -> u64 {
        let n = n as u64;
        let size = size as u64;
        let x = (n + 1) * size;
        match self {
            Self::SlotMajor => x.max(n * 4),
            Self::TetMajor => (4 * n * size).max(4 * n * 4),
            // Values; the offsets (8 B a tet) and the far rows (16 B each, at most n) are no larger.
            Self::TetMajorD16 => (4 * n * size).max(x),
            Self::SlotMajorX4 => {
                let np = padded4(n as usize) as u64;
                ((np + 4) * size).max(np * 4)
            }
            // The far rows, counted as if every tet were far (16 B each; the count is known only once the
            // offsets are made), past the values, offsets (8 B a tet) and x.
            Self::SlotMajorX4D16 => {
                let np = padded4(n as usize) as u64;
                ((np + 4) * size).max(16 * n)
            }
            Self::Texture => x,
        }
    }

    /// Least bytes a step moves per tet in this layout with `size`-byte values: the four values, the neighbours
    /// (four u32 indices; four 16-bit offsets in the d16 layouts, and a row of four full indices for the share
    /// `far_fraction` of tets with a neighbour past ±32 767), x read once, y written. Until 2026-12-04 every layout
    /// was counted at the u32 indices' 40 B (f32), and the d16 rows on the H200 read 1.07–1.18 of copy.
    pub fn min_bytes_per_tet(&self, size: usize, far_fraction: f64) -> f64 {
        let neighbours = if self.offsets16() {
            8.0 + 16.0 * far_fraction
        } else {
            16.0
        };
        (6 * size) as f64 + neighbours
    }

    /// Whether the neighbours are stored as 16-bit offsets, with a row of full indices for each far tet.
    pub fn offsets16(&self) -> bool {
        matches!(self, Self::TetMajorD16 | Self::SlotMajorX4D16)
    }

    /// The share of `indices`' tets this layout reads a row of full indices for (0 where it stores u32 indices).
    pub fn far_fraction(&self, indices: &[[u32; 4]]) -> f64 {
        if self.offsets16() && !indices.is_empty() {
            d16_far_tets(indices) as f64 / indices.len() as f64
        } else {
            0.0
        }
    }

    /// Storage buffers a step kernel in this layout binds (gather or block-cached, any launch shape): slot-major
    /// binds each slot's values and indices apart. An adapter that allows fewer runs the layouts that bind fewer
    /// (WebGPU's default allows 8: tet-major binds 4, the texture layout 2 besides its textures).
    pub fn storage_buffers(&self) -> u32 {
        match self {
            Self::SlotMajor => 10,
            Self::TetMajor => 4,
            Self::TetMajorD16 => 5,
            Self::SlotMajorX4 => 11,
            Self::SlotMajorX4D16 => 9,
            Self::Texture => 2,
        }
    }

    /// Why a step of `n` tets with `size`-byte values in this layout cannot run on an adapter binding at most
    /// `binding_limit` bytes at once and `max_storage_buffers` buffers per kernel; `None` where it can.
    pub fn misfit(
        &self,
        n: usize,
        size: usize,
        binding_limit: u64,
        max_storage_buffers: u32,
    ) -> Option<String> {
        let (count, largest) = (self.storage_buffers(), self.largest_binding(n, size));
        if *self == Self::Texture && texture_width(n).is_none() {
            Some(format!(
                "holds at most {} tets (two {TEXTURE_SIDE} × {TEXTURE_SIDE} textures)",
                TEXTURE_SIDE * TEXTURE_SIDE
            ))
        } else if count > max_storage_buffers {
            Some(format!(
                "binds {count} storage buffers per kernel, past the adapter's {max_storage_buffers}"
            ))
        } else if largest > binding_limit {
            Some(format!(
                "binds {largest} bytes at once, past the adapter's {binding_limit}"
            ))
        } else {
            None
        }
    }

    /// [`misfit`](Self::misfit) against `gpu`'s binding limit and storage buffers per kernel, and for the texture
    /// layout its 2-D texture side (WebGPU guarantees the 8192 that [`texture_width`] assumes; wgpu's downlevel
    /// GLES-class limits give 2048).
    pub fn misfit_on(&self, gpu: &bespoke_gpu::Gpu, n: usize, size: usize) -> Option<String> {
        let why = self.misfit(
            n,
            size,
            gpu.binding_limit(),
            gpu.limits().max_storage_buffers_per_shader_stage,
        );
        if why.is_some() || *self != Self::Texture {
            return why;
        }
        let width = texture_width(n)?;
        let rows = (n as u64).div_ceil(u64::from(width));
        let side = gpu.limits().max_texture_dimension_2d;
        (u64::from(width) > u64::from(side) || rows > u64::from(side)).then(|| {
            format!("needs textures of {width} × {rows} texels, past the adapter's {side} × {side}")
        })
    }

    pub const ALL: [Layout; 6] = [
        Self::SlotMajor,
        Self::TetMajor,
        Self::TetMajorD16,
        Self::SlotMajorX4,
        Self::SlotMajorX4D16,
        Self::Texture,
    ];

    /// Four tets per invocation (gather kernel only, tets padded to a multiple of 4, the ghost at padded4(n)).
    pub fn four_tets(&self) -> bool {
        matches!(self, Self::SlotMajorX4 | Self::SlotMajorX4D16)
    }

    /// A layout by its CLI/JSON name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.name() == s)
    }

    /// The fastest measured layout for `kind` in `dtype` on a CPU adapter (`cpu`) or a GPU (docs/perf.md): on
    /// lavapipe the texture layout in f32, slot-major in f64; on a GPU the four-tet layout with 16-bit offsets for
    /// the gather kernel in f32 (the H200 with its clocks up, 2026-12-04, 16.5 M METIS-ordered tets: slot-major-x4-d16
    /// 135 µs, tet-major-d16 149, tet-major 158, slot-major-x4 158, slot-major 162, texture 241), tet-major
    /// otherwise (the block-cached kernel takes no four-tet layout; f64 not measured on a GPU).
    pub fn default_for(dtype: DType, cpu: bool, kind: KernelKind) -> Self {
        match (dtype, cpu, kind) {
            (DType::F32, false, KernelKind::Gather) => Self::SlotMajorX4D16,
            (_, false, _) => Self::TetMajor,
            (DType::F32, true, _) => Self::Texture,
            (_, true, _) => Self::SlotMajor,
        }
    }
}

/// Invocations per workgroup (the default launch shape).
pub const WG: u32 = 256;

/// How a step kernel is launched: invocations per workgroup, and for the lab a cost taken out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Shape {
    /// Invocations per workgroup (the block-cached kernel's block must be a multiple of it).
    pub workgroup: u32,
    /// The lab's ablation: neighbours' x not read (each neighbour index still loaded and used), so the step
    /// streams its values, indices, x and y without the gather. Not the physics.
    #[serde(default)]
    pub no_gather: bool,
    /// The lab's other ablation: no neighbour index read (each index binding touched once, at 0), tet i's k-th
    /// neighbour taken as min(i + k + 1, n) instead, so the step streams its values, x and y and gathers near i
    /// without the 16 B a tet of indices: what the indices cost (what storing them in fewer bytes could save).
    /// The step of the operator whose indices are those (tested bit for bit), not this operator's physics.
    #[serde(default)]
    pub no_index: bool,
    /// How the workgroups are laid out: rows of the per-dimension limit, one dispatch at any size (the
    /// default), or the split 1-D grid of before (the lab's comparison).
    #[serde(default)]
    pub grid: bespoke_gpu::GridLayout,
    /// Tets per invocation of the gather kernel (not the four-tet layout, not the block-cached kernel): a
    /// workgroup takes that many consecutive blocks of its size, an invocation the same lane of each.
    #[serde(default = "one_tet")]
    pub tets: u32,
    /// Every other step walks the tets backwards: the pair's second launch (`x[1]` → `x[0]`) takes its blocks in
    /// descending order (workgroup 0 the last block; within a block the lanes stay ascending), so that a step
    /// begins on the tets the step before ended on, whose operator rows and values a GPU's L2 cache still
    /// holds. The same bits either way.
    #[serde(default)]
    pub alternate: bool,
}

fn one_tet() -> u32 {
    1
}

/// The most tets per invocation a shape may ask.
pub const MAX_TETS: u32 = 8;

impl Default for Shape {
    fn default() -> Self {
        Self {
            workgroup: WG,
            no_gather: false,
            no_index: false,
            grid: bespoke_gpu::GridLayout::Rows,
            tets: 1,
            alternate: false,
        }
    }
}

impl Shape {
    /// `wg<N>`, with ` no-gather` for the ablation and the grid where it is not the default.
    pub fn name(&self) -> String {
        let grid = match self.grid {
            bespoke_gpu::GridLayout::Rows => String::new(),
            bespoke_gpu::GridLayout::Split => " split-grid".into(),
            bespoke_gpu::GridLayout::RowsOf(r) => format!(" rows-of-{r}"),
        };
        format!(
            "wg{}{}{}{}{grid}{}",
            self.workgroup,
            if self.tets == 1 {
                String::new()
            } else {
                format!(" {}-tets", self.tets)
            },
            if self.no_gather { " no-gather" } else { "" },
            if self.no_index { " no-index" } else { "" },
            if self.alternate { " alternate" } else { "" }
        )
    }

    /// Tets one workgroup updates with `kind` in `layout`.
    pub fn per_group(&self, kind: KernelKind, layout: Layout) -> u32 {
        match kind {
            KernelKind::Gather if layout.four_tets() => 4 * self.workgroup,
            KernelKind::Gather => self.tets * self.workgroup,
            KernelKind::BlockCached { block } => block,
        }
    }
}

/// Tets padded to a multiple of 4 for the four-tet layouts ([`Layout::four_tets`]).
pub fn padded4(n: usize) -> usize {
    n.div_ceil(4) * 4
}

/// The groups of four tets (invocations of a four-tet layout, of n tets) that update the tets `rows`: from the
/// group holding its first tet to the last group it holds whole, or to the end where it reaches n. A rank's
/// interior tets (0..interior) and the rest (interior..n) so fall in two launches that cover every group once;
/// the group holding both kinds goes with the rest, after the exchange. No rows, no groups.
pub fn quads_of(rows: &std::ops::Range<usize>, n: usize) -> std::ops::Range<usize> {
    let end = if rows.end >= n {
        padded4(n) / 4
    } else {
        rows.end / 4
    };
    let start = rows.start / 4;
    if rows.is_empty() {
        return start..start;
    }
    start..end.max(start)
}

impl std::str::FromStr for Layout {
    type Err = crate::error::FvError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| {
            crate::error::FvError::param(
                "layout",
                s,
                format!("expected one of {}", Self::ALL.map(|l| l.name()).join(", ")),
            )
        })
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The least bytes a tet: u32 indices in every layout but the d16 ones, whose 16-bit offsets are half, plus a
    /// row of full indices for each far tet; the plain count is the bench's `min_bytes_per_tet`.
    #[test]
    fn each_layout_counts_its_own_bytes_without_a_device() {
        for layout in [
            Layout::SlotMajor,
            Layout::TetMajor,
            Layout::SlotMajorX4,
            Layout::Texture,
        ] {
            assert_eq!(layout.min_bytes_per_tet(4, 0.5), 40.0);
            assert_eq!(
                layout.min_bytes_per_tet(8, 0.0),
                crate::bench::min_bytes_per_tet(8) as f64
            );
        }
        for layout in [Layout::TetMajorD16, Layout::SlotMajorX4D16] {
            assert_eq!(layout.min_bytes_per_tet(4, 0.0), 32.0);
            assert_eq!(layout.min_bytes_per_tet(4, 1.0), 48.0);
            assert_eq!(layout.min_bytes_per_tet(8, 0.25), 60.0);
        }
        // A far tet: a neighbour past ±32 767; only the d16 layouts read a row for it.
        let indices = [[1, 2, 3, 4], [0, 40_000, 2, 3], [0, 1, 3, 4], [0, 1, 2, 4]];
        assert_eq!(Layout::TetMajorD16.far_fraction(&indices), 0.25);
        assert_eq!(Layout::SlotMajorX4D16.far_fraction(&indices), 0.25);
        assert_eq!(Layout::TetMajor.far_fraction(&indices), 0.0);
        assert_eq!(Layout::TetMajorD16.far_fraction(&[]), 0.0);
    }

    /// The texture layout holds at most 8192 × 8192 tets, in rows of a power of two from 64 texels: past that it
    /// does not fit, by name, whatever the bindings.
    #[test]
    fn the_texture_layout_fits_within_webgpus_texture_side_without_a_device() {
        let most = (TEXTURE_SIDE * TEXTURE_SIDE) as usize;
        assert_eq!(texture_width(64 * 8192), Some(64));
        assert_eq!(texture_width(64 * 8192 + 1), Some(128));
        assert_eq!(texture_width(most), Some(8192));
        assert_eq!(texture_width(most + 1), None);
        assert_eq!(Layout::Texture.misfit(most, 4, u64::MAX, 8), None);
        let why = Layout::Texture
            .misfit(most + 1, 4, u64::MAX, 8)
            .expect("past the side");
        assert!(why.contains("67108864 tets"), "{why}");
        assert_eq!(Layout::TetMajor.misfit(most + 1, 4, u64::MAX, 8), None);
    }

    /// A rank's interior and its other tets fall in two launches of groups of four that cover every group once, the
    /// interior's holding interior tets only.
    #[test]
    fn an_interior_and_the_rest_split_the_groups_of_four() {
        for n in 1..40 {
            assert!(quads_of(&(n..n), n).is_empty());
            // (Every tet interior: one launch, of all, and none after.)
            for interior in 0..n {
                let (inner, outer) = (quads_of(&(0..interior), n), quads_of(&(interior..n), n));
                assert_eq!(inner.start, 0);
                assert_eq!(inner.end, outer.start, "n {n}, interior {interior}");
                assert_eq!(outer.end, padded4(n) / 4, "n {n}, interior {interior}");
                assert!(
                    4 * inner.end <= interior,
                    "n {n}, interior {interior}: {inner:?}"
                );
            }
        }
    }
}
