//! What one specialised launch computes and how it binds B and C: rows of C, the slice of K, and the row blocks
//! of B and C that each fit one binding. Large problems become several launches; callers never see the limits.

use std::ops::Range;

use super::grouping::group_rows;
use super::partition::{Measure, Row, loads, partition};
use super::variant::Beta;

/// The non-zeros of one row of A as (column, value).
pub type RowTerms = Vec<(usize, f64)>;

/// The rows of A and C one launch computes, ascending: consecutive, or any set where the launches group rows
/// that share rows of B ([`plan_layouts`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchRows {
    Range(Range<usize>),
    List(Vec<usize>),
}

impl LaunchRows {
    /// A set of rows, ascending and distinct: a range where they are consecutive.
    pub fn of(list: Vec<usize>) -> Self {
        debug_assert!(list.windows(2).all(|w| w[0] < w[1]), "rows ascending");
        match (list.first(), list.last()) {
            (Some(&a), Some(&b)) if b - a + 1 == list.len() => Self::Range(a..b + 1),
            (None, _) => Self::Range(0..0),
            _ => Self::List(list),
        }
    }

    /// The rows, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let (range, list) = match self {
            Self::Range(r) => (r.clone(), &[][..]),
            Self::List(l) => (0..0, &l[..]),
        };
        range.chain(list.iter().copied())
    }

    pub fn len(&self) -> usize {
        match self {
            Self::Range(r) => r.len(),
            Self::List(l) => l.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, i: usize) -> bool {
        match self {
            Self::Range(r) => r.contains(&i),
            Self::List(l) => l.binary_search(&i).is_ok(),
        }
    }

    /// From the first row to past the last.
    pub fn span(&self) -> Range<usize> {
        match self {
            Self::Range(r) => r.clone(),
            Self::List(l) => l.first().map_or(0..0, |&a| a..l[l.len() - 1] + 1),
        }
    }
}

impl From<Range<usize>> for LaunchRows {
    fn from(r: Range<usize>) -> Self {
        Self::Range(r)
    }
}

/// The same rows as a range.
impl PartialEq<Range<usize>> for LaunchRows {
    fn eq(&self, r: &Range<usize>) -> bool {
        self.len() == r.len() && self.iter().eq(r.clone())
    }
}

/// `a..b`, or the runs of a set: `0..4, 7..11, 20..21`.
impl std::fmt::Display for LaunchRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut it = self.iter().peekable();
        let mut first = true;
        while let Some(a) = it.next() {
            let mut b = a + 1;
            while it.next_if_eq(&b).is_some() {
                b += 1;
            }
            write!(f, "{}{a}..{b}", if first { "" } else { ", " })?;
            first = false;
        }
        if first {
            write!(f, "0..0")?;
        }
        Ok(())
    }
}

/// One launch of a specialised kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    /// Rows of A and C this launch computes.
    pub rows: LaunchRows,
    /// Columns of A (rows of B) it sums over.
    pub ks: Range<usize>,
    /// β for this launch: the caller's for the first K slice, 1 for later ones.
    pub beta: Beta,
    /// Row blocks of B bound as `b0, b1, ...` (only blocks with a used row).
    pub b_blocks: Vec<Range<usize>>,
    /// Row blocks of C bound as `c0, c1, ...` after B (only blocks the launch writes).
    pub c_blocks: Vec<Range<usize>>,
    pub n: usize,
    pub ldb: usize,
    pub ldc: usize,
}

