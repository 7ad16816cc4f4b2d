//! MPI ranks through rsmpi. Non-blocking exchanges own their buffers (heap memory that stays put until the
//! requests complete), so they need no scope around the solver's step loop.

use std::os::raw::{c_int, c_void};

use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use crate::{
    Comm, CommError, Exchange, Expect, Message, Parts, Result, check_root, check_start, root_parts,
};

/// The world communicator of an MPI job. Made once per process by [`MpiComm::init`]; dropping it finalises MPI.
pub struct MpiComm {
    world: SimpleCommunicator,
    /// A duplicate of `world` for the point-to-point messages of collectives (`scatter_bytes`), whose own
    /// context keeps them apart from the solvers' exchanges on `world`. Freed before MPI is finalised.
    collectives: SimpleCommunicator,
    /// This rank among the ranks of its machine (`MPI_Comm_split_type` with `MPI_COMM_TYPE_SHARED`, keyed by the
    /// job rank), and their count.
    node: (usize, usize),
    // Dropped last: finalises MPI.
    _universe: Universe,
}

impl std::fmt::Debug for MpiComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MpiComm {{ rank: {}, size: {}, node: {} of {} }}",
            self.rank(),
            self.size(),
            self.node.0,
            self.node.1
        )
    }
}

impl MpiComm {
    /// Initialises MPI and installs a panic hook that aborts the whole job, so a rank that panics never leaves the
    /// others waiting in a collective or in `MPI_Finalize` (an unwinding panic or a return from `main` would drop
    /// the universe and hang the job: ../docs/scale.md). None when MPI was initialised already.
    pub fn init() -> Option<Self> {
        let universe = mpi::initialize()?;
        let world = universe.world();
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            hook(info);
            // SAFETY: MPI is initialised (this hook is installed after `initialize`) and MPI_Abort may be called
            // from any thread of an initialised process.
            unsafe {
                ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, 101);
            }
        }));
        // The ranks that share this machine's memory, in job-rank order; freed again at once.
        let node = {
            let shared = world.split_shared(world.rank());
            (shared.rank() as usize, shared.size() as usize)
        };
        Some(Self {
            collectives: world.duplicate(),
            node,
            world,
            _universe: universe,
        })
    }

    /// The MPI library's version string.
    pub fn library_version() -> String {
        mpi::environment::library_version()
            .unwrap_or_default()
            .trim_end_matches('\0')
            .trim()
            .to_owned()
    }
}

fn mpi_result(code: c_int, what: &str) -> Result<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(CommError::Mpi(format!("{what} returned error code {code}")))
    }
}

/// The most bytes one message of a scatter carries, and its tag (on the collectives' communicator).
const SCATTER_PIECE: usize = 1 << 30;
const SCATTER_TAG: c_int = 1;

fn count(n: usize) -> Result<c_int> {
    c_int::try_from(n)
        .map_err(|_| CommError::Invalid(format!("{n} words in one message exceed MPI's int count")))
}

/// Receives then sends, each with its own buffer; the buffers live as long as the requests.
struct MpiExchange {
    requests: Vec<ffi::MPI_Request>,
    recv: Vec<Vec<u32>>,
    _send: Vec<Vec<u32>>,
    done: bool,
}

impl Exchange for MpiExchange {
    fn test(&mut self) -> Result<bool> {
        if self.done {
            return Ok(true);
        }
        let mut flag: c_int = 0;
        // SAFETY: the requests were started by `start` on buffers this struct owns, and completed requests are set
        // to MPI_REQUEST_NULL by MPI_Testall, which is valid to test again.
        let code = unsafe {
            ffi::MPI_Testall(
                count(self.requests.len())?,
                self.requests.as_mut_ptr(),
                &mut flag,
                ffi::RSMPI_STATUSES_IGNORE,
            )
        };
        mpi_result(code, "MPI_Testall")?;
        self.done = flag != 0;
        Ok(self.done)
    }

    fn wait(mut self: Box<Self>) -> Result<Vec<Vec<u32>>> {
        self.finish()?;
        Ok(std::mem::take(&mut self.recv))
    }
}

impl MpiExchange {
    fn finish(&mut self) -> Result<()> {
        if !self.done {
            // SAFETY: as in `test`.
            let code = unsafe {
                ffi::MPI_Waitall(
                    count(self.requests.len())?,
                    self.requests.as_mut_ptr(),
                    ffi::RSMPI_STATUSES_IGNORE,
                )
            };
            self.done = true;
            mpi_result(code, "MPI_Waitall")?;
        }
        Ok(())
    }
}

impl Drop for MpiExchange {
    fn drop(&mut self) {
        // The buffers must outlive the requests: an exchange dropped early (an error elsewhere) waits first.
        let _ = self.finish();
    }
}

