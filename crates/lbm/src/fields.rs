//! Macroscopic fields read back from a lattice, and what is derived from them on the host.

/// ρ and u of every cell (row-major, y up).
#[derive(Clone, Debug)]
pub struct Fields {
    pub nx: usize,
    pub ny: usize,
    pub rho: Vec<f32>,
    pub ux: Vec<f32>,
    pub uy: Vec<f32>,
}

impl Fields {
    pub fn at(&self, x: usize, y: usize) -> (f64, [f64; 2]) {
        let i = y * self.nx + x;
        (
            f64::from(self.rho[i]),
            [f64::from(self.ux[i]), f64::from(self.uy[i])],
        )
    }

    /// The first non-finite ρ or u, as (which, x, y).
    pub fn first_non_finite(&self) -> Option<(&'static str, usize, usize)> {
        for (name, v) in [("rho", &self.rho), ("ux", &self.ux), ("uy", &self.uy)] {
            if let Some(k) = v.iter().position(|x| !x.is_finite()) {
                return Some((name, k % self.nx, k / self.nx));
            }
        }
        None
    }

    /// |u| per cell.
    pub fn speed(&self) -> Vec<f32> {
        self.ux
            .iter()
            .zip(&self.uy)
            .map(|(a, b)| a.hypot(*b))
            .collect()
    }

    /// Vorticity ∂u_y/∂x − ∂u_x/∂y by central differences (periodic wrap at the edges).
    pub fn vorticity(&self) -> Vec<f32> {
        let (nx, ny) = (self.nx, self.ny);
        let mut w = vec![0.0; nx * ny];
        for y in 0..ny {
            let (ym, yp) = ((y + ny - 1) % ny, (y + 1) % ny);
            for x in 0..nx {
                let (xm, xp) = ((x + nx - 1) % nx, (x + 1) % nx);
                let dvy = self.uy[y * nx + xp] - self.uy[y * nx + xm];
                let dux = self.ux[yp * nx + x] - self.ux[ym * nx + x];
                w[y * nx + x] = 0.5 * (dvy - dux);
            }
        }
        w
    }

    /// Bilinear interpolation of a field at a point in cell coordinates (cell centres at integers).
    pub fn sample(field: &[f32], nx: usize, ny: usize, x: f64, y: f64) -> f64 {
        Self::bilinear(nx, ny, x, y)
            .iter()
            .map(|&((x, y), w)| w * f64::from(field[y * nx + x]))
            .sum()
    }

    /// The four cells and weights of `sample`'s interpolation at (x, y), clamped to the lattice.
    pub fn bilinear(nx: usize, ny: usize, x: f64, y: f64) -> [((usize, usize), f64); 4] {
        let x = x.clamp(0.0, (nx - 1) as f64);
        let y = y.clamp(0.0, (ny - 1) as f64);
        let (x0, y0) = (x.floor() as usize, y.floor() as usize);
        let (x1, y1) = ((x0 + 1).min(nx - 1), (y0 + 1).min(ny - 1));
        let (tx, ty) = (x - x0 as f64, y - y0 as f64);
        [
            ((x0, y0), (1.0 - ty) * (1.0 - tx)),
            ((x1, y0), (1.0 - ty) * tx),
            ((x0, y1), ty * (1.0 - tx)),
            ((x1, y1), ty * tx),
        ]
    }
}
