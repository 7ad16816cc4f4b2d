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
/// result is the first failure (not the follow-on errors it caused).
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
        })
        .collect();
    drop(txs);
    let results: Vec<Option<R>> = std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|comm| {
                let f = &f;
                s.spawn(move || {
                    let (rank, flag, finished) =
                        (comm.rank, comm.failed.clone(), comm.finished.clone());
                    let mark = |message: String| {
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
    if let Some((rank, message)) = failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
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
                match self.recv(r, tag)? {
                    Payload::Bytes(b) => Ok(b),
                    Payload::Words(_) => Err(CommError::Invalid(format!(
                        "words under the gather tag {tag}"
                    ))),
                }
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
            if slot.is_none() {
                if let Some(p) = self.comm.take(e.peer, e.tag) {
                    *slot = Some(words(p, e)?);
                }
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
        if root >= self.size {
            return Err(CommError::Invalid(format!(
                "broadcast root {root} in a job of {} ranks",
                self.size
            )));
        }
        self.check_failed()?;
        if self.rank == root {
            for peer in (0..self.size).filter(|&p| p != root) {
                self.send(peer, TAG_BCAST, Payload::Bytes(data.clone()))?;
            }
            return Ok(());
        }
        match self.recv(root, TAG_BCAST)? {
            Payload::Bytes(b) => *data = b,
            Payload::Words(_) => {
                return Err(CommError::Invalid("words under the broadcast tag".into()));
            }
        }
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
        match self.recv(root, TAG_SCATTER)? {
            Payload::Bytes(b) => Ok(b),
            Payload::Words(_) => Err(CommError::Invalid("words under the scatter tag".into())),
        }
    }

    fn fail(&self, message: &str) {
        let mut g = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        g.get_or_insert((self.rank, message.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;

    #[test]
    fn exchange_collectives_and_order() {
        let out = run_threads(4, |c| {
            let (r, p) = (c.rank(), c.size());
            // Two messages under one tag arrive in order; a second tag is independent.
            let sends = vec![
                Message {
                    peer: (r + 1) % p,
                    tag: 1,
                    data: vec![r as u32, 10],
                },
                Message {
                    peer: (r + 1) % p,
                    tag: 1,
                    data: vec![r as u32, 20],
                },
                Message {
                    peer: (r + p - 1) % p,
                    tag: 2,
                    data: vec![100 + r as u32],
                },
            ];
            let prev = (r + p - 1) % p;
            let mut ex = c.start(
                sends,
                &[
                    Expect {
                        peer: prev,
                        tag: 1,
                        len: 2,
                    },
                    Expect {
                        peer: prev,
                        tag: 1,
                        len: 2,
                    },
                    Expect {
                        peer: (r + 1) % p,
                        tag: 2,
                        len: 1,
                    },
                ],
            )?;
            while !ex.test()? {}
            let got = ex.wait()?;
            assert_eq!(
                got,
                vec![
                    vec![prev as u32, 10],
                    vec![prev as u32, 20],
                    vec![100 + ((r + 1) % p) as u32]
                ]
            );
            let mut v = [r as f64, -(r as f64)];
            c.all_reduce_f64(&mut v, Op::Sum)?;
            let mut m = [r as f64];
            c.all_reduce_f64(&mut m, Op::Max)?;
            let mut b = if r == 2 { b"two".to_vec() } else { Vec::new() };
            c.broadcast_bytes(2, &mut b)?;
            c.barrier()?;
            Ok::<_, CommError>((v, m[0], b))
        })
        .unwrap();
        for (v, m, b) in out {
            assert_eq!(v, [6.0, -6.0]);
            assert_eq!(m, 3.0);
            assert_eq!(b, b"two");
        }
    }

    /// A scatter from a root: each rank gets its own part (an empty one too), twice in a row without a barrier
    /// between; a root with the wrong number of parts, or outside the job, is an error.
    #[test]
    fn a_scatter_gives_each_rank_its_part() {
        let out = run_threads(3, |c| {
            let r = c.rank();
            let part = |salt: u8, q: usize| -> Vec<u8> {
                (0..q as u8 * 3).map(|k| salt + 10 * q as u8 + k).collect()
            };
            let mut made = Vec::new();
            let first = c.scatter_bytes(1, (r == 1).then_some(&mut |q| part(0, q)))?;
            let mut second_parts = |q: usize| {
                made.push(q);
                part(100, q)
            };
            let second = c.scatter_bytes(1, (r == 1).then_some(&mut second_parts))?;
            // A maker given on a rank that is not the root is ignored.
            let third = c.scatter_bytes(
                0,
                Some(&mut |q| vec![if r == 0 { 7 + q as u8 } else { 99 }]),
            )?;
            assert!(matches!(
                c.scatter_bytes(3, None),
                Err(CommError::Invalid(_))
            ));
            Ok::<_, CommError>((first, second, third, made))
        })
        .unwrap();
        for (r, (first, second, third, made)) in out.into_iter().enumerate() {
            let want = |salt: u8| -> Vec<u8> {
                (0..r as u8 * 3).map(|k| salt + 10 * r as u8 + k).collect()
            };
            assert_eq!(first, want(0));
            assert_eq!(second, want(100));
            assert_eq!(third, vec![7 + r as u8]);
            // The root makes each rank's part once, in rank order.
            assert_eq!(made, if r == 1 { vec![0, 1, 2] } else { vec![] });
        }
        let err = run_threads(2, |c| c.scatter_bytes(0, None)).unwrap_err();
        assert!(err.message.contains("gave no parts"), "{err}");
    }

    /// A gather to a root: only the root receives, every rank's bytes in rank order (an empty one too), twice
    /// in a row without a barrier between (the second's messages must not be taken for the first's), beside an
    /// all-gather; a root outside the job is an error.
    #[test]
    fn a_gather_reaches_its_root_only() {
        let out = run_threads(3, |c| {
            let r = c.rank();
            let mine: Vec<u8> = (0..r as u8 * 2).map(|k| 10 * r as u8 + k).collect();
            let first = c.gather_bytes(1, &mine)?;
            let second = c.gather_bytes(1, &[r as u8; 3])?;
            let all = c.all_gather_bytes(&[r as u8])?;
            assert!(matches!(
                c.gather_bytes(3, &mine),
                Err(CommError::Invalid(_))
            ));
            Ok::<_, CommError>((first, second, all))
        })
        .unwrap();
        for (r, (first, second, all)) in out.into_iter().enumerate() {
            assert_eq!(all, vec![vec![0], vec![1], vec![2]]);
            match r {
                1 => {
                    assert_eq!(
                        first,
                        Some(vec![vec![], vec![10, 11], vec![20, 21, 22, 23]])
                    );
                    assert_eq!(second, Some(vec![vec![0; 3], vec![1; 3], vec![2; 3]]));
                }
                _ => assert!(first.is_none() && second.is_none()),
            }
        }
    }

    #[test]
    fn a_failing_rank_never_hangs_the_others() {
        for panic in [false, true] {
            let err = run_threads(3, |c| {
                if c.rank() == 1 {
                    if panic {
                        panic!("boom");
                    }
                    return Err(CommError::Invalid("bad mesh".into()));
                }
                // Waits for rank 1, which never sends.
                c.start(
                    vec![],
                    &[Expect {
                        peer: 1,
                        tag: 0,
                        len: 4,
                    }],
                )?
                .wait()?;
                Ok(())
            })
            .unwrap_err();
            assert_eq!(err.rank, 1);
            assert!(
                err.message
                    .contains(if panic { "boom" } else { "bad mesh" }),
                "{err}"
            );
        }
    }

    #[test]
    fn a_rank_that_returns_early_is_an_error_not_a_hang() {
        let err = run_threads(2, |c| {
            if c.rank() == 0 {
                // Rank 1 skips this collective.
                c.barrier()?;
            }
            Ok::<_, CommError>(())
        })
        .unwrap_err();
        assert!(
            err.message.contains("rank 1 returned while rank 0 waits"),
            "{err}"
        );
    }

    #[test]
    fn mismatches_and_bad_arguments_are_errors() {
        let err = run_threads(2, |c| {
            c.check_same(
                "the configuration",
                format!("steps={}", 10 + c.rank()).as_bytes(),
            )?;
            Ok::<_, CommError>(())
        })
        .unwrap_err();
        assert!(
            err.message.contains("disagree on the configuration"),
            "{err}"
        );
        let err = run_threads(2, |c| {
            c.start(
                vec![Message {
                    peer: 5,
                    tag: 0,
                    data: vec![],
                }],
                &[],
            )?;
            Ok::<_, CommError>(())
        })
        .unwrap_err();
        assert!(err.message.contains("peer 5"), "{err}");
        let err = run_threads(2, |c| {
            let ex = c.start(
                vec![Message {
                    peer: 1 - c.rank(),
                    tag: 0,
                    data: vec![1, 2, 3],
                }],
                &[Expect {
                    peer: 1 - c.rank(),
                    tag: 0,
                    len: 2,
                }],
            )?;
            ex.wait()?;
            Ok::<_, CommError>(())
        })
        .unwrap_err();
        assert!(err.message.contains("3 words"), "{err}");
        assert!(run_threads(0, |_| Ok::<_, CommError>(())).is_err());
    }
}
