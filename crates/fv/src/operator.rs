//! Face adjacency, cell geometry and the diffusion operator x'ᵢ = Σⱼ vᵢⱼ (x[idxᵢⱼ] − xᵢ), four slots per tet.

use bespoke_gpu::rng::{Rng, seeded};
use bespoke_gpu::{par_fill, prefetch};

use crate::error::{FvError, Result};
use crate::mesh::{AHEAD, TetMesh, signed_volume};

/// Marks a slot whose face lies on the boundary.
pub const BOUNDARY: u32 = u32::MAX;

/// Slot k of tet t is the face opposite its vertex k; the neighbour across it, or [`BOUNDARY`].
pub fn adjacency(mesh: &TetMesh) -> Result<Vec<[u32; 4]>> {
    let n = mesh.tets.len();
    if n > (u32::MAX / 4) as usize {
        return Err(FvError::Shape(format!(
            "{n} tets: faces are numbered 4·tet + corner in 32 bits"
        )));
    }
    let face_of = |tet: &[u32; 4], k: usize| {
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
    };
    // Faces bucketed by their smallest node (a counting sort: one pass to count, one to place), then each small
    // bucket sorted by the other two nodes: linear in the faces, where one sort of all 4n took most of a 10 M-tet
    // mesh's set-up.
    let nodes = mesh.nodes.len();
    if let Some(t) = mesh
        .tets
        .iter()
        .position(|tet| tet.iter().any(|&v| v as usize >= nodes))
    {
        return Err(FvError::Shape(format!(
            "tet {t} names node {:?} of a mesh of {nodes} nodes",
            mesh.tets[t]
        )));
    }
    let mut start = vec![0u32; nodes + 1];
    for tet in &mesh.tets {
        for k in 0..4 {
            start[face_of(tet, k)[0] as usize + 1] += 1;
        }
    }
    for v in 0..nodes {
        start[v + 1] += start[v];
    }
    // (second node, third node, 4·tet + corner), by bucket.
    let mut faces = vec![[0u32; 3]; 4 * n];
    let mut next = start.clone();
    for (t, tet) in mesh.tets.iter().enumerate() {
        for k in 0..4 {
            let f = face_of(tet, k);
            let at = &mut next[f[0] as usize];
            faces[*at as usize] = [f[1], f[2], 4 * t as u32 + k as u32];
            *at += 1;
        }
    }
    drop(next);
    let mut adj = vec![[BOUNDARY; 4]; n];
    for v in 0..nodes {
        let bucket = &mut faces[start[v] as usize..start[v + 1] as usize];
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
                    let (a, ka) = (bucket[i][2] / 4, bucket[i][2] % 4);
                    let (b, kb) = (bucket[i + 1][2] / 4, bucket[i + 1][2] % 4);
                    if a == b {
                        return Err(FvError::Shape(format!("tet {a} has the same face twice")));
                    }
                    adj[a as usize][ka as usize] = b;
                    adj[b as usize][kb as usize] = a;
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
    }
    Ok(adj)
}

/// Centroid and volume of every tet.
pub fn cells(mesh: &TetMesh) -> (Vec<[f64; 3]>, Vec<f64>) {
    // On every core: a 10 M-tet box's operator took 20 s on one.
    let mut out = vec![([0.0; 3], 0.0); mesh.tets.len()];
    par_fill(&mut out, |t, o| {
        mesh.prefetch_tet(t + AHEAD);
        let p = mesh.tet_points(t);
        let c = std::array::from_fn(|d| (p[0][d] + p[1][d] + p[2][d] + p[3][d]) / 4.0);
        *o = (c, signed_volume(p).abs());
    });
    out.into_iter().unzip()
}

/// Area and centroid of the face of tet `t` opposite its vertex `k`.
fn face(mesh: &TetMesh, t: usize, k: usize) -> (f64, [f64; 3]) {
    let p = mesh.tet_points(t);
    let mut q = [[0.0; 3]; 3];
    for (j, v) in (0..4).filter(|&v| v != k).enumerate() {
        q[j] = p[v];
    }
    let u: [f64; 3] = std::array::from_fn(|d| q[1][d] - q[0][d]);
    let w: [f64; 3] = std::array::from_fn(|d| q[2][d] - q[0][d]);
    let cross = [
        u[1] * w[2] - u[2] * w[1],
        u[2] * w[0] - u[0] * w[2],
        u[0] * w[1] - u[1] * w[0],
    ];
    let area = 0.5 * (cross[0] * cross[0] + cross[1] * cross[1] + cross[2] * cross[2]).sqrt();
    (
        area,
        std::array::from_fn(|d| (q[0][d] + q[1][d] + q[2][d]) / 3.0),
    )
}

