//! `bespoke fv …`: thin adapters over bespoke-fv.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use bespoke::bench::{probe_options, progress_bar};
use bespoke::comm::{Comm, launched_rank, launched_size};
use bespoke::fv::batches::step_batches;
use bespoke::fv::bench::{bench_operator, min_bytes_per_tet};
use bespoke::fv::diffusion::layout_for;
use bespoke::fv::distributed::{RankPart, RankSetup, rank_layout};
use bespoke::fv::generate::BoxMesh;
use bespoke::fv::gmsh::read_msh;
use bespoke::fv::kernel::{DType, KernelKind, Layout};
use bespoke::fv::operator::adjacency;
use bespoke::fv::ordering::{OrderingKind, order};
use bespoke::fv::output::write_vtu;
use bespoke::fv::{Boundary, Diffusion, DistDiffusion, Operator, Real, TetMesh};
use bespoke::gpu::Gpu;
use bespoke::report::adapter_json;
use bespoke::{Error, phase};
use clap::{Args, Subcommand};
use serde_json::json;

use crate::json_out::{JsonOut, check_output, open_json, stop_on_signals, write_json};
use crate::ranks::RankSpec;
use std::rc::Rc;

mod sweep;
use sweep::sweep_cmd;

#[derive(Subcommand, Debug)]
pub enum FvCommand {
    /// Explicit Euler diffusion of a Gaussian bump on a mesh: mass balance, VTU output.
    Run(RunArgs),
    /// Every ordering × kernel: seconds per step, GB/s at the minimum byte count, fraction of copy.
    Bench(BenchArgs),
    /// Throughput against block size on ideal block-diagonal operators, with a real mesh's orderings beside it.
    Sweep(SweepArgs),
    /// Orders a mesh's tets without a device and prints the time; a METIS order is kept in the user's cache,
    /// where `fv run`, `fv bench`, `bench --section fv` and the lab read it (`fv order --box 140` is the GPU
    /// bench's mesh: a GPU session runs it on a spare core beside other stages).
    Order(OrderArgs),
}

#[derive(Args, Debug)]
pub struct OrderArgs {
    #[command(flatten)]
    mesh: MeshArgs,
    #[arg(long, default_value = "metis")]
    ordering: String,
    /// Tets per METIS block.
    #[arg(long, default_value_t = 2048)]
    block_size: u32,
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Tets of the ideal operators (default: 1 M on CPU adapters, 8 M on GPUs).
    #[arg(long)]
    tets: Option<usize>,
    /// The real mesh marked on the plot (default: a shuffled box of about --tets tets).
    #[command(flatten)]
    mesh: MeshArgs,
    /// Block size for the real mesh's METIS ordering and in-block fractions.
    #[arg(long, default_value_t = 2048)]
    block_size: u32,
    #[arg(long, default_value = "f32")]
    dtype: DType,
    #[arg(long, default_value_t = 3, value_parser = crate::count::<usize>)]
    reps: usize,
    #[arg(long, value_name = "FILE")]
    png: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct MeshArgs {
    /// A Gmsh .msh file (2.2 or 4.1, ASCII or binary).
    mesh: Option<PathBuf>,
    /// Instead of a file: the unit box cut into N³ cubes of 6 tets (jittered, tets numbered at random like gmsh).
    #[arg(long, value_name = "N", conflicts_with = "mesh")]
    r#box: Option<usize>,
    /// Number the box's tets cube by cube instead of at random.
    #[arg(long)]
    lexicographic: bool,
}

impl MeshArgs {
    /// Whether a mesh file or a box was given.
    fn given(&self) -> bool {
        self.mesh.is_some() || self.r#box.is_some()
    }

