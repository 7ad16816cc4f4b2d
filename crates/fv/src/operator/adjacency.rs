//! Face adjacency: which tet lies across each face, matched on every core.

use crate::error::{FvError, Result};
use crate::mesh::TetMesh;

use super::BOUNDARY;

/// Slot k of tet t is the face opposite its vertex k; the neighbour across it, or [`BOUNDARY`].
pub fn adjacency(mesh: &TetMesh) -> Result<Vec<[u32; 4]>> {
    let n = mesh.tets.len();
    if n > (u32::MAX / 4) as usize {
        return Err(FvError::Shape(format!(
            "{n} tets: faces are numbered 4·tet + corner in 32 bits"
        )));
    }
    let nodes = mesh.nodes.len();
    if let Some(t) =
        bespoke_gpu::par_first(n, |t| mesh.tets[t].iter().any(|&v| v as usize >= nodes))
    {
        return Err(FvError::Shape(format!(
            "tet {t} names node {:?} of a mesh of {nodes} nodes",
            mesh.tets[t]
        )));
    }
    // Faces bucketed by their smallest node (a counting sort: one pass to count, one to place), then each small
    // bucket sorted by the other two nodes: linear in the faces, where one sort of all 4n took most of a 10 M-tet
    // mesh's set-up. Every pass on every core (17.8 s on one core for 16.5 M shuffled tets): counts and places
    // by atomic increments, so a bucket's faces arrive in any order, and the sort by (second node, third node,
    // face) puts them in one order whatever it was.
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let tet_chunk = n.div_ceil(threads).max(1 << 14);
    let count: Vec<AtomicU32> = (0..=nodes).map(|_| AtomicU32::new(0)).collect();
    std::thread::scope(|s| {
        for lo in (0..n).step_by(tet_chunk) {
            let count = &count;
            s.spawn(move || {
                for tet in &mesh.tets[lo..(lo + tet_chunk).min(n)] {
                    for k in 0..4 {
                        count[face_of(tet, k)[0] as usize + 1].fetch_add(1, Relaxed);
                    }
                }
            });
        }
    });
    let mut start: Vec<u32> = count.into_iter().map(AtomicU32::into_inner).collect();
    for v in 0..nodes {
        start[v + 1] += start[v];
    }
    // (second node, third node, 4·tet + corner), by bucket.
    let mut faces = vec![[0u32; 3]; 4 * n];
    let next: Vec<AtomicU32> = start.iter().map(|&s| AtomicU32::new(s)).collect();
    let slots = Shared(faces.as_mut_ptr());
    std::thread::scope(|s| {
        for lo in (0..n).step_by(tet_chunk) {
            let (next, slots) = (&next, &slots);
            s.spawn(move || {
                for (i, tet) in mesh.tets[lo..(lo + tet_chunk).min(n)].iter().enumerate() {
                    for k in 0..4 {
                        let f = face_of(tet, k);
                        let at = next[f[0] as usize].fetch_add(1, Relaxed) as usize;
                        // SAFETY: `at` is below the bucket's end (the counts above gave every bucket room for
                        // exactly its faces, so at < start[f0 + 1] ≤ 4n), and each increment hands out a
                        // different slot, so no two threads write the same element.
                        unsafe { slots.write(at, [f[1], f[2], 4 * (lo + i) as u32 + k as u32]) };
                    }
                }
            });
        }
    });
    drop(next);
    // Buckets matched on every core, node ranges of about equal face counts; each face writes its own slot.
    let mut adj = vec![[BOUNDARY; 4]; n];
    let out = Shared(adj.as_mut_ptr().cast::<u32>());
    let mut cuts: Vec<usize> = (0..threads)
        .map(|t| {
            start
                .partition_point(|&s| (s as usize) < 4 * n * t / threads)
                .min(nodes)
        })
        .collect();
    cuts.push(nodes);
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let mut rest: &mut [[u32; 3]] = &mut faces;
        let mut handles = Vec::new();
        for w in cuts.windows(2) {
            let (lo, hi) = (w[0], w[1].max(w[0]));
            let (mine, tail) = rest.split_at_mut((start[hi] - start[lo]) as usize);
            rest = tail;
            let (start, out) = (&start, &out);
            handles.push(s.spawn(move || -> Result<()> {
                let base = start[lo] as usize;
                for v in lo..hi {
                    let bucket = &mut mine[start[v] as usize - base..start[v + 1] as usize - base];
                    match_bucket(v, bucket, out)?;
                }
                Ok(())
            }));
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("an adjacency worker panicked"))
            .collect()
    });
    // The first error in node order, as one pass over the buckets would report it.
    for r in results {
        r?;
    }
    Ok(adj)
}

