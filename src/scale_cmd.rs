//! `bespoke scale`: weak and strong scaling of the lattice and the mesh on the job's ranks (thread ranks with
//! `--ranks N`, MPI ranks under `mpirun`), printed and written as JSON by rank 0.

use std::path::PathBuf;

use bespoke::Error;
use bespoke::bench::{default_memory_budget, format_table, scale_rows};
use bespoke::fv::generate::BoxMesh;
use bespoke::fv::ordering::OrderingKind;
use bespoke::lbm::{Storage, Streaming};
use clap::Args;

use crate::json_out::{open_json, write_json};
use crate::ranks::RankSpec;

#[derive(Args, Debug)]
pub struct ScaleArgs {
    /// lbm, fv or both.
    #[arg(long, default_value = "both")]
    code: String,
    /// Lattice cells per rank for weak scaling (P blocks side by side along x).
    #[arg(long, default_value = "512x512", value_name = "NXxNY")]
    block: String,
    /// The lattice for strong scaling (default: two blocks along x).
    #[arg(long, value_name = "NXxNY")]
    domain: Option<String>,
    /// Mesh: cubes per side of each rank's box (6 c³ tets per rank) for weak scaling.
    #[arg(long, default_value_t = 24)]
    cubes: usize,
    /// Mesh: cubes along x, y and z of the strong-scaling box (default: two ranks' boxes along x, 2cxcxc,
    /// the weak box of two ranks, whose mesh and partition are then made once).
    #[arg(long, value_name = "CXxCYxCZ")]
    strong_box: Option<String>,
    /// Steps per timed batch.
    #[arg(long, default_value_t = 20, value_parser = crate::count::<u64>)]
    steps: u64,
    /// Interleaved rounds of every setup (figures are medians; this VM's speed drifts between runs).
    #[arg(long, default_value_t = 5, value_parser = crate::count::<usize>)]
    rounds: usize,
    #[arg(long, default_value = "f32")]
    storage: Storage,
    #[arg(long, default_value = "ab")]
    streaming: Streaming,
    /// Gigabytes of device memory all ranks' setups may hold at once; past it each setup is built, timed and
    /// dropped in turn instead of interleaved (default: an eighth of the host's available memory on a CPU
    /// adapter, 16 on a GPU).
    #[arg(long, value_name = "GB", allow_negative_numbers = true)]
    memory_budget: Option<f64>,
    /// Ranks as threads of this process (under mpirun the launcher sets them).
    #[arg(long, value_name = "N", value_parser = crate::count::<usize>)]
    ranks: Option<usize>,
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// `AxB…` as D positive sizes; `like` is an example for the error.
fn sizes<const D: usize>(s: &str, what: &str, like: &str) -> Result<[usize; D], Error> {
    let bad = || format!("--{what} `{s}` is not like {like} (positive sizes)");
    let parts: Vec<usize> = s
        .split(['x', 'X'])
        .map(|v| v.trim().parse().ok().filter(|&v| v > 0))
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    Ok(parts.try_into().map_err(|_| bad())?)
}

fn size(s: &str, what: &str) -> Result<[usize; 2], Error> {
    sizes(s, what, "512x512")
}

pub fn run(a: ScaleArgs) -> Result<(), Error> {
    let (do_lbm, do_fv) = match a.code.as_str() {
        "lbm" => (true, false),
        "fv" => (false, true),
        "both" => (true, true),
        c => return Err(format!("--code `{c}`: expected lbm, fv or both").into()),
    };
    let block = size(&a.block, "block")?;
    let lbm = bespoke::lbm::scale::ScaleOptions {
        block,
        domain: a
            .domain
            .as_deref()
            .map(|d| size(d, "domain"))
            .transpose()?
            .unwrap_or([2 * block[0], block[1]]),
        steps: a.steps,
        rounds: a.rounds,
        storage: a.storage,
        streaming: a.streaming,
        memory_budget: 0,
    };
    if a.cubes == 0 {
        return Err("--cubes must be at least 1".into());
    }
    let fv = bespoke::fv::scale::ScaleOptions {
        cubes: a.cubes,
        strong: a
            .strong_box
            .as_deref()
            .map(|b| sizes(b, "strong-box", "48x24x24"))
            .transpose()?
            .unwrap_or([2 * a.cubes, a.cubes, a.cubes]),
        steps: a.steps as usize,
        rounds: a.rounds,
        ordering: OrderingKind::Rcm,
        memory_budget: 0,
    };
    if let Some(gb) = a.memory_budget
        && !(gb > 0.0 && gb.is_finite())
    {
        return Err(
            format!("--memory-budget {gb}: expected a positive number of gigabytes").into(),
        );
    }
    let spec = a.ranks.map(|count| RankSpec { count, grid: None });
    // The lattices' sizes and cuts, before any rank opens a device (the mesh's boxes are the ranks' own).
    if let Some((ranks, _)) = crate::ranks::planned(spec)?
        && do_lbm
    {
        lbm.check(ranks)?;
    }
    crate::ranks::run(spec, |gpu, comm| {
        let comm = comm.ok_or(
            "scaling needs ranks: --ranks N (threads), or mpirun -np N with --features mpi",
        )?;
        let root = comm.rank() == 0;
        let json = if root {
            open_json(a.json.as_deref())?
        } else {
            None
        };
        let budget = a
            .memory_budget
            .map_or_else(|| default_memory_budget(gpu), |gb| (gb * 1e9) as u64);
        let mut reports = Vec::new();
        if do_lbm {
            let lbm = bespoke::lbm::scale::ScaleOptions {
                memory_budget: budget,
                ..lbm.clone()
            };
            reports.push(bespoke::lbm::scale::scale(gpu, comm.clone(), &lbm)?);
        }
        if do_fv {
            // The process builds the weak setups' whole box (one per process, shared by its thread ranks) and
            // the strong box: refused here if either would not fit the host.
            let boxes =
                [[a.cubes * comm.size(), a.cubes, a.cubes], fv.strong].map(|cells| BoxMesh {
                    cells,
                    ..BoxMesh::cube(1)
                });
            let largest = boxes
                .iter()
                .max_by_key(|b| b.host_bytes())
                .expect("two boxes");
            bespoke::host::check_memory(
                &format!(
                    "--cubes {} on {} ranks ({}x{}x{} cubes, {} M tets)",
                    a.cubes,
                    comm.size(),
                    largest.cells[0],
                    largest.cells[1],
                    largest.cells[2],
                    largest.tets() / 1_000_000
                ),
                largest.host_bytes(),
            )?;
            let fv = bespoke::fv::scale::ScaleOptions {
                memory_budget: budget,
                ..fv.clone()
            };
            reports.push(bespoke::fv::scale::scale(gpu, comm.clone(), &fv)?);
        }
        if root {
            bespoke::say!(
                "{} ranks ({}), adapter {}",
                comm.size(),
                comm.kind(),
                gpu.adapter_name()
            );
            let rows: Vec<_> = reports.iter().flat_map(scale_rows).collect();
            bespoke::out::write(format_args!("{}", format_table(&rows)));
            write_json(json, &serde_json::to_value(&reports)?)?;
        }
        Ok(())
    })
}
