//! Rows of A into launches that share rows of B. Each launch loads every row of B its rows use, once per column
//! (its accumulators live in one invocation), so rows that read the same rows of B belong in one launch. Cut in
//! their own order, the launches of a tensor-product operator are slabs: hex-p6-m132 (343 × 1029, a row
//! (i, j, k) reading the pencils of B through it along three axes) in 4 slabs along one axis reads 2093 rows of
//! B a column, the pencils across the cuts once per slab; cut along two axes, 1715. This finds such cuts
//! without knowing the structure: recursive bisection of the hypergraph whose vertices are rows of A and whose
//! nets are rows of B, each cut refined by Fiduccia–Mattheyses passes (the net cut is what a cut adds to the
//! loads: Σ over launches of their rows of B = rows of B used + nets cut, summed over the bisections).
//!
//! A launch's size stays within its cap: terms (non-zeros), or loads and stores (each row of B it reads, once,
//! plus its stores to C) — a side of a bisection that holds g launches holds at most g caps, and a launch within
//! one cap, or there is no partition (the caller keeps the launches in row order).

/// Vertex visits one partition may make before it gives up: the PyFR suite's largest unrolled operators, ~1000
/// rows, take at most 24 million (hex-p6-m460 in 28 launches of 256 terms, 0.15 s in a release build); random
/// operators of 5000–19000 rows, which would take seconds, give up in a quarter of a second.
const PARTITION_WORK: usize = 40_000_000;

/// FM passes per bisection at most (each moves every vertex once, keeping the best prefix).
const PASSES: usize = 8;

/// Moves a pass makes past its best prefix before it stops (or an eighth of the vertices, where more).
const STALL: usize = 48;

use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

/// Partitions this process has made, by their inputs (a tuner plans one operator under one cap for many
/// candidates); cleared past [`REMEMBERED`] entries.
static MADE: LazyLock<Mutex<HashMap<Key, Option<Groups>>>> = LazyLock::new(Default::default);
type Key = (Vec<Row>, Measure, usize, usize);
type Groups = Vec<Vec<usize>>;
const REMEMBERED: usize = 256;

/// What a launch's cap counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Measure {
    /// Non-zeros: additive.
    Terms,
    /// Rows of B read (once a launch, however many of its rows read them) plus stores to C.
    Accesses,
    /// Rows of A (an invocation row's accumulators), the terms kept within a tenth of their share.
    Rows,
}

/// One row of A as the partition sees it: the rows of B it reads (0-based within the K slice, ascending,
/// distinct) and its accesses to C (0, 1 or 2: β = 1 without terms writes nothing; β = 0 or a row without
/// terms a store; else a load and a store).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Row {
    pub reads: Vec<usize>,
    pub stores: usize,
}

impl Row {
    /// A row reading `reads` (any order, repeats allowed) with `stores` accesses to C.
    pub(crate) fn new(reads: impl IntoIterator<Item = usize>, stores: usize) -> Self {
        let mut reads: Vec<usize> = reads.into_iter().collect();
        reads.sort_unstable();
        reads.dedup();
        Self { reads, stores }
    }
}

/// Rows `0..rows.len()` in `parts` groups, each ascending and within `cap` by `measure`, the groups ordered by
/// their first row; `None` where the bisections find none within the caps or the work would pass
/// [`PARTITION_WORK`]. Deterministic: ties go to the lower row.
pub(crate) fn partition(
    rows: &[Row],
    measure: Measure,
    cap: usize,
    parts: usize,
) -> Option<Vec<Vec<usize>>> {
    let key = (rows.to_vec(), measure, cap, parts);
    if let Some(p) = MADE.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return p;
    }
    let p = made(rows, measure, cap, parts);
    if let Ok(mut m) = MADE.lock() {
        if m.len() >= REMEMBERED {
            m.clear();
        }
        m.insert(key, p.clone());
    }
    p
}

/// [`partition`], made.
fn made(rows: &[Row], measure: Measure, cap: usize, parts: usize) -> Option<Vec<Vec<usize>>> {
    if parts == 0 || rows.is_empty() {
        return None;
    }
    let mut work = 0usize;
    let all: Vec<usize> = (0..rows.len()).collect();
    let mut out = split(rows, measure, cap, all, parts, &mut work)?;
    for p in &mut out {
        p.sort_unstable();
    }
    out.retain(|p| !p.is_empty());
    out.sort_unstable_by_key(|p| p[0]);
    Some(out)
}

