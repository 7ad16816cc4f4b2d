//! METIS orderings and partitions: k-way blocks with METIS's cache-friendly order inside each, nested dissection,
//! and the parts of distributed runs.

use bespoke_gpu::{DiskCache, Lookup, StableHasher};

use super::Permutation;
use super::curves::rcm;
use crate::error::{FvError, Result};
use crate::operator::Operator;

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

/// METIS k-way partition into ⌈n / block⌉ parts, then the parts one after another, each part's tets in the
/// reverse Cuthill–McKee order of its own subgraph ([`order_within_parts`]): what `METIS_CacheFriendlyReordering`
/// does (parts contiguous, a BFS order inside each), on every core. Kept in the user's cache ([`ORDER_CACHE`]).
pub fn metis_blocks(op: &Operator, block: usize) -> Result<Permutation> {
    metis_blocks_in(
        op,
        block,
        DiskCache::user(ORDER_CACHE, ORDER_CACHE_VERSION).as_ref(),
    )
}

/// The cache namespace of METIS orderings, keyed by the block size and the operator's graph (a hash of every
/// neighbour list): METIS took 84–93 s on 16.5 M tets, one core, and the bench's fv section and the lab each
/// order the same mesh. An entry is checked to be a permutation of the graph's size when read.
pub const ORDER_CACHE: &str = "fv-metis-order";
const ORDER_CACHE_VERSION: u32 = 1;

/// A cache entry that could not be used or kept, on stderr (the ordering is computed instead).
fn say(why: &str) {
    eprintln!("bespoke: {why}");
}

/// [`metis_blocks`] with the orderings kept in `cache` (None: computed every time).
pub fn metis_blocks_in(
    op: &Operator,
    block: usize,
    cache: Option<&DiskCache>,
) -> Result<Permutation> {
    let n = op.n();
    if block == 0 {
        return Err(FvError::param("block-size", block, "must be at least 1"));
    }
    let (xadj, adjncy) = op.graph();
    let key = cache.map(|_| {
        let mut h = StableHasher::new();
        for list in [&xadj, &adjncy] {
            for chunk in list.chunks(1 << 16) {
                let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
                h.write(&bytes);
            }
            h.end_part();
        }
        format!("blocks-{block}-of-{n}-{:016x}", h.finish())
    });
    if let (Some(c), Some(key)) = (cache, &key) {
        match c.get(key) {
            Lookup::Hit(bytes) if bytes.len() == 4 * n => {
                let order: Vec<u32> = bytes
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                match Permutation::from_new_to_old(order) {
                    Ok(p) => return Ok(p),
                    Err(e) => say(&format!(
                        "a cached METIS order is not one ({e}); ordering again"
                    )),
                }
            }
            Lookup::Hit(bytes) => say(&format!(
                "a cached METIS order holds {} bytes for {n} tets; ordering again",
                bytes.len()
            )),
            Lookup::Corrupt(why) => say(&format!("{why}; ordering again")),
            Lookup::Miss => {}
        }
    }
    let parts = n.div_ceil(block);
    let part = bespoke_gpu::phase("fv METIS parts", || metis_partition(op, parts))?;
    let order = bespoke_gpu::phase("fv order within parts", || {
        order_within_parts(&xadj, &adjncy, &part, parts)
    })?;
    if let (Some(c), Some(key)) = (cache, &key) {
        let bytes: Vec<u8> = order.iter().flat_map(|v| v.to_le_bytes()).collect();
        // A cache that cannot be written costs METIS's time next run, nothing else.
        if let Err(e) = c.put(key, &bytes) {
            say(&format!("could not keep the METIS order: {e}"));
        }
    }
    Permutation::from_new_to_old(order)
}

/// new → old: the vertices of part 0, then part 1, …, each part in the reverse Cuthill–McKee order of the
/// subgraph its vertices span (`part[v]` < `parts`; parts spread over every core). On 16.5 M tets in 8 040 parts
/// METIS's own `METIS_CacheFriendlyReordering` took 27 s on one core of a 2-core VM, after an 84 s partition.
pub fn order_within_parts(
    xadj: &[u32],
    adjncy: &[u32],
    part: &[u32],
    parts: usize,
) -> Result<Vec<u32>> {
    let n = part.len();
    if xadj.len() != n + 1 {
        return Err(FvError::Shape(format!(
            "a graph of {} vertices and parts for {n}",
            xadj.len().saturating_sub(1)
        )));
    }
    if let Some(v) = part.iter().position(|&p| p as usize >= parts) {
        return Err(FvError::Shape(format!(
            "vertex {v} is in part {}, past the {parts} parts",
            part[v]
        )));
    }
    // Counting sort by part (stable), and each vertex's index within its part.
    let mut start = vec![0usize; parts + 1];
    for &p in part {
        start[p as usize + 1] += 1;
    }
    for p in 0..parts {
        start[p + 1] += start[p];
    }
    let mut members = vec![0u32; n];
    let mut local = vec![0u32; n];
    let mut fill = start.clone();
    for (v, &p) in part.iter().enumerate() {
        let at = &mut fill[p as usize];
        local[v] = (*at - start[p as usize]) as u32;
        members[*at] = v as u32;
        *at += 1;
    }
    let mut out = vec![0u32; n];
    // Whole parts per thread: split the output at part boundaries near equal shares.
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(parts.max(1));
    let mut cuts = vec![0usize];
    for t in 1..threads {
        let target = n * t / threads;
        let p = start.partition_point(|&s| s < target).min(parts);
        if p > *cuts.last().unwrap_or(&0) {
            cuts.push(p);
        }
    }
    cuts.push(parts);
    let (start, members, local) = (&start, &members, &local);
    std::thread::scope(|s| {
        let mut rest: &mut [u32] = &mut out;
        for w in cuts.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            let (mine, tail) = rest.split_at_mut(start[hi] - start[lo]);
            rest = tail;
            s.spawn(move || {
                let (mut sx, mut sa) = (Vec::new(), Vec::new());
                for p in lo..hi {
                    let verts = &members[start[p]..start[p + 1]];
                    // The part's subgraph: its vertices by local index, the edges that stay inside it.
                    sx.clear();
                    sa.clear();
                    sx.push(0u32);
                    for &v in verts {
                        let v = v as usize;
                        for &u in &adjncy[xadj[v] as usize..xadj[v + 1] as usize] {
                            if part[u as usize] as usize == p {
                                sa.push(local[u as usize]);
                            }
                        }
                        sx.push(sa.len() as u32);
                    }
                    let dst = &mut mine[start[p] - start[lo]..start[p + 1] - start[lo]];
                    for (d, &l) in dst.iter_mut().zip(&rcm(&sx, &sa)) {
                        *d = verts[l as usize];
                    }
                }
            });
        }
    });
    Ok(out)
}

/// METIS runs one call at a time in a process. Its random-number state is one per process (GKlib's), reseeded by
/// each call: two calls at once (the tests' threads, thread ranks ordering their own tets) race on it, and gave
/// different parts of the same graph on every run (found 2026-11-27, when the FV tests' cache check failed in CI).
/// In turn, every call gives METIS's one answer for its graph.
fn metis_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
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
    let _one_at_a_time = metis_turn();
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
    let _one_at_a_time = metis_turn();
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
