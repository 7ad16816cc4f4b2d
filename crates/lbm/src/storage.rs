//! How populations sit in a direction's u32 words (`Layout`), on the host: encoding, decoding, and the raw bits
//! of one cell (what checkpoints and the distributed gathers move).

use std::ops::Range;

use half::f16;

use crate::config::Layout;
use crate::kernel::F16_SCALE;

/// Stored words of populations `f` (unshifted, one per cell) of one direction with weight `w`, as the kernels
/// read them in `layout` (`Layout` says where each cell's half sits).
/// Made on every core (a 8192² direction is 67 M conversions).
pub fn stored_words(layout: Layout, f: &[f64], w: f64) -> Vec<u32> {
    // Paired halves zip as before: an odd count (never a paired lattice's) drops the last value.
    let len = match layout {
        Layout::F16Paired => f.len() / 2,
        _ => layout.words(f.len()),
    };
    let mut out = vec![0u32; len];
    bespoke_gpu::par_fill(&mut out, |j, o| {
        *o = stored_word(layout, f.len(), j, |c| f[c], w);
    });
    out
}

/// Word `j` of one direction of an `n`-cell lattice whose cell c holds population `f(c)` (unshifted) with weight
/// `w`: what [`stored_words`] puts at `j`, made from the one or two cells the word holds (`Layout`).
pub(crate) fn stored_word(
    layout: Layout,
    n: usize,
    j: usize,
    f: impl Fn(usize) -> f64,
    w: f64,
) -> u32 {
    let bits = |v: f64| u32::from(f16::from_f64((v - w) * F16_SCALE).to_bits());
    match layout {
        Layout::F32 => ((f(j) - w) as f32).to_bits(),
        Layout::F16Paired => bits(f(j)) | (bits(f(n / 2 + j)) << 16),
        // An odd count leaves the last high half 0 (+0.0), never read.
        Layout::F16Single => {
            bits(f(2 * j))
                | if 2 * j + 1 < n {
                    bits(f(2 * j + 1)) << 16
                } else {
                    0
                }
        }
    }
}

/// The cells that words `words` of one direction of an `n`-cell lattice hold in `layout`: one range, or two
/// for paired f16 (the low halves' cells, then the high halves').
pub(crate) fn cells_of_words(layout: Layout, n: usize, words: Range<usize>) -> [Range<usize>; 2] {
    match layout {
        Layout::F32 => [words, 0..0],
        Layout::F16Paired => [words.clone(), n / 2 + words.start..n / 2 + words.end],
        Layout::F16Single => [2 * words.start..n.min(2 * words.end), 0..0],
    }
}

/// The stored (shifted) value of `cell` in one direction's words of a lattice of `n` cells, as a kernel loads it.
pub(crate) fn stored_value(layout: Layout, words: &[u32], n: usize, cell: usize) -> f32 {
    let bits = cell_bits(layout, words, n, cell);
    match layout {
        Layout::F32 => f32::from_bits(bits),
        // Exact: an f16 times a power of two.
        _ => f16::from_bits(bits as u16).to_f32() * (1.0 / F16_SCALE as f32),
    }
}

/// The raw bits of `cell`'s value in one direction's words (f32 bits, or f16 bits in the low half).
pub(crate) fn cell_bits(layout: Layout, words: &[u32], n: usize, cell: usize) -> u32 {
    let (w, part) = crate::distributed::word_of(layout, n, cell);
    part_bits(words[w as usize], part)
}

/// The raw bits of `part` of word `v` (as `word_of` numbers parts: 0 the whole word, 1 its low half, 2 its high).
pub(crate) fn part_bits(v: u32, part: u32) -> u32 {
    match part {
        0 => v,
        1 => v & 0xffff,
        _ => v >> 16,
    }
}

/// Sets `cell`'s raw bits (as `cell_bits` returns them).
pub(crate) fn put_cell_bits(layout: Layout, words: &mut [u32], n: usize, cell: usize, bits: u32) {
    let (w, part) = crate::distributed::word_of(layout, n, cell);
    let v = &mut words[w as usize];
    *v = match part {
        0 => bits,
        1 => (*v & 0xffff_0000) | (bits & 0xffff),
        _ => (*v & 0xffff) | (bits << 16),
    };
}

pub(crate) fn decode(layout: Layout, words: &[u32], w: f64, out: &mut [f64]) {
    let n = out.len();
    for (cell, o) in out.iter_mut().enumerate() {
        *o = f64::from(stored_value(layout, words, n, cell)) + w;
    }
}
