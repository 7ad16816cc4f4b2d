//! Ranks as threads of one process: channels between them, a shared failure flag so that no rank waits forever
//! for one that has stopped.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{
    Comm, CommError, Exchange, Expect, Message, Parts, RESERVED_TAGS, Result, Tag, check_root,
    check_start, root_parts,
};

const TAG_GATHER: Tag = RESERVED_TAGS;
const TAG_BCAST: Tag = RESERVED_TAGS + 1;
const TAG_GATHER_ROOT: Tag = RESERVED_TAGS + 2;
const TAG_SCATTER: Tag = RESERVED_TAGS + 3;
/// How often a blocked rank looks at the failure flag.
const POLL: Duration = Duration::from_millis(5);

#[derive(Debug)]
enum Payload {
    Words(Vec<u32>),
    Bytes(Vec<u8>),
}

#[derive(Debug)]
struct Packet {
    src: usize,
    tag: Tag,
    data: Payload,
}

/// The first failure of the job: (rank, message).
type Failure = Arc<Mutex<Option<(usize, String)>>>;
/// Which ranks have returned.
type Finished = Arc<Mutex<Vec<bool>>>;
/// Per rank: the rank whose error its failure relays ([`Comm::blame`]).
type Blamed = Arc<Mutex<Vec<Option<usize>>>>;

/// One rank of a job run by [`run_threads`].
#[derive(Debug)]
pub struct ThreadComm {
    rank: usize,
    size: usize,
    to: Vec<Sender<Packet>>,
    inbox: Receiver<Packet>,
    /// Packets that arrived before anyone asked for them, FIFO per (source, tag).
    early: RefCell<HashMap<(usize, Tag), VecDeque<Payload>>>,
    failed: Failure,
    finished: Finished,
    blamed: Blamed,
}

/// A rank's failure as [`run_threads`] reports it: the first rank that failed and its message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("rank {rank} of {size} failed: {message}")]
pub struct RankFailure {
    pub rank: usize,
    pub size: usize,
    pub message: String,
}

