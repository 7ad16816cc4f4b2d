//! `bespoke fv run`: the diffusion of a Gaussian bump on one domain or across ranks, its batches, its
//! checkpoints and its report (a thin adapter over `bespoke_fv`).

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use bespoke::bench::progress_bar;
use bespoke::comm::{Comm, launched_rank, launched_size};
use bespoke::fv::batches::{Schedule, step_batches};
use bespoke::fv::checkpoint::{Checkpoint, fingerprint};
use bespoke::fv::diffusion::layout_for;
use bespoke::fv::distributed::{RankPart, RankSetup, rank_layout};
use bespoke::fv::kernel::{DType, KernelKind, Layout};
use bespoke::fv::ordering::{OrderingKind, order};
use bespoke::fv::output::write_vtu;
use bespoke::fv::{Diffusion, DistDiffusion, Operator, Real, TetMesh};
use bespoke::gpu::{Gpu, vtk};
use bespoke::report::adapter_json;
use bespoke::{Error, phase};
use clap::Args;
use serde_json::json;

use super::{MeshArgs, operator};
use crate::json_out::{check_output, open_json, stop_on_signals, write_json};
use crate::ranks::RankSpec;

/// Runs `fv run`: the arguments and the mesh (and a checkpoint to resume) are checked first, the device is
/// opened after.
pub(super) fn run_cmd(a: &RunArgs) -> Result<(), Error> {
    let job = RunJob::prepare(a)?;
    let spec = a.ranks.map(|count| RankSpec { count, grid: None });
    // SIGINT and SIGTERM raise the flag; the run stops after the batch of steps in flight and writes what it
    // reached (`step_batches`), its checkpoint included.
    let stop = Arc::new(AtomicBool::new(false));
    stop_on_signals(&stop)?;
    crate::ranks::run(spec, |gpu, comm| match a.dtype {
        DType::F32 => run_diffusion::<f32>(gpu, a, &job, comm, &stop),
        DType::F64 => run_diffusion::<f64>(gpu, a, &job, comm, &stop),
    })
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    mesh: MeshArgs,
    #[arg(long, default_value = "metis")]
    ordering: String,
    /// Tets per METIS block and per block-cached workgroup.
    #[arg(long, default_value_t = 2048)]
    block_size: u32,
    /// gather or block-cached (gather is the faster wherever it was measured).
    #[arg(long, default_value = "gather")]
    kernel: String,
    /// How the operator is stored: slot-major, tet-major, tet-major-d16 (neighbours as 16-bit offsets),
    /// slot-major-x4 or slot-major-x4-d16 (four tets per invocation; gather only) or texture (f32 only);
    /// auto times the layouts on the device the first time (cached with the launch shapes) and keeps the fastest
    /// unless the measured prior (tet-major on a GPU; texture in f32, slot-major in f64 on a CPU adapter) is within
    /// 3 %; across ranks rank 0 chooses on its device and every rank takes the first of its choices that every
    /// rank's part fits.
    #[arg(long, default_value = "auto")]
    layout: String,
    #[arg(long, default_value_t = 100)]
    steps: usize,
    /// Fixed value on the boundary (default: zero flux).
    #[arg(long)]
    dirichlet: Option<f64>,
    #[arg(long, default_value = "f32")]
    dtype: DType,
    #[arg(long, value_name = "FILE")]
    vtu: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Run across ranks: METIS splits the mesh into N parts, each rank orders its own tets with --ordering and
    /// exchanges a ghost layer every step. Threads of this process, or MPI ranks under `mpirun -np N` (built
    /// with `--features mpi`).
    #[arg(long, value_name = "N")]
    ranks: Option<usize>,
    /// With ranks: exchange the ghost values, then update every tet, instead of updating the interior tets
    /// while they travel.
    #[arg(long)]
    no_overlap: bool,
    /// Save the state here at the end of the run, and when SIGINT or SIGTERM stops it (written to a temporary
    /// file, then renamed: a crash never leaves a torn checkpoint). Any number of ranks may resume it.
    #[arg(long, value_name = "FILE")]
    checkpoint: Option<PathBuf>,
    /// Also save the state to --checkpoint every N steps (of the run's total count), keeping the latest.
    #[arg(long, value_name = "N")]
    checkpoint_every: Option<usize>,
    /// Also write the field every N steps (of the run's total count) as a time series beside --vtu (out.vtu →
    /// out_00000200.vtu …) with ParaView's collection out.pvd listing every frame in the folder (a resumed run's
    /// join the earlier).
    #[arg(long, value_name = "N")]
    vtu_every: Option<usize>,
    /// Continue from a checkpoint of the same mesh, boundary, precision and Δt to the same end (--steps counts
    /// from the run's start): a run stopped and resumed ends with the bits of one that never stopped.
    #[arg(long, value_name = "FILE")]
    resume: Option<PathBuf>,
}