fn dist(a: [f64; 3], b: [f64; 3]) -> f64 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

/// What happens at boundary faces.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Boundary {
    /// No flux: the slot has value 0 and points at the tet itself.
    ZeroFlux,
    /// A fixed value outside each boundary face: the slot points at a ghost entry `x[n]` holding it, with the
    /// coefficient of the face to its centroid.
    Dirichlet(f64),
}

/// The operator in ELLPACK form, row-major per tet (layouts for the device are made from it).
#[derive(Clone, Debug, PartialEq)]
pub struct Operator {
    pub values: Vec<[f64; 4]>,
    /// Neighbour index per slot; `n` (= number of tets) is the Dirichlet ghost.
    pub indices: Vec<[u32; 4]>,
    pub volumes: Vec<f64>,
    pub centroids: Vec<[f64; 3]>,
    pub boundary: Boundary,
}

impl Operator {
    pub fn n(&self) -> usize {
        self.values.len()
    }

    /// Diffusion with conductivity κ: vᵢⱼ = κ·A_f / (d_ij·V_i), d_ij the distance between centroids (to the face
    /// centroid at a Dirichlet boundary).
    pub fn diffusion(
        mesh: &TetMesh,
        adj: &[[u32; 4]],
        kappa: f64,
        boundary: Boundary,
    ) -> Result<Self> {
        if !(kappa > 0.0 && kappa.is_finite()) {
            return Err(FvError::param(
                "kappa",
                kappa,
                "conductivity must be positive and finite",
            ));
        }
        if let Boundary::Dirichlet(v) = boundary
            && !v.is_finite()
        {
            return Err(FvError::param(
                "dirichlet",
                v,
                "boundary value must be finite",
            ));
        }
        let n = mesh.tets.len();
        if n >= u32::MAX as usize {
            return Err(FvError::Shape(format!(
                "{n} tets do not fit 32-bit indices"
            )));
        }
        let (centroids, volumes) = cells(mesh);
        let mut rows = vec![([0.0; 4], [0u32; 4]); n];
        par_fill(&mut rows, |t, (values, indices)| {
            // Tets come in any order (gmsh's, or a shuffle): ask early for the nodes and the neighbours'
            // centroids a later tet reads.
            mesh.prefetch_tet(t + AHEAD);
            if let Some(row) = adj.get(t + AHEAD) {
                for &nb in row {
                    if let Some(c) = centroids.get(nb as usize) {
                        prefetch(c);
                    }
                }
            }
            for k in 0..4 {
                let nb = adj[t][k];
                let (area, fc) = face(mesh, t, k);
                if nb != BOUNDARY {
                    let d = dist(centroids[t], centroids[nb as usize]);
                    values[k] = kappa * area / (d * volumes[t]);
                    indices[k] = nb;
                } else {
                    match boundary {
                        Boundary::ZeroFlux => indices[k] = t as u32,
                        Boundary::Dirichlet(_) => {
                            let d = dist(centroids[t], fc);
                            values[k] = kappa * area / (d * volumes[t]);
                            indices[k] = n as u32;
                        }
                    }
                }
            }
        });
        let (values, indices) = rows.into_iter().unzip();
        Ok(Self {
            values,
            indices,
            volumes,
            centroids,
            boundary,
        })
    }

    /// max_i Σ_j v_ij: explicit Euler is stable for Δt < 1 / this.
    pub fn max_row_sum(&self) -> f64 {
        self.values
            .iter()
            .map(|r| r.iter().sum::<f64>())
            .fold(0.0, f64::max)
    }

    /// The volume integral Σ Vᵢ·xᵢ of a field (its "mass"; explicit Euler conserves it under zero flux).
    pub fn mass(&self, x: &[f64]) -> f64 {
        self.volumes.iter().zip(x).map(|(v, x)| v * x).sum()
    }

