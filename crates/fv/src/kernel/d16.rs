//! Neighbours as signed 16-bit offsets from their tet ([`Layout::TetMajorD16`](super::Layout::TetMajorD16)).

/// The first word of a [`Layout::TetMajorD16`](super::Layout::TetMajorD16) tet whose neighbours are in the table of full indices: two offsets
/// of −32 768, which no near neighbour has.
pub const D16_FAR: u32 = 0x8000_8000;

/// The [`Layout::TetMajorD16`](super::Layout::TetMajorD16) form of `indices` (tet i's four neighbours, n the ghost, an offset like any other):
/// each tet's two words of offsets, and the far tets' full indices (one row each, at least one row so the binding
/// is never empty).
pub fn d16_indices(indices: &[[u32; 4]]) -> (Vec<[u32; 2]>, Vec<[u32; 4]>) {
    let mut far = Vec::new();
    let near = indices
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let d = row.map(|j| j as i64 - i as i64);
            if d.iter().all(|d| (-32_767..=32_767).contains(d)) {
                let h = d.map(|d| (d as i16) as u16 as u32);
                [h[0] | h[1] << 16, h[2] | h[3] << 16]
            } else {
                far.push(*row);
                [D16_FAR, far.len() as u32 - 1]
            }
        })
        .collect();
    if far.is_empty() {
        far.push([0; 4]);
    }
    (near, far)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 16-bit offsets decode (as the kernel's `d16` does: shift, arithmetic shift, wrapping add) to every
    /// tet's neighbours, near and far, the ghost included; a near tet never reads as far; offsets of ±32 767 are
    /// near, ±32 768 far.
    #[test]
    fn d16_offsets_decode_to_the_neighbours() {
        use bespoke_gpu::rng::Rng;
        let mut rng = bespoke_gpu::rng::seeded(bespoke_gpu::testing::fresh_seed());
        let n = 100_000usize;
        let mut indices: Vec<[u32; 4]> = (0..n)
            .map(|i| {
                std::array::from_fn(|_| match rng.random_range(0..4) {
                    0 => rng.random_range(0..=n) as u32,
                    _ => {
                        (i as i64 + rng.random_range(-40_000i64..40_000)).clamp(0, n as i64) as u32
                    }
                })
            })
            .collect();
        indices[50_000] = [50_000 + 32_767, 50_000 - 32_767, 50_000, 50_001];
        indices[50_001] = [50_001 + 32_768, 50_001, 50_001, 50_001];
        let (near, far) = d16_indices(&indices);
        assert_eq!(near.len(), n);
        let decode = |i: usize, d: [u32; 2]| -> [u32; 4] {
            if d[0] == D16_FAR {
                return far[d[1] as usize];
            }
            let h = [d[0] << 16, d[0], d[1] << 16, d[1]].map(|w| (w as i32) >> 16);
            h.map(|o| (i as i32).wrapping_add(o) as u32)
        };
        for (i, (&d, row)) in near.iter().zip(&indices).enumerate() {
            assert_eq!(decode(i, d), *row, "tet {i}");
        }
        assert_ne!(near[50_000][0], D16_FAR, "offsets of ±32 767 fit");
        assert_eq!(near[50_001][0], D16_FAR, "an offset of 32 768 does not");
        let far_tets = near.iter().filter(|d| d[0] == D16_FAR).count();
        assert_eq!(far.len(), far_tets.max(1));
        assert!(far_tets > 1000 && far_tets < n, "{far_tets} far tets");
        // No tet, no far row: one row all the same, so the binding is never empty.
        let (near, far) = d16_indices(&[[0, 1, 0, 1], [0, 1, 1, 2]]);
        assert!(near.iter().all(|d| d[0] != D16_FAR));
        assert_eq!(far, vec![[0; 4]]);
    }
}
