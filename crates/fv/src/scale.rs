//! Scaling across ranks ([`bespoke_comm::scaling`]): weak scaling at a fixed mesh size per rank (a box of
//! P·c × c × c cubes, METIS k-way parts), strong scaling on a fixed box. Every rank calls [`scale`].

use std::rc::Rc;
use std::time::Instant;

use bespoke_comm::Comm;
use bespoke_comm::scaling::{Memory, ScaleReport, Setup, Timed, Timer, scaling};
use bespoke_gpu::Gpu;

use crate::diffusion::Diffusion;
use crate::distributed::{DistDiffusion, RankSetup, partition};
use crate::error::{FvError, Result};
use crate::generate::BoxMesh;
use crate::kernel::{KernelKind, Layout};
use crate::operator::{Boundary, Operator, adjacency};
use crate::ordering::{OrderingKind, order};

/// What to measure.
#[derive(Clone, Debug)]
pub struct ScaleOptions {
    /// Cubes per side of each rank's box in weak scaling (6 c³ tets per rank).
    pub cubes: usize,
    /// Cubes per side of the strong-scaling box.
    pub strong_cubes: usize,
    /// Steps per timed batch.
    pub steps: usize,
    /// Interleaved rounds (each figure is the median).
    pub rounds: usize,
    /// In-rank ordering.
    pub ordering: OrderingKind,
    /// Bytes of device data all ranks' setups may hold at once; past it they are built and timed one at a time
    /// ([`bespoke_comm::scaling::Memory`]).
    pub memory_budget: u64,
}

/// Device bytes per tet of the timed diffusion, an upper estimate: four neighbours and coefficients, the
/// diagonal, two state vectors, and the texture layout's padding.
pub const DEVICE_BYTES_PER_TET: u64 = 64;

fn box_operator(cells: [usize; 3]) -> Result<Operator> {
    let mesh = BoxMesh {
        cells,
        jitter: 0.2,
        shuffle: Some(7),
        seed: 1,
    }
    .build()?;
    let adj = adjacency(&mesh)?;
    Operator::diffusion(&mesh, &adj, 1.0, Boundary::ZeroFlux)
}

/// A box's size, its operator, and its partition once a distributed setup made one.
type SharedMesh = ([usize; 3], Rc<Operator>, Option<Rc<Vec<u32>>>);

/// Weak and strong scaling of f32 diffusion (gather kernel, texture layout) on the job's ranks.
pub fn scale(gpu: &Gpu, comm: Rc<dyn Comm>, o: &ScaleOptions) -> Result<ScaleReport> {
    let p = comm.size();
    let (c, s) = (o.cubes, o.strong_cubes);
    let code = format!(
        "fv diffusion f32, {} tets per rank, strong {} tets",
        6 * c * c * c,
        6 * s * s * s
    );
    let cc = comm.clone();
    let steps = o.steps;
    let cells_of = |setup: Setup| match setup {
        Setup::WeakSingle { .. } => [c, c, c],
        Setup::StrongSingle | Setup::Strong => [s, s, s],
        Setup::Weak { .. } => [p * c, c, c],
    };
    let memory = Memory {
        budget: o.memory_budget,
        bytes: |setup| {
            let tets = 6 * cells_of(setup).iter().product::<usize>() as u64;
            let share = if matches!(setup, Setup::Weak { .. } | Setup::Strong) {
                p as u64
            } else {
                1
            };
            DEVICE_BYTES_PER_TET * tets / share
        },
    };
    // Each box and its partition are built once and shared by the setups of that size (they come one after
    // another: the c-box twice, the weak box twice, the strong box twice), so rank 0 runs METIS twice, not three
    // times, and no rank builds a mesh twice.
    let mut mesh: Option<SharedMesh> = None;
    scaling::<FvError>(&*comm, &code, o.rounds, memory, |setup| {
        let cells = cells_of(setup);
        let overlap = match setup {
            Setup::WeakSingle { .. } | Setup::StrongSingle => None,
            Setup::Weak { overlap } => Some(overlap),
            Setup::Strong => Some(true),
        };
        let (op, part) = match mesh.take() {
            Some((at, op, part)) if at == cells => (op, part),
            _ => {
                let t = Instant::now();
                let op = Rc::new(box_operator(cells)?);
                if cc.rank() == 0 {
                    eprintln!(
                        "fv scale: {} tets ({cells:?} cubes) built in {:.1} s",
                        op.n(),
                        t.elapsed().as_secs_f64()
                    );
                }
                (op, None)
            }
        };
        let part = match (overlap, part) {
            (Some(_), None) => {
                let t = Instant::now();
                let part = Rc::new(partition(&*cc, &op)?);
                if cc.rank() == 0 {
                    eprintln!(
                        "fv scale: {} tets partitioned (METIS, rank 0) in {:.1} s",
                        op.n(),
                        t.elapsed().as_secs_f64()
                    );
                }
                Some(part)
            }
            (_, part) => part,
        };
        mesh = Some((cells, op.clone(), part.clone()));
        let dt = 0.5 / op.max_row_sum();
        let x0: Vec<f64> = op.centroids.iter().map(|q| 1.0 + q[0] * q[1]).collect();
        let (kind, layout) = (KernelKind::Gather, Layout::Texture);
        let Some(overlap) = overlap else {
            let (perm, _) = order(&op, o.ordering)?;
            let mut d = Diffusion::<f32>::new(gpu, &perm.apply_operator(&op), kind, layout, dt)?;
            d.set_x(&perm.apply(&x0))?;
            d.step(2)?;
            let updates = op.n() as f64;
            return Ok(Some(Box::new(move || {
                let t = Instant::now();
                d.step(steps)?;
                Ok(Timed {
                    seconds: t.elapsed().as_secs_f64() / steps as f64,
                    updates,
                    ..Timed::default()
                })
            }) as Timer<'_, FvError>));
        };
        let part = part.unwrap_or_default();
        let setup = RankSetup {
            ordering: o.ordering,
            kind,
            layout,
            dt,
            overlap,
        };
        let mut d = DistDiffusion::<f32>::new(gpu, cc.clone(), &op, &part, setup)?;
        d.set_x(&x0)?;
        d.step(2)?;
        Ok(Some(Box::new(move || {
            let before = d.exchange_stats().clone();
            let t = Instant::now();
            d.step(steps)?;
            let seconds = t.elapsed().as_secs_f64() / steps as f64;
            let after = d.exchange_stats();
            let n = (after.exchanges - before.exchanges).max(1) as f64;
            Ok(Timed {
                seconds,
                updates: d.sizes().0 as f64,
                exchange_bytes: (after.bytes_sent - before.bytes_sent) as f64 / n,
                exchange_seconds: (after.seconds - before.seconds) / n,
                message_seconds: (after.message_seconds - before.message_seconds) / n,
            })
        }) as Timer<'_, FvError>))
    })
}
