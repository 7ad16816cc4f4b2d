//! The sizes every bench section runs at, by adapter class and mode, in one place: the sections read them, and a
//! test (tests/gpu_sizes.rs) checks the GPU sizes against an H200's limits without a device, so a bench that
//! would fail on a GPU fails in CI first (on 2026-11-26 the mm section stopped on an H200: one panel's B passed
//! the adapter's largest buffer).

/// What one `bespoke bench` run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// D2Q9 lattice side (the `lbm` section).
    pub lbm_side: usize,
    /// Cubes per side of the `fv` section's box (6 c³ tets).
    pub fv_cubes: usize,
    /// The `mm` section's panel width N and how many of the shipped operators it runs.
    pub mm_n: usize,
    pub mm_operators: usize,
    /// The `scale` section: lattice cells per side of each rank's block, mesh cubes per side of each rank's box.
    pub scale_side: usize,
    pub scale_cubes: usize,
    /// The `dense` section: the square GEMM's side, and the PyFR-like panel (M, N, K).
    pub dense_square: usize,
    pub dense_pyfr: [usize; 3],
}

impl Sizes {
    /// The sizes on an adapter that is a CPU (`cpu`) or a GPU, in quick mode or not.
    pub fn of(cpu: bool, quick: bool) -> Self {
        match (quick, cpu) {
            (true, _) => Self {
                lbm_side: 512,
                fv_cubes: 24,
                mm_n: 4096,
                mm_operators: 3,
                scale_side: 128,
                scale_cubes: 8,
                dense_square: 256,
                dense_pyfr: [96, 8192, 64],
            },
            // 2048² f32 moves 302 MB per step; 88³ cubes = 4.09 M tets (operator 131 MB); N = 32 800 as PyFR
            // pads it.
            (false, true) => Self {
                lbm_side: 2048,
                fv_cubes: 88,
                mm_n: 32_800,
                mm_operators: MM_OPERATORS,
                scale_side: 512,
                scale_cubes: 24,
                dense_square: 1024,
                dense_pyfr: [96, 100_000, 64],
            },
            // Past a GPU's last-level cache (an H200 has 60 MB of L2): 8192² (4.8 GB two-lattice), 140³ cubes
            // = 16.5 M tets (operator 527 MB), N = 2^20.
            (false, false) => Self {
                lbm_side: 8192,
                fv_cubes: 140,
                mm_n: 1 << 20,
                mm_operators: MM_OPERATORS,
                scale_side: 4096,
                scale_cubes: 96,
                dense_square: 1024,
                dense_pyfr: [96, 100_000, 64],
            },
        }
    }
}

/// The operators shipped in tests/data/pyfr that the mm section runs (all of them).
pub const MM_OPERATORS: usize = 9;