/// Rows of B a grouping loads: each group's union, summed.
pub(crate) fn loads(rows: &[Row], groups: &[Vec<usize>]) -> usize {
    let width = rows
        .iter()
        .flat_map(|r| r.reads.last())
        .max()
        .map_or(0, |&p| p + 1);
    let mut mark = vec![usize::MAX; width];
    let mut n = 0;
    for (g, group) in groups.iter().enumerate() {
        for &i in group {
            for &p in &rows[i].reads {
                if mark[p] != g {
                    mark[p] = g;
                    n += 1;
                }
            }
        }
    }
    n
}

/// The size of `verts` as one launch by `measure`.
fn size(rows: &[Row], measure: Measure, verts: &[usize]) -> usize {
    match measure {
        Measure::Terms => verts.iter().map(|&v| rows[v].reads.len()).sum(),
        Measure::Rows => verts.len(),
        Measure::Accesses => {
            let mut u: Vec<usize> = verts
                .iter()
                .flat_map(|&v| rows[v].reads.iter().copied())
                .collect();
            u.sort_unstable();
            u.dedup();
            u.len() + verts.iter().map(|&v| rows[v].stores).sum::<usize>()
        }
    }
}

fn split(
    rows: &[Row],
    measure: Measure,
    cap: usize,
    verts: Vec<usize>,
    parts: usize,
    work: &mut usize,
) -> Option<Vec<Vec<usize>>> {
    if parts == 1 || verts.len() < 2 {
        return (size(rows, measure, &verts) <= cap).then(|| vec![verts]);
    }
    let first = parts.div_ceil(2);
    let counts = [first, parts - first];
    let terms: usize = verts.iter().map(|&v| rows[v].reads.len()).sum();
    let widest = verts
        .iter()
        .map(|&v| rows[v].reads.len())
        .max()
        .unwrap_or(0);
    // A side's share of the terms may exceed its part by a tolerance: for terms, the slack the cap leaves spread
    // over the bisections still to come (a side of 195 rows of 21 terms, 4095, does not go in two launches of
    // 2048), then half that, then none; for accesses, whose cap is not additive, 25 %, 10 %, none. A looser
    // balance may cut fewer nets; where its sides cannot be cut within the cap below, a tighter one is tried.
    let tolerances = match measure {
        Measure::Terms => {
            let slack = cap.saturating_mul(parts) as f64 / terms.max(1) as f64;
            let levels = parts.next_power_of_two().trailing_zeros().max(1) as f64;
            let t = (slack.powf(1.0 / levels) - 1.0).max(0.0);
            [t, t / 2.0, 0.0]
        }
        Measure::Accesses => [0.25, 0.1, 0.0],
        Measure::Rows => [0.1, 0.05, 0.0],
    };
    for tol in tolerances {
        let share =
            counts.map(|g| ((terms * g) as f64 / parts as f64 * (1.0 + tol)) as usize + widest);
        let limits = Limits {
            weight: counts.map(|g| cap.saturating_mul(g)),
            terms: share,
        };
        if let Some((a, b)) = bisect(rows, measure, &verts, limits, first, parts, work)
            && let Some(mut out) = split(rows, measure, cap, a, first, work)
            && let Some(more) = split(rows, measure, cap, b, parts - first, work)
        {
            out.extend(more);
            return Some(out);
        }
        if *work > PARTITION_WORK {
            return None;
        }
    }
    None
}

/// What each side of a bisection may hold: by the launch's measure (`g` caps for a side of `g` launches) and in
/// terms (its share, with a tolerance).
#[derive(Clone, Copy)]
struct Limits {
    weight: [usize; 2],
    terms: [usize; 2],
}

/// `verts` in two sides within `limits`, side 0 aiming at `first`/`parts` of the terms, with the fewest nets cut
/// among a few starts (the rows in order; grown from the first, middle and last row) each refined by FM.
fn bisect(
    rows: &[Row],
    measure: Measure,
    verts: &[usize],
    limits: Limits,
    first: usize,
    parts: usize,
    work: &mut usize,
) -> Option<(Vec<usize>, Vec<usize>)> {
    let g = Graph::new(rows, measure, verts);
    let total: usize = g.terms.iter().sum();
    let target = total * first / parts;
    let n = verts.len();
    let mut best: Option<(usize, Vec<u8>)> = None;
    let starts = [None, Some(0), Some(n / 2), Some(n.saturating_sub(1))];
    for (s, seed) in starts.into_iter().enumerate() {
        if starts[..s].contains(&seed) {
            continue;
        }
        let mut st = match seed {
            None => {
                let mut acc = 0;
                let side = g
                    .terms
                    .iter()
                    .map(|&t| {
                        let s = u8::from(acc >= target);
                        acc += t;
                        s
                    })
                    .collect();
                State::new(&g, side)
            }
            Some(seed) => g.grown(seed, target, work),
        };
        st.refine(&g, limits, work);
        *work += n * PASSES;
        if *work > PARTITION_WORK {
            return None;
        }
        if st.fits(limits) && best.as_ref().is_none_or(|(c, _)| st.cut < *c) {
            best = Some((st.cut, st.side));
        }
    }
    let (_, side) = best?;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (k, &v) in verts.iter().enumerate() {
        if side[k] == 0 { a.push(v) } else { b.push(v) }
    }
    Some((a, b))
}