impl Layout {
    /// The launch over `rows` × `ks`, keeping the blocks it touches; `None` when it has nothing to do
    /// (β = 1 and no non-zeros in the slice).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        a_rows: &[RowTerms],
        rows: impl Into<LaunchRows>,
        ks: Range<usize>,
        beta: Beta,
        b_blocks: &[Range<usize>],
        c_blocks: &[Range<usize>],
        (n, ldb, ldc): (usize, usize, usize),
    ) -> Option<Self> {
        let rows = rows.into();
        let terms = |i: usize| a_rows[i].iter().filter(|(p, _)| ks.contains(p));
        let writes = |i: usize| beta != Beta::One || terms(i).next().is_some();
        let b_used: Vec<Range<usize>> = b_blocks
            .iter()
            .filter(|blk| rows.iter().any(|i| terms(i).any(|(p, _)| blk.contains(p))))
            .cloned()
            .collect();
        let c_used: Vec<Range<usize>> = c_blocks
            .iter()
            .filter(|blk| rows.iter().any(|i| blk.contains(&i) && writes(i)))
            .cloned()
            .collect();
        if c_used.is_empty() {
            return None;
        }
        Some(Self {
            rows,
            ks,
            beta,
            b_blocks: b_used,
            c_blocks: c_used,
            n,
            ldb,
            ldc,
        })
    }

    /// The whole problem in one launch with one binding each for B and C (what `bespoke mm gen` prints).
    pub fn single(
        a_rows: &[RowTerms],
        k: usize,
        beta: Beta,
        n: usize,
        ldb: usize,
        ldc: usize,
    ) -> Option<Self> {
        let m = a_rows.len();
        let (b, c) = (0..k, 0..m);
        Self::new(
            a_rows,
            0..m,
            0..k,
            beta,
            std::slice::from_ref(&b),
            std::slice::from_ref(&c),
            (n, ldb, ldc),
        )
    }

    /// The row's terms inside this launch's K slice.
    pub fn terms(&self, a_rows: &[RowTerms], i: usize) -> Vec<(usize, f64)> {
        a_rows[i]
            .iter()
            .filter(|(p, _)| self.ks.contains(p))
            .copied()
            .collect()
    }

    /// Whether the launch must store row `i` (β = 1 rows without terms keep their value untouched).
    pub fn writes(&self, a_rows: &[RowTerms], i: usize) -> bool {
        self.beta != Beta::One || a_rows[i].iter().any(|(p, _)| self.ks.contains(p))
    }

    /// Storage bindings the launch declares.
    pub fn bindings(&self) -> usize {
        self.b_blocks.len() + self.c_blocks.len()
    }
}

/// How much one unrolled launch may spell out; more rows become more launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchCap {
    /// At most this many non-zeros (terms) unrolled.
    Terms(usize),
    /// At most this many loads and stores of B and C: each row of B the launch's rows read, once, plus each
    /// row of C it stores (and reads, for β ≠ 0). What bstream spells out, and what drives compile time.
    Accesses(usize),
    /// The rolled family's table: rows in blocks of `r`, each block one offset, `r` rows and one column per
    /// distinct column its rows use, at most `tab_words` of those per launch and `r` coefficients per column, at
    /// most `coef_elems` (a block past the limits on its own stands alone; the caller refuses it). Sized here
    /// for consecutive blocks: the table groups rows only where that uses fewer columns.
    Table {
        r: usize,
        tab_words: usize,
        coef_elems: usize,
    },
}

/// Rows in groups within `cap` inside `ks` (a row past the cap on its own stands alone): the rolled family's
/// consecutive blocks, the unrolled families' [`grouped`].
fn row_groups(
    a_rows: &[RowTerms],
    rows: Range<usize>,
    ks: &Range<usize>,
    beta: Beta,
    cap: LaunchCap,
) -> Vec<LaunchRows> {
    match cap {
        LaunchCap::Terms(t) => grouped(a_rows, rows, ks, beta, t, Measure::Terms),
        LaunchCap::Accesses(t) => grouped(a_rows, rows, ks, beta, t, Measure::Accesses),
        LaunchCap::Table {
            r,
            tab_words,
            coef_elems,
        } => table_groups(a_rows, rows, ks, r.max(1), tab_words, coef_elems)
            .into_iter()
            .map(LaunchRows::Range)
            .collect(),
    }
}

/// Accesses of a row to C: β = 1 without terms none; β = 0, or no terms, a store; else a load and a store.
fn c_accesses(beta: Beta, has_terms: bool) -> usize {
    match (beta, has_terms) {
        (Beta::One, false) => 0,
        (Beta::Zero, _) | (_, false) => 1,
        _ => 2,
    }
}

