//! Scaling across ranks: weak scaling (a fixed block per rank), strong scaling (a fixed domain), the exchange's
//! bytes and time per step, and the share of it that overlap hides. Every rank of the job calls [`scale`]; the
//! report is the same on every rank.

use std::rc::Rc;
use std::time::Instant;

use bespoke_comm::{Comm, Op};
use bespoke_gpu::Gpu;
use serde::Serialize;

use crate::bench::bench_lattice_on;
use crate::config::{Storage, Streaming};
use crate::dist::Ranks;
use crate::error::Result;

/// What to measure.
#[derive(Clone, Debug)]
pub struct ScaleOptions {
    /// Cells per rank in weak scaling (the domain is P blocks side by side along x).
    pub block: [usize; 2],
    /// The domain of strong scaling.
    pub domain: [usize; 2],
    pub steps: u64,
    pub storage: Storage,
    pub streaming: Streaming,
}

/// One timed run.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleRun {
    /// "weak" or "strong".
    pub kind: &'static str,
    pub ranks: usize,
    pub nx: usize,
    pub ny: usize,
    pub overlap: bool,
    /// Wall seconds per step, the slowest rank's.
    pub seconds_per_step: f64,
    /// Million cell updates per second per rank.
    pub mlups_per_rank: f64,
    /// Bytes one rank sends per step (the largest).
    pub exchange_bytes_per_step: f64,
    /// Host seconds per step from the pack's readback to the halo's upload (the largest over ranks): the
    /// exchange as a step sees it, including the wait for the device to finish what precedes the pack.
    pub exchange_seconds_per_step: f64,
    /// Of which sending and receiving alone (the transport).
    pub message_seconds_per_step: f64,
}

/// The report: the single-rank references and the runs across ranks, with efficiencies.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleReport {
    pub ranks: usize,
    pub transport: &'static str,
    pub storage: &'static str,
    pub streaming: &'static str,
    /// Rank 0 alone on one block, and on the strong-scaling domain.
    pub weak_one: ScaleRun,
    /// Every rank on a block of its own at the same time, no exchange: what the machine gives P ranks at once
    /// (ranks that share memory bandwidth or cores slow each other without any exchange).
    pub weak_independent: ScaleRun,
    /// T(independent)/T(P): the efficiency the exchange alone leaves.
    pub exchange_efficiency: f64,
    pub strong_one: ScaleRun,
    pub weak: Vec<ScaleRun>,
    pub strong: ScaleRun,
    /// T(1)/T(P) at a fixed block per rank (overlap on).
    pub weak_efficiency: f64,
    /// T(1)/(P·T(P)) on the fixed domain.
    pub strong_efficiency: f64,
    /// (T(P) without overlap − T(P) with) / (T(P) without overlap − T(1)): of the time the exchange adds to a
    /// step when nothing overlaps it, the share overlap hides (1: all of it; noise can push it past 1).
    pub overlap_hidden: f64,
    /// T(P) without overlap − T(1): what the exchange costs a step when nothing hides it.
    pub exchange_cost: f64,
}

/// Times `steps` steps of an nx × ny Taylor–Green lattice, on one domain (`ranks` None) or across ranks.
fn timed(
    gpu: &Gpu,
    ranks: Option<&Ranks>,
    kind: &'static str,
    [nx, ny]: [usize; 2],
    o: &ScaleOptions,
) -> Result<ScaleRun> {
    let mut lat = bench_lattice_on(gpu, nx, ny, o.storage, o.streaming, ranks)?;
    // Warm-up: the first steps compile nothing, but fill caches and settle the halo.
    lat.step(4)?;
    let before = lat.exchange_stats().unwrap_or_default();
    if let Some(r) = ranks {
        r.comm.barrier()?;
    }
    let t = Instant::now();
    lat.step(o.steps)?;
    let mut v = [t.elapsed().as_secs_f64() / o.steps as f64, 0.0, 0.0, 0.0];
    let after = lat.exchange_stats().unwrap_or_default();
    let n = (after.exchanges - before.exchanges).max(1) as f64;
    v[1] = (after.bytes_sent - before.bytes_sent) as f64 / n;
    v[2] = (after.seconds - before.seconds) / n;
    v[3] = (after.message_seconds - before.message_seconds) / n;
    let p = match ranks {
        Some(r) => {
            r.comm.all_reduce_f64(&mut v, Op::Max)?;
            r.comm.size()
        }
        None => 1,
    };
    Ok(ScaleRun {
        kind,
        ranks: p,
        nx,
        ny,
        overlap: ranks.is_some_and(|r| r.overlap),
        seconds_per_step: v[0],
        mlups_per_rank: (nx * ny) as f64 / p as f64 / v[0] / 1e6,
        exchange_bytes_per_step: v[1],
        exchange_seconds_per_step: v[2],
        message_seconds_per_step: v[3],
    })
}

