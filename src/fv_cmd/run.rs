//! `bespoke fv run`: the diffusion of a Gaussian bump on one domain or across ranks (`bespoke_fv::run`): its
//! arguments, the mesh and a checkpoint to resume checked before a device is opened, and its report.

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use bespoke::Error;
use bespoke::bench::progress_bar;
use bespoke::comm::{Comm, launched_rank, launched_size};
use bespoke::fv::checkpoint::Checkpoint;
use bespoke::fv::kernel::{DType, KernelKind, Layout};
use bespoke::fv::ordering::OrderingKind;
use bespoke::fv::run::{RunOptions, Saves, run};
use bespoke::fv::{Boundary, Operator, Real, TetMesh};
use bespoke::gpu::Gpu;
use bespoke::report::adapter_json;
use clap::Args;
use serde_json::json;

use super::{MeshArgs, operator};
use crate::json_out::{check_output, open_json, stop_on_signals, write_json};
use crate::ranks::RankSpec;

/// Runs `fv run`: the arguments and the mesh (and a checkpoint to resume) are checked first, the device is
/// opened after.
pub(super) fn run_cmd(a: &RunArgs) -> Result<(), Error> {
    let spec = a.ranks.map(|count| RankSpec { count, grid: None });
    let job = RunJob::prepare(a, crate::ranks::planned(spec)?.map(|(p, _)| p))?;
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
    #[arg(long, allow_negative_numbers = true)]
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
    #[arg(long, value_name = "N", value_parser = crate::count::<usize>)]
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
    /// The job's kernel, layout, ordering, mesh and operator (rank 0's, or this process's for thread ranks), and
    /// the checkpoint to resume, each checked before a device is opened; `ranks` (the job's, if across ranks)
    /// against the mesh's tets.
    fn prepare(a: &RunArgs, ranks: Option<usize>) -> Result<Self, Error> {
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
        // Before the mesh is read, and before any rank opens a device.
        a.dirichlet
            .map_or(Boundary::ZeroFlux, Boundary::Dirichlet)
            .check_precision(a.dtype)?;
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
                if let Some(p) = ranks {
                    bespoke::fv::distributed::check_ranks(p, op.n())?;
                }
                (name, Some((mesh, op)))
            }
        };
        let resume = match (&a.resume, &whole) {
            (Some(path), Some((_, op))) => {
                let c = Checkpoint::read(path)?;
                c.check_fits(path, op, a.dtype, op.default_dt(), a.steps as u64)?;
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
    let saves = |path: &Option<PathBuf>, every| path.clone().map(|path| Saves { path, every });
    let opts = RunOptions {
        kernel: job.kernel,
        layout: job.layout,
        ordering: job.ordering,
        steps: a.steps,
        overlap: !a.no_overlap,
        checkpoint: saves(&a.checkpoint, a.checkpoint_every),
        vtu: saves(&a.vtu, a.vtu_every),
        resume: job.resume.as_ref(),
        stop,
    };
    // The whole mesh and operator on rank 0 (and on one domain) alone.
    let whole = job.whole.as_ref().filter(|_| root).map(|(m, op)| (m, op));
    let r = run::<T>(gpu, whole, comm, &opts, |at| bar.set_position(at as u64))?;
    bar.finish_and_clear();
    if !root {
        return Ok(());
    }
    let name = &job.name;
    let (kind, kernel, done) = (job.ordering, job.kernel, r.done);
    // Zero flux conserves the mass, so its drift is the arithmetic's; a fixed boundary value moves it.
    let (drift, drift_text) = match a.dirichlet {
        None => {
            let d = Operator::relative_drift(r.mass_initial, r.mass_final);
            (Some(d), format!("relative drift {d:.2e}"))
        }
        Some(v) => (None, format!("not conserved: the boundary holds x = {v}")),
    };
    bespoke::say!(
        "{name}: {} tets, {done} steps of Δt = {:.3e} ({} ordering in {:.2} s, {} kernel, {} layout ({})) in {:.3} s; \
         mass {:.9e} → {:.9e} ({drift_text})",
        r.tets,
        r.dt,
        kind.name(),
        r.ordering_seconds,
        kernel.name(),
        r.layout.name(),
        r.layout_source,
        r.seconds,
        r.mass_initial,
        r.mass_final,
    );
    bespoke::say!("  step shape {}", r.shape.name());
    if r.from > 0 {
        bespoke::say!("  resumed at step {}", r.from);
    }
    if let Some(p) = &a.checkpoint {
        bespoke::say!("  state at step {done} saved to {}", p.display());
    }
    if let Some(d) = &r.ranks {
        bespoke::say!(
            "  ranks {} ({}, {}): rank 0 owns {} tets ({} interior) and {} ghosts, exchanges {:.0} B per step in {:.3} ms",
            d.ranks,
            d.transport,
            d.partition,
            d.rank0_tets,
            d.rank0_interior,
            d.rank0_ghosts,
            d.exchange_bytes_per_step_rank0,
            1e3 * d.exchange_seconds_per_step_rank0
        );
    }
    write_json(
        json_file,
        &json!({
            "mesh": name, "tets": r.tets, "steps": done, "steps_asked": a.steps, "interrupted": done < a.steps, "resumed_at": r.from,
            "ordering": kind.name(), "kernel": kernel.name(),
            "layout": r.layout.name(), "layout_source": r.layout_source, "dtype": T::DTYPE.wgsl(), "dt": r.dt,
            "mass_initial": r.mass_initial, "mass_final": r.mass_final,
            "mass_rel_drift": drift, "dirichlet": a.dirichlet, "seconds": r.seconds,
            "ordering_seconds": r.ordering_seconds, "adapter": adapter_json(gpu), "ranks": r.ranks,
            "step_shape": r.shape,
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
