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

/// One rank's device, as the placement check sees it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Placed {
    node_rank: usize,
    node_size: usize,
    adapter: String,
    cpu: bool,
    /// The machine's adapters of this one's kind (`Gpu::rank_adapters`).
    adapters: usize,
}

/// `ranks` as a short list: `2, 5, 7`, or the first eight and a count.
fn rank_list(ranks: &[usize]) -> String {
    let shown: Vec<String> = ranks.iter().take(8).map(usize::to_string).collect();
    match ranks.len() {
        n if n > 8 => format!("{}, … ({n} ranks)", shown.join(", ")),
        _ => shown.join(", "),
    }
}

/// What rank 0 warns of where the ranks' devices are placed (indexed by rank): ranks on a CPU driver beside
/// ranks on GPUs (a machine without its GPU's Vulkan driver falls back to lavapipe, and every step then waits
/// for it), and machines that run more ranks than they have GPUs (said once per machine, by its rank 0 there).
fn placement_warnings(all: &[Placed]) -> Vec<String> {
    let mut out = Vec::new();
    let cpu: Vec<usize> = (0..all.len()).filter(|&r| all[r].cpu).collect();
    if let (Some(&c), Some(g)) = (cpu.first(), all.iter().find(|p| !p.cpu)) {
        out.push(format!(
            "rank{} {} run on a CPU driver ({}) while the others run on a GPU ({}): every step waits for the \
             slowest rank. A machine without its GPU's Vulkan driver falls back to a CPU driver; `bespoke \
             adapters` there lists what it sees",
            if cpu.len() > 1 { "s" } else { "" },
            rank_list(&cpu),
            all[c].adapter,
            g.adapter
        ));
    }
    for (r, p) in all.iter().enumerate() {
        if p.node_rank == 0 && !p.cpu && p.adapters > 0 && p.node_size > p.adapters {
            out.push(format!(
                "rank {r}'s machine runs {} ranks on its {} GPU{} ({}): up to {} ranks take turns on each; start \
                 at most {} ranks a machine for a GPU each",
                p.node_size,
                p.adapters,
                if p.adapters > 1 { "s" } else { "" },
                p.adapter,
                p.node_size.div_ceil(p.adapters),
                p.adapters
            ));
        }
    }
    out
}

/// Every rank says where its device is; rank 0 prints the [`placement_warnings`] on stderr.
fn check_placement(gpu: &Gpu, comm: &dyn Comm) -> Result<(), Error> {
    let mine = Placed {
        node_rank: comm.node_rank(),
        node_size: comm.node_size(),
        adapter: gpu.adapter_name().to_owned(),
        cpu: gpu.is_cpu(),
        adapters: gpu.rank_adapters().unwrap_or(0),
    };
    let all = comm.all_gather_bytes(&serde_json::to_vec(&mine)?)?;
    if comm.rank() == 0 {
        let all: Vec<Placed> = all
            .iter()
            .map(|b| serde_json::from_slice(b))
            .collect::<Result<_, _>>()?;
        for w in placement_warnings(&all) {
            eprintln!("warning: {w}");
        }
    }
    Ok(())
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
            let out = check_placement(&gpu, &comm).and_then(|()| {
                bespoke::phase(format!("rank {r}: run"), || body(&gpu, Some(Rc::new(comm))))
            });
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
    .and_then(|gpu| {
        check_placement(&gpu, &*comm)?;
        bespoke::phase(format!("rank {r}: run"), || body(&gpu, Some(comm.clone())))
    });
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

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(node_rank: usize, node_size: usize, adapter: &str, adapters: usize) -> Placed {
        Placed {
            node_rank,
            node_size,
            adapter: adapter.into(),
            cpu: adapter.starts_with("llvmpipe"),
            adapters,
        }
    }

    #[test]
    fn ranks_on_their_own_gpus_or_all_on_one_cpu_driver_warn_of_nothing() {
        // Two machines of four H200s, four ranks each.
        let gpus: Vec<Placed> = (0..8).map(|r| placed(r % 4, 4, "NVIDIA H200", 4)).collect();
        assert!(placement_warnings(&gpus).is_empty());
        // CI: every rank on lavapipe, one adapter for all.
        let cpus: Vec<Placed> = (0..4).map(|r| placed(r, 4, "llvmpipe", 1)).collect();
        assert!(placement_warnings(&cpus).is_empty());
    }

    #[test]
    fn a_rank_on_a_cpu_driver_beside_gpus_is_named() {
        let mut all: Vec<Placed> = (0..8).map(|r| placed(r % 4, 4, "NVIDIA H200", 4)).collect();
        for p in &mut all[4..] {
            *p = placed(p.node_rank, 4, "llvmpipe (LLVM 15.0.6, 256 bits)", 1);
        }
        let w = placement_warnings(&all);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("ranks 4, 5, 6, 7 run on a CPU driver (llvmpipe")
                && w[0].contains("(NVIDIA H200)"),
            "{}",
            w[0]
        );
    }

    #[test]
    fn more_ranks_than_a_machines_gpus_is_said_once_per_machine() {
        // Machine A (job ranks 0–5) runs six ranks on two GPUs, machine B (6–9) four on four.
        let mut all: Vec<Placed> = (0..6).map(|r| placed(r, 6, "NVIDIA H200", 2)).collect();
        all.extend((0..4).map(|r| placed(r, 4, "NVIDIA H200", 4)));
        let w = placement_warnings(&all);
        assert_eq!(
            w,
            vec![
                "rank 0's machine runs 6 ranks on its 2 GPUs (NVIDIA H200): up to 3 ranks take turns on each; \
                 start at most 2 ranks a machine for a GPU each"
                    .to_owned()
            ]
        );
        assert_eq!(
            rank_list(&(0..12).collect::<Vec<_>>()),
            "0, 1, 2, 3, 4, 5, 6, 7, … (12 ranks)"
        );
    }
}
