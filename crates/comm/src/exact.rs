//! Sums whose result does not depend on the order of their terms, so that a quantity summed over a domain's cells
//! is the same bits on one rank and on any decomposition into ranks.
//!
//! [`ExactSum`] keeps the exact sum of finite f64 terms in fixed point (a long accumulator over the whole f64
//! exponent range, Kulisch's idea; see also Demmel & Hida, "Accurate and efficient floating point summation",
//! 2003) and rounds it to the nearest f64 once, when it is read. Adding terms in any order, or summing parts and
//! merging them in any order, gives the same bits, and those bits are the correctly rounded sum.

/// Bits a limb carries once normalised.
const LIMB_BITS: u32 = 32;
/// Limbs from 2⁻¹⁰⁷⁴ (the smallest subnormal) past 2¹⁰²⁴ with room for carries.
const LIMBS: usize = 68;
/// A value's mantissa lands at bit `exponent + BIAS` of the accumulator.
const BIAS: i32 = 1074;
/// Terms added between carry propagations: each adds at most 2³² to a limb, so 2³⁰ of them stay inside an i64.
const BEFORE_CARRY: u32 = 1 << 30;

/// The exact sum of f64 terms, rounded to the nearest f64 (ties to even) when read.
///
/// ```
/// use bespoke_comm::ExactSum;
/// let mut s = ExactSum::new();
/// for v in [1e100, 1.0, -1e100] {
///     s.add(v);
/// }
/// assert_eq!(s.value(), 1.0);
/// // Ten copies of the f64 nearest 0.1 sum to 1.0000000000000000555…, nearest f64 1.0 (a loop gives 0.9999999999999999).
/// let mut s = ExactSum::new();
/// (0..10).for_each(|_| s.add(0.1));
/// assert_eq!(s.value(), 1.0);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ExactSum {
    /// Limb i holds multiples of 2^(32·i − 1074); between normalisations a limb may hold any i64.
    limbs: [i64; LIMBS],
    /// Terms added since the last carry propagation.
    pending: u32,
    /// The plain sum of the non-finite terms (infinities and NaNs), None while there are none: what the result
    /// is then, as IEEE addition has it (+∞ and −∞ give NaN), whatever the finite terms.
    special: Option<f64>,
}

impl Default for ExactSum {
    fn default() -> Self {
        Self::new()
    }
}

impl ExactSum {
    pub fn new() -> Self {
        Self {
            limbs: [0; LIMBS],
            pending: 0,
            special: None,
        }
    }

    /// Adds `v` exactly.
    pub fn add(&mut self, v: f64) {
        if !v.is_finite() {
            self.special = Some(self.special.map_or(v, |s| s + v));
            return;
        }
        if v == 0.0 {
            return;
        }
        let bits = v.to_bits();
        let exp = ((bits >> 52) & 0x7ff) as i32;
        let frac = bits & ((1u64 << 52) - 1);
        // v = ±m · 2^e with m an integer below 2^53.
        let (m, e) = if exp == 0 {
            (frac, -BIAS)
        } else {
            (frac | (1u64 << 52), exp - 1075)
        };
        let at = (e + BIAS) as u32;
        let (limb, shift) = ((at / LIMB_BITS) as usize, at % LIMB_BITS);
        let wide = u128::from(m) << shift;
        let sign = if v < 0.0 { -1 } else { 1 };
        for j in 0..3 {
            let chunk = ((wide >> (LIMB_BITS as usize * j)) & 0xffff_ffff) as i64;
            self.limbs[limb + j] += sign * chunk;
        }
        self.pending += 1;
        if self.pending == BEFORE_CARRY {
            self.normalise();
        }
    }

    /// Adds every term of `other` (the sum of both term lists, in any order).
    pub fn merge(&mut self, other: &ExactSum) {
        self.normalise();
        let mut o = other.clone();
        o.normalise();
        for (a, b) in self.limbs.iter_mut().zip(o.limbs) {
            *a += b;
        }
        self.pending = 1;
        self.normalise();
        if let Some(s) = o.special {
            self.special = Some(self.special.map_or(s, |t| t + s));
        }
    }

