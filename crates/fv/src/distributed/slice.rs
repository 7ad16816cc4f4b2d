//! A rank's slice of the whole operator, what a rank's part is made from (`part.rs`), and its bytes (what rank 0
//! sends each rank).

use bespoke_comm::{Comm, CommError};

use crate::error::{FvError, Result};
use crate::operator::{Boundary, Operator};

/// What a rank needs of the whole operator to build its part: its own rows (global numbering, tets ascending)
/// and, for every off-rank neighbour they name (ascending), its owner, volume and centroid.
#[derive(Debug, PartialEq)]
pub(super) struct Slice {
    pub(super) rank: usize,
    pub(super) ranks: usize,
    pub(super) n: usize,
    pub(super) boundary: Boundary,
    pub(super) max_row_sum: f64,
    pub(super) own: Vec<u32>,
    pub(super) values: Vec<[f64; 4]>,
    pub(super) indices: Vec<[u32; 4]>,
    pub(super) volumes: Vec<f64>,
    pub(super) centroids: Vec<[f64; 3]>,
    /// (tet, owner).
    pub(super) others: Vec<(u32, u32)>,
    pub(super) other_volumes: Vec<f64>,
    pub(super) other_centroids: Vec<[f64; 3]>,
}

/// Bytes of one own row and of one neighbour in [`Slice::to_bytes`].
pub(super) const OWN_BYTES: usize = 4 + 32 + 16 + 8 + 24;
pub(super) const OTHER_BYTES: usize = 4 + 4 + 8 + 24;
/// Header: flag, rank, ranks, n, boundary kind, its value, max row sum, own count, neighbour count.
pub(super) const HEADER_BYTES: usize = 1 + 8 * 3 + 1 + 8 + 8 + 8 * 2;

impl Slice {
    /// Rank `rank` of `ranks`'s slice of `op` under `part`, `own` its tets ascending.
    pub(super) fn of(
        op: &Operator,
        part: &[u32],
        (rank, ranks): (usize, usize),
        own: Vec<u32>,
    ) -> Self {
        let n = op.n();
        let mut others: Vec<(u32, u32)> = own
            .iter()
            .flat_map(|&t| op.indices[t as usize])
            .filter(|&j| (j as usize) < n && part[j as usize] as usize != rank)
            .map(|j| (j, part[j as usize]))
            .collect();
        others.sort_unstable();
        others.dedup();
        Self {
            rank,
            ranks,
            n,
            boundary: op.boundary,
            max_row_sum: op.max_row_sum(),
            values: own.iter().map(|&t| op.values[t as usize]).collect(),
            indices: own.iter().map(|&t| op.indices[t as usize]).collect(),
            volumes: own.iter().map(|&t| op.volumes[t as usize]).collect(),
            centroids: own.iter().map(|&t| op.centroids[t as usize]).collect(),
            own,
            other_volumes: others
                .iter()
                .map(|&(j, _)| op.volumes[j as usize])
                .collect(),
            other_centroids: others
                .iter()
                .map(|&(j, _)| op.centroids[j as usize])
                .collect(),
            others,
        }
    }

    /// Every slot of the own rows as an index into the slice (own tets 0..m, neighbours m..m + g, the Dirichlet
    /// ghost m + g), after checking that the slice is whole: tets ascending and below n, neighbours on other
    /// ranks of the job, every slot one of them.
    pub(super) fn resolve(&self) -> Result<Vec<[u32; 4]>> {
        let (m, g, n) = (self.own.len(), self.others.len(), self.n);
        let bad = |why: String| FvError::Shape(format!("the part of rank {}: {why}", self.rank));
        if self.rank >= self.ranks {
            return Err(bad(format!("a job of {} ranks", self.ranks)));
        }
        if m + g >= u32::MAX as usize {
            return Err(bad(format!("{m} tets and {g} ghosts exceed u32 indices")));
        }
        if let Some(w) = self.own.windows(2).find(|w| w[0] >= w[1]) {
            return Err(bad(format!("own tets out of order at {}", w[1])));
        }
        if let Some(w) = self.others.windows(2).find(|w| w[0].0 >= w[1].0) {
            return Err(bad(format!("neighbours out of order at {}", w[1].0)));
        }
        if let Some(&t) = self
            .own
            .iter()
            .chain(self.others.iter().map(|(t, _)| t))
            .find(|&&t| t as usize >= n)
        {
            return Err(bad(format!("tet {t} in a mesh of {n}")));
        }
        if let Some(&(t, q)) = self
            .others
            .iter()
            .find(|&&(_, q)| q as usize >= self.ranks || q as usize == self.rank)
        {
            return Err(bad(format!("neighbour {t} owned by rank {q}")));
        }
        self.own
            .iter()
            .zip(&self.indices)
            .map(|(&t, row)| {
                let mut out = [0u32; 4];
                for (o, &j) in out.iter_mut().zip(row) {
                    *o = if j as usize == n {
                        (m + g) as u32
                    } else if let Ok(i) = self.own.binary_search(&j) {
                        i as u32
                    } else if let Ok(k) = self.others.binary_search_by_key(&j, |&(t, _)| t) {
                        (m + k) as u32
                    } else {
                        return Err(bad(format!(
                            "tet {t}'s neighbour {j} is neither its own nor a listed neighbour"
                        )));
                    };
                }
                Ok(out)
            })
            .collect()
    }

