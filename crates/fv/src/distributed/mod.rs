//! Diffusion across ranks: a METIS partition of the tets (computed on rank 0), each rank its
//! own tets (interior first, then those with a neighbour on another rank, each group in the in-rank ordering
//! asked for) plus a ghost layer of its neighbours' tets, and before every step the ghost values moved from
//! their owners: packed on the device, read back, exchanged through [`Comm`], uploaded and unpacked.
//!
//! A rank's operator rows are the whole operator's rows (same values, same slot order, indices renumbered), and
//! every rank stores x less the whole domain's shift, so each tet's update is the single-domain update bit for
//! bit; ghost rows are identity rows (no coefficients) that the exchange overwrites.
//!
//! The host side is `part.rs` and `slice.rs`: rank 0 alone may hold the whole mesh ([`RankPart::distribute`],
//! [`DistDiffusion::set_x_from_root`], [`DistDiffusion::x_on_root`]), the other ranks their part.

mod layout;
mod part;
mod slice;

use std::rc::Rc;
use std::time::Instant;

use bespoke_comm::{Comm, ExactSum, Expect, Message};
use bespoke_gpu::{Gpu, GpuBuffer, Grid, Kernel, Launch};

use crate::diffusion::{Diffusion, Real};
use crate::error::{FvError, Result};
use crate::kernel::{DType, KernelKind, Layout, WG};
use crate::operator::{Boundary, Operator};
use crate::ordering::OrderingKind;
use slice::{FROM_ROOT_PART, blame_root, from_root, root_failed};

pub use layout::{rank_layout, rank_layout_for, rank_layout_for_tets, rank_layout_in};
pub use part::{RankPart, check_ranks, partition};

/// Halo traffic so far on this rank.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct FvExchangeStats {
    pub exchanges: u64,
    pub bytes_sent: u64,
    /// Host seconds from the pack's readback to the ghosts' upload.
    pub seconds: f64,
    /// Of those, sending and receiving alone.
    pub message_seconds: f64,
}

/// How each rank steps its part.
#[derive(Clone, Copy, Debug)]
pub struct RankSetup {
    /// The in-rank ordering of its own tets.
    pub ordering: OrderingKind,
    pub kind: KernelKind,
    pub layout: Layout,
    pub dt: f64,
    /// Update the interior tets while the ghost values travel, then the rest (the gather kernel, in the four-tet
    /// layouts by whole groups of four, `kernel::quads_of`; the block-cached kernel updates every tet after the
    /// exchange).
    pub overlap: bool,
}

/// One rank's part of a distributed diffusion.
#[derive(Debug)]
pub struct DistDiffusion<'g, T: Real> {
    comm: Rc<dyn Comm>,
    local: Diffusion<'g, T>,
    /// The host side: own tets, ghosts, exchange lists (shared with other setups of the same part).
    part: Rc<RankPart>,
    /// Pack and unpack launches per parity of the x buffers, and their exchange buffers.
    pack: [Launch; 2],
    unpack: [Launch; 2],
    send_buf: GpuBuffer<u32>,
    recv_buf: GpuBuffer<u32>,
    _entries: [GpuBuffer<u32>; 2],
    /// Interior-only and remaining-rows step launches per parity, when overlapping.
    split: Option<([Launch; 2], [Launch; 2])>,
    stats: FvExchangeStats,
}

/// Words of one value of type `T` in x.
fn words_of<T: Real>() -> usize {
    if T::DTYPE == DType::F64 { 2 } else { 1 }
}

fn halo_wgsl(unpack: bool) -> String {
    let body = if unpack {
        "x[ent[k]] = buf[k];"
    } else {
        "buf[k] = x[ent[k]];"
    };
    format!(
        "{grid}// bespoke-fv halo {what}: x words that cross a cut.
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<storage, read> ent: array<u32>;
@group(0) @binding(2) var<storage, {access}> buf: array<u32>;

@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let k = bespoke_workgroup_linear(wid) * {WG}u + lid;
    if k >= arrayLength(&ent) {{ return; }}
    {body}
}}
",
        grid = bespoke_gpu::GRID_WGSL,
        what = if unpack { "unpack" } else { "pack" },
        access = if unpack { "read" } else { "read_write" },
    )
}

