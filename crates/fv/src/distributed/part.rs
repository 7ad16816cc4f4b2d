//! The host side of a distributed diffusion: the partition, and each rank's part of the operator.
//!
//! A part is made from a slice (`slice.rs`): the rank's own rows of the whole operator (global numbering) and, for each
//! off-rank neighbour they name, its owner, volume and centroid. Rank 0 alone may hold the whole operator
//! ([`RankPart::distribute`]: METIS there, each rank sent its slice, nothing whole anywhere else), or every rank
//! may ([`RankPart::new`]: the slice taken locally); both build the same part from the same slice.

use std::collections::{BTreeMap, BTreeSet};

use bespoke_comm::Comm;

use super::slice::{Slice, blame_root, root_failed};
use crate::error::{FvError, Result};
use crate::operator::{Boundary, Operator};
use crate::ordering::{OrderingKind, metis_partition, order};

/// Every rank's part (`part[t]`): METIS on rank 0 (recursive bisection up to 8 parts, k-way past), broadcast, so
/// that every rank holds the same. [`RankPart::distribute`] keeps it on rank 0.
pub fn partition(comm: &dyn Comm, op: &Operator) -> Result<Vec<u32>> {
    let p = comm.size();
    check_ranks(p, op.n())?;
    let mut bytes = Vec::new();
    let mut err = Vec::new();
    if comm.rank() == 0 {
        match metis_parts(op, p) {
            Ok(part) => bytes = part.iter().flat_map(|v| v.to_le_bytes()).collect(),
            Err(e) => err = e.to_string().into_bytes(),
        }
    }
    comm.broadcast_bytes(0, &mut err)?;
    if !err.is_empty() {
        // Every rank returns rank 0's error; a job of threads reports it as rank 0's.
        comm.blame(0);
        return Err(FvError::Metis(format!(
            "on rank 0: {}",
            String::from_utf8_lossy(&err)
        )));
    }
    comm.broadcast_bytes(0, &mut bytes)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Refuses more ranks than the mesh has tets (each rank owns at least one). A CLI checks it where it holds the
/// mesh, before any rank opens a device.
pub fn check_ranks(p: usize, n: usize) -> Result<()> {
    if p > n {
        return Err(FvError::param(
            "ranks",
            p,
            format!("more ranks than the mesh has tets ({n})"),
        ));
    }
    Ok(())
}

/// METIS's `p` parts of `op`, none empty.
fn metis_parts(op: &Operator, p: usize) -> Result<Vec<u32>> {
    let part = metis_partition(op, p)?;
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
/// (`DistDiffusion::from_part`): its own tets in the in-rank ordering (interior first), its ghosts, its rows
/// renumbered, and the exchange lists. Nothing in it touches a device, and nothing in it is of the whole mesh.
#[derive(Debug)]
pub struct RankPart {
    pub(super) rank: usize,
    pub(super) ranks: usize,
    pub(super) ordering: OrderingKind,
    /// Global tet of each owned local tet (local 0..own).
    pub(super) owned: Vec<u32>,
    /// Owned tets with no neighbour on another rank (they come first).
    pub(super) interior: usize,
    /// Global tet of each ghost (local own..own + ghosts).
    pub(super) ghosts: Vec<u32>,
    /// Tets in the whole mesh.
    pub(super) n: usize,
    pub(super) boundary: Boundary,
    /// The whole operator's largest row sum (its Δt bound, the same on every rank).
    pub(super) max_row_sum: f64,
    /// This rank's rows: owned rows renumbered, then identity rows for the ghosts.
    pub(super) local: Operator,
    /// Per peer: the local tets it needs from this rank, and the ghosts it fills here.
    pub(super) sends: Vec<(usize, Vec<u32>)>,
    pub(super) recvs: Vec<(usize, Vec<u32>)>,
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
        let n = op.n();
        if rank >= ranks {
            return Err(FvError::param(
                "rank",
                rank,
                format!("a job of {ranks} ranks has ranks 0 to {}", ranks.max(1) - 1),
            ));
        }
        if part.len() != n || part.iter().any(|&q| q as usize >= ranks) {
            return Err(FvError::Shape(format!(
                "a partition of {} entries into ranks below {ranks} for {n} tets",
                part.len()
            )));
        }
        let own: Vec<u32> = (0..n as u32)
            .filter(|&t| part[t as usize] as usize == rank)
            .collect();
        Self::from_slice(Slice::of(op, part, (rank, ranks), own), ordering)
    }

    /// This rank's part of the operator that rank 0 alone holds (`Some` there; the other ranks pass `None`):
    /// METIS on rank 0, then each rank sent its own rows and its ghosts' owners ([`Comm::scatter_bytes`]), so
    /// that no other rank ever holds the whole mesh. Every rank must call it; an error on rank 0 (no operator,
    /// more ranks than tets, METIS) is every rank's. The same part as [`RankPart::new`] with the same partition.
    pub fn distribute(
        comm: &dyn Comm,
        op: Option<&Operator>,
        ordering: OrderingKind,
    ) -> Result<Self> {
        let (me, p) = (comm.rank(), comm.size());
        // Rank 0: the partition and each rank's tets, then each rank's slice made as it is sent (one at a
        // time: the slices of all ranks together are ~84 B a tet more); an error instead, sent to every rank.
        let mut root = (me == 0).then(|| root_tets(op, p));
        let mut make = |q: usize| match &mut root {
            Some(Ok((op, part, tets))) => {
                Slice::of(op, part, (q, p), std::mem::take(&mut tets[q])).to_bytes()
            }
            Some(Err(e)) => root_failed(&e.to_string()),
            None => Vec::new(),
        };
        let bytes = comm.scatter_bytes(0, (me == 0).then_some(&mut make))?;
        if let Some(Err(e)) = root {
            return Err(e);
        }
        let slice = Slice::from_bytes(&bytes).inspect_err(blame_root(comm))?;
        drop(bytes);
        if (slice.rank, slice.ranks) != (me, p) {
            return Err(FvError::Shape(format!(
                "rank {me} of {p} was sent the part of rank {} of {}",
                slice.rank, slice.ranks
            )));
        }
        Self::from_slice(slice, ordering)
    }

    /// The part `s` describes, its own tets in `ordering`, interior first.
    fn from_slice(mut s: Slice, ordering: OrderingKind) -> Result<Self> {
        let (me, p, n) = (s.rank, s.ranks, s.n);
        let (m, g) = (s.own.len(), s.others.len());
        // Each slot as an index into the slice: own tets 0..m, off-rank neighbours m..m + g, the Dirichlet
        // ghost m + g.
        let rows = s.resolve()?;
        let d = (m + g) as u32;
        let off_rank = |i: usize| rows[i].iter().any(|&c| c >= m as u32 && c < d);
        // Own tets in the in-rank ordering (of the sub-operator: neighbours elsewhere dropped, as a zero-flux
        // face), interior first.
        // (The slice's rows move into it and back: a copy would be ~64 B an own tet more at the peak.)
        let sub = Operator {
            values: std::mem::take(&mut s.values),
            indices: rows
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    r.map(|c| match c {
                        c if c < m as u32 => c,
                        c if c == d => m as u32,
                        _ => i as u32,
                    })
                })
                .collect(),
            volumes: std::mem::take(&mut s.volumes),
            centroids: std::mem::take(&mut s.centroids),
            boundary: s.boundary,
        };
        let (perm, _) = order(&sub, ordering)?;
        (s.values, s.volumes, s.centroids) = (sub.values, sub.volumes, sub.centroids);
        let (mut mine, boundary): (Vec<usize>, Vec<usize>) = perm
            .new_to_old()
            .iter()
            .map(|&i| i as usize)
            .partition(|&i| !off_rank(i));
        let interior = mine.len();
        mine.extend(boundary);
        // Ghosts: off-rank neighbours, by owner then global tet (the order their owner sends them in).
        let mut theirs: Vec<usize> = (0..g).collect();
        theirs.sort_by_key(|&k| (s.others[k].1, s.others[k].0));
        let nl = m + g;
        let mut local = vec![0u32; nl];
        for (l, &i) in mine.iter().enumerate() {
            local[i] = l as u32;
        }
        for (q, &k) in theirs.iter().enumerate() {
            local[m + k] = (m + q) as u32;
        }
        let local_of = |c: u32| if c == d { nl as u32 } else { local[c as usize] };
        // Rows: owned rows renumbered (the Dirichlet ghost → nl), then identity rows for the ghosts.
        let mut lop = Operator {
            values: Vec::with_capacity(nl),
            indices: Vec::with_capacity(nl),
            volumes: Vec::with_capacity(nl),
            centroids: Vec::with_capacity(nl),
            boundary: s.boundary,
        };
        for &i in &mine {
            lop.values.push(s.values[i]);
            lop.indices.push(rows[i].map(local_of));
            lop.volumes.push(s.volumes[i]);
            lop.centroids.push(s.centroids[i]);
        }
        for (q, &k) in theirs.iter().enumerate() {
            lop.values.push([0.0; 4]);
            lop.indices.push([(m + q) as u32; 4]);
            lop.volumes.push(s.other_volumes[k]);
            lop.centroids.push(s.other_centroids[k]);
        }
        // Exchange lists: what each peer needs from me (its ghosts that I own, by global tet), what I receive.
        let mut recvs: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
        for (q, &k) in theirs.iter().enumerate() {
            recvs
                .entry(s.others[k].1 as usize)
                .or_default()
                .push((m + q) as u32);
        }
        let mut sends: BTreeMap<usize, BTreeSet<(u32, u32)>> = BTreeMap::new();
        for &i in &mine {
            for &c in &rows[i] {
                if c >= m as u32 && c < d {
                    let owner = s.others[c as usize - m].1 as usize;
                    sends.entry(owner).or_default().insert((s.own[i], local[i]));
                }
            }
        }
        Ok(Self {
            rank: me,
            ranks: p,
            ordering,
            owned: mine.iter().map(|&i| s.own[i]).collect(),
            interior,
            ghosts: theirs.iter().map(|&k| s.others[k].0).collect(),
            n,
            boundary: s.boundary,
            max_row_sum: s.max_row_sum,
            local: lop,
            sends: sends
                .into_iter()
                .map(|(q, v)| (q, v.into_iter().map(|(_, l)| l).collect()))
                .collect(),
            recvs: recvs.into_iter().collect(),
        })
    }

    /// Own tets, of which interior (no neighbour on another rank), and ghosts.
    pub fn sizes(&self) -> (usize, usize, usize) {
        (self.owned.len(), self.interior, self.ghosts.len())
    }

    /// Tets in the whole mesh.
    pub fn whole_tets(&self) -> usize {
        self.n
    }

    /// Tets in this rank's operator: its own, then its ghosts.
    pub fn local_tets(&self) -> usize {
        self.local.n()
    }

    /// The whole operator's largest row sum (Δt < 1 / it), the same on every rank.
    pub fn max_row_sum(&self) -> f64 {
        self.max_row_sum
    }

    /// The whole operator's [`Operator::default_dt`], the same on every rank.
    pub fn default_dt(&self) -> f64 {
        crate::operator::default_dt(self.max_row_sum)
    }
}

