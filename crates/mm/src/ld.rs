//! Linkage disequilibrium as a popcount GEMM (Alachiotis, Popovici & Low 2016): SNPs as bit vectors over samples,
//! pair counts n_AB = popcount(a & b) on the device, r² = D² / (p_A(1−p_A)·p_B(1−p_B)) with D = p_AB − p_A·p_B.
//!
//! Input format (`bespoke mm ld FILE`): one SNP per line, one `0`/`1` character per sample (1 = the derived
//! allele); every line the same length; blank lines and lines starting with `#` are skipped.

use bespoke_gpu::Gpu;
use bespoke_gpu::rng::{Rng, seeded};

use crate::dense::microbench::Op;
use crate::dense::model::Machine;
use crate::dense::params::{DenseParams, TileLimits};
use crate::error::{MmError, Result};
use crate::popcount::{PopShape, popcount_pick, popcount_plan};

/// SNPs packed 32 samples per word, padding bits zero.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnpMatrix {
    pub snps: usize,
    pub samples: usize,
    /// Words per SNP: ⌈samples / 32⌉.
    pub words: usize,
    pub bits: Vec<u32>,
}

impl SnpMatrix {
    /// Words per SNP for `samples` samples (32 to a word).
    pub fn words_for(samples: usize) -> usize {
        samples.div_ceil(32)
    }

    /// Packs rows of 0/1 values; every row must have `samples` entries.
    pub fn from_rows<R: AsRef<[bool]>>(rows: &[R]) -> Result<Self> {
        let samples = rows.first().map_or(0, |r| r.as_ref().len());
        if rows.is_empty() || samples == 0 {
            return Err(MmError::Shape("no SNPs or no samples".into()));
        }
        let words = Self::words_for(samples);
        let mut bits = vec![0u32; rows.len() * words];
        for (i, r) in rows.iter().enumerate() {
            let r = r.as_ref();
            if r.len() != samples {
                return Err(MmError::Shape(format!(
                    "SNP {} has {} samples, the first has {samples}",
                    i + 1,
                    r.len()
                )));
            }
            for (s, _) in r.iter().enumerate().filter(|(_, b)| **b) {
                bits[i * words + s / 32] |= 1 << (s % 32);
            }
        }
        Ok(Self {
            snps: rows.len(),
            samples,
            words,
            bits,
        })
    }

    /// Parses the text format (see the module docs); errors name the line.
    pub fn parse(text: &str) -> Result<Self> {
        let mut rows: Vec<Vec<bool>> = Vec::new();
        for (no, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r').trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let row = line
                .chars()
                .enumerate()
                .map(|(col, ch)| match ch {
                    '0' => Ok(false),
                    '1' => Ok(true),
                    _ => Err(MmError::Shape(format!(
                        "line {}, column {}: `{ch}` is not 0 or 1",
                        no + 1,
                        col + 1
                    ))),
                })
                .collect::<Result<Vec<bool>>>()?;
            if let Some(first) = rows.first()
                && first.len() != row.len()
            {
                return Err(MmError::Shape(format!(
                    "line {}: {} samples, earlier SNPs have {}",
                    no + 1,
                    row.len(),
                    first.len()
                )));
            }
            rows.push(row);
        }
        if rows.is_empty() {
            return Err(MmError::Shape("no SNP lines in the input".into()));
        }
        Self::from_rows(&rows)
    }

    /// `snps` random SNPs over `samples`, allele frequencies drawn from [0.05, 0.5]; every second SNP copies its
    /// predecessor with 10 % of samples redrawn at the predecessor's frequency, so the LD matrix has strong pairs
    /// (r² near 0.8) as well as noise. (Redrawn at a frequency of its own, a copy of a rare SNP could fall to
    /// r² ≈ 0.47: a test seed found it.)
    pub fn random(snps: usize, samples: usize, seed: u64) -> Result<Self> {
        if snps == 0 || samples == 0 {
            return Err(MmError::Shape(
                "random SNP matrix needs SNPs and samples".into(),
            ));
        }
        let words = Self::words_for(samples);
        let len = snps
            .checked_mul(words)
            .ok_or_else(|| MmError::Shape(format!("{snps} SNPs × {samples} samples overflow")))?;
        // Packed as drawn (one bit per sample, not a byte), keeping only the previous SNP's row.
        let mut bits = vec![0u32; len];
        let mut prev = vec![false; samples];
        let mut rng = seeded(seed);
        let mut f = 0.0;
        for i in 0..snps {
            // A copy keeps its predecessor's frequency (one draw per SNP either way, so the stream is alike).
            let drawn = 0.05 + 0.45 * rng.random::<f64>();
            if i % 2 == 0 {
                f = drawn;
            }
            for (s, p) in prev.iter_mut().enumerate() {
                let b = if i % 2 == 1 && rng.random::<f64>() >= 0.1 {
                    *p
                } else {
                    rng.random::<f64>() < f
                };
                *p = b;
                bits[i * words + s / 32] |= u32::from(b) << (s % 32);
            }
        }
        Ok(Self {
            snps,
            samples,
            words,
            bits,
        })
    }