impl<'g, T: Real> DistDiffusion<'g, T> {
    /// This rank's part of `op` (the whole operator, the same on every rank) partitioned by `part` (every tet's
    /// rank), its own tets in the setup's ordering (interior first), on `gpu`: [`RankPart::new`], then
    /// [`DistDiffusion::from_part`].
    pub fn new(
        gpu: &'g Gpu,
        comm: Rc<dyn Comm>,
        op: &Operator,
        part: &[u32],
        setup: RankSetup,
    ) -> Result<Self> {
        // The whole operator's step bound first, so every rank refuses a bad Δt before the host work.
        crate::diffusion::check_dt(op, setup.dt)?;
        let part = RankPart::new(comm.rank(), comm.size(), op, part, setup.ordering)?;
        Self::from_part(gpu, comm, Rc::new(part), setup)
    }

    /// Steps `part` on `gpu`; the part's rank, job size and in-rank ordering must be `comm`'s and `setup`'s.
    pub fn from_part(
        gpu: &'g Gpu,
        comm: Rc<dyn Comm>,
        part: Rc<RankPart>,
        setup: RankSetup,
    ) -> Result<Self> {
        let RankSetup {
            ordering,
            kind,
            layout,
            dt,
            overlap,
        } = setup;
        if (part.rank, part.ranks) != (comm.rank(), comm.size()) {
            return Err(FvError::Shape(format!(
                "the part of rank {} of {} on rank {} of {}",
                part.rank,
                part.ranks,
                comm.rank(),
                comm.size()
            )));
        }
        if part.ordering != ordering {
            return Err(FvError::param(
                "ordering",
                ordering.name(),
                format!("the part was ordered {}", part.ordering.name()),
            ));
        }
        let p = part.ranks;
        let (interior, nl) = (part.interior, part.local.n());
        // The whole operator's step bound, so every rank accepts or refuses Δt alike.
        crate::diffusion::check_dt_bound(part.max_row_sum, dt)?;
        let local = Diffusion::<T>::new(gpu, &part.local, kind, layout, dt)?;
        let w = words_of::<T>() as u32;
        let to_words = |l: &[(usize, Vec<u32>)]| -> Vec<u32> {
            l.iter()
                .flat_map(|(_, v)| v.iter().flat_map(|&i| (0..w).map(move |k| i * w + k)))
                .collect()
        };
        let (sw, rw) = (to_words(&part.sends), to_words(&part.recvs));
        let send_ent = gpu.upload(&padded(&sw))?;
        let recv_ent = gpu.upload(&padded(&rw))?;
        let send_buf = gpu.alloc::<u32>(sw.len().max(1))?;
        let recv_buf = gpu.alloc::<u32>(rw.len().max(1))?;
        let launch = |unpack: bool,
                      x: &GpuBuffer<T>,
                      ent: &GpuBuffer<u32>,
                      len: usize,
                      buf: &GpuBuffer<u32>| {
            // SAFETY: entries are word indices of tets below nl, inside x; k stays below the entry count, which
            // is the exchange buffer's length.
            let k = unsafe {
                Kernel::new(
                    if unpack {
                        "fv-halo-unpack"
                    } else {
                        "fv-halo-pack"
                    },
                    halo_wgsl(unpack),
                )
                .without_bounds_checks()
            };
            let args = [x.arg(), ent.arg(), buf.arg()];
            gpu.prepare(&k, &args, Grid::cover(len as u64, WG)?)
                .map_err(FvError::from)
        };
        let x = &local.x;
        let pack = [
            launch(false, &x[0], &send_ent, sw.len(), &send_buf)?,
            launch(false, &x[1], &send_ent, sw.len(), &send_buf)?,
        ];
        let unpack = [
            launch(true, &x[0], &recv_ent, rw.len(), &recv_buf)?,
            launch(true, &x[1], &recv_ent, rw.len(), &recv_buf)?,
        ];
        let split = match (overlap && p > 1, local.row_launches(0..interior)?) {
            (true, Some(inner)) => local
                .row_launches(interior..nl)?
                .map(|outer| (inner, outer)),
            _ => None,
        };
        Ok(Self {
            split,
            comm,
            local,
            part,
            pack,
            unpack,
            send_buf,
            recv_buf,
            _entries: [send_ent, recv_ent],
            stats: FvExchangeStats::default(),
        })
    }

