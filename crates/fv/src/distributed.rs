//! Diffusion across ranks: a METIS partition of the tets (computed on rank 0, broadcast), each rank its
//! own tets (interior first, then those with a neighbour on another rank, each group in the in-rank ordering
//! asked for) plus a ghost layer of its neighbours' tets, and before every step the ghost values moved from
//! their owners: packed on the device, read back, exchanged through [`Comm`], uploaded and unpacked.
//!
//! A rank's operator rows are the whole operator's rows (same values, same slot order, indices renumbered), and
//! every rank stores x less the whole domain's shift, so each tet's update is the single-domain update bit for
//! bit; ghost rows are identity rows (no coefficients) that the exchange overwrites.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Instant;

use bespoke_comm::{Comm, ExactSum, Expect, Message};
use bespoke_gpu::{Gpu, GpuBuffer, Grid, Kernel, Launch};

use crate::diffusion::{Diffusion, Real};
use crate::error::{FvError, Result};
use crate::kernel::{DType, KernelKind, Layout, WG};
use crate::operator::{Boundary, Operator};
use crate::ordering::{OrderingKind, metis_partition, order};

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
    /// Update the interior tets while the ghost values travel, then the rest (the gather kernel in the
    /// slot-major, tet-major and texture layouts; the others update every tet after the exchange).
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

/// Every rank's part (`part[t]`): METIS on rank 0 (recursive bisection up to 8 parts, k-way past), broadcast, so that every rank holds the same.
pub fn partition(comm: &dyn Comm, op: &Operator) -> Result<Vec<u32>> {
    let p = comm.size();
    if p > op.n() {
        return Err(FvError::param(
            "ranks",
            p,
            format!("more ranks than the mesh's {} tets", op.n()),
        ));
    }
    let mut bytes = Vec::new();
    let mut err = Vec::new();
    if comm.rank() == 0 {
        match metis_partition(op, p) {
            Ok(part) => bytes = part.iter().flat_map(|v| v.to_le_bytes()).collect(),
            Err(e) => err = e.to_string().into_bytes(),
        }
    }
    comm.broadcast_bytes(0, &mut err)?;
    if !err.is_empty() {
        return Err(FvError::Metis(format!(
            "on rank 0: {}",
            String::from_utf8_lossy(&err)
        )));
    }
    comm.broadcast_bytes(0, &mut bytes)?;
    let part: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut count = vec![0usize; p];
    for &q in &part {
        count[q as usize] += 1;
    }
    if let Some(q) = count.iter().position(|&c| c == 0) {
        return Err(FvError::Metis(format!(
            "the partition into {p} parts left part {q} empty"
        )));
    }
    Ok(part)
}

/// One rank's share of a partitioned operator, built on the host once and shared by every setup that steps it
/// ([`DistDiffusion::from_part`]): its own tets in the in-rank ordering (interior first), its ghosts, its rows
/// renumbered, and the exchange lists. Nothing in it touches a device.
#[derive(Debug)]
pub struct RankPart {
    rank: usize,
    ranks: usize,
    ordering: OrderingKind,
    /// Global tet of each owned local tet (local 0..own).
    owned: Vec<u32>,
    /// Owned tets with no neighbour on another rank (they come first).
    interior: usize,
    /// Global tet of each ghost (local own..own + ghosts).
    ghosts: Vec<u32>,
    /// Tets in the whole mesh.
    n: usize,
    /// The whole mesh's volumes (the shift and the mass are whole-domain sums).
    volumes: Vec<f64>,
    boundary: Boundary,
    /// The whole operator's largest row sum (its Δt bound, the same on every rank).
    max_row_sum: f64,
    /// This rank's rows: owned rows renumbered, then identity rows for the ghosts.
    local: Operator,
    /// Per peer: the local tets it needs from this rank, and the ghosts it fills here.
    sends: Vec<(usize, Vec<u32>)>,
    recvs: Vec<(usize, Vec<u32>)>,
}

