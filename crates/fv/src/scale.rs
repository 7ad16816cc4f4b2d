//! Scaling across ranks ([`bespoke_comm::scaling`]): weak scaling at a fixed mesh size per rank (a box of
//! P·c × c × c cubes, METIS parts), strong scaling on a fixed box. Every rank calls [`scale`].

use std::rc::Rc;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use bespoke_comm::Comm;
use bespoke_comm::scaling::{Memory, ScaleReport, Setup, Timed, Timer, scaling};
use bespoke_gpu::Gpu;

use crate::diffusion::Diffusion;
use crate::distributed::rank_layout_for_tets;
use crate::distributed::{DistDiffusion, RankPart, RankSetup};
use crate::error::{FvError, Result};
use crate::generate::BoxMesh;
use crate::kernel::{KernelKind, Layout};
use crate::operator::{Boundary, Operator};
use crate::ordering::{OrderingKind, order};

/// What to measure.
#[derive(Clone, Debug)]
pub struct ScaleOptions {
    /// Cubes per side of each rank's box in weak scaling (6 c³ tets per rank).
    pub cubes: usize,
    /// Cubes along x, y and z of the strong-scaling box (two ranks' boxes along x, `[2c, c, c]`, is the
    /// weak box of two ranks: its mesh and partition are then built once).
    pub strong: [usize; 3],
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

/// Device bytes per tet of the timed diffusion, an upper estimate in every f32 layout: four neighbours and
/// coefficients (32 B; the 16-bit offset layouts less, with their far rows), two state vectors, the texture
/// layout's padding.
pub const DEVICE_BYTES_PER_TET: u64 = 64;

/// The box of `cells` cubes (jittered, in the generator's numbering) and its diffusion operator, in `ordering` when one is given,
/// and the seconds its mesh and its ordering took to make.
/// Made once per process while any rank holds it: thread ranks share one (each building its own doubled the set-up
/// time and memory on a host whose cores they share); MPI ranks, a process each, make their own. Every rank
/// counts the seconds as its own set-up, whichever rank made it: it could not go on before.
fn box_operator(
    cells: [usize; 3],
    ordering: Option<OrderingKind>,
) -> Result<(Arc<Operator>, [f64; 2])> {
    type Made = Vec<(([usize; 3], Option<OrderingKind>), Weak<Operator>, [f64; 2])>;
    static MADE: Mutex<Made> = Mutex::new(Vec::new());
    let key = (cells, ordering);
    let find = |made: &Made| {
        made.iter()
            .find(|(k, _, _)| *k == key)
            .and_then(|(_, w, s)| Some((w.upgrade()?, *s)))
    };
    if let Some(found) = find(&MADE.lock().unwrap_or_else(|e| e.into_inner())) {
        return Ok(found);
    }
    let whole = match ordering {
        Some(_) => Some(box_operator(cells, None)?),
        None => None,
    };
    // Held while making, so a second rank waits for this box instead of making it too.
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = find(&made) {
        return Ok(found);
    }
    let t = Instant::now();
    let (op, seconds) = match (ordering, whole) {
        (Some(kind), Some((whole, [mesh, _]))) => {
            let (perm, _) = order(&whole, kind)?;
            let op = perm.apply_operator(&whole);
            (op, [mesh, t.elapsed().as_secs_f64()])
        }
        _ => {
            // In the generator's numbering, not shuffled: every setup steps its tets in the in-rank ordering (a
            // rank alone the box ordered, coupled ranks each its part ordered), applied either way, and a shuffle
            // only made the set-up slower (each step of it a cache miss: at 10.6 M tets on the 2-core VM, mesh and
            // operator 5.5 s against 2.5, the ordering 4.1 s against 1.6).
            let (mesh, adj) = BoxMesh {
                cells,
                jitter: 0.2,
                shuffle: None,
                seed: 1,
            }
            .build_with_adjacency()?;
            let op = Operator::diffusion(&mesh, &adj, 1.0, Boundary::ZeroFlux)?;
            (op, [t.elapsed().as_secs_f64(), 0.0])
        }
    };
    let op = Arc::new(op);
    made.retain(|(_, w, _)| w.strong_count() > 0);
    made.push((key, Arc::downgrade(&op), seconds));
    Ok((op, seconds))
}

/// A box the coupled setups step, and what they derive from it (each made once).
struct CoupledMesh {
    cells: [usize; 3],
    /// The box in the generator's numbering, on rank 0 alone: partitioned as it is there, each rank sent its
    /// part, which it orders in-rank.
    whole: Option<Arc<Operator>>,
    /// This rank's share of the partitioned operator.
    rank_part: Option<Rc<RankPart>>,
}

/// What the host makes before a setup's device work.
#[derive(Clone, Copy)]
enum Stage {
    Mesh,
    /// METIS on rank 0, then each rank sent its part and making its share of the box (its in-rank ordering,
    /// ghosts and exchange lists): [`RankPart::distribute`].
    Partition,
    /// The in-rank ordering of a whole box, for a rank alone.
    Ordering,
}

/// Host seconds spent making meshes, partitions and orderings on this rank, per [`Stage`], and by the clock (a
/// box another thread rank made counts in its stages, whether or not this rank waited for it).
#[derive(Default)]
struct HostSetup {
    seconds: [f64; 3],
    wall: f64,
}

impl HostSetup {
    /// Runs one stage and [`HostSetup::add`]s its time.
    fn timed<R>(
        &mut self,
        stage: Stage,
        root: bool,
        tets: usize,
        make: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let t = Instant::now();
        let r = make()?;
        self.add(stage, root, tets, t.elapsed().as_secs_f64());
        Ok(r)
    }

