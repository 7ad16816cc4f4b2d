//! A lattice on the device: population buffers (one per direction, so a domain can be 9× larger than one
//! binding, or one for all where the launch shape asks and it fits: [`pops`]), the flag field, prepared launches for both parities, and host-side access that reads back only
//! when asked.

mod exchange;
mod gather;
mod launch;
mod pops;
mod readback;
mod shape;

pub(crate) use launch::{Boundary, Stash, check_shape, pops, prepare_launch};
pub use launch::{check_fits, check_fits_within, check_storage, nine_bindings_fit};
use launch::{check_packed_macros, lattice_spec};

pub(crate) use pops::Pops;
pub use pops::one_buffer_bytes;

pub use shape::{
    CELL_CANDIDATES, MAX_CELLS, STEP_WORKGROUPS, StepShape, cache_key, candidates, one_buffer_fits,
    step_shape, step_shape_in, tuning_size, user_cache,
};

use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use bespoke_gpu::{Arg, Gpu, GpuBuffer, Grid, GridLayout, Launch, Timing};

use crate::config::{Config, Storage, Streaming};
use crate::error::{LbmError, Result};
use crate::flags::{EncodedFlags, Flags};
use crate::kernel::{Ablation, Edges, KernelSpec, Mode, Phase};
pub use crate::storage::stored_words;
pub(crate) use crate::storage::{cell_bits, put_cell_bits};

pub(crate) const NAN_F32: u32 = 0x7fc0_0000;
const NAN_F16X2: u32 = 0x7e00_7e00;
/// Source of `Lattice::id`.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A D2Q9 lattice on one device.
#[derive(Debug)]
pub struct Lattice<'g> {
    pub(crate) gpu: &'g Gpu,
    /// Unique per lattice in the process, so a probe made for one is refused by another.
    id: u64,
    pub(crate) cfg: Config,
    /// This lattice's cells (a block's, halo included); shared with the caller where it passed an `Rc`.
    pub(crate) flags: Rc<Flags>,
    /// The encoded flags, kept where the in-place stash of interpolated links is rebuilt and saved from them.
    pub(crate) encoded: Option<EncodedFlags>,
    /// The populations: `a` always, `b` for two-lattice streaming.
    pub(crate) a: Pops,
    pub(crate) b: Option<Pops>,
    pub(crate) flag_bufs: Option<Boundary>,
    /// Step launches by parity: two-lattice a→b, b→a; in-place odd, even.
    pub(crate) steps: [Launch; 2],
    /// Macroscopic pass per parity and its outputs (ρ, u_x, u_y; or the three in one buffer), made on first use.
    macros: Option<([Launch; 2], Vec<GpuBuffer<f32>>)>,
    /// Whether the macroscopic kernel writes its three outputs into one buffer ([`KernelSpec::packed_macros`]).
    packed_macros: bool,
    /// Whether the in-place stash lies after the boundary table ([`KernelSpec::packed_stash`]).
    packed_stash: bool,
    /// 0: `a` holds the post-collision state S (in-place: next kernel odd); 1: the other.
    pub(crate) parity: usize,
    pub(crate) steps_done: u64,
    warnings: Vec<String>,
    /// Whether the kernels treat wall distances (the whole domain's, for a block of a distributed lattice).
    curved: bool,
    /// Where the domain's edges lie in this lattice.
    edges: Edges,
    /// The rest of the domain when this lattice is one rank's block (`Lattice::new_distributed`).
    pub(crate) dist: Option<Box<exchange::Dist>>,
    /// The step kernel's launch shape.
    pub(crate) shape: StepShape,
}

/// `shape` as given by a caller (what a tuner measured dropped, the source `given`), after the checks that do not
/// need the adapter: the mask wrap's power-of-two sides, cells per invocation within [`MAX_CELLS`].
fn given_shape(cfg: &Config, shape: StepShape) -> Result<StepShape> {
    if shape.ablation == Some(Ablation::MaskWrap)
        && !(cfg.nx.is_power_of_two() && cfg.ny.is_power_of_two())
    {
        return Err(LbmError::Unsupported(format!(
            "the mask-wrap ablation needs sides that are powers of two, not {}x{}",
            cfg.nx, cfg.ny
        )));
    }
    if !(1..=MAX_CELLS).contains(&shape.cells) {
        return Err(LbmError::param(
            "cells per invocation",
            shape.cells,
            format!("must lie in 1..={MAX_CELLS}"),
        ));
    }
    Ok(StepShape {
        timed: Vec::new(),
        timed_cells: Vec::new(),
        source: "given".into(),
        ..shape
    })
}

