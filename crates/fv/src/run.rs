//! A diffusion run from start to end, as `bespoke fv run` makes it: the ordering, the layout (timed on the device
//! for `auto`, [`layout_for`]; across ranks rank 0's choice where every part fits it, [`rank_layout`]), the
//! Gaussian bump or a resumed checkpoint, the steps in batches ([`step_batches`]) with checkpoints and frames of a
//! VTU series at their multiples and at the end, the final VTU, and the mass before and after, on one domain or
//! across ranks (every rank calling [`run`] alike). What the CLI prints and writes as JSON is the [`RunReport`].

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use bespoke_comm::Comm;
use bespoke_gpu::{Gpu, phase, vtk};
use serde::Serialize;

use crate::batches::{Schedule, step_batches};
use crate::checkpoint::{Checkpoint, fingerprint};
use crate::diffusion::layout_for;
use crate::distributed::{RankPart, RankSetup, rank_layout};
use crate::error::{FvError, Result};
use crate::kernel::{DType, KernelKind, Layout, Shape};
use crate::ordering::{OrderingKind, order, partition_method};
use crate::output::write_vtu;
use crate::{Diffusion, DistDiffusion, Operator, Real, TetMesh};

/// A file a run writes at its end and, with `every`, at every multiple of `every` steps (counted from the
/// run's start) before it.
#[derive(Clone, Debug)]
pub struct Saves {
    pub path: PathBuf,
    pub every: Option<usize>,
}

/// What a run does: how it steps, how far, and what it saves.
#[derive(Clone, Debug)]
pub struct RunOptions<'a> {
    pub kernel: KernelKind,
    /// None: `auto`, chosen on the device.
    pub layout: Option<Layout>,
    pub ordering: OrderingKind,
    /// The step the run ends at, counted from its start (a resumed run's too).
    pub steps: usize,
    /// Across ranks: update the interior tets while the ghost values travel.
    pub overlap: bool,
    /// The state (always at the end; the latest multiple's replaced by the next).
    pub checkpoint: Option<Saves>,
    /// The field and the initial field as a VTU at the end; with `every`, frames `out_00000200.vtu` … beside it
    /// and ParaView's collection `out.pvd` listing every frame in the folder.
    pub vtu: Option<Saves>,
    /// The checkpoint to continue from, read and checked against the run on rank 0 (None elsewhere).
    pub resume: Option<&'a Checkpoint>,
    /// Raised (by a signal handler) to stop after the batch in flight, saving what the end saves.
    pub stop: &'a AtomicBool,
}

impl RunOptions<'_> {
    /// Refuses what no run can do: a file saved every 0 steps.
    pub fn check(&self) -> Result<()> {
        for (what, saves) in [
            ("checkpoint every", &self.checkpoint),
            ("vtu every", &self.vtu),
        ] {
            if saves.as_ref().and_then(|s| s.every) == Some(0) {
                return Err(FvError::param(what, 0, "must be at least 1 step"));
            }
        }
        Ok(())
    }
}

/// What a run did (rank 0's view; every rank's but the ranks' figures, which are rank 0's).
#[derive(Clone, Debug)]
pub struct RunReport {
    pub tets: usize,
    pub dt: f64,
    /// The step it started at (a resumed checkpoint's, or 0) and the step it reached (`steps` unless stopped).
    pub from: usize,
    pub done: usize,
    /// Exact sums of the field (the same bits in any tet order and on any number of ranks).
    pub mass_initial: f64,
    pub mass_final: f64,
    /// The steps' wall-clock time, saves included.
    pub seconds: f64,
    /// One domain: the ordering's; across ranks: the partition's, the parts' ordering and their sending.
    pub ordering_seconds: f64,
    pub layout: Layout,
    /// Why the layout: `given`, or what chose it.
    pub layout_source: String,
    pub shape: Shape,
    pub ranks: Option<RanksReport>,
}

