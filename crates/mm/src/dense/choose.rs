//! The model's pick checked on the device (issue 36). The model ranks the space; the best-predicted configuration
//! of each register-tile shape (tm × tn) among the first [`SHORTLIST`] shapes is timed on a sample of the shape
//! ([`super::sample::sample_shape`]: C whole with K cut where its budget allows, else a block of C) in turn, and
//! the faster of the two fastest, timed again, is the pick: cached on disk per adapter, precision and shape.
//!
//! Why: on an NVIDIA H200 (2026-11-27, screened sweep at 4096³ f32) the model's predictions held within ~10 % for
//! register tiles of up to 32 accumulators, but it ranked 8×8 tiles first (predicted 45.5 TFLOP/s, measured 31.9)
//! where 4×16 and 8×16 tiles measured fastest (37.2, 36.7): what sets a 64- or 128-accumulator tile's rate there
//! (the driver's register allocation, issue slots) is not in its inputs. Among each shape's best-predicted
//! configuration the model's ranking still holds: replayed on that sweep's samples, the first six shapes hold one
//! at 0.94 of the best of 1718 (the model's own pick: 0.86); since the register bound of 2026-12-03 (1024-invocation
//! tiles bounded by the 256-invocation curve) the best itself.

use std::collections::HashSet;

use bespoke_gpu::{DiskCache, Gpu, median, remembered_json};
use serde::{Deserialize, Serialize};

use super::bench::DenseTimer;
use super::model::Machine;
use super::params::{DenseParams, TileLimits};
use super::run::GemmShape;
use super::sample::sample_shape;
use crate::dtype::DType;
use crate::error::{MmError, Result};

/// Register-tile shapes whose best-predicted configuration is timed.
pub const SHORTLIST: usize = 6;

/// GFLOP of work each shortlisted configuration's sample holds at least (and twice the workgroups that fill the
/// device: [`sample_shape`]).
pub const CHECK_GFLOP: f64 = 0.5;

/// Rounds in which every shortlisted sample runs once, in turn (each one's median over the rounds counts): on a
/// machine whose speed drifts (lavapipe on a shared VM: 1.5× within a minute) back-to-back runs of one
/// candidate and then the next ranked the drift; on 2026-11-28 they put a 512³ tiling that ran at 0.7 of the
/// model's own pick first.
const CHECK_ROUNDS: usize = 3;

/// Version of the on-disk cache of checked picks (2: a sample past a quarter of C is the whole shape,
/// `WHOLE_FRACTION`; the shortlist timed in turn; split entries' unsplit twins timed too; 3: the two fastest timed
/// again, `in_turn_with_confirmation`; 4: unrolled twins on GPUs; 5: on GPUs the samples keep C whole and cut K,
/// `sample_shape`; 6: the kernels' lanes paired, `Lanes`, so every pick timed before is of another kernel).
const CACHE_VERSION: u32 = 6;

/// The best-predicted configuration of each register-tile shape (tm × tn), in the order of their predicted
/// times, at most `k` of them; the model's own pick first.
pub fn shortlist(
    machine: &Machine,
    space: &[DenseParams],
    size: usize,
    shape: &GemmShape,
    reads_c: bool,
    k: usize,
) -> Vec<DenseParams> {
    let mut ranked: Vec<(DenseParams, f64)> = space
        .iter()
        .map(|p| (*p, machine.predict(p, size, shape, reads_c).seconds))
        .collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut shapes = HashSet::new();
    ranked
        .into_iter()
        .filter(|(p, _)| shapes.insert((p.tm, p.tn)))
        .map(|(p, _)| p)
        .take(k)
        .collect()
}

/// What the check times: the [`shortlist`] of [`SHORTLIST`] tile shapes, each split-in-K entry followed by its
/// unsplit twin where the space holds it. The model credits split-K with the occupancy its extra workgroups
/// bring; on lavapipe (2026-11-28, interleaved) it split 512³ 16 ways and 1024³ 8 ways where the same tile unsplit
/// ran 1.9× and 1.2× faster, and within a tile shape only the best-predicted entry was timed.
///
/// With `unrolled` ([`unrolled_twins`]) each of those is followed by its twin with the K steps spelled out
/// ([`DenseParams::unrolled`]): whether a driver unrolls naga's loops is not something the model's inputs say,
/// so the check measures both.
pub fn check_list(
    machine: &Machine,
    space: &[DenseParams],
    size: usize,
    shape: &GemmShape,
    reads_c: bool,
    unrolled: bool,
) -> Vec<DenseParams> {
    let mut out = Vec::new();
    let mut add = |p: DenseParams| {
        if !out.contains(&p) {
            out.push(p);
            if unrolled {
                out.push(p.unrolled());
            }
        }
    };
    for p in shortlist(machine, space, size, shape, reads_c, SHORTLIST) {
        add(p);
        let twin = DenseParams { split_k: 1, ..p };
        if p.split_k > 1 && space.contains(&twin) {
            add(twin);
        }
    }
    out
}

