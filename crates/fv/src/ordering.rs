//! Orderings of the tets: as read, random, reverse Cuthill–McKee, Hilbert curve on centroids, METIS k-way blocks
//! with METIS's cache-friendly order inside each block, and METIS nested dissection. An ordering is a
//! [`Permutation`] applied to the operator and fields and undone on output.

use std::time::Instant;

use crate::error::{FvError, Result};
use crate::operator::Operator;
use bespoke_gpu::rng::{SliceRandom, seeded};
use bespoke_gpu::{par_fill, prefetch};

/// new index → old index and its inverse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permutation {
    new_to_old: Vec<u32>,
    old_to_new: Vec<u32>,
}

impl Permutation {
    pub fn identity(n: usize) -> Self {
        let v: Vec<u32> = (0..n as u32).collect();
        Self {
            new_to_old: v.clone(),
            old_to_new: v,
        }
    }

    /// Checks that `new_to_old` is a permutation of 0..n.
    pub fn from_new_to_old(new_to_old: Vec<u32>) -> Result<Self> {
        let n = new_to_old.len();
        let mut old_to_new = vec![u32::MAX; n];
        for (new, &old) in new_to_old.iter().enumerate() {
            let slot = old_to_new.get_mut(old as usize).ok_or_else(|| {
                FvError::Shape(format!("ordering maps {new} to {old}, past {n} tets"))
            })?;
            if *slot != u32::MAX {
                return Err(FvError::Shape(format!("ordering uses tet {old} twice")));
            }
            *slot = new as u32;
        }
        Ok(Self {
            new_to_old,
            old_to_new,
        })
    }

    pub fn len(&self) -> usize {
        self.new_to_old.len()
    }
    pub fn is_empty(&self) -> bool {
        self.new_to_old.is_empty()
    }
    pub fn new_to_old(&self) -> &[u32] {
        &self.new_to_old
    }
    pub fn old_to_new(&self) -> &[u32] {
        &self.old_to_new
    }

    /// A field in the new order (entries past n, like the Dirichlet ghost, keep their place).
    pub fn apply<T: Copy + Send + Sync>(&self, old: &[T]) -> Vec<T> {
        let n = self.len();
        // A gather at random (the orderings' point is that old and new neighbours differ): on every core, each
        // element asked for a while before it is read.
        const AHEAD: usize = 16;
        let mut out = old.to_vec();
        par_fill(&mut out[..n], |i, v| {
            if let Some(&o) = self.new_to_old.get(i + AHEAD) {
                prefetch(old.as_ptr().wrapping_add(o as usize));
            }
            *v = old[self.new_to_old[i] as usize];
        });
        out
    }

    /// A field back in the original order.
    pub fn undo<T: Copy>(&self, new: &[T]) -> Vec<T> {
        let n = self.len();
        let mut out: Vec<T> = self.old_to_new.iter().map(|&i| new[i as usize]).collect();
        out.extend_from_slice(&new[n..]);
        out
    }

    /// The operator with rows and neighbour indices renumbered (the ghost index n stays n).
    pub fn apply_operator(&self, op: &Operator) -> Operator {
        let n = self.len() as u32;
        let map = |j: u32| {
            if j < n {
                self.old_to_new[j as usize]
            } else {
                j
            }
        };
        let mut indices = vec![[0u32; 4]; self.new_to_old.len()];
        par_fill(&mut indices, |i, row| {
            *row = op.indices[self.new_to_old[i] as usize].map(map)
        });
        Operator {
            values: self.apply(&op.values),
            indices,
            volumes: self.apply(&op.volumes),
            centroids: self.apply(&op.centroids),
            boundary: op.boundary,
        }
    }
}

/// The orderings, by the names the CLI and JSON use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderingKind {
    AsRead,
    Random,
    Rcm,
    Hilbert,
    /// METIS k-way blocks of about `block` tets, METIS's cache-friendly order inside each.
    Metis {
        block: usize,
    },
    MetisNd,
}