    /// Sets x from the whole mesh's values (n entries, the operator's numbering), on every rank.
    pub fn set_x(&mut self, x: &[f64]) -> Result<()> {
        crate::diffusion::check_field(x, self.part.n)?;
        let local: Vec<f64> = self
            .part
            .owned
            .iter()
            .chain(&self.part.ghosts)
            .map(|&t| x[t as usize])
            .collect();
        self.set_local_x(&local)
    }

    /// Sets x from the whole mesh's values that rank 0 alone holds (`Some` there, n entries in the operator's
    /// numbering; `None` on the other ranks): each rank is sent the values of its own tets and ghosts, and no
    /// other rank holds the whole field. Every rank must call it; a bad field on rank 0 is every rank's error.
    pub fn set_x_from_root(&mut self, x: Option<&[f64]>) -> Result<()> {
        let local = self.scatter_from_root(x)?;
        self.set_local_x(&local)
    }

    /// Restores the whole mesh's stored values and shift ([`stored_on_root`](Self::stored_on_root)) that rank 0
    /// alone holds (`Some` there, `None` on the other ranks): each rank is sent its own tets' and ghosts' values
    /// and rank 0's shift. Every rank must call it; a bad field on rank 0 is every rank's error.
    pub fn set_stored_from_root(&mut self, stored: Option<(&[f64], f64)>) -> Result<()> {
        let shifts = self
            .comm
            .all_gather_bytes(&stored.map_or(f64::NAN, |(_, s)| s).to_le_bytes())?;
        let local = self.scatter_from_root(stored.map(|(v, _)| v))?;
        let shift = shifts[0]
            .as_slice()
            .try_into()
            .map(f64::from_le_bytes)
            .map_err(|_| FvError::Shape("rank 0 sent no shift".into()))?;
        self.local.set_stored(&local, shift)
    }

    /// Rank 0 learns every rank's tets (own then ghosts) and sends each rank its values of `x` (the whole mesh's,
    /// on rank 0 alone); each rank's values, own then ghosts.
    fn scatter_from_root(&mut self, x: Option<&[f64]>) -> Result<Vec<f64>> {
        let comm = self.comm.clone();
        let me = comm.rank();
        // Rank 0 learns every rank's tets (own then ghosts) from them, and sends each its values.
        let wanted: Vec<u8> = self
            .part
            .owned
            .iter()
            .chain(&self.part.ghosts)
            .flat_map(|t| t.to_le_bytes())
            .collect();
        let wanted = comm.gather_bytes(0, &wanted)?;
        let checked = wanted.as_ref().map(|_| {
            x.ok_or_else(|| FvError::Shape("rank 0 was given no field to send".into()))
                .and_then(|x| crate::diffusion::check_field(x, self.part.n).map(|_| x))
        });
        // Each rank's values made as they are sent; rank 0's error instead, to every rank.
        let mut make = |q: usize| match (&checked, &wanted) {
            (Some(Ok(x)), Some(wanted)) => {
                let mut b = Vec::with_capacity(1 + 2 * wanted[q].len());
                b.push(FROM_ROOT_PART);
                for t in wanted[q].chunks_exact(4) {
                    let t = u32::from_le_bytes([t[0], t[1], t[2], t[3]]) as usize;
                    b.extend(x[t].to_le_bytes());
                }
                b
            }
            (Some(Err(e)), _) => root_failed(&e.to_string()),
            _ => Vec::new(),
        };
        let got = comm.scatter_bytes(0, wanted.is_some().then_some(&mut make))?;
        if let Some(Err(e)) = checked {
            return Err(e);
        }
        let nl = self.part.owned.len() + self.part.ghosts.len();
        let v = from_root(&got).inspect_err(blame_root(&*self.comm))?;
        if v.len() != 8 * nl {
            return Err(FvError::Shape(format!(
                "rank {me} was sent {} bytes of x for {nl} tets",
                v.len()
            )));
        }
        Ok(v.chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect())
    }

