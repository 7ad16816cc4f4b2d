//! Weak and strong scaling, the same way for every solver: the solver times one configuration at a time
//! ([`Setup`]), this module runs them in order on every rank, takes the slowest rank's figures and derives the
//! efficiencies and the share of the exchange that overlap hides.

use serde::Serialize;

use crate::{Comm, Op};

/// What the solver is asked to time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setup {
    /// One domain of the weak-scaling size per rank (`alone`: rank 0 only, the others wait; otherwise every
    /// rank at once, no exchange).
    WeakSingle { alone: bool },
    /// The strong-scaling domain on rank 0 alone.
    StrongSingle,
    /// The weak-scaling domain (P times the single size) across every rank.
    Weak { overlap: bool },
    /// The strong-scaling domain across every rank.
    Strong,
}

/// A solver's figures for one setup on one rank, per step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timed {
    pub seconds: f64,
    /// Updates (cells, tets) in this rank's part.
    pub updates: f64,
    pub exchange_bytes: f64,
    pub exchange_seconds: f64,
    pub message_seconds: f64,
}

/// One timed setup, the slowest rank's figures.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleRun {
    pub setup: String,
    pub ranks: usize,
    pub seconds_per_step: f64,
    /// Million updates per second per rank (cells for a lattice, tets for a mesh).
    pub mups_per_rank: f64,
    pub exchange_bytes_per_step: f64,
    /// Host seconds per step from the pack's readback to the halo's upload, including the wait for the device
    /// to finish what precedes the pack.
    pub exchange_seconds_per_step: f64,
    /// Of which sending and receiving alone.
    pub message_seconds_per_step: f64,
}

/// Weak and strong scaling on the job's ranks.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleReport {
    pub code: String,
    pub ranks: usize,
    pub transport: &'static str,
    /// Rounds each figure is the median of.
    pub rounds: usize,
    /// Whether the rounds went through every setup in turn (false: each setup's rounds back to back, built and
    /// dropped in turn, because all of them at once would not fit the memory allowed).
    pub interleaved: bool,
    /// How much memory the setups hold and why they were or were not interleaved.
    pub memory_note: String,
    pub weak_one: ScaleRun,
    pub weak_independent: ScaleRun,
    pub weak: ScaleRun,
    pub weak_no_overlap: ScaleRun,
    pub strong_one: ScaleRun,
    pub strong: ScaleRun,
    /// T(1)/T(P) at a fixed size per rank, T(1) rank 0 alone.
    pub weak_efficiency: f64,
    /// T(independent)/T(P): every rank on its own domain at once versus coupled: the exchange's share alone
    /// (ranks that share memory bandwidth or cores slow each other without any exchange).
    pub exchange_efficiency: f64,
    /// T(1)/(P·T(P)) on the fixed domain.
    pub strong_efficiency: f64,
    /// T(P) without overlap − T(independent): what the exchange costs a step when nothing hides it.
    pub exchange_cost: f64,
    /// (T(P) without overlap − T(P) with) / `exchange_cost`: the share of it overlap hides (noise can push it
    /// past 1 or below 0).
    pub overlap_hidden: f64,
}

/// Times one batch of steps of a built setup.
pub type Timer<'a, E> = Box<dyn FnMut() -> Result<Timed, E> + 'a>;

/// What the setups hold in device memory, against what the machine can give them all at once.
#[derive(Clone, Copy, Debug)]
pub struct Memory<F: Fn(Setup) -> u64> {
    /// Bytes every rank's setups may hold at once, all ranks together (on a CPU adapter device buffers are host
    /// memory, shared by the ranks of one process).
    pub budget: u64,
    /// This rank's bytes for a setup (0 where it takes no part).
    pub bytes: F,
}

