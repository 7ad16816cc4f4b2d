//! One rank's block of a distributed lattice: construction (checked on every rank) and the step with its halo
//! exchange (overlapped with the inner cells or not). The gathers of the whole domain are in `gather.rs`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

use bespoke_comm::{Comm, Expect, Message};
use bespoke_gpu::{Arg, Gpu, GpuBuffer, Grid, Kernel, Launch, Timing, TimingSource};

use super::{Lattice, Pops, StepShape, check_shape, pops, prepare_launch};
use crate::config::{Config, Layout, Streaming};
use crate::distributed::plan::{Kind, Lists, halo_kernel, lists, pack_entries, unpack_entries};
use crate::distributed::{Block, Decomposition, ExchangeStats, Ranks};
use crate::error::{LbmError, Result};
use crate::flags::Flags;
use crate::kernel::{Mode, Phase, Region, WG};

/// The exchange one parity's step needs: lists, device buffers and the pack and unpack launches.
struct Plan {
    lists: Lists,
    pack: Launch,
    unpack: Launch,
    send: GpuBuffer<u32>,
    recv: GpuBuffer<u32>,
    _entries: [GpuBuffer<[u32; 4]>; 2],
}

/// A lattice's place in a distributed domain (`Lattice::dist`).
pub(crate) struct Dist {
    pub comm: Rc<dyn Comm>,
    pub decomp: Decomposition,
    pub block: Block,
    pub global_cfg: Config,
    /// The whole domain's flags, shared with the caller (a scaling run builds one per domain size).
    pub global_flags: Rc<Flags>,
    /// Per parity; None on a single rank (nothing crosses).
    plans: [Option<Plan>; 2],
    /// Inner and ring step launches per parity, when overlapping.
    split: Option<([Launch; 2], [Launch; 2])>,
    /// Whether the halo (in place: and the cells an odd step's neighbours write) holds what the next step needs.
    pub fresh: Cell<bool>,
    stats: RefCell<ExchangeStats>,
}

impl std::fmt::Debug for Dist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Dist {{ rank {} of {}, {} blocks, block {:?}, overlap {} }}",
            self.comm.rank(),
            self.comm.size(),
            self.decomp.describe(),
            self.block,
            self.split.is_some()
        )
    }
}

/// Gathers whether every rank's `r` is Ok; on every rank, the first failure's message (naming its rank) if not.
pub(crate) fn agree<T>(comm: &dyn Comm, r: Result<T>) -> Result<T> {
    let mine = match &r {
        Ok(_) => Vec::new(),
        Err(e) => format!("{e}").into_bytes(),
    };
    let all = comm.all_gather_bytes(&mine)?;
    if let Some((rank, msg)) = all.iter().enumerate().find(|(_, m)| !m.is_empty()) {
        if rank == comm.rank() {
            return r;
        }
        let msg = String::from_utf8_lossy(msg);
        comm.blame(rank);
        return Err(LbmError::Ranks(format!("rank {rank}: {msg}")));
    }
    r
}

/// Text that identifies a configuration and its cells, compared across ranks before anything is allocated. The
/// cells are hashed as each row's runs of equal cells (a length, a kind byte and the exact f64 bits of its values),
/// allocating nothing per cell: formatting each of a 8192 × 4096 domain's cells as text took seconds and gigabytes
/// per lattice, and hashing each cell's bytes time in the domain's cells on every rank.
fn identity(cfg: &Config, flags: &Flags, grid: Option<[usize; 2]>, overlap: bool) -> String {
    let mut cells = bespoke_gpu::StableHasher::new();
    for y in 0..flags.ny() {
        for (len, c) in flags.row_runs(y) {
            let (kind, v) = c.saved();
            cells.write(&(len as u64).to_le_bytes());
            cells.write(&[kind]);
            if kind >= 2 {
                cells.write(&v[0].to_bits().to_le_bytes());
                cells.write(&v[1].to_bits().to_le_bytes());
            }
        }
    }
    let mut distances = bespoke_gpu::StableHasher::new();
    for ((x, y, d), q) in flags.wall_distances() {
        for v in [x as u64, y as u64, d as u64, q.to_bits()] {
            distances.write(&v.to_le_bytes());
        }
    }
    format!(
        "{cfg:?} grid {grid:?} overlap {overlap} cells {:016x} distances {:016x}",
        cells.finish(),
        distances.finish()
    )
}