impl OrderingKind {
    pub fn name(&self) -> &'static str {
        match self {
            Self::AsRead => "as-read",
            Self::Random => "random",
            Self::Rcm => "rcm",
            Self::Hilbert => "hilbert",
            Self::Metis { .. } => "metis",
            Self::MetisNd => "metis-nd",
        }
    }
    pub fn parse(s: &str, block: usize) -> Result<Self> {
        Ok(match s {
            "as-read" => Self::AsRead,
            "random" => Self::Random,
            "rcm" => Self::Rcm,
            "hilbert" => Self::Hilbert,
            "metis" => Self::Metis { block },
            "metis-nd" => Self::MetisNd,
            _ => {
                return Err(FvError::param(
                    "ordering",
                    s,
                    "expected as-read, random, rcm, hilbert, metis or metis-nd",
                ));
            }
        })
    }
    pub fn all(block: usize) -> [Self; 6] {
        [
            Self::AsRead,
            Self::Random,
            Self::Rcm,
            Self::Hilbert,
            Self::Metis { block },
            Self::MetisNd,
        ]
    }
}

/// Computes an ordering of `op`'s tets; returns it and the seconds it took.
pub fn order(op: &Operator, kind: OrderingKind) -> Result<(Permutation, f64)> {
    let t = Instant::now();
    let n = op.n();
    let p = match kind {
        OrderingKind::AsRead => Permutation::identity(n),
        OrderingKind::Random => {
            let mut v: Vec<u32> = (0..n as u32).collect();
            v.shuffle(&mut seeded(0x5eed));
            Permutation::from_new_to_old(v)?
        }
        OrderingKind::Rcm => {
            let (xadj, adjncy) = op.graph();
            Permutation::from_new_to_old(rcm(&xadj, &adjncy))?
        }
        OrderingKind::Hilbert => Permutation::from_new_to_old(hilbert(&op.centroids))?,
        OrderingKind::Metis { block } => metis_blocks(op, block)?,
        OrderingKind::MetisNd => metis_nd(op)?,
    };
    Ok((p, t.elapsed().as_secs_f64()))
}

/// Reverse Cuthill–McKee: BFS from a pseudo-peripheral vertex of each component, neighbours by ascending
/// degree, the whole order reversed.
///
/// Built for meshes of tens of millions of tets in any numbering (a shuffled one makes every neighbour a cache
/// miss): the order itself is the BFS queue, the search for a peripheral start walks level by level in one
/// reused buffer, nothing is allocated per vertex, and the seeds come by a counting sort on degree.
pub fn rcm(xadj: &[u32], adjncy: &[u32]) -> Vec<u32> {
    let n = xadj.len() - 1;
    // Degrees as bytes (255: look it up) and marks as bits: the arrays a BFS hits at random stay in cache at
    // ten million vertices, where the graph itself cannot.
    let deg8: Vec<u8> = (0..n)
        .map(|v| (xadj[v + 1] - xadj[v]).min(255) as u8)
        .collect();
    let deg = |v: usize| match deg8[v] {
        255 => xadj[v + 1] - xadj[v],
        d => d as u32,
    };
    let nbrs = |v: usize| &adjncy[xadj[v] as usize..xadj[v + 1] as usize];
    // A BFS waits on memory: the queue says which rows come next, so ask for them early (the offsets 2·AHEAD
    // entries on, the neighbour lists AHEAD on, whose offsets came in a while ago).
    const AHEAD: usize = 16;
    let ahead = |queue: &[u32], i: usize| {
        if let Some(&v) = queue.get(i + 2 * AHEAD) {
            prefetch(xadj.as_ptr().wrapping_add(v as usize));
        }
        if let Some(&v) = queue.get(i + AHEAD) {
            prefetch(adjncy.as_ptr().wrapping_add(xadj[v as usize] as usize));
        }
    };
    let mut placed = Bits::new(n);
    let mut order: Vec<u32> = Vec::with_capacity(n);
    // Pseudo-peripheral search: `seen` marks a sweep's vertices (cleared by walking `level`, the sweep's queue).
    let mut seen = Bits::new(n);
    let mut level: Vec<u32> = Vec::new();
    // The farthest vertex from `s` (the first of least degree in the last BFS level) and its distance.
    let mut bfs_far = |s: usize| -> (usize, usize) {
        for &v in &level {
            seen.clear(v as usize);
        }
        level.clear();
        level.push(s as u32);
        seen.set(s);
        let (mut lo, mut depth) = (0, 0);
        loop {
            let hi = level.len();
            for i in lo..hi {
                ahead(&level, i);
                for &w in nbrs(level[i] as usize) {
                    if !seen.get(w as usize) {
                        seen.set(w as usize);
                        level.push(w);
                    }
                }
            }
            if level.len() == hi {
                let last = &level[lo..hi];
                let far = last
                    .iter()
                    .copied()
                    .min_by_key(|&v| deg(v as usize))
                    .unwrap_or(s as u32);
                return (far as usize, depth);
            }
            (lo, depth) = (hi, depth + 1);
        }
    };
    // Seeds by ascending degree, in index order within a degree (a stable counting sort).
    let max_deg = (0..n).map(deg).max().unwrap_or(0) as usize;
    let mut start_of = vec![0usize; max_deg + 2];
    for v in 0..n {
        start_of[deg(v) as usize + 1] += 1;
    }
    for d in 0..=max_deg {
        start_of[d + 1] += start_of[d];
    }
    let mut by_degree = vec![0u32; n];
    for v in 0..n {
        let d = deg(v) as usize;
        by_degree[start_of[d]] = v as u32;
        start_of[d] += 1;
    }
    drop(start_of);
    let mut next: Vec<u32> = Vec::new();
    for &seed in &by_degree {
        let seed = seed as usize;
        if placed.get(seed) {
            continue;
        }
        // A few sweeps towards the far end give a pseudo-peripheral start.
        let mut start = seed;
        let mut ecc = 0;
        for _ in 0..4 {
            let (far, d) = bfs_far(start);
            if d <= ecc {
                break;
            }
            start = far;
            ecc = d;
        }
        let mut head = order.len();
        order.push(start as u32);
        placed.set(start);
        while head < order.len() {
            ahead(&order, head);
            let v = order[head] as usize;
            head += 1;
            next.clear();
            for &w in nbrs(v) {
                if !placed.get(w as usize) {
                    placed.set(w as usize);
                    next.push(w);
                }
            }
            // Stable: equal degrees keep their adjacency order.
            next.sort_by_key(|&w| deg(w as usize));
            order.extend_from_slice(&next);
        }
    }
    order.reverse();
    order
}