    /// Sets x from this rank's own tets' then ghosts' values, stored less the whole domain's shift (the
    /// Dirichlet value, or the volume-weighted mean as exact sums over every rank's tets: the bits a single
    /// domain computes, in any tet order). Every rank must call it.
    fn set_local_x(&mut self, local: &[f64]) -> Result<()> {
        let own = self.part.owned.len();
        let mut sums = [ExactSum::new(), ExactSum::new()];
        for (x, v) in local[..own].iter().zip(&self.part.local.volumes) {
            sums[0].add(x * v);
            sums[1].add(*v);
        }
        // Every rank joins the reduction, whatever the boundary, so that a bad value fails them alike.
        self.comm.all_reduce_exact(&mut sums)?;
        let shift = match self.part.boundary {
            Boundary::Dirichlet(v) => v,
            Boundary::ZeroFlux => sums[0].value() / sums[1].value(),
        };
        self.local.set_x_shifted(local, shift)
    }

    /// The whole mesh's x (operator numbering), gathered on every rank.
    pub fn x(&self) -> Result<Vec<f64>> {
        let all = self
            .comm
            .all_gather_bytes(&self.owned_values(self.local.x()?))?;
        Ok(self.place(&all))
    }

    /// [`x`](Self::x) on rank 0 (`Some`) only: the other ranks send their tets' values and hold no more (what a
    /// file written by rank 0 needs). Every rank must call it.
    pub fn x_on_root(&self) -> Result<Option<Vec<f64>>> {
        let all = self
            .comm
            .gather_bytes(0, &self.owned_values(self.local.x()?))?;
        Ok(all.map(|all| self.place(&all)))
    }

    /// The whole mesh's stored values (x − shift as the devices hold them, operator numbering) and the shift, on
    /// rank 0 (`Some`) only: what a checkpoint needs to continue bit for bit on any number of ranks
    /// ([`Diffusion::stored`](crate::Diffusion::stored)). Every rank must call it.
    pub fn stored_on_root(&self) -> Result<Option<(Vec<f64>, f64)>> {
        let (mine, shift) = self.local.stored()?;
        let all = self.comm.gather_bytes(0, &self.owned_values(mine))?;
        Ok(all.map(|all| (self.place(&all), shift)))
    }

    /// This rank's owned tets and their values (`mine`: the local values, own tets first), as (u32 tet, f64 value)
    /// little-endian pairs.
    fn owned_values(&self, mine: Vec<f64>) -> Vec<u8> {
        self.part
            .owned
            .iter()
            .zip(&mine)
            .flat_map(|(&t, v)| t.to_le_bytes().into_iter().chain(v.to_le_bytes()))
            .collect()
    }

    /// The whole field from every rank's [`owned_values`](Self::owned_values).
    fn place(&self, all: &[Vec<u8>]) -> Vec<f64> {
        let mut x = vec![f64::NAN; self.part.n];
        for b in all {
            for c in b.chunks_exact(12) {
                let t = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize;
                let mut v = [0u8; 8];
                v.copy_from_slice(&c[4..12]);
                x[t] = f64::from_le_bytes(v);
            }
        }
        x
    }