    /// Propagates carries: every limb but the top one into [0, 2³²), the top one signed.
    fn normalise(&mut self) {
        for i in 0..LIMBS - 1 {
            let carry = self.limbs[i] >> LIMB_BITS;
            self.limbs[i] -= carry << LIMB_BITS;
            self.limbs[i + 1] += carry;
        }
        self.pending = 0;
    }

    /// The sum, rounded to the nearest f64 (ties to even; ±∞ past f64's range); NaN or ±∞ when a term was.
    pub fn value(&self) -> f64 {
        if let Some(s) = self.special {
            return s;
        }
        let mut n = self.clone();
        n.normalise();
        let negative = n.limbs[LIMBS - 1] < 0;
        if negative {
            for l in &mut n.limbs {
                *l = -*l;
            }
            n.normalise();
        }
        let Some(top) = n.limbs.iter().rposition(|&l| l != 0) else {
            return 0.0;
        };
        // The top three limbs, then one bit that says whether anything below them is not zero, so that the one
        // rounding (u128 to f64 rounds to nearest, ties to even) sees every bit of the sum.
        let limb = |i: usize| u128::from(n.limbs[i] as u64);
        let low = top.saturating_sub(2);
        let mut x = 0u128;
        for i in (low..=top).rev() {
            x = (x << LIMB_BITS) | limb(i);
        }
        let sticky = n.limbs[..low].iter().any(|&l| l != 0);
        x = (x << 1) | u128::from(sticky);
        let scale = LIMB_BITS as i32 * low as i32 - BIAS - 1;
        let v = scale_by_power_of_two(x as f64, scale);
        if negative { -v } else { v }
    }

    /// The accumulator as bytes, for a reduction across ranks: a flag byte (bit 0: negative, bit 1: a non-finite
    /// term, whose sum follows as f64), then the magnitude's nonzero limbs only (first index u8, count u8, the
    /// limbs as i64). A sum of values of a few magnitudes takes a few limbs: tens of bytes, not the 550 of the
    /// whole accumulator, so the per-row sums of a large domain travel cheaply.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut n = self.clone();
        n.normalise();
        let negative = n.limbs[LIMBS - 1] < 0;
        if negative {
            n.limbs.iter_mut().for_each(|l| *l = -*l);
            n.normalise();
        }
        let mut out = vec![u8::from(negative) | (u8::from(n.special.is_some()) << 1)];
        if let Some(s) = n.special {
            out.extend_from_slice(&s.to_le_bytes());
        }
        let lo = n.limbs.iter().position(|&l| l != 0).unwrap_or(0);
        let hi = n.limbs.iter().rposition(|&l| l != 0).map_or(lo, |h| h + 1);
        out.extend_from_slice(&[lo as u8, (hi - lo) as u8]);
        for l in &n.limbs[lo..hi] {
            out.extend_from_slice(&l.to_le_bytes());
        }
        out
    }

    /// One accumulator that [`to_bytes`](Self::to_bytes) wrote at the start of `bytes`, and the bytes it took;
    /// None for anything else (too short, an unknown flag, limbs past the accumulator or out of range).
    pub fn from_bytes(bytes: &[u8]) -> Option<(Self, usize)> {
        let (&flag, mut rest) = bytes.split_first()?;
        if flag > 3 {
            return None;
        }
        let mut take = |k: usize| -> Option<&[u8]> {
            let (a, b) = (rest.get(..k)?, rest.get(k..)?);
            rest = b;
            Some(a)
        };
        let special = match flag & 2 {
            0 => None,
            _ => Some(f64::from_le_bytes(take(8)?.try_into().ok()?)),
        };
        let [lo, count] = [take(1)?[0] as usize, take(1)?[0] as usize];
        if lo + count > LIMBS {
            return None;
        }
        let mut limbs = [0i64; LIMBS];
        for (i, l) in limbs.iter_mut().enumerate().skip(lo).take(count) {
            *l = i64::from_le_bytes(take(8)?.try_into().ok()?);
            // A normalised magnitude: every limb but the top one inside 32 bits, none negative.
            if *l < 0 || (i < LIMBS - 1 && *l >= 1i64 << LIMB_BITS) {
                return None;
            }
        }
        if flag & 1 == 1 {
            limbs.iter_mut().for_each(|l| *l = -*l);
        }
        let used = bytes.len() - rest.len();
        Some((
            Self {
                limbs,
                // Negated limbs are not normalised: the next read or merge propagates the carries.
                pending: 1,
                special,
            },
            used,
        ))
    }
}