/// One bisection's hypergraph: local vertices `0..n`, local nets.
struct Graph {
    nets: Vec<Vec<u32>>,
    pins: Vec<Vec<u32>>,
    /// Terms of each vertex (for the start's target and the Terms measure).
    terms: Vec<usize>,
    /// What a vertex adds to its side on its own: its terms (Terms) or its stores (Accesses).
    own: Vec<usize>,
    accesses: bool,
}

impl Graph {
    fn new(rows: &[Row], measure: Measure, verts: &[usize]) -> Self {
        let mut local = std::collections::HashMap::new();
        let mut pins: Vec<Vec<u32>> = Vec::new();
        let nets = verts
            .iter()
            .enumerate()
            .map(|(k, &v)| {
                rows[v]
                    .reads
                    .iter()
                    .map(|&p| {
                        let id = *local.entry(p).or_insert_with(|| {
                            pins.push(Vec::new());
                            pins.len() as u32 - 1
                        });
                        pins[id as usize].push(k as u32);
                        id
                    })
                    .collect()
            })
            .collect();
        let terms: Vec<usize> = verts.iter().map(|&v| rows[v].reads.len()).collect();
        let accesses = measure == Measure::Accesses;
        let own = match measure {
            Measure::Accesses => verts.iter().map(|&v| rows[v].stores).collect(),
            Measure::Terms => terms.clone(),
            Measure::Rows => vec![1; verts.len()],
        };
        Self {
            nets,
            pins,
            terms,
            own,
            accesses,
        }
    }

    /// Side 0 grown from `seed`: every vertex on side 1, then, until side 0 holds `target` terms, the vertex
    /// that brings the fewest nets new to side 0 (then the most it shares, then the lowest) moves over.
    fn grown(&self, seed: usize, target: usize, work: &mut usize) -> State {
        let n = self.nets.len();
        let mut st = State::new(self, vec![1; n]);
        let mut terms = 0;
        let mut next = Some(seed);
        while let Some(v) = next {
            st.shift(self, v);
            terms += self.terms[v];
            if terms >= target {
                break;
            }
            *work += n;
            if *work > PARTITION_WORK {
                break;
            }
            next = (0..n)
                .filter(|&u| st.side[u] == 1)
                .min_by_key(|&u| (st.fresh[u], Reverse(self.nets[u].len()), u));
        }
        st
    }
}

/// A bisection's state: each vertex's side, each net's pins per side, and per vertex the nets on which it is
/// its side's only pin (`solo`) and the nets with no pin on the other side (`fresh`): moving it uncuts `solo`
/// minus the lone-pin nets and cuts `fresh` minus them, so its gain in cut nets is `solo − fresh`.
struct State {
    side: Vec<u8>,
    cnt: Vec<[u32; 2]>,
    solo: Vec<i64>,
    fresh: Vec<i64>,
    weight: [usize; 2],
    terms: [usize; 2],
    cut: usize,
}

impl State {
    fn new(g: &Graph, side: Vec<u8>) -> Self {
        let mut cnt = vec![[0u32; 2]; g.pins.len()];
        for (v, nets) in g.nets.iter().enumerate() {
            for &p in nets {
                cnt[p as usize][side[v] as usize] += 1;
            }
        }
        let (mut solo, mut fresh) = (vec![0; side.len()], vec![0; side.len()]);
        let (mut weight, mut terms) = ([0usize; 2], [0usize; 2]);
        for (v, nets) in g.nets.iter().enumerate() {
            let s = side[v] as usize;
            weight[s] += g.own[v];
            terms[s] += g.terms[v];
            for &p in nets {
                let c = cnt[p as usize];
                solo[v] += i64::from(c[s] == 1);
                fresh[v] += i64::from(c[1 - s] == 0);
            }
        }
        let mut cut = 0;
        for c in &cnt {
            cut += usize::from(c[0] > 0 && c[1] > 0);
            if g.accesses {
                weight[0] += usize::from(c[0] > 0);
                weight[1] += usize::from(c[1] > 0);
            }
        }
        Self {
            side,
            cnt,
            solo,
            fresh,
            weight,
            terms,
            cut,
        }
    }