/// What `fv run` reads and decides before a device is opened.
struct RunJob {
    name: String,
    /// The mesh and its operator: None on an MPI rank other than 0, which is sent its part.
    whole: Option<(TetMesh, Operator)>,
    kernel: KernelKind,
    /// None: `auto`, chosen on the device once it is open (`layout_for`; across ranks `rank_layout`).
    layout: Option<Layout>,
    ordering: OrderingKind,
    /// The checkpoint to continue from, read and checked against the run on rank 0 (None elsewhere).
    resume: Option<Checkpoint>,
}

impl RunJob {
    fn prepare(a: &RunArgs) -> Result<Self, Error> {
        let kernel = match a.kernel.as_str() {
            "gather" => KernelKind::Gather,
            "block-cached" => KernelKind::BlockCached {
                block: a.block_size,
            },
            k => return Err(format!("--kernel `{k}`: expected gather or block-cached").into()),
        };
        let layout = match a.layout.as_str() {
            "auto" => None,
            l => Some(l.parse::<Layout>().map_err(|_| {
                format!(
                    "--layout `{l}`: expected auto, {}",
                    Layout::ALL.map(|l| l.name()).join(", ")
                )
            })?),
        };
        let ordering = OrderingKind::parse(&a.ordering, a.block_size as usize)?;
        match (a.checkpoint_every, &a.checkpoint) {
            (Some(0), _) => return Err("--checkpoint-every must be at least 1".into()),
            (Some(_), None) => return Err("--checkpoint-every needs --checkpoint FILE".into()),
            _ => {}
        }
        match (a.vtu_every, &a.vtu) {
            (Some(0), _) => return Err("--vtu-every must be at least 1".into()),
            (Some(_), None) => return Err("--vtu-every needs --vtu FILE".into()),
            _ => {}
        }
        // Under mpirun only rank 0 reads the mesh and builds the operator (if it cannot, it stops and mpirun ends
        // the job); the others hold their part alone. Thread ranks share this process's one copy.
        let mpi_rank = launched_size().filter(|&n| n > 1).and(launched_rank());
        let (name, whole) = match mpi_rank {
            Some(r) if r > 0 => (String::new(), None),
            _ => {
                // Rank 0 writes the VTU after the run: a path it could not write is refused before it.
                check_output("VTU file", a.vtu.as_deref())?;
                check_output("checkpoint", a.checkpoint.as_deref())?;
                let (name, mesh) = a.mesh.load()?;
                let op = operator(&mesh, a.dirichlet)?;
                (name, Some((mesh, op)))
            }
        };
        let resume = match (&a.resume, &whole) {
            (Some(path), Some((_, op))) => {
                let c = Checkpoint::read(path)?;
                c.check_fits(path, op, a.dtype, 0.5 / op.max_row_sum(), a.steps as u64)?;
                Some(c)
            }
            _ => None,
        };
        Ok(Self {
            name,
            whole,
            kernel,
            layout,
            ordering,
            resume,
        })
    }
}

/// Where and what `fv run` saves (`--checkpoint`), on rank 0 (and one domain) alone.
struct Saving {
    path: PathBuf,
    fingerprint: u64,
    dtype: DType,
    dt: f64,
    mass_initial: f64,
}