/// A given shape's workgroup must be one the adapter launches.
fn check_workgroup(gpu: &Gpu, shape: &StepShape) -> Result<()> {
    if candidates(gpu).contains(&shape.workgroup) {
        return Ok(());
    }
    Err(LbmError::Unsupported(format!(
        "a step workgroup of {} invocations: adapter `{}` launches {:?}",
        shape.workgroup,
        gpu.adapter_name(),
        candidates(gpu)
    )))
}

fn one_buffer_words(one: bool) -> &'static str {
    if one {
        "one buffer for all directions"
    } else {
        "a buffer per direction"
    }
}

/// The step launches of a lattice, per parity (two lattices: a→b, b→a; in place: odd, even), in `shape`'s grid;
/// `spec` gives the step kernel's spec of a phase.
fn step_launches(
    gpu: &Gpu,
    streaming: Streaming,
    spec: &dyn Fn(Phase) -> KernelSpec,
    shape: &StepShape,
    a: &Pops,
    b: Option<&Pops>,
    flag_bufs: Option<&Boundary>,
) -> Result<[Launch; 2]> {
    let grid = gpu.grid_for(
        spec(Phase::Ab).launched() as u64,
        shape.workgroup,
        shape.grid,
    )?;
    // The pair's second launch walks backwards where the shape alternates (`StepShape::alternate`).
    let prepare = |phase, pops: Vec<Arg<'_>>, second: bool| {
        let spec = KernelSpec {
            descending: second && shape.alternate,
            ..spec(phase)
        };
        prepare_launch(gpu, &spec, pops, flag_bufs, &[], grid)
    };
    Ok(match streaming {
        Streaming::Ab => {
            let b = b.ok_or_else(|| {
                LbmError::State("two-lattice streaming without a second lattice".into())
            })?;
            [
                prepare(Phase::Ab, pops(a, Some(b)), false)?,
                prepare(Phase::Ab, pops(b, Some(a)), true)?,
            ]
        }
        Streaming::InPlace => [
            prepare(Phase::AaOdd, pops(a, None), false)?,
            prepare(Phase::AaEven, pops(a, None), true)?,
        ],
    })
}

impl<'g> Lattice<'g> {
    /// Allocates a lattice at rest (ρ = 1, u = 0) after checking the configuration against the device. `flags`
    /// may be shared (`Rc<Flags>`): the lattice keeps a reference, not a copy.
    pub fn new(gpu: &'g Gpu, cfg: Config, flags: impl Into<Rc<Flags>>) -> Result<Self> {
        Self::whole(gpu, cfg, flags.into(), None)
    }

    /// The whole domain with `shape` (None: [`step_shape`]'s).
    fn whole(
        gpu: &'g Gpu,
        cfg: Config,
        flags: Rc<Flags>,
        shape: Option<StepShape>,
    ) -> Result<Self> {
        check_shape(&cfg, &flags)?;
        // Wall distances without walls are an error `encode` reports.
        let encoded = if Self::needs_flag_field(&flags) {
            Some(flags.encode()?)
        } else {
            None
        };
        let (curved, edges) = (flags.has_wall_distances(), Edges::whole(cfg.nx, cfg.ny));
        Self::build(gpu, cfg, flags, encoded, curved, edges, shape)
    }

    /// [`Lattice::new`] with the step kernel in workgroups of `workgroup` invocations instead of the shape
    /// chosen on the device ([`step_shape`]); the results are bit-identical whatever the shape. The directions
    /// take a binding each, or one buffer where nine bindings a side pass the adapter's storage buffers per
    /// kernel (as the chosen shape does).
    pub fn with_step_workgroup(
        gpu: &'g Gpu,
        cfg: Config,
        flags: impl Into<Rc<Flags>>,
        workgroup: u32,
    ) -> Result<Self> {
        Self::with_step_shape(gpu, cfg, flags, workgroup, GridLayout::Rows, None)
    }

    /// A lattice whose step runs in workgroups of `workgroup` laid out as `grid`, with `ablation` taken out of
    /// the step (None: the physics). The shapes give bit-identical results; the ablations do not (the lab's).
    /// The directions are bound as [`Lattice::with_step_workgroup`] binds them; [`Lattice::with_given_shape`]
    /// says which.
    pub fn with_step_shape(
        gpu: &'g Gpu,
        cfg: Config,
        flags: impl Into<Rc<Flags>>,
        workgroup: u32,
        grid: GridLayout,
        ablation: Option<Ablation>,
    ) -> Result<Self> {
        let flags = flags.into();
        let one_buffer = shape::binds_one_buffer(gpu, &cfg, Self::needs_flag_field(&flags), false);
        Self::with_given_shape(
            gpu,
            cfg,
            flags,
            StepShape {
                workgroup,
                grid,
                ablation,
                one_buffer,
                ..StepShape::given()
            },
        )
    }

