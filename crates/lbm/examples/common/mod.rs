//! What the lbm examples share: the periodic two-lattice kernel they time, a Taylor–Green state in raw population
//! buffers, and the launch pair that alternates the two lattices.

use bespoke_gpu::{Arg, Gpu, GpuBuffer, Grid, Kernel, Launch};
use bespoke_lbm::d2q9::{W, equilibrium_component};
use bespoke_lbm::kernel::{Edges, KernelSpec, Mode, Phase, Region, WG};
use bespoke_lbm::{Collision, Layout, Storage, stored_words};

pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// `[NX NY]` from the command line, 2048² by default.
pub fn size_args() -> Res<(usize, usize)> {
    // Words (f32, f16) are the examples' own switches; every other argument is a size.
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter(|a| a != "f32" && a != "f16")
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    Ok(match args[..] {
        [nx, ny] => (nx, ny),
        _ => (2048, 2048),
    })
}

/// The bench's kernel: all fluid, periodic, BGK ω = 1, two-lattice step.
pub fn periodic_ab_spec(nx: usize, ny: usize, storage: Storage) -> KernelSpec {
    KernelSpec {
        nx,
        ny,
        storage,
        collision: Collision::Bgk { omega: 1.0 },
        force: [0.0, 0.0],
        smagorinsky: 0.0,
        flags: false,
        curved: false,
        phase: Phase::Ab,
        mode: Mode::Step,
        edges: Edges::whole(nx, ny),
        region: Region::All,
        folded_f16: false,
        exact_f16: false,
        wg: bespoke_lbm::kernel::WG,
        cells: 1,
        ablation: None,
        one_buffer: 0,
        packed_macros: false,
        packed_stash: false,
        descending: false,
    }
}

/// A lattice state for timing: what the populations hold can matter to a memory system (a GPU's may move a
/// constant faster than varied words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// The bench's Taylor–Green vortex (ρ = 1, |u| ≤ 0.05): smooth, every cell different.
    TaylorGreen,
    /// ρ = 1, u = (0.05, 0) everywhere: one word per direction.
    Uniform,
    /// Each population its rest weight times 1 + 0.05 ξ, ξ uniform in [-1, 1) from a per-cell hash.
    Random,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            Self::TaylorGreen => "taylor-green",
            Self::Uniform => "uniform",
            Self::Random => "random",
        }
    }

    fn value(self, i: usize, c: usize, nx: usize, ny: usize) -> f64 {
        use std::f64::consts::PI;
        match self {
            Self::TaylorGreen => {
                let (kx, ky) = (
                    2.0 * PI * (c % nx) as f64 / nx as f64,
                    2.0 * PI * (c / nx) as f64 / ny as f64,
                );
                equilibrium_component(
                    i,
                    1.0,
                    [-0.05 * kx.cos() * ky.sin(), 0.05 * kx.sin() * ky.cos()],
                )
            }
            Self::Uniform => equilibrium_component(i, 1.0, [0.05, 0.0]),
            Self::Random => {
                use bespoke_gpu::rng::Rng;
                let mut r = bespoke_gpu::rng::seeded((c * 9 + i) as u64);
                W[i] * (1.0 + 0.05 * (2.0 * r.random::<f64>() - 1.0))
            }
        }
    }
}

/// Both lattices (18 buffers, A then B) holding `state`, stored as the library stores it (built on every core).
pub fn state_buffers(
    gpu: &Gpu,
    storage: Storage,
    nx: usize,
    ny: usize,
    state: State,
) -> Res<Vec<GpuBuffer<u32>>> {
    let words = state_words(storage, nx, ny, state);
    Ok((0..18)
        .map(|k| gpu.upload(&words[k % 9]))
        .collect::<Result<_, _>>()?)
}

/// Writes `state` into both lattices' existing buffers (`state_buffers`' layout): the same allocations holding
/// another state, so a time that follows the state can be told from one that follows the allocations.
pub fn write_state(
    gpu: &Gpu,
    bufs: &[GpuBuffer<u32>],
    storage: Storage,
    nx: usize,
    ny: usize,
    state: State,
) -> Res<()> {
    let words = state_words(storage, nx, ny, state);
    for (k, b) in bufs.iter().enumerate() {
        gpu.write(b, 0, &words[k % 9])?;
    }
    Ok(())
}

/// The stored words of each direction of `state`.
fn state_words(storage: Storage, nx: usize, ny: usize, state: State) -> Vec<Vec<u32>> {
    let mut f = vec![0f64; nx * ny];
    (0..9)
        .map(|i| {
            bespoke_gpu::par_fill(&mut f, |c, o| *o = state.value(i, c, nx, ny));
            stored_words(Layout::of(storage, ny), &f, W[i])
        })
        .collect()
}

/// Both lattices holding the bench's Taylor–Green state (ρ = 1, |u| ≤ 0.05). The state matters: f16 steps ran
/// twice as fast on all-zero words (lavapipe).
pub fn taylor_green_buffers(
    gpu: &Gpu,
    storage: Storage,
    nx: usize,
    ny: usize,
) -> Res<Vec<GpuBuffer<u32>>> {
    state_buffers(gpu, storage, nx, ny, State::TaylorGreen)
}

/// Grid of a kernel spec's invocations.
pub fn grid(spec: &KernelSpec) -> Res<Grid> {
    Ok(Grid::cover(spec.invocations() as u64, WG)?)
}

/// The A→B and B→A launches of a two-lattice kernel over `bufs` (A then B).
pub fn ab_pair(gpu: &Gpu, k: &Kernel, bufs: &[GpuBuffer<u32>], grid: Grid) -> Res<[Launch; 2]> {
    let a: Vec<Arg<'_>> = bufs.iter().map(|b| b.arg()).collect();
    let b: Vec<Arg<'_>> = bufs[9..]
        .iter()
        .chain(&bufs[..9])
        .map(|b| b.arg())
        .collect();
    Ok([gpu.prepare(k, &a, grid)?, gpu.prepare(k, &b, grid)?])
}
