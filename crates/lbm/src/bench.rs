//! Throughput of the stepper on a periodic all-fluid lattice (no flag field: exactly 9 populations read and
//! written per cell), the figure the `lbm` bench section reports against the copy bandwidth.

use std::f64::consts::PI;

use bespoke_gpu::Gpu;

use crate::config::{Collision, Config, Storage, Streaming};
use crate::distributed::Ranks;
use crate::error::{LbmError, Result};
use crate::flags::Flags;
use crate::kernel::Ablation;
use crate::lattice::{Lattice, check_fits};

/// One timed configuration.
#[derive(Clone, Debug)]
pub struct LbmBench {
    pub nx: usize,
    pub ny: usize,
    pub storage: Storage,
    pub streaming: Streaming,
    /// Median seconds per step.
    pub seconds_per_step: f64,
    pub mlups: f64,
    pub bytes_per_cell: usize,
    pub gbps: f64,
    pub timing_source: &'static str,
    /// The step kernel's launch shape (chosen on the device: `crate::shape`).
    pub shape: crate::shape::StepShape,
    /// f16 stores rounded by the kernel itself (`Lattice::rounds_f16_explicitly`).
    pub f16_rounded_explicitly: bool,
}

/// A lattice ready for timing: a decaying Taylor–Green field (no zeros, no trivial state), BGK at ω = 1 (the operator of the published GLUPS figures).
pub fn bench_lattice(
    gpu: &Gpu,
    nx: usize,
    ny: usize,
    storage: Storage,
    streaming: Streaming,
) -> Result<Lattice<'_>> {
    bench_lattice_on(gpu, nx, ny, storage, streaming, None)
}

/// `bench_lattice` on one domain, or this rank's block of it across `ranks`.
pub fn bench_lattice_on<'g>(
    gpu: &'g Gpu,
    nx: usize,
    ny: usize,
    storage: Storage,
    streaming: Streaming,
    ranks: Option<&Ranks>,
) -> Result<Lattice<'g>> {
    bench_lattice_shared(
        gpu,
        &std::rc::Rc::new(Flags::fluid(nx, ny)),
        storage,
        streaming,
        ranks,
    )
}

/// [`bench_lattice_on`] on the all-fluid `flags` of the domain, which a distributed lattice shares rather than
/// copies (a scaling run builds one per domain size for its several setups).
pub fn bench_lattice_shared<'g>(
    gpu: &'g Gpu,
    flags: &std::rc::Rc<Flags>,
    storage: Storage,
    streaming: Streaming,
    ranks: Option<&Ranks>,
) -> Result<Lattice<'g>> {
    let (nx, ny) = (flags.nx(), flags.ny());
    let cfg = Config {
        storage,
        streaming,
        ..Config::new(nx, ny, Collision::Bgk { omega: 1.0 })
    };
    let mut lat = match ranks {
        None => {
            check_fits(gpu, &cfg)?;
            Lattice::new(gpu, cfg, flags.clone())?
        }
        Some(r) => Lattice::new_distributed(gpu, cfg, flags.clone(), r)?,
    };
    taylor_green(&mut lat)?;
    Ok(lat)
}

/// The bench's state: a decaying Taylor–Green field.
fn taylor_green(lat: &mut Lattice<'_>) -> Result<()> {
    let (nx, ny) = (lat.config().nx, lat.config().ny);
    let (kx, ky) = (2.0 * PI / nx as f64, 2.0 * PI / ny as f64);
    // The field is separable: a column's and a row's sine and cosine, once each (the same values as per cell; at
    // 8192² four transcendentals a cell were a good part of a lab row's host time).
    let (sx, cx): (Vec<f64>, Vec<f64>) = (0..nx).map(|x| (kx * x as f64).sin_cos()).unzip();
    let (sy, cy): (Vec<f64>, Vec<f64>) = (0..ny).map(|y| (ky * y as f64).sin_cos()).unzip();
    lat.init_equilibrium(|x, y| (1.0, [-0.05 * cx[x] * sy[y], 0.05 * sx[x] * cy[y]]))
}

/// A lab variant of the bench's step: a given step workgroup, optionally an ablation, optionally a flag field
/// (channel walls, so every cell's flag is read) instead of the periodic all-fluid lattice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepVariant {
    pub workgroup: u32,
    /// Cells (or paired words) per invocation.
    pub cells: u32,
    pub grid: bespoke_gpu::GridLayout,
    pub ablation: Option<Ablation>,
    pub walls: bool,
    /// The nine directions in one buffer, bound once (`StepShape::one_buffer`).
    pub one_buffer: bool,
    /// f16 stores rounded explicitly where the device's pack would round them alike (`StepShape::exact_f16`).
    pub exact_f16: bool,
    /// Every other step walks the lattice backwards (`StepShape::alternate`).
    pub alternate: bool,
}

impl StepVariant {
    pub fn name(&self) -> String {
        let mut s = format!("wg{}", self.workgroup);
        if self.cells != 1 {
            s += &format!(" {}-cells", self.cells);
        }
        match self.grid {
            bespoke_gpu::GridLayout::Rows => {}
            bespoke_gpu::GridLayout::Split => s += " split-grid",
            bespoke_gpu::GridLayout::RowsOf(r) => s += &format!(" rows-of-{r}"),
        }
        if let Some(a) = self.ablation {
            s += &format!(" {}", a.name());
        }
        if self.walls {
            s += " walls";
        }
        if self.one_buffer {
            s += " one-buffer";
        }
        if self.exact_f16 {
            s += " exact-f16";
        }
        if self.alternate {
            s += " alternate";
        }
        s
    }
}