    fn fits(&self, limits: Limits) -> bool {
        (0..2).all(|s| self.weight[s] <= limits.weight[s] && self.terms[s] <= limits.terms[s])
    }

    /// Whether the other side stays within `limits` were `v` to move there.
    fn may_move(&self, g: &Graph, v: usize, limits: Limits) -> bool {
        let t = 1 - self.side[v] as usize;
        let nets = if g.accesses {
            self.fresh[v] as usize
        } else {
            0
        };
        self.weight[t] + g.own[v] + nets <= limits.weight[t]
            && self.terms[t] + g.terms[v] <= limits.terms[t]
    }

    /// Moves `v` to the other side, keeping every count exact.
    fn shift(&mut self, g: &Graph, v: usize) {
        let s = self.side[v] as usize;
        let t = 1 - s;
        let gain = self.solo[v] - self.fresh[v];
        if g.accesses {
            self.weight[s] -= self.solo[v] as usize;
            self.weight[t] += self.fresh[v] as usize;
        }
        self.weight[s] -= g.own[v];
        self.weight[t] += g.own[v];
        self.terms[s] -= g.terms[v];
        self.terms[t] += g.terms[v];
        self.cut = (self.cut as i64 - gain) as usize;
        for &p in &g.nets[v] {
            let p = p as usize;
            let [from, to] = [self.cnt[p][s], self.cnt[p][t]];
            let pins = &g.pins[p];
            if to == 0 {
                for &u in pins {
                    if u as usize != v {
                        self.fresh[u as usize] -= 1;
                    }
                }
            } else if to == 1 {
                let u = pins.iter().find(|&&u| self.side[u as usize] as usize == t);
                self.solo[*u.expect("a pin on the other side") as usize] -= 1;
            }
            if from == 1 {
                for &u in pins {
                    if u as usize != v {
                        self.fresh[u as usize] += 1;
                    }
                }
            } else if from == 2 {
                let u = pins
                    .iter()
                    .find(|&&u| u as usize != v && self.side[u as usize] as usize == s);
                self.solo[*u.expect("a second pin on this side") as usize] += 1;
            }
            self.cnt[p][s] -= 1;
            self.cnt[p][t] += 1;
        }
        self.side[v] = t as u8;
        let (mut solo, mut fresh) = (0, 0);
        for &p in &g.nets[v] {
            let c = self.cnt[p as usize];
            solo += i64::from(c[t] == 1);
            fresh += i64::from(c[s] == 0);
        }
        self.solo[v] = solo;
        self.fresh[v] = fresh;
    }

    /// Fiduccia–Mattheyses passes: each moves every vertex once, the one of highest gain whose move stays within
    /// `limits` first (then the lowest), and keeps the prefix of moves that cut fewest nets within the limits;
    /// they stop when a pass finds nothing better.
    fn refine(&mut self, g: &Graph, limits: Limits, work: &mut usize) {
        let n = self.side.len();
        let score = |st: &State| st.fits(limits).then_some(st.cut);
        for _ in 0..PASSES {
            let start = score(self);
            let mut best = (start, 0);
            let mut locked = vec![false; n];
            let mut moves = Vec::with_capacity(n);
            for _ in 0..n {
                *work += n;
                if *work > PARTITION_WORK {
                    break;
                }
                let pick = (0..n)
                    .filter(|&v| !locked[v])
                    .filter(|&v| self.may_move(g, v, limits))
                    .max_by_key(|&v| (self.solo[v] - self.fresh[v], Reverse(v)));
                let Some(v) = pick else { break };
                self.shift(g, v);
                locked[v] = true;
                moves.push(v);
                if let Some(c) = score(self)
                    && best.0.is_none_or(|b| c < b)
                {
                    best = (Some(c), moves.len());
                }
                if moves.len() - best.1 > STALL.max(n / 8) {
                    break;
                }
            }
            for &v in moves[best.1..].iter().rev() {
                self.shift(g, v);
            }
            if best.1 == 0 {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests;