/// A distributed run's ranks, with rank 0's share and exchange (the JSON report's `ranks`).
#[derive(Clone, Debug, Serialize)]
pub struct RanksReport {
    pub ranks: usize,
    pub transport: &'static str,
    pub partition: &'static str,
    pub rank0_tets: usize,
    pub rank0_interior: usize,
    pub rank0_ghosts: usize,
    pub overlap: bool,
    pub exchange_bytes_per_step_rank0: f64,
    pub exchange_seconds_per_step_rank0: f64,
}

/// Runs a diffusion of the Gaussian bump (or from `opts.resume`) to `opts.steps`. `whole`: the mesh and its
/// operator, on rank 0 (and one domain) alone; `comm`: the ranks (None: one domain). Every rank calls it alike;
/// `progress(step)` follows each batch. A run stopped by `opts.stop` returns the step it reached in
/// [`RunReport::done`], having saved there what its end saves.
pub fn run<T: Real>(
    gpu: &Gpu,
    whole: Option<(&TetMesh, &Operator)>,
    comm: Option<Rc<dyn Comm>>,
    opts: &RunOptions<'_>,
    progress: impl FnMut(usize),
) -> Result<RunReport> {
    opts.check()?;
    match comm {
        None => {
            let (mesh, op) = whole.ok_or_else(|| {
                FvError::Shape("a run on one domain needs the whole mesh and operator".into())
            })?;
            one_domain::<T>(gpu, mesh, op, opts, progress)
        }
        Some(comm) => across_ranks::<T>(gpu, whole, comm, opts, progress),
    }
}

fn one_domain<T: Real>(
    gpu: &Gpu,
    mesh: &TetMesh,
    op: &Operator,
    opts: &RunOptions<'_>,
    progress: impl FnMut(usize),
) -> Result<RunReport> {
    let x0 = op.gaussian_bump();
    let dt = op.default_dt();
    let (perm, ordering_seconds) = order(op, opts.ordering)?;
    let permuted = perm.apply_operator(op);
    let (layout, layout_source) = match opts.layout {
        Some(l) => (l, "given".to_string()),
        None => layout_for::<T>(gpu, opts.kernel, op.n())?,
    };
    let mut d = Diffusion::<T>::new(gpu, &permuted, opts.kernel, layout, dt)?;
    let (from, mass_initial) = match opts.resume {
        // The stored values as they were, the step and the initial mass of the run that saved them.
        Some(c) => {
            d.set_stored(&perm.apply(&c.stored), c.shift)?;
            (c.step as usize, c.mass_initial)
        }
        None => {
            d.set_x(&perm.apply(&x0))?;
            // The initial mass of x as stored (rounded to the precision), so the drift is the steps' alone.
            (0, permuted.mass(&d.x()?))
        }
    };
    drop(permuted);
    let saving = Saving::new::<T>(opts, Some(op), dt, mass_initial);
    let d = RefCell::new(d);
    // The last frame's field, so that a run ending on a frame's multiple reads it back once.
    let framed = RefCell::new(None);
    let save = |step: usize, at: SaveAt| {
        let (checkpoint, frame) = saves_at(opts, step, at);
        if let (true, Some(s)) = (checkpoint, &saving) {
            let (stored, shift) = d.borrow().stored()?;
            s.write(step, perm.undo(&stored), shift)?;
        }
        if frame {
            let x = perm.undo(&d.borrow().x()?);
            write_frame(opts, step, mesh, &x, &x0)?;
            *framed.borrow_mut() = Some((step, x));
        }
        Ok(())
    };
    let t = Instant::now();
    let done = steps(opts, from, None, progress, |k| d.borrow_mut().step(k), save)?;
    let d = d.into_inner();
    let seconds = t.elapsed().as_secs_f64();
    let x = match framed.into_inner() {
        Some((step, x)) if step == done => x,
        _ => perm.undo(&d.x()?),
    };
    write_final(opts, mesh, &x, &x0)?;
    Ok(RunReport {
        tets: op.n(),
        dt,
        from,
        done,
        mass_initial,
        mass_final: op.mass(&x),
        seconds,
        ordering_seconds,
        layout,
        layout_source,
        shape: d.shape(),
        ranks: None,
    })
}

