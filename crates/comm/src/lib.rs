//! bespoke-comm: the small rank interface bespoke's distributed solvers are written against.
//!
//! A rank knows its number and the job's size, starts non-blocking exchanges of `u32` words (bit patterns of
//! whatever the solver stores: halos move exactly), polls or waits for them, and joins a few collectives
//! (barrier, all-gather, all-reduce, broadcast). Two implementations:
//!
//! - [`ThreadComm`]: ranks as threads of one process ([`run_threads`]), each typically with its own device. It
//!   serves multi-GPU workstations without `mpirun` and lets the ordinary test suite cover every decomposition.
//! - `MpiComm` (feature `mpi`): MPI ranks through rsmpi. Across nodes it is MPI; there is no home-made network
//!   transport.
//!
//! Failure never hangs a job: a thread rank that returns an error or panics marks the job failed, and every
//! other rank's pending or later call returns [`CommError::PeerFailed`] naming it; an MPI rank that fails calls
//! [`Comm::fail`], which prints the message and aborts the whole job (`MPI_Abort`).
//!
//! ```
//! use bespoke_comm::{Comm, Expect, Message, run_threads};
//!
//! // A ring: every rank sends its number to the next and receives from the previous.
//! let got = run_threads(3, |comm| {
//!     let (r, p) = (comm.rank(), comm.size());
//!     let ex = comm.start(
//!         vec![Message { peer: (r + 1) % p, tag: 7, data: vec![r as u32] }],
//!         &[Expect { peer: (r + p - 1) % p, tag: 7, len: 1 }],
//!     )?;
//!     Ok::<_, bespoke_comm::CommError>(ex.wait()?[0][0])
//! })
//! .unwrap();
//! assert_eq!(got, vec![2, 0, 1]);
//! ```

mod exact;
#[cfg(feature = "mpi")]
mod mpi_comm;
pub mod scaling;
mod threads;

pub use exact::ExactSum;
#[cfg(feature = "mpi")]
pub use mpi_comm::MpiComm;
pub use threads::{RankFailure, ThreadComm, run_threads};

/// A message tag. Tags at or above [`RESERVED_TAGS`] belong to the collectives.
pub type Tag = u32;
/// First tag the collectives use; solver messages use tags below it.
pub const RESERVED_TAGS: Tag = 1 << 30;

/// Errors of the rank layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommError {
    /// Another rank failed; this rank's call was abandoned instead of waiting for it forever.
    #[error("rank {rank} failed: {message}")]
    PeerFailed { rank: usize, message: String },
    /// The ranks were given different values of something that must agree (compared before any work).
    #[error("the ranks disagree on {what}: {detail}")]
    Mismatch { what: String, detail: String },
    /// A call with arguments the layer cannot honour (a peer past the job's size, a reserved tag, a length that
    /// does not match what arrived).
    #[error("{0}")]
    Invalid(String),
    /// An error the MPI library reported.
    #[error("MPI: {0}")]
    Mpi(String),
}

pub type Result<T, E = CommError> = std::result::Result<T, E>;

/// Words to send to `peer` under `tag`.
#[derive(Clone, Debug)]
pub struct Message {
    pub peer: usize,
    pub tag: Tag,
    pub data: Vec<u32>,
}

/// A receive of exactly `len` words from `peer` under `tag`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expect {
    pub peer: usize,
    pub tag: Tag,
    pub len: usize,
}

/// An exchange in flight: its receives are posted and its sends started.
pub trait Exchange {
    /// Makes progress without blocking (MPI implementations here progress only inside calls: poll this while
    /// the device works); true once every receive has arrived.
    fn test(&mut self) -> Result<bool>;
    /// Blocks until everything has arrived and been sent; the received words in the order of the `Expect`s.
    fn wait(self: Box<Self>) -> Result<Vec<Vec<u32>>>;
}

/// Reductions of [`Comm::all_reduce_f64`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Sum,
    Min,
    Max,
}

