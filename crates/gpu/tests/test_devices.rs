//! The shared test devices (`bespoke_gpu::testing::test_gpu`): a test keeps its device, tests running at once get
//! different ones where the pool may hold more than one (a CPU adapter), and a device given back is taken again.
//! A binary of its own: no other test holds a device while this one counts them.

use std::sync::{Arc, Barrier};

use bespoke_gpu::Gpu;
use bespoke_gpu::testing::{test_devices, test_gpu};

fn address(g: &Gpu) -> usize {
    g as *const Gpu as usize
}

#[test]
fn tests_running_at_once_get_devices_of_their_own_where_the_pool_allows() {
    let Some(mine) = test_gpu() else { return };
    assert_eq!(address(mine), address(test_gpu().unwrap()), "asked twice");
    let most = test_devices();
    if mine.is_cpu() {
        assert!(most >= 1, "{most}");
    } else {
        assert_eq!(most, 1, "a GPU gets one shared device");
    }
    // `most` threads holding a device at once, this one among them.
    let barrier = Arc::new(Barrier::new(most));
    let others: Vec<_> = (1..most)
        .map(|_| {
            let b = barrier.clone();
            std::thread::spawn(move || {
                let g = address(test_gpu().unwrap());
                b.wait();
                g
            })
        })
        .collect();
    barrier.wait();
    let mut held: Vec<usize> = others.into_iter().map(|t| t.join().unwrap()).collect();
    held.push(address(mine));
    held.sort_unstable();
    held.dedup();
    assert_eq!(held.len(), most, "{most} tests at once");
    // Every device given back but this thread's: a new test takes one of them, not a new one.
    let later = std::thread::spawn(|| address(test_gpu().unwrap()))
        .join()
        .unwrap();
    assert!(held.contains(&later), "a device past the {most} opened");
}
