//! The constant operator A that a specialised kernel is generated for: dense storage plus the sparsity facts
//! the generators and the tuner use.

use bespoke_gpu::{DType, stable_hash};

use crate::error::{MmError, Result};

/// A constant M×K operator matrix, row-major, every entry finite. Zeros are dropped by the generators.
#[derive(Clone, Debug, PartialEq)]
pub struct Operator {
    /// What to call it in reports (file stem for Matrix Market input).
    pub name: String,
    pub m: usize,
    pub k: usize,
    a: Vec<f64>,
    /// β recorded with the matrix (the PyFR suite's `% PyFR beta for this op: <β>` header), if any.
    pub beta_hint: Option<f64>,
}

impl Operator {
    /// From a dense row-major M×K array; refuses empty shapes, wrong lengths and non-finite entries.
    pub fn from_dense(name: impl Into<String>, m: usize, k: usize, a: Vec<f64>) -> Result<Self> {
        let name = name.into();
        let bad = |reason: String| MmError::Matrix {
            source_name: name.clone(),
            line: None,
            reason,
        };
        if m == 0 || k == 0 {
            return Err(bad(format!("empty operator {m}×{k}")));
        }
        if m.checked_mul(k) != Some(a.len()) {
            return Err(bad(format!(
                "{} values given for a {m}×{k} operator ({} expected)",
                a.len(),
                m.saturating_mul(k)
            )));
        }
        if let Some(i) = a.iter().position(|v| !v.is_finite()) {
            return Err(bad(format!(
                "entry ({}, {}) is {} (operators must be finite)",
                i / k + 1,
                i % k + 1,
                a[i]
            )));
        }
        if m > u32::MAX as usize / 2 || k > u32::MAX as usize / 2 {
            return Err(bad(format!("{m}×{k} exceeds 32-bit indexing")));
        }
        Ok(Self {
            name,
            m,
            k,
            a,
            beta_hint: None,
        })
    }

    /// Refuses an entry past `dtype`'s range (f32: |a| > 3.4e38): on the device it would be ±∞ (and an unrolled
    /// kernel's literal invalid WGSL).
    pub fn check_precision(&self, dtype: DType) -> Result<()> {
        if dtype == DType::F64 {
            return Ok(());
        }
        match self.a.iter().position(|&v| !(v as f32).is_finite()) {
            Some(i) => Err(MmError::Range {
                what: format!(
                    "{} entry ({}, {})",
                    self.name,
                    i / self.k + 1,
                    i % self.k + 1
                ),
                value: self.a[i],
                dtype: dtype.wgsl(),
            }),
            None => Ok(()),
        }
    }

    pub fn get(&self, i: usize, p: usize) -> f64 {
        self.a[i * self.k + p]
    }

    /// The row-major values (lda = k).
    pub fn values(&self) -> &[f64] {
        &self.a
    }

    /// The non-zeros of each row as (column, value), columns ascending.
    pub fn rows(&self) -> Vec<Vec<(usize, f64)>> {
        self.a
            .chunks(self.k)
            .map(|r| {
                r.iter()
                    .enumerate()
                    .filter(|(_, v)| **v != 0.0)
                    .map(|(p, v)| (p, *v))
                    .collect()
            })
            .collect()
    }

    pub fn nnz(&self) -> usize {
        self.a.iter().filter(|v| **v != 0.0).count()
    }

    /// Fraction of zero entries.
    pub fn sparsity(&self) -> f64 {
        1.0 - self.nnz() as f64 / self.a.len() as f64
    }

    /// Distinct non-zero magnitudes (what coefficient folding can exploit).
    pub fn distinct_magnitudes(&self) -> usize {
        let mut v: Vec<u64> = self
            .a
            .iter()
            .filter(|v| **v != 0.0)
            .map(|v| v.abs().to_bits())
            .collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    }

    /// Columns of A (rows of B) with at least one non-zero: the rows of B a kernel must read.
    pub fn used_columns(&self) -> Vec<usize> {
        (0..self.k)
            .filter(|&p| (0..self.m).any(|i| self.get(i, p) != 0.0))
            .collect()
    }

    /// A stable hash of the shape and the exact bits of every entry: keys the tuner's on-disk decisions.
    pub fn hash(&self) -> u64 {
        let bits: Vec<u8> = self
            .a
            .iter()
            .flat_map(|v| v.to_bits().to_le_bytes())
            .collect();
        stable_hash(&[
            &(self.m as u64).to_le_bytes(),
            &(self.k as u64).to_le_bytes(),
            &bits,
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analysis_of_a_small_operator() {
        let op =
            Operator::from_dense("t", 2, 4, vec![0.5, 0.0, -0.5, 0.0, 0.0, 0.0, 2.0, 0.0]).unwrap();
        assert_eq!(op.nnz(), 3);
        assert_eq!(op.rows()[0], vec![(0, 0.5), (2, -0.5)]);
        assert_eq!(op.distinct_magnitudes(), 2);
        assert_eq!(op.used_columns(), vec![0, 2]);
        assert!((op.sparsity() - 5.0 / 8.0).abs() < 1e-15);
        let mut other = op.values().to_vec();
        other[6] = 2.0000000000000004;
        let op2 = Operator::from_dense("t", 2, 4, other).unwrap();
        assert_ne!(op.hash(), op2.hash(), "one ulp changes the hash");
    }

    #[test]
    fn bad_operators_are_refused_with_the_reason() {
        let e = Operator::from_dense("x", 2, 2, vec![1.0; 3]).unwrap_err();
        assert!(e.to_string().contains("3 values"), "{e}");
        let e = Operator::from_dense("x", 1, 2, vec![1.0, f64::NAN]).unwrap_err();
        assert!(e.to_string().contains("(1, 2) is NaN"), "{e}");
        assert!(Operator::from_dense("x", 0, 2, vec![]).is_err());
        // Finite in f64, past f32: refused for f32 kernels by entry, taken for f64.
        let op = Operator::from_dense("big", 2, 2, vec![1.0, 0.0, 0.0, -1e39]).unwrap();
        let e = op.check_precision(DType::F32).unwrap_err().to_string();
        assert!(
            e.contains("big entry (2, 2) = -1e39 is past f32's range"),
            "{e}"
        );
        assert!(op.check_precision(DType::F64).is_ok());
        let fits = Operator::from_dense("max", 1, 1, vec![f32::MAX as f64]).unwrap();
        assert!(fits.check_precision(DType::F32).is_ok());
    }
}
