//! Plain-Rust reference GEMM in f64: what every kernel is compared with.

/// A row-major M×N matrix view with leading dimension `ld` (elements between row starts).
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
}

impl Shape {
    pub fn new(rows: usize, cols: usize, ld: usize) -> Self {
        Self { rows, cols, ld }
    }
    /// Elements a buffer must hold: the last row need not be padded to `ld`.
    pub fn min_len(&self) -> usize {
        if self.rows == 0 {
            0
        } else {
            (self.rows - 1) * self.ld + self.cols
        }
    }
}

/// C = α·A·B + β·C computed in f64 (β = 0 never reads C, so NaN in C is overwritten, as in BLAS).
#[allow(clippy::too_many_arguments)]
pub fn gemm_ref(
    alpha: f64,
    a: &[f64],
    sa: Shape,
    b: &[f64],
    sb: Shape,
    beta: f64,
    c: &mut [f64],
    sc: Shape,
) {
    let (m, k, n) = (sa.rows, sa.cols, sb.cols);
    assert!(
        sb.rows == k && sc.rows == m && sc.cols == n,
        "shape mismatch"
    );
    let mut row = vec![0.0f64; n];
    for i in 0..m {
        row.iter_mut().for_each(|x| *x = 0.0);
        for p in 0..k {
            let aip = a[i * sa.ld + p];
            if aip == 0.0 {
                continue;
            }
            let brow = &b[p * sb.ld..p * sb.ld + n];
            for (r, bv) in row.iter_mut().zip(brow) {
                *r += aip * bv;
            }
        }
        let crow = &mut c[i * sc.ld..i * sc.ld + n];
        for (cv, r) in crow.iter_mut().zip(&row) {
            *cv = if beta == 0.0 {
                alpha * r
            } else {
                alpha * r + beta * *cv
            };
        }
    }
}

/// ‖x − y‖₂ / ‖y‖₂ over the M×N elements of two matrices stored with the same shape.
pub fn rel_err(x: &[f64], y: &[f64], s: Shape) -> f64 {
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for i in 0..s.rows {
        for j in 0..s.cols {
            let (a, b) = (x[i * s.ld + j], y[i * s.ld + j]);
            num += (a - b) * (a - b);
            den += b * b;
        }
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_gemm_by_hand() {
        // [1 2; 3 4] · [5 6; 7 8] = [19 22; 43 50]
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [5.0, 6.0, 7.0, 8.0];
        let mut c = [1.0, 1.0, f64::NAN, 1.0, 1.0, 9.0];
        let s = Shape::new(2, 2, 2);
        gemm_ref(2.0, &a, s, &b, s, 0.5, &mut c, Shape::new(2, 2, 3));
        assert_eq!(c[..2], [38.5, 44.5]);
        assert!(c[2].is_nan(), "padding is not touched");
        assert_eq!(c[3..5], [86.5, 100.5]);
    }
}