    /// Allele counts per SNP (popcount of its row).
    pub fn counts(&self) -> Vec<u32> {
        self.bits
            .chunks(self.words)
            .map(|r| r.iter().map(|w| w.count_ones()).sum())
            .collect()
    }
}

/// r² from the pair count and the two allele counts over `samples`; NaN when either SNP is monomorphic (r² is
/// undefined there).
pub fn r2(n_ab: u32, n_a: u32, n_b: u32, samples: usize) -> f64 {
    let n = samples as f64;
    let (pa, pb, pab) = (f64::from(n_a) / n, f64::from(n_b) / n, f64::from(n_ab) / n);
    let den = pa * (1.0 - pa) * pb * (1.0 - pb);
    if den == 0.0 {
        return f64::NAN;
    }
    let d = pab - pa * pb;
    d * d / den
}

/// The LD result between SNP sets A (rows) and B (columns).
#[derive(Clone, Debug)]
pub struct LdResult {
    pub params: DenseParams,
    /// Pair counts n_AB, row-major `a.snps × b.snps`.
    pub pair_counts: Vec<u32>,
    pub r2: Vec<f64>,
    /// Median device time of the popcount GEMM, seconds.
    pub seconds: f64,
}

/// Largest |Δr²| between the device and the CPU reference that counts as agreement.
pub const R2_TOLERANCE: f64 = 1e-6;

/// What an r² matrix says in a few numbers.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct R2Summary {
    /// Mean over the defined pairs (NaN when none is).
    pub mean: f64,
    pub defined: usize,
    /// Pairs with r² ≥ 0.8 (strong linkage).
    pub strong: usize,
    /// Pairs with a monomorphic SNP (r² undefined).
    pub undefined: usize,
}

impl R2Summary {
    pub fn of(r2: &[f64]) -> Self {
        let finite: Vec<f64> = r2.iter().copied().filter(|v| v.is_finite()).collect();
        Self {
            mean: finite.iter().sum::<f64>() / finite.len() as f64,
            defined: finite.len(),
            strong: finite.iter().filter(|v| **v >= 0.8).count(),
            undefined: r2.len() - finite.len(),
        }
    }
}

/// Compares the device's r² with the CPU reference: the largest |Δr²| (two undefined values agree), or an error
/// past [`R2_TOLERANCE`] or where one side is undefined and the other is not.
pub fn check_r2(got: &[f64], a: &SnpMatrix, b: &SnpMatrix) -> Result<f64> {
    let want = ld_ref(a, b)?;
    if got.len() != want.len() {
        return Err(MmError::Shape(format!(
            "{} r² values for {} pairs",
            got.len(),
            want.len()
        )));
    }
    let worst = got
        .iter()
        .zip(&want)
        .map(|(g, w)| {
            if g.is_nan() && w.is_nan() {
                0.0
            } else {
                (g - w).abs()
            }
        })
        .fold(
            0.0,
            |m: f64, d| if d.is_nan() { f64::NAN } else { m.max(d) },
        );
    if worst.is_nan() || worst > R2_TOLERANCE {
        return Err(MmError::Shape(format!(
            "r² differs from the CPU reference by {worst:e} (tolerance {R2_TOLERANCE:e})"
        )));
    }
    Ok(worst)
}

/// r² for every pair, CPU only: the reference the device result is checked against.
pub fn ld_ref(a: &SnpMatrix, b: &SnpMatrix) -> Result<Vec<f64>> {
    check_pair(a, b)?;
    let shape = PopShape::packed(a.snps, b.snps, a.words);
    let counts = crate::popcount::popcount_ref(&shape, &a.bits, &b.bits);
    Ok(r2_matrix(a, b, &counts))
}