fn across_ranks<T: Real>(
    gpu: &Gpu,
    whole: Option<(&TetMesh, &Operator)>,
    comm: Rc<dyn Comm>,
    opts: &RunOptions<'_>,
    progress: impl FnMut(usize),
) -> Result<RunReport> {
    let (mesh, op) = (whole.map(|w| w.0), whole.map(|w| w.1));
    let x0 = op.map(Operator::gaussian_bump);
    let t = Instant::now();
    // METIS on rank 0, each rank sent its own rows: no rank but 0 holds the whole mesh.
    let part = RankPart::distribute(&*comm, op, opts.ordering)?;
    // The partition, the parts' ordering and their sending; not rank 0's layout timing (the first time on an
    // adapter) nor the parts' set-up on the device, as on one domain.
    let ordering_seconds = t.elapsed().as_secs_f64();
    let (tets, dt) = (part.whole_tets(), part.default_dt());
    let (layout, layout_source) = match opts.layout {
        Some(l) => (l, "given".to_string()),
        None => rank_layout::<T>(gpu, &*comm, opts.kernel, &part)?,
    };
    let setup = RankSetup {
        ordering: opts.ordering,
        kind: opts.kernel,
        layout,
        dt,
        overlap: opts.overlap,
    };
    let mut d = DistDiffusion::<T>::from_part(gpu, comm.clone(), Rc::new(part), setup)?;
    // A resumed run: rank 0 read the checkpoint; every rank learns that, its step and initial mass.
    let (from, mass_initial) = match resume_told(&*comm, opts.resume)? {
        Some(fm) => {
            d.set_stored_from_root(opts.resume.map(|c| (c.stored.as_slice(), c.shift)))?;
            fm
        }
        None => {
            d.set_x_from_root(x0.as_deref())?;
            (0, d.mass()?)
        }
    };
    let saving = Saving::new::<T>(opts, op, dt, mass_initial);
    let d = RefCell::new(d);
    // As on one domain: the last frame's field (rank 0's), and whether it was gathered at all (every rank).
    let framed = RefCell::new(None);
    // Every rank gathers its values onto rank 0, which writes the files.
    let save = |step: usize, at: SaveAt| {
        let (checkpoint, frame) = saves_at(opts, step, at);
        if checkpoint
            && let (Some(s), Some((stored, shift))) = (&saving, d.borrow().stored_on_root()?)
        {
            s.write(step, stored, shift)?;
        }
        if frame {
            let x = d.borrow().x_on_root()?;
            if let (Some(x), Some(mesh), Some(x0)) = (&x, mesh, &x0) {
                write_frame(opts, step, mesh, x, x0)?;
            }
            *framed.borrow_mut() = Some((step, x));
        }
        Ok(())
    };
    comm.barrier()?;
    let t = Instant::now();
    let done = steps(
        opts,
        from,
        Some(&*comm),
        progress,
        |k| d.borrow_mut().step(k),
        save,
    )?;
    let d = d.into_inner();
    let seconds = t.elapsed().as_secs_f64();
    let mass_final = d.mass()?;
    // Every rank decides alike: each gathered at the same steps.
    let x = match (&opts.vtu, framed.into_inner()) {
        (None, _) => None,
        (Some(_), Some((step, x))) if step == done => x,
        (Some(_), _) => d.x_on_root()?,
    };
    if let (Some(x), Some(mesh), Some(x0)) = (&x, mesh, &x0) {
        write_final(opts, mesh, x, x0)?;
    }
    let (own, interior, ghosts) = d.sizes();
    let st = d.exchange_stats();
    let per = |v: f64| {
        if st.exchanges > 0 {
            v / st.exchanges as f64
        } else {
            0.0
        }
    };
    let ranks = RanksReport {
        ranks: comm.size(),
        transport: comm.kind(),
        partition: partition_method(comm.size()),
        rank0_tets: own,
        rank0_interior: interior,
        rank0_ghosts: ghosts,
        overlap: d.overlapped(),
        exchange_bytes_per_step_rank0: per(st.bytes_sent as f64),
        exchange_seconds_per_step_rank0: per(st.seconds),
    };
    Ok(RunReport {
        tets,
        dt,
        from,
        done,
        mass_initial,
        mass_final,
        seconds,
        ordering_seconds,
        layout,
        layout_source,
        shape: d.shape(),
        ranks: Some(ranks),
    })
}

