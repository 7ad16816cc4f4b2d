//! Scaling across ranks ([`bespoke_comm::scaling`]): weak scaling at a fixed mesh size per rank (a box of
//! P·c × c × c cubes, METIS k-way parts), strong scaling on a fixed box. Every rank calls [`scale`].

use std::rc::Rc;
use std::time::Instant;

use bespoke_comm::Comm;
use bespoke_comm::scaling::{ScaleReport, Setup, Timed, Timer, scaling};
use bespoke_gpu::Gpu;

use crate::diffusion::Diffusion;
use crate::dist::{DistDiffusion, RankSetup, partition};
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
}

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
    scaling::<FvError>(&*comm, &code, o.rounds, |setup| {
        let (cells, overlap) = match setup {
            Setup::WeakSingle { .. } => ([c, c, c], None),
            Setup::StrongSingle => ([s, s, s], None),
            Setup::Weak { overlap } => ([p * c, c, c], Some(overlap)),
            Setup::Strong => ([s, s, s], Some(true)),
        };
        let op = box_operator(cells)?;
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
        let part = partition(&*cc, &op)?;
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