    fn load(&self) -> Result<(String, TetMesh), Error> {
        match (&self.mesh, self.r#box) {
            (Some(p), None) => Ok((p.display().to_string(), read_msh(p)?)),
            (None, Some(n)) => {
                let b = BoxMesh {
                    cells: [n, n, n],
                    jitter: 0.1,
                    shuffle: (!self.lexicographic).then_some(1),
                    seed: 2,
                };
                bespoke::host::check_memory(
                    &format!("--box {n} ({} M tets)", b.tets() / 1_000_000),
                    b.host_bytes(),
                )?;
                Ok((format!("box{n}"), b.build()?))
            }
            _ => Err("give a mesh file or --box N".into()),
        }
    }
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
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    mesh: MeshArgs,
    #[arg(long, default_value_t = 2048)]
    block_size: u32,
    #[arg(long, default_value = "f32")]
    dtype: DType,
    /// Timed step pairs per configuration (after two warm-up pairs).
    #[arg(long, default_value_t = 5, value_parser = crate::count::<usize>)]
    reps: usize,
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Runs an `fv` command: arguments and the mesh are checked first, the device is opened after.
pub fn run(cmd: FvCommand) -> Result<(), Error> {
    match cmd {
        FvCommand::Run(a) => {
            let job = RunJob::prepare(&a)?;
            let spec = a.ranks.map(|count| RankSpec { count, grid: None });
            // SIGINT and SIGTERM raise the flag; the run stops after the batch of steps in flight and writes what
            // it reached (`step_batches`).
            let stop = Arc::new(AtomicBool::new(false));
            stop_on_signals(&stop)?;
            crate::ranks::run(spec, |gpu, comm| match a.dtype {
                DType::F32 => run_diffusion::<f32>(gpu, &a, &job, comm, &stop),
                DType::F64 => run_diffusion::<f64>(gpu, &a, &job, comm, &stop),
            })
        }
        FvCommand::Bench(a) => {
            let json_file = open_json(a.json.as_deref())?;
            let (name, mesh) = a.mesh.load()?;
            let op = operator(&mesh, None)?;
            drop(mesh);
            bench(&crate::open_gpu()?, a, json_file, name, op)
        }
        FvCommand::Order(a) => {
            let kind = OrderingKind::parse(&a.ordering, a.block_size as usize)?;
            let (name, mesh) = a.mesh.load()?;
            let op = operator(&mesh, None)?;
            drop(mesh);
            let (_, seconds) = order(&op, kind)?;
            let kept = match kind {
                OrderingKind::Metis { .. } => " (kept in the user's cache)",
                _ => "",
            };
            println!(
                "{name}: {} tets, {} order in {seconds:.1} s{kept}",
                op.n(),
                kind.name()
            );
            Ok(())
        }
        FvCommand::Sweep(a) => {
            let json_file = open_json(a.json.as_deref())?;
            check_output("plot", a.png.as_deref())?;
            let mesh = a.mesh.given().then(|| a.mesh.load()).transpose()?;
            let gpu = crate::open_gpu()?;
            match a.dtype {
                DType::F32 => sweep_cmd::<f32>(&gpu, a, json_file, mesh),
                DType::F64 => sweep_cmd::<f64>(&gpu, a, json_file, mesh),
            }
        }
    }
}

fn operator(mesh: &TetMesh, dirichlet: Option<f64>) -> Result<Operator, Error> {
    let adj = adjacency(mesh)?;
    let boundary = dirichlet.map_or(Boundary::ZeroFlux, Boundary::Dirichlet);
    Ok(Operator::diffusion(mesh, &adj, 1.0, boundary)?)
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
        // Under mpirun only rank 0 reads the mesh and builds the operator (if it cannot, it stops and mpirun ends
        // the job); the others hold their part alone. Thread ranks share this process's one copy.
        let mpi_rank = launched_size().filter(|&n| n > 1).and(launched_rank());
        let (name, whole) = match mpi_rank {
            Some(r) if r > 0 => (String::new(), None),
            _ => {
                // Rank 0 writes the VTU after the run: a path it could not write is refused before it.
                check_output("VTU file", a.vtu.as_deref())?;
                let (name, mesh) = a.mesh.load()?;
                let op = operator(&mesh, a.dirichlet)?;
                (name, Some((mesh, op)))
            }
        };
        Ok(Self {
            name,
            whole,
            kernel,
            layout,
            ordering,
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
    let (x, m0, m1, seconds, ordering_seconds, dist, n, dt, (layout, layout_source, shape), done) =
        match comm {
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
                d.set_x(&perm.apply(x0))?;
                // The initial mass of x as stored (rounded to the precision), so the drift is the steps' alone.
                let m0 = permuted.mass(&d.x()?);
                drop(permuted);
                let t = Instant::now();
                let done = phase("fv steps", || {
                    step_batches(
                        a.steps,
                        stop,
                        None,
                        |done| bar.set_position(done as u64),
                        |k| d.step(k),
                    )
                })?;
                let seconds = t.elapsed().as_secs_f64();
                let x = perm.undo(&d.x()?);
                let m1 = op.mass(&x);
                let x = a.vtu.is_some().then_some(x);
                let n = op.n();
                let ran = (layout, source, d.shape());
                (x, m0, m1, seconds, ordering_seconds, None, n, dt, ran, done)
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
                d.set_x_from_root(x0.as_deref())?;
                let m0 = d.mass()?;
                comm.barrier()?;
                let t = Instant::now();
                let done = phase("fv steps", || {
                    step_batches(
                        a.steps,
                        stop,
                        Some(&*comm),
                        |done| bar.set_position(done as u64),
                        |k| d.step(k),
                    )
                })?;
                let seconds = t.elapsed().as_secs_f64();
                let m1 = d.mass()?;
                let x = match a.vtu {
                    Some(_) => d.x_on_root()?,
                    None => None,
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
                    done,
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
            "mesh": name, "tets": n, "steps": done, "steps_asked": a.steps, "interrupted": done < a.steps,
            "ordering": kind.name(), "kernel": kernel.name(),
            "layout": layout.name(), "layout_source": layout_source, "dtype": T::DTYPE.wgsl(), "dt": dt, "mass_initial": m0, "mass_final": m1,
            "mass_rel_drift": Operator::relative_drift(m0, m1), "seconds": seconds,
            "ordering_seconds": ordering_seconds, "adapter": adapter_json(gpu), "ranks": dist,
            "step_shape": shape,
        }),
    )?;
    if done < a.steps {
        return Err(format!(
            "interrupted after {done} of {} steps: the mass, the VTU and the JSON report are those of step {done}",
            a.steps
        )
        .into());
    }
    Ok(())
}

fn bench(
    gpu: &Gpu,
    a: BenchArgs,
    json_file: JsonOut,
    name: String,
    op: Operator,
) -> Result<(), Error> {
    let dtype = a.dtype;
    let probe = gpu.copy_bandwidth(&probe_options(false))?;
    let orderings = OrderingKind::all(a.block_size as usize);
    let bar = progress_bar(orderings.len() as u64);
    let tick = |o: &str| {
        bar.set_message(o.to_owned());
        bar.inc(1);
    };
    let runs = match dtype {
        DType::F32 => bench_operator::<f32>(gpu, &op, &orderings, a.block_size, a.reps, tick)?,
        DType::F64 => bench_operator::<f64>(gpu, &op, &orderings, a.block_size, a.reps, tick)?,
    };
    bar.finish_and_clear();
    println!(
        "{name}: {} tets, {} B/tet minimum, copy {:.2} GB/s, block {}",
        op.n(),
        min_bytes_per_tet(dtype.size()),
        probe.gbps,
        a.block_size
    );
    println!(
        "{:<9} {:<13} {:<17} {:>10} {:>8} {:>8} {:>9} {:>6} {:>9}",
        "ordering", "kernel", "layout", "ms/step", "GB/s", "of copy", "in-block", "far", "order s"
    );
    for r in &runs {
        if let Some(why) = &r.skipped {
            println!(
                "{:<9} {:<13} {:<17} not timed: {why}",
                r.ordering, r.kernel, r.layout
            );
            continue;
        }
        println!(
            "{:<9} {:<13} {:<17} {:>10.3} {:>8.2} {:>8.3} {:>9.3} {:>6.3} {:>9.2}",
            r.ordering,
            r.kernel,
            r.layout,
            r.seconds_per_step * 1e3,
            r.gbps,
            r.gbps / probe.gbps,
            r.in_block_fraction,
            r.far_fraction,
            r.ordering_seconds
        );
    }
    let rows = with_copy_fraction(&runs, |r| r.gbps, probe.gbps)?;
    write_json(
        json_file,
        &json!({
            "mesh": name, "tets": op.n(), "dtype": dtype.wgsl(), "block_size": a.block_size,
            "min_bytes_per_tet": min_bytes_per_tet(dtype.size()), "copy_gbps": probe.gbps, "runs": rows,
            "adapter": adapter_json(gpu),
        }),
    )
}

/// The crate's result records as JSON, each with its fraction of the copy bandwidth added.
fn with_copy_fraction<R: serde::Serialize>(
    rows: &[R],
    gbps: impl Fn(&R) -> f64,
    copy_gbps: f64,
) -> Result<Vec<serde_json::Value>, Error> {
    rows.iter()
        .map(|r| {
            let mut v = serde_json::to_value(r)?;
            v["copy_fraction"] = json!(gbps(r) / copy_gbps);
            Ok(v)
        })
        .collect()
}