    /// Whether a lattice of `flags` binds a flag field (not for all fluid without wall distances).
    fn needs_flag_field(flags: &Flags) -> bool {
        !flags.all_fluid() || flags.has_wall_distances()
    }

    /// A lattice whose step runs in `shape` (its workgroup, cells per invocation, grid and ablation; what the
    /// tuner measured is dropped and the source says `given`).
    pub fn with_given_shape(
        gpu: &'g Gpu,
        cfg: Config,
        flags: impl Into<Rc<Flags>>,
        shape: StepShape,
    ) -> Result<Self> {
        let shape = given_shape(&cfg, shape)?;
        Self::whole(gpu, cfg, flags.into(), Some(shape))
    }

    /// Makes the step kernels again in `shape` on the same buffers and state, as [`Lattice::with_given_shape`]
    /// would have made them: a tuner or the lab times several shapes of one lattice without allocating and
    /// initialising it for each (on an H200 an 8192² lattice's set-up took 2.6 s against 0.14 s of timed steps).
    /// The state carries on from where it is. Refused, with the lattice unchanged: a shape whose `one_buffer`
    /// differs from this lattice's (its allocations differ), a distributed lattice's block, and whatever
    /// [`Lattice::with_given_shape`] refuses.
    pub fn reshape(&mut self, shape: StepShape) -> Result<()> {
        if self.dist.is_some() {
            return Err(LbmError::Unsupported(
                "a distributed lattice's step shape is set when it is made, not changed after"
                    .into(),
            ));
        }
        if shape.one_buffer != self.shape.one_buffer {
            return Err(LbmError::Unsupported(format!(
                "reshaping a lattice with {} to {}: the populations' allocations differ; make a new lattice",
                one_buffer_words(self.shape.one_buffer),
                one_buffer_words(shape.one_buffer)
            )));
        }
        let shape = given_shape(&self.cfg, shape)?;
        check_workgroup(self.gpu, &shape)?;
        let old = std::mem::replace(&mut self.shape, shape);
        let spec = |phase| self.spec(phase, Mode::Step);
        match step_launches(
            self.gpu,
            self.cfg.streaming,
            &spec,
            &self.shape,
            &self.a,
            self.b.as_ref(),
            self.flag_bufs.as_ref(),
        ) {
            Ok(steps) => {
                self.steps = steps;
                Ok(())
            }
            Err(e) => {
                self.shape = old;
                Err(e)
            }
        }
    }

    /// Whether the step kernels round every stored f16 value to its nearest f16 themselves: an f16 lattice on
    /// a device whose `pack2x16float` does not round to nearest even (`Gpu::rounds_f16_to_nearest_even`, asked
    /// when its kernels were made), or whose shape forces it (`StepShape::exact_f16`, the lab's).
    pub fn rounds_f16_explicitly(&self) -> bool {
        // The device answered when the kernels were made (remembered): an error here is one it gave then too.
        launch::rounds_f16_explicitly(self.gpu, self.cfg.storage, self.step_shape().exact_f16)
            .unwrap_or(false)
    }

    /// The step kernel's launch shape and where it came from.
    pub fn step_shape(&self) -> &StepShape {
        &self.shape
    }

    /// How many device allocations hold the populations (one per lattice buffer where the adapter's buffer limit
    /// allows: see `pops.rs` for why).
    pub fn population_allocations(&self) -> usize {
        self.a.allocations() + self.b.as_ref().map_or(0, Pops::allocations)
    }