/// Runs `f` on `ranks` threads, each with its own [`ThreadComm`], and returns their results in rank order. A rank
/// that returns an error or panics fails the job: the others' blocked calls return `PeerFailed` at once, and the
/// result is the first failure (not the follow-on errors it caused; where it relays another rank's error
/// ([`Comm::blame`]) and that rank failed too, that rank's own error).
pub fn run_threads<R, E, F>(ranks: usize, f: F) -> std::result::Result<Vec<R>, RankFailure>
where
    R: Send,
    E: std::fmt::Display,
    F: Fn(ThreadComm) -> std::result::Result<R, E> + Sync,
{
    if ranks == 0 {
        return Err(RankFailure {
            rank: 0,
            size: 0,
            message: "a job needs at least one rank".into(),
        });
    }
    let failed: Failure = Arc::new(Mutex::new(None));
    let finished: Finished = Arc::new(Mutex::new(vec![false; ranks]));
    let blamed: Blamed = Arc::new(Mutex::new(vec![None; ranks]));
    // Each rank's own error, for a relay that names it.
    let own: Arc<Mutex<Vec<Option<String>>>> = Arc::new(Mutex::new(vec![None; ranks]));
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..ranks).map(|_| channel::<Packet>()).unzip();
    let comms: Vec<ThreadComm> = rxs
        .into_iter()
        .enumerate()
        .map(|(rank, inbox)| ThreadComm {
            rank,
            size: ranks,
            to: txs.clone(),
            inbox,
            early: RefCell::new(HashMap::new()),
            failed: failed.clone(),
            finished: finished.clone(),
            blamed: blamed.clone(),
        })
        .collect();
    drop(txs);
    let results: Vec<Option<R>> = std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|comm| {
                let (f, own) = (&f, own.clone());
                s.spawn(move || {
                    let (rank, flag, finished) =
                        (comm.rank, comm.failed.clone(), comm.finished.clone());
                    let mark = |message: String| {
                        own.lock().unwrap_or_else(|p| p.into_inner())[rank] = Some(message.clone());
                        let mut g = flag.lock().unwrap_or_else(|p| p.into_inner());
                        g.get_or_insert((rank, message));
                    };
                    let result = catch_unwind(AssertUnwindSafe(|| f(comm)));
                    finished.lock().unwrap_or_else(|p| p.into_inner())[rank] = true;
                    match result {
                        Ok(Ok(r)) => Some(r),
                        Ok(Err(e)) => {
                            mark(e.to_string());
                            None
                        }
                        Err(p) => {
                            let msg = p
                                .downcast_ref::<&str>()
                                .map(|s| (*s).to_owned())
                                .or_else(|| p.downcast_ref::<String>().cloned())
                                .unwrap_or_else(|| "panicked".into());
                            mark(format!("panicked: {msg}"));
                            None
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    });
    if let Some((mut rank, mut message)) = failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
        // A relay of another rank's error that rank also returned: report that rank's.
        let blamed = blamed.lock().unwrap_or_else(|p| p.into_inner())[rank];
        if let Some(q) = blamed
            && let Some(m) = own.lock().unwrap_or_else(|p| p.into_inner())[q].take()
        {
            (rank, message) = (q, m);
        }
        return Err(RankFailure {
            rank,
            size: ranks,
            message,
        });
    }
    results
        .into_iter()
        .enumerate()
        .map(|(rank, r)| {
            r.ok_or_else(|| RankFailure {
                rank,
                size: ranks,
                message: "stopped without a result".into(),
            })
        })
        .collect()
}

impl ThreadComm {
    /// Every rank's bytes under `tag`, in rank order, this rank's being `mine` (the receiving side of a gather).
    fn receive_all(&self, tag: Tag, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        (0..self.size)
            .map(|r| {
                if r == self.rank {
                    return Ok(mine.to_vec());
                }
                self.recv_bytes(r, tag, "gather")
            })
            .collect()
    }

    fn check_failed(&self) -> Result<()> {
        match &*self.failed.lock().unwrap_or_else(|p| p.into_inner()) {
            Some((rank, message)) => Err(CommError::PeerFailed {
                rank: *rank,
                message: message.clone(),
            }),
            None => Ok(()),
        }
    }

    fn send(&self, peer: usize, tag: Tag, data: Payload) -> Result<()> {
        // A closed inbox means the peer has returned; a receive from it would fail then, not here.
        let _ = self.to[peer].send(Packet {
            src: self.rank,
            tag,
            data,
        });
        Ok(())
    }

    /// Moves everything that has arrived into `early`.
    fn drain(&self) {
        while let Ok(p) = self.inbox.try_recv() {
            self.early
                .borrow_mut()
                .entry((p.src, p.tag))
                .or_default()
                .push_back(p.data);
        }
    }

    fn take(&self, src: usize, tag: Tag) -> Option<Payload> {
        self.early
            .borrow_mut()
            .get_mut(&(src, tag))
            .and_then(VecDeque::pop_front)
    }

    /// The next bytes from `src` under the tag of collective `what` (words there are an error).
    fn recv_bytes(&self, src: usize, tag: Tag, what: &str) -> Result<Vec<u8>> {
        match self.recv(src, tag)? {
            Payload::Bytes(b) => Ok(b),
            Payload::Words(_) => Err(CommError::Invalid(format!(
                "words under the {what} tag {tag}"
            ))),
        }
    }

    /// Blocks for the next payload from `src` under `tag`, giving up when the job has failed or `src` has
    /// returned without sending it.
    fn recv(&self, src: usize, tag: Tag) -> Result<Payload> {
        loop {
            // Whether `src` had returned before this look at the inbox: then nothing more will come from it.
            let gone = self.finished.lock().unwrap_or_else(|p| p.into_inner())[src];
            self.drain();
            if let Some(p) = self.take(src, tag) {
                return Ok(p);
            }
            self.check_failed()?;
            if gone {
                return Err(CommError::Invalid(format!(
                    "rank {src} returned while rank {} waits for its message (tag {tag}): the ranks did not make \
                     the same calls",
                    self.rank
                )));
            }
            match self.inbox.recv_timeout(POLL) {
                Ok(p) => self
                    .early
                    .borrow_mut()
                    .entry((p.src, p.tag))
                    .or_default()
                    .push_back(p.data),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.check_failed()?;
                    return Err(CommError::Invalid(format!(
                        "rank {}: every other rank has returned while this one waits for rank {src}",
                        self.rank
                    )));
                }
            }
        }
    }
}

struct ThreadExchange<'a> {
    comm: &'a ThreadComm,
    expects: Vec<Expect>,
    got: Vec<Option<Vec<u32>>>,
}