/// A fixed set of bits.
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Self {
        Self(vec![0; n.div_ceil(64)])
    }
    fn get(&self, i: usize) -> bool {
        self.0[i / 64] >> (i % 64) & 1 == 1
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
}

/// Hilbert index of a point with 21-bit coordinates per axis (Skilling, "Programming the Hilbert curve", 2004:
/// axes → transposed index, then bit interleaving).
fn hilbert_index(mut x: [u32; 3], bits: u32) -> u64 {
    let m = 1u32 << (bits - 1);
    let mut q = m;
    while q > 1 {
        let p = q - 1;
        for i in 0..3 {
            if x[i] & q != 0 {
                x[0] ^= p;
            } else {
                let t = (x[0] ^ x[i]) & p;
                x[0] ^= t;
                x[i] ^= t;
            }
        }
        q >>= 1;
    }
    for i in 1..3 {
        x[i] ^= x[i - 1];
    }
    let mut t = 0;
    let mut q = m;
    while q > 1 {
        if x[2] & q != 0 {
            t ^= q - 1;
        }
        q >>= 1;
    }
    for v in &mut x {
        *v ^= t;
    }
    let mut h = 0u64;
    for b in (0..bits).rev() {
        for v in x {
            h = (h << 1) | u64::from((v >> b) & 1);
        }
    }
    h
}

/// Tets sorted by the Hilbert index of their centroids in the bounding box.
pub fn hilbert(centroids: &[[f64; 3]]) -> Vec<u32> {
    const BITS: u32 = 21;
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for c in centroids {
        for d in 0..3 {
            lo[d] = lo[d].min(c[d]);
            hi[d] = hi[d].max(c[d]);
        }
    }
    let span = (0..3)
        .map(|d| hi[d] - lo[d])
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    let scale = ((1u64 << BITS) - 1) as f64 / span;
    let mut keyed: Vec<(u64, u32)> = centroids
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let q = std::array::from_fn(|d| {
                ((c[d] - lo[d]) * scale)
                    .round()
                    .clamp(0.0, ((1u64 << BITS) - 1) as f64) as u32
            });
            (hilbert_index(q, BITS), i as u32)
        })
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, i)| i).collect()
}

fn metis_graph(op: &Operator) -> Result<(Vec<metis::Idx>, Vec<metis::Idx>)> {
    let (xadj, adjncy) = op.graph();
    let conv = |v: Vec<u32>| -> Result<Vec<metis::Idx>> {
        v.into_iter()
            .map(|x| {
                metis::Idx::try_from(x)
                    .map_err(|_| FvError::Metis("graph too large for METIS indices".into()))
            })
            .collect()
    };
    Ok((conv(xadj)?, conv(adjncy)?))
}