fn check_pair(a: &SnpMatrix, b: &SnpMatrix) -> Result<()> {
    if a.samples != b.samples {
        return Err(MmError::Shape(format!(
            "SNP sets have {} and {} samples",
            a.samples, b.samples
        )));
    }
    Ok(())
}

fn r2_matrix(a: &SnpMatrix, b: &SnpMatrix, counts: &[u32]) -> Vec<f64> {
    let (ca, cb) = (a.counts(), b.counts());
    let mut out = Vec::with_capacity(counts.len());
    for (i, na) in ca.iter().enumerate() {
        for (j, nb) in cb.iter().enumerate() {
            out.push(r2(counts[i * b.snps + j], *na, *nb, a.samples));
        }
    }
    out
}

/// Pair counts on the device with `params` (the model's pick for `machine` when `None`), timed over `reps` runs,
/// then r² on the host.
pub fn ld(
    gpu: &Gpu,
    a: &SnpMatrix,
    b: &SnpMatrix,
    params: Option<DenseParams>,
    machine: Option<&Machine>,
    reps: usize,
) -> Result<LdResult> {
    check_pair(a, b)?;
    let shape = PopShape::packed(a.snps, b.snps, a.words);
    shape.check()?;
    let params = match (params, machine) {
        (Some(p), _) => p,
        (None, Some(m)) => popcount_pick(m, &TileLimits::of(gpu), &shape)?.0,
        (None, None) => {
            let (m, _) = Machine::load_or_measure(gpu, Op::Popcount, false)?;
            popcount_pick(&m, &TileLimits::of(gpu), &shape)?.0
        }
    };
    let da = gpu.upload(&a.bits)?;
    let db = gpu.upload(&b.bits)?;
    // Poisoned: a count can never reach u32::MAX, so an unwritten element shows.
    let dc = gpu.alloc_filled(shape.m * shape.n, u32::MAX)?;
    let plan = popcount_plan(gpu, &shape, &params, &da, &db, &dc)?;
    gpu.run(&plan.launches())?;
    let pair_counts = gpu.read(&dc)?;
    if let Some(i) = pair_counts.iter().position(|&c| c == u32::MAX) {
        return Err(MmError::Shape(format!(
            "pair count {} was not written by {}",
            i,
            params.key()
        )));
    }
    let seconds = if reps > 0 {
        gpu.time(&plan.launches(), 0, reps)?.median()
    } else {
        0.0
    };
    let r2 = r2_matrix(a, b, &pair_counts);
    Ok(LdResult {
        params,
        pair_counts,
        r2,
        seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_pack() {
        let m = SnpMatrix::parse("# two SNPs\n0101\n\n1100\n").unwrap();
        assert_eq!((m.snps, m.samples, m.words), (2, 4, 1));
        assert_eq!(m.bits, vec![0b1010, 0b0011]);
        assert_eq!(m.counts(), vec![2, 2]);
    }

    #[test]
    fn parse_errors_name_the_line() {
        let e = SnpMatrix::parse("0101\n01x1\n").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("`x`"), "{e}");
        let e = SnpMatrix::parse("0101\n011\n").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("3 samples"), "{e}");
        assert!(SnpMatrix::parse("# nothing\n\n").is_err());
    }

    #[test]
    fn r2_by_hand() {
        // Identical SNPs: r² = 1. Complementary: r² = 1. Independent halves: 0.
        assert!((r2(2, 2, 2, 4) - 1.0).abs() < 1e-15);
        assert!((r2(0, 2, 2, 4) - 1.0).abs() < 1e-15);
        assert!(r2(1, 2, 2, 4).abs() < 1e-15);
        assert!(r2(0, 0, 2, 4).is_nan(), "monomorphic");
    }

    #[test]
    fn random_is_deterministic_and_padded() {
        let a = SnpMatrix::random(5, 70, 3).unwrap();
        assert_eq!(a, SnpMatrix::random(5, 70, 3).unwrap());
        assert_eq!(a.words, 3);
        for r in a.bits.chunks(3) {
            assert_eq!(r[2] >> 6, 0, "padding bits past sample 70 are zero");
        }
    }
}
