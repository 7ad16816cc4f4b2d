//! A tetrahedral mesh: nodes, tets (positively oriented), physical groups; and the checks every mesh passes.

use crate::error::{FvError, Result};

/// Nodes and tetrahedra as read (element order is the file's).
#[derive(Clone, Debug, PartialEq)]
pub struct TetMesh {
    pub nodes: Vec<[f64; 3]>,
    /// Node indices (into `nodes`), oriented so that every volume is positive.
    pub tets: Vec<[u32; 4]>,
    /// Physical tag of each tet (0 when it has none).
    pub physical: Vec<i32>,
    /// (dimension, tag, name) of the file's physical groups.
    pub physical_names: Vec<(i32, i32, String)>,
}

/// Signed volume of the tet (a, b, c, d): ((b − a) × (c − a)) · (d − a) / 6.
pub fn signed_volume(p: [[f64; 3]; 4]) -> f64 {
    let sub = |u: [f64; 3], v: [f64; 3]| [u[0] - v[0], u[1] - v[1], u[2] - v[2]];
    let (u, v, w) = (sub(p[1], p[0]), sub(p[2], p[0]), sub(p[3], p[0]));
    let cross = [
        u[1] * v[2] - u[2] * v[1],
        u[2] * v[0] - u[0] * v[2],
        u[0] * v[1] - u[1] * v[0],
    ];
    (cross[0] * w[0] + cross[1] * w[1] + cross[2] * w[2]) / 6.0
}

/// What [`TetMesh::orient_and_check`] found for one tet.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Found {
    Fine,
    /// Negatively oriented: two nodes swap.
    Flip,
    NotFinite,
    /// |V| ≤ 1e-12 · ℓ³ with ℓ its longest edge.
    Degenerate,
}

/// How many tets ahead a loop over tets asks for their data ([`TetMesh::prefetch_tet`]).
pub(crate) const AHEAD: usize = 16;

impl TetMesh {
    /// Asks the cache for tet t's nodes, when there is a tet t (loops over tets in any order, gmsh's or a
    /// shuffle, call it [`AHEAD`] tets ahead).
    pub(crate) fn prefetch_tet(&self, t: usize) {
        if let Some(tet) = self.tets.get(t) {
            for &v in tet {
                if let Some(p) = self.nodes.get(v as usize) {
                    bespoke_gpu::prefetch(p);
                }
            }
        }
    }

    /// Tet t's state, signed volume and longest edge.
    fn examine(&self, t: usize) -> (Found, f64, f64) {
        let p = self.tet_points(t);
        if p.iter().flatten().any(|c| !c.is_finite()) {
            return (Found::NotFinite, f64::NAN, f64::NAN);
        }
        let v = signed_volume(p);
        let mut longest: f64 = 0.0;
        for a in 0..4 {
            for b in a + 1..4 {
                let d2: f64 = (0..3).map(|k| (p[a][k] - p[b][k]).powi(2)).sum();
                longest = longest.max(d2.sqrt());
            }
        }
        let found = if v.abs() <= 1e-12 * longest.powi(3) || longest == 0.0 {
            Found::Degenerate
        } else if v < 0.0 {
            Found::Flip
        } else {
            Found::Fine
        };
        (found, v, longest)
    }

    pub fn tet_points(&self, t: usize) -> [[f64; 3]; 4] {
        self.tets[t].map(|v| self.nodes[v as usize])
    }

    /// Orients every tet positively and rejects degenerate ones (|V| ≤ 1e-12 · ℓ³ with ℓ its longest edge);
    /// `label(t)` names tet t in errors (e.g. its element tag).
    pub(crate) fn orient_and_check(
        &mut self,
        path: &str,
        label: impl Fn(usize) -> String,
    ) -> Result<()> {
        if self.tets.is_empty() {
            return Err(FvError::Mesh {
                path: path.into(),
                at: None,
                why: "no tetrahedra (element type 4) in the mesh".into(),
            });
        }
        // The geometry on every core (a byte per tet), then the first problem reported and flips applied in
        // order.
        let mut found = vec![Found::Fine; self.tets.len()];
        bespoke_gpu::par_fill(&mut found, |t, f| {
            self.prefetch_tet(t + AHEAD);
            *f = self.examine(t).0;
        });
        for (t, &f) in found.iter().enumerate() {
            match f {
                Found::Fine => {}
                Found::Flip => self.tets[t].swap(2, 3),
                Found::NotFinite => {
                    return Err(FvError::Mesh {
                        path: path.into(),
                        at: Some(label(t)),
                        why: "a node coordinate is not finite".into(),
                    });
                }
                Found::Degenerate => {
                    let (_, v, longest) = self.examine(t);
                    return Err(FvError::Mesh {
                        path: path.into(),
                        at: Some(label(t)),
                        why: format!(
                            "degenerate tetrahedron (volume {v:e}, longest edge {longest:e})"
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_tet_volume() {
        let p = [
            [0.0, 0.0, 0.0],
            [1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, 0.0, 1.0],
        ];
        assert!((signed_volume(p) - 1.0 / 6.0).abs() < 1e-15);
        assert!((signed_volume([p[0], p[2], p[1], p[3]]) + 1.0 / 6.0).abs() < 1e-15);
    }

    #[test]
    fn orientation_is_fixed_and_flat_tets_rejected() {
        let mut m = TetMesh {
            nodes: vec![
                [0.0, 0.0, 0.0],
                [1.0, 0.0, 0.0],
                [0.0, 1.0, 0.0],
                [0.0, 0.0, 1.0],
                [1.0, 1.0, 0.0],
            ],
            tets: vec![[0, 2, 1, 3]],
            physical: vec![0],
            physical_names: vec![],
        };
        m.orient_and_check("m", |t| format!("tet {t}"))
            .expect("valid");
        assert!(signed_volume(m.tet_points(0)) > 0.0);
        m.tets.push([0, 1, 2, 4]);
        m.physical.push(0);
        let e = m
            .orient_and_check("m", |t| format!("element {}", t + 1))
            .expect_err("flat tet")
            .to_string();
        assert!(e.contains("degenerate") && e.contains("element 2"), "{e}");
    }
}
