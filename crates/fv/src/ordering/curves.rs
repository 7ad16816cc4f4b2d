//! Orderings from the graph and the geometry alone: reverse Cuthill–McKee and the Hilbert curve.

use bespoke_gpu::prefetch;

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