    /// A lattice with pre-encoded flags: the whole domain, or one block of it (local `cfg` and `flags`, the
    /// domain's wall-distance switch and edges), its step kernel in `shape` (None: [`step_shape`]'s).
    pub(crate) fn build(
        gpu: &'g Gpu,
        cfg: Config,
        flags: Rc<Flags>,
        encoded: Option<EncodedFlags>,
        curved: bool,
        edges: Edges,
        shape: Option<StepShape>,
    ) -> Result<Self> {
        let warnings = cfg.check()?;
        check_storage(gpu, &cfg)?;
        check_fits(gpu, &cfg)?;
        let shape = match shape {
            Some(s) => {
                check_workgroup(gpu, &s)?;
                s
            }
            None => step_shape(gpu, &cfg, encoded.is_some())?,
        };
        let words = cfg.layout().words(cfg.cells());
        let max_bindings = gpu.limits().max_storage_buffers_per_shader_stage as usize;
        // Allocated before the kernels are made: one buffer for all directions sets their stride.
        let a = Pops::alloc(gpu, words, shape.one_buffer)?;
        let phase = match cfg.streaming {
            Streaming::Ab => Phase::Ab,
            Streaming::InPlace => Phase::AaOdd,
        };
        let packed = |phase, mode, packed_macros, packed_stash| KernelSpec {
            edges,
            one_buffer: a.stride().unwrap_or(0),
            packed_macros,
            packed_stash,
            ..lattice_spec(&cfg, encoded.is_some(), curved, phase, mode, &shape)
        };
        // The macroscopic outputs in one buffer only where three would bind past the adapter's count; then the
        // in-place stash after the boundary table only where its own buffer would.
        let packed_macros =
            packed(phase, Mode::Macro, false, false).storage_bindings() > max_bindings;
        let packed_stash = packed(phase, Mode::Step, false, false).stashed()
            && [Mode::Step, Mode::Macro].into_iter().any(|mode| {
                packed(phase, mode, packed_macros, false).storage_bindings() > max_bindings
            });
        let spec = |phase, mode| packed(phase, mode, packed_macros, packed_stash);
        if packed_macros {
            check_packed_macros(gpu, &cfg)?;
        }
        for mode in [Mode::Step, Mode::Macro] {
            let need = spec(phase, mode).storage_bindings();
            if need > max_bindings {
                // In-place streaming binds one set of populations where two lattices bind two: say so only where
                // that would fit.
                let hint = if phase == Phase::Ab
                    && spec(Phase::AaOdd, mode).storage_bindings() <= max_bindings
                {
                    " (in-place streaming needs fewer)"
                } else {
                    ""
                };
                return Err(LbmError::Unsupported(format!(
                    "{} streaming with {}: its {} kernel binds {need} storage buffers; adapter `{}` allows \
                     {max_bindings} storage buffers per kernel{hint}",
                    cfg.streaming.name(),
                    if encoded.is_some() {
                        "flags"
                    } else {
                        "no flags"
                    },
                    match mode {
                        Mode::Step => "step",
                        _ => "macroscopic",
                    },
                    gpu.adapter_name()
                )));
            }
        }

        let b = if cfg.streaming == Streaming::Ab {
            Some(Pops::alloc(gpu, words, shape.one_buffer)?)
        } else {
            None
        };
        let flag_bufs = match &encoded {
            Some(e) => Some(Boundary {
                codes: gpu.upload(&e.codes)?,
                // In-place kernels with wall distances keep a stash (`KernelSpec::stashed`), after the table
                // where the adapter's storage buffers are too few for its own. Zeros: the populations at rest,
                // as `a` starts.
                table: if packed_stash {
                    let mut t = e.table.clone();
                    t.resize(2 * e.table.len(), [0.0; 2]);
                    gpu.upload(&t)?
                } else {
                    gpu.upload(&e.table)?
                },
                stash: if packed_stash {
                    Some(Stash::AfterTable {
                        entries: e.table.len(),
                    })
                } else if cfg.streaming == Streaming::InPlace && curved {
                    Some(Stash::Own(gpu.alloc_filled::<f32>(2 * e.table.len(), 0.0)?))
                } else {
                    None
                },
            }),
            None => None,
        };
        let steps = step_launches(
            gpu,
            cfg.streaming,
            &|phase| spec(phase, Mode::Step),
            &shape,
            &a,
            b.as_ref(),
            flag_bufs.as_ref(),
        )?;
        Ok(Self {
            gpu,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            cfg,
            flags,
            // The codes stay on the host only where the stash is rebuilt and saved from them (4 bytes a cell).
            encoded: encoded.filter(|_| flag_bufs.as_ref().is_some_and(|f| f.stash.is_some())),
            a,
            b,
            flag_bufs,
            steps,
            macros: None,
            packed_macros,
            packed_stash,
            parity: 0,
            steps_done: 0,
            warnings,
            curved,
            edges,
            shape,
            dist: None,
        })
    }