/// Rank 0 times `domain` alone while the others wait; the result on every rank.
fn alone(
    gpu: &Gpu,
    comm: &Rc<dyn Comm>,
    kind: &'static str,
    domain: [usize; 2],
    o: &ScaleOptions,
) -> Result<ScaleRun> {
    comm.barrier()?;
    let mut v = [0.0];
    let run = if comm.rank() == 0 {
        let r = timed(gpu, None, kind, domain, o)?;
        v[0] = r.seconds_per_step;
        Some(r)
    } else {
        None
    };
    comm.all_reduce_f64(&mut v, Op::Max)?;
    let s = v[0];
    Ok(run.unwrap_or(ScaleRun {
        kind,
        ranks: 1,
        nx: domain[0],
        ny: domain[1],
        overlap: false,
        seconds_per_step: s,
        mlups_per_rank: (domain[0] * domain[1]) as f64 / s / 1e6,
        exchange_bytes_per_step: 0.0,
        exchange_seconds_per_step: 0.0,
        message_seconds_per_step: 0.0,
    }))
}

/// Weak and strong scaling on the job's ranks (every rank calls it with its own device).
pub fn scale(gpu: &Gpu, comm: Rc<dyn Comm>, o: &ScaleOptions) -> Result<ScaleReport> {
    let p = comm.size();
    let weak_domain = [o.block[0] * p, o.block[1]];
    let ranks = |overlap| Ranks {
        grid: Some([p, 1]),
        overlap,
        ..Ranks::new(comm.clone())
    };
    let weak_one = alone(gpu, &comm, "weak", o.block, o)?;
    let mut weak_independent = timed(gpu, None, "weak", o.block, o)?;
    let mut v = [weak_independent.seconds_per_step];
    comm.all_reduce_f64(&mut v, Op::Max)?;
    weak_independent.seconds_per_step = v[0];
    weak_independent.mlups_per_rank = (o.block[0] * o.block[1]) as f64 / v[0] / 1e6;
    let on = timed(gpu, Some(&ranks(true)), "weak", weak_domain, o)?;
    let off = timed(gpu, Some(&ranks(false)), "weak", weak_domain, o)?;
    let strong_one = alone(gpu, &comm, "strong", o.domain, o)?;
    let strong = timed(gpu, Some(&ranks(true)), "strong", o.domain, o)?;
    let cost = off.seconds_per_step - weak_one.seconds_per_step;
    let hidden = if cost > 0.0 {
        (off.seconds_per_step - on.seconds_per_step) / cost
    } else {
        f64::NAN
    };
    Ok(ScaleReport {
        ranks: p,
        transport: comm.kind(),
        storage: o.storage.name(),
        streaming: o.streaming.name(),
        weak_efficiency: weak_one.seconds_per_step / on.seconds_per_step,
        exchange_efficiency: weak_independent.seconds_per_step / on.seconds_per_step,
        strong_efficiency: strong_one.seconds_per_step / (p as f64 * strong.seconds_per_step),
        overlap_hidden: hidden,
        exchange_cost: cost,
        weak_one,
        weak_independent,
        strong_one,
        weak: vec![on, off],
        strong,
    })
}
