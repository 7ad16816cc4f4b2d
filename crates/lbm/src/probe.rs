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
    /// The entries in this lattice's cells (on a rank of a distributed lattice: those it owns; None if none).
    local: Option<LocalProbe>,
}

#[derive(Debug)]
struct LocalProbe {
    /// Per entry: the index of the requested point, or for a cell with links its cell index in the domain.
    ids: Vec<usize>,
    /// Entries that are points (they come first).
    points: usize,
    /// (cell, link mask) per entry, then the kernel's [`PROBE_VALUES`] f32 (as bits) per entry: one binding.
    buffer: GpuBuffer<u32>,
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
    /// Entries evaluated by this lattice (on a rank of a distributed lattice: in its own cells).
    pub fn local_entries(&self) -> usize {
        self.local.as_ref().map_or(0, |l| l.ids.len())
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
        if points.is_empty() && masks.is_empty() {
            return Err(LbmError::param(
                "probe",
                "empty",
                "give at least one point or link",
            ));
        }
        // This lattice's entries: (id, local cell, mask); on a block, the cells it owns.
        let here = |x: usize, y: usize| -> Option<usize> {
            match &self.dist {
                None => Some(y * nx + x),
                Some(d) => {
                    let (lx, ly) = d.block.local(x, y)?;
                    d.block.owns(lx, ly).then_some(ly * d.block.size[0] + lx)
                }
            }
        };
        let mut ids = Vec::new();
        let mut entries = Vec::new();
        for (k, &(x, y)) in points.iter().enumerate() {
            if let Some(c) = here(x, y) {
                ids.push(k);
                entries.extend([c as u32, 0]);
            }
        }
        let local_points = ids.len();
        for (&c, &m) in &masks {
            if let Some(lc) = here(c % nx, c / nx) {
                ids.push(c);
                entries.extend([lc as u32, m]);
            }
        }
        let count = ids.len();
        let local = if count == 0 {
            None
        } else {
            let gpu = self.gpu();
            // The values' words poisoned, so that an entry the kernel skips shows as NaN.
            entries.resize(count * (2 + PROBE_VALUES), NAN_F32);
            let buffer = gpu.upload(&entries)?;
            let launches =
                self.prepare_reader(Mode::Probe, &[buffer.arg()], Grid::cover(count as u64, WG)?)?;
            Some(LocalProbe {
                ids,
                points: local_points,
                buffer,
                launches,
            })
        };
        Ok(Probe {
            lattice: self.id(),
            points: points.len(),
            local,
        })
    }

    /// Runs `probe` on the current state and reads its few values back (on a distributed lattice: on every rank,
    /// the whole probe's values, the force summed in the same order as on one domain).
    pub fn read_probe(&self, probe: &Probe) -> Result<ProbeValues> {
        if probe.lattice != self.id() {
            return Err(LbmError::State(
                "this probe was made for another lattice".into(),
            ));
        }
        self.settle()?;
        // (is a point, id, five values) per entry.
        let mut rows: Vec<(u32, u64, [f32; PROBE_VALUES])> = Vec::new();
        if let Some(l) = &probe.local {
            let gpu = self.gpu();
            let count = l.ids.len();
            // Poisoned again, so that an entry the kernel skips shows as NaN rather than an earlier reading.
            gpu.write(&l.buffer, 2 * count, &vec![NAN_F32; count * PROBE_VALUES])?;
            gpu.run(&[&l.launches[self.parity()]])?;
            let v = gpu.read_range(&l.buffer, 2 * count..count * (2 + PROBE_VALUES))?;
            for (k, &id) in l.ids.iter().enumerate() {
                let mut vals = [0.0; PROBE_VALUES];
                for (j, x) in vals.iter_mut().enumerate() {
                    *x = f32::from_bits(v[k * PROBE_VALUES + j]);
                }
                rows.push((u32::from(k < l.points), id as u64, vals));
            }
        }
        if let Some(comm) = self.comm() {
            let mine: Vec<u32> = rows
                .iter()
                .flat_map(|(p, id, v)| {
                    [*p, *id as u32, (*id >> 32) as u32]
                        .into_iter()
                        .chain(v.iter().map(|x| x.to_bits()))
                })
                .collect();
            let all = comm.all_gather_bytes(bespoke_gpu::bytemuck::cast_slice(&mine))?;
            rows.clear();
            for bytes in all {
                let w: Vec<u32> = bespoke_gpu::bytemuck::pod_collect_to_vec(&bytes);
                for r in w.chunks_exact(3 + PROBE_VALUES) {
                    let mut vals = [0.0; PROBE_VALUES];
                    for (j, v) in vals.iter_mut().enumerate() {
                        *v = f32::from_bits(r[3 + j]);
                    }
                    rows.push((r[0], u64::from(r[1]) | (u64::from(r[2]) << 32), vals));
                }
            }
        }
        let mut points = vec![(f64::NAN, [f64::NAN; 2]); probe.points];
        let mut forces: Vec<(u64, [f32; PROBE_VALUES])> = Vec::new();
        for (is_point, id, v) in rows {
            if is_point == 1 {
                points[id as usize] = (f64::from(v[0]), [f64::from(v[1]), f64::from(v[2])]);
            } else {
                forces.push((id, v));
            }
        }
        // In cell order, as one domain sums them.
        forces.sort_by_key(|f| f.0);
        let force = forces.iter().fold([0.0; 2], |f, (_, v)| {
            [f[0] + f64::from(v[3]), f[1] + f64::from(v[4])]
        });
        Ok(ProbeValues { points, force })
    }
}