/// The largest side, `side` or below in steps of 256, at which the bench's lattice (`storage`) keeps its nine
/// directions in one buffer on `gpu` (`StepShape::one_buffer`); None where not even 256² does.
pub fn one_buffer_side(gpu: &Gpu, side: usize, storage: Storage) -> Option<usize> {
    let fits = |s: usize| {
        let cfg = Config {
            storage,
            ..Config::new(s, s, Collision::Bgk { omega: 1.0 })
        };
        crate::shape::one_buffer_fits(gpu, &cfg)
    };
    if fits(side) {
        return Some(side);
    }
    (1..=side / 256).rev().map(|k| 256 * k).find(|&s| fits(s))
}

/// Each of `variants` of the bench's step ([`bench_lattice`]'s Taylor–Green lattice at `side`², BGK at ω = 1),
/// timed over `reps` pairs of steps, on as few lattices as their allocations allow: one per flag field and buffer
/// layout (`walls`, `one_buffer`), set up once and reshaped for each of its variants ([`Lattice::reshape`]; the
/// state carries on, which a timing does not notice). On an H200 a lab row's 8192² lattice took 2.6 s to set up
/// against 0.14 s of timed steps, and the clocks fell back to idle in between. Each variant's result goes to
/// `each` as it is measured, the variants of a lattice together, the lattices in the order of their first
/// variants; a lattice that cannot be made is every one of its variants' error.
pub fn bench_step_variants(
    gpu: &Gpu,
    side: usize,
    storage: Storage,
    streaming: Streaming,
    variants: &[StepVariant],
    reps: usize,
    each: &mut dyn FnMut(StepVariant, Result<LbmBench>),
) {
    let cfg = Config {
        storage,
        streaming,
        ..Config::new(side, side, Collision::Bgk { omega: 1.0 })
    };
    let shape_of = |v: &StepVariant| crate::shape::StepShape {
        workgroup: v.workgroup,
        cells: v.cells,
        grid: v.grid,
        ablation: v.ablation,
        one_buffer: v.one_buffer,
        exact_f16: v.exact_f16,
        alternate: v.alternate,
        ..crate::shape::StepShape::given()
    };
    let mut groups: Vec<(bool, bool)> = Vec::new();
    for v in variants {
        if !groups.contains(&(v.walls, v.one_buffer)) {
            groups.push((v.walls, v.one_buffer));
        }
    }
    // Where a row's seconds go (`BESPOKE_PHASE_TIMES=1`).
    let what = format!("lbm {side}² {} {}", storage.name(), streaming.name());
    for (walls, one_buffer) in groups {
        let group: Vec<StepVariant> = variants
            .iter()
            .copied()
            .filter(|v| (v.walls, v.one_buffer) == (walls, one_buffer))
            .collect();
        let made = check_fits(gpu, &cfg).and_then(|()| {
            let mut flags = Flags::fluid(side, side);
            if walls {
                flags.channel_walls();
            }
            let mut lat = bespoke_gpu::phase(format!("{what}: lattice"), || {
                Lattice::with_given_shape(gpu, cfg.clone(), flags, shape_of(&group[0]))
            })?;
            bespoke_gpu::phase(format!("{what}: Taylor–Green state"), || {
                taylor_green(&mut lat)
            })?;
            Ok(lat)
        });
        let mut lat = match made {
            Ok(lat) => lat,
            Err(e) => {
                let said = e.to_string();
                let mut e = Some(e);
                for v in group {
                    each(
                        v,
                        Err(e
                            .take()
                            .unwrap_or_else(|| LbmError::Unsupported(said.clone()))),
                    );
                }
                continue;
            }
        };
        for v in group {
            let r = lat.reshape(shape_of(&v)).and_then(|()| {
                bespoke_gpu::phase(format!("{what} {}: timed steps", v.name()), || {
                    time_lattice(&mut lat, reps)
                })
            });
            each(v, r);
        }
    }
}

/// Times `reps` pairs of steps after two warm-up pairs.
pub fn bench_stepper(
    gpu: &Gpu,
    nx: usize,
    ny: usize,
    storage: Storage,
    streaming: Streaming,
    reps: usize,
) -> Result<LbmBench> {
    let mut lat = bench_lattice(gpu, nx, ny, storage, streaming)?;
    time_lattice(&mut lat, reps)
}

fn time_lattice(lat: &mut Lattice<'_>, reps: usize) -> Result<LbmBench> {
    let t = lat.time_pairs(2, reps)?;
    let seconds_per_step = t.median() / 2.0;
    let (nx, ny) = (lat.config().nx, lat.config().ny);
    let cells = (nx * ny) as f64;
    let bytes_per_cell = lat.bytes_per_cell();
    Ok(LbmBench {
        nx,
        ny,
        storage: lat.config().storage,
        streaming: lat.config().streaming,
        seconds_per_step,
        mlups: cells / seconds_per_step / 1e6,
        bytes_per_cell,
        gbps: cells * bytes_per_cell as f64 / seconds_per_step / 1e9,
        timing_source: t.source.as_str(),
        shape: lat.step_shape().clone(),
        f16_rounded_explicitly: lat.rounds_f16_explicitly(),
    })
}
