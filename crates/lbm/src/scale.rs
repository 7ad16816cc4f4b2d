//! Scaling across ranks ([`bespoke_comm::scaling`]): weak scaling at a fixed block per rank (P blocks side by
//! side along x), strong scaling on a fixed domain, on a periodic Taylor–Green lattice. Every rank calls
//! [`scale`]; the report is the same on every rank.

use std::rc::Rc;
use std::time::Instant;

use bespoke_comm::Comm;
use bespoke_comm::scaling::{Memory, ScaleReport, Setup, Timed, Timer, scaling};
use bespoke_gpu::Gpu;

use crate::bench::bench_lattice_shared;
use crate::config::{Collision, Config, Storage, Streaming};
use crate::distributed::{Decomposition, Ranks};
use crate::error::{LbmError, Result};
use crate::flags::Flags;
use crate::lattice::check_fits;

/// What to measure.
#[derive(Clone, Debug)]
pub struct ScaleOptions {
    /// Cells per rank in weak scaling.
    pub block: [usize; 2],
    /// The domain of strong scaling.
    pub domain: [usize; 2],
    /// Steps per timed batch.
    pub steps: u64,
    /// Interleaved rounds (each figure is the median).
    pub rounds: usize,
    pub storage: Storage,
    pub streaming: Streaming,
    /// Bytes of lattices all ranks' setups may hold at once; past it they are built and timed one at a time
    /// ([`bespoke_comm::scaling::Memory`]).
    pub memory_budget: u64,
}

impl ScaleOptions {
    /// Checks, without a device, that the block, the weak domain of `ranks` blocks side by side and the strong
    /// domain are lattices (sizes, 32-bit cell indices) and that each cuts into `ranks` blocks along x as the
    /// setups cut them: a CLI refuses them before any rank opens a device.
    pub fn check(&self, ranks: usize) -> Result<()> {
        let weak = [self.block[0].saturating_mul(ranks), self.block[1]];
        for [nx, ny] in [self.block, self.domain, weak] {
            self.lattice(nx, ny).check()?;
        }
        for [nx, ny] in [weak, self.domain] {
            Decomposition::new(nx, ny, [ranks, 1], self.storage)?;
        }
        Ok(())
    }

    fn lattice(&self, nx: usize, ny: usize) -> Config {
        Config {
            storage: self.storage,
            streaming: self.streaming,
            ..Config::new(nx, ny, Collision::Bgk { omega: 1.0 })
        }
    }

    /// Device bytes of a lattice of `cells` cells (both lattices of two-lattice streaming).
    pub fn lattice_bytes(&self, cells: usize) -> u64 {
        let per_population = match self.storage {
            Storage::F32 => 4,
            Storage::F16 => 2,
        };
        let lattices = match self.streaming {
            Streaming::Ab => 2,
            Streaming::InPlace => 1,
        };
        (cells * 9 * per_population * lattices) as u64
    }
}

/// Refuses, before any flag field is made, a setup whose domain (the whole domain's flags are built on every rank)
/// passes 32-bit cell indices or whose lattice on this rank (a block with its two halo columns, or a whole domain
/// alone) passes the device's binding limit. Found late, a 100 000² block per rank aborted on a 240 GB allocation,
/// and a 20 000² one failed after 35 s and 9 GB of flags.
fn check_sizes(gpu: &Gpu, o: &ScaleOptions, p: usize) -> Result<()> {
    o.check(p)?;
    for [nx, ny] in [
        o.block,
        o.domain,
        [o.block[0] + 2, o.block[1]],
        [o.domain[0] / p + 2, o.domain[1]],
    ] {
        check_fits(gpu, &o.lattice(nx, ny))?;
    }
    Ok(())
}

/// Weak and strong scaling of the lattice on the job's ranks (every rank calls it with its own device).
pub fn scale(gpu: &Gpu, comm: Rc<dyn Comm>, o: &ScaleOptions) -> Result<ScaleReport> {
    let p = comm.size();
    let code = format!(
        "lbm D2Q9 {} {}, {}x{} per rank, strong {}x{}",
        o.storage.name(),
        o.streaming.name(),
        o.block[0],
        o.block[1],
        o.domain[0],
        o.domain[1]
    );
    check_sizes(gpu, o, p)?;
    let c = comm.clone();
    // This rank's cells in each setup (a block's halo: two columns).
    let cells = |setup: Setup| match setup {
        Setup::WeakSingle { .. } => o.block[0] * o.block[1],
        Setup::StrongSingle => o.domain[0] * o.domain[1],
        Setup::Weak { .. } => (o.block[0] + 2) * o.block[1],
        Setup::Strong => (o.domain[0] / p + 2) * o.domain[1],
    };
    let memory = Memory {
        budget: o.memory_budget,
        bytes: |setup| o.lattice_bytes(cells(setup)),
    };
    // One flag field per domain size, shared by the setups of that size (they come in pairs).
    let mut flags: Option<Rc<Flags>> = None;
    scaling::<LbmError>(&*comm, &code, o.rounds, memory, |setup| {
        let across = |overlap| Ranks {
            grid: Some([p, 1]),
            overlap,
            ..Ranks::new(c.clone())
        };
        let (size, ranks) = match setup {
            Setup::WeakSingle { .. } => (o.block, None),
            Setup::StrongSingle => (o.domain, None),
            Setup::Weak { overlap } => ([o.block[0] * p, o.block[1]], Some(across(overlap))),
            Setup::Strong => (o.domain, Some(across(true))),
        };
        // The previous size's field is dropped before the next is made.
        let shared = match flags.take().filter(|f| [f.nx(), f.ny()] == size) {
            Some(f) => f,
            None => Rc::new(Flags::fluid(size[0], size[1])),
        };
        flags = Some(shared.clone());
        let mut lat = bench_lattice_shared(gpu, &shared, o.storage, o.streaming, ranks.as_ref())?;
        lat.step(2)?;
        let updates = (size[0] * size[1] / if ranks.is_some() { p } else { 1 }) as f64;
        let steps = o.steps;
        Ok(Some(Box::new(move || {
            let before = lat.exchange_stats().unwrap_or_default();
            let t = Instant::now();
            lat.step(steps)?;
            let seconds = t.elapsed().as_secs_f64() / steps as f64;
            let after = lat.exchange_stats().unwrap_or_default();
            let n = (after.exchanges - before.exchanges).max(1) as f64;
            Ok(Timed {
                seconds,
                updates,
                exchange_bytes: (after.bytes_sent - before.bytes_sent) as f64 / n,
                exchange_seconds: (after.seconds - before.seconds) / n,
                message_seconds: (after.message_seconds - before.message_seconds) / n,
            })
        }) as Timer<'_, LbmError>))
    })
}
