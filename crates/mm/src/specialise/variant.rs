//! The kernel variants of the specialising generator and the β cases they are specialised for.

use crate::dtype::DType;

/// How a kernel walks A's non-zeros (names as in GiMMiK).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// Per row of C, an unrolled dot product over the row's non-zeros, reading B directly; one store.
    CStream,
    /// Each used row of B loaded once and scattered into per-row accumulators; a row is stored after its last
    /// contribution.
    BStream,
    /// B staged through workgroup memory in chunks; rows of A dealt across `split` invocation rows.
    BStreamMsplit,
    /// K split across `split` invocation rows; partial sums combined in workgroup memory.
    CStreamKsplit,
    /// Not unrolled: A's non-zeros in a table on the device, walked by loops over blocks of `split` rows
    /// (each block's used columns, one B load feeding `split` accumulators); N, ldb and ldc passed at run
    /// time. The source does not depend on A, so it compiles once, whatever A's size.
    Rolled,
}

impl Family {
    pub const ALL: [Family; 5] = [
        Family::CStream,
        Family::BStream,
        Family::BStreamMsplit,
        Family::CStreamKsplit,
        Family::Rolled,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Self::CStream => "cstream",
            Self::BStream => "bstream",
            Self::BStreamMsplit => "bstream-msplit",
            Self::CStreamKsplit => "cstream-ksplit",
            Self::Rolled => "rolled",
        }
    }
    /// Whether the family uses invocation rows (a `split`).
    pub fn splits(self) -> bool {
        matches!(self, Self::BStreamMsplit | Self::CStreamKsplit)
    }
    /// Whether each row is a dot product that coefficient folding can shorten.
    pub fn folds(self) -> bool {
        !matches!(self, Self::BStream | Self::Rolled)
    }
    /// Whether `split` counts rows per block (the rolled family) rather than invocation rows.
    pub fn blocks_rows(self) -> bool {
        self == Self::Rolled
    }
    /// Whether A's entries are inlined in the source (every family but the rolled one).
    pub fn unrolled(self) -> bool {
        self != Self::Rolled
    }
    /// Whether launches may be capped by loads and stores below the adapter's default (a `launch` cap): the
    /// family whose compile time and traffic follow its loads and stores.
    pub fn caps_launches(self) -> bool {
        self == Self::BStream
    }
    /// Whether the family has a `-touch` twin (a β = 0 kernel that reads each row of C before storing it).
    pub fn touches(self) -> bool {
        matches!(self, Self::CStream | Self::BStream)
    }
    /// The invocation rows a splitting family offers (empty for the others).
    pub fn split_counts(self) -> &'static [u32] {
        match self {
            Self::BStreamMsplit => &MSPLIT_SPLITS,
            Self::CStreamKsplit => &[2, 4],
            _ => &[],
        }
    }
}

/// One kernel variant: family, columns per invocation (`vec` = 1, 2, 4), invocation rows (`split`; for the
/// rolled family the rows per block; 1 where the family has neither), whether repeated coefficients are
/// folded, a cap on the loads and stores one launch spells out (`launch`: for bstream one of [`LAUNCH_CAPS`],
/// for any unrolled family [`LONG_LAUNCH`]; 0: the adapter's default, [`launch_cap`](super::launch_cap)), and
/// (cstream and bstream, β = 0 only) `touch`: each row of C is read before it is stored, its value kept out of the result. A CPU then
/// brings C's lines into its cache with a load instead of a store miss, which on some hosts costs twice the time
/// (docs/perf.md); a GPU only pays the extra read, so the tuner keeps whichever is faster. `stage` (bstream-msplit
/// only): KiB of workgroup memory its chunks of B are staged through, one of [`STAGE_KIB`] (`-smem32`), or 0 for
/// WebGPU's guaranteed 16 KiB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Variant {
    pub family: Family,
    pub vec: u32,
    pub split: u32,
    pub fold: bool,
    pub launch: u32,
    pub touch: bool,
    pub stage: u32,
}

/// Invocations along N per workgroup.
pub const WG_X: u32 = 64;

/// Workgroup memory a generated kernel uses unless its variant says more: WebGPU's guaranteed minimum, so every
/// adapter runs it.
pub const DEFAULT_STAGE_BYTES: usize = 16384;

