//! Cell geometry and the diffusion operator `x'ᵢ = Σⱼ vᵢⱼ (x[idxᵢⱼ] − xᵢ)`, four slots per tet; the face
//! adjacency it is built on is `adjacency.rs`.

mod adjacency;

pub use adjacency::adjacency;

use bespoke_comm::ExactSum;
use bespoke_gpu::rng::{Rng, seeded};
use bespoke_gpu::{par_fill, prefetch};

use crate::error::{FvError, Result};
use crate::mesh::{AHEAD, TetMesh, signed_volume};

/// Marks a slot whose face lies on the boundary.
pub const BOUNDARY: u32 = u32::MAX;

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

/// Face `k` of tet `t` (opposite its corner k): area, centroid and a normal (the edges' cross product, of either
/// orientation).
fn face(mesh: &TetMesh, t: usize, k: usize) -> (f64, [f64; 3], [f64; 3]) {
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
        cross,
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

impl Boundary {
    /// Refuses a Dirichlet value past `dtype`'s range: the field is stored less the value it tends to, so every
    /// stored entry would be ±∞ (f32: |value| > 3.4e38). Checked before any device opens; `Diffusion` checks each
    /// stored entry again as it uploads them.
    pub fn check_precision(&self, dtype: bespoke_gpu::DType) -> Result<()> {
        match *self {
            // A value that is not finite at all is `Operator::diffusion`'s to refuse, in its own words.
            Boundary::Dirichlet(v)
                if v.is_finite() && dtype == bespoke_gpu::DType::F32 && !(v as f32).is_finite() =>
            {
                Err(FvError::param(
                    "dirichlet",
                    format!("{v:e}"),
                    "past f32's range: use f64 (the field is stored less the value it tends to)",
                ))
            }
            _ => Ok(()),
        }
    }
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
                let (area, fc, normal) = face(mesh, t, k);
                if nb != BOUNDARY {
                    let d = dist(centroids[t], centroids[nb as usize]);
                    // Tets that share a face lie on its two sides; on one side they overlap (NaN marks it).
                    let side =
                        |c: [f64; 3]| (0..3).map(|i| normal[i] * (c[i] - fc[i])).sum::<f64>();
                    values[k] = if side(centroids[t]) * side(centroids[nb as usize]) < 0.0 {
                        kappa * area / (d * volumes[t])
                    } else {
                        f64::NAN
                    };
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
        let overlapping = rows.iter().enumerate().find_map(|(t, (v, i))| {
            (0..4)
                .find(|&k| !v[k].is_finite())
                .map(|k| (t, i[k] as usize))
        });
        if let Some((t, nb)) = overlapping {
            return Err(FvError::Shape(format!(
                "tets {t} and {nb} (numbered from 0 in the mesh's order) share a face but lie on the same side \
                 of it: they overlap (a node duplicated, or a tet inverted); fix the mesh"
            )));
        }
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

    /// The Δt the runs and benches take: half the explicit Euler bound, [`default_dt`].
    pub fn default_dt(&self) -> f64 {
        default_dt(self.max_row_sum())
    }

    /// The volume integral Σ Vᵢ·xᵢ of a field (its "mass"; explicit Euler conserves it under zero flux), summed
    /// exactly and rounded once: the same bits whatever the order of the tets (an ordering's permutation, a
    /// partition into ranks: `DistDiffusion::mass`), so a drift is the scheme's, not the summation's.
    pub fn mass(&self, x: &[f64]) -> f64 {
        let mut m = ExactSum::new();
        self.volumes.iter().zip(x).for_each(|(v, x)| m.add(v * x));
        m.value()
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
        if width == 0.0 {
            // One tet (every centroid at the middle): its peak, not 0 / 0.
            return vec![1.0; self.n()];
        }
        self.centroids
            .iter()
            .map(|c| {
                (-(0..3).map(|d| (c[d] - mid[d]).powi(2)).sum::<f64>() / (width * width)).exp()
            })
            .collect()
    }

    /// The ghost value `x[n]` (Dirichlet value, or 0).
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
    if n == 0 {
        return Err(FvError::param(
            "tets",
            n,
            "an ideal operator needs at least one tet",
        ));
    }
    if block == 0 {
        return Err(FvError::param(
            "block-size",
            block,
            "an ideal operator needs blocks of at least one tet",
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

/// Half the explicit Euler bound 1 / `max_row_sum`; 1 where no row couples anything (a mesh of one tet under zero
/// flux: the step leaves the field as it is, and every Δt is stable).
pub fn default_dt(max_row_sum: f64) -> f64 {
    if max_row_sum > 0.0 {
        0.5 / max_row_sum
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::{Boundary, Operator, adjacency, ideal_operator};
    use crate::mesh::TetMesh;

    #[test]
    fn dirichlet_values_past_f32_are_refused_for_f32_only() {
        use bespoke_gpu::DType;
        for (b, f32_ok) in [
            (Boundary::ZeroFlux, true),
            (Boundary::Dirichlet(-5.0), true),
            (Boundary::Dirichlet(3.0e38), true),
            (Boundary::Dirichlet(1e39), false),
            (Boundary::Dirichlet(-1e300), false),
            // Not finite at all: `Operator::diffusion` refuses it, in its own words.
            (Boundary::Dirichlet(f64::NAN), true),
        ] {
            assert_eq!(b.check_precision(DType::F32).is_ok(), f32_ok, "{b:?}");
            assert!(b.check_precision(DType::F64).is_ok(), "{b:?}");
        }
        let e = Boundary::Dirichlet(1e39)
            .check_precision(DType::F32)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("dirichlet = 1e39") && e.contains("use f64"),
            "{e}"
        );
    }

    #[test]
    fn a_mesh_that_couples_nothing_takes_a_finite_step() {
        // One tet under zero flux: no row couples anything, so every Δt is stable; the runs' Δt was 0.5 / 0 = ∞,
        // refused as "Δt < 1 / max row sum = inf". Under a Dirichlet boundary the tet couples to its ghost.
        let mesh = TetMesh {
            nodes: vec![
                [0.0, 0.0, 0.0],
                [1.0, 0.0, 0.0],
                [0.0, 1.0, 0.0],
                [0.0, 0.0, 1.0],
            ],
            tets: vec![[0, 1, 2, 3]],
            physical: vec![0],
            physical_names: vec![],
        };
        let adj = adjacency(&mesh).expect("adjacency");
        let op = Operator::diffusion(&mesh, &adj, 1.0, Boundary::ZeroFlux).expect("operator");
        assert_eq!(op.max_row_sum(), 0.0);
        assert_eq!(op.default_dt(), 1.0);
        crate::diffusion::check_dt(&op, op.default_dt()).expect("a finite step is stable");
        assert_eq!(op.gaussian_bump(), vec![1.0]);
        assert_eq!(op.step_reference(&[0.25], op.default_dt()), vec![0.25]);
        let op = Operator::diffusion(&mesh, &adj, 1.0, Boundary::Dirichlet(1.0)).expect("operator");
        assert!(op.max_row_sum() > 0.0);
        assert_eq!(op.default_dt(), 0.5 / op.max_row_sum());
    }

    #[test]
    fn tets_on_the_same_side_of_their_shared_face_are_refused() {
        // Two tets on the face (0, 1, 2), their apexes at the same point (a duplicated node): they overlap, and
        // the flux between their coincident centroids was ∞ (Δt = 0, refused as such).
        let mesh = TetMesh {
            nodes: vec![
                [0.0, 0.0, 0.0],
                [1.0, 0.0, 0.0],
                [0.0, 1.0, 0.0],
                [0.0, 0.0, 1.0],
                [0.0, 0.0, 1.0],
            ],
            tets: vec![[0, 1, 2, 3], [0, 1, 2, 4]],
            physical: vec![0, 0],
            physical_names: vec![],
        };
        let adj = adjacency(&mesh).expect("adjacency");
        let e = Operator::diffusion(&mesh, &adj, 1.0, Boundary::ZeroFlux)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tets 0 and 1") && e.contains("overlap"), "{e}");
        // The apex mirrored below the face: a valid pair.
        let mut mesh = mesh;
        mesh.nodes[4] = [0.0, 0.0, -1.0];
        mesh.tets[1] = [0, 2, 1, 4];
        let adj = adjacency(&mesh).expect("adjacency");
        assert!(Operator::diffusion(&mesh, &adj, 1.0, Boundary::ZeroFlux).is_ok());
    }

    #[test]
    fn ideal_operators_name_the_bad_parameter() {
        let e = ideal_operator(0, 32, 1).unwrap_err().to_string();
        assert!(e.starts_with("tets = 0"), "{e}");
        let e = ideal_operator(64, 0, 1).unwrap_err().to_string();
        assert!(e.starts_with("block-size = 0"), "{e}");
        let op = ideal_operator(64, 16, 1).expect("ideal operator");
        assert_eq!(op.n(), 64);
    }
}