    pub(super) fn to_bytes(&self) -> Vec<u8> {
        let (m, g) = (self.own.len(), self.others.len());
        let mut b = Vec::with_capacity(HEADER_BYTES + m * OWN_BYTES + g * OTHER_BYTES);
        b.push(FROM_ROOT_PART);
        for v in [self.rank, self.ranks, self.n] {
            b.extend((v as u64).to_le_bytes());
        }
        let (kind, value) = match self.boundary {
            Boundary::ZeroFlux => (0u8, 0.0),
            Boundary::Dirichlet(v) => (1, v),
        };
        b.push(kind);
        b.extend(value.to_le_bytes());
        b.extend(self.max_row_sum.to_le_bytes());
        b.extend((m as u64).to_le_bytes());
        b.extend((g as u64).to_le_bytes());
        for i in 0..m {
            b.extend(self.own[i].to_le_bytes());
            self.values[i]
                .iter()
                .for_each(|v| b.extend(v.to_le_bytes()));
            self.indices[i]
                .iter()
                .for_each(|v| b.extend(v.to_le_bytes()));
            b.extend(self.volumes[i].to_le_bytes());
            self.centroids[i]
                .iter()
                .for_each(|v| b.extend(v.to_le_bytes()));
        }
        for k in 0..g {
            b.extend(self.others[k].0.to_le_bytes());
            b.extend(self.others[k].1.to_le_bytes());
            b.extend(self.other_volumes[k].to_le_bytes());
            self.other_centroids[k]
                .iter()
                .for_each(|v| b.extend(v.to_le_bytes()));
        }
        b
    }

    /// The slice in `b`, or rank 0's error, or what is wrong with the bytes.
    pub(super) fn from_bytes(b: &[u8]) -> Result<Self> {
        let malformed = |why: &str| FvError::Shape(format!("a malformed part from rank 0: {why}"));
        from_root(b)?;
        if b.len() < HEADER_BYTES {
            return Err(malformed(&format!("{} bytes", b.len())));
        }
        let mut r = Reader { b, at: 1 };
        let (rank, ranks, n) = (r.usize(), r.usize(), r.usize());
        let kind = r.b[r.at];
        r.at += 1;
        let value = r.f64();
        let boundary = match kind {
            0 => Boundary::ZeroFlux,
            1 => Boundary::Dirichlet(value),
            k => return Err(malformed(&format!("boundary kind {k}"))),
        };
        let max_row_sum = r.f64();
        let (m, g) = (r.usize(), r.usize());
        let want = m
            .checked_mul(OWN_BYTES)
            .zip(g.checked_mul(OTHER_BYTES))
            .and_then(|(a, c)| a.checked_add(c)?.checked_add(HEADER_BYTES));
        if want != Some(b.len()) {
            return Err(malformed(&format!(
                "{} bytes for {m} tets and {g} neighbours",
                b.len()
            )));
        }
        let mut s = Self {
            rank,
            ranks,
            n,
            boundary,
            max_row_sum,
            own: Vec::with_capacity(m),
            values: Vec::with_capacity(m),
            indices: Vec::with_capacity(m),
            volumes: Vec::with_capacity(m),
            centroids: Vec::with_capacity(m),
            others: Vec::with_capacity(g),
            other_volumes: Vec::with_capacity(g),
            other_centroids: Vec::with_capacity(g),
        };
        for _ in 0..m {
            s.own.push(r.u32());
            s.values.push(std::array::from_fn(|_| r.f64()));
            s.indices.push(std::array::from_fn(|_| r.u32()));
            s.volumes.push(r.f64());
            s.centroids.push(std::array::from_fn(|_| r.f64()));
        }
        for _ in 0..g {
            s.others.push((r.u32(), r.u32()));
            s.other_volumes.push(r.f64());
            s.other_centroids.push(std::array::from_fn(|_| r.f64()));
        }
        Ok(s)
    }
}

/// The first byte of what rank 0 sends a rank when a part follows ([`Slice::to_bytes`], a rank's values of x);
/// [`root_failed`] sends 0 and why, so that every rank fails with rank 0's error.
pub(super) const FROM_ROOT_PART: u8 = 1;

/// What rank 0 sends every rank when it failed: 0, then why.
pub(super) fn root_failed(why: &str) -> Vec<u8> {
    let mut b = vec![0u8];
    b.extend_from_slice(why.as_bytes());
    b
}

/// The part in what rank 0 sent (after its flag byte), or rank 0's failure as this rank's error.
pub(super) fn from_root(b: &[u8]) -> Result<&[u8]> {
    match b.split_first() {
        Some((&FROM_ROOT_PART, part)) => Ok(part),
        Some((0, why)) => Err(FvError::Comm(CommError::PeerFailed {
            rank: 0,
            message: String::from_utf8_lossy(why).into_owned(),
        })),
        _ => Err(FvError::Shape(
            "a malformed part from rank 0: no flag byte".into(),
        )),
    }
}

/// Where [`from_root`] returned rank 0's error, says this rank relays it ([`Comm::blame`]): a job of threads then
/// reports rank 0's own error, not the first relay of it.
pub(super) fn blame_root(comm: &dyn Comm) -> impl Fn(&FvError) + '_ {
    move |e| {
        if let FvError::Comm(CommError::PeerFailed { rank: 0, .. }) = e {
            comm.blame(0);
        }
    }
}

/// Little-endian fields read in turn from bytes whose length was checked first.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const K: usize>(&mut self) -> [u8; K] {
        let mut v = [0u8; K];
        v.copy_from_slice(&self.b[self.at..self.at + K]);
        self.at += K;
        v
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn usize(&mut self) -> usize {
        u64::from_le_bytes(self.take()) as usize
    }
    fn f64(&mut self) -> f64 {
        f64::from_le_bytes(self.take())
    }
}