/// Rows of B the launches of `rows` under `cap` load in all were they taken in row order, as before
/// 2026-12-05 (what [`grouped`] improves on; a test's yardstick).
#[cfg(test)]
pub(crate) fn in_order_loads(
    a_rows: &[RowTerms],
    rows: Range<usize>,
    ks: &Range<usize>,
    beta: Beta,
    cap: LaunchCap,
) -> usize {
    let (limit, accesses) = match cap {
        LaunchCap::Terms(t) => (t, false),
        LaunchCap::Accesses(t) => (t, true),
        LaunchCap::Table { .. } => return 0,
    };
    let groups = stream_groups(a_rows, rows.clone(), ks, beta, limit, accesses);
    loads(
        &local_rows(a_rows, &rows, ks, beta),
        &local_groups(&groups, &rows),
    )
}

/// Rows `rows` of A as the partition sees them: each one's rows of B in the K slice `ks` (from its start) and
/// its accesses to C.
fn local_rows(a_rows: &[RowTerms], rows: &Range<usize>, ks: &Range<usize>, beta: Beta) -> Vec<Row> {
    rows.clone()
        .map(|i| {
            let terms = a_rows[i].iter().filter(|(p, _)| ks.contains(p));
            let stores = c_accesses(beta, terms.clone().next().is_some());
            Row::new(terms.map(|(p, _)| p - ks.start), stores)
        })
        .collect()
}

/// Groups of rows as indices from the start of `rows`.
fn local_groups(groups: &[Range<usize>], rows: &Range<usize>) -> Vec<Vec<usize>> {
    groups
        .iter()
        .map(|g| (g.start - rows.start..g.end - rows.start).collect())
        .collect()
}

/// Rows in launches of at most `limit` by `measure`: consecutive ([`stream_groups`]), or, where that takes
/// several launches, as many launches grouping rows that read the same rows of B ([`partition`]) wherever those
/// load fewer rows of B in all (hex-p6-m132 at 2048 terms a launch: 1776 rows of B a column in 4 launches
/// against 2093 in order).
fn grouped(
    a_rows: &[RowTerms],
    rows: Range<usize>,
    ks: &Range<usize>,
    beta: Beta,
    limit: usize,
    measure: Measure,
) -> Vec<LaunchRows> {
    let in_order = stream_groups(
        a_rows,
        rows.clone(),
        ks,
        beta,
        limit,
        measure == Measure::Accesses,
    );
    if in_order.len() < 2 {
        return in_order.into_iter().map(LaunchRows::Range).collect();
    }
    let local = local_rows(a_rows, &rows, ks, beta);
    let ordered = local_groups(&in_order, &rows);
    // Where row order reads each row of B once already, there is nothing to gain.
    let before = loads(&local, &ordered);
    if before == loads(&local, &[(0..local.len()).collect()]) {
        return in_order.into_iter().map(LaunchRows::Range).collect();
    }
    match partition(&local, measure, limit, in_order.len()) {
        Some(p) if loads(&local, &p) < before => p
            .into_iter()
            .map(|g| LaunchRows::of(g.into_iter().map(|k| rows.start + k).collect()))
            .collect(),
        _ => in_order.into_iter().map(LaunchRows::Range).collect(),
    }
}

/// Consecutive rows in groups of at most `limit` terms, or (`accesses`) loads and stores of B and C, each group
/// as long as it fits.
fn stream_groups(
    a_rows: &[RowTerms],
    rows: Range<usize>,
    ks: &Range<usize>,
    beta: Beta,
    limit: usize,
    accesses: bool,
) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut seen = vec![false; ks.len()];
    let mut marked: Vec<usize> = Vec::new();
    let (mut start, mut size) = (rows.start, 0);
    for i in rows.clone() {
        let terms: Vec<usize> = a_rows[i]
            .iter()
            .filter(|(p, _)| ks.contains(p))
            .map(|(p, _)| p - ks.start)
            .collect();
        let add = |seen: &[bool]| {
            if !accesses {
                return terms.len();
            }
            let mut new: Vec<usize> = terms.iter().copied().filter(|&p| !seen[p]).collect();
            new.sort_unstable();
            new.dedup();
            new.len() + c_accesses(beta, !terms.is_empty())
        };
        let mut a = add(&seen);
        if size > 0 && size + a > limit {
            out.push(start..i);
            (start, size) = (i, 0);
            for p in marked.drain(..) {
                seen[p] = false;
            }
            a = add(&seen);
        }
        size += a;
        for p in terms {
            if !seen[p] {
                seen[p] = true;
                marked.push(p);
            }
        }
    }
    if start < rows.end {
        out.push(start..rows.end);
    }
    out
}