    /// Σ V x over the whole mesh, summed exactly over every rank's tets: the bits of `Operator::mass` on the
    /// whole field, whatever the partition.
    pub fn mass(&self) -> Result<f64> {
        let x = self.local.x()?;
        let mut m = [ExactSum::new()];
        for (v, x) in self
            .part
            .local
            .volumes
            .iter()
            .zip(&x)
            .take(self.part.owned.len())
        {
            m[0].add(v * x);
        }
        self.comm.all_reduce_exact(&mut m)?;
        Ok(m[0].value())
    }

    /// Runs `k` steps, each after the exchange of the ghost values it reads.
    pub fn step(&mut self, k: usize) -> Result<()> {
        let gpu = self.local.gpu;
        for _ in 0..k {
            let p = self.local.parity;
            if self.comm.size() > 1 {
                let t = Instant::now();
                let total: usize =
                    self.part.sends.iter().map(|(_, v)| v.len()).sum::<usize>() * words_of::<T>();
                let pending = gpu.submit_read(&[&self.pack[p]], &self.send_buf, total)?;
                if let Some((inner, _)) = &self.split {
                    gpu.submit(&[&inner[p]])?;
                }
                let sent = gpu.finish_read(pending)?;
                let w = words_of::<T>();
                let mut at = 0;
                let messages: Vec<Message> = self
                    .part
                    .sends
                    .iter()
                    .map(|(q, v)| {
                        let m = Message {
                            peer: *q,
                            tag: 1,
                            data: sent[at..at + w * v.len()].to_vec(),
                        };
                        at += w * v.len();
                        m
                    })
                    .collect();
                let expects: Vec<Expect> = self
                    .part
                    .recvs
                    .iter()
                    .map(|(q, v)| Expect {
                        peer: *q,
                        tag: 1,
                        len: w * v.len(),
                    })
                    .collect();
                let t_msg = Instant::now();
                let got = self.comm.start(messages, &expects)?.wait()?;
                self.stats.message_seconds += t_msg.elapsed().as_secs_f64();
                gpu.write(&self.recv_buf, 0, &got.concat())?;
                let rest = match &self.split {
                    Some((_, outer)) => &outer[p],
                    None => &self.local.launches[p],
                };
                gpu.submit(&[&self.unpack[p], rest])?;
                self.stats.exchanges += 1;
                self.stats.bytes_sent += 4 * total as u64;
                self.stats.seconds += t.elapsed().as_secs_f64();
            } else {
                gpu.submit(&[&self.local.launches[p]])?;
            }
            self.local.parity = 1 - p;
        }
        gpu.finish()?;
        Ok(())
    }

    /// Own tets, of which interior (no neighbour on another rank), and ghosts.
    pub fn sizes(&self) -> (usize, usize, usize) {
        self.part.sizes()
    }
    /// The step kernel's launch shape on this rank.
    pub fn shape(&self) -> crate::kernel::Shape {
        self.local.shape()
    }
    /// Whether steps overlap the exchange with the interior tets.
    pub fn overlapped(&self) -> bool {
        self.split.is_some()
    }
    pub fn exchange_stats(&self) -> &FvExchangeStats {
        &self.stats
    }
    pub fn comm(&self) -> &Rc<dyn Comm> {
        &self.comm
    }
}

/// An entry list never empty (a binding needs a byte).
fn padded(v: &[u32]) -> Vec<u32> {
    if v.is_empty() { vec![0] } else { v.to_vec() }
}

#[cfg(test)]
mod tests {
    use bespoke_gpu::{caps_for, validate_everywhere};

    #[test]
    fn halo_kernels_validate() {
        for unpack in [false, true] {
            let src = super::halo_wgsl(unpack);
            validate_everywhere(&src, caps_for(false, false))
                .unwrap_or_else(|e| panic!("{e}\n{src}"));
        }
    }
}