impl Comm for MpiComm {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }
    fn size(&self) -> usize {
        self.world.size() as usize
    }
    fn node_rank(&self) -> usize {
        self.node.0
    }
    fn node_size(&self) -> usize {
        self.node.1
    }
    fn kind(&self) -> &'static str {
        "mpi"
    }

    fn start(&self, sends: Vec<Message>, recvs: &[Expect]) -> Result<Box<dyn Exchange + '_>> {
        check_start(self.size(), &sends, recvs)?;
        let dt = u32::equivalent_datatype().as_raw();
        let comm = self.world.as_raw();
        let mut ex = MpiExchange {
            requests: Vec::with_capacity(sends.len() + recvs.len()),
            recv: recvs.iter().map(|e| vec![0u32; e.len]).collect(),
            _send: Vec::with_capacity(sends.len()),
            done: false,
        };
        // Receives first, so that a peer's send finds its match posted.
        for (e, buf) in recvs.iter().zip(&mut ex.recv) {
            // SAFETY: MPI_REQUEST_NULL is a valid initial value that MPI_Irecv overwrites.
            let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
            // SAFETY: `buf` holds e.len u32 and is owned by `ex`, which waits for the request before freeing it.
            let code = unsafe {
                ffi::MPI_Irecv(
                    buf.as_mut_ptr().cast::<c_void>(),
                    count(e.len)?,
                    dt,
                    e.peer as c_int,
                    e.tag as c_int,
                    comm,
                    &mut req,
                )
            };
            mpi_result(code, "MPI_Irecv")?;
            ex.requests.push(req);
        }
        for m in sends {
            // SAFETY: as above.
            let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
            // SAFETY: `m.data` moves into `ex._send` below without moving its heap buffer, and `ex` waits for the
            // request before dropping it.
            let code = unsafe {
                ffi::MPI_Isend(
                    m.data.as_ptr().cast::<c_void>(),
                    count(m.data.len())?,
                    dt,
                    m.peer as c_int,
                    m.tag as c_int,
                    comm,
                    &mut req,
                )
            };
            mpi_result(code, "MPI_Isend")?;
            ex.requests.push(req);
            ex._send.push(m.data);
        }
        Ok(Box::new(ex))
    }

    fn all_gather_bytes(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let mine = &padded(mine);
        let n = count(mine.len())?;
        let mut counts = vec![0 as c_int; self.size()];
        self.world.all_gather_into(&n, &mut counts[..]);
        Ok(varcount(&counts, |part| {
            self.world.all_gather_varcount_into(mine, part)
        }))
    }

    fn gather_bytes(&self, root: usize, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        check_root(root, self.size(), "gather")?;
        let mine = &padded(mine);
        let n = count(mine.len())?;
        let process = self.world.process_at_rank(root as c_int);
        if self.rank() != root {
            process.gather_into(&n);
            process.gather_varcount_into(mine);
            return Ok(None);
        }
        let mut counts = vec![0 as c_int; self.size()];
        process.gather_into_root(&n, &mut counts[..]);
        Ok(Some(varcount(&counts, |part| {
            process.gather_varcount_into_root(mine, part)
        })))
    }

    fn broadcast_bytes(&self, root: usize, data: &mut Vec<u8>) -> Result<()> {
        check_root(root, self.size(), "broadcast")?;
        let r = self.world.process_at_rank(root as c_int);
        let mut n = data.len() as u64;
        r.broadcast_into(&mut n);
        data.resize(n as usize, 0);
        if n > 0 {
            r.broadcast_into(&mut data[..]);
        }
        Ok(())
    }

    fn scatter_bytes(&self, root: usize, make: Option<Parts<'_>>) -> Result<Vec<u8>> {
        check_root(root, self.size(), "scatter")?;
        // Point to point on the job's second communicator (its own context: no solver message can match), the
        // root sending each rank its length, then its bytes in pieces of at most SCATTER_PIECE (MPI's counts
        // are ints), one rank after another, each part made just before it is sent.
        if self.rank() == root {
            let make = root_parts(make)?;
            let mut mine = Vec::new();
            for q in 0..self.size() {
                let b = make(q);
                if q == root {
                    mine = b;
                    continue;
                }
                let to = self.collectives.process_at_rank(q as c_int);
                to.send_with_tag(&(b.len() as u64), SCATTER_TAG);
                for piece in b.chunks(SCATTER_PIECE) {
                    to.send_with_tag(piece, SCATTER_TAG);
                }
            }
            return Ok(mine);
        }
        let from = self.collectives.process_at_rank(root as c_int);
        let (len, _) = from.receive_with_tag::<u64>(SCATTER_TAG);
        let mut mine = vec![0u8; len as usize];
        for piece in mine.chunks_mut(SCATTER_PIECE) {
            from.receive_into_with_tag(piece, SCATTER_TAG);
        }
        Ok(mine)
    }

    fn fail(&self, message: &str) {
        eprintln!("error (rank {} of {}): {message}", self.rank(), self.size());
        self.world.abort(1);
    }
}

/// `mine` and one byte more, never none: an empty Rust slice's address is 0x1, which Open MPI reads as
/// MPI_IN_PLACE. [`varcount`] drops the byte again.
fn padded(mine: &[u8]) -> Vec<u8> {
    mine.iter().copied().chain([0]).collect()
}

/// Every rank's padded bytes, received by `receive` into one buffer partitioned by `counts` (each rank's
/// count, padding included), split by rank with the padding dropped.
fn varcount(
    counts: &[c_int],
    receive: impl FnOnce(&mut PartitionMut<'_, [u8], Vec<c_int>, &[c_int]>),
) -> Vec<Vec<u8>> {
    let displs: Vec<c_int> = counts
        .iter()
        .scan(0 as c_int, |acc, &c| {
            let d = *acc;
            *acc += c;
            Some(d)
        })
        .collect();
    let total: usize = counts.iter().map(|&c| c as usize).sum();
    let mut all = vec![0u8; total];
    receive(&mut PartitionMut::new(
        &mut all[..],
        counts.to_vec(),
        &displs[..],
    ));
    counts
        .iter()
        .zip(&displs)
        .map(|(&c, &d)| all[d as usize..(d + c - 1) as usize].to_vec())
        .collect()
}