/// Whether the check times unrolled twins on `gpu`: on GPUs, whose compilers take a kernel in well under a second
/// and whose SGEMMs unroll the K tile; not on CPU adapters, where lavapipe's compile time grows with every load
/// the source spells out (`DenseParams::spelled_accesses`: ×`kc`; about twice the compile), the twins ran
/// 0.87–1.41× their loops at 1024³, and a quick bench's dense section with them took 1.5× as long and picked none
/// (2026-11-28, docs/perf.md).
pub fn unrolled_twins(gpu: &Gpu) -> bool {
    !gpu.is_cpu()
}

/// A checked pick and what decided it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckedPick {
    /// The fastest shortlisted configuration on its sample (the model's pick where none ran).
    pub params: DenseParams,
    /// The model's own pick (the first of the shortlist).
    pub model_pick: DenseParams,
    /// Each shortlisted configuration, its sample's shape (m, n, k) and GFLOP/s there, the median of the first
    /// rounds (None: it failed to run).
    pub timed: Vec<(DenseParams, [usize; 3], Option<f64>)>,
    /// The two fastest of `timed`, timed again: GFLOP/s, the median of those rounds alone (empty where fewer than
    /// two ran; the pick is the faster of these).
    #[serde(default)]
    pub confirmed: Vec<(DenseParams, Option<f64>)>,
    /// Whether it came from the cache (not stored).
    #[serde(skip)]
    pub cached: bool,
}

impl CheckedPick {
    /// "cached" or "checked", and whether the model's own pick stood.
    pub fn describe(&self) -> String {
        format!(
            "{}, {}",
            if self.cached { "cached" } else { "checked" },
            if self.params == self.model_pick {
                "the model's pick".to_owned()
            } else {
                format!("over the model's {}", self.model_pick.key())
            }
        )
    }
}

/// The key of a checked pick: the adapter, precision, shape (with strides) and whether C is read.
fn cache_key(gpu: &Gpu, dtype: DType, shape: &GemmShape, reads_c: bool) -> String {
    format!(
        "{}-{dtype}-{}x{}x{}-ld{}-{}-{}-c{}",
        gpu.adapter_key(),
        shape.m,
        shape.n,
        shape.k,
        shape.lda,
        shape.ldb,
        shape.ldc,
        u8::from(reads_c)
    )
}

/// The checked pick for `shape` on `gpu`: from the user's cache, else timed now and cached (never cached when
/// no shortlisted configuration ran).
pub fn checked_pick(
    gpu: &Gpu,
    machine: &Machine,
    dtype: DType,
    shape: &GemmShape,
    reads_c: bool,
) -> Result<CheckedPick> {
    checked_pick_in(gpu, machine, dtype, shape, reads_c, user_cache().as_ref())
}

/// The user's cache of checked picks (None where there is no cache folder).
fn user_cache() -> Option<DiskCache> {
    DiskCache::user("dense-pick", CACHE_VERSION)
}

/// [`checked_pick`] with the decisions kept in `cache` (None: timed every time).
pub fn checked_pick_in(
    gpu: &Gpu,
    machine: &Machine,
    dtype: DType,
    shape: &GemmShape,
    reads_c: bool,
    cache: Option<&DiskCache>,
) -> Result<CheckedPick> {
    pick_or_time(gpu, machine, dtype, shape, reads_c, cache, None)
}

/// [`checked_pick`] for `timer`'s shape and precision, timing the shortlist on `timer`'s operands where the pick is
/// not cached: a caller that times the pick after (`mm dense-bench`) builds A, B and C once, not twice.
pub fn checked_pick_on(
    gpu: &Gpu,
    machine: &Machine,
    timer: &DenseTimer,
    reads_c: bool,
) -> Result<CheckedPick> {
    pick_or_time(
        gpu,
        machine,
        timer.dtype(),
        &timer.shape(),
        reads_c,
        user_cache().as_ref(),
        Some(timer),
    )
}