    /// Counts `seconds` of one stage, and prints them on rank 0 (`root`).
    fn add(&mut self, stage: Stage, root: bool, tets: usize, seconds: f64) {
        self.seconds[stage as usize] += seconds;
        if root {
            let what = match stage {
                Stage::Mesh => "built",
                Stage::Partition => "partitioned (METIS on rank 0) and sent as the ranks' parts",
                Stage::Ordering => "ordered",
            };
            eprintln!("fv scale: {tets} tets {what} in {seconds:.1} s");
        }
    }
}

/// Weak and strong scaling of f32 diffusion (gather kernel, in the layout rank 0 chooses on its device) on the
/// job's ranks.
pub fn scale(gpu: &Gpu, comm: Rc<dyn Comm>, o: &ScaleOptions) -> Result<ScaleReport> {
    let p = comm.size();
    let (c, s) = (o.cubes, o.strong);
    if c == 0 || s.contains(&0) {
        return Err(FvError::param(
            "cubes",
            format!("{c} per rank, strong {s:?}"),
            "every box needs at least one cube per side",
        ));
    }
    let strong_tets = 6 * s.iter().product::<usize>();
    // The layout: rank 0's choice on its device (timed once per adapter, then cached), one that the largest
    // operator any setup gives any rank fits: the larger box a rank steps alone, and a quarter more for a part's
    // ghosts (until 2026-11-30 the texture layout, the H200's slowest gather layout, on every adapter).
    let largest = strong_tets.max(6 * c * c * c);
    let (layout, source) =
        rank_layout_for_tets::<f32>(gpu, &*comm, KernelKind::Gather, largest + largest / 4)?;
    let code = format!(
        "fv diffusion f32, {} layout ({source}), {} tets per rank, strong {strong_tets} tets",
        layout.name(),
        6 * c * c * c,
    );
    let cc = comm.clone();
    let root = comm.rank() == 0;
    let steps = o.steps;
    let cells_of = |setup: Setup| match setup {
        Setup::WeakSingle { .. } => [c, c, c],
        Setup::StrongSingle | Setup::Strong => s,
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
    // The host state is made once, before any device work, and shared by the setups that need it: the coupled
    // box (P boxes along x; at the default strong box on two ranks, the strong one too) in the generator's
    // numbering; its partition, on rank 0, while the other ranks make the boxes a rank alone steps, in the in-rank
    // ordering (thread ranks share them, so METIS, serial, runs beside their making); then each rank's part, which
    // orders itself in-rank.
    let mut host = HostSetup::default();
    let started = Instant::now();
    let (coupled, alone) = ([p * c, c, c], [c, c, c]);
    // Boxes in the in-rank ordering for the single-rank setups, by cells.
    let mut ordered: Vec<([usize; 3], Arc<Operator>)> = Vec::new();
    let make_ordered = |cells: [usize; 3], host: &mut HostSetup, whole_counted: bool| {
        let (op, [mesh_s, order_s]) = box_operator(cells, Some(o.ordering))?;
        if !whole_counted {
            host.add(Stage::Mesh, root, op.n(), mesh_s);
        }
        host.add(Stage::Ordering, root, op.n(), order_s);
        Ok::<_, FvError>((cells, op))
    };
    // Rank 0 alone makes a coupled box (under mpirun the other ranks never hold it; thread ranks share its copy).
    let make_coupled = |cells: [usize; 3], host: &mut HostSetup| -> Result<CoupledMesh> {
        let whole = match root {
            true => {
                let (whole, [mesh_s, _]) = box_operator(cells, None)?;
                host.add(Stage::Mesh, root, whole.n(), mesh_s);
                Some(whole)
            }
            false => None,
        };
        Ok(CoupledMesh {
            cells,
            whole,
            rank_part: None,
        })
    };
    let coupled_tets = |m: &CoupledMesh| m.whole.as_ref().map_or(0, |w| w.n());
    let mut meshes = vec![make_coupled(coupled, &mut host)?];
    let mut singles = vec![alone];
    if !singles.contains(&s) {
        singles.push(s);
    }
    let beside: Result<()> = if root {
        Ok(())
    } else {
        singles.iter().try_for_each(|&cells| {
            ordered.push(make_ordered(cells, &mut host, cells == coupled)?);
            Ok(())
        })
    };
    // Every rank takes part in the parts' scatter, whatever it made beside it (an error then, not a hang).
    let rank_part = host.timed(Stage::Partition, root, coupled_tets(&meshes[0]), || {
        RankPart::distribute(&*cc, meshes[0].whole.as_deref(), o.ordering)
    })?;
    beside?;
    meshes[0].rank_part = Some(Rc::new(rank_part));
    for &cells in &singles {
        if !ordered.iter().any(|(c, _)| *c == cells) {
            ordered.push(make_ordered(cells, &mut host, cells == coupled)?);
        }
    }
    host.wall += started.elapsed().as_secs_f64();
    let report = scaling::<FvError>(&*comm, &code, o.rounds, memory, |setup| {
        let cells = cells_of(setup);
        let overlap = match setup {
            Setup::WeakSingle { .. } | Setup::StrongSingle => None,
            Setup::Weak { overlap } => Some(overlap),
            Setup::Strong => Some(true),
        };
        let kind = KernelKind::Gather;
        let x_of = |op: &Operator| -> Vec<f64> {
            op.centroids.iter().map(|q| 1.0 + q[0] * q[1]).collect()
        };
        let Some(overlap) = overlap else {
            let Some((_, op)) = ordered.iter().find(|(c, _)| *c == cells) else {
                unreachable!("every single-rank box is made before the setups")
            };
            let dt = op.default_dt();
            return single(gpu, op, &x_of(op), kind, layout, dt, steps);
        };
        // A strong box other than the coupled one is made when its setups come.
        let t = Instant::now();
        let at = match meshes.iter().position(|m| m.cells == cells) {
            Some(at) => at,
            None => {
                meshes.push(make_coupled(cells, &mut host)?);
                meshes.len() - 1
            }
        };
        let tets = coupled_tets(&meshes[at]);
        let shared = &mut meshes[at];
        let rank_part = match &shared.rank_part {
            Some(r) => r.clone(),
            None => {
                let r = Rc::new(host.timed(Stage::Partition, root, tets, || {
                    RankPart::distribute(&*cc, shared.whole.as_deref(), o.ordering)
                })?);
                shared.rank_part = Some(r.clone());
                r
            }
        };
        let dt = rank_part.default_dt();
        let x0 = shared.whole.as_deref().map(x_of);
        host.wall += t.elapsed().as_secs_f64();
        let setup = RankSetup {
            ordering: o.ordering,
            kind,
            layout,
            dt,
            overlap,
        };
        let mut d = DistDiffusion::<f32>::from_part(gpu, cc.clone(), rank_part, setup)?;
        d.set_x_from_root(x0.as_deref())?;
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
    })?;
    if root {
        let [mesh, part, ord] = host.seconds;
        eprintln!(
            "{code}: host setup on rank 0 {:.1} s by the clock (its stages {:.1} s: meshes {mesh:.1} s, METIS and \
             rank parts {part:.1} s, in-rank {} orderings {ord:.1} s; a box another thread rank made beside METIS \
             counts in the stages, not on the clock)",
            host.wall,
            mesh + part + ord,
            o.ordering.name(),
        );
    }
    Ok(report)
}

/// A rank alone stepping `op` (already in its ordering) from `x`.
fn single<'g>(
    gpu: &'g Gpu,
    op: &Operator,
    x: &[f64],
    kind: KernelKind,
    layout: Layout,
    dt: f64,
    steps: usize,
) -> Result<Option<Timer<'g, FvError>>> {
    let mut d = Diffusion::<f32>::new(gpu, op, kind, layout, dt)?;
    d.set_x(x)?;
    d.step(2)?;
    let updates = op.n() as f64;
    Ok(Some(Box::new(move || {
        let t = Instant::now();
        d.step(steps)?;
        Ok(Timed {
            seconds: t.elapsed().as_secs_f64() / steps as f64,
            updates,
            ..Timed::default()
        })
    })))
}
