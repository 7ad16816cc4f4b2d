//! Neighbours as signed 16-bit offsets from their tet: [`Layout::TetMajorD16`] (two words a tet) and
//! [`Layout::SlotMajorX4D16`] (eight words for four tets), each with a table of full indices for the tets with a
//! neighbour past ±32 767.

#[cfg(doc)]
use super::Layout;

/// The first word of a [`Layout::TetMajorD16`] tet whose neighbours are in the table of full indices: two offsets
/// of −32 768, which no near neighbour has.
pub const D16_FAR: u32 = 0x8000_8000;

/// The marker a far tet holds in place of its slot-0 offset in [`Layout::SlotMajorX4D16`]: −32 768, which no near
/// neighbour has.
pub const D16_FAR_HALF: u32 = 0x8000;

/// Tet `i`'s four neighbours as 16-bit two's-complement offsets from `i`, or None where one is past ±32 767.
fn offsets16(i: usize, row: &[u32; 4]) -> Option<[u32; 4]> {
    let d = row.map(|j| j as i64 - i as i64);
    d.iter()
        .all(|d| (-32_767..=32_767).contains(d))
        .then(|| d.map(|d| (d as i16) as u16 as u32))
}

/// How many of the tets (row i: tet i's neighbours) have a neighbour past ±32 767: those the 16-bit offset layouts
/// send to their table of full indices.
pub fn d16_far_tets(indices: &[[u32; 4]]) -> usize {
    indices
        .iter()
        .enumerate()
        .filter(|(i, row)| offsets16(*i, row).is_none())
        .count()
}

