//! The stepping loop every case shares: steps in batches, timed apart from the set-up, with progress, frames,
//! periodic checkpoints, a stop on SIGINT/SIGTERM, and the steady-state test.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use bespoke_comm::ExactSum;

use super::start::meta;
use super::{CaseOptions, CaseRun, Frames, Progress, VtkSeries, is_steady, max_change};
use crate::error::{LbmError, Result};
use crate::fields::OwnFields;
use crate::lattice::Lattice;

/// Steps a lattice in chunks, timing only the stepping and reporting progress.
pub(super) struct Runner<'a, 'g> {
    pub(super) case: &'static str,
    pub(super) lat: Lattice<'g>,
    /// The characteristic velocity, reported and checkpointed with the run.
    pub(super) u: f64,
    pub(super) seconds: f64,
    /// Steps done, of the run's total count (the lattice's: a resumed run starts at its checkpoint's step).
    pub(super) done: u64,
    /// Where this invocation started counting (`done` at the start).
    pub(super) started: u64,
    pub(super) planned: u64,
    pub(super) progress: Progress<'a>,
    pub(super) frames: Option<Frames>,
    pub(super) vtk_series: Option<VtkSeries>,
    pub(super) checkpoint: Option<PathBuf>,
    pub(super) every: Option<u64>,
    pub(super) stop: Option<Arc<AtomicBool>>,
}

impl<'a, 'g> Runner<'a, 'g> {
    /// A runner to `planned` steps in all, from the lattice's step (0, or a resumed checkpoint's, which must lie
    /// before `planned`).
    pub(super) fn new(
        case: &'static str,
        lat: Lattice<'g>,
        u: f64,
        planned: u64,
        progress: Progress<'a>,
        opts: &CaseOptions,
    ) -> Result<Self> {
        let done = lat.steps_done();
        if done >= planned {
            let what = match opts.steps {
                Some(_) => format!("--steps {planned}"),
                None => format!("the case's default of {planned} steps"),
            };
            let at = opts.resume.as_ref().map_or(String::new(), |p| {
                format!(" (the checkpoint {})", p.display())
            });
            return Err(LbmError::param(
                "steps",
                planned,
                format!(
                    "the run is at step {done}{at}, at or past the end it asks for ({what} in all, counted \
                     from the start): nothing remains; ask for more steps in all"
                ),
            ));
        }
        progress(done, planned);
        Ok(Self {
            case,
            checkpoint: opts.checkpoint.clone(),
            every: opts
                .checkpoint_every
                .filter(|&e| e > 0 && opts.checkpoint.is_some()),
            stop: opts.stop.clone(),
            lat,
            u,
            seconds: 0.0,
            done,
            started: done,
            planned,
            progress,
            frames: opts.frames.clone().filter(|f| f.every > 0),
            vtk_series: opts.vtk_series.clone().filter(|v| v.every > 0),
        })
    }

    /// Runs until `target` steps in all (none if the run is there already).
    pub(super) fn run_to(&mut self, target: u64) -> Result<()> {
        self.run(target.saturating_sub(self.done))
    }
    pub(super) fn run(&mut self, n: u64) -> Result<()> {
        let chunk = 2000;
        let mut left = n;
        while left > 0 {
            let mut k = left.min(chunk);
            if let Some(f) = &self.frames {
                // Stop at the next frame boundary.
                k = k.min(f.every - self.done % f.every);
            }
            if let Some(v) = &self.vtk_series {
                k = k.min(v.every - self.done % v.every);
            }
            if let Some(e) = self.every {
                // And at the next checkpoint.
                k = k.min(e - self.lat.steps_done() % e);
            }
            let t = Instant::now();
            self.lat.step(k)?;
            self.seconds += t.elapsed().as_secs_f64();
            self.done += k;
            left -= k;
            // A frame's fields are read from the device once, checked, then written (each read is a pass over
            // the lattice and a copy to the host: on a GPU the cost of tens of steps).
            let png = self
                .frames
                .clone()
                .filter(|f| self.done.is_multiple_of(f.every));
            let vtk = self
                .vtk_series
                .clone()
                .filter(|v| self.done.is_multiple_of(v.every));
            if png.is_some() || vtk.is_some() {
                let own = self.fields()?;
                let png_path = png.as_ref().map(|f| {
                    f.dir
                        .join(format!("frame_{:08}.png", self.lat.steps_done()))
                });
                let frame = vtk
                    .as_ref()
                    .map(|v| crate::output::series_frame_path(&self.lat, &v.path));
                crate::output::write_outputs(
                    &mut self.lat,
                    own,
                    png_path.as_deref().zip(png.map(|f| f.quantity)),
                    frame.as_deref(),
                )?;
                if let Some(v) = vtk {
                    crate::output::write_series_collection(&self.lat, &v.path)?;
                }
            }
            if let (Some(e), Some(path)) = (self.every, self.checkpoint.clone())
                && self.lat.steps_done().is_multiple_of(e)
            {
                self.checkpoint(&path)?;
            }
            if self.stop_requested()? {
                let saved = match self.checkpoint.clone() {
                    Some(path) => {
                        self.checkpoint(&path)?;
                        Some(path.display().to_string())
                    }
                    None => None,
                };
                return Err(LbmError::Interrupted {
                    step: self.lat.steps_done(),
                    saved,
                });
            }
            (self.progress)(self.done, self.planned.max(self.done));
        }
        Ok(())
    }