impl<'g> Lattice<'g> {
    /// One rank's block of the lattice `cfg` × `flags` (the whole domain, the same on every rank: checked),
    /// decomposed as `ranks` says. Each rank holds its block plus a one-cell halo and steps it with the same
    /// kernels a single-domain lattice uses; the public methods then act on the whole domain: `step` exchanges
    /// halos, `macroscopic`, `populations`, probes and checkpoints gather onto every rank. Any rank's error
    /// (a bad flag in its block, a device too small) is returned on every rank.
    pub fn new_distributed(
        gpu: &'g Gpu,
        cfg: Config,
        flags: impl Into<Rc<Flags>>,
        ranks: &Ranks,
    ) -> Result<Self> {
        let flags = flags.into();
        let comm = ranks.comm.clone();
        comm.check_same(
            "the lattice (configuration, cells, decomposition)",
            identity(&cfg, &flags, ranks.grid, ranks.overlap).as_bytes(),
        )?;
        let r = Self::build_block(gpu, cfg, flags, ranks);
        agree(&*comm, r)
    }

    fn build_block(gpu: &'g Gpu, cfg: Config, flags: Rc<Flags>, ranks: &Ranks) -> Result<Self> {
        cfg.check()?;
        check_shape(&cfg, &flags)?;
        let comm = ranks.comm.clone();
        let size = comm.size();
        let decomp = match ranks.grid {
            Some(g) => Decomposition::new(cfg.nx, cfg.ny, g, cfg.storage)?,
            None => Decomposition::slabs(cfg.nx, cfg.ny, size, cfg.storage)?,
        };
        if decomp.ranks() != size {
            return Err(LbmError::param(
                "ranks",
                decomp.describe(),
                format!(
                    "the decomposition has {} blocks but the job has {size} ranks",
                    decomp.ranks()
                ),
            ));
        }
        let block = decomp.local(comm.rank());
        let local_cfg = Config {
            nx: block.size[0],
            ny: block.size[1],
            ..cfg.clone()
        };
        let encoded = if flags.all_fluid() && !flags.has_wall_distances() {
            None
        } else {
            Some(flags.encode_window(block.origin, block.size)?)
        };
        let local_flags = flags.window(block.origin, block.size);
        let curved = flags.has_wall_distances();
        let mut lat = Lattice::build(
            gpu,
            local_cfg,
            Rc::new(local_flags),
            encoded,
            curved,
            block.edges(),
            ranks.shape.clone().map(|s| StepShape {
                source: "given".into(),
                ..s
            }),
        )?;
        let plans = if size == 1 {
            [None, None]
        } else {
            let (k0, k1) = match cfg.streaming {
                Streaming::Ab => (Kind::Pull { opp: false }, Kind::Pull { opp: false }),
                Streaming::InPlace => (Kind::Pull { opp: true }, Kind::Push),
            };
            let src1 = if cfg.streaming == Streaming::Ab {
                lat.spare_b()?
            } else {
                &lat.a
            };
            [
                Some(plan(gpu, &lat.cfg, &decomp, comm.rank(), k0, &lat.a)?),
                Some(plan(gpu, &lat.cfg, &decomp, comm.rank(), k1, src1)?),
            ]
        };
        let split = if ranks.overlap && size > 1 {
            lat.split_launches(&block)?
        } else {
            None
        };
        lat.dist = Some(Box::new(Dist {
            comm,
            decomp,
            block,
            global_cfg: cfg,
            global_flags: flags,
            plans,
            split,
            fresh: Cell::new(false),
            stats: RefCell::new(ExchangeStats::default()),
        }));
        Ok(lat)
    }