/// Rows per block of the rolled family: 1 is plain CSR; 4 and 8 reuse each B load across rows, at the price of
/// the zeros a block's union of columns brings in.
pub const ROLLED_ROWS: [u32; 3] = [1, 4, 8];

/// Loads and stores per launch a capped bstream variant (`bstream-a256`, ...) spells out at most. A driver whose
/// compile time grows faster than linearly with a launch's length (Mesa 25.0.7's lavapipe: about its square)
/// compiles the same operator in less time in shorter launches, at the price of reloading the rows of B the
/// launches share (docs/mm.md, "Tuning").
pub const LAUNCH_CAPS: [u32; 2] = [256, 128];

/// Loads and stores per launch of a long twin (`cstream-a4096`, `bstream-msplit-s4-a4096`, ...): any unrolled
/// family in launches this long instead of the adapter's default ([`terms_per_launch`](super::terms_per_launch),
/// 2048 terms on a GPU). The default splits a large operator into launches that each read again the rows of B
/// they share: hex-p6-m132 (343×1029, 7056 non-zeros) goes in 4 launches that read B 2.03 times, where the
/// access floor reads it once and the goal is twice the floor (issue 35); its 1029 rows of B and 343 of C fit
/// one launch of this length. GPUs try the twins where the default splits the operator; their compile law and
/// the tuning budget decide whether the longer compile is afforded (docs/mm.md, "Tuning").
pub const LONG_LAUNCH: u32 = 4096;

/// Loads and stores per launch of a mid twin (`bstream-msplit-s4-a1024`, ...): where [`LONG_LAUNCH`] takes an
/// operator in one launch whose accumulators an invocation cannot keep without starving the multiprocessor, and
/// the default's launches read B many times over, the launches in between. hex-p6-m132 goes in 2 launches that
/// read B 1.38 times (4 at the default, 2.03 times; 1 at 4096): on the H200 its 4-launch kernels ran at 0.86 of
/// copy for their bytes, ×2.05 the copy floor, and its one-launch bstream-msplit-s4 (86 accumulators an
/// invocation) at ×3 (docs/perf.md, 2026-12-04). GPUs try the mid twins beside the long ones; a twin whose
/// kernels are another candidate's (most operators: one launch either way) is not compiled twice.
pub const MID_LAUNCH: u32 = 1024;

/// Invocation rows of bstream-msplit (cstream-ksplit: 2 and 4). At 8, a workgroup of 512 invocations keeps a
/// quarter of s2's accumulators each: hex-p6-m132 in one launch at 44 f32 accumulators an invocation (86 at s4),
/// and the one-launch f64 kernel within the register budget at all (the adapter must launch 512 invocations).
pub const MSPLIT_SPLITS: [u32; 3] = [2, 4, 8];

/// Workgroup memory (KiB) bstream-msplit may stage B through beyond WebGPU's guaranteed 16 (`-smem32`,
/// `-smem48`), where the adapter's limit allows: a workgroup's loads in flight are one chunk, so a kernel that
/// keeps few workgroups on a multiprocessor (many accumulators an invocation) moves at most that many chunks at
/// once. At 16 KiB and one or two such workgroups per multiprocessor, 16–32 KiB in flight is below what an
/// H200's memory needs (its bandwidth times its latency: ~30–40 KiB per multiprocessor).
pub const STAGE_KIB: [u32; 2] = [32, 48];

impl Variant {
    pub fn new(family: Family, vec: u32, split: u32, fold: bool) -> Self {
        Self {
            family,
            vec,
            split: if family.splits() || family.blocks_rows() {
                split
            } else {
                1
            },
            fold: fold && family.folds(),
            launch: 0,
            touch: false,
            stage: 0,
        }
    }

    /// The same variant staging B through `kib` KiB of workgroup memory (`-smem32`): one of [`STAGE_KIB`] for
    /// bstream-msplit, or 0 (16 KiB, the default) for any; `None` otherwise.
    pub fn with_stage(self, kib: u32) -> Option<Self> {
        let ok = kib == 0 || (self.family == Family::BStreamMsplit && STAGE_KIB.contains(&kib));
        ok.then_some(Self { stage: kib, ..self })
    }

    /// Bytes of workgroup memory the kernel stages B through (msplit) or sums partial results in (ksplit).
    pub fn stage_bytes(&self) -> usize {
        if self.stage == 0 {
            DEFAULT_STAGE_BYTES
        } else {
            self.stage as usize * 1024
        }
    }