/// One rank's view of the job.
pub trait Comm: std::fmt::Debug {
    /// This rank, 0..size.
    fn rank(&self) -> usize;
    /// Ranks in the job.
    fn size(&self) -> usize;
    /// This rank among the ranks on its machine, 0..[`node_size`](Comm::node_size), in the order of their job
    /// ranks: which of the machine's GPUs it takes (one each where there are as many, `GpuOptions::node_rank`).
    /// Ranks as threads share one process and so one machine: their job rank.
    fn node_rank(&self) -> usize {
        self.rank()
    }
    /// Ranks on this rank's machine (all of them for ranks as threads).
    fn node_size(&self) -> usize {
        self.size()
    }
    /// "threads" or "mpi".
    fn kind(&self) -> &'static str;
    /// Posts the receives, starts the sends, returns at once.
    fn start(&self, sends: Vec<Message>, recvs: &[Expect]) -> Result<Box<dyn Exchange + '_>>;
    /// Every rank's `mine`, indexed by rank, on every rank.
    fn all_gather_bytes(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// Every rank's `mine`, indexed by rank, on rank `root` (`Some`); `None` on the others, which receive
    /// nothing (what one rank writes to a file: only it holds the whole). This default gathers on every rank;
    /// the transports override it.
    fn gather_bytes(&self, root: usize, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        check_root(root, self.size(), "gather")?;
        let all = self.all_gather_bytes(mine)?;
        Ok((self.rank() == root).then_some(all))
    }
    /// `data` of rank `root` on every rank.
    fn broadcast_bytes(&self, root: usize, data: &mut Vec<u8>) -> Result<()>;
    /// Rank `root`'s part for rank `r` on rank `r`, each rank receiving its own part alone (what one rank read
    /// or built for all: no rank but the root ever holds the whole). The root passes `Some(make)`, and `make(r)`
    /// is called for every rank in turn, each part sent before the next is made, so the root holds one at a
    /// time; the other ranks pass `None` (ignored if given).
    fn scatter_bytes(&self, root: usize, make: Option<Parts<'_>>) -> Result<Vec<u8>>;
    /// Element-wise reduction over the ranks, the same on every rank (reduced in rank order, so the result does
    /// not depend on timing).
    fn all_reduce_f64(&self, values: &mut [f64], op: Op) -> Result<()> {
        let mine: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let all = self.all_gather_bytes(&mine)?;
        same_lengths(&all, self.rank(), values.len(), 8)?;
        for (j, v) in values.iter_mut().enumerate() {
            let at = |r: usize| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&all[r][8 * j..8 * j + 8]);
                f64::from_le_bytes(b)
            };
            let mut acc = at(0);
            for r in 1..all.len() {
                let x = at(r);
                acc = match op {
                    Op::Sum => acc + x,
                    Op::Min => acc.min(x),
                    Op::Max => acc.max(x),
                };
            }
            *v = acc;
        }
        Ok(())
    }
    /// Element-wise exact sums over the ranks: every rank's terms in one [`ExactSum`] each, so the result is the
    /// same bits on every rank, for any number of ranks and any split of the terms among them.
    fn all_reduce_exact(&self, sums: &mut [ExactSum]) -> Result<()> {
        let mine: Vec<u8> = sums.iter().flat_map(|s| s.to_bytes()).collect();
        let all = self.all_gather_bytes(&mine)?;
        // Every rank's records parsed before any is merged, so a bad one leaves `sums` as they were.
        let mut theirs = Vec::with_capacity(all.len());
        for (r, mut bytes) in all.iter().map(|b| b.as_slice()).enumerate() {
            let mut got = Vec::with_capacity(sums.len());
            while !bytes.is_empty() {
                let (s, used) = ExactSum::from_bytes(bytes).ok_or_else(|| {
                    CommError::Invalid(format!("rank {r} sent a malformed exact sum"))
                })?;
                got.push(s);
                bytes = &bytes[used..];
            }
            if got.len() != sums.len() {
                return Err(length_mismatch(r, got.len(), self.rank(), sums.len()));
            }
            theirs.push(got);
        }
        for (r, got) in theirs.iter().enumerate() {
            if r == self.rank() {
                continue;
            }
            for (s, t) in sums.iter_mut().zip(got) {
                s.merge(t);
            }
        }
        Ok(())
    }
    /// Waits until every rank has called it.
    fn barrier(&self) -> Result<()> {
        self.all_gather_bytes(&[]).map(|_| ())
    }
    /// Fails the whole job with `message` (threads: the other ranks' calls return `PeerFailed`; MPI: printed,
    /// then `MPI_Abort`, which does not return).
    fn fail(&self, message: &str);
    /// Says that this rank's error, if it returns one, relays rank `rank`'s (a check one rank made and sent to
    /// the others). Threads: where this rank's is the job's first failure and rank `rank` failed too,
    /// [`run_threads`] reports rank `rank`'s own error, not whichever relay of it returned first; nothing else
    /// changes. MPI: nothing (each rank reports its own error).
    fn blame(&self, rank: usize) {
        let _ = rank;
    }

