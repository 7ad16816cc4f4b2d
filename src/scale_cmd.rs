//! `bespoke scale`: weak and strong scaling of the lattice on the job's ranks (thread ranks with `--ranks N`, MPI
//! ranks under `mpirun`), printed and written as JSON by rank 0.

use std::path::PathBuf;

use bespoke::Error;
use bespoke::bench::{format_table, scale_rows};
use bespoke::lbm::scale::{ScaleOptions, scale};
use bespoke::lbm::{Storage, Streaming};
use clap::Args;

use crate::json_out::{open_json, write_json};
use crate::ranks::RankSpec;

#[derive(Args, Debug)]
pub struct ScaleArgs {
    /// Cells per rank for weak scaling (P blocks side by side along x).
    #[arg(long, default_value = "512x512", value_name = "NXxNY")]
    block: String,
    /// The domain for strong scaling (default: two blocks along x).
    #[arg(long, value_name = "NXxNY")]
    domain: Option<String>,
    #[arg(long, default_value_t = 50)]
    steps: u64,
    #[arg(long, default_value = "f32")]
    storage: String,
    #[arg(long, default_value = "ab")]
    streaming: String,
    /// Ranks as threads of this process (ignored under mpirun, which sets the ranks).
    #[arg(long, value_name = "N")]
    ranks: Option<usize>,
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn size(s: &str, what: &str) -> Result<[usize; 2], Error> {
    let bad = || format!("--{what} `{s}` is not like 512x512");
    let (a, b) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    Ok([
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    ])
}

pub fn run(a: ScaleArgs) -> Result<(), Error> {
    let block = size(&a.block, "block")?;
    let opts = ScaleOptions {
        block,
        domain: a
            .domain
            .as_deref()
            .map(|d| size(d, "domain"))
            .transpose()?
            .unwrap_or([2 * block[0], block[1]]),
        steps: a.steps.max(1),
        storage: Storage::parse(&a.storage)?,
        streaming: Streaming::parse(&a.streaming)?,
    };
    let spec = a.ranks.map(|count| RankSpec { count, grid: None });
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
        let r = scale(gpu, comm, &opts)?;
        if root {
            println!(
                "{} ranks ({}), {} {}, adapter {}",
                r.ranks,
                r.transport,
                r.storage,
                r.streaming,
                gpu.adapter_name()
            );
            print!("{}", format_table(&scale_rows(&r)));
            write_json(json, &serde_json::to_value(&r)?)?;
        }
        Ok(())
    })
}