fn pick_or_time(
    gpu: &Gpu,
    machine: &Machine,
    dtype: DType,
    shape: &GemmShape,
    reads_c: bool,
    cache: Option<&DiskCache>,
    timer: Option<&DenseTimer>,
) -> Result<CheckedPick> {
    shape.check()?;
    let limits = TileLimits::of(gpu);
    let space = machine.shape_space(dtype, &limits, shape);
    let list = check_list(
        machine,
        &space,
        dtype.size(),
        shape,
        reads_c,
        unrolled_twins(gpu),
    );
    let Some(&model_pick) = list.first() else {
        return Err(MmError::Shape(format!(
            "no legal tiling for {shape} on this device"
        )));
    };
    // A cached pick stands while the check would still time it (a new model or device limit times again).
    let usable = |c: &CheckedPick| list.contains(&c.params) && c.model_pick == model_pick;
    let (mut pick, cached) = remembered_json(
        cache,
        &cache_key(gpu, dtype, shape, reads_c),
        "the dense GEMM's checked pick",
        usable,
        || match timer {
            Some(t) => time_shortlist(gpu, machine, t, &list),
            None => time_shortlist(gpu, machine, &DenseTimer::new(gpu, dtype, *shape)?, &list),
        },
    )?;
    pick.cached = cached;
    Ok(pick)
}

/// Times each of `list` on its sample, in turn over [`CHECK_ROUNDS`] rounds, then the two fastest again
/// ([`in_turn_with_confirmation`]); the faster of those two is the pick. An error only where the device was lost or
/// none ran. `dense-sweep` replays the check with it on the sweep's own list.
pub(crate) fn time_shortlist(
    gpu: &Gpu,
    machine: &Machine,
    timer: &DenseTimer,
    list: &[DenseParams],
) -> Result<CheckedPick> {
    let shape = &timer.shape();
    timer.compile(gpu, timer.dtype(), list);
    let subs: Vec<GemmShape> = list
        .iter()
        .map(|p| sample_shape(machine, p, shape, CHECK_GFLOP))
        .collect();
    let InTurn {
        best,
        first,
        again,
        refused,
    } = in_turn_with_confirmation(list.len(), |i| timer.try_time_sub(gpu, list[i], subs[i], 1))?;
    let errors: Vec<String> = list
        .iter()
        .zip(&refused)
        .filter_map(|(p, e)| e.as_ref().map(|e| format!("{}: {e}", p.key())))
        .collect();
    let timed: Vec<(DenseParams, [usize; 3], Option<f64>)> = list
        .iter()
        .zip(&subs)
        .zip(&first)
        .map(|((p, sub), g)| (*p, [sub.m, sub.n, sub.k], *g))
        .collect();
    let confirmed = again.iter().map(|&(i, g)| (list[i], g)).collect();
    let best = best.map(|i| list[i]).ok_or_else(|| {
        MmError::Shape(format!(
            "no shortlisted tiling of {shape} ran: {}",
            errors.join("; ")
        ))
    })?;
    Ok(CheckedPick {
        params: best,
        model_pick: list[0],
        timed,
        confirmed,
        cached: false,
    })
}

/// One run of a candidate: its GFLOP/s, or why it cannot run (it is not tried again); `Err` where the device was
/// lost.
type RunResult = Result<std::result::Result<f64, String>>;

/// What [`in_turn_with_confirmation`] found.
#[derive(Debug)]
struct InTurn {
    /// The winner (None where none ran).
    best: Option<usize>,
    /// Each candidate's median over the first rounds.
    first: Vec<Option<f64>>,
    /// The two fastest of those and their medians over the second rounds alone (empty where fewer than two ran).
    again: Vec<(usize, Option<f64>)>,
    /// Why each refused candidate could not run.
    refused: Vec<Option<String>>,
}