    /// The same variant reading each row of C before storing it (`-touch`), for a family that
    /// [`touches`](Family::touches); `None` for any other.
    pub fn with_touch(self) -> Option<Self> {
        self.family.touches().then_some(Self {
            touch: true,
            ..self
        })
    }

    /// The same variant with launches capped at `accesses` loads and stores: one of [`LAUNCH_CAPS`] for a family
    /// that [`caps_launches`](Family::caps_launches), [`LONG_LAUNCH`] for any unrolled family, or 0 (the
    /// adapter's default) for any. `None` for any other cap (a name could not say it).
    pub fn with_launch_cap(self, accesses: u32) -> Option<Self> {
        let ok = accesses == 0
            || (self.family.caps_launches() && LAUNCH_CAPS.contains(&accesses))
            || (self.family.unrolled() && [MID_LAUNCH, LONG_LAUNCH].contains(&accesses));
        ok.then_some(Self {
            launch: accesses,
            ..self
        })
    }

    /// The same variant at the adapter's default launch cap.
    pub fn uncapped(self) -> Self {
        Self { launch: 0, ..self }
    }

    /// The next variant of the same family that costs a driver less to compile, or `None`: a narrower vector
    /// first (each column an invocation owns is spelled out per access: a vec2 bstream launch compiled in 22 s
    /// on Mesa 25.0.7 where the same rows at vec1 took 11 s), then at vec1 shorter launches
    /// ([`LAUNCH_CAPS`]). Only bstream has such a chain: the tuner walks it when a bstream candidate's
    /// predicted compile would pass the tuning budget (docs/mm.md).
    pub fn cheaper_compile(self) -> Option<Self> {
        // A `-touch` twin is tried beside its plain variant, not instead of it: it has no chain of its own.
        if self.family != Family::BStream || self.touch {
            return None;
        }
        if self.vec > 1 {
            return Some(Self {
                vec: self.vec / 2,
                ..self
            });
        }
        // A long or mid twin's chain ends at vec1: its shorter launches are the adapter's default, a candidate
        // already.
        if [MID_LAUNCH, LONG_LAUNCH].contains(&self.launch) {
            return None;
        }
        let next = match self.launch {
            0 => LAUNCH_CAPS.first(),
            l => LAUNCH_CAPS
                .iter()
                .position(|&c| c == l)
                .and_then(|i| LAUNCH_CAPS.get(i + 1)),
        };
        next.and_then(|&c| self.with_launch_cap(c))
    }

    /// `cstream`, `cstream-v4-fold`, `bstream-msplit-s4-v2`, `rolled-r4-v4`, ...
    pub fn name(&self) -> String {
        let mut s = self.family.name().to_owned();
        if self.family.splits() {
            s += &format!("-s{}", self.split);
        }
        if self.family.blocks_rows() {
            s += &format!("-r{}", self.split);
        }
        if self.launch > 0 {
            s += &format!("-a{}", self.launch);
        }
        if self.stage > 0 {
            s += &format!("-smem{}", self.stage);
        }
        if self.vec > 1 {
            s += &format!("-v{}", self.vec);
        }
        if self.fold {
            s += "-fold";
        }
        if self.touch {
            s += "-touch";
        }
        s
    }

    /// Parses a [`name`](Self::name); `None` for anything else.
    pub fn parse(name: &str) -> Option<Self> {
        let (family, rest) = Family::ALL
            .iter()
            .rev() // longest names first: `cstream-ksplit` before `cstream`
            .find_map(|f| name.strip_prefix(f.name()).map(|r| (*f, r)))?;
        let (mut vec, mut split, mut fold, mut launch, mut touch, mut stage) =
            (1, 1, false, 0, false, 0);
        for part in rest.split('-').filter(|p| !p.is_empty()) {
            if let Some(k) = part.strip_prefix("smem") {
                stage = k.parse().ok().filter(|k| *k > 0)?;
            } else if part == "fold" && family.folds() {
                fold = true;
            } else if part == "touch" && family.touches() {
                touch = true;
            } else if let Some(v) = part.strip_prefix('v') {
                vec = v.parse().ok().filter(|v| [2, 4].contains(v))?;
            } else if let Some(v) = part.strip_prefix('s') {
                split = v.parse().ok().filter(|_| family.splits())?;
            } else if let Some(v) = part.strip_prefix('r') {
                split = v.parse().ok().filter(|_| family.blocks_rows())?;
            } else if let Some(v) = part.strip_prefix('a') {
                launch = v.parse().ok().filter(|l| *l > 0)?;
            } else {
                return None;
            }
        }
        if family.splits() && !family.split_counts().contains(&split) {
            return None;
        }
        if family.blocks_rows() && !ROLLED_ROWS.contains(&split) {
            return None;
        }
        let mut v = Self::new(family, vec, split, fold)
            .with_launch_cap(launch)?
            .with_stage(stage)?;
        if touch {
            v = v.with_touch()?;
        }
        (v.name() == name).then_some(v)
    }