/// x · 2^e without overflowing or underflowing on the way (2^e alone may be out of f64's range).
fn scale_by_power_of_two(mut x: f64, mut e: i32) -> f64 {
    let step = 960;
    while e > step {
        x *= 2f64.powi(step);
        e -= step;
    }
    while e < -step {
        x *= 2f64.powi(-step);
        e += step;
    }
    x * 2f64.powi(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn sum(vals: &[f64]) -> ExactSum {
        let mut s = ExactSum::new();
        vals.iter().for_each(|&v| s.add(v));
        s
    }

    #[test]
    fn integers_scaled_by_a_power_of_two_round_once() {
        // Terms k · 2^-40 with |k| < 2^62: their exact sum is an i128, whose conversion rounds once.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for n in [1, 2, 3, 10, 1000] {
            let ks: Vec<i64> = (0..n)
                .map(|_| rng.random_range(-(1i64 << 62)..1i64 << 62))
                .collect();
            let scale = 2f64.powi(-40);
            let vals: Vec<f64> = ks.iter().map(|&k| k as f64 * scale).collect();
            // The terms as f64 are the rounded ks; sum those exactly.
            let exact: i128 = vals.iter().map(|&v| (v / scale) as i128).sum();
            assert_eq!(sum(&vals).value(), exact as f64 * scale, "n = {n}");
        }
    }

    #[test]
    fn order_and_grouping_do_not_change_the_bits() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut vals: Vec<f64> = (0..5000)
            .map(|_| {
                let m: f64 = rng.random_range(-1.0..1.0);
                m * 2f64.powi(rng.random_range(-1070..1000))
            })
            .collect();
        vals.extend([f64::MIN_POSITIVE, -5e-324, 5e-324, 1e308, 1e308, -1e308]);
        let want = sum(&vals).value();
        assert!(want.is_finite());
        for round in 0..8 {
            vals.shuffle(&mut rng);
            assert_eq!(
                sum(&vals).value().to_bits(),
                want.to_bits(),
                "shuffle {round}"
            );
            // In parts, merged in another order.
            let mut parts: Vec<ExactSum> = vals.chunks(700 + 97 * round).map(sum).collect();
            parts.shuffle(&mut rng);
            let mut total = ExactSum::new();
            parts.iter().for_each(|p| total.merge(p));
            assert_eq!(total.value().to_bits(), want.to_bits(), "parts {round}");
        }
        // A plain loop depends on the order: the accumulator is needed (checks the data can tell).
        let naive = |v: &[f64]| v.iter().sum::<f64>();
        let mut small: Vec<f64> = (0..1000).map(|i| 0.1 * f64::from(i) + 1e-3).collect();
        let a = naive(&small);
        small.reverse();
        assert_ne!(a.to_bits(), naive(&small).to_bits());
    }

    #[test]
    fn cancellation_signs_subnormals_and_non_finite_terms() {
        assert_eq!(sum(&[]).value(), 0.0);
        assert_eq!(sum(&[1.5, -1.5]).value(), 0.0);
        assert_eq!(sum(&[1e300, 1e-300, -1e300]).value(), 1e-300);
        assert_eq!(sum(&[-2.0, 0.5]).value(), -1.5);
        assert_eq!(sum(&[5e-324, 5e-324, 5e-324]).value(), 1.5e-323);
        assert_eq!(sum(&[-5e-324, 1e-320]).value(), 1e-320 - 5e-324);
        assert_eq!(sum(&[f64::MAX, f64::MAX]).value(), f64::INFINITY);
        assert_eq!(sum(&[f64::MAX, f64::MAX, -f64::MAX]).value(), f64::MAX);
        assert_eq!(sum(&[1.0, f64::INFINITY]).value(), f64::INFINITY);
        assert!(
            sum(&[f64::INFINITY, 2.0, f64::NEG_INFINITY])
                .value()
                .is_nan()
        );
        assert!(sum(&[f64::NAN, 1.0]).value().is_nan());
        // Ties to even: 1 + 2^-53 is half-way between 1 and its successor; a term far below breaks the tie.
        let half = 2f64.powi(-53);
        assert_eq!(sum(&[1.0, half]).value(), 1.0);
        assert_eq!(sum(&[1.0, half, 1e-300]).value(), 1.0 + 2.0 * half);
        assert_eq!(sum(&[-1.0, -half, -1e-300]).value(), -1.0 - 2.0 * half);
    }

    #[test]
    fn ranks_reduce_to_the_bits_of_one_sum() {
        use crate::{Comm, run_threads};
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let vals: Vec<f64> = (0..3000)
            .map(|_| rng.random_range(-1.0..1.0) * 1e-3)
            .collect();
        let want = [sum(&vals).value(), sum(&vals[..10]).value()];
        for ranks in [1, 2, 3, 5] {
            let got = run_threads(ranks, |comm| {
                // Rank r takes every ranks-th term: an interleaved split, not one a loop could follow.
                let mine = |v: &[f64]| -> Vec<f64> {
                    v.iter()
                        .skip(comm.rank())
                        .step_by(comm.size())
                        .copied()
                        .collect()
                };
                let mut s = [sum(&mine(&vals)), sum(&mine(&vals[..10]))];
                comm.all_reduce_exact(&mut s)?;
                Ok::<_, crate::CommError>(s.map(|s| s.value().to_bits()))
            })
            .unwrap();
            assert!(
                got.iter().all(|g| *g == want.map(f64::to_bits)),
                "{ranks} ranks"
            );
        }
        // Ranks that reduce different counts are told so, not given a wrong sum.
        let e = run_threads(2, |comm| {
            let mut s = vec![ExactSum::new(); 1 + comm.rank()];
            comm.all_reduce_exact(&mut s)
        })
        .unwrap_err();
        assert!(
            format!("{e}").contains("the length of an all-reduce"),
            "{e}"
        );
    }

    #[test]
    fn bytes_round_trip_compactly_and_refuse_what_they_did_not_write() {
        let sums = [
            sum(&[3.25, -1e-200, 7e100]),
            sum(&[-0.0123, -4.5e-9]),
            sum(&[]),
            sum(&[f64::INFINITY, 2.0]),
            sum(&[-1e-300, 2e-310]),
        ];
        let mut all = Vec::new();
        for s in &sums {
            let b = s.to_bytes();
            let (back, used) = ExactSum::from_bytes(&b).unwrap();
            assert_eq!(used, b.len());
            assert_eq!(back.value().to_bits(), s.value().to_bits(), "{s:?}");
            // Merged after the trip, the same as merged before it.
            let mut a = sum(&[1.0, -3e-5]);
            let mut c = a.clone();
            a.merge(&back);
            c.merge(s);
            assert_eq!(a.value().to_bits(), c.value().to_bits());
            all.extend(b);
        }
        // A sum of values of two nearby magnitudes takes a few limbs, not the whole accumulator; negative too.
        assert!(
            sums[1].to_bytes().len() <= 2 + 2 + 8 * 3,
            "{}",
            sums[1].to_bytes().len()
        );
        // Records follow one another.
        let mut at = 0;
        for s in &sums {
            let (back, used) = ExactSum::from_bytes(&all[at..]).unwrap();
            assert_eq!(back.value().to_bits(), s.value().to_bits());
            at += used;
        }
        assert_eq!(at, all.len());
        let b = sums[0].to_bytes();
        assert!(
            ExactSum::from_bytes(&b[..b.len() - 1]).is_none(),
            "truncated"
        );
        assert!(ExactSum::from_bytes(&[]).is_none());
        assert!(ExactSum::from_bytes(&[4, 0, 0]).is_none(), "unknown flag");
        assert!(
            ExactSum::from_bytes(&[0, 60, 9]).is_none(),
            "limbs past the accumulator"
        );
        let mut bad = vec![0, 3, 1];
        bad.extend_from_slice(&(1i64 << 40).to_le_bytes());
        assert!(ExactSum::from_bytes(&bad).is_none(), "a limb past 32 bits");
    }
}