impl RankPart {
    /// Rank `rank` of `ranks`'s part of `op` (the whole operator, the same on every rank) partitioned by `part`
    /// (every tet's rank), its own tets in `ordering` (of the sub-operator), interior first.
    pub fn new(
        rank: usize,
        ranks: usize,
        op: &Operator,
        part: &[u32],
        ordering: OrderingKind,
    ) -> Result<Self> {
        let (me, p, n) = (rank, ranks, op.n());
        if me >= p {
            return Err(FvError::param(
                "rank",
                me,
                format!("a job of {p} ranks has ranks 0 to {}", p.max(1) - 1),
            ));
        }
        if part.len() != n || part.iter().any(|&q| q as usize >= p) {
            return Err(FvError::Shape(format!(
                "a partition of {} entries into ranks below {p} for {n} tets",
                part.len()
            )));
        }
        let owner = |t: u32| part[t as usize] as usize;
        let off_rank = |t: usize| {
            op.indices[t]
                .iter()
                .any(|&j| (j as usize) < n && owner(j) != owner(t as u32))
        };
        // Own tets in the in-rank ordering (of the sub-operator), interior first.
        let mine: Vec<u32> = (0..n as u32).filter(|&t| owner(t) == me).collect();
        let sub = sub_operator(op, &mine);
        let (perm, _) = order(&sub, ordering)?;
        drop(sub);
        let ordered: Vec<u32> = perm
            .new_to_old()
            .iter()
            .map(|&i| mine[i as usize])
            .collect();
        let (mut owned, boundary): (Vec<u32>, Vec<u32>) =
            ordered.iter().partition(|&&t| !off_rank(t as usize));
        let interior = owned.len();
        owned.extend(boundary);
        // Ghosts: off-rank neighbours, by owner then global tet (the order their owner sends them in).
        let ghosts: BTreeSet<(usize, u32)> = owned
            .iter()
            .flat_map(|&t| op.indices[t as usize].iter().copied())
            .filter(|&j| (j as usize) < n && owner(j) != me)
            .map(|j| (owner(j), j))
            .collect();
        let ghosts: Vec<u32> = ghosts.into_iter().map(|(_, j)| j).collect();
        let nl = owned.len() + ghosts.len();
        // Global tet → local index (a dense table: a tree of 10 M entries took most of a 62 s setup).
        let local_of = local_index(n, owned.iter().chain(&ghosts).copied());
        // Rows: owned rows renumbered (the Dirichlet ghost n → nl), then identity rows for the ghosts.
        let mut lop = Operator {
            values: Vec::with_capacity(nl),
            indices: Vec::with_capacity(nl),
            volumes: Vec::with_capacity(nl),
            centroids: Vec::with_capacity(nl),
            boundary: op.boundary,
        };
        for (l, &t) in owned.iter().chain(&ghosts).enumerate() {
            let t = t as usize;
            let own = l < owned.len();
            lop.values.push(if own { op.values[t] } else { [0.0; 4] });
            lop.indices.push(if own {
                op.indices[t].map(|j| {
                    if j as usize == n {
                        nl as u32
                    } else {
                        local_of[j as usize]
                    }
                })
            } else {
                [l as u32; 4]
            });
            lop.volumes.push(op.volumes[t]);
            lop.centroids.push(op.centroids[t]);
        }
        // Exchange lists: what each peer needs from me (its ghosts that I own), what I receive (mine it owns).
        let mut recvs: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
        for &g in &ghosts {
            recvs
                .entry(owner(g))
                .or_default()
                .push(local_of[g as usize]);
        }
        let mut sends: BTreeMap<usize, BTreeSet<u32>> = BTreeMap::new();
        for &t in &owned {
            for &j in &op.indices[t as usize] {
                if (j as usize) < n && owner(j) != me {
                    sends.entry(owner(j)).or_default().insert(t);
                }
            }
        }
        let sends: Vec<(usize, Vec<u32>)> = sends
            .into_iter()
            .map(|(q, s)| (q, s.into_iter().map(|t| local_of[t as usize]).collect()))
            .collect();
        let recvs: Vec<(usize, Vec<u32>)> = recvs.into_iter().collect();
        Ok(Self {
            rank: me,
            ranks: p,
            ordering,
            owned,
            interior,
            ghosts,
            n,
            volumes: op.volumes.clone(),
            boundary: op.boundary,
            max_row_sum: op.max_row_sum(),
            local: lop,
            sends,
            recvs,
        })
    }