    /// The inner and ring step launches of a block, per parity; None when the block is too thin for the ring
    /// not to meet itself (the step then runs whole after the exchange).
    fn split_launches(&self, block: &Block) -> Result<Option<([Launch; 2], [Launch; 2])>> {
        let nx = self.cfg.nx as u32;
        let probe = self.spec(Phase::Ab, Mode::Step);
        let rows = (if probe.paired() {
            self.cfg.ny / 2
        } else {
            self.cfg.ny
        }) as u32;
        let [hx, hy] = [block.halo[0] > 0, block.halo[1] > 0];
        if (hx && nx < 5) || (hy && rows < 5) {
            return Ok(None);
        }
        // The ring: two invocation rows or columns at each cut edge (the halo and the cells next to it).
        let (r0, r1) = if hy { (2, rows - 2) } else { (0, rows) };
        let (c0, c1) = if hx { (2, nx - 2) } else { (0, nx) };
        let mut ring = Vec::new();
        if hy {
            ring.push([0, 0, nx, 2]);
            ring.push([0, rows - 2, nx, 2]);
        }
        if hx {
            ring.push([0, r0, 2, r1 - r0]);
            ring.push([nx - 2, r0, 2, r1 - r0]);
        }
        let mut rects = [[0; 4]; 4];
        rects[..ring.len()].copy_from_slice(&ring);
        let inner = Region::Rects {
            count: 1,
            rects: [[c0, r0, c1 - c0, r1 - r0], [0; 4], [0; 4], [0; 4]],
            tag: "-inner",
        };
        let outer = Region::Rects {
            count: ring.len(),
            rects,
            tag: "-ring",
        };
        let launch = |phase: Phase, region: Region, pops: Vec<Arg<'_>>| -> Result<Launch> {
            let spec = crate::kernel::KernelSpec {
                region,
                ..self.spec(phase, Mode::Step)
            };
            let grid = self
                .gpu
                .grid_for(spec.launched() as u64, spec.wg, self.shape.grid)?;
            prepare_launch(self.gpu, &spec, pops, self.flag_bufs.as_ref(), &[], grid)
        };
        let pair = |region: Region| -> Result<[Launch; 2]> {
            Ok(match self.cfg.streaming {
                Streaming::Ab => [
                    launch(Phase::Ab, region, pops(&self.a, Some(self.spare_b()?)))?,
                    launch(Phase::Ab, region, pops(self.spare_b()?, Some(&self.a)))?,
                ],
                Streaming::InPlace => [
                    launch(Phase::AaOdd, region, pops(&self.a, None))?,
                    launch(Phase::AaEven, region, pops(&self.a, None))?,
                ],
            })
        };
        Ok(Some((pair(inner)?, pair(outer)?)))
    }

    pub(super) fn dist(&self) -> &Dist {
        self.dist
            .as_deref()
            .expect("called on a distributed lattice")
    }

    /// Completes the exchange the next step would start, so that reads of the current state (fields, probes,
    /// checkpoints) see every cell as a single domain would. Nothing when it is done already.
    pub(crate) fn settle(&self) -> Result<()> {
        let Some(d) = self.dist.as_deref() else {
            return Ok(());
        };
        if d.fresh.get() {
            return Ok(());
        }
        if let Some(plan) = &d.plans[self.parity] {
            self.exchange(d, plan, None, None)?;
            self.gpu.finish()?;
        }
        d.fresh.set(true);
        Ok(())
    }

    /// One exchange: pack and read back, run `inner` meanwhile, send and receive, upload, then unpack and run
    /// `then` in one submission, without waiting.
    fn exchange(
        &self,
        d: &Dist,
        plan: &Plan,
        inner: Option<&Launch>,
        then: Option<&Launch>,
    ) -> Result<()> {
        let t = Instant::now();
        let pending = self
            .gpu
            .submit_read(&[&plan.pack], &plan.send, plan.lists.send_len())?;
        if let Some(l) = inner {
            self.gpu.submit(&[l])?;
        }
        let sent = self.gpu.finish_read(pending)?;
        let t_read = t.elapsed().as_secs_f64();
        let mut at = 0;
        let messages: Vec<Message> = plan
            .lists
            .sends
            .iter()
            .map(|(peer, l)| {
                let m = Message {
                    peer: *peer,
                    tag: 0,
                    data: sent[at..at + l.len()].to_vec(),
                };
                at += l.len();
                m
            })
            .collect();
        let expects: Vec<Expect> = plan
            .lists
            .recvs
            .iter()
            .map(|(peer, l)| Expect {
                peer: *peer,
                tag: 0,
                len: l.len(),
            })
            .collect();
        let got = d.comm.start(messages, &expects)?.wait()?;
        let t_msg = t.elapsed().as_secs_f64() - t_read;
        self.gpu.write(&plan.recv, 0, &got.concat())?;
        let mut launches = vec![&plan.unpack];
        launches.extend(then);
        self.gpu.submit(&launches)?;
        let mut s = d.stats.borrow_mut();
        s.exchanges += 1;
        s.bytes_sent += 4 * plan.lists.send_len() as u64;
        s.seconds += t.elapsed().as_secs_f64();
        s.readback_seconds += t_read;
        s.message_seconds += t_msg;
        Ok(())
    }

    pub(crate) fn step_distributed(&mut self, n: u64) -> Result<()> {
        let d = self.dist.as_deref().expect("distributed");
        for _ in 0..n {
            let p = self.parity;
            match (&d.plans[p], d.fresh.get()) {
                (Some(plan), false) => match &d.split {
                    Some((inner, outer)) => {
                        self.exchange(d, plan, Some(&inner[p]), Some(&outer[p]))?
                    }
                    None => self.exchange(d, plan, None, Some(&self.steps[p]))?,
                },
                _ => self.gpu.submit(&[&self.steps[p]])?,
            }
            d.fresh.set(false);
            self.parity = 1 - p;
            self.steps_done += 1;
        }
        self.gpu.finish()?;
        Ok(())
    }

    /// Wall-clock seconds per pair of steps, exchange included (every rank steps together).
    pub(crate) fn time_pairs_distributed(&mut self, warmup: usize, reps: usize) -> Result<Timing> {
        let warmed_seconds = self.raise_clocks_distributed()?;
        self.step_distributed(2 * warmup as u64)?;
        let mut samples = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = Instant::now();
            self.step_distributed(2)?;
            samples.push(t.elapsed().as_secs_f64());
        }
        Ok(Timing {
            samples,
            source: TimingSource::WallClock,
            warmed_seconds,
        })
    }

    /// A GPU's clocks raised before a distributed timing, as `Gpu::time` raises them (docs/gpu.md, "Timing"), by
    /// `bespoke_gpu::warm_up_agreed`: the halo exchange is collective, so every rank must step the same count,
    /// and each batch's size and the stop are decided on the least seconds spent and the slowest rate over the
    /// ranks. Every timing warms (a rank's own "still warm" clock could differ from another's). CPU adapters and
    /// devices opened with `GpuOptions::skip_warm_up` are not warmed (0), unless another rank's device is.
    fn raise_clocks_distributed(&mut self) -> Result<f64> {
        use bespoke_comm::Op;
        let Some(comm) = self.comm().cloned() else {
            return Ok(0.0);
        };
        // Whether to warm is agreed too (any rank's GPU warms them all): ranks that disagreed would run
        // different counts of collective steps.
        let mut warms = [f64::from(u8::from(self.gpu.warms_up()))];
        comm.all_reduce_f64(&mut warms, Op::Max)?;
        if warms[0] == 0.0 {
            return Ok(0.0);
        }
        bespoke_gpu::warm_up_agreed(
            |pairs| {
                let t = Instant::now();
                self.step_distributed(2 * pairs as u64)?;
                Ok(t.elapsed().as_secs_f64())
            },
            |spent, rate| {
                let (mut least, mut slowest) = ([spent], [rate]);
                comm.all_reduce_f64(&mut least, Op::Min)?;
                comm.all_reduce_f64(&mut slowest, Op::Max)?;
                Ok((least[0], slowest[0]))
            },
        )
    }

    /// The halo exchange's cost so far on this rank (None for a single-domain lattice).
    pub fn exchange_stats(&self) -> Option<ExchangeStats> {
        self.dist.as_deref().map(|d| d.stats.borrow().clone())
    }
    /// The decomposition, when distributed.
    pub fn decomposition(&self) -> Option<&Decomposition> {
        self.dist.as_deref().map(|d| &d.decomp)
    }
    /// The communicator, when distributed.
    pub fn comm(&self) -> Option<&Rc<dyn Comm>> {
        self.dist.as_deref().map(|d| &d.comm)
    }
    /// Whether this is rank 0 (or a single-domain lattice): the rank that writes files and prints.
    pub fn is_root(&self) -> bool {
        self.dist.as_deref().is_none_or(|d| d.comm.rank() == 0)
    }
    /// Whether steps overlap the exchange with the inner cells.
    pub fn overlapped(&self) -> bool {
        self.dist.as_deref().is_some_and(|d| d.split.is_some())
    }
}