/// Builds every setup once through `make` (None where this rank takes no part: the "alone" setups off rank 0),
/// then times them interleaved, `rounds` times over (so a machine whose speed drifts moves every setup alike),
/// collectively; each figure is the median over the rounds of the slowest rank's. Where all the setups together
/// would hold more than `memory.budget`, each is built, timed `rounds` times and dropped before the next (the
/// report says so: `interleaved` false): on lavapipe a 4096² block per rank and its five sibling setups held
/// 13 GB of lattices at once, and the run was killed for memory. Prints each setup's build time.
pub fn scaling<'a, E: From<crate::CommError>>(
    comm: &dyn Comm,
    code: &str,
    rounds: usize,
    memory: Memory<impl Fn(Setup) -> u64>,
    mut make: impl FnMut(Setup) -> Result<Option<Timer<'a, E>>, E>,
) -> Result<ScaleReport, E> {
    let p = comm.size();
    let setups = [
        (Setup::WeakSingle { alone: true }, "weak, one rank alone"),
        (
            Setup::WeakSingle { alone: false },
            "weak, every rank alone at once",
        ),
        (Setup::Weak { overlap: true }, "weak, across ranks, overlap"),
        (
            Setup::Weak { overlap: false },
            "weak, across ranks, no overlap",
        ),
        (Setup::StrongSingle, "strong, one rank alone"),
        (Setup::Strong, "strong, across ranks, overlap"),
    ];
    let takes_part = |setup: Setup| {
        let alone = matches!(
            setup,
            Setup::WeakSingle { alone: true } | Setup::StrongSingle
        );
        !alone || comm.rank() == 0
    };
    // Every rank's bytes for all setups, summed over ranks (exact in f64 up to 2^53 bytes).
    let mut total = [setups
        .iter()
        .filter(|(s, _)| takes_part(*s))
        .map(|(s, _)| (memory.bytes)(*s) as f64)
        .sum::<f64>()];
    comm.all_reduce_f64(&mut total, Op::Sum)?;
    // The smallest budget any rank was given: every rank must take the same branch.
    let mut budget = [memory.budget as f64];
    comm.all_reduce_f64(&mut budget, Op::Min)?;
    let interleaved = total[0] <= budget[0];
    let rounds = rounds.max(1);
    let mut build = |setup: Setup, name: &str| -> Result<Option<Timer<'a, E>>, E> {
        let t = std::time::Instant::now();
        let timer = if takes_part(setup) {
            make(setup)?
        } else {
            None
        };
        comm.barrier()?;
        if comm.rank() == 0 {
            eprintln!(
                "{code}: {name} built in {:.1} s{}",
                t.elapsed().as_secs_f64(),
                resident().map_or(String::new(), |(now, peak)| format!(
                    " (process resident {:.2} GB, peak {:.2} GB)",
                    now as f64 / 1e9,
                    peak as f64 / 1e9
                ))
            );
        }
        Ok(timer)
    };
    let time_one = |timer: &mut Option<Timer<'a, E>>| -> Result<[f64; 5], E> {
        comm.barrier()?;
        let t = match timer {
            Some(f) => f()?,
            None => Timed::default(),
        };
        let mut v = [
            t.seconds,
            t.exchange_bytes,
            t.exchange_seconds,
            t.message_seconds,
            t.updates,
        ];
        comm.all_reduce_f64(&mut v, Op::Max)?;
        Ok(v)
    };
    let mut samples: Vec<Vec<[f64; 5]>> = vec![Vec::new(); setups.len()];
    if interleaved {
        let mut timers = Vec::new();
        for (setup, name) in setups {
            timers.push(build(setup, name)?);
        }
        for _ in 0..rounds {
            for (k, timer) in timers.iter_mut().enumerate() {
                samples[k].push(time_one(timer)?);
            }
        }
    } else {
        for (k, (setup, name)) in setups.into_iter().enumerate() {
            let mut timer = build(setup, name)?;
            for _ in 0..rounds {
                samples[k].push(time_one(&mut timer)?);
            }
        }
    }
    let memory_note = if interleaved {
        format!(
            "setups interleaved ({:.2} GB of {:.2} GB allowed)",
            total[0] / 1e9,
            budget[0] / 1e9
        )
    } else {
        format!(
            "setups one after another, not interleaved: together they would hold {:.2} GB, past the {:.2} GB \
             allowed",
            total[0] / 1e9,
            budget[0] / 1e9
        )
    };
    let runs: Vec<ScaleRun> = setups
        .iter()
        .zip(&samples)
        .map(|(&(setup, name), s)| {
            let med = |j: usize| {
                let mut v: Vec<f64> = s.iter().map(|x| x[j]).collect();
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let ranks = if matches!(setup, Setup::Weak { .. } | Setup::Strong) {
                p
            } else {
                1
            };
            ScaleRun {
                setup: name.to_owned(),
                ranks,
                seconds_per_step: med(0),
                mups_per_rank: med(4) / med(0) / 1e6,
                exchange_bytes_per_step: med(1),
                exchange_seconds_per_step: med(2),
                message_seconds_per_step: med(3),
            }
        })
        .collect();
    let [
        weak_one,
        weak_independent,
        weak,
        weak_no_overlap,
        strong_one,
        strong,
    ]: [ScaleRun; 6] = runs.try_into().expect("six setups");
    let cost = weak_no_overlap.seconds_per_step - weak_independent.seconds_per_step;
    Ok(ScaleReport {
        code: code.to_owned(),
        ranks: p,
        transport: comm.kind(),
        rounds,
        interleaved,
        memory_note,
        weak_efficiency: weak_one.seconds_per_step / weak.seconds_per_step,
        exchange_efficiency: weak_independent.seconds_per_step / weak.seconds_per_step,
        strong_efficiency: strong_one.seconds_per_step / (p as f64 * strong.seconds_per_step),
        exchange_cost: cost,
        overlap_hidden: (weak_no_overlap.seconds_per_step - weak.seconds_per_step) / cost,
        weak_one,
        weak_independent,
        weak,
        weak_no_overlap,
        strong_one,
        strong,
    })
}

/// The process's resident memory now and at its peak, bytes (Linux; None elsewhere).
fn resident() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? << 10)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}