    /// Workgroup size (x along N, y the invocation rows).
    pub fn workgroup(&self) -> (u32, u32) {
        (WG_X, if self.family.splits() { self.split } else { 1 })
    }

    /// The same variant in launches of [`LONG_LAUNCH`] loads and stores (`-a4096`), for an unrolled family
    /// without a cap of its own; `None` for any other.
    pub fn long_twin(self) -> Option<Self> {
        (self.launch == 0)
            .then(|| self.with_launch_cap(LONG_LAUNCH))
            .flatten()
    }

    /// The same variant in launches of [`MID_LAUNCH`] loads and stores (`-a1024`), for an unrolled family
    /// without a cap of its own; `None` for any other.
    pub fn mid_twin(self) -> Option<Self> {
        (self.launch == 0)
            .then(|| self.with_launch_cap(MID_LAUNCH))
            .flatten()
    }

    /// Every variant the generator has, for one precision, at the adapter's default launch length (the capped
    /// twins: [`with_launch_cap`](Self::with_launch_cap), [`long_twin`](Self::long_twin)).
    pub fn all() -> Vec<Self> {
        let mut out = Vec::new();
        for family in Family::ALL {
            for vec in [1, 2, 4] {
                let splits = if family.splits() {
                    family.split_counts().to_vec()
                } else if family.blocks_rows() {
                    ROLLED_ROWS.to_vec()
                } else {
                    vec![1]
                };
                for split in splits {
                    for fold in if family.folds() {
                        vec![false, true]
                    } else {
                        vec![false]
                    } {
                        let v = Self::new(family, vec, split, fold);
                        out.push(v);
                        out.extend(v.with_touch());
                        // The larger stages at vec1 unfolded: they are for the long launches, whose
                        // compile is the longest of the family at the narrowest vector.
                        if vec == 1 && !fold {
                            out.extend(STAGE_KIB.iter().filter_map(|&k| v.with_stage(k)));
                        }
                    }
                }
            }
        }
        out
    }

    /// Bytes of one column group an invocation owns (`vec` elements).
    pub fn elem_bytes(&self, dtype: DType) -> usize {
        dtype.size() * self.vec as usize
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// β as the kernels specialise it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Beta {
    /// C is never read.
    Zero,
    /// C += A·B.
    One,
    /// C = A·B + β·C.
    Other(f64),
}

impl Beta {
    pub fn of(beta: f64) -> Self {
        if beta == 0.0 {
            Self::Zero
        } else if beta == 1.0 {
            Self::One
        } else {
            Self::Other(beta)
        }
    }
    pub fn value(self) -> f64 {
        match self {
            Self::Zero => 0.0,
            Self::One => 1.0,
            Self::Other(b) => b,
        }
    }
    pub fn reads_c(self) -> bool {
        self != Self::Zero
    }
}

impl std::str::FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s).ok_or_else(|| {
            format!(
                "`{s}` is not a variant: expected one of {}; or one of these with a launch cap after its split \
                 or rows (`bstream-a256`, `bstream-a128`; `-a{MID_LAUNCH}` or `-a{LONG_LAUNCH}` on any but the \
                 rolled family: `cstream-a{LONG_LAUNCH}-v2`, `bstream-msplit-s4-a{MID_LAUNCH}`), bstream-msplit's \
                 before its stage (`bstream-msplit-s8-a{LONG_LAUNCH}-smem48`)",
                Self::all()
                    .iter()
                    .map(|v| v.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }
}

#[cfg(test)]
mod tests;