/// METIS k-way partition into ⌈n / block⌉ parts, then `METIS_CacheFriendlyReordering`: parts contiguous, a
/// BFS/RCM-like order inside each.
pub fn metis_blocks(op: &Operator, block: usize) -> Result<Permutation> {
    let n = op.n();
    if block == 0 {
        return Err(FvError::param("block-size", block, "must be at least 1"));
    }
    let parts = metis_partition(op, n.div_ceil(block))?;
    let (mut xadj, mut adjncy) = metis_graph(op)?;
    let mut part: Vec<metis::Idx> = parts.iter().map(|&p| p as metis::Idx).collect();
    let mut old2new = vec![0 as metis::Idx; n];
    // SAFETY: xadj has n + 1 entries and adjncy xadj[n]; part and old2new have n entries; METIS only reads the
    // graph and partition and writes old2new.
    let rc = unsafe {
        metis_sys::METIS_CacheFriendlyReordering(
            n as metis::Idx,
            xadj.as_mut_ptr(),
            adjncy.as_mut_ptr(),
            part.as_mut_ptr(),
            old2new.as_mut_ptr(),
        )
    };
    if rc != metis_sys::rstatus_et_METIS_OK {
        return Err(FvError::Metis(format!(
            "cache-friendly reordering failed (status {rc})"
        )));
    }
    let mut new_to_old = vec![0u32; n];
    for (old, &new) in old2new.iter().enumerate() {
        let new = usize::try_from(new)
            .ok()
            .filter(|&v| v < n)
            .ok_or_else(|| FvError::Metis(format!("reordering returned index {new}")))?;
        new_to_old[new] = old as u32;
    }
    Permutation::from_new_to_old(new_to_old)
}

/// The METIS method [`metis_partition`] uses for `parts` parts, as reports name it.
pub fn partition_method(parts: usize) -> &'static str {
    if parts <= 8 {
        "METIS recursive bisection"
    } else {
        "METIS k-way"
    }
}

/// METIS part of every tet (`parts` ≥ 1): recursive bisection up to 8 parts, k-way past.
pub fn metis_partition(op: &Operator, parts: usize) -> Result<Vec<u32>> {
    let n = op.n();
    if parts <= 1 || n <= 1 {
        return Ok(vec![0; n]);
    }
    let (xadj, adjncy) = metis_graph(op)?;
    let mut part = vec![0 as metis::Idx; n];
    let nparts =
        metis::Idx::try_from(parts).map_err(|_| FvError::Metis(format!("{parts} parts")))?;
    let graph = metis::Graph::new(1, nparts, &xadj, &adjncy)
        .map_err(|e| FvError::Metis(format!("graph rejected: {e:?}")))?;
    // METIS's manual: recursive bisection for a few parts, k-way past 8. On a 10.6 M-tet box in two it cut 19 899
    // faces where k-way cut 21 688 (the plane between the halves: 18 432), in about the same time.
    if partition_method(parts) == "METIS recursive bisection" {
        graph.part_recursive(&mut part)
    } else {
        graph.part_kway(&mut part)
    }
    .map_err(|e| FvError::Metis(format!("partition into {parts} parts failed: {e:?}")))?;
    Ok(part.into_iter().map(|p| p as u32).collect())
}

/// METIS nested dissection (fill-reducing) order.
pub fn metis_nd(op: &Operator) -> Result<Permutation> {
    let n = op.n();
    if n <= 1 {
        return Ok(Permutation::identity(n));
    }
    let (mut xadj, mut adjncy) = metis_graph(op)?;
    let mut nv = n as metis::Idx;
    let mut perm = vec![0 as metis::Idx; n];
    let mut iperm = vec![0 as metis::Idx; n];
    // SAFETY: sizes as METIS documents (xadj n + 1, adjncy xadj[n], perm and iperm n); null weights and options
    // select METIS's defaults.
    let rc = unsafe {
        metis_sys::METIS_NodeND(
            &mut nv,
            xadj.as_mut_ptr(),
            adjncy.as_mut_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            perm.as_mut_ptr(),
            iperm.as_mut_ptr(),
        )
    };
    if rc != metis_sys::rstatus_et_METIS_OK {
        return Err(FvError::Metis(format!(
            "nested dissection failed (status {rc})"
        )));
    }
    // Row i of the reordered matrix is row perm[i] of the original: perm is new → old.
    Permutation::from_new_to_old(perm.into_iter().map(|v| v as u32).collect())
}

