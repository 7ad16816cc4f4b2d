//! ThreadComm's tests: collectives, exchanges, failures and the scatter on thread ranks.

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
        let want =
            |salt: u8| -> Vec<u8> { (0..r as u8 * 3).map(|k| salt + 10 * r as u8 + k).collect() };
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
fn a_job_reports_the_rank_whose_error_the_others_relay() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // Rank 0 finds the error, sends it to every rank and returns last; the others return their relay of it first.
    // Without `blame`, or where rank 0 does not fail after all, the first relay to return is what the job reports.
    for (blame, root_fails) in [(true, true), (false, true), (true, false)] {
        let relayed = AtomicUsize::new(0);
        let err = run_threads(4, |c| {
            let mut why = if c.rank() == 0 {
                b"too few tets".to_vec()
            } else {
                Vec::new()
            };
            let got = c.broadcast_bytes(0, &mut why);
            if c.rank() != 0 {
                // Counted however it ended: once a relay has returned, a rank whose bytes had not yet come gets
                // PeerFailed (the job's first failure, a relay too).
                relayed.fetch_add(1, Ordering::SeqCst);
            }
            got?;
            let why = String::from_utf8_lossy(&why).into_owned();
            if c.rank() == 0 {
                while relayed.load(Ordering::SeqCst) < 3 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                std::thread::sleep(Duration::from_millis(100));
                return match root_fails {
                    true => Err(CommError::Invalid(why)),
                    false => Ok(()),
                };
            }
            if blame {
                c.blame(0);
            }
            Err(CommError::PeerFailed {
                rank: 0,
                message: why,
            })
        })
        .unwrap_err();
        if blame && root_fails {
            assert_eq!(
                (err.rank, err.message.as_str()),
                (0, "too few tets"),
                "{err}"
            );
        } else {
            assert_ne!(err.rank, 0, "{err}");
            assert_eq!(err.message, "rank 0 failed: too few tets", "{err}");
        }
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