/// `n` candidates timed in turn, one run each per round, [`CHECK_ROUNDS`] rounds; then the two with the fastest
/// medians again, in turn, [`CHECK_ROUNDS`] more rounds, and the faster of the two **on those rounds alone** wins.
///
/// Why the second rounds: on lavapipe (2026-11-28, `bespoke bench --section dense`) the f64 96×100 000×64 check
/// ranked t8x16v4-w4x16-k4-s1-b2 first at 4.08 GFLOP/s over t16x32v4-w8x8-k4-s1-b2's 3.46, where interleaved
/// reruns and two later checks put it at 2.6–2.8 against 3.4: a burst of the VM's speed in one check's window.
/// Timed again apart from that window, a lucky candidate meets its own rate; a GPU's clock ramp is such a window
/// too. The cost is 2 × [`CHECK_ROUNDS`] more sample runs.
fn in_turn_with_confirmation(n: usize, mut run: impl FnMut(usize) -> RunResult) -> Result<InTurn> {
    let mut refused: Vec<Option<String>> = vec![None; n];
    let everyone: Vec<usize> = (0..n).collect();
    let first = rounds(&everyone, &mut refused, &mut run)?;
    let mut ranked: Vec<(usize, f64)> = first
        .iter()
        .enumerate()
        .filter_map(|(i, g)| g.map(|g| (i, g)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    let (best, again) = match ranked.as_slice() {
        [] => (None, Vec::new()),
        [(only, _)] => (Some(*only), Vec::new()),
        [(a, _), (b, _), ..] => {
            let (a, b) = (*a, *b);
            let g = rounds(&[a, b], &mut refused, &mut run)?;
            let best = match (g[a], g[b]) {
                (Some(ga), Some(gb)) => {
                    if gb > ga {
                        b
                    } else {
                        a
                    }
                }
                (None, Some(_)) => b,
                _ => a,
            };
            (Some(best), vec![(a, g[a]), (b, g[b])])
        }
    };
    Ok(InTurn {
        best,
        first,
        again,
        refused,
    })
}

/// [`CHECK_ROUNDS`] rounds of one run of each of `who` in turn (skipping the refused); each one's median over these
/// rounds (indexed like `refused`, None for those not in `who` or refused).
fn rounds(
    who: &[usize],
    refused: &mut [Option<String>],
    run: &mut dyn FnMut(usize) -> RunResult,
) -> Result<Vec<Option<f64>>> {
    let mut these: Vec<Vec<f64>> = vec![Vec::new(); refused.len()];
    for _ in 0..CHECK_ROUNDS {
        for &i in who {
            if refused[i].is_some() {
                continue;
            }
            match run(i)? {
                Ok(g) => these[i].push(g),
                Err(e) => refused[i] = Some(e),
            }
        }
    }
    Ok(these
        .iter()
        .map(|g| (!g.is_empty()).then(|| median(g)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of candidates that read `rates[i][k]` on their k-th run (the last one repeated past the end).
    fn runner(rates: Vec<Vec<f64>>) -> impl FnMut(usize) -> RunResult {
        let mut count = vec![0usize; rates.len()];
        move |i| {
            let r = &rates[i];
            if r.is_empty() {
                return Ok(Err("refused".into()));
            }
            let g = r[count[i].min(r.len() - 1)];
            count[i] += 1;
            Ok(Ok(g))
        }
    }

    #[test]
    fn a_candidate_lucky_in_the_first_rounds_meets_its_rate_in_the_second() {
        // Candidate 1 ran in a fast window (4.1 in two of three first rounds), its own rate is 2.7; candidate 0
        // reads 3.4 throughout, candidate 2 is slow.
        let mut run = runner(vec![vec![3.4], vec![4.1, 4.0, 2.7, 2.7], vec![2.0]]);
        let t = in_turn_with_confirmation(3, &mut run).unwrap();
        assert_eq!(t.best, Some(0));
        assert!(t.refused.iter().all(Option::is_none));
        // The first rounds put candidate 1 first; the second rounds, of it and candidate 0, alone decide.
        assert_eq!(t.first, vec![Some(3.4), Some(4.0), Some(2.0)]);
        assert_eq!(t.again, vec![(1, Some(2.7)), (0, Some(3.4))]);
    }

    #[test]
    fn a_candidate_faster_in_both_windows_wins_and_refusals_are_kept() {
        let mut run = runner(vec![vec![], vec![3.0], vec![3.3, 3.2, 3.4, 3.3]]);
        let t = in_turn_with_confirmation(3, &mut run).unwrap();
        assert_eq!(t.best, Some(2));
        assert_eq!(t.refused[0].as_deref(), Some("refused"));
        assert_eq!(t.first[0], None);
        assert_eq!(t.again, vec![(2, Some(3.3)), (1, Some(3.0))]);
        // One candidate alone ran: it wins without more rounds; none ran: no winner.
        let best = in_turn_with_confirmation(2, runner(vec![vec![], vec![1.0]]))
            .unwrap()
            .best;
        assert_eq!(best, Some(1));
        let none = in_turn_with_confirmation(2, runner(vec![vec![], vec![]])).unwrap();
        assert_eq!((none.best, none.first), (None, vec![None, None]));
        assert!(none.again.is_empty());
    }

    #[test]
    fn the_second_rounds_time_only_the_two_fastest() {
        let mut calls = Vec::new();
        let rates = [1.0, 3.0, 2.0, 2.5];
        let best = in_turn_with_confirmation(4, |i| {
            calls.push(i);
            Ok(Ok(rates[i]))
        })
        .unwrap()
        .best;
        assert_eq!(best, Some(1));
        let first = 4 * CHECK_ROUNDS;
        assert_eq!(calls.len(), first + 2 * CHECK_ROUNDS);
        assert!(calls[first..].iter().all(|&i| i == 1 || i == 3));
    }
}
