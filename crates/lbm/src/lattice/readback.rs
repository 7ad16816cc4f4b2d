//! ρ and u read back from the device: the whole domain (gathered onto every rank, or onto rank 0 only), or each
//! rank's own cells, with the reductions over ranks a case's metrics need (exact sums, maxima), so that a
//! distributed case holds no more than its block. (A few cells' values: `Lattice::probe`.)

use bespoke_comm::{ExactSum, Op};
use bespoke_gpu::{Arg, GpuBuffer, Grid, Launch};

use super::{Lattice, NAN_F32};
use crate::error::Result;
use crate::fields::{Fields, OwnFields, vorticity_within, wrapped_lines};
use crate::kernel::{Mode, Phase, WG};

impl Lattice<'_> {
    /// ρ and u of every cell, computed on the device from the current state and read back (a distributed
    /// lattice: gathered onto every rank, each of which then holds the whole domain's fields).
    pub fn macroscopic(&mut self) -> Result<Fields> {
        let [rho, ux, uy] = self.read_macros()?;
        let cfg = self.config();
        let (nx, ny) = (cfg.nx, cfg.ny);
        if self.dist.is_some() {
            return Ok(Fields {
                nx,
                ny,
                rho: self.gather(&rho, 1)?,
                ux: self.gather(&ux, 1)?,
                uy: self.gather(&uy, 1)?,
            });
        }
        Ok(Fields {
            nx,
            ny,
            rho,
            ux,
            uy,
        })
    }

    /// [`macroscopic`](Self::macroscopic) on rank 0 (`Some`) only; the other ranks send their cells and hold
    /// nothing more (what a file written by rank 0 needs). Every rank must call it.
    pub fn macroscopic_on_root(&mut self) -> Result<Option<Fields>> {
        if self.dist.is_none() {
            return self.macroscopic().map(Some);
        }
        let own = self.own_fields()?;
        self.fields_on_root(own)
    }

    /// The whole domain's fields on rank 0 (`Some`) from every rank's `own` ([`own_fields`](Self::own_fields)
    /// at the current step), the other ranks holding nothing more: [`macroscopic_on_root`](Self::macroscopic_on_root)
    /// without reading the device again. Every rank must call it.
    pub fn fields_on_root(&self, own: OwnFields) -> Result<Option<Fields>> {
        let (nx, ny) = (own.domain[0], own.domain[1]);
        if self.dist.is_none() {
            return Ok(Some(Fields {
                nx,
                ny,
                rho: own.rho,
                ux: own.ux,
                uy: own.uy,
            }));
        }
        // Array-major, each array the rank's own cells in `own_cells`' order: what `gather_to_root` sends.
        let mut packed = own.rho;
        packed.extend_from_slice(&own.ux);
        packed.extend_from_slice(&own.uy);
        drop((own.ux, own.uy));
        Ok(self.gather_own_to_root(&packed, 3)?.map(|mut all| {
            let n = nx * ny;
            let uy = all.split_off(2 * n);
            let ux = all.split_off(n);
            // Split off, the tails keep the whole capacity: hand it back.
            all.shrink_to_fit();
            Fields {
                nx,
                ny,
                rho: all,
                ux,
                uy,
            }
        }))
    }

    /// ρ and u of this lattice's own cells: the whole domain on a single domain, the rank's block without its
    /// halo on a distributed lattice (nothing is exchanged).
    pub fn own_fields(&mut self) -> Result<OwnFields> {
        let [rho, ux, uy] = self.read_macros()?;
        let domain = [self.config().nx, self.config().ny];
        let Some(d) = &self.dist else {
            return Ok(OwnFields {
                domain,
                origin: [0, 0],
                size: domain,
                rho,
                ux,
                uy,
            });
        };
        let b = d.block;
        let (x0, y0) = b.global(b.halo[0], b.halo[1]);
        Ok(OwnFields {
            domain,
            origin: [x0, y0],
            size: [b.size[0] - 2 * b.halo[0], b.size[1] - 2 * b.halo[1]],
            rho: self.own_cells(&rho, 1),
            ux: self.own_cells(&ux, 1),
            uy: self.own_cells(&uy, 1),
        })
    }

    /// The vorticity of this lattice's own cells (`own`, from [`own_fields`](Self::own_fields)) with
    /// [`Fields::vorticity`]'s arithmetic, central differences wrapping around the domain: the same bits as the
    /// whole domain's field at these cells. A block's edge cells take u from the neighbouring ranks' edges (a
    /// row or a column each, point to point); no rank holds more than its block and those four lines. Every rank
    /// must call it.
    pub fn own_vorticity(&self, own: &OwnFields) -> Result<Vec<f32>> {
        let lines = self.edge_ghosts(own)?;
        Ok(vorticity_within(&own.ux, &own.uy, own.size, &lines))
    }

    /// The u next to `own`'s rectangle that a central difference reads: u_y of the columns left and right of
    /// it and u_x of the rows below and above it (wrapping around the domain). Where the rectangle spans the
    /// domain along an axis they are its own far edges; where a cut lies they come from the ranks across it.
    fn edge_ghosts(&self, own: &OwnFields) -> Result<[Vec<f32>; 4]> {
        use bespoke_comm::{Expect, Message};
        // Tags of the four lines, named by the edge of the sender's block they are.
        const FIRST_COLUMN: u32 = 1;
        const LAST_COLUMN: u32 = 2;
        const FIRST_ROW: u32 = 3;
        const LAST_ROW: u32 = 4;
        let ([w, h], [x0, y0], [nx, ny]) = (own.size, own.origin, own.domain);
        let column = |x: usize| -> Vec<f32> { (0..h).map(|y| own.uy[y * w + x]).collect() };
        let row = |y: usize| -> Vec<f32> { own.ux[y * w..(y + 1) * w].to_vec() };
        // Without a cut along an axis, the wrap is this rectangle's own far edge.
        let mut ghosts = wrapped_lines(&own.ux, &own.uy, own.size);
        let Some(d) = self.dist.as_deref() else {
            return Ok(ghosts);
        };
        let bits = |v: Vec<f32>| -> Vec<u32> { v.into_iter().map(f32::to_bits).collect() };
        let mut sends = Vec::new();
        let mut expects = Vec::new();
        // (which ghost, the rank across, the line sent to it, its tag, the tag of the line received, length)
        let mut lines = Vec::new();
        if w < nx {
            let (l, r) = (
                d.decomp.owner((x0 + nx - 1) % nx, y0),
                d.decomp.owner((x0 + w) % nx, y0),
            );
            lines.push((0, l, column(0), FIRST_COLUMN, LAST_COLUMN, h));
            lines.push((1, r, column(w - 1), LAST_COLUMN, FIRST_COLUMN, h));
        }
        if h < ny {
            let (b, a) = (
                d.decomp.owner(x0, (y0 + ny - 1) % ny),
                d.decomp.owner(x0, (y0 + h) % ny),
            );
            lines.push((2, b, row(0), FIRST_ROW, LAST_ROW, w));
            lines.push((3, a, row(h - 1), LAST_ROW, FIRST_ROW, w));
        }
        let mut slots = Vec::new();
        for (ghost, peer, line, tag, wanted, len) in lines {
            sends.push(Message {
                peer,
                tag,
                data: bits(line),
            });
            expects.push(Expect {
                peer,
                tag: wanted,
                len,
            });
            slots.push(ghost);
        }
        let got = d.comm.start(sends, &expects)?.wait()?;
        for (slot, words) in slots.into_iter().zip(got) {
            ghosts[slot] = words.into_iter().map(f32::from_bits).collect();
        }
        Ok(ghosts)
    }

    /// Every rank's `r` gathered: the first failure's error on every rank (naming its rank on the others), so
    /// that a step one rank could not take fails on all of them alike instead of leaving the others waiting. On
    /// a single domain, `r`.
    pub fn agree<T>(&self, r: Result<T>) -> Result<T> {
        match self.comm() {
            Some(c) => super::exchange::agree(&**c, r),
            None => r,
        }
    }

    /// The first non-finite ρ or u of the whole domain, as [`Fields::first_non_finite`] names it, from every
    /// rank's [`own_fields`](Self::own_fields) (the same answer on every rank and on a single domain).
    pub fn first_non_finite(
        &self,
        own: &OwnFields,
    ) -> Result<Option<(&'static str, usize, usize)>> {
        let mut key = [own
            .first_non_finite_key()
            .map_or(f64::INFINITY, |k| k as f64)];
        self.reduce_f64(&mut key, Op::Min)?;
        Ok(key[0].is_finite().then(|| own.decode_key(key[0] as u64)))
    }

    /// `sums` summed over the ranks, each exactly: the same bits on one rank and on any decomposition.
    pub fn sum_over_ranks(&self, sums: &mut [ExactSum]) -> Result<()> {
        if let Some(comm) = self.comm() {
            comm.all_reduce_exact(sums)?;
        }
        Ok(())
    }

    /// The largest of every rank's `v` (exact: a maximum does not depend on the order).
    pub fn max_over_ranks(&self, v: f64) -> Result<f64> {
        let mut v = [v];
        self.reduce_f64(&mut v, Op::Max)?;
        Ok(v[0])
    }

    /// Whether `holds` on every rank.
    pub fn all_ranks(&self, holds: bool) -> Result<bool> {
        let mut v = [f64::from(u8::from(holds))];
        self.reduce_f64(&mut v, Op::Min)?;
        Ok(v[0] == 1.0)
    }

    fn reduce_f64(&self, v: &mut [f64], op: Op) -> Result<()> {
        if let Some(comm) = self.comm() {
            comm.all_reduce_f64(v, op)?;
        }
        Ok(())
    }

    /// ρ, u_x, u_y of this lattice's cells (a block's halo included), read back after the macroscopic pass.
    fn read_macros(&mut self) -> Result<[Vec<f32>; 3]> {
        self.settle()?;
        if self.macros.is_none() {
            self.macros = Some(self.prepare_macros()?);
        }
        let Some((launches, out)) = &self.macros else {
            unreachable!("just prepared")
        };
        for o in out {
            // Poisoned so that a cell the pass skips shows as NaN, not as a stale value.
            self.gpu.fill(o, f32::from_bits(NAN_F32))?;
        }
        self.gpu.run(&[&launches[self.parity]])?;
        Ok(match out.as_slice() {
            [rho, ux, uy] => [self.gpu.read(rho)?, self.gpu.read(ux)?, self.gpu.read(uy)?],
            // One buffer: every cell's ρ, then every u_x, then every u_y.
            [packed] => {
                let n = self.cfg.cells();
                let mut rho = self.gpu.read(packed)?;
                let uy = rho.split_off(2 * n);
                let ux = rho.split_off(n);
                // Split off, ρ keeps the whole buffer's capacity: hand it back.
                rho.shrink_to_fit();
                [rho, ux, uy]
            }
            _ => unreachable!("one output buffer or three"),
        })
    }

    fn prepare_macros(&self) -> Result<([Launch; 2], Vec<GpuBuffer<f32>>)> {
        let n = self.cfg.cells();
        let out = if self.packed_macros {
            vec![self.gpu.alloc::<f32>(3 * n)?]
        } else {
            vec![
                self.gpu.alloc::<f32>(n)?,
                self.gpu.alloc::<f32>(n)?,
                self.gpu.alloc::<f32>(n)?,
            ]
        };
        let grid = Grid::cover(self.spec(Phase::Ab, Mode::Macro).invocations() as u64, WG)?;
        let args: Vec<Arg<'_>> = out.iter().map(|b| b.arg()).collect();
        Ok((self.prepare_reader(Mode::Macro, &args, grid)?, out))
    }
}