/// The exchange of `kind` for the lattice of local configuration `cfg`, packing from and unpacking into `pops`.
fn plan(
    gpu: &Gpu,
    cfg: &Config,
    d: &Decomposition,
    me: usize,
    kind: Kind,
    pops: &Pops,
) -> Result<Plan> {
    let l = lists(d, me, kind);
    let (layout, n): (Layout, usize) = (cfg.layout(), cfg.cells());
    let sends: Vec<(usize, usize)> = l
        .sends
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .collect();
    let recvs: Vec<(usize, usize)> = l
        .recvs
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .collect();
    let pe = gpu.upload(&pack_entries(layout, n, &sends))?;
    let ue = gpu.upload(&unpack_entries(layout, n, &recvs))?;
    let send = gpu.alloc::<u32>(sends.len().max(1))?;
    let recv = gpu.alloc::<u32>(recvs.len().max(1))?;
    // The directions bound as the step binds them: nine bindings, or the one buffer where the lattice binds one
    // (a kernel past the adapter's storage buffers is refused by name at `Gpu::prepare`).
    let launch =
        |unpack: bool, ent: &GpuBuffer<[u32; 4]>, buf: &GpuBuffer<u32>| -> Result<Launch> {
            let mut args = pops.kernel_args();
            args.push(ent.arg());
            args.push(buf.arg());
            let name = if unpack {
                "lbm-halo-unpack"
            } else {
                "lbm-halo-pack"
            };
            // SAFETY: entries hold slots below 9 and word indices `word_of` computed for cells of this lattice,
            // each below the words of a direction (so slot·stride + word lies within the one buffer's nine); value indices are below the exchange buffer's length.
            let k = unsafe {
                Kernel::new(name, halo_kernel(unpack, pops.stride())).without_bounds_checks()
            };
            Ok(gpu.prepare(&k, &args, Grid::cover(ent.len() as u64, WG)?)?)
        };
    Ok(Plan {
        pack: launch(false, &pe, &send)?,
        unpack: launch(true, &ue, &recv)?,
        lists: l,
        send,
        recv,
        _entries: [pe, ue],
    })
}