    /// The lattice's configuration (the whole domain's, also on one rank of a distributed lattice).
    pub fn config(&self) -> &Config {
        self.dist.as_ref().map_or(&self.cfg, |d| &d.global_cfg)
    }
    /// The cells of the whole domain.
    pub fn flags(&self) -> &Flags {
        self.dist.as_ref().map_or(&self.flags, |d| &d.global_flags)
    }
    pub fn gpu(&self) -> &'g Gpu {
        self.gpu
    }
    /// Warnings from the parameter checks.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
    pub(crate) fn warn(&mut self, w: String) {
        self.warnings.push(w);
    }
    /// Drops a warning the caller has shown not to apply.
    pub(crate) fn withdraw(&mut self, w: &str) {
        self.warnings.retain(|x| x != w);
    }
    pub fn steps_done(&self) -> u64 {
        self.steps_done
    }
    /// Bytes each cell moves per step: 9 populations read and written, plus the flag when there is one.
    pub fn bytes_per_cell(&self) -> usize {
        18 * self.cfg.storage.bytes() + if self.flag_bufs.is_some() { 4 } else { 0 }
    }

    /// Runs `n` steps without reading anything back.
    pub fn step(&mut self, n: u64) -> Result<()> {
        if self.dist.is_some() {
            return self.step_distributed(n);
        }
        self.parity = self
            .gpu
            .run_alternating([&self.steps[0], &self.steps[1]], self.parity, n)?;
        self.steps_done += n;
        Ok(())
    }

    /// Times `reps` pairs of steps after `warmup` pairs (the state advances by 2·(warmup + reps) steps).
    /// Samples are seconds per pair.
    pub fn time_pairs(&mut self, warmup: usize, reps: usize) -> Result<Timing> {
        if self.dist.is_some() {
            return self.time_pairs_distributed(warmup, reps);
        }
        let p = self.parity;
        let t = self
            .gpu
            .time(&[&self.steps[p], &self.steps[1 - p]], warmup, reps)?;
        self.steps_done += 2 * (warmup + t.samples.len()) as u64;
        Ok(t)
    }

    /// The kernel spec of this lattice for `phase` and `mode`.
    pub(crate) fn spec(&self, phase: Phase, mode: Mode) -> KernelSpec {
        KernelSpec {
            edges: self.edges,
            one_buffer: self.a.stride().unwrap_or(0),
            packed_macros: self.packed_macros,
            packed_stash: self.packed_stash,
            ..lattice_spec(
                &self.cfg,
                self.flag_bufs.is_some(),
                self.curved,
                phase,
                mode,
                &self.shape,
            )
        }
    }

    /// Launches, per parity, of a kernel in `mode` that reads the current state as the next step would (its
    /// phase) and writes only `extra`, bound after the populations and flags.
    pub(crate) fn prepare_reader(
        &self,
        mode: Mode,
        extra: &[Arg<'_>],
        grid: Grid,
    ) -> Result<[Launch; 2]> {
        let prepare = |phase: Phase, pops: &Pops| -> Result<Launch> {
            prepare_launch(
                self.gpu,
                &self.spec(phase, mode),
                pops.kernel_args(),
                self.flag_bufs.as_ref(),
                extra,
                grid,
            )
        };
        Ok(match self.cfg.streaming {
            Streaming::Ab => [
                prepare(Phase::Ab, &self.a)?,
                prepare(Phase::Ab, self.spare_b()?)?,
            ],
            Streaming::InPlace => [
                prepare(Phase::AaOdd, &self.a)?,
                prepare(Phase::AaEven, &self.a)?,
            ],
        })
    }

    /// This lattice's process-unique id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
    /// Which launch of a per-parity pair reads the current state.
    pub(crate) fn parity(&self) -> usize {
        self.parity
    }

    /// Fills the spare lattice of two-lattice streaming with NaN, so a population a step fails to write shows.
    #[doc(hidden)]
    pub fn poison_spare(&self) -> Result<()> {
        if self.cfg.streaming == Streaming::Ab {
            let spare = if self.parity == 0 {
                self.spare_b()?
            } else {
                &self.a
            };
            let nan = match self.cfg.storage {
                Storage::F32 => NAN_F32,
                Storage::F16 => NAN_F16X2,
            };
            spare.fill(self.gpu, nan)?;
        }
        Ok(())
    }

    /// The second lattice of two-lattice streaming.
    pub(crate) fn spare_b(&self) -> Result<&Pops> {
        self.b.as_ref().ok_or_else(|| {
            LbmError::State("an in-place lattice has no second set of populations".into())
        })
    }

    /// The populations holding parity `p`'s state: `a` for 0 (and always in place), `b` for 1.
    pub(crate) fn pops_of(&self, p: usize) -> &Pops {
        match (p, &self.b) {
            (1, Some(b)) => b,
            _ => &self.a,
        }
    }
}