    /// Saves the state to `path`. A state that has diverged is not written (the last good checkpoint stays:
    /// [`LbmError::DivergedCheckpoint`], on every rank alike), and the run then fails naming the step and the
    /// cell, as its fields check would.
    fn checkpoint(&mut self, path: &std::path::Path) -> Result<()> {
        match self.lat.checkpoint(path, &meta(self.case, self.u)) {
            Err(e @ LbmError::DivergedCheckpoint { .. }) => {
                self.fields()?;
                Err(e)
            }
            other => other,
        }
    }

    /// Whether a stop was asked for, on any rank (all ranks then stop after the same batch).
    pub(super) fn stop_requested(&self) -> Result<bool> {
        let Some(flag) = &self.stop else {
            return Ok(false);
        };
        let mut v = [f64::from(u8::from(flag.load(Ordering::Relaxed)))];
        if let Some(comm) = self.lat.comm() {
            comm.all_reduce_f64(&mut v, bespoke_comm::Op::Max)?;
        }
        Ok(v[0] > 0.0)
    }
    /// Steps in chunks of `interval` until one chunk changes u_x by less than `tol`·`scale` everywhere (or by no
    /// more than [`STEADY_ULPS`] of the value's f32 resolution: [`is_steady`]), or until `max_steps` in all.
    /// Returns whether it became steady and the last chunk's largest change / `scale`.
    pub(super) fn run_to_steady(
        &mut self,
        max_steps: u64,
        interval: u64,
        scale: f64,
        tol: f64,
    ) -> Result<(bool, f64)> {
        // Each rank compares its own cells; the ranks agree on the largest change and on whether all are steady.
        let mut prev = self.fields()?.ux;
        let mut change = f64::INFINITY;
        while self.done < max_steps {
            let chunk = interval.min(max_steps - self.done);
            self.run(chunk)?;
            let now = self.fields()?.ux;
            change = self.lat.max_over_ranks(max_change(&now, &prev, scale))?;
            // Only a whole interval is judged: the change over a shorter last chunk is smaller for being shorter
            // (`--steps 10` on a channel whose interval is 5000 read as steady after 10 steps from rest).
            let steady = self.lat.all_ranks(is_steady(&now, &prev, tol * scale))?;
            if chunk == interval && steady {
                return Ok((true, change));
            }
            prev = now;
        }
        Ok((false, change))
    }

    /// Reads ρ and u of this rank's own cells back, failing (on every rank) if the run has diverged anywhere.
    pub(super) fn fields(&mut self) -> Result<OwnFields> {
        let f = self.lat.own_fields()?;
        if let Some((what, x, y)) = self.lat.first_non_finite(&f)? {
            return Err(LbmError::Diverged {
                step: self.lat.steps_done(),
                what,
                x,
                y,
            });
        }
        Ok(f)
    }

    /// The mean along x of `v` (one of `f`'s arrays) on every row of the domain, from every rank's own cells:
    /// each row summed exactly, so one rank and any decomposition give the same bits.
    pub(super) fn row_means(&self, f: &OwnFields, v: &[f32]) -> Result<Vec<f64>> {
        let mut rows = vec![ExactSum::new(); f.domain[1]];
        for (_, y, k) in f.cells() {
            rows[y].add(f64::from(v[k]));
        }
        self.lat.sum_over_ranks(&mut rows)?;
        Ok(rows
            .iter()
            .map(|s| s.value() / f.domain[0] as f64)
            .collect())
    }

    /// Σ `term(k)` over every rank's own cells k of `f`, exact (the same bits on any decomposition).
    pub(super) fn sum_cells(&self, f: &OwnFields, term: impl Fn(usize) -> f64) -> Result<f64> {
        let mut s = [ExactSum::new()];
        f.cells().for_each(|(_, _, k)| s[0].add(term(k)));
        self.lat.sum_over_ranks(&mut s)?;
        Ok(s[0].value())
    }

    pub(super) fn finish(
        mut self,
        case: &'static str,
        metrics: BTreeMap<String, f64>,
        notes: Vec<String>,
    ) -> Result<CaseRun<'g>> {
        self.fields()?;
        let mut notes = notes;
        notes.extend(self.lat.warnings().iter().cloned());
        Ok(CaseRun {
            case,
            u: self.u,
            steps: self.done - self.started,
            seconds: self.seconds,
            lattice: self.lat,
            metrics,
            notes,
        })
    }
}