impl Saving {
    /// Writes the state at `step`: `stored` in the operator's numbering.
    fn write(&self, step: usize, stored: Vec<f64>, shift: f64) -> bespoke::fv::Result<()> {
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

/// What `--checkpoint` saves, where the whole operator is (rank 0, one domain).
fn saving<T: Real>(
    a: &RunArgs,
    op: Option<&Operator>,
    dt: f64,
    mass_initial: f64,
) -> Option<Saving> {
    Some(Saving {
        path: a.checkpoint.clone()?,
        fingerprint: fingerprint(op?),
        dtype: T::DTYPE,
        dt,
        mass_initial,
    })
}

/// Every rank learns from rank 0 whether the run resumes and, if so, the checkpoint's step and initial mass.
fn resume_told(
    comm: &dyn Comm,
    resume: Option<&Checkpoint>,
) -> Result<Option<(usize, f64)>, Error> {
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
            .ok_or("rank 0 sent a short resume message")
    };
    Ok(Some((at(1)? as usize, f64::from_bits(at(9)?))))
}

/// Which of `save`'s calls: at a `--checkpoint-every` or `--vtu-every` multiple the steps reached, or at the run's
/// last step (`repeat`: the first kind ran at that step already, as when a stop came right after a multiple).
#[derive(Clone, Copy, Debug, PartialEq)]
enum SaveAt {
    Multiple,
    End { repeat: bool },
}

/// Runs `fv run`'s steps, from a resumed checkpoint's step (or 0) to `--steps`, in batches (the bar following
/// them), calling `save(step, SaveAt::Multiple)` at every `--checkpoint-every` and `--vtu-every` multiple and
/// `save(step, SaveAt::End { .. })` at the step reached; returns that step.
fn steps(
    a: &RunArgs,
    from: usize,
    stop: &AtomicBool,
    comm: Option<&dyn Comm>,
    bar: &indicatif::ProgressBar,
    step: impl FnMut(usize) -> bespoke::fv::Result<()>,
    save: impl Fn(usize, SaveAt) -> bespoke::fv::Result<()>,
) -> Result<usize, Error> {
    let schedule = Schedule {
        from,
        to: a.steps,
        save_every: [a.checkpoint_every, a.vtu_every]
            .into_iter()
            .flatten()
            .collect(),
        stop,
        comm,
    };
    let saved = std::cell::Cell::new(None);
    let done = phase("fv steps", || {
        step_batches(
            schedule,
            |at| bar.set_position(at as u64),
            step,
            |s| {
                saved.set(Some(s));
                save(s, SaveAt::Multiple)
            },
        )
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
fn saves_at(a: &RunArgs, step: usize, at: SaveAt) -> (bool, bool) {
    let every = |n: Option<usize>| n.is_some_and(|n| n > 0 && step.is_multiple_of(n));
    let (checkpoint, frame) = (
        a.checkpoint.is_some() && every(a.checkpoint_every),
        a.vtu.is_some() && every(a.vtu_every),
    );
    match at {
        SaveAt::Multiple => (checkpoint, frame),
        SaveAt::End { repeat: false } => (a.checkpoint.is_some(), frame),
        SaveAt::End { repeat: true } => (a.checkpoint.is_some() && !checkpoint, false),
    }
}

/// Writes the frame of `--vtu`'s series at `step` (rank 0: `x` the whole field) and rewrites its collection.
fn write_frame(
    a: &RunArgs,
    step: usize,
    mesh: &TetMesh,
    x: &[f64],
    x0: &[f64],
) -> bespoke::fv::Result<()> {
    let Some(vtu) = &a.vtu else { return Ok(()) };
    write_vtu(
        &vtk::series_frame(vtu, step as u64),
        mesh,
        &[("x", x), ("x0", x0)],
    )?;
    vtk::write_series_collection(vtu).map_err(|e| bespoke::fv::FvError::Io {
        path: vtu.display().to_string(),
        err: e,
    })
}

fn run_diffusion<T: Real>(
    gpu: &Gpu,
    a: &RunArgs,
    job: &RunJob,
    comm: Option<Rc<dyn Comm>>,
    stop: &AtomicBool,
) -> Result<(), Error> {
    let root = comm.as_ref().is_none_or(|c| c.rank() == 0);
    let bar = if root {
        progress_bar(a.steps as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    let json_file = if root {
        open_json(a.json.as_deref())?
    } else {
        None
    };
    // The whole mesh and operator on rank 0 (and on one domain) alone.
    let whole = job.whole.as_ref().filter(|_| root);
    let op = whole.map(|(_, op)| op);
    let (kernel, kind) = (job.kernel, job.ordering);
    // `auto`: one domain times the layouts on its device once (cached); across ranks rank 0 does, and every rank
    // takes its choice where every rank's part fits it (`rank_layout`).
    let given = job.layout.map(|l| (l, "given".to_string()));
    let x0 = op.map(Operator::gaussian_bump);
    // Masses are exact sums (the same bits in any tet order and on any number of ranks); the whole field is
    // gathered, onto rank 0 alone, only for the VTU.
    let (
        x,
        m0,
        m1,
        seconds,
        ordering_seconds,
        dist,
        n,
        dt,
        (layout, layout_source, shape),
        (from, done),
    ) = match comm {
        None => {
            let (op, x0) = op.zip(x0.as_ref()).ok_or("one domain without its mesh")?;
            let dt = 0.5 / op.max_row_sum();
            let (perm, ordering_seconds) = order(op, kind)?;
            let permuted = perm.apply_operator(op);
            let (layout, source) = match given {
                Some(g) => g,
                None => layout_for::<T>(gpu, kernel, op.n())?,
            };
            let mut d = Diffusion::<T>::new(gpu, &permuted, kernel, layout, dt)?;
            let (from, m0) = match &job.resume {
                // The stored values as they were, the step and the initial mass of the run that saved them.
                Some(c) => {
                    d.set_stored(&perm.apply(&c.stored), c.shift)?;
                    (c.step as usize, c.mass_initial)
                }
                None => {
                    d.set_x(&perm.apply(x0))?;
                    // The initial mass of x as stored (rounded to the precision), so the drift is the steps'
                    // alone.
                    (0, permuted.mass(&d.x()?))
                }
            };
            drop(permuted);
            let saving = saving::<T>(a, Some(op), dt, m0);
            let d = RefCell::new(d);
            // The last frame's field, so that a run ending on a `--vtu-every` multiple reads it back once.
            let framed = RefCell::new(None);
            let save = |step: usize, at: SaveAt| {
                let (checkpoint, frame) = saves_at(a, step, at);
                if let (true, Some(s)) = (checkpoint, &saving) {
                    let (stored, shift) = d.borrow().stored()?;
                    s.write(step, perm.undo(&stored), shift)?;
                }
                if let (true, Some((mesh, _))) = (frame, whole) {
                    let x = perm.undo(&d.borrow().x()?);
                    write_frame(a, step, mesh, &x, x0)?;
                    *framed.borrow_mut() = Some((step, x));
                }
                Ok(())
            };
            let t = Instant::now();
            let done = steps(a, from, stop, None, &bar, |k| d.borrow_mut().step(k), save)?;
            let d = d.into_inner();
            let seconds = t.elapsed().as_secs_f64();
            let x = match framed.into_inner() {
                Some((step, x)) if step == done => x,
                _ => perm.undo(&d.x()?),
            };
            let m1 = op.mass(&x);
            let x = a.vtu.is_some().then_some(x);
            let n = op.n();
            let ran = (layout, source, d.shape());
            (
                x,
                m0,
                m1,
                seconds,
                ordering_seconds,
                None,
                n,
                dt,
                ran,
                (from, done),
            )
        }
        Some(comm) => {
            let t = Instant::now();
            // METIS on rank 0, each rank sent its own rows: no rank but 0 holds the whole mesh.
            let part = RankPart::distribute(&*comm, op, kind)?;
            // The partition, the parts' ordering and their sending; not rank 0's layout timing (the first
            // time on an adapter) nor the parts' set-up on the device, as on one domain.
            let ordering_seconds = t.elapsed().as_secs_f64();
            let (n, dt) = (part.whole_tets(), 0.5 / part.max_row_sum());
            let (layout, source) = match given {
                Some(g) => g,
                None => rank_layout::<T>(gpu, &*comm, kernel, &part)?,
            };
            let setup = RankSetup {
                ordering: kind,
                kind: kernel,
                layout,
                dt,
                overlap: !a.no_overlap,
            };
            let mut d = DistDiffusion::<T>::from_part(gpu, comm.clone(), Rc::new(part), setup)?;
            // A resumed run: rank 0 read the checkpoint; every rank learns that, its step and initial mass.
            let told = resume_told(&*comm, job.resume.as_ref())?;
            let (from, m0) = match told {
                Some(fm) => {
                    d.set_stored_from_root(
                        job.resume.as_ref().map(|c| (c.stored.as_slice(), c.shift)),
                    )?;
                    fm
                }
                None => {
                    d.set_x_from_root(x0.as_deref())?;
                    (0, d.mass()?)
                }
            };
            let saving = saving::<T>(a, op, dt, m0);
            let d = RefCell::new(d);
            // As on one domain: the last frame's field (rank 0's), and whether it was gathered at all (every rank).
            let framed = RefCell::new(None);
            // Every rank gathers its values onto rank 0, which writes the files.
            let save = |step: usize, at: SaveAt| {
                let (checkpoint, frame) = saves_at(a, step, at);
                if checkpoint
                    && let (Some(s), Some((stored, shift))) =
                        (&saving, d.borrow().stored_on_root()?)
                {
                    s.write(step, stored, shift)?;
                }
                if frame {
                    let x = d.borrow().x_on_root()?;
                    if let (Some(x), Some((mesh, _)), Some(x0)) = (&x, whole, &x0) {
                        write_frame(a, step, mesh, x, x0)?;
                    }
                    *framed.borrow_mut() = Some((step, x));
                }
                Ok(())
            };
            comm.barrier()?;
            let t = Instant::now();
            let done = steps(
                a,
                from,
                stop,
                Some(&*comm),
                &bar,
                |k| d.borrow_mut().step(k),
                save,
            )?;
            let d = d.into_inner();
            let seconds = t.elapsed().as_secs_f64();
            let m1 = d.mass()?;
            // Every rank decides alike: each gathered at the same steps.
            let x = match (&a.vtu, framed.into_inner()) {
                (None, _) => None,
                (Some(_), Some((step, x))) if step == done => x,
                (Some(_), _) => d.x_on_root()?,
            };
            let (own, interior, ghosts) = d.sizes();
            let st = d.exchange_stats();
            let per = |v: f64| {
                if st.exchanges > 0 {
                    v / st.exchanges as f64
                } else {
                    0.0
                }
            };
            let info = json!({
                "ranks": comm.size(), "transport": comm.kind(), "partition": bespoke_fv::ordering::partition_method(comm.size()),
                "rank0_tets": own, "rank0_interior": interior, "rank0_ghosts": ghosts, "overlap": d.overlapped(),
                "exchange_bytes_per_step_rank0": per(st.bytes_sent as f64),
                "exchange_seconds_per_step_rank0": per(st.seconds),
            });
            let ran = (layout, source, d.shape());
            (
                x,
                m0,
                m1,
                seconds,
                ordering_seconds,
                Some(info),
                n,
                dt,
                ran,
                (from, done),
            )
        }
    };
    bar.finish_and_clear();
    if !root {
        return Ok(());
    }
    let name = &job.name;
    println!(
        "{name}: {n} tets, {} steps of Δt = {dt:.3e} ({} ordering in {ordering_seconds:.2} s, {} kernel, {} layout ({layout_source})) in {seconds:.3} s; \
         mass {m0:.9e} → {m1:.9e} (relative drift {:.2e})",
        done,
        kind.name(),
        kernel.name(),
        layout.name(),
        Operator::relative_drift(m0, m1)
    );
    println!("  step shape {}", shape.name());
    if from > 0 {
        println!("  resumed at step {from}");
    }
    if let Some(p) = &a.checkpoint {
        println!("  state at step {done} saved to {}", p.display());
    }
    if let Some(d) = &dist {
        println!(
            "  ranks {} ({}, {}): rank 0 owns {} tets ({} interior) and {} ghosts, exchanges {:.0} B per step in {:.3} ms",
            d["ranks"],
            d["transport"].as_str().unwrap_or(""),
            d["partition"].as_str().unwrap_or(""),
            d["rank0_tets"],
            d["rank0_interior"],
            d["rank0_ghosts"],
            d["exchange_bytes_per_step_rank0"].as_f64().unwrap_or(0.0),
            1e3 * d["exchange_seconds_per_step_rank0"].as_f64().unwrap_or(0.0)
        );
    }
    if let (Some(p), Some(x), Some((mesh, _)), Some(x0)) = (&a.vtu, &x, whole, &x0) {
        write_vtu(p, mesh, &[("x", x), ("x0", x0)])?;
    }
    write_json(
        json_file,
        &json!({
            "mesh": name, "tets": n, "steps": done, "steps_asked": a.steps, "interrupted": done < a.steps, "resumed_at": from,
            "ordering": kind.name(), "kernel": kernel.name(),
            "layout": layout.name(), "layout_source": layout_source, "dtype": T::DTYPE.wgsl(), "dt": dt, "mass_initial": m0, "mass_final": m1,
            "mass_rel_drift": Operator::relative_drift(m0, m1), "seconds": seconds,
            "ordering_seconds": ordering_seconds, "adapter": adapter_json(gpu), "ranks": dist,
            "step_shape": shape,
        }),
    )?;
    if done < a.steps {
        return Err(format!(
            "interrupted after {done} of {} steps: the mass, the VTU, the JSON report and the checkpoint (if asked) are those of step {done}",
            a.steps
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn args(extra: &[&str]) -> RunArgs {
        let mut v = vec!["fv-run", "--box", "2"];
        v.extend(extra);
        Cli::try_parse_from(v).unwrap().run
    }

    #[test]
    fn the_end_saves_what_its_multiple_did_not_without_a_device() {
        let a = args(&[
            "--checkpoint",
            "c",
            "--checkpoint-every",
            "4",
            "--vtu",
            "v.vtu",
            "--vtu-every",
            "6",
        ]);
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
        // Nothing asked, nothing written.
        let none = args(&[]);
        assert_eq!(saves_at(&none, 12, end(false)), (false, false));
        assert_eq!(saves_at(&none, 12, SaveAt::Multiple), (false, false));
    }
}
