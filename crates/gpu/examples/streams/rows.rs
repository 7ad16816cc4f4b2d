//! The rows of the streams probe: what each varies against the 9-stream scalar row, and D2Q9's tables.

#[derive(Clone, Copy)]
pub(crate) enum Binding {
    /// One binding per stream, each a window of the one allocation, `pad` f32 apart.
    Separate { pad: usize },
    /// One binding for all streams; stream k at `k * (n + pad)`.
    One { pad: usize },
    /// One binding per stream, each its own allocation (as a lattice's 18 buffers are).
    Buffers,
}

#[derive(Clone, Copy)]
pub(crate) enum Pattern {
    /// b_k[i] = a_k[i] + 1 for every stream.
    Copy,
    /// a_k[i] = a_k[i] + 1, one binding per stream read and written.
    InPlace,
    /// out[i] = Σ_k a_k[i]: K streams read, one written.
    Reduce,
}

#[derive(Clone, Copy)]
pub(crate) struct Row {
    pub(crate) name: &'static str,
    pub(crate) k: usize,
    pub(crate) width: usize,
    pub(crate) binding: Binding,
    pub(crate) pattern: Pattern,
    pub(crate) checked: bool,
    pub(crate) cells: usize,
    pub(crate) wg: u32,
    /// The D2Q9 pulls: stream k read at the cell minus direction k's offset on a periodic lattice of `PULL_NX`
    /// columns (the step's index arithmetic and misaligned loads), 9 f32 streams only.
    pub(crate) pulls: bool,
    /// A BGK collision (ω = 1: each output its equilibrium from the nine loaded values), 9 f32 streams only.
    pub(crate) collide: bool,
    /// Timed as the lattices are: a → b then b → a in one timed pass (two dispatches, a barrier apart), per launch.
    pub(crate) pair: bool,
}

/// Columns of the lattice the pull rows walk (CELLS is a multiple of it).
/// The pulls' row length (the lattice's width): 4096 unless a second argument gives another (the 8192² lattice's
/// is 8192; whether the width matters is the question on 2026-11-27, where the lattice's own 8192-wide step ran at
/// 0.36 of copy and this one at 4096 wide at 0.97).
pub(crate) static PULL_NX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

pub(crate) fn pull_nx() -> usize {
    *PULL_NX.get_or_init(|| 4096)
}
/// D2Q9's directions (x, y) and weights, in the order the step stores them (bespoke-lbm's `d2q9` tables, written
/// out again: the gpu crate sits below the lbm crate and cannot use them).
pub(crate) const C: [(i32, i32); 9] = [
    (0, 0),
    (1, 0),
    (0, 1),
    (-1, 0),
    (0, -1),
    (1, 1),
    (-1, 1),
    (-1, -1),
    (1, -1),
];
pub(crate) const W: [f64; 9] = [
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

pub(crate) const fn row(name: &'static str, k: usize, width: usize) -> Row {
    Row {
        name,
        k,
        width,
        binding: Binding::Separate { pad: 0 },
        pattern: Pattern::Copy,
        checked: false,
        cells: 1,
        wg: 256,
        pulls: false,
        collide: false,
        pair: false,
    }
}

pub(crate) fn rows() -> Vec<Row> {
    let base = row("k9 f32 (LBM's pattern, no pulls)", 9, 1);
    vec![
        row("k1 vec4 (the probe's vec4x1 walk)", 1, 4),
        row("k1 f32", 1, 1),
        row("k2 f32", 2, 1),
        row("k4 f32", 4, 1),
        base,
        Row {
            name: "k9 f32 wg64",
            wg: 64,
            ..base
        },
        Row {
            name: "k9 f32 wg1024",
            wg: 1024,
            ..base
        },
        Row {
            name: "k9 f32 one binding",
            binding: Binding::One { pad: 0 },
            ..base
        },
        Row {
            name: "k9 f32 streams 256 B staggered",
            binding: Binding::Separate { pad: 64 },
            ..base
        },
        Row {
            name: "k9 f32 streams 4224 B staggered",
            binding: Binding::Separate { pad: 1056 },
            ..base
        },
        Row {
            name: "k9 f32 bounds-checked",
            checked: true,
            ..base
        },
        Row {
            name: "k9 f32 2 cells per invocation",
            cells: 2,
            ..base
        },
        Row {
            name: "k9 f32 4 cells per invocation",
            cells: 4,
            ..base
        },
        row("k9 vec2", 9, 2),
        row("k9 vec4", 9, 4),
        Row {
            name: "k9 f32 + D2Q9 pulls",
            pulls: true,
            ..base
        },
        Row {
            name: "k9 f32 + BGK collision",
            collide: true,
            ..base
        },
        Row {
            name: "k9 f32 + pulls + collision (a step)",
            pulls: true,
            collide: true,
            ..base
        },
        Row {
            name: "k9 f32 a→b, b→a (as lattices time)",
            pair: true,
            ..base
        },
        Row {
            name: "a step, a→b, b→a",
            pulls: true,
            collide: true,
            pair: true,
            ..base
        },
        Row {
            name: "k9 f32, 18 allocations",
            binding: Binding::Buffers,
            ..base
        },
        Row {
            name: "a step, a→b, b→a, 18 allocations",
            binding: Binding::Buffers,
            pulls: true,
            collide: true,
            pair: true,
            ..base
        },
        Row {
            name: "a step, 18 allocations, wg64",
            binding: Binding::Buffers,
            pulls: true,
            collide: true,
            pair: true,
            wg: 64,
            ..base
        },
        Row {
            name: "k9 f32 in place",
            pattern: Pattern::InPlace,
            ..base
        },
        Row {
            name: "k9 f32 reads, 1 written",
            pattern: Pattern::Reduce,
            ..base
        },
    ]
}