    /// Own tets, of which interior (no neighbour on another rank), and ghosts.
    pub fn sizes(&self) -> (usize, usize, usize) {
        (self.owned.len(), self.interior, self.ghosts.len())
    }
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
        // The shift a single domain stores with (the Dirichlet value, or the volume-weighted mean in the
        // operator's numbering): every rank the same, to the bit.
        let shift = match self.part.boundary {
            Boundary::Dirichlet(v) => v,
            Boundary::ZeroFlux => {
                let (m, w) = x
                    .iter()
                    .zip(&self.part.volumes)
                    .fold((0.0, 0.0), |(m, w), (x, v)| (m + x * v, w + v));
                m / w
            }
        };
        let local: Vec<f64> = self
            .part
            .owned
            .iter()
            .chain(&self.part.ghosts)
            .map(|&t| x[t as usize])
            .collect();
        self.local.set_x_shifted(&local, shift)
    }

    /// The whole mesh's x (operator numbering), gathered on every rank.
    pub fn x(&self) -> Result<Vec<f64>> {
        let all = self.comm.all_gather_bytes(&self.owned_values()?)?;
        Ok(self.place(&all))
    }

    /// [`x`](Self::x) on rank 0 (`Some`) only: the other ranks send their tets' values and hold no more (what a
    /// file written by rank 0 needs). Every rank must call it.
    pub fn x_on_root(&self) -> Result<Option<Vec<f64>>> {
        let all = self.comm.gather_bytes(0, &self.owned_values()?)?;
        Ok(all.map(|all| self.place(&all)))
    }

    /// This rank's owned tets and their values, as (u32 tet, f64 value) little-endian pairs.
    fn owned_values(&self) -> Result<Vec<u8>> {
        let mine = self.local.x()?;
        Ok(self
            .part
            .owned
            .iter()
            .zip(&mine)
            .flat_map(|(&t, v)| t.to_le_bytes().into_iter().chain(v.to_le_bytes()))
            .collect())
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
        for (&t, v) in self.part.owned.iter().zip(&x) {
            m[0].add(self.part.volumes[t as usize] * v);
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

/// The rows of `tets` as an operator of their own, for the in-rank ordering: neighbours outside dropped (as a
/// zero-flux face).
/// For each of `n` global tets its position in `tets` ([`NOT_LOCAL`] where it is not among them).
fn local_index(n: usize, tets: impl Iterator<Item = u32>) -> Vec<u32> {
    let mut local = vec![NOT_LOCAL; n];
    for (l, t) in tets.enumerate() {
        local[t as usize] = l as u32;
    }
    local
}

/// [`local_index`]'s mark of a tet that is not local.
const NOT_LOCAL: u32 = u32::MAX;

fn sub_operator(op: &Operator, tets: &[u32]) -> Operator {
    let local = local_index(op.n(), tets.iter().copied());
    let local = |j: u32| local.get(j as usize).copied().filter(|&l| l != NOT_LOCAL);
    let m = tets.len() as u32;
    Operator {
        values: tets.iter().map(|&t| op.values[t as usize]).collect(),
        indices: tets
            .iter()
            .enumerate()
            .map(|(l, &t)| {
                op.indices[t as usize]
                    .map(|j| local(j).unwrap_or(if j as usize == op.n() { m } else { l as u32 }))
            })
            .collect(),
        volumes: tets.iter().map(|&t| op.volumes[t as usize]).collect(),
        centroids: tets.iter().map(|&t| op.centroids[t as usize]).collect(),
        boundary: op.boundary,
    }
}

#[cfg(test)]
mod tests {
    use bespoke_gpu::{caps_for, validate_wgsl};

    #[test]
    fn halo_kernels_validate() {
        for unpack in [false, true] {
            let src = super::halo_wgsl(unpack);
            validate_wgsl(&src, caps_for(false, false)).unwrap_or_else(|e| panic!("{e}\n{src}"));
        }
    }
}