    /// Checks that every rank passed the same `value` of `what` (a configuration's text or hash, a step count),
    /// so that ranks started with different arguments stop with an error before they exchange anything.
    fn check_same(&self, what: &str, value: &[u8]) -> Result<()> {
        let all = self.all_gather_bytes(value)?;
        if let Some(r) = all.iter().position(|v| v != value) {
            let show = |b: &[u8]| {
                let s = String::from_utf8_lossy(b);
                if s.chars().count() > 200 {
                    format!("{}…", s.chars().take(200).collect::<String>())
                } else {
                    s.into_owned()
                }
            };
            return Err(CommError::Mismatch {
                what: what.into(),
                detail: format!(
                    "rank {r} has `{}`, rank {} has `{}`",
                    show(&all[r]),
                    self.rank(),
                    show(value)
                ),
            });
        }
        Ok(())
    }
}

/// Checks that every rank's part of a reduction holds `count` values of `unit` bytes, as this rank's does.
fn same_lengths(all: &[Vec<u8>], rank: usize, count: usize, unit: usize) -> Result<()> {
    match all.iter().position(|b| b.len() != count * unit) {
        Some(r) => Err(length_mismatch(r, all[r].len() / unit, rank, count)),
        None => Ok(()),
    }
}

/// Rank `r` gave `got` values to a reduction where `rank` gave `count`.
fn length_mismatch(r: usize, got: usize, rank: usize, count: usize) -> CommError {
    CommError::Mismatch {
        what: "the length of an all-reduce".into(),
        detail: format!("rank {r} gave {got} values, rank {rank} {count}"),
    }
}

/// The job size when this process was started by an MPI launcher (`mpirun`, `srun`, `mpiexec`), from the
/// variables they set (Open MPI's, then PMI's); None otherwise.
pub fn launched_size() -> Option<usize> {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_SIZE",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// This process's rank when an MPI launcher started it, from the variables it sets (as [`launched_size`]);
/// None otherwise. Known before MPI starts, so a rank can skip what only rank 0 needs (reading a whole mesh).
pub fn launched_rank() -> Option<usize> {
    ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// What a scatter's root makes each rank's part with ([`Comm::scatter_bytes`]).
pub type Parts<'a> = &'a mut dyn FnMut(usize) -> Vec<u8>;

/// The root's maker of a scatter's parts.
pub(crate) fn root_parts(make: Option<Parts<'_>>) -> Result<Parts<'_>> {
    make.ok_or_else(|| CommError::Invalid("a scatter's root gave no parts".into()))
}

/// A collective's root must be a rank of the job.
pub(crate) fn check_root(root: usize, size: usize, what: &str) -> Result<()> {
    match root < size {
        true => Ok(()),
        false => Err(CommError::Invalid(format!(
            "{what} root {root} in a job of {size} ranks"
        ))),
    }
}

/// Checks the arguments of [`Comm::start`] against the job (shared by the implementations).
pub(crate) fn check_start(size: usize, sends: &[Message], recvs: &[Expect]) -> Result<()> {
    for (peer, tag) in sends
        .iter()
        .map(|m| (m.peer, m.tag))
        .chain(recvs.iter().map(|e| (e.peer, e.tag)))
    {
        if peer >= size {
            return Err(CommError::Invalid(format!(
                "peer {peer} in a job of {size} ranks"
            )));
        }
        if tag >= RESERVED_TAGS {
            return Err(CommError::Invalid(format!(
                "tag {tag} is reserved for the collectives (use < {RESERVED_TAGS})"
            )));
        }
    }
    Ok(())
}