/// Rank 0's operator, its partition (every tet's part) and each part's tets, ascending.
type RootParts<'a> = (&'a Operator, Vec<u32>, Vec<Vec<u32>>);

/// [`RootParts`] into `p` parts.
fn root_tets(op: Option<&Operator>, p: usize) -> Result<RootParts<'_>> {
    let op =
        op.ok_or_else(|| FvError::Shape("rank 0 was given no operator to distribute".into()))?;
    check_ranks(p, op.n())?;
    let part = metis_parts(op, p)?;
    let mut tets = vec![Vec::new(); p];
    for (t, &q) in part.iter().enumerate() {
        tets[q as usize].push(t as u32);
    }
    Ok((op, part, tets))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::slice::HEADER_BYTES;
    use crate::generate::BoxMesh;
    use crate::operator::adjacency;

    fn op(boundary: Boundary) -> Operator {
        let mesh = BoxMesh {
            cells: [4, 3, 3],
            jitter: 0.2,
            shuffle: Some(5),
            seed: 3,
        }
        .build()
        .expect("mesh");
        let adj = adjacency(&mesh).expect("adjacency");
        Operator::diffusion(&mesh, &adj, 1.0, boundary).expect("operator")
    }

    /// A slice survives its bytes; damaged bytes are errors naming the damage, never a panic or a part.
    #[test]
    fn slices_round_trip_and_damage_is_an_error() {
        for boundary in [Boundary::ZeroFlux, Boundary::Dirichlet(0.5)] {
            let op = op(boundary);
            let part = metis_parts(&op, 3).expect("partition");
            for q in 0..3 {
                let own = (0..op.n() as u32)
                    .filter(|&t| part[t as usize] == q)
                    .collect();
                let s = Slice::of(&op, &part, (q as usize, 3), own);
                assert!(!s.others.is_empty());
                let b = s.to_bytes();
                assert_eq!(Slice::from_bytes(&b).expect("read"), s);
                for cut in [0, 1, HEADER_BYTES - 1, HEADER_BYTES, b.len() - 1] {
                    let e = Slice::from_bytes(&b[..cut]).unwrap_err();
                    assert!(e.to_string().contains("malformed part"), "{cut}: {e}");
                }
                let mut long = b.clone();
                long.push(0);
                assert!(Slice::from_bytes(&long).is_err());
            }
        }
        let e = Slice::from_bytes(&root_failed("METIS: no")).unwrap_err();
        assert!(e.to_string().contains("rank 0 failed: METIS: no"), "{e}");
    }

    /// A slice that names a neighbour it does not list, lists one on its own rank, or is out of order is
    /// refused by name.
    #[test]
    fn inconsistent_slices_are_refused() {
        let op = op(Boundary::ZeroFlux);
        let part = metis_parts(&op, 2).expect("partition");
        let own = |q| {
            (0..op.n() as u32)
                .filter(|&t| part[t as usize] == q)
                .collect()
        };
        let s = Slice::of(&op, &part, (0, 2), own(0));
        let mut a = Slice::of(&op, &part, (0, 2), own(0));
        a.others.remove(0);
        a.other_volumes.remove(0);
        a.other_centroids.remove(0);
        let e = RankPart::from_slice(a, OrderingKind::AsRead).unwrap_err();
        assert!(
            e.to_string()
                .contains("neither its own nor a listed neighbour"),
            "{e}"
        );
        let mut b = Slice::of(&op, &part, (0, 2), own(0));
        b.others[0].1 = 0;
        let e = RankPart::from_slice(b, OrderingKind::AsRead).unwrap_err();
        assert!(e.to_string().contains("owned by rank 0"), "{e}");
        let mut c = Slice::of(&op, &part, (0, 2), own(0));
        c.own.swap(0, 1);
        let e = RankPart::from_slice(c, OrderingKind::AsRead).unwrap_err();
        assert!(e.to_string().contains("out of order"), "{e}");
        let mut d = Slice::of(&op, &part, (0, 2), own(0));
        d.own[0] = op.n() as u32 + 5;
        d.own.sort_unstable();
        assert!(RankPart::from_slice(d, OrderingKind::AsRead).is_err());
        RankPart::from_slice(s, OrderingKind::AsRead).expect("the slice as made");
    }
}
