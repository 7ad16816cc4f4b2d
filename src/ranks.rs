//! How a command runs: on one domain, on ranks as threads of this process (`--ranks N` or `PXxPY`), or on MPI
//! ranks when `mpirun` started it (built with `--features mpi`). Each rank opens its own device: one adapter per
//! rank where the machine has several of the best kind, several devices on one adapter otherwise.

use std::rc::Rc;

use bespoke::Error;
use bespoke::comm::{Comm, launched_size, run_threads};
use bespoke::gpu::{Gpu, GpuOptions};

/// `--ranks`: a rank count, or blocks along x and y.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankSpec {
    pub count: usize,
    pub grid: Option<[usize; 2]>,
}

impl RankSpec {
    pub fn parse(s: &str) -> Result<Self, Error> {
        let bad =
            || format!("--ranks `{s}` is neither a rank count (4) nor blocks along x and y (2x2)");
        if let Some((a, b)) = s.split_once(['x', 'X']) {
            let px: usize = a.trim().parse().map_err(|_| bad())?;
            let py: usize = b.trim().parse().map_err(|_| bad())?;
            if px == 0 || py == 0 {
                return Err(bad().into());
            }
            return Ok(Self {
                count: px * py,
                grid: Some([px, py]),
            });
        }
        let count: usize = s.trim().parse().map_err(|_| bad())?;
        if count == 0 {
            return Err(bad().into());
        }
        Ok(Self { count, grid: None })
    }
}

/// Most ranks as threads of one process. Each opens a device of its own (on lavapipe ~8 MB of host memory each,
/// and 300 thread ranks took 9 s and 2.3 GB to open theirs; on a GPU each device holds a driver context), so a
/// mistyped count would exhaust the host before any rank could check the problem against it; MPI ranks have no
/// such bound here.
pub const MAX_THREAD_RANKS: usize = 64;

/// A job's ranks: their count, and the blocks along x and y where `--ranks PXxPY` gave them.
pub type Planned = (usize, Option<[usize; 2]>);

/// The ranks a job of `spec` runs on before any starts: (count, blocks along x and y if given) under mpirun (the
/// launcher's count; None where `--ranks` asks for another, which [`run`] refuses by name) or as threads, None on
/// one domain. Too many thread ranks are refused here, so a command can check its problem against the ranks
/// before any rank opens a device.
pub fn planned(spec: Option<RankSpec>) -> Result<Option<Planned>, Error> {
    if let Some(n) = launched_size().filter(|&n| n > 1) {
        return Ok(spec
            .is_none_or(|s| s.count == n)
            .then(|| (n, spec.and_then(|s| s.grid))));
    }
    match spec {
        Some(s) if s.count > MAX_THREAD_RANKS => Err(too_many_threads(s.count)),
        _ => Ok(spec.map(|s| (s.count, s.grid))),
    }
}

fn too_many_threads(count: usize) -> Error {
    format!(
        "--ranks {count}: ranks as threads of this process open a device each, and at most {MAX_THREAD_RANKS} \
         may run in one process; for more, run under mpirun (built with `--features mpi`)"
    )
    .into()
}

/// What runs on each rank: its device and its communicator (None on one domain).
type Body<'a> = &'a dyn Fn(&Gpu, Option<Rc<dyn Comm>>) -> Result<(), Error>;

/// Opens this rank's device: on a distributed run the GPU its rank among the machine's ranks takes
/// (`Comm::node_rank`), said in the phase log (`BESPOKE_PHASE_TIMES`) with the adapter's PCI bus id.
fn open_gpu(comm: Option<&dyn Comm>) -> Result<Gpu, Error> {
    let gpu = Gpu::with_options(GpuOptions {
        persist_pipeline_cache: true,
        node_rank: comm.map(|c| c.node_rank()),
        ..bespoke::gpu_options()
    })?;
    if let Some(c) = comm {
        let i = gpu.info();
        bespoke::phase_note(format!(
            "rank {}: rank {} of {} on its machine, adapter {} ({})",
            c.rank(),
            c.node_rank(),
            c.node_size(),
            i.name,
            if i.pci_bus_id.is_empty() {
                "no bus id"
            } else {
                &i.pci_bus_id
            }
        ));
    }
    Ok(gpu)
}

/// Closes a thread rank's device, as a phase (bespoke-gpu closes one device of a process at a time: four closed
/// at once hung an H200's driver), so a close that hangs shows where.
fn close(rank: usize, gpu: Gpu) {
    bespoke::phase(format!("rank {rank}: close the device"), || drop(gpu));
}

/// Runs `body` on one domain (no communicator), on thread ranks, or on this process's MPI rank.
pub fn run(
    spec: Option<RankSpec>,
    body: impl Fn(&Gpu, Option<Rc<dyn Comm>>) -> Result<(), Error> + Sync,
) -> Result<(), Error> {
    if let Some(size) = launched_size().filter(|&n| n > 1) {
        return run_mpi(size, spec, &body);
    }
    match spec {
        None => {
            let gpu = bespoke::phase("open the device", || open_gpu(None))?;
            bespoke::phase("run", || body(&gpu, None))
        }
        Some(s) if s.count > MAX_THREAD_RANKS => Err(too_many_threads(s.count)),
        Some(s) => run_threads(s.count, |comm| {
            let r = comm.rank();
            let gpu = bespoke::phase(format!("rank {r}: open the device"), || {
                open_gpu(Some(&comm))
            })?;
            let out = bespoke::phase(format!("rank {r}: run"), || body(&gpu, Some(Rc::new(comm))));
            close(r, gpu);
            out
        })
        .map(|_| ())
        .map_err(|e| e.to_string().into()),
    }
}

#[cfg(feature = "mpi")]
fn run_mpi(size: usize, spec: Option<RankSpec>, body: Body<'_>) -> Result<(), Error> {
    let comm =
        bespoke::comm::MpiComm::init().ok_or("MPI was already initialised in this process")?;
    if comm.size() != size {
        return Err(format!(
            "the launcher announced {size} ranks but MPI has {}",
            comm.size()
        )
        .into());
    }
    if let Some(s) = spec
        && s.count != size
    {
        // Every rank sees the same arguments and stops with the same message (finalising MPI together).
        return Err(format!(
            "--ranks asks for {} ranks but mpirun started {size}",
            s.count
        )
        .into());
    }
    let comm: Rc<dyn Comm> = Rc::new(comm);
    // Ranks started with different arguments (mpirun's `A : B` form) would step different lattices or counts
    // and wait for each other forever: every rank stops with this error instead.
    let args: Vec<String> = std::env::args().skip(1).collect();
    comm.check_same("the command line", args.join(" ").as_bytes())?;
    let r = comm.rank();
    let result = bespoke::phase(format!("rank {r}: open the device"), || {
        open_gpu(Some(&*comm))
    })
    .and_then(|gpu| bespoke::phase(format!("rank {r}: run"), || body(&gpu, Some(comm.clone()))));
    if let Err(e) = result {
        // A failure on some ranks only would leave the others waiting: abort the job with the message.
        comm.fail(&e.to_string());
    }
    Ok(())
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(size: usize, _spec: Option<RankSpec>, _body: Body<'_>) -> Result<(), Error> {
    Err(format!(
        "started by an MPI launcher with {size} ranks, but this binary was built without the `mpi` feature, so \
         every rank would run the whole problem: rebuild with `cargo build --release --features mpi`, or run \
         without mpirun and --ranks {size} for ranks as threads of one process"
    )
    .into())
}
