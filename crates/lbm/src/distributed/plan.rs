//! What crosses each cut, in an order both sides derive alone, and the kernels that gather it into one buffer and
//! scatter it back.
//!
//! A *pull* exchange fills halo cells with the populations the block's own cells pull from them in the next step
//! (two-lattice steps, and in-place steps before an odd step: slot ī, where the previous even step left S_i). A
//! *push* exchange returns what an odd in-place step wrote into the halo (slot i of x + c_i) to the rank that
//! owns that cell. Both move, per step, the 3 populations per edge cell and 1 per corner that cross the cut.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bespoke_gpu::GRID_WGSL;

use super::{Block, Decomposition};
use crate::config::Layout;
use crate::d2q9::{C, OPP};
use crate::kernel::WG;

/// Which exchange a step needs before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Halo ← owner; `opp`: slot ī (in-place, before an odd step) instead of i.
    Pull { opp: bool },
    /// Owner ← the halo copy its neighbour's odd step wrote (in-place, before an even step).
    Push,
}

/// One population that crosses a cut: global cell and slot, and the rank that has the value.
type Need = (usize, usize, usize);

/// What rank `r` receives in an exchange of `kind`, as (from rank, global cell, slot), sorted: the order of the
/// message each peer sends it.
fn needs(d: &Decomposition, r: usize, kind: Kind) -> Vec<Need> {
    let b = d.local(r);
    let mut out = Vec::new();
    for y in 0..b.size[1] {
        for x in 0..b.size[0] {
            if b.owns(x, y) {
                continue;
            }
            let (gx, gy) = b.global(x, y);
            let from = d.owner(gx, gy);
            let h = gy * b.n[0] + gx;
            for i in 1..9 {
                // Links from this halo cell into an owned cell.
                let Some((ox, oy)) = b.step(x, y, C[i]) else {
                    continue;
                };
                if !b.owns(ox, oy) {
                    continue;
                }
                let (tx, ty) = b.global(ox, oy);
                out.push(match kind {
                    Kind::Pull { opp } => (from, h, if opp { OPP[i] } else { i }),
                    Kind::Push => (from, ty * b.n[0] + tx, i),
                });
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// One rank's side of an exchange: per peer, the local (cell, slot) pairs it packs and those it unpacks.
#[derive(Debug, Default)]
pub(crate) struct Lists {
    pub sends: Vec<(usize, Vec<(usize, usize)>)>,
    pub recvs: Vec<(usize, Vec<(usize, usize)>)>,
}

impl Lists {
    pub fn send_len(&self) -> usize {
        self.sends.iter().map(|(_, v)| v.len()).sum()
    }
    #[cfg(test)]
    pub fn recv_len(&self) -> usize {
        self.recvs.iter().map(|(_, v)| v.len()).sum()
    }
}

/// Rank `me`'s lists for an exchange of `kind`.
pub(crate) fn lists(d: &Decomposition, me: usize, kind: Kind) -> Lists {
    let b = d.local(me);
    let local = |b: &Block, g: usize| -> usize {
        let (x, y) = b
            .local(g % b.n[0], g / b.n[0])
            .expect("a cell that crosses a cut lies in both lattices");
        y * b.size[0] + x
    };
    let group = |list: Vec<Need>| -> BTreeMap<usize, Vec<(usize, usize)>> {
        let mut m: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
        for (peer, g, slot) in list {
            m.entry(peer).or_default().push((local(&b, g), slot));
        }
        m
    };
    // What I receive: my own needs. What I send: every other rank's needs that I hold.
    let recvs = group(needs(d, me, kind));
    let mut sends = BTreeMap::new();
    for r in (0..d.ranks()).filter(|&r| r != me) {
        let mine: Vec<(usize, usize)> = needs(d, r, kind)
            .into_iter()
            .filter(|&(from, _, _)| from == me)
            .map(|(_, g, slot)| (local(&b, g), slot))
            .collect();
        if !mine.is_empty() {
            sends.insert(r, mine);
        }
    }
    Lists {
        sends: sends.into_iter().collect(),
        recvs: recvs.into_iter().collect(),
    }
}

/// Where a cell's population sits among a direction's words: (word, 0 whole word / 1 low half / 2 high half).
pub(crate) fn word_of(layout: Layout, n: usize, cell: usize) -> (u32, u32) {
    match layout {
        Layout::F32 => (cell as u32, 0),
        Layout::F16Paired => {
            let h = n / 2;
            if cell < h {
                (cell as u32, 1)
            } else {
                ((cell - h) as u32, 2)
            }
        }
        Layout::F16Single => ((cell / 2) as u32, 1 + (cell % 2) as u32),
    }
}

/// No source for this half (unpack entries).
pub(crate) const NONE: u32 = u32::MAX;
/// The entry replaces the whole word (f32).
pub(crate) const WHOLE: u32 = u32::MAX - 1;

/// Pack entries (slot, word, part, 0), in list order: value k of the send buffer.
pub(crate) fn pack_entries(layout: Layout, n: usize, list: &[(usize, usize)]) -> Vec<[u32; 4]> {
    list.iter()
        .map(|&(cell, slot)| {
            let (w, part) = word_of(layout, n, cell);
            [slot as u32, w, part, 0]
        })
        .collect()
}

/// Unpack entries (slot, word, source of the low half or whole word, source of the high half or WHOLE/NONE), one
/// per word touched, so that no two invocations write one word.
pub(crate) fn unpack_entries(layout: Layout, n: usize, list: &[(usize, usize)]) -> Vec<[u32; 4]> {
    let mut words: BTreeMap<(u32, u32), [u32; 2]> = BTreeMap::new();
    for (k, &(cell, slot)) in list.iter().enumerate() {
        let (w, part) = word_of(layout, n, cell);
        let e = words.entry((slot as u32, w)).or_insert([NONE, NONE]);
        match part {
            0 => *e = [k as u32, WHOLE],
            1 => e[0] = k as u32,
            _ => e[1] = k as u32,
        }
    }
    words
        .into_iter()
        .map(|((slot, w), [lo, hi])| [slot, w, lo, hi])
        .collect()
}

/// WGSL of the pack (`unpack` false) or unpack kernel over the lattice's directions (as u32 words, whatever the
/// storage), an entry list and the exchange buffer: the nine directions as nine bindings, or (`stride`: the
/// lattice binds one buffer) one binding with direction i at word i·stride, as the step kernel binds them where
/// the adapter allows fewer storage buffers than nine and two more.
pub(crate) fn halo_kernel(unpack: bool, stride: Option<usize>) -> String {
    let mut s = String::from(GRID_WGSL);
    s.push_str("// bespoke-lbm halo ");
    s.push_str(if unpack { "unpack" } else { "pack" });
    s.push_str(": populations that cross a cut, as raw bits.\n");
    let dirs = match stride {
        Some(_) => 1,
        None => 9,
    };
    for i in 0..dirs {
        let _ = writeln!(
            s,
            "@group(0) @binding({i}) var<storage, read_write> a{i}: array<u32>;"
        );
    }
    let _ = writeln!(
        s,
        "@group(0) @binding({dirs}) var<storage, read> ent: array<vec4<u32>>;"
    );
    let _ = writeln!(
        s,
        "@group(0) @binding({}) var<storage, {}> buf: array<u32>;\n",
        dirs + 1,
        if unpack { "read" } else { "read_write" }
    );
    if let Some(stride) = stride {
        let _ = writeln!(
            s,
            "fn load_word(slot: u32, w: u32) -> u32 {{ return a0[slot * {stride}u + w]; }}"
        );
        if unpack {
            let _ = writeln!(
                s,
                "fn store_word(slot: u32, w: u32, v: u32) {{ a0[slot * {stride}u + w] = v; }}"
            );
        }
    } else {
        s.push_str("fn load_word(slot: u32, w: u32) -> u32 {\n    switch slot {\n");
        for i in 0..9 {
            let _ = writeln!(s, "        case {i}u: {{ return a{i}[w]; }}");
        }
        s.push_str("        default: { return 0u; }\n    }\n}\n\n");
        if unpack {
            s.push_str("fn store_word(slot: u32, w: u32, v: u32) {\n    switch slot {\n");
            for i in 0..9 {
                let _ = writeln!(s, "        case {i}u: {{ a{i}[w] = v; }}");
            }
            s.push_str("        default: {}\n    }\n}\n\n");
        }
    }
    let _ = write!(
        s,
        "@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let k = bespoke_workgroup_linear(wid) * {WG}u + lid;
    if k >= arrayLength(&ent) {{ return; }}
    let e = ent[k];
"
    );
    if unpack {
        let _ = write!(
            s,
            "    if e.w == {WHOLE}u {{
        store_word(e.x, e.y, buf[e.z]);
        return;
    }}
    var v = load_word(e.x, e.y);
    if e.z != {NONE}u {{ v = (v & 0xffff0000u) | (buf[e.z] & 0xffffu); }}
    if e.w != {NONE}u {{ v = (v & 0xffffu) | (buf[e.w] << 16u); }}
    store_word(e.x, e.y, v);
}}
"
        );
    } else {
        s.push_str(
            "    let v = load_word(e.x, e.y);
    buf[k] = select(select(v >> 16u, v & 0xffffu, e.z == 1u), v, e.z == 0u);
}
",
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Storage;
    use bespoke_gpu::{caps_for, validate_everywhere};

    #[test]
    fn halo_kernels_validate() {
        for unpack in [false, true] {
            for stride in [None, Some(4160)] {
                let src = halo_kernel(unpack, stride);
                validate_everywhere(&src, caps_for(false, false))
                    .unwrap_or_else(|e| panic!("{e}\n{src}"));
            }
        }
    }

    #[test]
    fn what_one_rank_sends_the_other_expects() {
        // 3 per edge cell and 1 per corner cross each cut, and both sides list the same cells in the same order.
        for (nx, ny, grid) in [
            (12, 9, [2, 1]),
            (12, 10, [2, 2]),
            (9, 12, [3, 2]),
            (8, 11, [1, 3]),
        ] {
            let d = Decomposition::new(nx, ny, grid, Storage::F32).unwrap();
            for kind in [
                Kind::Pull { opp: false },
                Kind::Pull { opp: true },
                Kind::Push,
            ] {
                let all: Vec<Lists> = (0..d.ranks()).map(|r| lists(&d, r, kind)).collect();
                for (r, l) in all.iter().enumerate() {
                    let b = d.local(r);
                    for (peer, recv) in &l.recvs {
                        let sent = &all[*peer]
                            .sends
                            .iter()
                            .find(|(to, _)| *to == r)
                            .expect("a matching send")
                            .1;
                        assert_eq!(sent.len(), recv.len());
                        let pb = d.local(*peer);
                        for (&(sc, ss), &(rc, rs)) in sent.iter().zip(recv) {
                            assert_eq!(ss, rs);
                            let g = |b: &Block, c: usize| b.global(c % b.size[0], c / b.size[0]);
                            assert_eq!(g(&pb, sc), g(&b, rc));
                        }
                    }
                    // Per block: 3 per halo-adjacent edge cell (x and y cuts), corners 1 each way.
                    let [bx, by] = d.block(r);
                    let (cx, cy) = (grid[0] > 1, grid[1] > 1);
                    let edges =
                        3 * (usize::from(cx) * 2 * by.len() + usize::from(cy) * 2 * bx.len());
                    // Cuts along both axes: each of the 4 corner cells has 5 links across (3 + 3 counted, one
                    // shared), so 1 less each.
                    let expect = if cx && cy { edges - 4 } else { edges };
                    assert_eq!(l.recv_len(), expect, "{nx}x{ny} {grid:?} rank {r} {kind:?}");
                }
            }
        }
    }
}
