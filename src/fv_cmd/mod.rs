//! `bespoke fv …`: thin adapters over bespoke-fv.

use std::path::PathBuf;

use bespoke::Error;
use bespoke::bench::{probe_options, progress_bar};
use bespoke::fv::bench::{bench_operator, min_bytes_per_tet};
use bespoke::fv::generate::BoxMesh;
use bespoke::fv::gmsh::read_msh;
use bespoke::fv::kernel::DType;
use bespoke::fv::operator::adjacency;
use bespoke::fv::ordering::{OrderingKind, order};
use bespoke::fv::{Boundary, Operator, Real, TetMesh};
use bespoke::gpu::Gpu;
use bespoke::report::adapter_json;
use clap::{Args, Subcommand};
use serde_json::json;

use crate::json_out::{JsonOut, check_output, open_json, write_json};

mod run;
mod sweep;
pub use run::RunArgs;
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
        FvCommand::Run(a) => run::run_cmd(&a),
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
            bespoke::say!(
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
    bespoke::say!(
        "{name}: {} tets, {} B/tet minimum, copy {:.2} GB/s, block {}",
        op.n(),
        min_bytes_per_tet(dtype.size()),
        probe.gbps,
        a.block_size
    );
    bespoke::say!(
        "{:<9} {:<13} {:<17} {:>10} {:>8} {:>8} {:>9} {:>6} {:>9}",
        "ordering",
        "kernel",
        "layout",
        "ms/step",
        "GB/s",
        "of copy",
        "in-block",
        "far",
        "order s"
    );
    for r in &runs {
        if let Some(why) = &r.skipped {
            bespoke::say!(
                "{:<9} {:<13} {:<17} not timed: {why}",
                r.ordering,
                r.kernel,
                r.layout
            );
            continue;
        }
        bespoke::say!(
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