/// Where and what a run's checkpoints save, on rank 0 (and one domain) alone.
struct Saving {
    path: PathBuf,
    fingerprint: u64,
    dtype: DType,
    dt: f64,
    mass_initial: f64,
}

impl Saving {
    /// What the checkpoints save, where the whole operator is (rank 0, one domain).
    fn new<T: Real>(
        opts: &RunOptions<'_>,
        op: Option<&Operator>,
        dt: f64,
        mass_initial: f64,
    ) -> Option<Self> {
        Some(Self {
            path: opts.checkpoint.as_ref()?.path.clone(),
            fingerprint: fingerprint(op?),
            dtype: T::DTYPE,
            dt,
            mass_initial,
        })
    }

    /// Writes the state at `step`: `stored` in the operator's numbering.
    fn write(&self, step: usize, stored: Vec<f64>, shift: f64) -> Result<()> {
        Checkpoint {
            fingerprint: self.fingerprint,
            dtype: self.dtype,
            dt: self.dt,
            step: step as u64,
            mass_initial: self.mass_initial,
            shift,
            stored,
        }
        .write(&self.path)
    }
}

/// Every rank learns from rank 0 whether the run resumes and, if so, the checkpoint's step and initial mass.
fn resume_told(comm: &dyn Comm, resume: Option<&Checkpoint>) -> Result<Option<(usize, f64)>> {
    let mut mine = vec![u8::from(resume.is_some())];
    if let Some(c) = resume {
        mine.extend(c.step.to_le_bytes());
        mine.extend(c.mass_initial.to_le_bytes());
    }
    let all = comm.all_gather_bytes(&mine)?;
    let b = &all[0];
    if b.first() != Some(&1) {
        return Ok(None);
    }
    let at = |o: usize| {
        b.get(o..o + 8)
            .and_then(|s| s.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| FvError::Shape("rank 0 sent a short resume message".into()))
    };
    Ok(Some((at(1)? as usize, f64::from_bits(at(9)?))))
}

/// Which of `save`'s calls: at a checkpoint's or a frame's multiple the steps reached, or at the run's last step
/// (`repeat`: the first kind ran at that step already, as when a stop came right after a multiple).
#[derive(Clone, Copy, Debug, PartialEq)]
enum SaveAt {
    Multiple,
    End { repeat: bool },
}

/// Runs the steps from `from` to `opts.steps` in batches, calling `save(step, SaveAt::Multiple)` at every
/// checkpoint and frame multiple and `save(step, SaveAt::End { .. })` at the step reached; returns that step.
fn steps(
    opts: &RunOptions<'_>,
    from: usize,
    comm: Option<&dyn Comm>,
    progress: impl FnMut(usize),
    step: impl FnMut(usize) -> Result<()>,
    save: impl Fn(usize, SaveAt) -> Result<()>,
) -> Result<usize> {
    let schedule = Schedule {
        from,
        to: opts.steps,
        save_every: [&opts.checkpoint, &opts.vtu]
            .into_iter()
            .filter_map(|s| s.as_ref()?.every)
            .collect(),
        stop: opts.stop,
        comm,
    };
    let saved = Cell::new(None);
    let done = phase("fv steps", || {
        step_batches(schedule, progress, step, |s| {
            saved.set(Some(s));
            save(s, SaveAt::Multiple)
        })
    })?;
    save(
        done,
        SaveAt::End {
            repeat: saved.get() == Some(done),
        },
    )?;
    Ok(done)
}