/// Fraction of interior neighbour references whose neighbour lies in the same block of `block` consecutive
/// tets (in the operator's current numbering). Panics when `block` is 0.
pub fn in_block_fraction(op: &Operator, block: usize) -> f64 {
    let n = op.n();
    let (mut inside, mut total) = (0usize, 0usize);
    for (i, row) in op.indices.iter().enumerate() {
        for &j in row {
            let j = j as usize;
            if j < n && j != i {
                total += 1;
                if j / block == i / block {
                    inside += 1;
                }
            }
        }
    }
    if total == 0 {
        1.0
    } else {
        inside as f64 / total as f64
    }
}

#[cfg(test)]
mod rcm_tests {
    use std::collections::VecDeque;

    use bespoke_gpu::rng::{Rng, seeded};

    /// The first implementation (VecDeque, one Vec per vertex), kept to check [`super::rcm`]'s order: BFS from a pseudo-peripheral vertex of each component, neighbours by ascending
    /// degree, the whole order reversed.
    fn rcm_reference(xadj: &[u32], adjncy: &[u32]) -> Vec<u32> {
        let n = xadj.len() - 1;
        let deg = |v: usize| (xadj[v + 1] - xadj[v]) as usize;
        let nbrs = |v: usize| &adjncy[xadj[v] as usize..xadj[v + 1] as usize];
        let mut visited = vec![false; n];
        let mut order = Vec::with_capacity(n);
        // Farthest vertex (and eccentricity) from `s` within its component, by BFS.
        let bfs_far = |s: usize, seen: &mut Vec<u32>, stamp: u32| -> (usize, usize) {
            let mut q = VecDeque::from([(s, 0usize)]);
            seen[s] = stamp;
            let mut last = (s, 0);
            while let Some((v, d)) = q.pop_front() {
                if d > last.1 || (d == last.1 && deg(v) < deg(last.0)) {
                    last = (v, d);
                }
                for &w in nbrs(v) {
                    if seen[w as usize] != stamp {
                        seen[w as usize] = stamp;
                        q.push_back((w as usize, d + 1));
                    }
                }
            }
            last
        };
        let mut seen = vec![0u32; n];
        let mut stamp = 0;
        let mut by_degree: Vec<usize> = (0..n).collect();
        by_degree.sort_by_key(|&v| deg(v));
        for &seed in &by_degree {
            if visited[seed] {
                continue;
            }
            // A few sweeps towards the far end give a pseudo-peripheral start.
            let mut start = seed;
            let mut ecc = 0;
            for _ in 0..4 {
                stamp += 1;
                let (far, d) = bfs_far(start, &mut seen, stamp);
                if d <= ecc {
                    break;
                }
                start = far;
                ecc = d;
            }
            let mut q = VecDeque::from([start]);
            visited[start] = true;
            while let Some(v) = q.pop_front() {
                order.push(v as u32);
                let mut next: Vec<usize> = nbrs(v)
                    .iter()
                    .map(|&w| w as usize)
                    .filter(|&w| !visited[w])
                    .collect();
                next.sort_by_key(|&w| deg(w));
                for w in next {
                    if !visited[w] {
                        visited[w] = true;
                        q.push_back(w);
                    }
                }
            }
        }
        order.reverse();
        order
    }

    /// A random graph with `n` vertices, symmetric, several components, degrees 0 to ~8.
    fn random_graph(n: usize, edges: usize, seed: u64) -> (Vec<u32>, Vec<u32>) {
        let mut rng = seeded(seed);
        let mut adj = vec![Vec::new(); n];
        for _ in 0..edges {
            let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
            if a != b && !adj[a].contains(&(b as u32)) {
                adj[a].push(b as u32);
                adj[b].push(a as u32);
            }
        }
        let mut xadj = vec![0u32];
        let mut adjncy = Vec::new();
        for a in &adj {
            adjncy.extend(a);
            xadj.push(adjncy.len() as u32);
        }
        (xadj, adjncy)
    }

    #[test]
    fn rcm_gives_the_reference_order() {
        // The last graph has vertices of degree past 255 (a hub joined to many).
        for (n, edges, seed) in [
            (1, 0, 1),
            (2, 1, 2),
            (50, 40, 3),
            (1000, 1500, 4),
            (5000, 12000, 5),
            (300, 40_000, 6),
        ] {
            let (xadj, adjncy) = random_graph(n, edges, seed);
            let fast = super::rcm(&xadj, &adjncy);
            assert_eq!(fast, rcm_reference(&xadj, &adjncy), "n {n}, {edges} edges");
            let mut sorted = fast.clone();
            sorted.sort_unstable();
            assert!(sorted.iter().copied().eq(0..n as u32), "not a permutation");
        }
    }
}