/// The sorted corners of the face of `tet` opposite its vertex `k`.
fn face_of(tet: &[u32; 4], k: usize) -> [u32; 3] {
    let mut f = [0u32; 3];
    let mut m = 0;
    for (v, &node) in tet.iter().enumerate() {
        if v != k {
            f[m] = node;
            m += 1;
        }
    }
    f.sort_unstable();
    f
}

/// Sorts the faces whose smallest node is `v` and records each pair's neighbours in `adj` (slot 4·tet + corner).
fn match_bucket(v: usize, bucket: &mut [[u32; 3]], adj: &Shared<u32>) -> Result<()> {
    bucket.sort_unstable();
    let mut i = 0;
    while i < bucket.len() {
        let key = [bucket[i][0], bucket[i][1]];
        let mut j = i + 1;
        while j < bucket.len() && [bucket[j][0], bucket[j][1]] == key {
            j += 1;
        }
        match j - i {
            1 => {}
            2 => {
                let (fa, fb) = (bucket[i][2], bucket[i + 1][2]);
                let (a, b) = (fa / 4, fb / 4);
                if a == b {
                    return Err(FvError::Shape(format!("tet {a} has the same face twice")));
                }
                // SAFETY: fa and fb are 4·tet + corner of tets below n, inside adj's 4n slots; every face lies in
                // exactly one bucket and once in it, so each slot is written by one thread, once.
                unsafe {
                    adj.write(fa as usize, b);
                    adj.write(fb as usize, a);
                }
            }
            m => {
                return Err(FvError::Shape(format!(
                    "face {:?} is shared by {m} tets (a non-manifold or duplicated mesh)",
                    [v as u32, key[0], key[1]]
                )));
            }
        }
        i = j;
    }
    Ok(())
}

/// A buffer that several threads write, each element by one of them (the callers' SAFETY notes say why).
struct Shared<T>(*mut T);

// SAFETY: the pointer is only written through `write`, at elements no other thread touches.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// # Safety
    /// `i` is inside the buffer, and no other thread reads or writes element `i` meanwhile.
    unsafe fn write(&self, i: usize, v: T) {
        // SAFETY: as the caller promises.
        unsafe { self.0.add(i).write(v) };
    }
}

#[cfg(test)]
mod tests {
    use super::{BOUNDARY, adjacency};
    use crate::generate::BoxMesh;
    use crate::mesh::TetMesh;

    /// Every face matched by brute force: the neighbour across face k of t is the other tet with the same three
    /// nodes.
    fn reference(mesh: &TetMesh) -> Vec<[u32; 4]> {
        let mut by_face = std::collections::HashMap::<[u32; 3], Vec<(usize, usize)>>::new();
        for (t, tet) in mesh.tets.iter().enumerate() {
            for k in 0..4 {
                let mut f: Vec<u32> = (0..4).filter(|&v| v != k).map(|v| tet[v]).collect();
                f.sort_unstable();
                by_face.entry([f[0], f[1], f[2]]).or_default().push((t, k));
            }
        }
        let mut adj = vec![[BOUNDARY; 4]; mesh.tets.len()];
        for sharing in by_face.values() {
            if let [(a, ka), (b, kb)] = sharing[..] {
                adj[a][ka] = b as u32;
                adj[b][kb] = a as u32;
            }
        }
        adj
    }

    #[test]
    fn adjacency_matches_brute_force_and_refuses_bad_meshes() {
        for (cells, shuffle) in [
            ([1, 1, 1], None),
            ([3, 2, 4], Some(5)),
            ([6, 5, 7], Some(9)),
        ] {
            let mesh = BoxMesh {
                cells,
                jitter: 0.2,
                shuffle,
                seed: 3,
            }
            .build()
            .expect("box");
            let want = reference(&mesh);
            assert_eq!(adjacency(&mesh).expect("adjacency"), want, "{cells:?}");
            // The generator's own adjacency, read off the subdivision, is the same.
            let (again, adj) = BoxMesh {
                cells,
                jitter: 0.2,
                shuffle,
                seed: 3,
            }
            .build_with_adjacency()
            .expect("box");
            assert!(again == mesh, "{cells:?}: the mesh differs");
            assert_eq!(adj, want, "{cells:?}: build_with_adjacency");
        }
        let mut mesh = BoxMesh::cube(2).build().expect("box");
        let nodes = mesh.nodes.len() as u32;
        mesh.tets.push(mesh.tets[0]);
        let e = adjacency(&mesh).unwrap_err().to_string();
        assert!(e.contains("shared by 3 tets"), "{e}");
        mesh.tets.pop();
        mesh.tets[1][2] = nodes;
        let e = adjacency(&mesh).unwrap_err().to_string();
        assert!(e.contains("tet 1 names node"), "{e}");
        mesh.tets[1] = [0, 0, 1, 2];
        let e = adjacency(&mesh).unwrap_err().to_string();
        assert!(e.contains("tet 1 has the same face twice"), "{e}");
    }
}