impl ThreadExchange<'_> {
    fn collect(&mut self) -> Result<()> {
        self.comm.drain();
        for (e, slot) in self.expects.iter().zip(&mut self.got) {
            if slot.is_none()
                && let Some(p) = self.comm.take(e.peer, e.tag)
            {
                *slot = Some(words(p, e)?);
            }
        }
        Ok(())
    }
}

fn words(p: Payload, e: &Expect) -> Result<Vec<u32>> {
    match p {
        Payload::Words(w) if w.len() == e.len => Ok(w),
        Payload::Words(w) => Err(CommError::Invalid(format!(
            "rank {} sent {} words under tag {}, {} were expected",
            e.peer,
            w.len(),
            e.tag,
            e.len
        ))),
        Payload::Bytes(_) => Err(CommError::Invalid(format!(
            "rank {} sent bytes under tag {}",
            e.peer, e.tag
        ))),
    }
}

impl Exchange for ThreadExchange<'_> {
    fn test(&mut self) -> Result<bool> {
        self.collect()?;
        if self.got.iter().all(Option::is_some) {
            return Ok(true);
        }
        self.comm.check_failed()?;
        Ok(false)
    }

    fn wait(mut self: Box<Self>) -> Result<Vec<Vec<u32>>> {
        self.collect()?;
        for (e, slot) in self.expects.iter().zip(&mut self.got) {
            if slot.is_none() {
                *slot = Some(words(self.comm.recv(e.peer, e.tag)?, e)?);
            }
        }
        Ok(self.got.into_iter().flatten().collect())
    }
}

impl Comm for ThreadComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn kind(&self) -> &'static str {
        "threads"
    }

    fn start(&self, sends: Vec<Message>, recvs: &[Expect]) -> Result<Box<dyn Exchange + '_>> {
        check_start(self.size, &sends, recvs)?;
        self.check_failed()?;
        for m in sends {
            self.send(m.peer, m.tag, Payload::Words(m.data))?;
        }
        Ok(Box::new(ThreadExchange {
            comm: self,
            expects: recvs.to_vec(),
            got: vec![None; recvs.len()],
        }))
    }

    fn all_gather_bytes(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.check_failed()?;
        for peer in (0..self.size).filter(|&p| p != self.rank) {
            self.send(peer, TAG_GATHER, Payload::Bytes(mine.to_vec()))?;
        }
        self.receive_all(TAG_GATHER, mine)
    }

    fn gather_bytes(&self, root: usize, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        check_root(root, self.size, "gather")?;
        self.check_failed()?;
        if self.rank != root {
            self.send(root, TAG_GATHER_ROOT, Payload::Bytes(mine.to_vec()))?;
            return Ok(None);
        }
        self.receive_all(TAG_GATHER_ROOT, mine).map(Some)
    }

    fn broadcast_bytes(&self, root: usize, data: &mut Vec<u8>) -> Result<()> {
        check_root(root, self.size, "broadcast")?;
        self.check_failed()?;
        if self.rank == root {
            for peer in (0..self.size).filter(|&p| p != root) {
                self.send(peer, TAG_BCAST, Payload::Bytes(data.clone()))?;
            }
            return Ok(());
        }
        *data = self.recv_bytes(root, TAG_BCAST, "broadcast")?;
        Ok(())
    }

    fn scatter_bytes(&self, root: usize, make: Option<Parts<'_>>) -> Result<Vec<u8>> {
        check_root(root, self.size, "scatter")?;
        self.check_failed()?;
        if self.rank == root {
            let make = root_parts(make)?;
            let mut mine = Vec::new();
            for q in 0..self.size {
                let b = make(q);
                if q == root {
                    mine = b;
                } else {
                    self.send(q, TAG_SCATTER, Payload::Bytes(b))?;
                }
            }
            return Ok(mine);
        }
        self.recv_bytes(root, TAG_SCATTER, "scatter")
    }

    fn fail(&self, message: &str) {
        let mut g = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        g.get_or_insert((self.rank, message.to_owned()));
    }

    fn blame(&self, rank: usize) {
        if rank < self.size {
            self.blamed.lock().unwrap_or_else(|p| p.into_inner())[self.rank] = Some(rank);
        }
    }
}

#[cfg(test)]
mod tests;