    /// |m₁ − m₀| / |m₀|: the mass drift of a run, relative (guarded against m₀ = 0).
    pub fn relative_drift(m0: f64, m1: f64) -> f64 {
        (m1 - m0).abs() / m0.abs().max(f64::MIN_POSITIVE)
    }

    /// A Gaussian bump exp(−|c − mid|² / w²) at every tet's centroid c, around the middle of the mesh's bounding
    /// box, w a fifth of its largest extent: the initial field of `bespoke fv run`.
    pub fn gaussian_bump(&self) -> Vec<f64> {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for c in &self.centroids {
            for d in 0..3 {
                lo[d] = lo[d].min(c[d]);
                hi[d] = hi[d].max(c[d]);
            }
        }
        let mid: [f64; 3] = std::array::from_fn(|d| 0.5 * (lo[d] + hi[d]));
        let width = 0.2 * (0..3).map(|d| hi[d] - lo[d]).fold(0.0, f64::max);
        self.centroids
            .iter()
            .map(|c| {
                (-(0..3).map(|d| (c[d] - mid[d]).powi(2)).sum::<f64>() / (width * width)).exp()
            })
            .collect()
    }

    /// The ghost value x[n] (Dirichlet value, or 0).
    pub fn ghost(&self) -> f64 {
        match self.boundary {
            Boundary::Dirichlet(v) => v,
            Boundary::ZeroFlux => 0.0,
        }
    }

    /// Interior neighbours as a symmetric graph in CSR (no self loops, no ghost).
    pub fn graph(&self) -> (Vec<u32>, Vec<u32>) {
        let n = self.n();
        let mut xadj = Vec::with_capacity(n + 1);
        let mut adjncy = Vec::with_capacity(4 * n);
        xadj.push(0);
        for (t, row) in self.indices.iter().enumerate() {
            for &j in row {
                if (j as usize) < n && j as usize != t {
                    adjncy.push(j);
                }
            }
            xadj.push(adjncy.len() as u32);
        }
        (xadj, adjncy)
    }

    /// One explicit Euler step x ← x + Δt·L·x on the CPU (f64), `x` holding n + 1 entries (ghost last).
    pub fn step_reference(&self, x: &[f64], dt: f64) -> Vec<f64> {
        let n = self.n();
        let mut y = x.to_vec();
        for i in 0..n {
            let xi = x[i];
            let acc: f64 = (0..4)
                .map(|s| self.values[i][s] * (x[self.indices[i][s] as usize] - xi))
                .sum();
            y[i] = xi + dt * acc;
        }
        y
    }
}

/// n tets in blocks of `block`; each tet gets four distinct random neighbours from its own block (fewer, with
/// zero-flux self slots, when the block is smaller than 5) and positive coefficients.
pub fn ideal_operator(n: usize, block: usize, seed: u64) -> Result<Operator> {
    if n == 0 || block == 0 {
        return Err(FvError::param(
            "block-size",
            block,
            "ideal operators need n ≥ 1 and a block ≥ 1",
        ));
    }
    if u32::try_from(n).is_err() {
        return Err(FvError::param(
            "tets",
            n,
            "too many tets for 32-bit indices",
        ));
    }
    let mut rng = seeded(seed);
    let mut values = Vec::with_capacity(n);
    let mut indices = Vec::with_capacity(n);
    for i in 0..n {
        let start = i / block * block;
        let len = block.min(n - start);
        let mut row = [i as u32; 4];
        let mut vals = [0.0; 4];
        let mut k = 0;
        let mut tries = 0;
        while k < 4 && len > 1 && tries < 64 {
            tries += 1;
            let j = (start + rng.random_range(0..len)) as u32;
            if j as usize != i && !row[..k].contains(&j) {
                row[k] = j;
                vals[k] = 0.5 + rng.random::<f64>();
                k += 1;
            }
        }
        values.push(vals);
        indices.push(row);
    }
    Ok(Operator {
        values,
        indices,
        volumes: vec![1.0; n],
        centroids: vec![[0.0; 3]; n],
        boundary: Boundary::ZeroFlux,
    })
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
