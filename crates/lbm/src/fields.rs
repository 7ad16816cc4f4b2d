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

/// ρ and u of a lattice's own cells (`Lattice::own_fields`): the whole domain on a single domain, one rank's block
/// without its halo on a distributed lattice. What a case's metrics read, reducing over ranks what they sum or
/// compare, so that no rank holds the whole domain.
#[derive(Clone, Debug)]
pub struct OwnFields {
    /// The whole domain's size.
    pub domain: [usize; 2],
    /// The domain's cell of this part's first cell.
    pub origin: [usize; 2],
    /// This part's size; the arrays are row-major over it.
    pub size: [usize; 2],
    pub rho: Vec<f32>,
    pub ux: Vec<f32>,
    pub uy: Vec<f32>,
}

impl OwnFields {
    /// Every cell as (x, y, k): its place in the domain and its index in the arrays.
    pub fn cells(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        let ([w, h], [x0, y0]) = (self.size, self.origin);
        (0..h).flat_map(move |y| (0..w).map(move |x| (x0 + x, y0 + y, y * w + x)))
    }

    /// The first non-finite value in [`Fields::first_non_finite`]'s order (ρ, then u_x, then u_y; each row-major
    /// over the domain) as one number, so that ranks agree on the domain's first by taking the smallest.
    pub(crate) fn first_non_finite_key(&self) -> Option<u64> {
        let n = (self.domain[0] * self.domain[1]) as u64;
        [&self.rho, &self.ux, &self.uy]
            .iter()
            .enumerate()
            .find_map(|(f, v)| {
                self.cells()
                    .filter(|&(_, _, k)| !v[k].is_finite())
                    .map(|(x, y, _)| (y * self.domain[0] + x) as u64)
                    .min()
                    .map(|i| f as u64 * n + i)
            })
    }

    /// What a [`first_non_finite_key`](Self::first_non_finite_key) names: (field, x, y).
    pub(crate) fn decode_key(&self, key: u64) -> (&'static str, usize, usize) {
        let n = (self.domain[0] * self.domain[1]) as u64;
        let name = ["rho", "ux", "uy"][(key / n).min(2) as usize];
        let i = (key % n) as usize;
        (name, i % self.domain[0], i / self.domain[0])
    }
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
        let size = [self.nx, self.ny];
        let lines = wrapped_lines(&self.ux, &self.uy, size);
        vorticity_within(&self.ux, &self.uy, size, &lines)
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

/// The u a central difference reads around a `w × h` rectangle when it wraps onto itself: u_y of its last and
/// first columns (the lines left and right of it) and u_x of its last and first rows (below and above it).
pub(crate) fn wrapped_lines(ux: &[f32], uy: &[f32], [w, h]: [usize; 2]) -> [Vec<f32>; 4] {
    let column = |x: usize| -> Vec<f32> { (0..h).map(|y| uy[y * w + x]).collect() };
    let row = |y: usize| -> Vec<f32> { ux[y * w..(y + 1) * w].to_vec() };
    [column(w - 1), column(0), row(h - 1), row(0)]
}

/// Vorticity ∂u_y/∂x − ∂u_x/∂y by central differences over a `w × h` rectangle of u, with the lines around it
/// `[left, right, below, above]` (u_y of the columns beside it, u_x of the rows below and above): the one
/// arithmetic of a whole domain ([`Fields::vorticity`], its own far edges around it) and of a rank's block
/// (`Lattice::own_vorticity`, its neighbours' edges), so the two agree bit for bit.
pub(crate) fn vorticity_within(
    ux: &[f32],
    uy: &[f32],
    [w, h]: [usize; 2],
    [left, right, below, above]: &[Vec<f32>; 4],
) -> Vec<f32> {
    let mut vort = vec![0.0f32; w * h];
    for y in 0..h {
        for x in 0..w {
            let k = y * w + x;
            let uy_xp = if x + 1 < w { uy[k + 1] } else { right[y] };
            let uy_xm = if x > 0 { uy[k - 1] } else { left[y] };
            let ux_yp = if y + 1 < h { ux[k + w] } else { above[x] };
            let ux_ym = if y > 0 { ux[k - w] } else { below[x] };
            let dvy = uy_xp - uy_xm;
            let dux = ux_yp - ux_ym;
            vort[k] = 0.5 * (dvy - dux);
        }
    }
    vort
}