/// The rows `rows` in the rolled table's blocks of `r` ([`group_rows`]: rows that read the same columns of the
/// K slice `ks` go together) and the columns the blocks load in all (the table's entries).
pub(crate) fn rolled_blocks(
    a_rows: &[RowTerms],
    rows: Range<usize>,
    ks: &Range<usize>,
    r: usize,
) -> (Vec<Vec<usize>>, usize) {
    let cols: Vec<Vec<usize>> = rows
        .clone()
        .map(|i| {
            a_rows[i]
                .iter()
                .filter(|(p, _)| ks.contains(p))
                .map(|(p, _)| p - ks.start)
                .collect()
        })
        .collect();
    let (local, entries) = group_rows(cols, r);
    let blocks = local
        .into_iter()
        .map(|b| b.into_iter().map(|i| rows.start + i).collect())
        .collect();
    (blocks, entries)
}

/// Rows in launches whose rolled tables fit: ceil(rows / `r`) blocks take blocks + 1 offsets, `r` rows a block
/// and the blocks' columns ([`rolled_blocks`]) within `tab_words`, `r` coefficients per column within
/// `coef_elems`. Each launch grows by whole blocks while its table fits (a block past the limits on its own
/// stands alone; the caller refuses its table).
fn table_groups(
    a_rows: &[RowTerms],
    rows: Range<usize>,
    ks: &Range<usize>,
    r: usize,
    tab_words: usize,
    coef_elems: usize,
) -> Vec<Range<usize>> {
    let fits = |range: Range<usize>| {
        let blocks = range.len().div_ceil(r);
        let (_, entries) = rolled_blocks(a_rows, range, ks, r);
        blocks * (r + 1) + 1 + entries <= tab_words && entries * r <= coef_elems
    };
    let mut out = Vec::new();
    let mut start = rows.start;
    while start < rows.end {
        let end_of = |blocks: usize| rows.end.min(start + blocks * r);
        // Whole blocks: double while the table fits, then halve the gap to the first that does not.
        let (mut good, mut bad) = (1, None);
        while end_of(good) < rows.end {
            if fits(start..end_of(2 * good)) {
                good *= 2;
            } else {
                bad = Some(2 * good);
                break;
            }
        }
        if let Some(mut bad) = bad {
            while bad - good > 1 {
                let mid = (good + bad) / 2;
                if fits(start..end_of(mid)) {
                    good = mid;
                } else {
                    bad = mid;
                }
            }
        }
        out.push(start..end_of(good));
        start = end_of(good);
    }
    out
}

/// Splits the problem into launches whose bindings fit `max_bindings`: C's row blocks in groups, and for each
/// group B's row blocks in groups (later K groups accumulate with β = 1); rows are further grouped so that no
/// launch spells out more than `cap` allows.
pub fn plan_layouts(
    a_rows: &[RowTerms],
    beta: Beta,
    b_blocks: &[Range<usize>],
    c_blocks: &[Range<usize>],
    (n, ldb, ldc): (usize, usize, usize),
    max_bindings: usize,
    cap: LaunchCap,
) -> Result<Vec<Layout>, String> {
    if max_bindings < 2 {
        return Err(format!(
            "{max_bindings} storage bindings per stage: need at least 2"
        ));
    }
    let c_group = c_blocks.len().min(max_bindings / 2).max(1);
    let b_group = (max_bindings - c_group.min(c_blocks.len())).max(1);
    let mut out = Vec::new();
    for cg in c_blocks.chunks(c_group) {
        let rows = cg[0].start..cg[cg.len() - 1].end;
        for (g, bg) in b_blocks.chunks(b_group).enumerate() {
            let ks = bg[0].start..bg[bg.len() - 1].end;
            let beta = if g == 0 { beta } else { Beta::One };
            for rows in row_groups(a_rows, rows.clone(), &ks, beta, cap) {
                if let Some(l) = Layout::new(a_rows, rows, ks.clone(), beta, bg, cg, (n, ldb, ldc))
                {
                    out.push(l);
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
