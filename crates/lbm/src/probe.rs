//! Probes: a few cells evaluated on the device on demand — ρ and u, and the force the fluid exerts on chosen
//! wall links by momentum exchange — so a run can sample them every few steps without reading the lattice back.

use bespoke_gpu::{GpuBuffer, Grid, Launch};

use crate::d2q9::OPP;
use crate::error::{LbmError, Result};
use crate::kernel::{Mode, PROBE_VALUES, WG};
use crate::lattice::{Lattice, NAN_F32};

/// Cells and links a lattice evaluates on the device (`Lattice::probe`); valid for the lattice that made it.
#[derive(Debug)]
pub struct Probe {
    lattice: u64,
    points: usize,
    entries: usize,
    /// (cell, link mask) per entry: the requested points first (no links), then the cells with links.
    _input: GpuBuffer<u32>,
    out: GpuBuffer<f32>,
    launches: [Launch; 2],
}

/// What a probe read.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeValues {
    /// ρ and u at each requested point, in order, as the next collision sees them.
    pub points: Vec<(f64, [f64; 2])>,
    /// Force on the probe's links, Σ c_d (f_d* + f_d̄) over links (x, d) with f_d* the population x sent towards
    /// the wall and f_d̄ the one the wall returns in the next step (plain, moving or interpolated bounce-back as
    /// the step computes it); lattice units.
    pub force: [f64; 2],
}

impl Probe {
    /// Requested points.
    pub fn points(&self) -> usize {
        self.points
    }
}

impl Lattice<'_> {
    /// A probe of ρ and u at `points` and of the force on `links`, each (x, y, d) a link from non-solid cell
    /// (x, y) along direction d (1..=8) into a solid cell (for an obstacle: every such link whose solid end is
    /// part of it). Links repeated count once.
    pub fn probe(
        &self,
        points: &[(usize, usize)],
        links: &[(usize, usize, usize)],
    ) -> Result<Probe> {
        let flags = self.flags();
        let (nx, ny) = (flags.nx(), flags.ny());
        for &(x, y) in points {
            if x >= nx || y >= ny {
                return Err(LbmError::param(
                    "probe point",
                    format!("({x}, {y})"),
                    format!("outside the {nx}x{ny} lattice"),
                ));
            }
        }
        // Link masks per cell, bit ī for a link along d (the step pulls ī from the solid cell).
        let mut masks = std::collections::BTreeMap::<usize, u32>::new();
        for &(x, y, d) in links {
            let bad = |why: &str| {
                LbmError::param("probe link", format!("({x}, {y}, {d})"), why.to_owned())
            };
            if x >= nx || y >= ny {
                return Err(bad("starts outside the lattice"));
            }
            if !(1..=8).contains(&d) {
                return Err(bad("direction must be 1..=8"));
            }
            if flags.get(x, y).is_solid() {
                return Err(bad("starts in a solid cell"));
            }
            let (xn, yn) = flags.neighbour(x, y, d);
            if !flags.get(xn, yn).is_solid() {
                return Err(bad("does not end in a solid cell"));
            }
            *masks.entry(y * nx + x).or_default() |= 1 << OPP[d];
        }
        let entries: Vec<u32> = points
            .iter()
            .map(|&(x, y)| [(y * nx + x) as u32, 0])
            .chain(masks.iter().map(|(&c, &m)| [c as u32, m]))
            .flatten()
            .collect();
        let count = entries.len() / 2;
        if count == 0 {
            return Err(LbmError::param(
                "probe",
                "empty",
                "give at least one point or link",
            ));
        }
        let gpu = self.gpu();
        let input = gpu.upload(&entries)?;
        let out = gpu.alloc::<f32>(count * PROBE_VALUES)?;
        let launches = self.prepare_reader(
            Mode::Probe,
            &[input.arg(), out.arg()],
            Grid::cover(count as u64, WG)?,
        )?;
        Ok(Probe {
            lattice: self.id(),
            points: points.len(),
            entries: count,
            _input: input,
            out,
            launches,
        })
    }

    /// Runs `probe` on the current state and reads its few values back.
    pub fn read_probe(&self, probe: &Probe) -> Result<ProbeValues> {
        if probe.lattice != self.id() {
            return Err(LbmError::State(
                "this probe was made for another lattice".into(),
            ));
        }
        let gpu = self.gpu();
        // Poisoned so that an entry the kernel skips shows as NaN.
        gpu.fill(&probe.out, f32::from_bits(NAN_F32))?;
        gpu.run(&[&probe.launches[self.parity()]])?;
        let v = gpu.read(&probe.out)?;
        let at = |k: usize, j: usize| f64::from(v[k * PROBE_VALUES + j]);
        let points = (0..probe.points)
            .map(|k| (at(k, 0), [at(k, 1), at(k, 2)]))
            .collect();
        let force =
            (probe.points..probe.entries).fold([0.0; 2], |f, k| [f[0] + at(k, 3), f[1] + at(k, 4)]);
        Ok(ProbeValues { points, force })
    }
}