/// What `save(step, at)` writes at `step`: (the checkpoint, a frame of the VTU series). The run's end writes the
/// checkpoint whatever the step, and nothing its step's multiple wrote already.
fn saves_at(opts: &RunOptions<'_>, step: usize, at: SaveAt) -> (bool, bool) {
    let every = |s: &Option<Saves>| {
        s.as_ref()
            .and_then(|s| s.every)
            .is_some_and(|n| n > 0 && step.is_multiple_of(n))
    };
    let (checkpoint, frame) = (every(&opts.checkpoint), every(&opts.vtu));
    match at {
        SaveAt::Multiple => (checkpoint, frame),
        SaveAt::End { repeat: false } => (opts.checkpoint.is_some(), frame),
        SaveAt::End { repeat: true } => (opts.checkpoint.is_some() && !checkpoint, false),
    }
}

/// Writes the frame of the VTU series at `step` (rank 0: `x` the whole field) and rewrites its collection.
fn write_frame(
    opts: &RunOptions<'_>,
    step: usize,
    mesh: &TetMesh,
    x: &[f64],
    x0: &[f64],
) -> Result<()> {
    let Some(vtu) = &opts.vtu else { return Ok(()) };
    write_vtu(
        &vtk::series_frame(&vtu.path, step as u64),
        mesh,
        &[("x", x), ("x0", x0)],
    )?;
    vtk::write_series_collection(&vtu.path).map_err(|e| FvError::io(&vtu.path, e))
}

/// Writes the run's final VTU (rank 0: `x` the whole field), where one is asked for.
fn write_final(opts: &RunOptions<'_>, mesh: &TetMesh, x: &[f64], x0: &[f64]) -> Result<()> {
    match &opts.vtu {
        Some(vtu) => write_vtu(&vtu.path, mesh, &[("x", x), ("x0", x0)]),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_saves_what_its_multiple_did_not_without_a_device() {
        let stop = AtomicBool::new(false);
        let saves = |path: &str, every| {
            Some(Saves {
                path: path.into(),
                every,
            })
        };
        let a = RunOptions {
            kernel: KernelKind::Gather,
            layout: None,
            ordering: OrderingKind::AsRead,
            steps: 100,
            overlap: true,
            checkpoint: saves("c", Some(4)),
            vtu: saves("v.vtu", Some(6)),
            resume: None,
            stop: &stop,
        };
        let end = |repeat| SaveAt::End { repeat };
        assert_eq!(saves_at(&a, 12, SaveAt::Multiple), (true, true));
        assert_eq!(saves_at(&a, 8, SaveAt::Multiple), (true, false));
        assert_eq!(saves_at(&a, 6, SaveAt::Multiple), (false, true));
        // The run's last step: the checkpoint always, a frame at a multiple…
        assert_eq!(saves_at(&a, 7, end(false)), (true, false));
        assert_eq!(saves_at(&a, 12, end(false)), (true, true));
        // …and, stopped right after a multiple's save, only what that save did not write.
        assert_eq!(saves_at(&a, 12, end(true)), (false, false));
        assert_eq!(saves_at(&a, 6, end(true)), (true, false));
        assert_eq!(saves_at(&a, 8, end(true)), (false, false));
        // Files without multiples: the checkpoint at the end, no frame.
        let ends = RunOptions {
            checkpoint: saves("c", None),
            vtu: saves("v.vtu", None),
            ..a.clone()
        };
        assert_eq!(saves_at(&ends, 12, end(false)), (true, false));
        assert_eq!(saves_at(&ends, 12, SaveAt::Multiple), (false, false));
        // Nothing asked, nothing written.
        let none = RunOptions {
            checkpoint: None,
            vtu: None,
            ..a
        };
        assert_eq!(saves_at(&none, 12, end(false)), (false, false));
        assert_eq!(saves_at(&none, 12, SaveAt::Multiple), (false, false));
        assert!(none.check().is_ok());
        // Saved every 0 steps: refused by name.
        let zero = RunOptions {
            vtu: saves("v.vtu", Some(0)),
            ..none
        };
        let e = zero.check().unwrap_err().to_string();
        assert!(e.contains("vtu every = 0"), "{e}");
    }
}