/// The [`Layout::TetMajorD16`] form of `indices` (tet i's four neighbours, n the ghost, an offset like any other):
/// each tet's two words of offsets, and the far tets' full indices (one row each, at least one row so the binding
/// is never empty).
pub fn d16_indices(indices: &[[u32; 4]]) -> (Vec<[u32; 2]>, Vec<[u32; 4]>) {
    let mut far = Vec::new();
    let near = indices
        .iter()
        .enumerate()
        .map(|(i, row)| match offsets16(i, row) {
            Some(h) => [h[0] | h[1] << 16, h[2] | h[3] << 16],
            None => {
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

/// The [`Layout::SlotMajorX4D16`] form of `indices` (a multiple of 4 tets, tet i's four neighbours): for each four
/// tets 4q…4q + 3, eight words, slot k's offsets in words 2k (tets 4q, 4q + 1: low half, high half) and 2k + 1
/// (tets 4q + 2, 4q + 3), so an invocation reads its four tets' offsets as two `vec4<u32>`; and the far tets'
/// full indices. A far tet holds [`D16_FAR_HALF`] as its slot-0 offset and its row in that table as its slot-1
/// (low 16 bits) and slot-2 (high 16 bits) offsets; a near tet's offsets never read −32 768. Only far tets read a
/// row (16 B), not their three neighbours in the invocation. At least one row, so the binding is never empty.
pub fn d16_quads(indices: &[[u32; 4]]) -> (Vec<[u32; 8]>, Vec<[u32; 4]>) {
    assert!(
        indices.len().is_multiple_of(4),
        "four-tet offsets take a multiple of 4 tets"
    );
    let mut far: Vec<[u32; 4]> = Vec::new();
    let quads = indices
        .chunks_exact(4)
        .enumerate()
        .map(|(q, rows)| {
            // fields[lane][slot]
            let fields: [[u32; 4]; 4] = std::array::from_fn(|lane| {
                offsets16(4 * q + lane, &rows[lane]).unwrap_or_else(|| {
                    let r = far.len() as u32;
                    far.push(rows[lane]);
                    [D16_FAR_HALF, r & 0xffff, r >> 16, 0]
                })
            });
            std::array::from_fn(|w| {
                let (slot, pair) = (w / 2, 2 * (w % 2));
                fields[pair][slot] | fields[pair + 1][slot] << 16
            })
        })
        .collect();
    if far.is_empty() {
        far.push([0; 4]);
    }
    (quads, far)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// n tets (the ghost at n), each neighbour within ±`reach` of its tet, or one in four anywhere.
    fn random_rows(n: usize, reach: i64) -> Vec<[u32; 4]> {
        use bespoke_gpu::rng::Rng;
        let mut rng = bespoke_gpu::rng::seeded(bespoke_gpu::testing::fresh_seed());
        (0..n)
            .map(|i| {
                std::array::from_fn(|_| match rng.random_range(0..4) {
                    0 => rng.random_range(0..=n) as u32,
                    _ => (i as i64 + rng.random_range(-reach..reach)).clamp(0, n as i64) as u32,
                })
            })
            .collect()
    }

    /// The 16-bit offsets decode (as the kernel's `d16` does: shift, arithmetic shift, wrapping add) to every
    /// tet's neighbours, near and far, the ghost included; a near tet never reads as far; offsets of ±32 767 are
    /// near, ±32 768 far.
    #[test]
    fn d16_offsets_decode_to_the_neighbours() {
        let n = 100_000usize;
        let mut indices = random_rows(n, 40_000);
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
        assert_eq!(d16_far_tets(&indices), far_tets);
        assert!(far_tets > 1000 && far_tets < n, "{far_tets} far tets");
        // No tet, no far row: one row all the same, so the binding is never empty.
        let (near, far) = d16_indices(&[[0, 1, 0, 1], [0, 1, 1, 2]]);
        assert!(near.iter().all(|d| d[0] != D16_FAR));
        assert_eq!(far, vec![[0; 4]]);
    }

    /// The four-tet offsets decode, as the kernel does (sign-extended halves added to each tet's own index; a
    /// slot-0 offset of −32 768 sends that tet alone to its row of full indices, split over its slot-1 and slot-2
    /// halves), to every tet's neighbours: near and far in any lane, far rows past 65 535, ±32 767 near, 32 768 far.
    #[test]
    fn quad_offsets_decode_to_the_neighbours() {
        let n = 200_000usize;
        let mut indices = random_rows(n, 33_000);
        indices[50_000] = [50_000 + 32_767, 50_000 - 32_767, 50_000, 50_001];
        indices[50_001] = [50_001, 50_001 - 32_768, 50_001, 50_001];
        let (quads, far) = d16_quads(&indices);
        assert_eq!(quads.len(), n / 4);
        let h16 = |w: u32| [(w << 16) as i32 >> 16, w as i32 >> 16];
        let mut far_tets = 0;
        for (q, words) in quads.iter().enumerate() {
            // h[slot][lane]
            let h: [[i32; 4]; 4] = std::array::from_fn(|k| {
                let (a, b) = (h16(words[2 * k]), h16(words[2 * k + 1]));
                [a[0], a[1], b[0], b[1]]
            });
            for (lane, want) in indices[4 * q..4 * q + 4].iter().enumerate() {
                let i = 4 * q + lane;
                let got: [u32; 4] = if h[0][lane] == -32_768 {
                    far_tets += 1;
                    let r = (h[1][lane] as u32 & 0xffff) | (h[2][lane] as u32) << 16;
                    far[r as usize]
                } else {
                    std::array::from_fn(|k| (i as i32).wrapping_add(h[k][lane]) as u32)
                };
                assert_eq!(got, *want, "tet {i}");
            }
        }
        assert_eq!(far.len(), far_tets);
        assert!(
            far_tets > 65_536 && far_tets < n,
            "{far_tets} far tets: rows past 16 bits"
        );
        let far_of = |i: usize| {
            let w = quads[i / 4][(i % 4) / 2];
            (w >> (16 * (i % 2))) & 0xffff == D16_FAR_HALF
        };
        assert!(!far_of(50_000), "offsets of ±32 767 fit");
        assert!(far_of(50_001), "an offset of −32 768 does not");
        let (quads, far) = d16_quads(&[[0, 1, 0, 1], [0, 1, 1, 2], [1, 2, 3, 3], [4, 4, 4, 4]]);
        assert_eq!(quads.len(), 1);
        assert_eq!(
            far,
            vec![[0; 4]],
            "no far tet, one row so the binding is never empty"
        );
    }
}
