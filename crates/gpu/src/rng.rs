//! The one seeded generator of bespoke: rand_xoshiro's SplitMix64 behind rand's traits, for everything that must
//! be the same from the same seed (generated meshes and their numbering, synthetic operators, random SNPs, test
//! inputs).
//!
//! ```
//! use bespoke_gpu::rng::{Rng, SliceRandom, seeded};
//! let mut r = seeded(7);
//! let x: f64 = r.random(); // uniform in [0, 1)
//! let mut v = vec![1, 2, 3, 4];
//! v.shuffle(&mut r);
//! assert!((0.0..1.0).contains(&x));
//! ```

pub use rand::seq::SliceRandom;
pub use rand::{Rng, SeedableRng};
pub use rand_xoshiro::SplitMix64;

/// The generator for `seed` (the seed is SplitMix64's state, as in the reference algorithm).
pub fn seeded(seed: u64) -> SplitMix64 {
    SplitMix64::seed_from_u64(seed)
}

#[cfg(test)]
mod tests {
    use rand::RngCore;

    /// Pinned to the reference SplitMix64 sequence (Vigna's splitmix64.c): the meshes and inputs generated from
    /// a seed stay the same across dependency updates.
    #[test]
    fn matches_the_reference_splitmix64() {
        let mut r = super::seeded(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }
}
